// expect: unikv: retraction into the host pool backs up FULL rows and the SWA window, but the layout has a Mamba pool
// A cache over a layout with Mamba compiles, but retracting a request does not (the backup does not carry the
// running state); the cache routes the rule to check_retraction. The control retracts on SwaFullLayout.
#include <unikv/backend/host_backend.hpp>
#include <unikv/cache.hpp>

struct Policies : unikv::DefaultCachePolicies {
    using backend = unikv::HostBackend;
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using layout = unikv::SwaFullLayout;
#else
    using layout = unikv::MambaFullLayout;
#endif
};

unikv::RetractionBackup preempt(unikv::Cache<Policies>& cache, const unikv::RequestRows& rows) {
    return cache.backup(rows);
}
int main() {}
