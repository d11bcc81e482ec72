#pragma once
/// \file
/// Backend-independent pieces of page-envelope copies: the region view, the envelope slice descriptor,
/// argument validation shared by every backend, and the host copy loop used by `HostBackend`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include <unikv/config.hpp>
#include <unikv/error.hpp>

namespace unikv {

/// A non-owning view of a contiguous byte region (device arena, pinned host pool, or a slice of one).
/// Trivially copyable, so kernels take it by value.
struct region_ref {
    std::byte* data = nullptr;
    std::size_t size = 0;
};

/// Which bytes of each page envelope a copy moves: `count` runs of `bytes` bytes, the first at `offset`,
/// each next one `stride` bytes further. The default (`bytes == 0`) means the whole envelope.
/// A layer of a token-major envelope `[K0|V0|K1|V1|...]` per token is
/// `{.offset = layer_offset, .bytes = layer_bytes, .stride = entry_bytes, .count = page_size}`.
struct EnvelopeSlice {
    std::size_t offset = 0;
    std::size_t bytes = 0;
    std::size_t stride = 0;
    std::size_t count = 1;

    /// The slice covering the whole envelope of `page_bytes`.
    [[nodiscard]] static constexpr EnvelopeSlice whole(std::size_t page_bytes) noexcept {
        return {.offset = 0, .bytes = page_bytes, .stride = page_bytes, .count = 1};
    }
    [[nodiscard]] constexpr bool is_whole() const noexcept { return bytes == 0; }
};

namespace detail {

/// Throws `logic_error` unless every page index lies inside `r` (whole envelopes of `page_bytes`). O(n).
inline void validate_pages_in_region(region_ref r, std::span<const std::int32_t> pages, std::size_t page_bytes,
                                     const char* side) {
    UNIKV_EXPECTS(page_bytes > 0, "page_bytes must be positive");
    const std::size_t limit = r.size / page_bytes;
    for (std::int32_t p : pages) {
        UNIKV_EXPECTS(p >= 0 && static_cast<std::size_t>(p) < limit, side, " page ", p,
                      " is outside its region of ", limit, " pages");
    }
}

/// Checks one page-copy request; throws `unikv::logic_error` naming the problem, so nothing is queued.
/// Rules: equal page counts; a positive envelope size; the slice inside the envelope; every page index inside
/// its region; destination pages pairwise distinct; and, when the two regions share bytes (a compaction
/// inside one arena), no destination page overlapping any source page.
/// Complexity: O(n) without overlap between the regions, O(n log n) with it (sorts a scratch copy).
inline void validate_page_copy(region_ref src, std::span<const std::int32_t> src_pages, region_ref dst,
                               std::span<const std::int32_t> dst_pages, std::size_t page_bytes,
                               EnvelopeSlice slice) {
    UNIKV_EXPECTS(src_pages.size() == dst_pages.size(), "copy_pages_async: ", src_pages.size(),
                  " source pages but ", dst_pages.size(), " destination pages");
    UNIKV_EXPECTS(page_bytes > 0, "copy_pages_async: page_bytes must be positive");
    if (!slice.is_whole()) {
        UNIKV_EXPECTS(slice.count >= 1 && (slice.count == 1 || slice.stride >= slice.bytes) &&
                          slice.offset + (slice.count - 1) * slice.stride + slice.bytes <= page_bytes,
                      "copy_page_slices_async: slice {offset ", slice.offset, ", bytes ", slice.bytes,
                      ", stride ", slice.stride, ", count ", slice.count, "} does not fit an envelope of ",
                      page_bytes, " bytes");
    }
    validate_pages_in_region(src, src_pages, page_bytes, "source");
    validate_pages_in_region(dst, dst_pages, page_bytes, "destination");

    // Byte intervals are compared in the address space, so two views of one arena with different bases work.
    using interval = std::pair<std::uintptr_t, std::uintptr_t>;
    const auto intervals = [page_bytes](region_ref r, std::span<const std::int32_t> pages) {
        std::vector<interval> out;
        out.reserve(pages.size());
        const auto base = reinterpret_cast<std::uintptr_t>(r.data);
        for (std::int32_t p : pages) {
            const std::uintptr_t lo = base + static_cast<std::size_t>(p) * page_bytes;
            out.emplace_back(lo, lo + page_bytes);
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    const std::vector<interval> d = intervals(dst, dst_pages);
    for (std::size_t i = 1; i < d.size(); ++i) {
        UNIKV_EXPECTS(d[i].first >= d[i - 1].second,
                      "copy_pages_async: a destination page appears twice or overlaps another destination page");
    }
    const auto src_lo = reinterpret_cast<std::uintptr_t>(src.data);
    const auto dst_lo = reinterpret_cast<std::uintptr_t>(dst.data);
    const bool regions_share_bytes = src_lo < dst_lo + dst.size && dst_lo < src_lo + src.size;
    if (!regions_share_bytes) return;
    const std::vector<interval> s = intervals(src, src_pages);
    for (std::size_t i = 0, j = 0; i < s.size() && j < d.size();) {
        UNIKV_EXPECTS(s[i].second <= d[j].first || d[j].second <= s[i].first,
                      "copy_pages_async: source and destination page sets overlap; a move inside one region "
                      "needs disjoint page sets");
        if (s[i].second <= d[j].second) ++i; else ++j;
    }
}

/// Copies the selected bytes of each envelope `src_pages[i]` to `dst_pages[i]` with memcpy, merging runs of
/// consecutive pages (both sides ascending by one) into one call for whole-envelope copies.
/// Reads the source when called. Complexity: O(n) calls to memcpy at most, O(bytes) work.
inline void copy_pages_host(region_ref src, std::span<const std::int32_t> src_pages, region_ref dst,
                            std::span<const std::int32_t> dst_pages, std::size_t page_bytes,
                            EnvelopeSlice slice) noexcept {
    const std::size_t n = src_pages.size();
    if (slice.is_whole()) {
        for (std::size_t i = 0; i < n;) {
            std::size_t run = 1;
            while (i + run < n && src_pages[i + run] == src_pages[i] + static_cast<std::int32_t>(run) &&
                   dst_pages[i + run] == dst_pages[i] + static_cast<std::int32_t>(run)) {
                ++run;
            }
            std::memcpy(dst.data + static_cast<std::size_t>(dst_pages[i]) * page_bytes,
                        src.data + static_cast<std::size_t>(src_pages[i]) * page_bytes, run * page_bytes);
            i += run;
        }
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        std::byte* d = dst.data + static_cast<std::size_t>(dst_pages[i]) * page_bytes + slice.offset;
        const std::byte* s = src.data + static_cast<std::size_t>(src_pages[i]) * page_bytes + slice.offset;
        for (std::size_t r = 0; r < slice.count; ++r) {
            std::memcpy(d + r * slice.stride, s + r * slice.stride, slice.bytes);
        }
    }
}

/// Sets every byte of the listed envelopes to `value`. Complexity: O(bytes).
inline void fill_pages_host(region_ref region, std::span<const std::int32_t> pages, std::size_t page_bytes,
                            std::byte value) noexcept {
    for (std::int32_t p : pages) {
        std::memset(region.data + static_cast<std::size_t>(p) * page_bytes, static_cast<int>(value), page_bytes);
    }
}

}  // namespace detail
}  // namespace unikv
