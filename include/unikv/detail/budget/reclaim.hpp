#pragma once
// The realization of a joint budget before a load-back is queued (reference §6.1, `reclaim_for_prealloc`):
// evict and compact until the demand fits in pages that are free now, because once the load is queued its
// reservation, then the host-transfer gate, block every page move until the ack.

#include <cstdint>
#include <type_traits>

#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/transfer/write_policies.hpp>

namespace unikv::detail {

// Under write-back an eviction of `pages` pages of `c` copies what it drops to the host first, and a copy the
// host cannot take is dropped instead (HiCache does not evict host data during a write-back). So make host
// room first: FULL evictions copy FULL pages and SWA windows (at most as many pages), SWA evictions SWA
// windows; host copies that are locked (the pinned host match among them) stay. Mamba states are copied when
// there is room (best effort).
template <class Cache>
void make_host_room(Cache& cache, Component c, std::int64_t pages) {
    if (backs_up_on_evict(cache.writes())) {
        for (Component k : {Component::full, Component::swa}) {
            if (!cache.allocator().spec()[k].present) continue;
            if (k == Component::full && c != Component::full) continue;
            if (k == Component::swa && c == Component::mamba) continue;
            const std::int64_t missing = pages - cache.host_pools().available(k);
            if (missing > 0) (void)cache.evict_host(k, page_units(cache, k, missing));
        }
    }
}

// One eviction toward `short_of`: the short pool first; when it frees nothing and only bytes are missing, the
// other pools of `pools` (compaction hands their freed bytes over). True when something was freed.
template <class Cache>
bool evict_toward(Cache& cache, const AllocResult& short_of, ComponentMask pools) {
    const auto& spec = cache.allocator().spec();
    const auto bytes = [&](Component c) { return static_cast<std::int64_t>(spec[c].page_bytes); };
    Component order[component_count] = {short_of.component};
    std::size_t n = 1;
    if (short_of.shortfall == Shortfall::room) {
        for (Component c : all_components) {
            if (c != short_of.component && pools.has(c)) order[n++] = c;
        }
    }
    for (std::size_t i = 0; i < n; ++i) {
        const Component c = order[i];
        if (cache.tree().evictable_size(c) == 0) continue;
        const std::int64_t pages = ceil_div(short_of.pages_short * bytes(short_of.component), bytes(c));
        make_host_room(cache, c, pages);
        const auto freed = cache.evict(c, page_units(cache, c, pages)).freed;
        if (freed[Component::full] + freed[Component::swa] + freed[Component::mamba] > 0) return true;
    }
    return false;
}

// Evicts and compacts until `d` fits in free pages (`ensure_capacity`), or eviction frees nothing more. Each
// round frees something, so it ends; O(rounds * (eviction + compaction)), allocation-free apart from what the
// evictions' copies need.
template <class Cache>
[[nodiscard]] BudgetCheck reclaim(Cache& cache, const CapacityDemand& d, ComponentMask pools) {
    for (;;) {
        const AllocResult r = cache.allocator().ensure_capacity(d);
        if (r) return {};
        if (!evict_toward(cache, r, pools)) {
            return BudgetCheck::refused(refusal_of(cache, RefusalCause::no_room, r.component, r.pages_short));
        }
    }
}

}  // namespace unikv::detail
