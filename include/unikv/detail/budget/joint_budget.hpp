#pragma once
// The joint budget over pools of the unified arena, shared by `SharedSWABudget` (Full, Swa) and
// `SharedHybridBudget` (Full, Swa, Mamba): demands in pages of every pool at once, checked with
// `joint_fits` at selection and realized with `reclaim` before a load-back is queued.

#include <cstdint>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/budget/reclaim.hpp>
#include <unikv/detail/budget/step_state.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

template <ComponentMask Pools>
class joint_budget : public step_state {
    static constexpr bool has_mamba_ = Pools.has(Component::mamba);

public:
    /// The load's FULL rows are counted from the plan: resident FULL behind host-only SWA or Mamba is not
    /// loaded, and the budget reclaims for exactly what the load adds.
    static constexpr bool load_back_needs_full_tokens = true;

    /// Selects `ask`: cut to the chunk budget, then FULL (extension, one page, decode, plus `total_offset`),
    /// SWA (the §6.1 estimate plus `swa_offset`) and, with Mamba, the request's state (plus `state_offset`)
    /// checked jointly against free pages and what eviction can reclaim. O(pools) capacity queries; a
    /// refusal costs O(pools * log pages) more.
    template <class Cache>
    [[nodiscard]] Selection check_prefill(const Cache& cache, const PrefillAsk& ask) const {
        const std::int32_t page = page_tokens(cache);
        const auto cut = cut_to_chunk(ask, page);
        if (!cut) return {chunk_refusal(), ask};
        return {joint_fits(cache, demand(cache, full_charge(*cut, page), swa_tokens(cache, *cut), 1), Pools), *cut};
    }

    /// Realizes the budget of a load-back before it is queued: FULL `ask.full_tokens + total_offset`, SWA the
    /// estimate plus the host-only window rows plus `swa_offset`, with Mamba the request's state, the load's
    /// states and `state_offset`, evicted for and compacted into free pages now (a queued load blocks page
    /// moves until its ack, so the step's allocations must not need any). Refused when eviction runs out.
    template <class Cache>
    [[nodiscard]] BudgetCheck prepare_load_back(Cache& cache, const LoadBackAsk& ask) const {
        const std::int32_t page = page_tokens(cache);
        const PrefillAsk a{.extend = ask.extend, .max_new = ask.max_new};
        return reclaim(cache,
                       demand(cache, ask.full_tokens, swa_tokens(cache, a) + ceil_page(ask.swa_host_hit, page),
                              1 + ask.load_states),
                       Pools);
    }

    /// Charges an admitted prefill to the step: FULL as the base budget, SWA its estimate, one state. O(1).
    template <class Cache>
    void reserve(const Cache& cache, const PrefillAsk& admitted) noexcept {
        charge_full(admitted, page_tokens(cache));
        charge_swa(swa_tokens(cache, admitted));
        if constexpr (has_mamba_) charge_state();
    }

private:
    template <class Cache>
    [[nodiscard]] static std::int64_t swa_tokens(const Cache& cache, const PrefillAsk& a) {
        return swa_estimate_tokens(a.extend, a.max_new, cache.tree().config().swa_window, page_tokens(cache));
    }
    // Pages of each pool for FULL `full` and SWA `swa` tokens and `states` states, offsets included.
    template <class Cache>
    [[nodiscard]] CapacityDemand demand(const Cache& cache, std::int64_t full, std::int64_t swa,
                                        std::int64_t states) const {
        const std::int32_t page = page_tokens(cache);
        CapacityDemand d{.full = ceil_div(full + total_offset(), page), .swa = ceil_div(swa + swa_offset(), page)};
        if constexpr (has_mamba_) d.mamba = states + state_offset();
        return d;
    }
};

}  // namespace unikv::detail
