// expect: unikv: compact_holes needs a TriPool layout with a FloatPool
// compact_holes packs the floating pool's holes; a FULL-only layout has no float.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPoolLayout;
#else
using L = FullLayout;
#endif

std::size_t pack_low(UnifiedAllocator<L, HostBackend>& a) { return a.compact_holes(Side::low); }

int main() {}
