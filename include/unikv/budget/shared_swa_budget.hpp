#pragma once
/// \file
/// `SharedSWABudget`: FULL and SWA budgeted jointly over the unified arena (reference §6.1
/// `SharedSWAPrefillBudget`). The step pre-charges the mixed batch's pending decode tokens to both pools
/// (`total_offset`, `swa_offset`), each admission adds its FULL tokens and its §6.1 SWA estimate, and a
/// demand fits when the arena's free pages plus what eviction can reclaim hold it, pages of either pool
/// counting for the other through compaction. `prepare_load_back` realizes the budget before the load is
/// queued: it evicts and compacts until the load, the request and the pending demand fit in free pages, since
/// a queued load blocks every page move until its ack. It counts the FULL rows a load adds from the
/// load-back plan (`load_back_needs_full_tokens`). The tri-pool's Mamba pool is not budgeted here (use
/// `SharedHybridBudget`).

#include <unikv/budget/budget_concept.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/joint_budget.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// Budget policy: joint FULL+SWA (see the file comment). Needs Full and Swa pools.
struct SharedSWABudget {
    /// The rule a layout must meet (checked by `check_budget`).
    template <class L>
    static constexpr budget_layout_rule layout_rule =
        layout_has_v<L, Component::full> && layout_has_v<L, Component::swa> ? budget_layout_rule::none
                                                                            : budget_layout_rule::shared_swa_pools;

    /// The budget of a cache over `Layout`: per-step counters only.
    template <class Layout>
    class impl : public detail::joint_budget<ComponentMask::of(Component::full).with(Component::swa)> {
    public:
        /// Reads nothing of `config`.
        explicit impl(const BudgetConfig& config = {}) noexcept { (void)config; }
    };
};

static_assert(is_budget_policy_v<SharedSWABudget, SwaFullLayout> && is_budget_policy_v<SharedSWABudget, TriPoolLayout>);

}  // namespace unikv
