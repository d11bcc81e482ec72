#pragma once
/// \file
/// The replay's memory scale. The CPU backend really allocates and copies the arena and the host pools, and a
/// real model's bytes (Gemma-3-27B: about 0.5 MB per token) over GiBs of memory cannot be copied at replay
/// speed. So a replay runs the arena at 1/K of the model's bytes: every pool's bytes per token (and per state
/// slot) and the device and host memory are divided by the same K. Pages per pool, token capacities, the
/// ratios between pools, the window and every admission, eviction and compaction decision stay those of the
/// real model; only the bytes each copy moves shrink. The replay multiplies the bytes it reports
/// (`StepWork`, `StepRecord::bytes_compacted`) by K, so they are the real model's.
///
/// K is the smallest divisor of `gcd(entry bytes) / 32` that brings the device arena to at most
/// `max_replay_arena_bytes` (64 MiB), or that gcd when none does. Dividing by such a K keeps every row an
/// exact multiple of 32 bytes, so K and V rows stay 16-byte aligned, the ratios are exact, and each row keeps
/// room for the row check's two marker words. The scaled model has one layer per pool (its rows are the
/// real token's bytes / K), so a load-back runs in one layer event.

#include <cstddef>
#include <cstdint>
#include <numeric>

#include <unikv/arena/model.hpp>
#include <unikv/cache.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/presets.hpp>

namespace unikv::sim {

/// The device arena a replay aims to stay under.
inline constexpr std::uint64_t max_replay_arena_bytes = std::uint64_t{64} << 20;

/// The memory scale K of preset `P` over `device_bytes` (see the file comment). Throws `logic_error` when the
/// memory cannot hold one request (the arena's own check, which names the floor in the model's bytes).
template <class P>
[[nodiscard]] std::uint64_t replay_byte_scale(std::uint64_t device_bytes, PageSize page = {16}) {
    const ArenaSpec spec = make_arena_spec(arena_config<P>({.arena_bytes = device_bytes, .page_size = page}),
                                           layout_components_v<typename P::layout>);
    std::uint64_t g = 0;
    for (const SubPoolSpec& p : spec.pools) {
        if (p.present) g = std::gcd(g, static_cast<std::uint64_t>(p.entry_bytes));
    }
    const std::uint64_t limit = g / 32;  // entries are multiples of 32 (K and V rows of 16-byte multiples)
    for (std::uint64_t k = 1; k <= limit; ++k) {
        if (limit % k == 0 && device_bytes / k <= max_replay_arena_bytes) return k;
    }
    return limit == 0 ? 1 : limit;
}

/// The `CacheConfig` a replay of preset `P` builds over `device_bytes` and `host_bytes` of the real model,
/// scaled by `replay_byte_scale<P>(device_bytes, page)`: the model described with one layer per pool and
/// rows of 1/K of the real bytes, the arena and the host pools 1/K of the memory. Throws `logic_error` as
/// `replay_byte_scale` does.
template <class P>
[[nodiscard]] CacheConfig replay_cache_config(std::uint64_t device_bytes, std::uint64_t host_bytes,
                                              PageSize page = {16}, BudgetConfig budget = {}) {
    const std::uint64_t k = replay_byte_scale<P>(device_bytes, page);
    const ArenaSpec real = make_arena_spec(arena_config<P>({.arena_bytes = device_bytes, .page_size = page}),
                                           layout_components_v<typename P::layout>);
    const auto half_row = [&](Component c) { return real[c].entry_bytes / k / 2; };
    const auto attention = [&](Component c) {
        return AttentionShape{
            .layers = 1, .kv_heads = 1, .head_dim = static_cast<std::int32_t>(half_row(c)), .dtype_bytes = 1};
    };
    ModelDescription model{};
    model.full = attention(Component::full);
    if (real[Component::swa].present) {
        model.swa = attention(Component::swa);
        model.swa_window_tokens = P::model.swa_window_tokens;
    }
    if (real[Component::mamba].present) {
        model.mamba = {.layers = 1,
                       .conv_state_bytes = half_row(Component::mamba),
                       .temporal_state_bytes = half_row(Component::mamba)};
    }
    return CacheConfig{
        .arena = {.model = model,
                  .page_sizes = {.full = page, .swa = page, .mamba = PageSize{1}},
                  .arena_bytes = static_cast<std::size_t>(device_bytes / k)},
        .host = {.total_bytes = static_cast<std::size_t>(host_bytes / k)},
        .budget = budget,
    };
}

}  // namespace unikv::sim
