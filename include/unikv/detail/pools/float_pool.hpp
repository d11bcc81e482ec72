#pragma once
/// \file
/// `detail::float_pool_impl<B>`: the sub-allocator of `FloatPool` (`pools/float_pool.hpp`). Definitions of
/// its cold paths are in `detail/pools/float_pool.inl`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/detail/pools/pool_core.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/pool_policy_concept.hpp>
#include <unikv/pools/results.hpp>

namespace unikv::detail {

/// `FloatPool::impl<B>`: the middle pool of a tri-pool (see `pools/float_pool.hpp`). Its band is always
/// `[the up end's frontier, the down end's frontier)` in bytes.
template <class B>
class float_pool_impl {
public:
    float_pool_impl(const SubPoolSpec& spec, std::int32_t num_virtual, id_source ids)
        : core_(spec, num_virtual, ids),
          lo_(spec.num_pages),
          hi_(spec.num_pages),
          chosen_(static_cast<std::size_t>(spec.num_pages), 0) {}

    [[nodiscard]] pool_core& core() noexcept { return core_; }
    [[nodiscard]] const pool_core& core() const noexcept { return core_; }
    /// True when parked (empty): the float owns no bytes and neighbours look through it.
    [[nodiscard]] bool transparent() const noexcept { return lo_ == hi_; }
    [[nodiscard]] std::size_t low_bytes() const noexcept { return static_cast<std::size_t>(lo_) * spec().page_bytes; }
    [[nodiscard]] std::size_t high_bytes() const noexcept { return static_cast<std::size_t>(hi_) * spec().page_bytes; }

    /// The bytes the float would claim once it took `pages` more pages inside `room` (the pool protocol's
    /// capacity query): relocated (when its pages can move, or blockers are ignored) or parked, it needs its
    /// occupied pages plus `pages` anywhere on room's page grid and claims that grid; otherwise its span
    /// (boundary holes absorbed after `how.flushed`) must lie inside `room`, and it claims the span when its
    /// holes cover `pages`, else the grid it grows into. Nullopt when the pages do not fit. O(1); O(boundary
    /// holes) when flushed.
    [[nodiscard]] std::optional<ByteBand> project(ByteBand room, std::int64_t pages, Projection how) const noexcept;
    [[nodiscard]] std::int32_t room_low(ByteBand band) const noexcept {
        return transparent() ? 0 : std::max(0, lo_ - band_lo(band));
    }
    [[nodiscard]] std::int32_t room_high(ByteBand band) const noexcept {
        return transparent() ? 0 : std::max(0, band_hi(band) - hi_);
    }
    /// Pages allocatable now without moving anything. O(1).
    [[nodiscard]] std::int32_t available(ByteBand band) const noexcept {
        if (transparent()) return std::max(0, band_hi(band) - band_lo(band));
        return core_.hole_pages() + room_low(band) + room_high(band);
    }
    /// Bytes free between the float's `side` edge and that neighbour (the whole band when parked).
    [[nodiscard]] std::size_t gap_bytes(Side side, ByteBand band) const noexcept {
        if (transparent()) return band.high > band.low ? band.high - band.low : 0;
        if (side == Side::low) return low_bytes() > band.low ? low_bytes() - band.low : 0;
        return band.high > high_bytes() ? band.high - high_bytes() : 0;
    }

    /// Binds `vids[i]` to holes first, then to new span pages. Precondition: `vids.size() <=
    /// available(...)`. O(n).
    template <class Id>
    void take_bound(std::span<const Id> vids, ByteBand band, std::vector<std::int32_t>* handed) {
        std::size_t i = core_.bind_from_holes(vids, handed);
        if (i == vids.size()) return;  // the common case: holes were enough (skips building the callback)
        extend(static_cast<std::int32_t>(vids.size() - i), band, [&](std::int32_t p) {
            core_.occupy_bound(p, id_value(vids[i++]));
            if (handed != nullptr) handed->push_back(p);
        });
    }
    /// Takes `n` unbound pages for a reservation, holes first. Precondition: `n <= available(...)`.
    void take_reserved(std::int32_t n, ByteBand band, std::vector<PhysicalPage>& out, std::vector<std::int32_t>* handed) {
        const std::int32_t i = core_.reserve_from_holes(n, out, handed);
        if (i == n) return;
        extend(n - i, band, [&](std::int32_t p) {
            core_.occupy_reserved(p);
            out.emplace_back(p);
            if (handed != nullptr) handed->push_back(p);
        });
    }

    /// A freed page becomes a hole; an empty float parks. O(1) (O(holes) when it parks).
    void release_page(std::int32_t p) {
        core_.add_hole(p);
        holes_dirty_ = true;
        park_if_empty();
    }
    void after_release(move_context<B>&) noexcept {}
    /// A float is not lazy: it offers no flushable holes to its neighbours.
    [[nodiscard]] static constexpr std::int32_t flushable() noexcept { return 0; }
    [[nodiscard]] bool idle() const noexcept { return !holes_dirty_; }
    /// True when every occupied page can move (no reservation or pending-reuse page).
    [[nodiscard]] bool relocatable() const noexcept {
        return core_.reserved_pages() == 0 && core_.pending_reuse_pages() == 0 && core_.pending_load_pages() == 0;
    }

    /// Absorbs holes at both edges of the span into the free band. Copies nothing, so it runs even when
    /// moves are blocked. O(holes log holes); O(1) when no free happened since the last flush.
    FlushResult flush(move_context<B>&, FlushMode, bool, std::size_t) {
        if (holes_dirty_) absorb_boundary();
        holes_dirty_ = false;
        return {};
    }

    /// Moves every occupied page outside room's page grid into free pages on it (holes first, then free
    /// pages next to the span), then rebuilds the span and holes. Returns false, changing nothing, when some
    /// page outside cannot move or the grid has too few free pages. The stream first waits the running
    /// forward and every transfer event. O(span + holes). Precondition: `room` lies inside the band.
    bool relocate_into(ByteBand room, move_context<B>& ctx) { return relocate_into(band_lo(room), band_hi(room), ctx); }

    /// Opens at least `min_bytes` between the float's `side` edge and that neighbour by moving the live
    /// pages nearest `side` to the far side (holes first, then fresh pages; all of them when the whole
    /// span must move). Returns the bytes now open on `side`. A result below `min_bytes` means the move
    /// was blocked or impossible, and then nothing changed. Cold path.
    std::size_t make_room(Side side, std::size_t min_bytes, ByteBand band, move_context<B>& ctx, bool blocked);

    /// Packs the live pages toward the side opposite `retreat`, so the span retreats from `retreat` by its
    /// holes. Returns the pages moved (0 when blocked, parked, without holes, or a page cannot move).
    std::size_t compact_holes(Side retreat, move_context<B>& ctx, bool blocked);

    /// Broken invariants, one line each (shared state over the span, parking).
    [[nodiscard]] std::vector<std::string> verify() const;

private:
    [[nodiscard]] const SubPoolSpec& spec() const noexcept { return core_.spec(); }
    [[nodiscard]] std::int32_t band_lo(ByteBand band) const noexcept {
        const std::size_t p = std::max<std::size_t>(static_cast<std::size_t>(spec().min_page), ceil_div(band.low, spec().page_bytes));
        return static_cast<std::int32_t>(std::min<std::size_t>(p, static_cast<std::size_t>(spec().num_pages)));
    }
    [[nodiscard]] std::int32_t band_hi(ByteBand band) const noexcept {
        return static_cast<std::int32_t>(std::min<std::size_t>(static_cast<std::size_t>(spec().num_pages), band.high / spec().page_bytes));
    }
    // The span a boundary absorption would leave (`flush` without copying). O(boundary holes).
    [[nodiscard]] std::pair<std::int32_t, std::int32_t> absorbed_span() const noexcept {
        std::int32_t lo = lo_;
        std::int32_t hi = hi_;
        while (lo < hi && core_.state(lo) == page_state::hole) ++lo;
        while (hi > lo && core_.state(hi - 1) == page_state::hole) --hi;
        return {lo, hi};
    }
    // The page-range form of `relocate_into`: the occupied pages outside `[a, b)` move into it.
    bool relocate_into(std::int32_t a, std::int32_t b, move_context<B>& ctx);

    // Grows the span by `k` pages: centred in the band when parked, else the roomier side first.
    template <class OnPage>
    void extend(std::int32_t k, ByteBand band, OnPage on_page);

    void park_if_empty();

    void absorb_boundary();

    // After a relocation inside [lo, hi): the span becomes [first occupied, last occupied + 1) and every
    // free page inside it a hole.
    void rebuild_span(std::int32_t lo, std::int32_t hi);

    pool_core core_;
    std::int32_t lo_;  // [lo_, hi_) is the span; lo_ == hi_ == num_pages when parked
    std::int32_t hi_;
    bool holes_dirty_ = false;          // a free happened since the last boundary absorption
    std::vector<std::int32_t> scratch_;  // reused by relocations
    std::vector<std::uint8_t> chosen_;   // per page: picked as a destination by the current relocation
};

}  // namespace unikv::detail

#include <unikv/detail/pools/float_pool.inl>
