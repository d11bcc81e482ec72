// expect: unikv: a cache policy bundle needs a layout, the one policy without a default
// A bundle derived from DefaultCachePolicies that forgets the layout is rejected with one message; the
// control names one.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using layout = unikv::SwaFullLayout;
#endif
};
static_assert(sizeof(unikv::Cache<Policies>) > 0);
int main() {}
