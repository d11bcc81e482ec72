#pragma once
/// \file
/// `SeparateHostPools`: the host-pool policy with one pinned buffer per component of the layout, each with its
/// own page bytes (the device envelope of that pool) and capacity (`HostConfig`, split by `host_pages_for`).
/// It serves every shipped layout, the tri-pool included, and is what storage backends that store pages per
/// component need. Pages never move: a logical host page is its physical page, yet transfers still go
/// through a `HostLease`, so the transfer code is the same for both host-pool policies.
///
/// ```
/// SeparateHostPools::impl<HostBackend, SwaFullLayout> host(backend, alloc.spec(), {.total_bytes = 1 << 30},
///                                                          stream);
/// std::vector<HostPage> full(4), swa(2);
/// const HostRequest batch[] = {{Component::full, full}, {Component::swa, swa}};
/// if (host.alloc(batch)) { HostLease<HostBackend> lease = host.lease(); ... }
/// ```

#include <unikv/backend/host_backend.hpp>
#include <unikv/detail/host/separate_host_pools.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// The separate-pools host policy tag (see the file comment). Serves any valid layout.
struct SeparateHostPools {
    /// The host pools for backend `B` over the pools of layout `L`. Move-only.
    template <class B, class L>
    using impl = detail::host::separate_host_pools_impl<B, L>;
};

static_assert(check_host_pool<SeparateHostPools, HostBackend, FullLayout>() &&
              check_host_pool<SeparateHostPools, HostBackend, SwaFullLayout>() &&
              check_host_pool<SeparateHostPools, HostBackend, TriPoolLayout>() &&
              HostPoolPolicy<SeparateHostPools, HostBackend, MambaFullLayout>);

}  // namespace unikv
