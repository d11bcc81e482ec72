// expect: unikv: a pool policy's impl<Backend> lacks take_bound
// The allocator checks each member it calls on a pool policy's impl, and names the missing one.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

template <class B>
struct no_take_bound : detail::lazy_end_pool_impl<B, Grow::down> {
    using detail::lazy_end_pool_impl<B, Grow::down>::lazy_end_pool_impl;
#ifndef UNIKV_COMPILE_FAIL_CONTROL
    template <class Id>
    void take_bound(std::span<const Id>, ByteBand, std::vector<std::int32_t>*) = delete;
#endif
};

struct NoTakeBound : LazyEndPool<Grow::down> {
    template <class B>
    using impl = no_take_bound<B>;
};

using L = FullOnly<Pool<Component::full, NoTakeBound>>;

std::int64_t room(const UnifiedAllocator<L, HostBackend>& a) { return a.available_size(); }

int main() {}
