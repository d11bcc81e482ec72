#pragma once
// A vector whose front can be dropped in O(1): the storage of a node's tokens and per-page ids. A split copies the
// upper part into the new node (O(upper)) and drops it from the lower node by moving a start offset, so the lower
// part, which can be far longer than the key that caused the split, is never shifted. The dropped elements stay
// in the buffer until the next `assign` or `clear`; that costs no memory beyond the buffer's existing capacity,
// which a node keeps anyway (freed slots are reused with their buffers).

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

namespace unikv::detail::tree {

template <class T>
class TrimVector {
    static_assert(std::is_trivially_copyable_v<T>, "TrimVector holds ids and tokens");

public:
    [[nodiscard]] const T* data() const noexcept { return items_.data() + head_; }
    [[nodiscard]] std::size_t size() const noexcept { return items_.size() - head_; }
    [[nodiscard]] bool empty() const noexcept { return items_.size() == head_; }
    [[nodiscard]] const T* begin() const noexcept { return data(); }
    [[nodiscard]] const T* end() const noexcept { return items_.data() + items_.size(); }
    [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return items_[head_ + i]; }
    [[nodiscard]] std::span<const T> span() const noexcept { return {data(), size()}; }
    operator std::span<const T>() const noexcept { return span(); }  // NOLINT: a view, like vector's

    template <class It>
    void assign(It first, It last) {
        items_.assign(first, last);
        head_ = 0;
    }
    void clear() noexcept {
        items_.clear();
        head_ = 0;
    }
    // Removes the first `n` elements (n <= size()) without moving the others.
    void drop_front(std::size_t n) noexcept {
        head_ += n;
        if (head_ == items_.size()) clear();
    }

private:
    std::vector<T> items_;
    std::size_t head_ = 0;  // elements before it were dropped
};

}  // namespace unikv::detail::tree
