// expect: unikv: PageEnvelopeHost takes at most two sides
// A host arena has two ends, so three sides are rejected (before the side that is no pool of the layout).
#include <unikv/backend/host_backend.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Policy = PageEnvelopeHost<Component::full, Component::swa>;
#else
using Policy = PageEnvelopeHost<Component::full, Component::swa, Component::mamba>;
#endif

static_assert(check_host_pool<Policy, HostBackend, SwaFullLayout>());

int main() { return static_cast<int>(sizeof(Policy::impl<HostBackend, SwaFullLayout>) == 0); }
