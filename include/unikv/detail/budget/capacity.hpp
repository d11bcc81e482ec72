#pragma once
// Capacity arithmetic shared by the budgets: page rounding, the SWA estimate of reference §6.1, the refusal of
// a pool with its breakdown, and the joint fit of a demand over the unified arena with what eviction can
// reclaim. Every function reads a `CapacityView` only and allocates nothing.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

[[nodiscard]] constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept { return (a + b - 1) / b; }
[[nodiscard]] constexpr std::int64_t ceil_page(std::int64_t tokens, std::int32_t page) noexcept {
    return ceil_div(tokens, page) * page;
}

// Reference §6.1: the SWA rows a prefill of `extend` tokens followed by `max_new` decode tokens needs at its
// peak. With a window the chunk's rows beyond one window are needed only during the forward, then at most
// one window stays; plus one page of rounding. Without a window every row stays.
[[nodiscard]] constexpr std::int64_t swa_estimate_tokens(std::int64_t extend, std::int64_t max_new,
                                                         std::int32_t window, std::int32_t page) noexcept {
    if (window <= 0) return extend + max_new + page;
    return std::max<std::int64_t>(extend - window, 0) + std::min<std::int64_t>(extend + max_new, window) + page;
}

// The refusal for `missing`, with the breakdown as the cache stands and what the step pre-charged of the pool.
// O(pools).
[[nodiscard]] inline AdmissionRefusal refusal_of(const CapacityView& v, RefusalCause cause, Pages missing,
                                                 std::int64_t precharged = 0) {
    const Component c = missing.component;
    std::size_t held_bytes = 0;
    for (Component p : all_components) {
        std::int64_t held = v[p].in_flight();
        if (p != c && v[p].moves_blocked()) held += v[p].holes();
        held_bytes += static_cast<std::size_t>(held) * v[p].page_bytes();
    }
    return {.cause = cause,
            .missing = missing,
            .pages_reclaimable = v[c].evictable(),
            .pages_in_flight = static_cast<std::int64_t>(held_bytes / v[c].page_bytes()),
            .pages_locked = v[c].locked(),
            .precharged = precharged};
}

// The pool of `d` (among `pools`) whose demand alone must shrink the least for `d` to fit, and by how much:
// a binary search over `can_reserve`, O(pools * log pages) capacity queries (each O(pools) or a memo hit).
[[nodiscard]] inline Pages least_shortfall(const CapacityView& v, const CapacityDemand& d, ComponentMask pools) {
    Component best = Component::full;
    std::int64_t best_short = -1;
    for (Component c : all_components) {
        if (!pools.has(c) || d[c] == 0) continue;
        CapacityDemand probe = d;
        probe[c] = 0;
        if (!v.can_reserve(probe)) continue;  // no cut of `c` alone is enough
        std::int64_t lo = 1;                      // invariant: cutting `hi` pages fits, cutting `lo - 1` does not
        std::int64_t hi = d[c];
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            probe[c] = d[c] - mid;
            if (v.can_reserve(probe)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if (best_short < 0 || hi < best_short) {
            best = c;
            best_short = hi;
        }
    }
    if (best_short >= 0) return {best, best_short};
    for (Component c : all_components) {  // every pool is short at once: name the first with all its demand
        if (pools.has(c) && d[c] > 0) return {c, d[c]};
    }
    return {Component::full, 0};
}

// Whether demand `d` (pages of the pools in `pools`, the step's `precharged` units of each included) fits the
// unified arena once eviction reclaimed what the tree can give: each pool's evictable pages cover its own demand
// first; what is left of them counts, in bytes, for the other pools too while moves are allowed (compaction
// hands freed bytes between pools). The refusal names the pool that is short by the least, and its pre-charge.
// O(pools) plus `can_reserve`; the refusal O(pools * log).
[[nodiscard]] inline BudgetCheck joint_fits(const CapacityView& v, CapacityDemand d, ComponentMask pools,
                                            const per_component<std::int64_t>& precharged) {
    std::int64_t spare_bytes = 0;
    for (Component c : all_components) {
        if (!pools.has(c)) continue;
        const std::int64_t evictable = v[c].evictable();
        const std::int64_t take = std::min(d[c], evictable);
        d[c] -= take;
        spare_bytes += (evictable - take) * static_cast<std::int64_t>(v[c].page_bytes());
    }
    if (!v.moves_blocked()) {
        for (Component c : all_components) {
            if (!pools.has(c)) continue;
            const auto bytes = static_cast<std::int64_t>(v[c].page_bytes());
            const std::int64_t take = std::min(d[c], spare_bytes / bytes);
            d[c] -= take;
            spare_bytes -= take * bytes;
        }
    }
    if (v.can_reserve(d)) return {};
    const Pages missing = least_shortfall(v, d, pools);
    return BudgetCheck::refused(refusal_of(v, RefusalCause::no_room, missing, precharged[missing.component]));
}

}  // namespace unikv::detail
