#pragma once
/// \file
/// `fixed_stack`: a stack of int32 ids with its capacity allocated once, so pushes and pops on the hot paths
/// (holes, free virtual ids) are a store and an increment, with no growth check.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <unikv/error.hpp>

namespace unikv::detail {

class fixed_stack {
public:
    explicit fixed_stack(std::size_t capacity) : data_(std::make_unique<std::int32_t[]>(capacity)), capacity_(capacity) {}
    fixed_stack(fixed_stack&&) noexcept = default;
    fixed_stack& operator=(fixed_stack&&) noexcept = default;

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    [[nodiscard]] std::int32_t back() const noexcept { return data_[size_ - 1]; }
    [[nodiscard]] std::int32_t operator[](std::size_t i) const noexcept { return data_[i]; }
    void push(std::int32_t v) noexcept {
        UNIKV_ASSERT(size_ < capacity_);
        data_[size_++] = v;
    }
    std::int32_t pop() noexcept {
        UNIKV_ASSERT(size_ > 0);
        return data_[--size_];
    }
    void clear() noexcept { size_ = 0; }
    /// Removes the first `n` entries, keeping the order of the rest. O(size).
    void erase_prefix(std::size_t n) noexcept {
        std::copy(data_.get() + n, data_.get() + size_, data_.get());
        size_ -= n;
    }
    [[nodiscard]] std::int32_t* begin() noexcept { return data_.get(); }
    [[nodiscard]] std::int32_t* end() noexcept { return data_.get() + size_; }
    [[nodiscard]] const std::int32_t* begin() const noexcept { return data_.get(); }
    [[nodiscard]] const std::int32_t* end() const noexcept { return data_.get() + size_; }
    [[nodiscard]] std::span<const std::int32_t> view() const noexcept { return {data_.get(), size_}; }

private:
    std::unique_ptr<std::int32_t[]> data_;
    std::size_t capacity_;
    std::size_t size_ = 0;
};

}  // namespace unikv::detail
