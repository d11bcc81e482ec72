// expect: unikv: a PageEnvelopeHost side is listed twice
// Both sides would grow from the same end of the host arena.
#include <unikv/backend/host_backend.hpp>
#include <unikv/host/page_envelope_host.hpp>
#include <unikv/pools/layouts.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Host = PageEnvelopeHost<Component::full>::impl<HostBackend, FullLayout>;
#else
using Host = PageEnvelopeHost<Component::full, Component::full>::impl<HostBackend, FullLayout>;
#endif

int main() { return static_cast<int>(sizeof(Host) == 0); }
