#pragma once
/// \file
/// Tree component policies `Full`, `Swa`, `Mamba`, their concept, and the component-set rule every tree core
/// checks: Full present and first, each component at most once.
///
/// A component names one kind of per-node cache state. FULL holds the virtual pages of the attention KV (the
/// tree's backbone); SWA marks whether the sliding-window rows bound to those same virtual pages are still live;
/// Mamba holds one recurrent state slot. Their cascade ranks order eviction on internal nodes (Full 2 > Swa 1 >
/// Mamba 0): dropping a component from a node also drops every lower-ranked component on it.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <unikv/component.hpp>
#include <unikv/config.hpp>

namespace unikv {

// `Component`, `ComponentMask` and `per_component` come from the one component vocabulary (`component.hpp`),
// shared by layouts, pools, capacity demands and the tree.

/// Full-attention component: the tree's backbone. Every tree has it, first.
struct Full {
    /// Runtime identity of the component.
    static constexpr Component id = Component::full;
    /// Eviction cascade rank on internal nodes (higher drops everything ranked at or below it).
    static constexpr int cascade_rank = 2;
};

/// Sliding-window component (window W tokens, set at runtime in `TreeConfig::swa_window`).
struct Swa {
    /// Runtime identity of the component.
    static constexpr Component id = Component::swa;
    /// Eviction cascade rank on internal nodes.
    static constexpr int cascade_rank = 1;
};

/// Recurrent-state component (Mamba / SSM): a state slot on the node where the state was taken.
struct Mamba {
    /// Runtime identity of the component.
    static constexpr Component id = Component::mamba;
    /// Eviction cascade rank on internal nodes.
    static constexpr int cascade_rank = 0;
};

/// Detection trait: `T::id` is a `Component` constant.
template <class T>
inline constexpr bool has_component_id_v = requires {
    { T::id } -> std::convertible_to<Component>;
};

/// Detection trait: `T::cascade_rank` is an integral constant.
template <class T>
inline constexpr bool has_cascade_rank_v = requires {
    { T::cascade_rank } -> std::convertible_to<int>;
};

/// True for the component policies a tree core understands: `Full`, `Swa`, `Mamba`.
template <class T>
inline constexpr bool is_tree_component_v =
    has_component_id_v<T> && has_cascade_rank_v<T> &&
    (std::is_same_v<T, Full> || std::is_same_v<T, Swa> || std::is_same_v<T, Mamba>);

/// A tree component policy.
template <class T>
concept TreeComponent = is_tree_component_v<T>;

namespace detail {

template <class T, class... Cs>
inline constexpr int count_of_v = (0 + ... + (std::is_same_v<T, Cs> ? 1 : 0));

template <class First, class... Rest>
inline constexpr bool first_is_full_v = std::is_same_v<First, Full>;

}  // namespace detail

/// Compile-time facts about a component list, with the validity rule split into named traits so each broken
/// rule gets its own `static_assert` message (see `check_tree_components`).
template <class... Cs>
struct tree_component_set {
    /// At least one component is listed.
    static constexpr bool non_empty = sizeof...(Cs) > 0;
    /// Every listed type is one of `Full`, `Swa`, `Mamba`.
    static constexpr bool all_known = (is_tree_component_v<Cs> && ...);
    /// `Full` is listed.
    static constexpr bool has_full = detail::count_of_v<Full, Cs...> > 0;
    /// `Full` is the first component.
    static constexpr bool full_first = [] {
        if constexpr (sizeof...(Cs) == 0) {
            return false;
        } else {
            return detail::first_is_full_v<Cs...>;
        }
    }();
    /// No component is listed twice.
    static constexpr bool unique =
        detail::count_of_v<Full, Cs...> <= 1 && detail::count_of_v<Swa, Cs...> <= 1 &&
        detail::count_of_v<Mamba, Cs...> <= 1;
    /// The set is one a tree core accepts.
    static constexpr bool valid = non_empty && all_known && has_full && full_first && unique;
    /// `Swa` is in the set.
    static constexpr bool has_swa = detail::count_of_v<Swa, Cs...> > 0;
    /// `Mamba` is in the set.
    static constexpr bool has_mamba = detail::count_of_v<Mamba, Cs...> > 0;
    /// The set as a mask (from the counts, so an unknown type in the list does not add a second error).
    static constexpr ComponentMask mask = [] {
        ComponentMask m;
        if (has_full) m = m.with(Component::full);
        if (has_swa) m = m.with(Component::swa);
        if (has_mamba) m = m.with(Component::mamba);
        return m;
    }();
};

/// Checks a tree's component list, one `static_assert` per rule, each firing only when the rules before it
/// hold, so a bad list gets exactly one message. Returns true (a bad list has already failed inside), so a host
/// writes `static_assert(check_tree_components<Cs...>())` without adding a second, message-less error.
template <class... Cs>
consteval bool check_tree_components() {
    using set = tree_component_set<Cs...>;
    static_assert(set::non_empty,
                  "unikv: a tree needs components and Full is mandatory; write RadixTree<Full>, "
                  "RadixTree<Full, Swa>, RadixTree<Full, Mamba> or RadixTree<Full, Swa, Mamba>");
    static_assert(!set::non_empty || set::all_known,
                  "unikv: tree components must be Full, Swa or Mamba; remove the other type from the "
                  "component list");
    static_assert(!set::non_empty || !set::all_known || set::has_full,
                  "unikv: Swa and Mamba components attach to FULL pages, so the tree needs Full; add Full as "
                  "the first component, e.g. RadixTree<Full, Swa>");
    static_assert(!set::non_empty || !set::all_known || !set::has_full || set::full_first,
                  "unikv: Full must be the first tree component (Swa and Mamba attach to it); move Full to "
                  "the front of the component list");
    static_assert(!set::non_empty || !set::all_known || !set::has_full || !set::full_first || set::unique,
                  "unikv: a tree component is listed twice; Full, Swa and Mamba may each appear at most "
                  "once, so remove the duplicate");
    return true;
}

// Each shipped component policy models the concept.
static_assert(TreeComponent<Full>, "unikv: Full must model TreeComponent");
static_assert(TreeComponent<Swa>, "unikv: Swa must model TreeComponent");
static_assert(TreeComponent<Mamba>, "unikv: Mamba must model TreeComponent");

}  // namespace unikv
