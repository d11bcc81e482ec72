#pragma once
/// \file
/// `SharedHybridBudget`: FULL, SWA and Mamba budgeted jointly over the tri-pool's arena, the same joint budget
/// as `SharedSWABudget` with Mamba state slots as a third demand: one per admitted request (its running
/// state, charged as `state_offset`) and the checkpoint a load-back adds (counted from the load-back plan).
/// `prepare_load_back` evicts and compacts for all three before the load is queued, so the load's state slot
/// never needs the floating SWA pool to move under the pending reservation. The upstream has no such budget:
/// its tri-pool falls back to separate ones.

#include <unikv/budget/budget_concept.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/joint_budget.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// Budget policy: joint FULL+SWA+Mamba (see the file comment). Needs all three pools.
struct SharedHybridBudget {
    /// The rule a layout must meet (checked by `check_budget`).
    template <class L>
    static constexpr budget_layout_rule layout_rule =
        layout_components_v<L> == ComponentMask::all() ? budget_layout_rule::none
                                                       : budget_layout_rule::shared_hybrid_pools;

    /// The budget of a cache over `Layout`: per-step counters only.
    template <class Layout>
    class impl : public detail::joint_budget<ComponentMask::all()> {
    public:
        /// Reads nothing of `config`.
        explicit impl(const BudgetConfig& config = {}) noexcept { (void)config; }
    };
};

static_assert(is_budget_policy_v<SharedHybridBudget, TriPoolLayout>);

}  // namespace unikv
