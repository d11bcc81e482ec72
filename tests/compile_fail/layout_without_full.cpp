// expect: unikv: a layout needs a Full pool
// SWA and Mamba without FULL: nothing mints the virtual page ids.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Last = Pool<Component::full, LazyEndPool<Grow::down>>;
#else
using Last = Pool<Component::mamba, LazyEndPool<Grow::down>>;
#endif
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Last>;

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
