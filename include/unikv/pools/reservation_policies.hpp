#pragma once
/// \file
/// The shipped reservation policies. A pool with `PhysicalReservations` serves `alloc_physical`: the cache
/// loads an SWA window into reserved physical pages that are later bound under FULL's virtual ids.

#include <unikv/pools/reservation_policy_concept.hpp>

namespace unikv {

/// The pool hands out no physical reservations (the default).
struct NoReservations {
    static constexpr bool enabled = false;
};

/// The pool serves `alloc_physical` / `bind_swa` / `cancel` / `free_physical`; pending reservations block
/// its moves until their load is registered. Needs a pool that compacts lazily or on demand.
struct PhysicalReservations {
    static constexpr bool enabled = true;
};

static_assert(is_reservation_policy_v<NoReservations>);
static_assert(is_reservation_policy_v<PhysicalReservations>);

}  // namespace unikv
