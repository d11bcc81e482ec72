// expect: unikv: install_move_gate needs every pool of the layout to compact lazily or on demand
// A move gate on a layout with an eager pool: an eager free must compact, which a closed gate forbids.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = SwaFullLayout;
#else
using L = EagerSwaFullLayout;
#endif

void install(UnifiedAllocator<L, HostBackend>& a) {
    const MoveGateHold hold = a.install_move_gate(MoveGateSlot::host_transfer);
}

int main() {}
