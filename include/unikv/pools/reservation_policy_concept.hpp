#pragma once
/// \file
/// The reservation policy kind (`NoReservations`, `PhysicalReservations`): whether a pool hands out physical
/// reservations for host-to-device loads (`alloc_physical`). One detection trait per requirement, the
/// aggregate `is_reservation_policy_v` and the concept `ReservationPolicy`.

#include <concepts>

namespace unikv {

/// Has `R::enabled`, a `bool` constant.
template <class R>
inline constexpr bool has_reservations_enabled_v = requires {
    { R::enabled } -> std::convertible_to<bool>;
};

/// True when `R` models every reservation policy requirement.
template <class R>
inline constexpr bool is_reservation_policy_v = has_reservations_enabled_v<R>;

/// A reservation policy tag.
template <class R>
concept ReservationPolicy = is_reservation_policy_v<R>;

namespace detail {
template <class R>
constexpr bool enabled_or_false() {
    if constexpr (has_reservations_enabled_v<R>) {
        return static_cast<bool>(R::enabled);
    } else {
        return false;
    }
}
}  // namespace detail

/// True when `R` is a reservation policy that enables reservations.
template <class R>
inline constexpr bool reservations_enabled_v = detail::enabled_or_false<R>();

}  // namespace unikv
