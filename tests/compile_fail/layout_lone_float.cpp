// expect: unikv: a FloatPool sits at an end of the layout
// A lone pool is the down end of the arena, so it cannot float.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = FullOnly<Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = FullOnly<Pool<Component::full, FloatPool>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
