#pragma once
/// \file
/// Retraction into the host pool: a preempted decode request's own FULL rows and its SWA window are copied
/// to host pages (`retract`, synchronized), the caller frees its rows, and later `restore` copies them back
/// into fresh device pages, byte-exact, and frees the host pages (reference §8).
///
/// What moves: only the request's own pages, the part after its shared prefix (which the tree owns and
/// which never moves nor is copied). FULL: every own page. SWA: the own pages of the window
/// `[floor_page(max(0, n - W)), n)`; every SWA row there must be mapped.
///
/// Who frees what: `retract` only reads the device. Once it returned a live backup the copy is synchronized
/// (§11 rule 3), so the caller frees the request's own rows (`alloc.free(own)`) and drops its lock on the
/// shared prefix, together, as it does when a request finishes: the retraction neither knows the tree lock
/// nor the rows the request already dropped (SWA rows behind the window). On failure nothing was freed and
/// the host pages were given back, so the request stays as it was.
///
/// The backup (`RetractionBackup`) holds host pages and no pointer (the cache composing allocator, host pools
/// and controller stays movable). It must be restored or discarded; one destroyed while still holding its
/// pages cannot free them: it is reported as `Dropped::retraction_backup` (`dropped.hpp`: by default a line on
/// stderr, and an abort when asserts are enabled), and its host pages stay allocated until the host pool goes.
/// That is a caller bug the library detects, like a dropped `Reservation`.
///
/// Both calls use the controller alone on its lane: they drain what they submit, so they refuse to run while
/// another transfer of that direction is queued or unacknowledged (the drain would take its ack). Rows a
/// forward still computes: make `ctl.stream()` wait on the forward's event first (controller rule 4).
///
/// A layout with a Mamba pool is rejected at compile time (`check_retraction`): the request's running Mamba
/// state is not part of the host-pool backup (as upstream), so restoring would resume from a wrong state.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/detail/transfer/with_relief.hpp>
#include <unikv/dropped.hpp>
#include <unikv/error.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/transfer/transfer_controller.hpp>

namespace unikv {

/// True when layout `L` can be retracted into the host pool: it has no Mamba pool.
template <class L>
inline constexpr bool retraction_supports_layout_v = !layout_has_v<L, Component::mamba>;

/// Checks that layout `L` can be retracted into the host pool, with one `unikv:` message. Returns true.
template <class L>
consteval bool check_retraction() {
    static_assert(retraction_supports_layout_v<L>,
                  "unikv: retraction into the host pool backs up FULL rows and the SWA window, but the layout has a "
                  "Mamba pool, whose running state the backup does not carry; abort and recompute such requests, or "
                  "use a layout without Mamba (SwaFullLayout, FullLayout)");
    return true;
}

/// A request to retract or restore: its own pages and where they sit in its sequence.
struct RetractionRequest {
    /// The request's own FULL virtual pages (after the shared prefix), in sequence order, covering tokens
    /// `[prefix_tokens, seq_len)`: exactly `ceil(seq_len / P) - prefix_tokens / P` pages.
    std::span<const VirtualPage> own{};
    /// Tokens of the shared, tree-owned prefix before `own` (a whole number of pages).
    std::int32_t prefix_tokens = 0;
    /// The request's sequence length `n`, prefix included.
    std::int32_t seq_len = 0;
    /// The sliding window `W` in tokens (ignored without an SWA pool).
    std::int32_t window_tokens = 0;
};

/// Why a retraction (or a restore) failed.
enum class RetractionFailure : std::uint8_t {
    none,         ///< it succeeded
    host_full,    ///< the host pool stayed short after the caller's eviction and one retry
    copy_failed,  ///< a copy reported failure (the done event's `failed()`)
};

namespace detail {
struct retraction_access;
}  // namespace detail

/// A retracted request's rows on host (see the file comment). Move-only. Either live (holds host pages,
/// must be restored or discarded), failed (`failure()` says why; holds nothing), or empty (consumed,
/// moved from, or default-constructed).
class [[nodiscard]] RetractionBackup {
public:
    /// An empty backup.
    RetractionBackup() noexcept = default;
    RetractionBackup(const RetractionBackup&) = delete;
    RetractionBackup& operator=(const RetractionBackup&) = delete;
    /// Takes over `other`'s pages; `other` becomes empty.
    RetractionBackup(RetractionBackup&& other) noexcept { take(other); }
    /// Takes over `other`'s pages; a live backup held before is reported as dropped.
    RetractionBackup& operator=(RetractionBackup&& other) noexcept {
        if (this != &other) {
            report_if_live();
            take(other);
        }
        return *this;
    }
    /// Reports a live backup as `Dropped::retraction_backup` (its host pages cannot be freed from here).
    ~RetractionBackup() { report_if_live(); }

    /// True while the backup holds the request's rows on host (restore or discard it).
    explicit operator bool() const noexcept { return live_; }
    /// Why `retract` failed (`none` for a live or empty backup).
    [[nodiscard]] RetractionFailure failure() const noexcept { return failure_; }
    /// For `host_full`: the host pages missing after the relief, of the component the host pool was short of.
    [[nodiscard]] Pages missing() const noexcept { return missing_; }

    /// The host pages of component `c` (FULL: one per own page; SWA: one per window page), in order.
    [[nodiscard]] std::span<const HostPage> host(Component c) const noexcept { return host_[c]; }
    /// Own FULL pages backed up.
    [[nodiscard]] std::int32_t full_pages() const noexcept { return static_cast<std::int32_t>(host_[Component::full].size()); }
    /// Index in the own pages of the first window page (its SWA rows are backed up from there to the end).
    [[nodiscard]] std::int32_t window_first() const noexcept { return window_first_; }
    /// Own pages whose SWA rows are backed up (0 without an SWA pool).
    [[nodiscard]] std::int32_t window_pages() const noexcept { return static_cast<std::int32_t>(host_[Component::swa].size()); }

    /// Frees the host pages into `host` (the pools `retract` took them from) and empties the backup. A no-op
    /// on a backup that is not live. Throws what `host.free` throws for pages of another pool (nothing freed).
    template <class HostPools>
    void discard(HostPools& host) {
        if (!live_) return;
        for (Component c : all_components) {
            if (!host_[c].empty()) host.free(c, std::span<const HostPage>(host_[c]));
        }
        clear();
    }

private:
    friend struct detail::retraction_access;

    void take(RetractionBackup& o) noexcept {
        host_ = std::exchange(o.host_, {});
        window_first_ = o.window_first_;
        failure_ = o.failure_;
        missing_ = o.missing_;
        live_ = std::exchange(o.live_, false);
    }
    void clear() noexcept {
        for (Component c : all_components) host_[c].clear();
        live_ = false;
    }
    void report_if_live() noexcept {
        if (!live_) return;
        detail::DropReport::report(Dropped::retraction_backup);
        live_ = false;
    }

    per_component<std::vector<HostPage>> host_{};
    std::int32_t window_first_ = 0;
    RetractionFailure failure_ = RetractionFailure::none;
    Pages missing_{};
    bool live_ = false;
};

/// Backs up `request`'s own FULL rows and SWA window into host pages of `host` (see the file comment):
/// allocates them in one batch, on a shortfall calls `relieve_host(const HostAllocResult&) -> bool` (the caller's
/// tree evicts host data and frees its pages; true when it freed some) and retries while it frees, then queues the D2H on `ctl`,
/// submits it and synchronizes it (`drain_writes`). Returns a live backup, or a failed one (`host_full`,
/// `copy_failed`) having freed its host pages; the device is never changed, so the caller frees the
/// request's rows only after a live backup.
/// Throws `logic_error` (nothing changed) when `ctl` has a write queued or unacknowledged, `own` does not
/// cover `[prefix_tokens, seq_len)` in whole pages, or an SWA row of the window is not mapped. Cold path:
/// O(pages) plus one host synchronization; allocates the backup's page lists.
template <class L, class B, class HostPools, class Tag, class Relieve>
RetractionBackup retract(UnifiedAllocator<L, B>& alloc, HostPools& host, TransferController<B, HostPools, Tag>& ctl,
                         const RetractionRequest& request, Relieve&& relieve_host, Tag tag = Tag{});

/// Copies `backup` back into the fresh device pages of `fresh` (the request's new own pages, allocated by
/// the caller with `alloc`, so their SWA entries are bound; the same geometry as at `retract`): queues the
/// H2D on `ctl`, submits it, synchronizes the transfer stream and acknowledges it. On success frees the
/// backup's host pages (it becomes empty) and returns true. Returns false when the copy failed: the fresh
/// rows hold garbage, the backup stays live (retry, or `discard` it).
/// Throws `logic_error` (nothing changed, the backup untouched) when the backup is not live, `fresh` does not
/// match it (own pages, window), `ctl` has a load queued or unacknowledged, or an SWA row of the window is
/// not mapped. Cold path: O(pages) plus one host synchronization.
template <class L, class B, class HostPools, class Tag>
bool restore(UnifiedAllocator<L, B>& alloc, HostPools& host, TransferController<B, HostPools, Tag>& ctl,
             RetractionBackup& backup, const RetractionRequest& fresh, Tag tag = Tag{});

}  // namespace unikv

#include <unikv/detail/transfer/retraction.inl>
