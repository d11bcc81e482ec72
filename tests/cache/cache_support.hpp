#pragma once
// Shared by the cache tests: a tree and an allocator over one layout, driven together through the action
// executor on a manual HostBackend, with a marker per (component, token, position) written into each row
// through translation, so a row that a wrong action freed, moved or failed to rebind reads back wrong.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/cache/action_executor.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/tree/radix_tree.hpp>

#include "broken.hpp"
#include "row_words.hpp"

namespace cache_test {

using namespace unikv;

/// The tree over the components of layout `L`.
template <bool HasSwa, bool HasMamba>
struct tree_pick;
template <>
struct tree_pick<false, false> {
    using type = RadixTree<Full>;
};
template <>
struct tree_pick<true, false> {
    using type = RadixTree<Full, Swa>;
};
template <>
struct tree_pick<false, true> {
    using type = RadixTree<Full, Mamba>;
};
template <>
struct tree_pick<true, true> {
    using type = RadixTree<Full, Swa, Mamba>;
};
template <class L>
using tree_for = typename tree_pick<layout_has_v<L, Component::swa>, layout_has_v<L, Component::mamba>>::type;

inline constexpr std::int32_t page_size = 4;
inline constexpr std::int32_t window = 8;

/// FULL and SWA entries of 32 bytes (so 128-byte pages), Mamba slots of 64 bytes, in an arena of `envelopes`
/// 128-byte envelopes.
inline ArenaConfig config(std::size_t envelopes) {
    return ArenaConfig{.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                                 .swa_window_tokens = window,
                                 .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
                       .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
                       .arena_bytes = envelopes * 128};
}

/// The marker of the row of `c` that holds token `token` at position `pos` (Mamba: the state after it).
constexpr std::uint32_t marker(Component c, TokenId token, std::int32_t pos) {
    return (static_cast<std::uint32_t>(c) + 1) << 30 ^ (static_cast<std::uint32_t>(token) * 2654435761u) ^
           (static_cast<std::uint32_t>(pos) * 40503u);
}

/// An allocator, a tree and an executor over layout `L`, on a manual HostBackend. The backend lives outside
/// (`Stack` may be moved as a whole; the allocator keeps a pointer to the backend).
template <class L>
struct Stack {
    using Alloc = UnifiedAllocator<L, HostBackend>;
    using Tree = tree_for<L>;
    static_assert(Tree::components::mask == layout_components_v<L>, "the tree's components are the layout's pools");

    Stack(HostBackend& backend, HostBackend::stream_ref stream, std::size_t envelopes)
        : alloc(backend, config(envelopes), stream),
          tree(TreeConfig{.page_size = {page_size}, .swa_window = Alloc::has_swa ? window : 0}) {}

    Alloc alloc;
    Tree tree;
    ActionExecutor exec;

    /// Executes a tree result's actions; no write-back here, so nothing comes back.
    template <class Result>
    void execute(Result& r) {
        HostActions host = exec.execute(alloc, r);
        REQUIRE(host.empty());
        exec.complete(alloc, std::move(host));
    }
};

/// Reads and writes rows through the allocator's translation.
template <class Alloc>
struct Rows {
    const Alloc* alloc;

    [[nodiscard]] std::byte* row(Component c, std::int32_t physical) const {
        return alloc->region().data + static_cast<std::size_t>(physical) * alloc->spec()[c].entry_bytes;
    }
    [[nodiscard]] std::int32_t physical(Component c, std::int32_t virtual_id) const {
        PhysicalToken out;
        const VirtualToken in{virtual_id};
        if (c == Component::full) alloc->translate_full(std::span(&in, 1), std::span(&out, 1));
        if constexpr (Alloc::has_swa) {
            if (c == Component::swa) alloc->translate_swa(std::span(&in, 1), std::span(&out, 1));
        }
        if constexpr (Alloc::has_mamba) {
            if (c == Component::mamba) {
                const StateId s{virtual_id};
                PhysicalPage p;
                alloc->translate_state(std::span(&s, 1), std::span(&p, 1));
                return p.value();
            }
        }
        return out.value();
    }
    void write(Component c, std::int32_t virtual_id, std::uint32_t value) const {
        std::byte* r = row(c, physical(c, virtual_id));
        test_rows::fill_row(r, alloc->spec()[c].entry_bytes, value);
    }
    [[nodiscard]] bool holds(Component c, std::int32_t virtual_id, std::uint32_t value) const {
        const std::int32_t p = physical(c, virtual_id);
        if (p <= 0) return false;  // the sink: unmapped
        return test_rows::uniform_word(row(c, p), alloc->spec()[c].entry_bytes) == value;
    }
    /// Writes the rows of page `v` holding `tokens[first, first + page_size)` at positions from `first`.
    void write_page(Component c, VirtualPage v, std::span<const TokenId> tokens, std::int32_t first) const {
        for (std::int32_t r = 0; r < page_size; ++r) {
            const std::int32_t pos = first + r;
            write(c, v.value() * page_size + r, marker(c, tokens[static_cast<std::size_t>(pos)], pos));
        }
    }
    [[nodiscard]] bool page_holds(Component c, VirtualPage v, std::span<const TokenId> tokens, std::int32_t first) const {
        for (std::int32_t r = 0; r < page_size; ++r) {
            const std::int32_t pos = first + r;
            if (!holds(c, v.value() * page_size + r, marker(c, tokens[static_cast<std::size_t>(pos)], pos))) return false;
        }
        return true;
    }
};

/// Runs the stream's queued work (copies, fills, table uploads) as far as it goes; true when it emptied.
inline bool drain(HostBackend& backend, HostBackend::stream_ref stream) {
    while (backend.run_next(stream)) {
    }
    return backend.queued(stream) == 0;
}

using test_verify::broken;

}  // namespace cache_test
