// expect: unikv: a Pool's policy is not a sub-pool policy
// A Pool whose policy lacks placement, compaction and impl<Backend>: no sub-pool can be built from it.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

struct NotAPolicy {
    static constexpr Grow grow = Grow::up;
};
#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TwoEnd<Pool<Component::swa, NotAPolicy>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
