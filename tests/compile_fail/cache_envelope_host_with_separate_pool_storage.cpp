// expect: unikv: the bundle's storage needs separate host pools \(it stores pages per component\)
// A storage backend that stores pages per component cannot read them out of one shared host arena; the
// control gives it SeparateHostPools.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>
#include <unikv/host/page_envelope_host.hpp>

struct PerComponentStore {
    static constexpr bool needs_separate_pools = true;
};
struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
    using storage = PerComponentStore;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using host_pools = unikv::SeparateHostPools;
#else
    using host_pools = unikv::PageEnvelopeHost<>;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
