// expect: unikv: buffer-only host mode stages host copies for a storage tier, but the bundle's storage is NoStorage
// Buffer-only host mode stages for a storage tier; with NoStorage its host copies would never be served. The
// control names a storage policy.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct StagingStorage {
    static constexpr bool needs_separate_pools = false;
};

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
    using host_mode = unikv::BufferOnly;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using storage = StagingStorage;
#endif
};

static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
