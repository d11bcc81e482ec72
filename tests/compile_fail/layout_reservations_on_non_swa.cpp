// expect: unikv: PhysicalReservations are only for the Swa pool
// Reservations on the Full pool: only SWA windows load into reserved physical pages.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>, PhysicalReservations>, Pool<Component::full, LazyEndPool<Grow::down>>>;
#else
using L = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::down>, PhysicalReservations>>;
#endif

int main() { return static_cast<int>(sizeof(UnifiedAllocator<L, HostBackend>) == 0); }
