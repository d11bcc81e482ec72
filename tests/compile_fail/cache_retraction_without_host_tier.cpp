// expect: unikv: retraction backs a preempted request's rows up into the host pool, but host_pools is NoHostTier
// A device-only cache compiles, but retracting a request into its (absent) host pool does not; the control
// gives the bundle host pools.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using host_pools = unikv::SeparateHostPools;
#else
    using host_pools = unikv::NoHostTier;
#endif
};

unikv::RetractionBackup preempt(unikv::Cache<Policies>& cache, const unikv::RequestRows& rows) {
    return cache.backup(rows);
}
int main() {}
