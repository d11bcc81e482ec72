#pragma once
/// \file
/// Backend-independent pieces of page-envelope copies: the region views (typed by memory space), the
/// envelope slice descriptor, argument validation shared by every backend, and the host copy loop used by
/// `HostBackend`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <unikv/config.hpp>
#include <unikv/error.hpp>

namespace unikv {

/// Where the bytes of a region live.
enum class MemorySpace : std::uint8_t {
    device,       ///< device memory: the arena and the device page tables (host memory on `HostBackend`)
    pinned_host,  ///< pinned host memory: host pools and staging slabs
};

/// A non-owning view of a contiguous byte region in memory space `Space` (the device arena, a pinned host
/// pool, or a slice of one). Regions of different spaces are different types: copies take any pair, while
/// everything that expects the arena takes a `device_region_ref` only, so a pinned pool cannot stand for it.
/// Trivially copyable, so kernels take it by value.
template <MemorySpace Space>
struct basic_region_ref {
    static constexpr MemorySpace space = Space;
    std::byte* data = nullptr;
    std::size_t size = 0;
};

/// Which memory spaces a copy goes between; a CUDA copy engine may be chosen per direction.
enum class CopyDirection : std::uint8_t {
    device_to_device,  ///< arena moves (compaction)
    host_to_device,    ///< load-backs from a pinned host pool
    device_to_host,    ///< backups (write-through, write-back, retraction)
    host_to_host,      ///< between pinned host regions
};

/// The direction of a copy from space `src` to space `dst`.
[[nodiscard]] constexpr CopyDirection direction_of(MemorySpace src, MemorySpace dst) noexcept {
    if (src == MemorySpace::device) {
        return dst == MemorySpace::device ? CopyDirection::device_to_device : CopyDirection::device_to_host;
    }
    return dst == MemorySpace::device ? CopyDirection::host_to_device : CopyDirection::host_to_host;
}

/// A region of device memory (what `allocate_device` buffers give, and what the allocator's arena is).
using device_region_ref = basic_region_ref<MemorySpace::device>;
/// A region of pinned host memory (what `allocate_pinned` buffers give).
using pinned_region_ref = basic_region_ref<MemorySpace::pinned_host>;

/// Which bytes of each page envelope a copy moves: `count` runs of `bytes` bytes (`bytes > 0`), the first at
/// `offset`, each next one `stride` bytes further. A layer of a token-major envelope `[K0|V0|K1|V1|...]` per
/// token is `{.offset = layer_offset, .bytes = layer_bytes, .stride = entry_bytes, .count = page_size}`.
struct EnvelopeSlice {
    std::size_t offset = 0;
    std::size_t bytes = 0;
    std::size_t stride = 0;
    std::size_t count = 1;

    /// The slice covering the whole envelope of `page_bytes`.
    [[nodiscard]] static constexpr EnvelopeSlice whole(std::size_t page_bytes) noexcept {
        return {.offset = 0, .bytes = page_bytes, .stride = page_bytes, .count = 1};
    }
    [[nodiscard]] constexpr bool is_whole(std::size_t page_bytes) const noexcept {
        return offset == 0 && bytes == page_bytes && count == 1;
    }
};

namespace detail {

/// A region with its memory space erased: what validation and the host copy loop work on.
struct raw_region {
    std::byte* data = nullptr;
    std::size_t size = 0;
};

/// The bytes of `r`, whatever its space.
template <MemorySpace S>
[[nodiscard]] constexpr raw_region raw(basic_region_ref<S> r) noexcept {
    return {r.data, r.size};
}

/// Throws `logic_error` (naming `call`) unless every page index lies inside `r`, whole envelopes of
/// `page_bytes`. Returns the largest index listed, or -1 for an empty list. O(n).
inline std::int32_t validate_pages_in_region(const char* call, raw_region r, std::span<const std::int32_t> pages,
                                             std::size_t page_bytes, const char* side) {
    UNIKV_EXPECTS(page_bytes > 0, call, ": page_bytes must be positive");
    const std::size_t limit = r.size / page_bytes;
    std::int32_t largest = -1;
    for (std::int32_t p : pages) {
        UNIKV_EXPECTS(p >= 0 && static_cast<std::size_t>(p) < limit, call, ": ", side, " page ", p,
                      " is outside its region of ", limit, " pages");
        largest = std::max(largest, p);
    }
    return largest;
}

/// True when no page of `marked` repeats and no page of `probe` is one of `marked`; every index is at most
/// `largest`. Uses a bitmap when the index range is dense relative to the lists, a sorted copy otherwise.
/// O(n + largest/64) or O(n log n).
inline bool page_sets_disjoint(std::span<const std::int32_t> marked, std::span<const std::int32_t> probe,
                               std::int32_t largest) {
    if (largest < 0) return true;
    const std::size_t words = static_cast<std::size_t>(largest) / 64 + 1;
    if (words <= 4 * (marked.size() + probe.size()) + 64) {
        std::vector<std::uint64_t> bits(words, 0);
        for (std::int32_t p : marked) {
            std::uint64_t& word = bits[static_cast<std::size_t>(p) / 64];
            const std::uint64_t bit = std::uint64_t{1} << (p % 64);
            if (word & bit) return false;
            word |= bit;
        }
        return std::none_of(probe.begin(), probe.end(), [&bits](std::int32_t p) {
            return (bits[static_cast<std::size_t>(p) / 64] >> (p % 64)) & 1;
        });
    }
    std::vector<std::int32_t> m(marked.begin(), marked.end());
    std::sort(m.begin(), m.end());
    if (std::adjacent_find(m.begin(), m.end()) != m.end()) return false;
    return std::none_of(probe.begin(), probe.end(), [&m](std::int32_t p) { return std::binary_search(m.begin(), m.end(), p); });
}

/// Checks one page-copy request; throws `unikv::logic_error` naming `call` and the problem, so nothing is
/// queued. Rules: equal page counts; a positive envelope size; a non-empty slice inside the envelope; every
/// page index inside its region; destination pages pairwise distinct; and, when the two regions share bytes
/// (a compaction inside one arena), no destination page overlapping any source page.
/// Complexity: O(n) for dense page lists, O(n log n) otherwise.
inline void validate_page_copy(const char* call, raw_region src, std::span<const std::int32_t> src_pages,
                               raw_region dst, std::span<const std::int32_t> dst_pages, std::size_t page_bytes,
                               EnvelopeSlice slice) {
    UNIKV_EXPECTS(src_pages.size() == dst_pages.size(), call, ": ", src_pages.size(), " source pages but ",
                  dst_pages.size(), " destination pages");
    UNIKV_EXPECTS(page_bytes > 0, call, ": page_bytes must be positive");
    // Written so that no term can wrap around: each step bounds the next one.
    const bool slice_fits = slice.bytes > 0 && slice.count >= 1 && slice.offset <= page_bytes &&
                            slice.bytes <= page_bytes - slice.offset &&
                            (slice.count == 1 || (slice.stride >= slice.bytes &&
                                                  slice.count - 1 <= (page_bytes - slice.offset - slice.bytes) / slice.stride));
    UNIKV_EXPECTS(slice_fits, call, ": slice {offset ", slice.offset, ", bytes ", slice.bytes, ", stride ",
                  slice.stride, ", count ", slice.count, "} is empty or does not fit an envelope of ", page_bytes,
                  " bytes");
    const std::int32_t largest_src = validate_pages_in_region(call, src, src_pages, page_bytes, "source");
    const std::int32_t largest_dst = validate_pages_in_region(call, dst, dst_pages, page_bytes, "destination");

    const auto src_lo = reinterpret_cast<std::uintptr_t>(src.data);
    const auto dst_lo = reinterpret_cast<std::uintptr_t>(dst.data);
    const bool regions_share_bytes = src_lo < dst_lo + dst.size && dst_lo < src_lo + src.size;
    if (!regions_share_bytes || src_lo == dst_lo) {
        const std::span<const std::int32_t> probe = regions_share_bytes ? src_pages : std::span<const std::int32_t>{};
        UNIKV_EXPECTS(page_sets_disjoint(dst_pages, probe, std::max(largest_src, largest_dst)), call,
                      ": a destination page appears twice, or a move inside one region has overlapping source "
                      "and destination page sets");
        return;
    }
    // Two different views of one allocation: compare byte intervals in the address space.
    using interval = std::pair<std::uintptr_t, std::uintptr_t>;
    const auto intervals = [page_bytes](std::uintptr_t base, std::span<const std::int32_t> pages) {
        std::vector<interval> out;
        out.reserve(pages.size());
        for (std::int32_t p : pages) {
            const std::uintptr_t lo = base + static_cast<std::size_t>(p) * page_bytes;
            out.emplace_back(lo, lo + page_bytes);
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    const std::vector<interval> d = intervals(dst_lo, dst_pages);
    for (std::size_t i = 1; i < d.size(); ++i) {
        UNIKV_EXPECTS(d[i].first >= d[i - 1].second, call,
                      ": a destination page appears twice or overlaps another destination page");
    }
    const std::vector<interval> s = intervals(src_lo, src_pages);
    for (std::size_t i = 0, j = 0; i < s.size() && j < d.size();) {
        UNIKV_EXPECTS(s[i].second <= d[j].first || d[j].second <= s[i].first, call,
                      ": source and destination page sets overlap; a move inside one region needs disjoint "
                      "page sets");
        if (s[i].second <= d[j].second) ++i; else ++j;
    }
}

/// Copies `bytes` with non-temporal 16-byte stores when both ends are 16-byte aligned: large scattered page
/// copies then skip the read-for-ownership of each destination line, as glibc's memcpy does for big blocks.
/// Falls back to memcpy elsewhere. The caller issues the store fence once per batch (`copy_pages_host` does).
inline void copy_streaming(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
#if defined(__SSE2__)
    if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0) {
        // One cache line per step, prefetching a fixed distance ahead: the hardware streamer restarts at
        // every 4 KiB boundary, which a scattered envelope copy crosses often.
        constexpr std::size_t line = 64, ahead = 1024;
        const std::size_t lines = bytes / line;
        auto* d = reinterpret_cast<__m128i*>(dst);
        const auto* s = reinterpret_cast<const __m128i*>(src);
        for (std::size_t i = 0; i < lines; ++i, d += 4, s += 4) {
            if ((i + 1) * line + ahead <= bytes) __builtin_prefetch(reinterpret_cast<const std::byte*>(s) + ahead);
            const __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1), c = _mm_load_si128(s + 2),
                          e = _mm_load_si128(s + 3);
            _mm_stream_si128(d, a);
            _mm_stream_si128(d + 1, b);
            _mm_stream_si128(d + 2, c);
            _mm_stream_si128(d + 3, e);
        }
        std::memcpy(dst + lines * line, src + lines * line, bytes % line);
        return;
    }
#endif
    std::memcpy(dst, src, bytes);
}

/// Bytes from which a stream's copies bypass the cache (they would only evict it): half a typical server L3.
/// A smaller burst stays cached, where the next kernel reads it (an urgent flush of 8 MiB ran at 0.72x memcpy
/// streamed and 0.80-0.85x cached on the CI machine kind, 32 MiB L3). The host engine counts a stream's burst
/// (the copies it executes back to back plus those queued behind them), not one copy: a backup of many small
/// nodes is as large a burst as one merged load.
inline constexpr std::size_t streaming_copy_threshold = std::size_t{16} << 20;

/// How a host copy stores its destination bytes.
enum class CopyStores : std::uint8_t {
    cached,     ///< ordinary stores (memcpy): the destination lands in the cache
    streaming,  ///< non-temporal stores where aligned, then one store fence: no read-for-ownership, no eviction
};

/// Source bytes a slice copy prefetches ahead of the row it copies: the hardware streamer does not follow
/// rows a stride apart across 4 KiB boundaries (a 4-layer slice read 0.30-0.45x memcpy without, 0.55-0.70x
/// with, on a 2-core VM of the CI kind).
inline constexpr std::size_t slice_prefetch_bytes = 4096;

/// Copies the selected bytes of each envelope `src_pages[i]` to `dst_pages[i]`, with `stores`. Whole-envelope
/// copies merge runs of consecutive pages (both sides ascending by one) into one copy; slice copies prefetch
/// the rows `slice_prefetch_bytes` ahead, across pages. Reads the source when called.
/// Complexity: O(n) copy calls for whole envelopes, O(n * slice.count) for slices; O(bytes) work.
inline void copy_pages_host(raw_region src, std::span<const std::int32_t> src_pages, raw_region dst,
                            std::span<const std::int32_t> dst_pages, std::size_t page_bytes, EnvelopeSlice slice,
                            CopyStores stores) noexcept {
    const std::size_t n = src_pages.size();
    const bool streaming = stores == CopyStores::streaming;
    const auto copy = [streaming](std::byte* d, const std::byte* s, std::size_t bytes) {
        if (streaming) copy_streaming(d, s, bytes); else std::memcpy(d, s, bytes);
    };
    const auto source = [&](std::size_t i) { return src.data + static_cast<std::size_t>(src_pages[i]) * page_bytes; };
    if (slice.is_whole(page_bytes)) {
        for (std::size_t i = 0; i < n;) {
            std::size_t run = 1;
            while (i + run < n && src_pages[i + run] == src_pages[i] + static_cast<std::int32_t>(run) &&
                   dst_pages[i + run] == dst_pages[i] + static_cast<std::int32_t>(run)) {
                ++run;
            }
            std::byte* d = dst.data + static_cast<std::size_t>(dst_pages[i]) * page_bytes;
            if (i + run < n) {  // start the next scattered source early; hardware prefetch restarts per page
                const std::byte* next = source(i + run);
                for (std::size_t line = 0; line < std::min<std::size_t>(page_bytes, 1024); line += 64)
                    __builtin_prefetch(next + line);
            }
            copy(d, source(i), run * page_bytes);
            i += run;
        }
    } else {
        // Row k of the flattened (page, row) sequence prefetches row k + ahead, in this page or a later one.
        const std::size_t ahead = std::max<std::size_t>(1, slice_prefetch_bytes / slice.bytes);
        const std::size_t lines = std::min<std::size_t>(slice.bytes, 1024);
        std::size_t pf_page = 0, pf_row = 0;
        const auto advance = [&slice](std::size_t& page, std::size_t& row) {
            if (++row == slice.count) {
                row = 0;
                ++page;
            }
        };
        for (std::size_t k = 0; k < ahead && pf_page < n; ++k) advance(pf_page, pf_row);
        for (std::size_t i = 0; i < n; ++i) {
            std::byte* d = dst.data + static_cast<std::size_t>(dst_pages[i]) * page_bytes + slice.offset;
            const std::byte* s = source(i) + slice.offset;
            for (std::size_t r = 0; r < slice.count; ++r) {
                if (pf_page < n) {
                    const std::byte* p = source(pf_page) + slice.offset + pf_row * slice.stride;
                    for (std::size_t line = 0; line < lines; line += 64) __builtin_prefetch(p + line);
                    advance(pf_page, pf_row);
                }
                copy(d + r * slice.stride, s + r * slice.stride, slice.bytes);
            }
        }
    }
#if defined(__SSE2__)
    if (streaming) _mm_sfence();
#endif
}

/// Sets every byte of the listed envelopes to `value`. Complexity: O(bytes).
inline void fill_pages_host(raw_region region, std::span<const std::int32_t> pages, std::size_t page_bytes,
                            std::byte value) noexcept {
    for (std::int32_t p : pages) {
        std::memset(region.data + static_cast<std::size_t>(p) * page_bytes, static_cast<int>(value), page_bytes);
    }
}

}  // namespace detail
}  // namespace unikv
