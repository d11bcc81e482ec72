#pragma once
/// \file
/// Layouts as types. A layout is the chain of sub-pools over the arena in byte order, low to high:
/// `[up end | float middle | down end]`. The chain order, each pool's policy and whether it takes physical
/// reservations are part of the type; sizes are runtime configuration (`ArenaConfig`).
///
/// ```
/// using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>,
///                  Pool<Component::full, LazyEndPool<Grow::down>>>;
/// ```
///
/// Every rule a layout must follow is a named compatibility trait (`layout_has_full_v`, ...), checked by
/// `check_layout<L, B>()`, whose `static_assert` messages start with `unikv:`, name the roles, state the rule
/// and give the fix, one message per bad layout. `UnifiedAllocator` calls it, so a bad layout does not compile.

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include <unikv/component.hpp>
#include <unikv/pools/layout_concept.hpp>
#include <unikv/arena/model.hpp>
#include <unikv/pools/pool_policy_concept.hpp>
#include <unikv/pools/reservation_policies.hpp>

namespace unikv {

/// One member of a layout: the component it stores, its sub-pool policy, and its reservation policy.
template <Component C, class Policy, class Reservations = NoReservations>
struct Pool {
    static constexpr Component component = C;
    using policy = Policy;
    using reservations = Reservations;
};

/// A chain of pools in byte order (low to high). Use the `TwoEnd` and `TriPool` aliases.
template <class... Pools>
struct Layout {
    static constexpr std::size_t size = sizeof...(Pools);
    using members = std::tuple<Pools...>;
};

/// `[Down end]` alone: a FULL-only layout for dense models.
template <class Down>
using FullOnly = Layout<Down>;

/// `[Up end | Down end]`, for example `[Swa up | Full down]` or `[Mamba up | Full down]`.
template <class Up, class Down>
using TwoEnd = Layout<Up, Down>;

/// `[Up end | Float | Down end]`, the tri-pool `[Mamba up | Swa float | Full down]`.
template <class Up, class Middle, class Down>
using TriPool = Layout<Up, Middle, Down>;

/// The `I`-th member (low to high) of layout `L`.
template <class L, std::size_t I>
using layout_member_t = std::tuple_element_t<I, typename L::members>;

namespace detail {

/// Per-member facts of a layout's member tuple, as constexpr arrays (plain templates: nvcc compiles them).
template <class Tuple>
struct members_info;
template <class... P>
struct members_info<std::tuple<P...>> {
    static constexpr std::size_t size = sizeof...(P);
    static constexpr std::array<Component, sizeof...(P)> components{P::component...};
    static constexpr std::array<bool, sizeof...(P)> floats{is_float_policy_v<typename P::policy>...};
    static constexpr std::array<bool, sizeof...(P)> eager{(compaction_of_v<typename P::policy> == Compaction::eager)...};
    static constexpr std::array<bool, sizeof...(P)> reserving{reservations_enabled_v<typename P::reservations>...};
    static constexpr bool reservation_policies_valid = (true && ... && is_reservation_policy_v<typename P::reservations>);
    template <class B>
    static constexpr bool policies_valid = (true && ... && is_pool_policy_v<typename P::policy, B>);
};

template <class L>
using info_t = members_info<typename L::members>;

template <class T, std::size_t N>
constexpr std::size_t count_equal(const std::array<T, N>& a, T value) {
    std::size_t n = 0;
    for (const T& x : a) n += x == value ? 1u : 0u;
    return n;
}

template <class T, std::size_t N>
constexpr std::size_t index_of_first(const std::array<T, N>& a, T value) {
    for (std::size_t i = 0; i < N; ++i) {
        if (a[i] == value) return i;
    }
    return N;
}

template <class P>
constexpr bool grows(Grow g) {
    if constexpr (is_end_policy_v<P>) {
        return static_cast<Grow>(P::grow) == g;
    } else {
        return false;
    }
}

/// True when the first member of `L` grows `first` and the last grows `last` (false for layouts without two
/// ends).
template <class L>
constexpr bool ends_grow(Grow first, Grow last) {
    if constexpr (L::size < 2) {
        return false;
    } else {
        return grows<typename layout_member_t<L, 0>::policy>(first) &&
               grows<typename layout_member_t<L, L::size - 1>::policy>(last);
    }
}

template <class L>
constexpr bool middle_members_float() {
    const auto& floats = info_t<L>::floats;
    for (std::size_t i = 1; i + 1 < floats.size(); ++i) {
        if (!floats[i]) return false;
    }
    return true;
}

template <class L>
constexpr bool no_float_at_an_end() {
    const auto& floats = info_t<L>::floats;
    return floats.empty() || (!floats.front() && !floats.back());
}

template <class L>
constexpr bool reservations_not_eager() {
    for (std::size_t i = 0; i < L::size; ++i) {
        if (info_t<L>::reserving[i] && info_t<L>::eager[i]) return false;
    }
    return true;
}

template <class L>
constexpr bool reservations_on_swa() {
    for (std::size_t i = 0; i < L::size; ++i) {
        if (info_t<L>::reserving[i] && info_t<L>::components[i] != Component::swa) return false;
    }
    return true;
}

template <class L>
constexpr bool roles_supported() {
    const auto& c = info_t<L>::components;
    if constexpr (L::size == 1) {
        return c[0] == Component::full;
    } else if constexpr (L::size == 2) {
        return c[0] != Component::full;
    } else if constexpr (L::size == 3) {
        return c[0] == Component::mamba && c[1] == Component::swa;
    } else {
        return false;
    }
}

}  // namespace detail

/// Number of members of `L` that store component `C`.
template <class L, Component C>
inline constexpr std::size_t layout_count_of_v = detail::count_equal(detail::info_t<L>::components, C);

/// True when layout `L` has a pool for component `C`.
template <class L, Component C>
inline constexpr bool layout_has_v = layout_count_of_v<L, C> != 0;

/// The chain index of the pool of component `C` in `L` (`L::size` when absent).
template <class L, Component C>
inline constexpr std::size_t layout_index_of_v = detail::index_of_first(detail::info_t<L>::components, C);

/// The components present in `L`: compare it with a tree's `components::mask`.
template <class L>
inline constexpr ComponentMask layout_components_v = [] {
    ComponentMask m;
    for (Component c : detail::info_t<L>::components) m = m | ComponentMask::of(c);
    return m;
}();

/// True when `L` has a floating member (a tri-pool).
template <class L>
inline constexpr bool layout_has_float_v = detail::count_equal(detail::info_t<L>::floats, true) != 0;

// ---- compatibility traits: one per rule ----------------------------------------------------------------
// Each is defined for a `Layout` of `Pool` members; `check_layout` asks them in order, so a rule is only
// evaluated for a layout that passed every rule before it.

/// Rule: a layout has a FULL pool (FULL mints the virtual page ids).
template <class L>
inline constexpr bool layout_has_full_v = layout_has_v<L, Component::full>;

/// Rule: each component appears at most once.
template <class L>
inline constexpr bool layout_components_unique_v = layout_count_of_v<L, Component::full> <= 1 &&
                                                   layout_count_of_v<L, Component::swa> <= 1 &&
                                                   layout_count_of_v<L, Component::mamba> <= 1;

/// Rule: at most one floating pool.
template <class L>
inline constexpr bool layout_at_most_one_float_v = detail::count_equal(detail::info_t<L>::floats, true) <= 1;

/// Rule: one pool (a FULL-only dense model: the down end alone), two (two ends) or three (two ends and a float).
template <class L>
inline constexpr bool layout_size_supported_v = L::size >= 1 && L::size <= 3;

/// Rule: the first and the last pool are end pools (a float can never sit at an end).
template <class L>
inline constexpr bool layout_no_float_at_an_end_v = detail::no_float_at_an_end<L>();

/// Rule: the two ends do not grow the same way.
template <class L>
inline constexpr bool layout_ends_grow_differently_v =
    !detail::ends_grow<L>(Grow::up, Grow::up) && !detail::ends_grow<L>(Grow::down, Grow::down);

/// Rule: the first end grows up and the last grows down (they grow toward each other, not apart); a lone pool
/// is the down end and grows down.
template <class L>
inline constexpr bool layout_ends_face_each_other_v = [] {
    if constexpr (L::size == 1) {
        return detail::grows<typename layout_member_t<L, 0>::policy>(Grow::down);
    } else {
        return !detail::ends_grow<L>(Grow::down, Grow::up);
    }
}();

/// Rule: every pool between the ends floats (`FloatPool`); a lazily or eagerly compacting end policy
/// cannot sit in the middle.
template <class L>
inline constexpr bool layout_middle_floats_v = detail::middle_members_float<L>();

/// Rule: reservations only on pools that never move pages behind a queued load's back (not eager).
template <class L>
inline constexpr bool layout_reservations_not_eager_v = detail::reservations_not_eager<L>();

/// Rule: reservations only on the SWA pool (the cache loads SWA windows into reserved physical pages).
template <class L>
inline constexpr bool layout_reservations_on_swa_v = detail::reservations_on_swa<L>();

/// Rule: every member's reservation policy models `ReservationPolicy`.
template <class L>
inline constexpr bool layout_reservation_policies_valid_v = detail::info_t<L>::reservation_policies_valid;

/// Rule: FULL is the down end (the last pool).
template <class L>
inline constexpr bool layout_full_is_down_end_v = L::size != 0 && detail::info_t<L>::components[L::size - 1] == Component::full;

/// Rule: the supported chains are `[Full]`, `[Swa | Full]`, `[Mamba | Full]` and `[Mamba | Swa | Full]`.
template <class L>
inline constexpr bool layout_roles_supported_v = detail::roles_supported<L>();

/// Rule (for `install_move_gate`): no member compacts eagerly, since a closed gate would have to block an
/// eager pool's free.
template <class L>
inline constexpr bool layout_allows_move_gates_v = detail::count_equal(detail::info_t<L>::eager, true) == 0;

/// Rule: every member's policy models `PoolPolicy` for backend `B`.
template <class L, class B>
inline constexpr bool layout_policies_valid_v = detail::info_t<L>::template policies_valid<B>;

namespace detail {

/// The layout rules in the order `check_layout` reports them: the first broken one names the layout's defect.
/// Type-level rules come first (a member that is not a policy leaves nothing else to check), the specific
/// ones before the general (two floats before an unsupported size, since two floats need four pools).
enum class layout_rule : std::uint8_t {
    none,
    is_layout,
    reservation_policies_valid,
    policies_valid,
    at_most_one_float,
    size_supported,
    has_full,
    components_unique,
    no_float_at_an_end,
    middle_floats,
    ends_grow_differently,
    ends_face_each_other,
    full_is_down_end,
    roles_supported,
    reservations_not_eager,
    reservations_on_swa,
};

/// The first rule `L` breaks for backend `B` (`layout_rule::none` for a valid layout). Each trait is
/// evaluated only when the rules before it hold, so a trait never sees a type it is not defined for.
template <class L, class B>
consteval layout_rule first_broken_layout_rule() {
    if constexpr (!is_layout_v<L>) {
        return layout_rule::is_layout;
    } else if constexpr (!layout_reservation_policies_valid_v<L>) {
        return layout_rule::reservation_policies_valid;
    } else if constexpr (!layout_policies_valid_v<L, B>) {
        return layout_rule::policies_valid;
    } else if constexpr (!layout_at_most_one_float_v<L>) {
        return layout_rule::at_most_one_float;
    } else if constexpr (!layout_size_supported_v<L>) {
        return layout_rule::size_supported;
    } else if constexpr (!layout_has_full_v<L>) {
        return layout_rule::has_full;
    } else if constexpr (!layout_components_unique_v<L>) {
        return layout_rule::components_unique;
    } else if constexpr (!layout_no_float_at_an_end_v<L>) {
        return layout_rule::no_float_at_an_end;
    } else if constexpr (!layout_middle_floats_v<L>) {
        return layout_rule::middle_floats;
    } else if constexpr (!layout_ends_grow_differently_v<L>) {
        return layout_rule::ends_grow_differently;
    } else if constexpr (!layout_ends_face_each_other_v<L>) {
        return layout_rule::ends_face_each_other;
    } else if constexpr (!layout_full_is_down_end_v<L>) {
        return layout_rule::full_is_down_end;
    } else if constexpr (!layout_roles_supported_v<L>) {
        return layout_rule::roles_supported;
    } else if constexpr (!layout_reservations_not_eager_v<L>) {
        return layout_rule::reservations_not_eager;
    } else if constexpr (!layout_reservations_on_swa_v<L>) {
        return layout_rule::reservations_on_swa;
    } else {
        return layout_rule::none;
    }
}

}  // namespace detail

/// True when `L` follows every layout rule for backend `B` (any type may be asked).
template <class L, class B>
inline constexpr bool is_valid_layout_v = detail::first_broken_layout_rule<L, B>() == detail::layout_rule::none;

/// Checks every layout rule, one `static_assert` per rule, each firing only when the rules before it hold, so
/// a bad layout gets exactly one message. Returns true (a bad layout has already failed inside), so a host
/// writes `static_assert(check_layout<L, B>())` without adding a second, message-less error.
/// `UnifiedAllocator` does.
template <class L, class B>
consteval bool check_layout() {
    using rule = detail::layout_rule;
    constexpr detail::layout_rule broken = detail::first_broken_layout_rule<L, B>();
    static_assert(broken != rule::is_layout,
                  "unikv: the layout must be a unikv::Layout of unikv::Pool members; use FullOnly<Down>, "
                  "TwoEnd<Up, Down> or TriPool<Up, Float, Down>");
    static_assert(broken != rule::reservation_policies_valid,
                  "unikv: a Pool's third argument must be a reservation policy (NoReservations or "
                  "PhysicalReservations)");
    static_assert(broken != rule::policies_valid,
                  "unikv: a Pool's policy is not a sub-pool policy (needs placement, compaction, grow for ends and "
                  "a nested impl<Backend>); use LazyEndPool, EagerEndPool or FloatPool");
    static_assert(broken != rule::at_most_one_float,
                  "unikv: a layout holds at most one FloatPool (the middle of a tri-pool); two floats would have "
                  "no end to grow from; make the extra float an end pool or drop it");
    static_assert(broken != rule::size_supported,
                  "unikv: a layout has one pool (FullOnly: the Full down end), two (TwoEnd: up end, down end) or "
                  "three (TriPool: up end, FloatPool, down end)");
    static_assert(broken != rule::has_full,
                  "unikv: a layout needs a Full pool: FULL mints the virtual page ids that Swa binds and requests "
                  "hold; add Pool<Component::full, LazyEndPool<Grow::down>> as the down end");
    static_assert(broken != rule::components_unique,
                  "unikv: each Component appears at most once in a layout; merge the duplicate pools");
    static_assert(broken != rule::no_float_at_an_end,
                  "unikv: a FloatPool sits at an end of the layout, but a float only lives in the middle of a "
                  "TriPool; use LazyEndPool<Grow::up> for the first pool and LazyEndPool<Grow::down> for the last");
    static_assert(broken != rule::middle_floats,
                  "unikv: the middle pool of a TriPool floats and moves only on demand (make_room / "
                  "compact_holes); a lazily or eagerly compacting end policy cannot float there; use FloatPool "
                  "for the middle pool");
    static_assert(broken != rule::ends_grow_differently,
                  "unikv: the two end pools of the layout grow the same way, so they would collide; the first "
                  "(low-byte) end must grow up and the last (high-byte) end must grow down: use "
                  "LazyEndPool<Grow::up> first and LazyEndPool<Grow::down> last");
    static_assert(broken != rule::ends_face_each_other,
                  "unikv: the first end of the layout grows down or the last grows up, away from the middle; use "
                  "Grow::up for the first (low-byte) pool and Grow::down for the last (high-byte) pool (a lone "
                  "Full pool is the down end: Grow::down)");
    static_assert(broken != rule::full_is_down_end,
                  "unikv: Full must be the down end (the last, high-byte pool) of the layout; put "
                  "Pool<Component::full, LazyEndPool<Grow::down>> last");
    static_assert(broken != rule::roles_supported,
                  "unikv: supported chains are [Full down], [Swa up | Full down], [Mamba up | Full down] and the "
                  "tri-pool [Mamba up | Swa float | Full down]; reorder the pools to one of them");
    static_assert(broken != rule::reservations_not_eager,
                  "unikv: PhysicalReservations on an EagerEndPool: an eager pool compacts on every free and would "
                  "move reserved pages under a queued load; use LazyEndPool (or FloatPool) for the reserving pool");
    static_assert(broken != rule::reservations_on_swa,
                  "unikv: PhysicalReservations are only for the Swa pool (the cache loads SWA windows into reserved "
                  "physical pages); Full and Mamba load through alloc / alloc_state; drop PhysicalReservations "
                  "from that pool");
    return true;
}

}  // namespace unikv
