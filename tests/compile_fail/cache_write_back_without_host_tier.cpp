// expect: unikv: the bundle's write policy copies device data to the host tier .* but host_pools is NoHostTier
// Write-back with no host tier has nowhere to copy evicted data; the control is the device-only bundle
// (NoHostWrites).
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
    using host_pools = unikv::NoHostTier;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using write_policy = unikv::NoHostWrites;
#else
    using write_policy = unikv::WriteBack;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
