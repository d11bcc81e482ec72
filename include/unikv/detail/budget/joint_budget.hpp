#pragma once
// The joint budget over pools of the unified arena, shared by `SharedSWABudget` (Full, Swa) and
// `SharedHybridBudget` (Full, Swa, Mamba): demands in pages of every pool at once, checked with
// `joint_fits` at selection and handed to the cache to reclaim before a load-back is queued.

#include <cstdint>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/budget/step_state.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

// The joint budget over FULL and SWA, and Mamba when `WithMamba`. A bool, not the mask, as the template
// argument: nvcc names a class instantiated on a class-type argument through the mask's private constructor.
template <bool WithMamba>
class joint_budget : public step_state {
    static constexpr bool has_mamba_ = WithMamba;
    static constexpr ComponentMask Pools =
        WithMamba ? ComponentMask::all() : ComponentMask::of(Component::full).with(Component::swa);

public:
    /// The load's FULL rows are counted from the plan: resident FULL behind host-only SWA or Mamba is not
    /// loaded, and the budget reclaims for exactly what the load adds.
    static constexpr bool load_back_needs_full_tokens = true;

    /// Selects `ask`: cut to the chunk budget, then FULL (extension, one page, decode, plus `total_offset`),
    /// SWA (the §6.1 estimate plus `swa_offset`) and, with Mamba, the request's state (plus `state_offset`)
    /// checked jointly against free pages and what eviction can reclaim. O(pools) capacity queries; a
    /// refusal costs O(pools * log pages) more.
    [[nodiscard]] Selection check_prefill(const CapacityView& v, const PrefillAsk& ask) const {
        const std::int32_t page = v.page_tokens();
        const auto cut = cut_to_chunk(ask, page);
        if (!cut) return {chunk_refusal(), ask};
        return {joint_fits(v, demand(v, full_charge(*cut, page), swa_tokens(v, *cut), 1), Pools,
                           {{total_offset(), swa_offset(), state_offset()}}),
                *cut};
    }

    /// The budget of a load-back, for the cache to realize before the load is queued: FULL `ask.full_tokens +
    /// total_offset`, SWA the estimate plus the host-only window rows plus `swa_offset`, with Mamba the
    /// request's state, the load's states and `state_offset`, to be evicted for and compacted into free pages
    /// now (a queued load blocks page moves until its ack, so the step's allocations must not need any).
    /// Always fits here: the cache refuses when its reclaim runs out. O(1).
    [[nodiscard]] Reclaim prepare_load_back(const CapacityView& v, const LoadBackAsk& ask) const {
        const std::int32_t page = v.page_tokens();
        const PrefillAsk a{.extend = ask.extend, .max_new = ask.max_new};
        return {.check = {},
                .demand = demand(v, ask.full_tokens, swa_tokens(v, a) + ceil_page(ask.swa_host_hit, page),
                                 1 + ask.load_states),
                .pools = Pools};
    }

    /// Charges an admitted prefill to the step: FULL as the base budget, SWA its estimate, one state (reads the
    /// view's geometry only). O(1).
    void reserve(const CapacityView& v, const PrefillAsk& admitted) noexcept {
        charge_full(admitted, v.page_tokens());
        charge_swa(swa_tokens(v, admitted));
        if constexpr (has_mamba_) charge_state();
    }

private:
    [[nodiscard]] static std::int64_t swa_tokens(const CapacityView& v, const PrefillAsk& a) {
        return swa_estimate_tokens(a.extend, a.max_new, v.swa_window(), v.page_tokens());
    }
    // Pages of each pool for FULL `full` and SWA `swa` tokens and `states` states, offsets included.
    [[nodiscard]] CapacityDemand demand(const CapacityView& v, std::int64_t full, std::int64_t swa,
                                        std::int64_t states) const {
        CapacityDemand d{.full = v[Component::full].pages_for(full + total_offset()).count,
                         .swa = v[Component::swa].pages_for(swa + swa_offset()).count};
        if constexpr (has_mamba_) d.mamba = v[Component::mamba].pages_for(states + state_offset()).count;
        return d;
    }
};

}  // namespace unikv::detail
