#pragma once
/// \file
/// The shipped layouts, as aliases so error messages and symbols stay short.
///
/// | alias | chain (low bytes to high) |
/// |---|---|
/// | `FullLayout` | `[Full LazyEnd down]` (dense models: one pool, no SWA or Mamba) |
/// | `SwaFullLayout` | `[Swa LazyEnd up (reservations) | Full LazyEnd down]` |
/// | `MambaFullLayout` | `[Mamba LazyEnd up | Full LazyEnd down]` |
/// | `TriPoolLayout` | `[Mamba LazyEnd up | Swa Float (reservations) | Full LazyEnd down]` |
/// | `EagerSwaFullLayout` | `[Swa EagerEnd up | Full EagerEnd down]` (no host tier: no gates, no reservations) |
/// | `EagerMambaFullLayout` | `[Mamba EagerEnd up | Full EagerEnd down]` |

#include <unikv/pools/layout.hpp>
#include <unikv/pools/eager_end_pool.hpp>
#include <unikv/pools/float_pool.hpp>
#include <unikv/pools/lazy_end_pool.hpp>
#include <unikv/pools/reservation_policies.hpp>

namespace unikv {

using FullLayout = FullOnly<Pool<Component::full, LazyEndPool<Grow::down>>>;
using SwaFullLayout = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>,
                             Pool<Component::full, LazyEndPool<Grow::down>>>;
using MambaFullLayout = TwoEnd<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
using TriPoolLayout = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>,
                              Pool<Component::swa, FloatPool, PhysicalReservations>,
                              Pool<Component::full, LazyEndPool<Grow::down>>>;
using EagerSwaFullLayout = TwoEnd<Pool<Component::swa, EagerEndPool<Grow::up>>, Pool<Component::full, EagerEndPool<Grow::down>>>;
using EagerMambaFullLayout =
    TwoEnd<Pool<Component::mamba, EagerEndPool<Grow::up>>, Pool<Component::full, EagerEndPool<Grow::down>>>;

}  // namespace unikv
