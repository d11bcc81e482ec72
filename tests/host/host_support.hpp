#pragma once
// Shared by the host-pool tests: the device geometry of a small model for any layout, and row markers written
// into host pages and read back through a lease (physical page, region, page bytes), so a translation that
// points at the wrong envelope, or a compaction that loses or misplaces bytes, reads back wrong.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/backend/host_backend.hpp>
#include <unikv/host/host_lease.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/pools/layouts.hpp>

#include "broken.hpp"
#include "row_words.hpp"

namespace host_test {

using namespace unikv;

inline constexpr std::int32_t page_size = 4;

/// FULL entries of 32 bytes (128-byte pages), SWA entries of 64 bytes (256-byte pages), Mamba slots of 96
/// bytes: three different envelopes, so a side using another side's page bytes shows up.
inline ArenaConfig config(std::size_t arena_bytes = 64 * 256) {
    return ArenaConfig{.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa = {.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa_window_tokens = 8,
                                 .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 64}},
                       .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
                       .arena_bytes = arena_bytes};
}

/// The device geometry of layout `L` over `config()`.
template <class L>
ArenaSpec spec_for(std::size_t arena_bytes = 64 * 256) {
    return make_arena_spec(config(arena_bytes), layout_components_v<L>);
}

/// Rows per page of `c`.
inline std::int32_t rows_of(const ArenaSpec& spec, Component c) { return spec[c].page_size; }

/// A marker naming (component, logical host page, row, version); every 4-byte word of the row holds it.
constexpr std::uint32_t marker(Component c, std::int32_t page, std::int32_t row, std::uint32_t version = 0) {
    return ((version & 0xFu) << 28) | (static_cast<std::uint32_t>(c) << 26) |
           ((static_cast<std::uint32_t>(page) & 0xFFFFFu) << 6) | (static_cast<std::uint32_t>(row) & 0x3Fu);
}
using test_rows::torn_row;
using test_rows::uniform_word;

/// The bytes of row `row` of logical host page `h` of `c`, found through `lease`.
inline std::byte* host_row(const HostLease<HostBackend>& lease, const ArenaSpec& spec, Component c, HostPage h,
                           std::int32_t row) {
    std::int32_t p = -1;
    lease.physical(c, std::span(&h, 1), std::span(&p, 1));
    return lease.region(c).data + static_cast<std::size_t>(p) * lease.page_bytes(c) +
           static_cast<std::size_t>(row) * spec[c].entry_bytes;
}

/// Writes the markers of every row of host pages `pages` of `c`.
inline void write_host(const HostLease<HostBackend>& lease, const ArenaSpec& spec, Component c,
                       std::span<const HostPage> pages, std::uint32_t version = 0) {
    for (HostPage h : pages) {
        for (std::int32_t r = 0; r < rows_of(spec, c); ++r) {
            std::byte* row = host_row(lease, spec, c, h, r);
            const std::uint32_t value = marker(c, h.value(), r, version);
            test_rows::fill_row(row, spec[c].entry_bytes, value);
        }
    }
}


/// True when every row of `pages` of `c` reads back its marker through `lease`.
inline bool host_holds(const HostLease<HostBackend>& lease, const ArenaSpec& spec, Component c,
                       std::span<const HostPage> pages, std::uint32_t version = 0) {
    for (HostPage h : pages) {
        for (std::int32_t r = 0; r < rows_of(spec, c); ++r) {
            if (uniform_word(host_row(lease, spec, c, h, r), spec[c].entry_bytes) != marker(c, h.value(), r, version))
                return false;
        }
    }
    return true;
}

/// `n` fresh host pages of `c` from `pool`, allocated as one batch that must succeed.
std::vector<HostPage> take(auto& pool, Component c, std::size_t n) {
    std::vector<HostPage> pages(n);
    const HostRequest r{.component = c, .out = pages};
    REQUIRE(static_cast<bool>(pool.alloc(std::span(&r, 1))));
    return pages;
}

using test_verify::broken;

}  // namespace host_test
