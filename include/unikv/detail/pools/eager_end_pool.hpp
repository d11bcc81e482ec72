#pragma once
/// \file
/// `detail::eager_end_pool_impl<B, G>`: the sub-allocator of `EagerEndPool<G>` (`pools/eager_end_pool.hpp`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/detail/pools/end_pool.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

/// `EagerEndPool<G>::impl<B>`: every free compacts at once (see `pools/eager_end_pool.hpp`).
template <class B, Grow G>
class eager_end_pool_impl : public end_pool<G, B> {
    using base = end_pool<G, B>;

public:
    using base::base;

    /// A freed page becomes a hole until `after_release` packs the batch.
    void release_page(std::int32_t p) { this->core_.add_hole(p); }
    /// Packs every hole left by a batch of frees: the stream first waits every registered transfer event
    /// and the running forward, then one copy moves the survivors; the frontier retreats. O(holes log
    /// holes + moved pages). Never synchronizes the host.
    void after_release(move_context<B>& ctx) {
        if (this->core_.hole_pages() == 0) return;
        bool stopped = false;
        (void)this->pack(ctx, true, 0, stopped, [](std::int32_t) { UNIKV_ASSERT(false); });
        UNIKV_ASSERT(this->core_.hole_pages() == 0);
    }
    /// An eager pool keeps no holes to flush.
    [[nodiscard]] static constexpr std::int32_t flushable() noexcept { return 0; }
    [[nodiscard]] static constexpr bool idle() noexcept { return true; }
    /// Nothing to flush: the pool compacted when it freed.
    FlushResult flush(move_context<B>&, FlushMode, bool, std::size_t) noexcept { return {}; }

    /// Broken invariants, one line each (shared state, and no holes between calls).
    [[nodiscard]] std::vector<std::string> verify() const {
        std::vector<std::string> out = base::verify();
        if (this->core_.hole_pages() != 0 || this->core_.pending_reuse_pages() != 0) {
            out.push_back(concat(to_string(this->core_.spec().component), " pool: an eager pool holds ",
                                 this->core_.hole_pages(), " holes between calls"));
        }
        return out;
    }
};

}  // namespace unikv::detail
