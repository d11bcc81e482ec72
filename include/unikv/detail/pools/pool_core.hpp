#pragma once
/// \file
/// `pool_core`: the state every sub-pool policy shares: geometry, page table, per-page state, counts,
/// the id free list of an id-owning pool, and the capacity epoch. The policies (`LazyEndPool`,
/// `EagerEndPool`, `FloatPool`) decide where pages come from and when they move; every state transition goes
/// through this class, which keeps the counts and bumps the epoch.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/detail/pools/fixed_stack.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/page_table.hpp>

namespace unikv::detail {

/// What a physical page is, from its pool's point of view.
enum class page_state : std::uint8_t {
    unowned,        ///< outside the pool's span (free band, or owned by a neighbour)
    sink,           ///< below `min_page`: never handed out
    hole,           ///< inside the span, free for reuse
    live,           ///< bound to a virtual page
    reserved,       ///< a page of a pending reservation (load not submitted), not bound
    live_reserved,  ///< a page of a pending reservation, bound (cannot be freed or moved)
    pending_reuse,  ///< moved away; reusable once the forward that may read it is done
    held,           ///< a page of a submitted reservation, not bound (bind it, or `free_physical` it)
};

/// The integer of a page id, whether a raw int32 or a strong id.
[[nodiscard]] constexpr std::int32_t id_value(std::int32_t v) noexcept { return v; }
template <class Tag>
[[nodiscard]] constexpr std::int32_t id_value(strong_id<Tag> v) noexcept { return v.value(); }

/// Whether a pool mints its own virtual ids (FULL, Mamba) or binds another pool's (SWA binds FULL's).
enum class id_source : std::uint8_t { owner, borrowed };

class pool_core {
public:
    /// A pool over `spec` whose v2p covers `num_virtual` ids (its own page count for an id owner, FULL's for
    /// SWA). An owner's free ids start as `[min_page, num_virtual)`, handed out ascending.
    pool_core(const SubPoolSpec& spec, std::int32_t num_virtual, id_source ids)
        : spec_(spec),
          table_(num_virtual, spec.num_pages, PageSize{spec.page_size}),
          state_(static_cast<std::size_t>(spec.num_pages), page_state::unowned),
          holes_(static_cast<std::size_t>(spec.num_pages)),
          free_ids_(ids == id_source::owner ? static_cast<std::size_t>(std::max(0, num_virtual)) : 0),
          owns_ids_(ids == id_source::owner) {
        for (std::int32_t p = 0; p < std::min(spec.min_page, spec.num_pages); ++p) state_[static_cast<std::size_t>(p)] = page_state::sink;
        if (owns_ids_) {
            for (std::int32_t v = num_virtual - 1; v >= spec.min_page; --v) free_ids_.push(v);
        }
    }

    [[nodiscard]] const SubPoolSpec& spec() const noexcept { return spec_; }
    [[nodiscard]] const PageTable& table() const noexcept { return table_; }
    /// Queues the v2p chunks written since the last publish into `mirror` on `stream` and forgets them
    /// (`PageTableMirror::publish`); the only non-const access to the table outside the transitions below.
    template <class Mirror>
    bool publish_table(Mirror& mirror, typename Mirror::stream_ref stream) {
        return mirror.publish(table_, stream);
    }
    [[nodiscard]] page_state state(std::int32_t p) const noexcept {
        return p >= 0 && p < spec_.num_pages ? state_[static_cast<std::size_t>(p)] : page_state::sink;
    }
    [[nodiscard]] bool owns_ids() const noexcept { return owns_ids_; }

    /// Bound pages (live and live_reserved).
    [[nodiscard]] std::int32_t live_pages() const noexcept { return live_; }
    /// Reservation pages that are not bound (pending or submitted).
    [[nodiscard]] std::int32_t reserved_pages() const noexcept { return reserved_; }
    [[nodiscard]] std::int32_t hole_pages() const noexcept { return static_cast<std::int32_t>(holes_.size()); }
    [[nodiscard]] std::int32_t pending_reuse_pages() const noexcept { return pending_reuse_; }
    /// Pages of reservations whose load is not submitted yet: while > 0 the pool's pages must not move.
    [[nodiscard]] std::int32_t pending_load_pages() const noexcept { return pending_load_; }
    /// Pages that occupy the span: live + reserved + holes + pending reuse.
    [[nodiscard]] std::int32_t occupied_pages() const noexcept { return live_ + reserved_ + hole_pages() + pending_reuse_; }
    /// Bumped by every change of a capacity-bearing value; keys the capacity memos.
    [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
    [[nodiscard]] std::span<const std::int32_t> holes() const noexcept { return holes_.view(); }

    // ---- virtual ids (id owners) ----------------------------------------------------------------------
    [[nodiscard]] std::int32_t free_ids() const noexcept { return static_cast<std::int32_t>(free_ids_.size()); }
    /// Takes the next free id (the top of the stack: the lowest id first, then the most recently pushed).
    /// Precondition: `free_ids() > 0`. O(1).
    std::int32_t pop_id() noexcept {
        ++epoch_;
        return free_ids_.pop();
    }
    /// Returns id `v` to the free stack; the next `pop_id` takes it back first.
    void push_id(std::int32_t v) noexcept {
        free_ids_.push(v);
        ++epoch_;
    }

    // ---- transitions; each keeps the counts and bumps the epoch ------------------------------------------
    /// An unowned page (just taken from a hole or the free band) becomes bound to `v`.
    void occupy_bound(std::int32_t p, std::int32_t v) noexcept {
        UNIKV_ASSERT(state(p) == page_state::unowned);
        table_.bind_unchecked(v, p);
        set(p, page_state::live);
        ++live_;
        ++epoch_;
    }
    /// An unowned page becomes a pending reservation page.
    void occupy_reserved(std::int32_t p) {
        UNIKV_ASSERT(state(p) == page_state::unowned);
        set(p, page_state::reserved);
        ++reserved_;
        ++pending_load_;
        ++epoch_;
    }
    /// Unbinds live virtual page `v`; its physical page becomes unowned and is returned.
    std::int32_t release_bound(std::int32_t v) noexcept {
        const std::int32_t p = table_.unbind_unchecked(v);
        UNIKV_ASSERT(state(p) == page_state::live);
        set(p, page_state::unowned);
        --live_;
        ++epoch_;
        return p;
    }
    /// Binds an unbound reservation page `p` under `v`: `reserved` becomes `live_reserved` (its load is still
    /// pending), `held` becomes `live`.
    void bind_reserved(std::int32_t p, std::int32_t v) {
        const page_state s = state(p);
        UNIKV_ASSERT(s == page_state::reserved || s == page_state::held);
        table_.bind(v, p);
        set(p, s == page_state::reserved ? page_state::live_reserved : page_state::live);
        --reserved_;
        ++live_;
        ++epoch_;
    }
    /// Releases one reservation page (`reserved`, `live_reserved`, `held`, or a bound `live` page handed to
    /// `free_physical`): a bound page is unbound (its SWA entry becomes a tombstone); it becomes unowned.
    void release_reservation_page(std::int32_t p) {
        const page_state s = state(p);
        UNIKV_ASSERT(s == page_state::reserved || s == page_state::live_reserved || s == page_state::held ||
                     s == page_state::live);
        if (s == page_state::reserved || s == page_state::held) {
            --reserved_;
        } else {
            (void)table_.unbind(table_.virtual_of(p));
            --live_;
        }
        if (s == page_state::reserved || s == page_state::live_reserved) --pending_load_;
        set(p, page_state::unowned);
        ++epoch_;
    }
    /// The load of `p`'s reservation was submitted: `reserved` becomes `held`, `live_reserved` becomes `live`,
    /// and the page leaves the pending-load count.
    void submit_page(std::int32_t p) noexcept {
        const page_state s = state(p);
        if (s == page_state::reserved) set(p, page_state::held);
        else if (s == page_state::live_reserved) set(p, page_state::live);
        else return;
        --pending_load_;
        ++epoch_;
    }
    void add_hole(std::int32_t p) noexcept {
        UNIKV_ASSERT(state(p) == page_state::unowned);
        set(p, page_state::hole);
        holes_.push(p);
        ++epoch_;
    }
    /// Takes the most recently added hole; it becomes unowned.
    std::int32_t take_hole() noexcept {
        const std::int32_t p = holes_.pop();
        set(p, page_state::unowned);
        ++epoch_;
        return p;
    }
    /// Binds `vids[i]` to holes (most recent first) while both last; appends each page to `*handed` when
    /// given. Returns how many were bound. O(bound).
    template <class Id>
    std::size_t bind_from_holes(std::span<const Id> vids, std::vector<std::int32_t>* handed) noexcept {
        std::size_t i = 0;
        for (; i < vids.size() && !holes_.empty(); ++i) {
            const std::int32_t p = take_hole();
            occupy_bound(p, id_value(vids[i]));
            if (handed != nullptr) handed->push_back(p);
        }
        return i;
    }
    /// Takes up to `n` holes as pending reservation pages; appends them to `out` (and `*handed`). Returns
    /// how many it took.
    std::int32_t reserve_from_holes(std::int32_t n, std::vector<PhysicalPage>& out, std::vector<std::int32_t>* handed) {
        std::int32_t i = 0;
        for (; i < n && !holes_.empty(); ++i) {
            const std::int32_t p = take_hole();
            occupy_reserved(p);
            out.emplace_back(p);
            if (handed != nullptr) handed->push_back(p);
        }
        return i;
    }
    /// Reorders the hole list (no capacity change).
    template <class Compare>
    void sort_holes(Compare cmp) {
        std::sort(holes_.begin(), holes_.end(), cmp);
    }
    /// Removes the last `n` holes of the list (after `sort_holes`); they become unowned.
    void drop_last_holes(std::size_t n) noexcept {
        for (std::size_t i = 0; i < n; ++i) set(holes_.pop(), page_state::unowned);
        if (n != 0) ++epoch_;
    }
    /// Removes the first `n` holes of the list (after `sort_holes`); they become unowned. O(holes).
    void take_first_holes(std::size_t n) noexcept {
        for (std::size_t i = 0; i < n; ++i) set(holes_[i], page_state::unowned);
        holes_.erase_prefix(n);
        if (n != 0) ++epoch_;
    }
    /// Removes every hole (a parked float); they become unowned.
    void drop_all_holes() noexcept { drop_last_holes(holes_.size()); }
    /// Replaces the hole list with the pages of `pages` (each must be unowned or a hole).
    void reset_holes(const std::vector<std::int32_t>& pages) {
        for (std::int32_t p : holes_) set(p, page_state::unowned);
        holes_.clear();
        for (std::int32_t p : pages) {
            set(p, page_state::hole);
            holes_.push(p);
        }
        ++epoch_;
    }
    void add_pending_reuse(std::int32_t p) noexcept {
        UNIKV_ASSERT(state(p) == page_state::unowned);
        set(p, page_state::pending_reuse);
        ++pending_reuse_;
        ++epoch_;
    }
    /// A pending-reuse page's reader finished: it becomes a hole.
    void pending_reuse_to_hole(std::int32_t p) {
        UNIKV_ASSERT(state(p) == page_state::pending_reuse);
        set(p, page_state::unowned);
        --pending_reuse_;
        add_hole(p);
    }
    /// Moves live page `src`'s binding to unowned page `dst` (the data copy is already queued). `src` becomes
    /// unowned. Throws `logic_error` (nothing written) when `src` is unbound.
    void move_page(std::int32_t src, std::int32_t dst) {
        UNIKV_EXPECTS(state(src) == page_state::live, "physical page ", src, " of the ", to_string(spec_.component),
                      " pool is not a movable live page");
        UNIKV_ASSERT(state(dst) == page_state::unowned);
        table_.move_binding(src, dst);
        set(dst, page_state::live);
        set(src, page_state::unowned);
        ++epoch_;
    }
    void bump_epoch() noexcept { ++epoch_; }

    /// Appends to `out` every broken invariant of the shared state over the pages in `[lo, hi)` (the span):
    /// state counts match the counters, pages outside the span are unowned, the hole list holds exactly the
    /// hole pages, v2p and p2v are mutual inverses, sentinels and sink are intact, and an owner's free ids
    /// and bound ids partition its id range. O(pages + virtual ids).
    void verify(std::int32_t lo, std::int32_t hi, std::vector<std::string>& out) const;

private:
    void set(std::int32_t p, page_state s) noexcept { state_[static_cast<std::size_t>(p)] = s; }

    SubPoolSpec spec_;
    PageTable table_;
    std::vector<page_state> state_;     // indexed by physical page
    fixed_stack holes_;     // every page in state `hole`, in no particular order
    fixed_stack free_ids_;  // id owners: a stack, the next id on top
    bool owns_ids_;
    std::int32_t live_ = 0;
    std::int32_t reserved_ = 0;
    std::int32_t pending_reuse_ = 0;
    std::int32_t pending_load_ = 0;
    std::uint64_t epoch_ = 0;
};

}  // namespace unikv::detail

#include <unikv/detail/pools/pool_core.inl>
