// expect: unikv: Full must be the down end
// Full as the up end: FULL must be the last (high-byte) pool.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TwoEnd<Pool<Component::full, LazyEndPool<Grow::up>>, Pool<Component::swa, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
