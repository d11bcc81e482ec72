#pragma once
/// \file
/// `PageEnvelopeHost<Sides...>`: the host-pool policy with ONE pinned host arena mirroring the device page
/// envelopes, shared by up to two sides that grow from its two ends, as the device arena's pools do: FULL
/// from the top (the arena's end) downward, the other side from byte 0 upward. Each side's page is its device
/// envelope; its page count is limited only by where it meets the other side, so the split between the sides
/// follows the workload. `PageEnvelopeHost<>` takes the layout's pools as its sides. Stores like mori/UMBP,
/// which keep one object per unified page envelope, use it; a storage backend that stores per component needs
/// `SeparateHostPools`.
///
/// Id domains: the tree holds logical host pages (`HostPage`, per side); physical pages are private (maps
/// both ways, holes, watermarks) and change when the arena compacts. Only a `HostLease` translates, and while a
/// lease is held, or a released lease's copy has not completed, no byte moves.
///
/// Allocation: `alloc(batch)` is all-or-nothing; physical pages come from holes first, then past the
/// watermark; a free of the edge page retreats the watermark. A batch that fits only packed compacts the arena
/// first (moves bytes pinned->pinned on the pool's stream after every released lease's event, synchronizes,
/// rebuilds the maps: a cold path), and fails with `HostShortfall::leased`, changing nothing, while a lease
/// is held.
///
/// Rejected at compile time (one `unikv:` message each, see `check_host_pool`): a layout with a FloatPool
/// (TriPoolLayout: the floating SWA has no end of the host arena), more than two sides, a side that is not a
/// pool of the layout (it shares no device region), a side listed twice.

#include <unikv/backend/host_backend.hpp>
#include <unikv/detail/host/page_envelope_host.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// The page-envelope host policy tag over sides `Sides...` (none listed: the layout's pools).
template <Component... Sides>
struct PageEnvelopeHost {
    /// Every side's pages live in one shared host arena (`host_pools_share_one_arena_v`).
    static constexpr bool one_host_arena = true;
    /// The first envelope rule layout `L` breaks (`host_layout_rule::none` when this policy serves `L`).
    template <class L>
    static constexpr host_layout_rule layout_rule = detail::host::envelope_layout_rule<L, Sides...>();

    /// The host arena for backend `B` over layout `L`. Move-only.
    template <class B, class L>
    using impl = detail::host::page_envelope_host_impl<B, L, Sides...>;
};

static_assert(check_host_pool<PageEnvelopeHost<>, HostBackend, FullLayout>() &&
              check_host_pool<PageEnvelopeHost<>, HostBackend, SwaFullLayout>() &&
              check_host_pool<PageEnvelopeHost<>, HostBackend, MambaFullLayout>() &&
              HostPoolPolicy<PageEnvelopeHost<Component::full, Component::swa>, HostBackend, EagerSwaFullLayout> &&
              !HostPoolPolicy<PageEnvelopeHost<>, HostBackend, TriPoolLayout>);

}  // namespace unikv
