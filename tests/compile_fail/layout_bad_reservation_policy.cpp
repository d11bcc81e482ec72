// expect: unikv: a Pool's third argument must be a reservation policy
// The third argument of a Pool is its reservation policy; a type without `enabled` is none.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

struct NotReservations {};
#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>, NotReservations>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
