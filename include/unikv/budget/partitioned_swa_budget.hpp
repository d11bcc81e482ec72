#pragma once
/// \file
/// `PartitionedSWABudget`: FULL and SWA budgeted as static partitions (reference §6.1 `SWAPrefillBudget`), the
/// baseline engines use today, here over the unified arena so that the two can be compared on the same
/// memory. Each pool may hold at most its partition (`BudgetConfig::full_partition_pages`,
/// `swa_partition_pages`, and `mamba_partition_pages` where the layout has Mamba): the cache bounds the
/// allocator's pools by them (`UnifiedAllocator::bound_pages`), so no pool's cached pages ever take another's
/// memory, and a pool at its bound evicts its own pages, as in an engine with one pool per component. What a
/// prefill may take from pool `c` is the room its partition has left (with the compaction an allocation may
/// run), plus its evictable pages, minus its offset (FULL `total_offset`, SWA `swa_offset`, both starting at
/// the pending decode tokens). SWA demand is the §6.1 SWA estimate; Mamba states are not budgeted (an
/// allocation past the state partition evicts states, or falls short). `prepare_load_back` reclaims nothing:
/// it checks the ask again once the host match is pinned, because pinning the match's window protects device
/// SWA that selection counted as evictable. It does not ask for the FULL rows a load adds
/// (`load_back_needs_full_tokens` is false).

#include <cstdint>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/budget/step_state.hpp>
#include <unikv/error.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// Budget policy: static FULL and SWA partitions (see the file comment). Needs Full and Swa pools.
struct PartitionedSWABudget {
    /// The rule a layout must meet (checked by `check_budget`).
    template <class L>
    static constexpr budget_layout_rule layout_rule =
        layout_has_v<L, Component::full> && layout_has_v<L, Component::swa> ? budget_layout_rule::none
                                                                            : budget_layout_rule::partitioned_swa_pools;

    /// The budget of a cache over `Layout`: the partitions and per-step counters.
    template <class Layout>
    class impl : public detail::step_state {
    public:
        static constexpr bool load_back_needs_full_tokens = false;

        /// Takes the partitions. Throws `logic_error` unless both are at least one page.
        explicit impl(const BudgetConfig& config)
            : partition_{.full = config.full_partition_pages,
                         .swa = config.swa_partition_pages,
                         .mamba = layout_has_v<Layout, Component::mamba> ? config.mamba_partition_pages : 0} {
            UNIKV_EXPECTS(partition_.full > 0 && partition_.swa > 0 && partition_.mamba >= 0,
                          "PartitionedSWABudget: full_partition_pages (", partition_.full,
                          ") and swa_partition_pages (", partition_.swa,
                          ") must both be at least one page, and mamba_partition_pages (",
                          config.mamba_partition_pages, ") not negative; give the static split in BudgetConfig");
        }

        /// The partitions, in pages (Mamba: states; 0 is unbounded); the cache bounds its pools by them.
        [[nodiscard]] const CapacityDemand& partitions() const noexcept { return partition_; }

        /// Selects `ask`: cut to the chunk budget, then FULL (extension, one page, decode) and SWA (the §6.1
        /// estimate) checked against their partitions. O(1).
        [[nodiscard]] Selection check_prefill(const CapacityView& v, const PrefillAsk& ask) const {
            const std::int32_t page = v.page_tokens();
            const auto cut = cut_to_chunk(ask, page);
            if (!cut) return {chunk_refusal(), ask};
            return {fits(v, full_charge(*cut, page), swa_tokens(v, cut->extend, cut->max_new)), *cut};
        }
        /// Checks the load-back's ask again with the host match pinned (FULL: `ask.full_tokens`; SWA: the
        /// estimate plus the host-only window rows it reserves). Reclaims nothing. O(1).
        [[nodiscard]] Reclaim prepare_load_back(const CapacityView& v, const LoadBackAsk& ask) const {
            const std::int32_t page = v.page_tokens();
            return {.check = fits(v, ask.full_tokens,
                                  swa_tokens(v, ask.extend, ask.max_new) + detail::ceil_page(ask.swa_host_hit, page))};
        }
        /// Charges an admitted prefill to the step: FULL as the base budget, SWA its estimate (reads the view's
        /// geometry only). O(1).
        void reserve(const CapacityView& v, const PrefillAsk& admitted) noexcept {
            charge_full(admitted, v.page_tokens());
            charge_swa(swa_tokens(v, admitted.extend, admitted.max_new));
        }

    private:
        [[nodiscard]] static std::int64_t swa_tokens(const CapacityView& v, std::int64_t extend, std::int64_t max_new) {
            return detail::swa_estimate_tokens(extend, max_new, v.swa_window(), v.page_tokens());
        }
        // Tokens pool `c` can still give: its partition's room (the allocator counts the bound, and the holes
        // an allocation's compaction may flush), its evictable pages, minus its offset.
        [[nodiscard]] static std::int64_t left(const CapacityView& v, Component c, std::int64_t offset) {
            return v[c].tokens_in(v[c].schedulable() + v[c].evictable()) - offset;
        }
        [[nodiscard]] BudgetCheck fits(const CapacityView& v, std::int64_t full, std::int64_t swa) const {
            const std::int64_t full_short = full - left(v, Component::full, total_offset());
            if (full_short > 0) {
                return BudgetCheck::refused(detail::refusal_of(
                    v, RefusalCause::no_room, v[Component::full].pages_for(full_short), total_offset()));
            }
            const std::int64_t swa_short = swa - left(v, Component::swa, swa_offset());
            if (swa_short > 0) {
                return BudgetCheck::refused(
                    detail::refusal_of(v, RefusalCause::no_room, v[Component::swa].pages_for(swa_short), swa_offset()));
            }
            return {};
        }

        CapacityDemand partition_;
    };
};

static_assert(is_budget_policy_v<PartitionedSWABudget, SwaFullLayout> &&
              is_budget_policy_v<PartitionedSWABudget, TriPoolLayout>);

}  // namespace unikv
