// expect: unikv: PageEnvelopeHost mirrors a two-end device arena, but the layout has a FloatPool
// The tri-pool's floating SWA pool has no end of a host arena to grow from: PageEnvelopeHost<> over
// TriPoolLayout is rejected with one message; the fix it names (SeparateHostPools) builds.
#include <unikv/backend/host_backend.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Host = SeparateHostPools::impl<HostBackend, TriPoolLayout>;
#else
using Host = PageEnvelopeHost<>::impl<HostBackend, TriPoolLayout>;
#endif

int main() { return static_cast<int>(sizeof(Host) == 0); }
