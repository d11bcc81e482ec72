// expect: unikv: each Component appears at most once in a layout
// Two Swa pools: each component has one sub-pool.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TriPool<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
