// expect: unikv: a pool policy's impl<Backend> lacks project\(ByteBand room
// Every role answers the capacity engine through one query; an impl without it is named at the allocator.
#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

using namespace unikv;

template <class B>
struct no_project : detail::lazy_end_pool_impl<B, Grow::down> {
    using detail::lazy_end_pool_impl<B, Grow::down>::lazy_end_pool_impl;
#ifndef UNIKV_COMPILE_FAIL_CONTROL
    std::optional<ByteBand> project(ByteBand, std::int64_t, Projection) const = delete;
#endif
};

struct NoProject : LazyEndPool<Grow::down> {
    template <class B>
    using impl = no_project<B>;
};

using L = FullOnly<Pool<Component::full, NoProject>>;

std::int64_t room(const UnifiedAllocator<L, HostBackend>& a) { return a.available_size(); }

int main() {}
