#pragma once
/// \file
/// The translation gathers: virtual page and token ids to physical ones through one v2p table. Free
/// functions over a raw table view, so the host tables, a device mirror read back on the host, and CUDA
/// kernels all translate with one definition (`TranslationTable::physical_token` is host/device).
///
/// The table's last entry is the -1 sentinel and entry 0 is the sink: an id that is negative, out of range
/// or unbound is clamped to the sentinel, reads -1, and translates to id 0 (the sink), never out of bounds.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include <unikv/config.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv {

/// A read-only view of one v2p table plus its page geometry; trivially copyable, so kernels take it by value.
struct TranslationTable {
    const std::int32_t* v2p = nullptr;  ///< `sentinel + 1` entries: the sink at 0, the -1 sentinel last
    std::uint32_t sentinel = 0;         ///< index of the trailing -1 entry (the number of virtual pages)
    std::uint32_t page_size = 1;        ///< tokens per page
    std::int32_t page_shift = 0;        ///< log2(page_size) when it is a power of two, else -1

    /// The v2p entry of virtual page `v` as stored: a page, or -1 when `v` is unbound, negative (it wraps
    /// above the sentinel) or out of range. O(1).
    [[nodiscard]] UNIKV_HOST_DEVICE std::int32_t entry(std::uint32_t v) const noexcept {
        return v2p[v < sentinel ? v : sentinel];
    }

    /// The physical page of virtual page `v`; 0 (the sink) when `v` is negative, out of range or unbound. O(1).
    [[nodiscard]] UNIKV_HOST_DEVICE std::int32_t physical_page(std::int32_t v) const noexcept {
        const std::int32_t p = entry(static_cast<std::uint32_t>(v));
        return p < 0 ? 0 : p;
    }

    /// `v2p[t / page_size] * page_size + t % page_size`, or 0 (the sink) for an unmapped token. O(1): a shift
    /// for power-of-two pages, a division otherwise. Negative ids reach the sentinel as long as every token id
    /// fits int32 (`sentinel * page_size <= 2^31`, which `PageTable` checks).
    [[nodiscard]] UNIKV_HOST_DEVICE std::int32_t physical_token(std::int32_t t) const noexcept {
        const auto u = static_cast<std::uint32_t>(t);
        const std::uint32_t v = page_shift >= 0 ? u >> page_shift : u / page_size;
        const std::int32_t p = entry(v);
        return p < 0 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(p) * page_size + (u - v * page_size));
    }
};

/// log2(`page_size`) when it is a power of two, else -1.
[[nodiscard]] constexpr std::int32_t page_shift_of(std::int32_t page_size) noexcept {
    if (page_size <= 0 || (page_size & (page_size - 1)) != 0) return -1;
    std::int32_t s = 0;
    while ((1 << s) < page_size) ++s;
    return s;
}

namespace detail {

// Token ids mostly come as runs of a page (a request's rows), so translation works on groups of page_size
// ids: one lookup per group, `id + delta` for its members, and a check folded into the same pass that every
// member was in the group's first page. The check is accumulated over a block of groups and tested once;
// a block that fails (ids across pages, negative ids, a ragged start, and for power-of-two pages an unbound
// page) is redone id by id. Power-of-two pages of 4 to 256 ids run in GCC/Clang vector lanes of 16 bytes (SSE2,
// NEON), and from 8 ids in 32-byte lanes on x86-64 CPUs with AVX2, chosen at run time (no build flag).
inline constexpr std::size_t translate_block_groups = 64;

// The lane loops read and write ids as their int32 representation.
static_assert(sizeof(VirtualToken) == sizeof(std::uint32_t) && std::is_trivially_copyable_v<VirtualToken>);
static_assert(sizeof(PhysicalToken) == sizeof(std::uint32_t) && std::is_trivially_copyable_v<PhysicalToken>);

#if UNIKV_HAS_VECTOR_TYPES
using translate_lanes_16 = std::uint32_t __attribute__((vector_size(16)));
#endif
#if UNIKV_HAS_AVX2_DISPATCH
using translate_lanes_32 = std::uint32_t __attribute__((vector_size(32)));
#endif

#if UNIKV_HAS_VECTOR_TYPES
template <std::uint32_t PageSize, class Lanes>
[[gnu::always_inline]] inline bool translate_block_pow2(const TranslationTable& table, const std::byte* in,
                                                        std::byte* out, std::size_t groups) noexcept {
    constexpr std::uint32_t mask = PageSize - 1;
    constexpr std::size_t group_bytes = PageSize * sizeof(std::uint32_t);
    static_assert((PageSize & mask) == 0 && group_bytes % sizeof(Lanes) == 0);
    Lanes outside{};            // bits above the page offset where a member left its group's page
    std::int32_t unmapped = 0;  // negative once a group's page was unbound
    for (std::size_t g = 0; g < groups; ++g, in += group_bytes, out += group_bytes) {
        std::uint32_t first;
        std::memcpy(&first, in, sizeof first);
        const std::uint32_t base = first & ~mask;
        const std::int32_t p = table.entry(first / PageSize);
        unmapped |= p;
        const std::uint32_t delta = static_cast<std::uint32_t>(p) * PageSize - base;
        for (std::size_t k = 0; k < group_bytes; k += sizeof(Lanes)) {
            Lanes x;
            std::memcpy(&x, in + k, sizeof x);
            outside |= x ^ base;
            x += delta;
            std::memcpy(out + k, &x, sizeof x);
        }
    }
    std::uint32_t any = 0;
    for (std::size_t lane = 0; lane < sizeof(Lanes) / sizeof(std::uint32_t); ++lane) any |= outside[lane];
    return unmapped >= 0 && (any & ~mask) == 0;
}

template <std::uint32_t PageSize>
bool translate_block_pow2_16(const TranslationTable& table, const std::byte* in, std::byte* out,
                             std::size_t groups) noexcept {
    return translate_block_pow2<PageSize, translate_lanes_16>(table, in, out, groups);
}

#if UNIKV_HAS_AVX2_DISPATCH
template <std::uint32_t PageSize>
__attribute__((target("avx2"))) bool translate_block_pow2_32(const TranslationTable& table, const std::byte* in,
                                                              std::byte* out, std::size_t groups) noexcept {
    return translate_block_pow2<PageSize, translate_lanes_32>(table, in, out, groups);
}
#endif
// Page size 1: a translation is one table read per id. Rows of consecutive virtual ids (a request's tokens
// allocated together) read consecutive table entries, so a block whose ids are `first, first + 1, ...` copies
// `v2p[first, first + n)` lane by lane (unbound entries to 0); any other block fails at its first check.
template <class Lanes>
[[gnu::always_inline]] inline bool translate_block_unit_run(const TranslationTable& table, const std::byte* in,
                                                            std::byte* out, std::size_t n) noexcept {
    constexpr std::size_t lane_ids = sizeof(Lanes) / sizeof(std::uint32_t);
    std::uint32_t first, last;
    std::memcpy(&first, in, sizeof first);
    std::memcpy(&last, in + (n - 1) * sizeof last, sizeof last);
    // Unsigned: a descending, wrapped or negative run fails here, and `last < sentinel` bounds every read.
    if (n % lane_ids != 0 || last - first != n - 1 || last >= table.sentinel) return false;
    Lanes expected;
    for (std::size_t k = 0; k < lane_ids; ++k) expected[k] = first + static_cast<std::uint32_t>(k);
    Lanes outside{};
    for (std::size_t k = 0; k < n * sizeof(std::uint32_t); k += sizeof(Lanes)) {
        Lanes x;
        std::memcpy(&x, in + k, sizeof x);
        outside |= x ^ expected;
        expected += static_cast<std::uint32_t>(lane_ids);
    }
    std::uint32_t any = 0;
    for (std::size_t lane = 0; lane < lane_ids; ++lane) any |= outside[lane];
    if (any != 0) return false;
    const auto* entries = reinterpret_cast<const std::byte*>(table.v2p + first);
    for (std::size_t k = 0; k < n * sizeof(std::uint32_t); k += sizeof(Lanes)) {
        Lanes p;
        std::memcpy(&p, entries + k, sizeof p);
        p &= (p >> 31) - 1u;  // -1 (unbound) becomes 0, the sink
        std::memcpy(out + k, &p, sizeof p);
    }
    return true;
}

inline bool translate_block_unit_run_16(const TranslationTable& table, const std::byte* in, std::byte* out,
                                        std::size_t n) noexcept {
    return translate_block_unit_run<translate_lanes_16>(table, in, out, n);
}

#if UNIKV_HAS_AVX2_DISPATCH
__attribute__((target("avx2"))) inline bool translate_block_unit_run_32(const TranslationTable& table, const std::byte* in,
                                                                         std::byte* out, std::size_t n) noexcept {
    return translate_block_unit_run<translate_lanes_32>(table, in, out, n);
}
#endif
#endif  // UNIKV_HAS_VECTOR_TYPES

inline bool translate_block_any(const TranslationTable& table, const std::byte* in, std::byte* out,
                                std::size_t groups) noexcept {
    const std::uint32_t ps = table.page_size;
    std::uint32_t outside = 0;  // nonzero once a member left its group's page
    for (std::size_t g = 0; g < groups; ++g, in += ps * sizeof(std::uint32_t), out += ps * sizeof(std::uint32_t)) {
        std::uint32_t first;
        std::memcpy(&first, in, sizeof first);
        const std::uint32_t base = first - first % ps;
        const std::int32_t p = table.entry(first / ps);
        const std::uint32_t keep = p < 0 ? 0u : ~0u;
        const std::uint32_t delta = static_cast<std::uint32_t>(p) * ps - base;
        for (std::uint32_t k = 0; k < ps; ++k) {
            std::uint32_t x;
            std::memcpy(&x, in + k * sizeof x, sizeof x);
            outside |= static_cast<std::uint32_t>(x - base >= ps);
            x = (x + delta) & keep;
            std::memcpy(out + k * sizeof x, &x, sizeof x);
        }
    }
    return outside == 0;
}

template <class Block>
void translate_tokens_in_blocks(const TranslationTable& table, std::span<const VirtualToken> in,
                                std::span<PhysicalToken> out, Block block) noexcept {
    const std::size_t ps = table.page_size;
    const std::size_t block_tokens = translate_block_groups * ps;
    std::size_t i = 0;
    for (; in.size() - i >= ps; i += block_tokens) {
        const std::size_t groups = (in.size() - i) / ps < translate_block_groups ? (in.size() - i) / ps
                                                                                  : translate_block_groups;
        if (!block(table, reinterpret_cast<const std::byte*>(in.data() + i), reinterpret_cast<std::byte*>(out.data() + i),
                   groups)) {
            for (std::size_t k = i; k < i + groups * ps; ++k) out[k] = PhysicalToken{table.physical_token(in[k].value())};
        }
        if (groups < translate_block_groups) {
            i += groups * ps;
            break;
        }
    }
    for (; i < in.size(); ++i) out[i] = PhysicalToken{table.physical_token(in[i].value())};
}

template <std::uint32_t PageSize>
void translate_tokens_pow2(const TranslationTable& table, std::span<const VirtualToken> in,
                           std::span<PhysicalToken> out) noexcept {
#if UNIKV_HAS_AVX2_DISPATCH
    if constexpr (PageSize >= 8) {  // a group fills whole 32-byte lanes
        if (__builtin_cpu_supports("avx2")) return translate_tokens_in_blocks(table, in, out, translate_block_pow2_32<PageSize>);
    }
#endif
#if UNIKV_HAS_VECTOR_TYPES
    translate_tokens_in_blocks(table, in, out, translate_block_pow2_16<PageSize>);
#else
    translate_tokens_in_blocks(table, in, out, translate_block_any);
#endif
}

inline void translate_tokens_unit(const TranslationTable& table, std::span<const VirtualToken> in,
                                  std::span<PhysicalToken> out) noexcept {
#if UNIKV_HAS_AVX2_DISPATCH
    if (__builtin_cpu_supports("avx2")) return translate_tokens_in_blocks(table, in, out, translate_block_unit_run_32);
#endif
#if UNIKV_HAS_VECTOR_TYPES
    translate_tokens_in_blocks(table, in, out, translate_block_unit_run_16);
#else
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = PhysicalToken{table.physical_token(in[i].value())};
#endif
}

}  // namespace detail

/// Writes the physical page of each id of `in` (virtual pages, or Mamba state ids) to `out`; translates
/// `min(in.size(), out.size())` ids. Allocation-free; O(n).
template <class In, class Out>
void translate_pages(const TranslationTable& table, std::span<const In> in, std::span<Out> out) noexcept {
    const std::size_t n = in.size() < out.size() ? in.size() : out.size();
    for (std::size_t i = 0; i < n; ++i) out[i] = Out{table.physical_page(in[i].value())};
}

/// Writes the physical token of each virtual token of `in` to `out`; translates `min(in.size(),
/// out.size())` ids. `in` and `out` must not overlap (a failed block re-reads `in`). Allocation-free; O(n)
/// with one table lookup per page-sized run of ids from one page, one per id otherwise.
inline void translate_tokens(const TranslationTable& table, std::span<const VirtualToken> in,
                             std::span<PhysicalToken> out) noexcept {
    in = in.first(in.size() < out.size() ? in.size() : out.size());
    UNIKV_ASSERT(in.empty() || static_cast<const void*>(in.data() + in.size()) <= static_cast<const void*>(out.data()) ||
                 static_cast<const void*>(out.data() + in.size()) <= static_cast<const void*>(in.data()));
    switch (table.page_size) {
        case 1: return detail::translate_tokens_unit(table, in, out);
        case 4: return detail::translate_tokens_pow2<4>(table, in, out);
        case 8: return detail::translate_tokens_pow2<8>(table, in, out);
        case 16: return detail::translate_tokens_pow2<16>(table, in, out);
        case 32: return detail::translate_tokens_pow2<32>(table, in, out);
        case 64: return detail::translate_tokens_pow2<64>(table, in, out);
        case 128: return detail::translate_tokens_pow2<128>(table, in, out);
        case 256: return detail::translate_tokens_pow2<256>(table, in, out);
        default: return detail::translate_tokens_in_blocks(table, in, out, detail::translate_block_any);
    }
}

}  // namespace unikv
