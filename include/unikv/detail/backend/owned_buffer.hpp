#pragma once
/// \file
/// `owned_buffer`: the move-only owner every backend builds its buffers from, so the ownership rules (free
/// once, on destruction or when assigned over; a moved-from buffer is empty) and the region's memory space
/// live in one place.

#include <cstddef>
#include <utility>

#include <unikv/backend/page_copy.hpp>

namespace unikv::detail {

/// Owns `size()` bytes at `data()` in memory space `Space`; `Free(data)` runs once for a non-null pointer.
/// A backend derives its buffers from it and keeps their constructor from a pointer private.
template <MemorySpace Space, void (*Free)(std::byte*) noexcept>
class owned_buffer {
public:
    /// An empty buffer.
    owned_buffer() noexcept = default;
    owned_buffer(owned_buffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    owned_buffer& operator=(owned_buffer&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    owned_buffer(const owned_buffer&) = delete;
    owned_buffer& operator=(const owned_buffer&) = delete;
    ~owned_buffer() { reset(); }

    [[nodiscard]] std::byte* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    /// The whole buffer, typed by its memory space.
    [[nodiscard]] basic_region_ref<Space> region() const noexcept { return {.data = data_, .size = size_}; }

protected:
    owned_buffer(std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}

private:
    void reset() noexcept {
        if (data_ != nullptr) Free(data_);
        data_ = nullptr;
        size_ = 0;
    }
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace unikv::detail
