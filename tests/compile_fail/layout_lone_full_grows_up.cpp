// expect: unikv: the first end of the layout grows down or the last grows up
// A lone Full pool is the down end of the arena and must grow down.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = FullOnly<Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = FullOnly<Pool<Component::full, LazyEndPool<Grow::up>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
