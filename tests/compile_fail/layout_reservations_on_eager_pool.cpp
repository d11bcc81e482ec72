// expect: unikv: PhysicalReservations on an EagerEndPool
// An eager pool compacts on every free and would move reserved pages under a queued load.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using SwaPool = Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>;
#else
using SwaPool = Pool<Component::swa, EagerEndPool<Grow::up>, PhysicalReservations>;
#endif
using L = TwoEnd<SwaPool, Pool<Component::full, EagerEndPool<Grow::down>>>;

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
