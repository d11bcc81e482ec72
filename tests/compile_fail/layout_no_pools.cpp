// expect: unikv: a layout has one pool \(FullOnly: the Full down end\), two
// A layout with no pool: the smallest supported layout is FullOnly (one Full down end).
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = FullOnly<Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = Layout<>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
