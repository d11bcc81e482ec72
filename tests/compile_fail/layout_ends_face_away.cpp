// expect: unikv: the first end of the layout grows down or the last grows up
// The first end grows down and the last up: both grow away from the middle, out of the arena.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::down>>, Pool<Component::full, LazyEndPool<Grow::up>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
