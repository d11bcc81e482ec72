#pragma once
/// \file
/// `end_pool<G, B>`: what `LazyEndPool` and `EagerEndPool` share: a span that grows from one end of the arena
/// (`Grow::up` from `min_page` upward, `Grow::down` from the last page downward), allocation from holes then
/// from the frontier, and the two-pointer pack that moves the survivors nearest the frontier into the holes
/// nearest the base.
///
/// Pages are addressed by *rank*, the distance from the base: rank 0 is `min_page` for an up end and
/// `num_pages - 1` for a down end. The span is ranks `[0, extent)`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <unikv/component.hpp>
#include <unikv/arena/model.hpp>
#include <unikv/detail/pools/move_context.hpp>
#include <unikv/detail/pools/pool_core.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/pool_policy_concept.hpp>

namespace unikv::detail {

template <Grow G, class B>
class end_pool {
public:
    static constexpr Grow grow = G;

    end_pool(const SubPoolSpec& spec, std::int32_t num_virtual, id_source ids) : core_(spec, num_virtual, ids) {}

    [[nodiscard]] pool_core& core() noexcept { return core_; }
    [[nodiscard]] const pool_core& core() const noexcept { return core_; }
    /// Never transparent: an end owns `[base, frontier)` even when empty.
    [[nodiscard]] static constexpr bool transparent() noexcept { return false; }

    [[nodiscard]] std::int32_t page_at(std::int32_t rank) const noexcept {
        return G == Grow::up ? spec().min_page + rank : spec().num_pages - 1 - rank;
    }
    [[nodiscard]] std::int32_t rank_of(std::int32_t page) const noexcept {
        return G == Grow::up ? page - spec().min_page : spec().num_pages - 1 - page;
    }
    /// First page of the span.
    [[nodiscard]] std::int32_t span_lo() const noexcept { return G == Grow::up ? spec().min_page : spec().num_pages - extent_; }
    /// One past the last page of the span.
    [[nodiscard]] std::int32_t span_hi() const noexcept { return G == Grow::up ? spec().min_page + extent_ : spec().num_pages; }
    [[nodiscard]] std::size_t low_bytes() const noexcept { return static_cast<std::size_t>(span_lo()) * spec().page_bytes; }
    [[nodiscard]] std::size_t high_bytes() const noexcept { return static_cast<std::size_t>(span_hi()) * spec().page_bytes; }
    /// The span once it took `pages` more pages (holes first; after `how.flushed` the holes and pending reuse
    /// are back at the frontier, unless reserved pages pin it and blockers are honoured), or nullopt when
    /// that span leaves the page range or `room`. The pool protocol's capacity query. O(1).
    [[nodiscard]] std::optional<ByteBand> project(ByteBand room, std::int64_t pages, Projection how) const noexcept {
        const bool reclaim = how.flushed && (how.blockers == Blockers::ignored || core_.reserved_pages() == 0);
        const std::int64_t holes = reclaim ? 0 : core_.hole_pages();
        const std::int64_t start = extent_ - (reclaim ? core_.hole_pages() + core_.pending_reuse_pages() : 0);
        const std::int64_t end = start + std::max<std::int64_t>(0, pages - holes);
        if (end > spec().usable_pages()) return std::nullopt;
        const ByteBand span = span_bytes_at(static_cast<std::int32_t>(end));
        if (span.low < room.low || span.high > room.high) return std::nullopt;
        return span;
    }
    /// The largest extent whose pages stay inside `band` (an up end grows toward `band.high`, a down end
    /// toward `band.low`).
    [[nodiscard]] std::int32_t max_extent(ByteBand band) const noexcept {
        const SubPoolSpec& s = spec();
        if constexpr (G == Grow::up) {
            const auto top = std::min<std::size_t>(static_cast<std::size_t>(s.num_pages), band.high / s.page_bytes);
            return std::max<std::int32_t>(0, static_cast<std::int32_t>(top) - s.min_page);
        } else {
            const std::size_t lowest = std::max<std::size_t>(static_cast<std::size_t>(s.min_page), ceil_div(band.low, s.page_bytes));
            return std::max<std::int32_t>(0, s.num_pages - static_cast<std::int32_t>(std::min<std::size_t>(lowest, static_cast<std::size_t>(s.num_pages))));
        }
    }
    /// Pages the frontier can still grow inside `band`.
    [[nodiscard]] std::int32_t extension_room(ByteBand band) const noexcept {
        return std::max<std::int32_t>(0, max_extent(band) - extent_);
    }
    /// Pages allocatable now: holes plus extension room. O(1).
    [[nodiscard]] std::int32_t available(ByteBand band) const noexcept { return core_.hole_pages() + extension_room(band); }

    /// Binds `vids[i]` to pages taken from holes first, then from the frontier. Appends the pages to
    /// `*handed` when given. Precondition: `vids.size() <= available(band)`. O(n), no allocation.
    template <class Id>
    void take_bound(std::span<const Id> vids, ByteBand band, std::vector<std::int32_t>* handed) {
        UNIKV_ASSERT(static_cast<std::int32_t>(vids.size()) <= available(band));
        (void)band;
        std::size_t i = core_.bind_from_holes(vids, handed);
        const auto k = static_cast<std::int32_t>(vids.size() - i);
        const std::int32_t first = grow_by(k);
        for (std::int32_t j = 0; j < k; ++j, ++i) {
            core_.occupy_bound(first + j, id_value(vids[i]));
            if (handed != nullptr) handed->push_back(first + j);
        }
    }
    /// Takes `n` unbound pages for a reservation, holes first; appends them to `out` and `handed`.
    /// Precondition: `n <= available(band)`.
    void take_reserved(std::int32_t n, ByteBand band, std::vector<PhysicalPage>& out, std::vector<std::int32_t>* handed) {
        UNIKV_ASSERT(n <= available(band));
        (void)band;
        const std::int32_t k = n - core_.reserve_from_holes(n, out, handed);
        const std::int32_t first = grow_by(k);
        for (std::int32_t j = 0; j < k; ++j) {
            core_.occupy_reserved(first + j);
            out.emplace_back(first + j);
            if (handed != nullptr) handed->push_back(first + j);
        }
    }

    /// Sorts the holes by rank and retreats the frontier past every hole contiguous with it (zero copy).
    /// O(holes log holes).
    void absorb_boundary() {
        core_.sort_holes([this](std::int32_t a, std::int32_t b) { return rank_of(a) < rank_of(b); });
        std::size_t n = 0;
        const auto& holes = core_.holes();
        while (n < holes.size() && rank_of(holes[holes.size() - 1 - n]) == extent_ - 1 - static_cast<std::int32_t>(n)) ++n;
        if (n == 0) return;
        core_.drop_last_holes(n);
        extent_ -= static_cast<std::int32_t>(n);
        core_.bump_epoch();
    }

    /// Two-pointer pack: pairs the live survivor nearest the frontier with the hole nearest the base until the
    /// pointers cross, at most `cap` moves (0: no cap). `urgent` settles the forward first, so no write hazard
    /// stops the walk; otherwise the walk stops before a page the running forward writes. Sources that a
    /// running forward may still read go to `on_pending(page)`; others become holes. Then absorbs the
    /// frontier. Returns the pages moved. Reserved, pending-reuse and live-reserved pages never move.
    template <class OnPending>
    std::size_t pack(move_context<B>& ctx, bool urgent, std::size_t cap, bool& stopped_by_forward, OnPending on_pending) {
        absorb_boundary();
        if (core_.hole_pages() == 0) return 0;
        if (urgent) ctx.settle_forward();
        std::vector<std::int32_t>& src = *ctx.src;
        std::vector<std::int32_t>& dst = *ctx.dst;
        src.clear();
        dst.clear();
        const auto& holes = core_.holes();
        std::size_t used = 0;
        std::int32_t r = extent_ - 1;
        while (used < holes.size()) {
            const std::int32_t hole_rank = rank_of(holes[used]);
            while (r > hole_rank && core_.state(page_at(r)) != page_state::live) --r;
            if (r <= hole_rank) break;
            if (cap != 0 && src.size() >= cap) break;
            const std::int32_t p = page_at(r);
            if (ctx.write_hazard(spec().component, core_.table().virtual_of(p))) {
                stopped_by_forward = true;
                break;
            }
            src.push_back(p);
            dst.push_back(holes[used]);
            ++used;
            --r;
        }
        if (src.empty()) return 0;
        ctx.validate_sources(core_);
        core_.take_first_holes(used);
        ctx.commit(core_);
        const bool reusable = ctx.sources_reusable();
        for (std::int32_t p : src) {
            if (reusable) core_.add_hole(p);
            else on_pending(p);
        }
        absorb_boundary();
        return src.size();
    }

    /// Broken invariants, one line each: the shared state over the span, and the extent inside the page range.
    [[nodiscard]] std::vector<std::string> verify() const {
        std::vector<std::string> out;
        if (extent_ < 0 || extent_ > spec().usable_pages()) {
            out.push_back(concat(to_string(spec().component), " pool: extent ", extent_, " outside [0, ",
                                 spec().usable_pages(), "]"));
            return out;
        }
        core_.verify(span_lo(), span_hi(), out);
        return out;
    }

protected:
    [[nodiscard]] const SubPoolSpec& spec() const noexcept { return core_.spec(); }

    /// The span's bytes, were its extent `e`.
    [[nodiscard]] ByteBand span_bytes_at(std::int32_t e) const noexcept {
        const SubPoolSpec& s = spec();
        const auto at = [&](std::int32_t page) { return static_cast<std::size_t>(page) * s.page_bytes; };
        return G == Grow::up ? ByteBand{at(s.min_page), at(s.min_page + e)} : ByteBand{at(s.num_pages - e), at(s.num_pages)};
    }

    /// Grows the span by `k` pages; returns the lowest new page (new pages are `[first, first + k)`).
    std::int32_t grow_by(std::int32_t k) noexcept {
        const std::int32_t first = G == Grow::up ? spec().min_page + extent_ : spec().num_pages - extent_ - k;
        extent_ += k;
        if (k != 0) core_.bump_epoch();
        return first;
    }

    pool_core core_;
    std::int32_t extent_ = 0;  // the span is ranks [0, extent_)
};

}  // namespace unikv::detail
