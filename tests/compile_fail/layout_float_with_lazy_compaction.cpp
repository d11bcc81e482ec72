// expect: unikv: the middle pool of a TriPool floats and moves only on demand
// The tri-pool's middle pool must be a FloatPool; a lazily compacting pool cannot float.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using Middle = Pool<Component::swa, FloatPool, PhysicalReservations>;
#else
using Middle = Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>;
#endif
using L = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Middle, Pool<Component::full, LazyEndPool<Grow::down>>>;

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
