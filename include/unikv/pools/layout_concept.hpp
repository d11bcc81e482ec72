#pragma once
/// \file
/// The layout kind: what `UnifiedAllocator` needs from a layout type. One detection trait per requirement,
/// the aggregate `is_layout_v` and the concept `PoolLayout`. The rules a well-formed layout must also follow
/// (chain order, roles, policy combinations) are the compatibility traits in `layout.hpp`.

#include <concepts>
#include <cstddef>
#include <tuple>
#include <utility>

#include <unikv/component.hpp>

namespace unikv {

/// Has `L::size` and `L::members`, a `std::tuple` of that many member types.
template <class L>
inline constexpr bool has_layout_members_v = requires {
    { L::size } -> std::convertible_to<std::size_t>;
    typename L::members;
    requires std::tuple_size_v<typename L::members> == L::size;
};

/// `M` is a layout member: `M::component`, `M::policy` and `M::reservations`.
template <class M>
inline constexpr bool is_layout_member_v = requires {
    { M::component } -> std::convertible_to<Component>;
    typename M::policy;
    typename M::reservations;
};

namespace detail {
template <class Tuple, std::size_t... I>
constexpr bool all_layout_members(std::index_sequence<I...>) {
    return (is_layout_member_v<std::tuple_element_t<I, Tuple>> && ...);
}

template <class L>
constexpr bool members_are_pools() {
    if constexpr (has_layout_members_v<L>) {
        return all_layout_members<typename L::members>(std::make_index_sequence<L::size>{});
    } else {
        return false;
    }
}
}  // namespace detail

/// Every member of `L` is a layout member.
template <class L>
inline constexpr bool layout_members_are_pools_v = detail::members_are_pools<L>();

/// True when `L` models every layout requirement.
template <class L>
inline constexpr bool is_layout_v = has_layout_members_v<L> && layout_members_are_pools_v<L>;

/// A layout type (a chain of pools).
template <class L>
concept PoolLayout = is_layout_v<L>;

}  // namespace unikv
