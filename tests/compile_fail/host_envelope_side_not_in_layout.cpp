// expect: unikv: a PageEnvelopeHost side names a component that is not a pool of the layout
// A Mamba side over a FULL+SWA arena would share no device region with the FULL side.
#include <unikv/backend/host_backend.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Host = PageEnvelopeHost<Component::full, Component::swa>::impl<HostBackend, SwaFullLayout>;
#else
using Host = PageEnvelopeHost<Component::full, Component::mamba>::impl<HostBackend, SwaFullLayout>;
#endif

int main() { return static_cast<int>(sizeof(Host) == 0); }
