#pragma once
// The realization of a joint budget before a load-back is queued (reference §6.1, `reclaim_for_prealloc`):
// relieve and compact until the demand fits in pages that are free now, because once the load is queued its
// reservation, then the host-transfer gate, block every page move until the ack.

#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

// Compacts toward `d` (`ensure_capacity`) and, while a pool is short, relieves it through the cache's one relief
// path (`relieve`: its own pages, or bytes from the other pools of `pools`, backed up first under write-back),
// until `d` fits in free pages or relief frees nothing more. Each round frees something, so it ends;
// O(rounds * (eviction + compaction)), allocation-free apart from what the evictions' copies need.
template <class Cache>
[[nodiscard]] BudgetCheck reclaim(Cache& cache, const CapacityDemand& d, ComponentMask pools) {
    for (;;) {
        const AllocResult r = cache.allocator().ensure_capacity(d);
        if (r) return {};
        if (!cache.relieve(r, pools)) {
            return BudgetCheck::refused(refusal_of(cache, RefusalCause::no_room, r.component, r.pages_short));
        }
    }
}

}  // namespace unikv::detail
