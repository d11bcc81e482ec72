#pragma once
/// \file
/// `detail::lazy_end_pool_impl<B, G>`: the sub-allocator of `LazyEndPool<G>` (`pools/lazy_end_pool.hpp`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/detail/pools/end_pool.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

/// `LazyEndPool<G>::impl<B>`: frees leave holes; `flush` packs them (see `pools/lazy_end_pool.hpp`).
template <class B, Grow G>
class lazy_end_pool_impl : public end_pool<G, B> {
    using base = end_pool<G, B>;
    using event_ref = typename B::event_ref;

public:
    using base::base;

    /// A freed page (already unbound and unowned) becomes a hole. O(1), no copy.
    void release_page(std::int32_t p) { this->core_.add_hole(p); }
    /// Nothing to do after a batch of frees: holes wait for `flush`.
    void after_release(move_context<B>&) noexcept {}

    /// Pages an urgent flush would hand back to the frontier (holes and pending reuse), or 0 when
    /// reserved pages pin the span (they never move, so the estimate would be optimistic).
    [[nodiscard]] std::int32_t flushable() const noexcept {
        return this->core_.reserved_pages() == 0 ? this->core_.hole_pages() + this->core_.pending_reuse_pages() : 0;
    }
    [[nodiscard]] bool idle() const noexcept {
        return this->core_.hole_pages() == 0 && this->core_.pending_reuse_pages() == 0;
    }

    /// Compacts. When `blocked` (a pending reservation or a closed gate) it only releases pending-reuse
    /// pages whose reader fired and moves nothing. Otherwise: releases fired pending reuse (urgent: makes
    /// the stream wait the unfired ones and releases them too), absorbs the frontier, then packs, at most
    /// `cap` moves unless urgent. Opportunistic and idle: returns at once (O(1)).
    FlushResult flush(move_context<B>& ctx, FlushMode mode, bool blocked, std::size_t cap) {
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

    /// Broken invariants, one line each (shared state, and pending-reuse batches that match the page states).
    [[nodiscard]] std::vector<std::string> verify() const {
        std::vector<std::string> out = base::verify();
        std::int32_t listed = 0;
        for (const auto& batch : reuse_) {
            for (std::int32_t p : batch.second) {
                ++listed;
                if (this->core_.state(p) != page_state::pending_reuse) {
                    out.push_back(concat(to_string(this->core_.spec().component), " pool: pending-reuse entry ",
                                         p, " is not in the pending-reuse state"));
                }
            }
        }
        if (listed != this->core_.pending_reuse_pages()) {
            out.push_back(concat(to_string(this->core_.spec().component), " pool: ", listed,
                                 " pending-reuse entries but a count of ", this->core_.pending_reuse_pages()));
        }
        return out;
    }

private:
    // Pending-reuse batches release when their event fired; `wait_unfired` makes the stream wait the
    // others (a dependency, not a host block) and releases them as well.
    void release_pending_reuse(move_context<B>& ctx, bool wait_unfired) {
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

}  // namespace unikv::detail
