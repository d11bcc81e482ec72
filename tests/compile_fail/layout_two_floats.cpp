// expect: unikv: a layout holds at most one FloatPool
// Two floating pools between the ends: only one float is allowed (the tri-pool's SWA).
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>,
                  Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = Layout<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>,
                 Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
