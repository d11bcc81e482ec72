#pragma once
/// \file
/// `LazyEndPool<Grow>`: an end pool whose frees leave holes (O(1), no copy, no synchronization) and whose
/// compaction runs only in `flush`: an urgent flush packs every hole; an opportunistic one is capped, stops
/// before pages a running forward writes, and returns at once when there is nothing to do. A moved source
/// that the running forward may still read waits in *pending reuse* until the forward's event fires.

#include <unikv/component.hpp>
#include <unikv/detail/pools/lazy_end_pool.hpp>
#include <unikv/pools/pool_policy_concept.hpp>

namespace unikv {

template <Grow G>
struct LazyEndPool {
    static constexpr Placement placement = Placement::end;
    static constexpr Compaction compaction = Compaction::lazy;
    static constexpr Grow grow = G;

    /// The sub-allocator the unified allocator instantiates for backend `B`.
    template <class B>
    using impl = detail::lazy_end_pool_impl<B, G>;
};

static_assert(is_pool_policy_v<LazyEndPool<Grow::up>, detail::backend_archetype>);
static_assert(is_pool_policy_v<LazyEndPool<Grow::down>, detail::backend_archetype>);

}  // namespace unikv
