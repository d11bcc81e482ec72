// expect: unikv: buffer-only host mode stages FULL and SWA pages for the storage tier, but the layout has a Mamba pool
// Buffer-only host mode over a layout with Mamba (ARCHITECTURE.md §2): the states are not staged. The control is
// the same bundle over SwaFullLayout, with a storage tier to stage for.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct StagingStorage {
    static constexpr bool needs_separate_pools = false;
};

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using layout = unikv::SwaFullLayout;
#else
    using layout = unikv::MambaFullLayout;
#endif
    using host_mode = unikv::BufferOnly;
    using storage = StagingStorage;
};

static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
