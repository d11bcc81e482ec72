#pragma once
/// \file
/// `EagerEndPool<Grow>`: an end pool that compacts on every free, so its span never has holes. Each free
/// that leaves holes below the frontier makes the stream wait every registered transfer event and the
/// running forward, moves the survivors nearest the frontier into the holes, and retreats the frontier.
/// Because frees move pages, an eager pool can take neither reservations nor move gates (compile-time rules
/// of the layout and of `install_move_gate`).

#include <unikv/component.hpp>
#include <unikv/detail/pools/eager_end_pool.hpp>
#include <unikv/pools/pool_policy_concept.hpp>

namespace unikv {

template <Grow G>
struct EagerEndPool {
    static constexpr Placement placement = Placement::end;
    static constexpr Compaction compaction = Compaction::eager;
    static constexpr Grow grow = G;

    /// The sub-allocator the unified allocator instantiates for backend `B`.
    template <class B>
    using impl = detail::eager_end_pool_impl<B, G>;
};

static_assert(is_pool_policy_v<EagerEndPool<Grow::up>, detail::backend_archetype>);
static_assert(is_pool_policy_v<EagerEndPool<Grow::down>, detail::backend_archetype>);

}  // namespace unikv
