// expect: unikv: the bundle's tree_core is an explicit tree whose components differ from the layout's pools
// An explicit tree must hold exactly the layout's components: a FULL-only tree over SwaFullLayout would never
// track the SWA rows. The control lists Full and Swa.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using tree_core = unikv::RadixTree<unikv::Full, unikv::Swa>;
#else
    using tree_core = unikv::RadixTree<unikv::Full>;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
