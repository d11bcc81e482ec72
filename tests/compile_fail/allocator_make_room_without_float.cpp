// expect: unikv: make_room needs a TriPool layout with a FloatPool
// make_room moves the floating pool; a two-end layout has none.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPoolLayout;
#else
using L = SwaFullLayout;
#endif

std::size_t open_low(UnifiedAllocator<L, HostBackend>& a) { return a.make_room(Side::low, 4096); }

int main() {}
