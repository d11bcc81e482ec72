#pragma once
/// \file
/// The budget policy kind (`BaseBudget`, `PartitionedSWABudget`, `SharedSWABudget`, `SharedHybridBudget`):
/// what admission asks of a budget (reference §6). A policy is a tag with a nested `template <class Layout>
/// impl`, the per-cache budget a composed cache owns. The impl holds only per-step counters, never a pointer to
/// the cache: every call takes the cache as an argument, so the owner moves freely.
///
/// The protocol an `impl<L>` models, every member checked (a budget reads the cache only through a
/// `CapacityView` and returns what the cache should do, so no call depends on the cache's type):
/// * `impl(const BudgetConfig&)`;
/// * `static constexpr bool load_back_needs_full_tokens`: whether `prepare_load_back` reads the FULL rows the
///   load adds (admission then builds the tree's load-back plan to count them; otherwise it passes the host
///   hit length and never walks the tree for it);
/// * `begin_step(const StepDemand&)` and the offsets `total_offset()`, `swa_offset()`, `state_offset()`;
/// * `Selection check_prefill(const CapacityView&, const PrefillAsk&) const`, `Reclaim prepare_load_back(const
///   CapacityView&, const LoadBackAsk&)` (what the cache must make free before the load is queued) and
///   `void reserve(const CapacityView&, const PrefillAsk&)`.
///
/// A tag may restrict the layouts it serves: `template <class L> static constexpr budget_layout_rule
/// layout_rule` names the rule `L` breaks. `check_budget<B, L>()` reports that rule, or the first protocol
/// member missing, with one `unikv:` message; `budget_t<B, L>` is the checked impl; `BudgetPolicy<B, L>` the
/// concept.

#include <concepts>
#include <cstdint>
#include <type_traits>

#include <unikv/budget/asks.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/component.hpp>
#include <unikv/pools/layout.hpp>

namespace unikv {

/// The layout rules a budget may impose, in the order they are reported.
enum class budget_layout_rule : std::uint8_t {
    none,                  ///< the budget serves the layout
    shared_swa_pools,      ///< SharedSWABudget without both Full and Swa pools
    partitioned_swa_pools, ///< PartitionedSWABudget without both Full and Swa pools
    partitioned_mamba_pools, ///< PartitionedMambaBudget without Full and Mamba pools, or with Swa
    shared_hybrid_pools,   ///< SharedHybridBudget without Full, Swa and Mamba pools
};

/// The layout rule budget `B` finds broken by layout `L`; `none` when `B` restricts no layout.
template <class B, class L>
inline constexpr budget_layout_rule budget_layout_rule_of_v = [] {
    if constexpr (requires { { B::template layout_rule<L> } -> std::convertible_to<budget_layout_rule>; }) {
        return static_cast<budget_layout_rule>(B::template layout_rule<L>);
    } else {
        return budget_layout_rule::none;
    }
}();

/// Has a nested `impl<L>` class template.
template <class B, class L>
inline constexpr bool has_budget_impl_v = requires { typename B::template impl<L>; };

/// `I` is constructible from a `BudgetConfig`.
template <class I>
inline constexpr bool has_budget_constructor_v = std::is_constructible_v<I, const BudgetConfig&>;

/// `I::load_back_needs_full_tokens` is a `static constexpr bool`.
template <class I>
inline constexpr bool has_load_back_flag_v = requires {
    typename std::bool_constant<I::load_back_needs_full_tokens>;
    requires std::same_as<std::remove_cv_t<decltype(I::load_back_needs_full_tokens)>, bool>;
};

/// `begin_step(StepDemand)` and the offsets.
template <class I>
inline constexpr bool has_budget_step_v = requires(I& i, const I& ci, const StepDemand& s) {
    i.begin_step(s);
    { ci.total_offset() } -> std::same_as<std::int64_t>;
    { ci.swa_offset() } -> std::same_as<std::int64_t>;
    { ci.state_offset() } -> std::same_as<std::int64_t>;
};

/// `Selection check_prefill(const CapacityView&, const PrefillAsk&) const`.
template <class I>
inline constexpr bool has_check_prefill_v = requires(const I& i, const CapacityView& v, const PrefillAsk& a) {
    { i.check_prefill(v, a) } -> std::same_as<Selection>;
};

/// `Reclaim prepare_load_back(const CapacityView&, const LoadBackAsk&)`.
template <class I>
inline constexpr bool has_prepare_load_back_v = requires(I& i, const CapacityView& v, const LoadBackAsk& a) {
    { i.prepare_load_back(v, a) } -> std::same_as<Reclaim>;
};

/// `reserve(const CapacityView&, const PrefillAsk&)`.
template <class I>
inline constexpr bool has_reserve_v = requires(I& i, const CapacityView& v, const PrefillAsk& a) { i.reserve(v, a); };

/// True when `I` models every member of the budget protocol.
template <class I>
inline constexpr bool is_budget_impl_v = has_budget_constructor_v<I> && has_load_back_flag_v<I> &&
                                         has_budget_step_v<I> && has_check_prefill_v<I> &&
                                         has_prepare_load_back_v<I> && has_reserve_v<I>;

namespace detail {
template <class B, class L, bool = has_budget_impl_v<B, L>>
struct budget_impl_of {
    using type = void;
};
template <class B, class L>
struct budget_impl_of<B, L, true> {
    using type = typename B::template impl<L>;
};
}  // namespace detail

/// A budget policy tag serving layout `L`.
template <class B, class L>
concept BudgetPolicy = is_layout_v<L> && budget_layout_rule_of_v<B, L> == budget_layout_rule::none &&
                       has_budget_impl_v<B, L> && is_budget_impl_v<typename detail::budget_impl_of<B, L>::type>;

/// True when `B` is a budget policy serving `L`.
template <class B, class L>
inline constexpr bool is_budget_policy_v = BudgetPolicy<B, L>;

/// Checks that budget `B` serves layout `L`: one `static_assert` per rule, each firing only when the rules
/// before it hold, so a bad pair gets exactly one message. Returns true.
template <class B, class L>
consteval bool check_budget() {
    if constexpr (!is_layout_v<L>) {
        static_assert(is_layout_v<L>, "unikv: a budget is checked against the cache's layout; pass a Layout "
                                      "(FullOnly, TwoEnd or TriPool of Pool members), e.g. SwaFullLayout");
        return true;
    } else if constexpr (!has_budget_impl_v<B, L>) {
        static_assert(has_budget_impl_v<B, L>,
                      "unikv: a budget policy needs a nested template <class Layout> impl; use BaseBudget, "
                      "PartitionedSWABudget, PartitionedMambaBudget, SharedSWABudget or SharedHybridBudget");
        return true;
    } else {
        using rule = budget_layout_rule;
        constexpr rule broken = budget_layout_rule_of_v<B, L>;
        static_assert(broken != rule::shared_swa_pools,
                      "unikv: SharedSWABudget needs a layout with both Full and Swa pools (it budgets them jointly "
                      "over the unified arena); use BaseBudget for models without Swa");
        static_assert(broken != rule::partitioned_swa_pools,
                      "unikv: PartitionedSWABudget splits Full and Swa statically, so it needs a layout with both "
                      "pools; use PartitionedMambaBudget for Full+Mamba models and BaseBudget otherwise");
        static_assert(broken != rule::partitioned_mamba_pools,
                      "unikv: PartitionedMambaBudget splits Full and Mamba statically, so it needs a layout with "
                      "both pools and no Swa; use PartitionedSWABudget where the layout has Swa (it bounds Mamba "
                      "too) and BaseBudget otherwise");
        static_assert(broken != rule::shared_hybrid_pools,
                      "unikv: SharedHybridBudget budgets Full, Swa and Mamba jointly, so it needs a layout with all "
                      "three pools (TriPoolLayout); use SharedSWABudget for Full+Swa models and BaseBudget "
                      "otherwise");
        if constexpr (broken == rule::none) {
            using I = typename B::template impl<L>;
            constexpr bool ctor = has_budget_constructor_v<I>;
            constexpr bool flag = ctor && has_load_back_flag_v<I>;
            constexpr bool step = flag && has_budget_step_v<I>;
            constexpr bool select = step && has_check_prefill_v<I>;
            constexpr bool prepare = select && has_prepare_load_back_v<I>;
            static_assert(ctor, "unikv: a budget's impl<L> needs a constructor impl(const BudgetConfig&)");
            static_assert(!ctor || flag, "unikv: a budget's impl<L> needs static constexpr bool "
                                         "load_back_needs_full_tokens");
            static_assert(!flag || step,
                          "unikv: a budget's impl<L> needs begin_step(const StepDemand&) and the offsets "
                          "total_offset(), swa_offset(), state_offset() returning std::int64_t");
            static_assert(!step || select, "unikv: a budget's impl<L> needs Selection check_prefill(const "
                                           "CapacityView&, const PrefillAsk&) const");
            static_assert(!select || prepare, "unikv: a budget's impl<L> needs Reclaim prepare_load_back(const "
                                              "CapacityView&, const LoadBackAsk&)");
            static_assert(!prepare || has_reserve_v<I>,
                          "unikv: a budget's impl<L> needs void reserve(const CapacityView&, const PrefillAsk&)");
        }
        return true;
    }
}

namespace detail {
// What an invalid pair gives, so that its one message is `check_budget`'s.
struct not_a_budget {};

template <class B, class L>
struct budget_for {
    static_assert(check_budget<B, L>());
    using type = std::conditional_t<is_budget_policy_v<B, L>, typename budget_impl_of<B, L>::type, not_a_budget>;
};
}  // namespace detail

/// The budget of policy `B` for layout `L`, checked (`check_budget<B, L>()`): what a composed cache owns.
template <class B, class L>
using budget_t = typename detail::budget_for<B, L>::type;

}  // namespace unikv
