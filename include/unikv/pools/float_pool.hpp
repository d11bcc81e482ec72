#pragma once
/// \file
/// `FloatPool`: the middle pool of a tri-pool. Its span `[lo, hi)` floats between the up end and the down
/// end. Allocation reuses holes first, then grows the span on the roomier side (both sides when one is not
/// enough), and from empty it centres the span in the free band. Frees leave holes; an empty float *parks*:
/// it owns no bytes and is transparent to its neighbours. Pages move only on demand: `make_room(side, bytes)`
/// (boundary relocation, or a leapfrog when the whole span must move) and `compact_holes(side)`. Its `flush`
/// only absorbs boundary holes, without copying.

#include <unikv/detail/pools/float_pool.hpp>
#include <unikv/pools/pool_policy_concept.hpp>

namespace unikv {

struct FloatPool {
    static constexpr Placement placement = Placement::middle;
    static constexpr Compaction compaction = Compaction::on_demand;

    /// The sub-allocator the unified allocator instantiates for backend `B`.
    template <class B>
    using impl = detail::float_pool_impl<B>;
};

static_assert(is_pool_policy_v<FloatPool, detail::backend_archetype>);

}  // namespace unikv
