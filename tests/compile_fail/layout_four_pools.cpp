// expect: unikv: a layout has one pool \(FullOnly: the Full down end\), two
// Four pools with one float in the middle: only one, two or three pools are supported.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = Layout<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, FloatPool>, Pool<Component::swa, EagerEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
