#pragma once
/// \file
/// `NoHostTier`: the host-pool policy of a device-only cache. It has no host memory: every component's host
/// pool holds zero pages, so no host value ever exists, nothing is matched on host and nothing is loaded back.
/// A cache over it runs `HostConfig::write = {.policy = WritePolicy::none}` (a policy that copies to the host
/// has nowhere to copy; the cache's constructor throws `logic_error` otherwise), and cannot retract requests
/// into the host pool (a compile error of the cache, `cache/compatibility.hpp`).

#include <cstdint>
#include <type_traits>

#include <unikv/backend/host_backend.hpp>
#include <unikv/detail/host/separate_host_pools.hpp>
#include <unikv/error.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

namespace detail::host {

// Separate host pools of zero pages: the protocol holds (leases, frees of nothing), and every alloc is short.
template <class B, class L>
class no_host_tier_impl : public separate_host_pools_impl<B, L> {
public:
    /// Refuses a `config` that asks for host memory (`logic_error`): this policy has none to give.
    no_host_tier_impl(B& backend, const ArenaSpec& device, const HostConfig& config, typename B::stream_ref stream)
        : separate_host_pools_impl<B, L>(backend, device, empty(config), stream) {}

private:
    static HostConfig empty(const HostConfig& config) {
        std::int64_t pages = 0;
        for (Component c : all_components) pages += config.pages[c];
        UNIKV_EXPECTS(config.total_bytes == 0 && pages == 0, "NoHostTier has no host memory, but the HostConfig asks "
                      "for ", config.total_bytes, " bytes and ", pages, " pages; leave it empty, or use "
                      "SeparateHostPools or PageEnvelopeHost<> for a host tier");
        return HostConfig{};
    }
};

}  // namespace detail::host

/// No host tier (see the file comment). Serves any valid layout.
struct NoHostTier {
    /// Zero-page host pools for backend `B` over the pools of layout `L`. Move-only.
    template <class B, class L>
    using impl = detail::host::no_host_tier_impl<B, L>;
};

static_assert(check_host_pool<NoHostTier, HostBackend, SwaFullLayout>() &&
              check_host_pool<NoHostTier, HostBackend, TriPoolLayout>());

/// True when host-pool policy `H` is `NoHostTier`: the cache has no host tier.
template <class H>
inline constexpr bool is_no_host_tier_v = std::is_same_v<H, NoHostTier>;

}  // namespace unikv
