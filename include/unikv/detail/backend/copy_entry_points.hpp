#pragma once
/// \file
/// The two typed page-copy entry points both backends offer (`copy_pages_async`, `copy_page_slices_async`),
/// written once: they take regions of any pair of memory spaces, erase the space into a `page_copy_request`
/// (which keeps the direction) and hand it to the backend's own `queue_copy(request, stream)`. A backend
/// derives from `copy_entry_points<Backend>` and befriends it. The stream is a deduced parameter that must
/// convert to `Backend::stream_ref` (a stream owner does), because the backend is still incomplete where it names
/// its base.

#include <cstddef>
#include <cstdint>
#include <concepts>
#include <span>

#include <unikv/backend/page_copy.hpp>

namespace unikv::detail {

/// One page-copy call with its memory spaces erased: what validation and the copy engines work on.
struct page_copy_request {
    const char* call;  // the public entry point, named in errors
    raw_region src;
    std::span<const std::int32_t> src_pages;
    raw_region dst;
    std::span<const std::int32_t> dst_pages;
    std::size_t page_bytes;
    EnvelopeSlice slice;
    CopyDirection direction;
};

/// Throws `logic_error` naming the call unless `r` is a valid copy (see `validate_page_copy`).
inline void validate(const page_copy_request& r) {
    validate_page_copy(r.call, r.src, r.src_pages, r.dst, r.dst_pages, r.page_bytes, r.slice);
}

template <class Backend>
class copy_entry_points {
public:
    /// Queues a gather/scatter of whole page envelopes: `dst_pages[i]` of `dst` receives `src_pages[i]` of
    /// `src`, `page_bytes` each, in any order. Any pair of memory spaces. `src` and `dst` may be the same
    /// region (a compaction move) as long as the page sets are disjoint. Throws `logic_error` on bad arguments
    /// (nothing is queued). Asynchronous: returns at once; the copy reads its source when it executes on `s`.
    /// Whether it can synchronize the host is the backend's to say (see its class comment).
    template <MemorySpace S, MemorySpace D, class StreamRef>
    void copy_pages_async(basic_region_ref<S> src, std::span<const std::int32_t> src_pages, basic_region_ref<D> dst,
                          std::span<const std::int32_t> dst_pages, std::size_t page_bytes, const StreamRef& s)
        requires std::convertible_to<const StreamRef&, typename Backend::stream_ref>
    {
        self().queue_copy({"copy_pages_async", raw(src), src_pages, raw(dst), dst_pages, page_bytes,
                           EnvelopeSlice::whole(page_bytes), direction_of(S, D)},
                          s);
    }

    /// Like `copy_pages_async`, but copies only `slice` of each envelope (for example one layer, so that
    /// layer i can be computed while layer i+1 loads). Bytes outside the slice are not touched.
    template <MemorySpace S, MemorySpace D, class StreamRef>
    void copy_page_slices_async(basic_region_ref<S> src, std::span<const std::int32_t> src_pages,
                                basic_region_ref<D> dst, std::span<const std::int32_t> dst_pages,
                                std::size_t page_bytes, EnvelopeSlice slice, const StreamRef& s)
        requires std::convertible_to<const StreamRef&, typename Backend::stream_ref>
    {
        self().queue_copy({"copy_page_slices_async", raw(src), src_pages, raw(dst), dst_pages, page_bytes, slice,
                           direction_of(S, D)},
                          s);
    }

private:
    Backend& self() noexcept { return static_cast<Backend&>(*this); }
};

}  // namespace unikv::detail
