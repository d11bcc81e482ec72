// expect: unikv: PageEnvelopeHost mirrors a two-end device arena, but the layout has a FloatPool
// The cache routes the host-pool rule to check_host_pool: envelope host pools over the tri-pool's floating SWA
// pool get that one message. The control uses SeparateHostPools.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>
#include <unikv/host/page_envelope_host.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::TriPoolLayout;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using host_pools = unikv::SeparateHostPools;
#else
    using host_pools = unikv::PageEnvelopeHost<>;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
