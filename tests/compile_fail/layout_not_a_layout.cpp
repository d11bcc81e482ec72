// expect: unikv: the layout must be a unikv::Layout of unikv::Pool members
// A tuple of pools is not a layout: UnifiedAllocator takes a unikv::Layout (FullOnly, TwoEnd, TriPool).
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = std::tuple<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
