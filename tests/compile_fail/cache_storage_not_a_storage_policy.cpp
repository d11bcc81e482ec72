// expect: unikv: a storage policy says whether it needs separate host pools
// A storage tag that does not say whether it needs separate host pools is refused with one message; the
// control names NoStorage.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Directory {};
struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
    using layout = unikv::SwaFullLayout;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using storage = unikv::NoStorage;
#else
    using storage = Directory;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
