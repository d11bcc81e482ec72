#pragma once
/// \file
/// `PartitionedMambaBudget`: the static split of a FULL+Mamba model (Jamba, Qwen3-Next) as engines run it today,
/// a FULL pool and a separate pool of Mamba states, here over the unified arena so that the two can be
/// compared on the same memory. The cache bounds both pools by the partitions
/// (`BudgetConfig::full_partition_pages`, `mamba_partition_pages`; `UnifiedAllocator::bound_pages`); admission
/// is `BaseBudget`'s FULL check, whose available size the bound already caps. States are not budgeted: an
/// allocation past the state partition evicts states, or falls short. The tri-pool's static split, with SWA,
/// is `PartitionedSWABudget`'s.

#include <unikv/budget/asks.hpp>
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

/// Budget policy: static FULL and Mamba partitions (see the file comment). Needs Full and Mamba pools, no Swa.
struct PartitionedMambaBudget {
    /// The rule a layout must meet (checked by `check_budget`).
    template <class L>
    static constexpr budget_layout_rule layout_rule =
        layout_has_v<L, Component::mamba> && !layout_has_v<L, Component::swa>
            ? budget_layout_rule::none
            : budget_layout_rule::partitioned_mamba_pools;

    /// The budget of a cache over `Layout`: `BaseBudget`'s, with the partitions the cache bounds its pools by.
    template <class Layout>
    class impl : public BaseBudget::impl<Layout> {
    public:
        /// Takes the partitions. Throws `logic_error` unless both are at least one page (state).
        explicit impl(const BudgetConfig& config)
            : partition_{.full = config.full_partition_pages, .swa = 0, .mamba = config.mamba_partition_pages} {
            UNIKV_EXPECTS(partition_.full > 0 && partition_.mamba > 0, "PartitionedMambaBudget: full_partition_pages (",
                          partition_.full, ") and mamba_partition_pages (", partition_.mamba,
                          ") must both be at least one; give the static split in BudgetConfig");
        }

        /// The partitions: FULL pages and Mamba states. O(1).
        [[nodiscard]] const CapacityDemand& partitions() const noexcept { return partition_; }

    private:
        CapacityDemand partition_;
    };
};

static_assert(is_budget_policy_v<PartitionedMambaBudget, MambaFullLayout>);

}  // namespace unikv
