// expect: unikv: transfer_swa needs a layout with a Swa pool
// transfer_swa rebinds SWA pages (the tree's recover_swa_locked_full); a layout without SWA has none.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = SwaFullLayout;
#else
using L = MambaFullLayout;
#endif

void recover(UnifiedAllocator<L, HostBackend>& a, std::span<const VirtualPage> kept, std::span<const VirtualPage> in) {
    a.transfer_swa(kept, in);
}

int main() {}
