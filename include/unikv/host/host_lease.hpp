#pragma once
/// \file
/// `HostLease<B>`: the right to address a host pool's pages physically for one transfer. The tree holds
/// logical host pages (`HostPage`); where their bytes sit is private to the pool and changes when the pool
/// compacts. A lease translates logical to physical pages and names the pinned bytes they index; while it is
/// held the pool moves no bytes. The transfer then hands the lease to its copy's completion event
/// (`std::move(lease).release_after(done)`): the pool still moves no bytes until `done` has completed (a
/// compaction orders its moves after every such event and synchronizes: a cold path). A lease destroyed
/// without `release_after` releases at once (no copy used it). So a page view can never outlive the right to
/// it: the guard that owns the lease is the view (the upstream lease-gap bug, where the lease was released
/// before the caller used the view, cannot be written).
///
/// Lifetime: a lease shares a small heap state with its pool (`detail/host/lease_state.hpp`), so moving the
/// pool keeps it valid. A lease that outlives its pool is harmless: `physical` and `region` throw
/// `logic_error`, releasing is a no-op. Leases are taken and released on the thread that drives the pool.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include <unikv/backend/page_copy.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/host/lease_state.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv {

namespace detail::host {
template <class B>
class lease_registry;
}  // namespace detail::host

/// A held lease on a host pool of backend `B` (see the file comment). Move-only; a moved-from or released
/// lease holds nothing. Obtained from the pool's `lease()`.
template <class B>
class [[nodiscard]] HostLease {
public:
    using event_ref = typename B::event_ref;

    /// A lease of nothing.
    HostLease() noexcept = default;
    HostLease(HostLease&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    HostLease& operator=(HostLease&& o) noexcept {
        if (this != &o) {
            release_now();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    HostLease(const HostLease&) = delete;
    HostLease& operator=(const HostLease&) = delete;
    /// Releases at once: a lease dropped without `release_after` was used by no copy.
    ~HostLease() { release_now(); }

    /// True while the lease is held.
    [[nodiscard]] bool holding() const noexcept { return state_ != nullptr; }
    /// `holding()`.
    explicit operator bool() const noexcept { return holding(); }

    /// Writes the physical page of each logical page of `c` into `out` (same size as `pages`): the page's bytes
    /// are `[out[i] * page_bytes(c), ...)` of `region(c)`, valid while the lease is held and, after
    /// `release_after(done)`, until `done` completes. Throws `logic_error` for a page not allocated to `c`
    /// (nothing written past it), mismatched sizes, or a lease that holds nothing or outlived its pool.
    /// Hot: O(n), one load per page, no allocation.
    void physical(Component c, std::span<const HostPage> pages, std::span<std::int32_t> out) const {
        const detail::host::lease_side& s = side("physical", c);
        UNIKV_EXPECTS(pages.size() == out.size(), pages.size(), " host pages but room for ", out.size(),
                      " physical pages");
        const std::size_t n = s.to_physical.size();
        for (std::size_t i = 0; i < pages.size(); ++i) {
            const HostPage h = pages[i];
            const std::int32_t p = h.is_valid() && static_cast<std::size_t>(h.value()) < n
                                       ? s.to_physical[static_cast<std::size_t>(h.value())]
                                       : -1;
            if (p < 0) {
                detail::misuse("HostLease::physical", "host page ", h, " is not allocated to ", to_string(c),
                               "; translate only pages the pool handed out for that component");
            }
            out[i] = p;
        }
    }

    /// The pinned bytes that the physical pages of `c` index (page `P` of `page_bytes(c)` bytes at
    /// `P * page_bytes(c)`). Throws `logic_error` when the pool holds no pages of `c`, or as `physical`.
    [[nodiscard]] pinned_region_ref region(Component c) const { return side("region", c).region; }
    /// Bytes of one host page of `c` (the device envelope of its pool). Throws as `region`.
    [[nodiscard]] std::size_t page_bytes(Component c) const { return side("page_bytes", c).page_bytes; }

    /// Passes the lease to `done`, the completion event of the copy that used it (recorded after that copy
    /// was queued): the pool moves no bytes until `done` has completed. `done` must stay valid until the pool
    /// saw it complete (its owner outlives the pool, as for `UnifiedAllocator::set_transfer_done_event`).
    /// Amortized O(1), no synchronization. No-op for a lease that holds nothing or outlived its pool.
    void release_after(event_ref done) && {
        if (state_ == nullptr) return;
        detail::host::lease_state<B>* s = std::exchange(state_, nullptr);
        if (!s->orphaned) s->defer(std::move(done));
        drop(s);
    }

private:
    friend class detail::host::lease_registry<B>;
    explicit HostLease(detail::host::lease_state<B>* s) noexcept : state_(s) { ++s->held; }

    const detail::host::lease_side& side(const char* call, Component c) const {
        if (state_ == nullptr) detail::misuse(call, "the lease holds nothing (moved from or released)");
        if (state_->orphaned) detail::misuse(call, "the host pool of this lease was destroyed");
        const detail::host::lease_side& s = state_->sides[c];
        if (s.page_bytes == 0) {
            detail::misuse(call, "the host pool holds no pages of ", to_string(c), "; lease a pool whose layout has it");
        }
        return s;
    }
    void release_now() noexcept {
        if (state_ != nullptr) drop(std::exchange(state_, nullptr));
    }
    static void drop(detail::host::lease_state<B>* s) noexcept {
        --s->held;
        if (s->orphaned && s->held == 0) delete s;
    }

    detail::host::lease_state<B>* state_ = nullptr;
};

namespace detail::host {

/// A host pool's side of the lease protocol: owns the shared state, issues leases, tells whether moves are
/// allowed, and orders moves after released leases' events. Move-only; a moved-from registry may only be
/// destroyed or assigned to.
template <class B>
class lease_registry {
public:
    using stream_ref = typename B::stream_ref;

    /// Throws `std::bad_alloc` when the state cannot be allocated.
    lease_registry() : state_(new lease_state<B>()) {}
    lease_registry(lease_registry&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}
    lease_registry& operator=(lease_registry&& o) noexcept {
        if (this != &o) {
            retire();
            state_ = std::exchange(o.state_, nullptr);
        }
        return *this;
    }
    lease_registry(const lease_registry&) = delete;
    lease_registry& operator=(const lease_registry&) = delete;
    ~lease_registry() { retire(); }

    /// The tables leases translate through (the pool keeps them current).
    [[nodiscard]] per_component<lease_side>& sides() noexcept { return state_->sides; }
    [[nodiscard]] const per_component<lease_side>& sides() const noexcept { return state_->sides; }

    /// A new lease. O(1).
    [[nodiscard]] HostLease<B> acquire() noexcept { return HostLease<B>(state_); }
    /// True while any lease is held (moves are refused).
    [[nodiscard]] bool held() const noexcept { return state_->held != 0; }
    /// Released leases whose events the pool has not yet seen complete (or not yet dropped).
    [[nodiscard]] std::size_t pending() const noexcept { return state_->pending.size(); }

    /// Makes `stream` wait every released lease's event and forgets them: moves queued on `stream` afterwards
    /// run after every copy that used a lease. Stream dependencies only; the caller synchronizes. O(events).
    void order_after_released(stream_ref stream) {
        for (const auto& e : state_->pending) stream.wait(e);
        state_->pending.clear();
        state_->prune_at = 16;
    }

    /// Blocks until every released lease's copy completed and forgets the events: the pool is about to free
    /// the pinned bytes they touch. No-op on a moved-from registry. A backend failure is swallowed (this runs
    /// in destructors; a failed backend leaves nothing to wait for).
    void synchronize_released() noexcept {
        if (state_ == nullptr) return;
        try {
            for (const auto& e : state_->pending) e.synchronize();
        } catch (...) {
        }
        state_->pending.clear();
    }

private:
    // Waits for released leases' copies, then frees the state or hands it to the leases still held.
    void retire() noexcept {
        if (state_ == nullptr) return;
        synchronize_released();
        if (state_->held != 0) {
            state_->orphaned = true;
        } else {
            delete state_;
        }
        state_ = nullptr;
    }

    lease_state<B>* state_;
};

}  // namespace detail::host
}  // namespace unikv
