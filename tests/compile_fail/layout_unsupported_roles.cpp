// expect: unikv: supported chains are \[Full down\]
// A tri-pool with Swa at the up end and Mamba floating: the float of a tri-pool is Swa.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TriPool<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::mamba, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
