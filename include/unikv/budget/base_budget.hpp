#pragma once
/// \file
/// `BaseBudget`: the budget of one pool, FULL (reference §6.1 `PrefillBudget`). What a prefill may take is
/// what the pool has free plus what eviction can reclaim, minus what the step already charged:
/// `available + evictable - total_offset`, in tokens. The step starts with the mixed batch's pending decode
/// tokens charged; each admission adds its extension (page rounded), one page and its decode. The other pools
/// of the layout are not budgeted (their allocations can still fall short, and say so). It prepares a
/// load-back by asking nothing: the load's own relief (`Cache::relieve`) covers it, and it never asks for the FULL rows a
/// load adds (`load_back_needs_full_tokens` is false), so admission never walks the tree for them.

#include <cstdint>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/budget/step_state.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// Budget policy: FULL alone (see the file comment). Serves every layout.
struct BaseBudget {
    /// The budget of a cache over `Layout`: per-step counters only.
    template <class Layout>
    class impl : public detail::step_state {
    public:
        /// The base budget passes the host hit length, an upper bound of the FULL rows a load adds.
        static constexpr bool load_back_needs_full_tokens = false;

        /// Reads nothing of `config`.
        explicit impl(const BudgetConfig& config = {}) noexcept { (void)config; }

        /// Selects `ask`: cut to the chunk budget, then checked against the FULL tokens left. Refused with the
        /// FULL shortfall, or `chunk_exhausted`. O(1).
        [[nodiscard]] Selection check_prefill(const CapacityView& v, const PrefillAsk& ask) const {
            const std::int32_t page = v.page_tokens();
            const auto cut = cut_to_chunk(ask, page);
            if (!cut) return {chunk_refusal(), ask};
            const PoolCapacity full = v[Component::full];
            const std::int64_t left = full.tokens_in(full.free() + full.evictable()) - total_offset();
            const std::int64_t short_by = full_charge(*cut, page) - left;
            if (short_by <= 0) return {{}, *cut};
            return {BudgetCheck::refused(
                        detail::refusal_of(v, RefusalCause::no_room, full.pages_for(short_by), total_offset())),
                    *cut};
        }
        /// Nothing to prepare or reclaim: always fits. O(1).
        [[nodiscard]] Reclaim prepare_load_back(const CapacityView& v, const LoadBackAsk& ask) const noexcept {
            (void)v;
            (void)ask;
            return {};
        }
        /// Charges an admitted prefill to the step (reads the view's page size only). O(1).
        void reserve(const CapacityView& v, const PrefillAsk& admitted) noexcept {
            charge_full(admitted, v.page_tokens());
        }
    };
};

static_assert(is_budget_policy_v<BaseBudget, FullLayout> && is_budget_policy_v<BaseBudget, SwaFullLayout> &&
              is_budget_policy_v<BaseBudget, TriPoolLayout>);

}  // namespace unikv
