#pragma once
/// \file
/// `LazyEndPool<Grow>`: an end pool whose frees leave holes (O(1), no copy, no synchronization) and whose
/// compaction runs only in `flush`: an urgent flush packs every hole; an opportunistic one is capped, stops
/// before pages a running forward writes, and returns at once when there is nothing to do. A moved source
/// that the running forward may still read waits in *pending reuse* until the forward's event fires.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/detail/pools/end_pool.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/pools/pool_policy_concept.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

template <Grow G>
struct LazyEndPool {
    static constexpr Placement placement = Placement::end;
    static constexpr Compaction compaction = Compaction::lazy;
    static constexpr Grow grow = G;

    /// The sub-allocator the unified allocator instantiates for backend `B`.
    template <class B>
    class impl : public detail::end_pool<G, B> {
        using base = detail::end_pool<G, B>;
        using event_ref = typename B::event_ref;

    public:
        using base::base;

        /// A freed page (already unbound and unowned) becomes a hole. O(1), no copy.
        void release_page(std::int32_t p) { this->core_.add_hole(p); }
        /// Nothing to do after a batch of frees: holes wait for `flush`.
        void after_release(detail::move_context<B>&) noexcept {}

        /// Pages an urgent flush would hand back to the frontier (holes and pending reuse), or 0 when
        /// reserved pages pin the span (they never move, so the estimate would be optimistic).
        [[nodiscard]] std::int32_t drainable() const noexcept {
            return this->core_.reserved_pages() == 0 ? this->core_.hole_pages() + this->core_.pending_reuse_pages() : 0;
        }
        [[nodiscard]] bool idle() const noexcept {
            return this->core_.hole_pages() == 0 && this->core_.pending_reuse_pages() == 0;
        }

        /// Compacts. When `blocked` (a pending reservation or a closed gate) it only releases pending-reuse
        /// pages whose reader fired and moves nothing. Otherwise: releases fired pending reuse (urgent: makes
        /// the stream wait the unfired ones and releases them too), absorbs the frontier, then packs, at most
        /// `cap` moves unless urgent. Opportunistic and idle: returns at once (O(1)).
        FlushResult flush(detail::move_context<B>& ctx, FlushMode mode, bool blocked, std::size_t cap) {
            FlushResult result;
            if (idle()) return result;
            const bool urgent = mode == FlushMode::urgent;
            release_pending_reuse(ctx, urgent && !blocked);
            if (blocked) {
                result.blocked = true;
                return result;
            }
            const std::size_t before = ctx.pages_moved;
            const std::size_t bytes_before = ctx.bytes_moved;
            std::vector<std::int32_t>* batch = nullptr;
            (void)this->pack(ctx, urgent, urgent ? 0 : cap, result.stopped_by_forward, [&](std::int32_t p) {
                if (batch == nullptr) {
                    reuse_.emplace_back(ctx.forward->event(), std::vector<std::int32_t>{});
                    batch = &reuse_.back().second;
                }
                this->core_.add_pending_reuse(p);
                batch->push_back(p);
            });
            result.pages_moved = ctx.pages_moved - before;
            result.bytes_moved = ctx.bytes_moved - bytes_before;
            return result;
        }

        /// Appends broken invariants (shared state, and pending-reuse batches that match the page states).
        void verify(std::vector<std::string>& out) const {
            base::verify(out);
            std::int32_t listed = 0;
            for (const auto& batch : reuse_) {
                for (std::int32_t p : batch.second) {
                    ++listed;
                    if (this->core_.state(p) != detail::page_state::pending_reuse) {
                        out.push_back(detail::concat(to_string(this->core_.spec().component), " pool: pending-reuse entry ",
                                                     p, " is not in the pending-reuse state"));
                    }
                }
            }
            if (listed != this->core_.pending_reuse_pages()) {
                out.push_back(detail::concat(to_string(this->core_.spec().component), " pool: ", listed,
                                             " pending-reuse entries but a count of ", this->core_.pending_reuse_pages()));
            }
        }

    private:
        // Pending-reuse batches release when their event fired; `wait_unfired` makes the stream wait the
        // others (a dependency, not a host block) and releases them as well.
        void release_pending_reuse(detail::move_context<B>& ctx, bool wait_unfired) {
            std::size_t kept = 0;
            for (std::size_t i = 0; i < reuse_.size(); ++i) {
                auto& [event, pages] = reuse_[i];
                const bool fired = event.query();
                if (!fired && !wait_unfired) {
                    if (kept != i) reuse_[kept] = std::move(reuse_[i]);
                    ++kept;
                    continue;
                }
                if (!fired) ctx.stream.wait(event);
                for (std::int32_t p : pages) this->core_.pending_reuse_to_hole(p);
            }
            reuse_.resize(kept);
        }

        // One batch per flush that moved pages a running forward may read; a list per event, never a slot.
        std::vector<std::pair<event_ref, std::vector<std::int32_t>>> reuse_;
    };
};

static_assert(is_pool_policy_v<LazyEndPool<Grow::up>, detail::backend_archetype>);
static_assert(is_pool_policy_v<LazyEndPool<Grow::down>, detail::backend_archetype>);

}  // namespace unikv
