#pragma once
/// \file
/// `CapacityView`: everything a budget reads of a cache, and nothing else (reference §6.1). The cache hands it
/// out (`Cache::capacity()`) over its allocator and its tree; the view converts the tree's units (tokens;
/// states for Mamba) into pages, here, so a budget never converts by hand. A budget's calls take it by const
/// reference and return what the cache should do (`Selection`, `Reclaim`), so the budget concept can check
/// every call a budget makes (`budget_concept.hpp`). Each count is read when asked, not when the view is
/// taken: an admission that fits reads three or four counts, and only a refusal reads the whole breakdown.
/// Valid until the next call that changes the cache.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

class CapacityView;

/// One pool as a budget sees it, in pages of that pool (Mamba: states). A handle on the cache (not on the view,
/// so it may outlive it): every count is one allocator or tree query, O(1) unless it says otherwise.
class PoolCapacity {
public:
    /// The layout has the pool; every count below is 0 otherwise.
    [[nodiscard]] bool present() const noexcept { return spec_->present; }
    /// Bytes of one page (one state).
    [[nodiscard]] std::size_t page_bytes() const noexcept { return spec_->page_bytes; }
    /// Tokens per page (1 for Mamba).
    [[nodiscard]] std::int32_t page_tokens() const noexcept { return spec_->page_size; }
    /// The tokens (Mamba: states) that `pages` pages of the pool hold. O(1).
    [[nodiscard]] std::int64_t tokens_in(std::int64_t pages) const noexcept { return pages * spec_->page_size; }
    /// The pages of the pool that hold `tokens` tokens (Mamba: states), rounded up. O(1).
    [[nodiscard]] Pages pages_for(std::int64_t tokens) const noexcept {
        return {component_, (tokens + spec_->page_size - 1) / spec_->page_size};
    }
    /// Pages the pool could ever hold: the whole arena its own (`SubPoolSpec::usable_pages`), within its bound
    /// where a static partition bounds it (`UnifiedAllocator::page_bound`). O(1).
    [[nodiscard]] std::int64_t most() const;
    /// Free pages now (`UnifiedAllocator::available_size`).
    [[nodiscard]] std::int64_t free() const;
    /// Free pages an allocation can reach: `free` plus the flushable holes compaction would hand over, within
    /// the pool's bound (`schedulable_available_size`). O(pools).
    [[nodiscard]] std::int64_t schedulable() const;
    /// Pages of unlocked tree data eviction can free (the tree's evictable size).
    [[nodiscard]] std::int64_t evictable() const;
    /// Pages of tree data held by locks: running requests, admission pins, loads awaiting their ack.
    [[nodiscard]] std::int64_t locked() const;
    /// Pages of reservations that in-flight loads have not bound yet.
    [[nodiscard]] std::int64_t in_flight() const;
    /// Holes compaction would return, and cannot while the pool's moves are blocked (`moves_blocked`).
    [[nodiscard]] std::int64_t holes() const;
    /// The pool's moves are blocked (a pending reservation or a host transfer in flight).
    [[nodiscard]] bool moves_blocked() const;

private:
    friend class CapacityView;
    PoolCapacity(const CapacityView& view, Component c) noexcept;
    [[nodiscard]] std::int64_t count(int what) const;

    const void* alloc_;
    const void* tree_;
    std::int64_t (*count_)(const void*, const void*, int, Component);
    const SubPoolSpec* spec_;
    Component component_;
};

/// What a budget reads of a cache (see the file comment). O(1) to take; each count is read on access.
class CapacityView {
public:
    /// The view of `alloc` (a `UnifiedAllocator`) and `tree` (a tree core), read as they stand at each access.
    /// O(1).
    template <class Alloc, class Tree>
    [[nodiscard]] static CapacityView of(const Alloc& alloc, const Tree& tree) noexcept {
        CapacityView v;
        v.alloc_ = &alloc;
        v.tree_ = &tree;
        v.spec_ = &alloc.spec();
        v.page_tokens_ = tree.config().page_size.tokens;
        v.swa_window_ = tree.config().swa_window;
        v.count_ = &count_of<Alloc, Tree>;
        v.can_reserve_ = [](const void* a, const CapacityDemand& d) {
            return static_cast<const Alloc*>(a)->can_reserve(d);
        };
        return v;
    }

    /// Pool `c`. O(1).
    [[nodiscard]] PoolCapacity operator[](Component c) const noexcept { return {*this, c}; }
    /// Tokens per FULL and SWA page.
    [[nodiscard]] std::int32_t page_tokens() const noexcept { return page_tokens_; }
    /// The SWA window in tokens (0: no window).
    [[nodiscard]] std::int32_t swa_window() const noexcept { return swa_window_; }
    /// Some pool's moves are blocked: compaction cannot hand bytes between pools now. O(pools).
    [[nodiscard]] bool moves_blocked() const { return count_(alloc_, tree_, any_moves_blocked, Component::full) != 0; }
    /// Whether `demand` fits in free pages with the compaction an allocation may run
    /// (`UnifiedAllocator::can_reserve`). O(pools) or a memo hit.
    [[nodiscard]] bool can_reserve(const CapacityDemand& demand) const { return can_reserve_(alloc_, demand); }

private:
    friend class PoolCapacity;
    // What `count_` reads.
    enum Count : int {
        free,
        schedulable,
        evictable,
        locked,
        in_flight,
        holes,
        bound,
        pool_moves_blocked,
        any_moves_blocked
    };

    CapacityView() = default;

    template <class Alloc, class Tree>
    static std::int64_t count_of(const void* a, const void* t, int what, Component c) {
        const auto& alloc = *static_cast<const Alloc*>(a);
        const auto& tree = *static_cast<const Tree*>(t);
        switch (what) {
        case free: return alloc.available_size(c);
        case schedulable: return alloc.schedulable_available_size(c);
        case evictable: return tree.evictable_size(c) / alloc.spec()[c].page_size;
        case locked: return tree.protected_size(c) / alloc.spec()[c].page_size;
        case in_flight: return alloc.reserved_pages(c);
        case holes: return alloc.hole_pages(c);
        case bound: return alloc.page_bound(c);
        case pool_moves_blocked: return alloc.moves_blocked(c) ? 1 : 0;
        case any_moves_blocked: return alloc.moves_blocked() ? 1 : 0;
        default: return 0;
        }
    }

    const void* alloc_ = nullptr;
    const void* tree_ = nullptr;
    const ArenaSpec* spec_ = nullptr;
    std::int32_t page_tokens_ = 1;
    std::int32_t swa_window_ = 0;
    std::int64_t (*count_)(const void*, const void*, int, Component) = nullptr;
    bool (*can_reserve_)(const void*, const CapacityDemand&) = nullptr;
};

inline PoolCapacity::PoolCapacity(const CapacityView& view, Component c) noexcept
    : alloc_(view.alloc_), tree_(view.tree_), count_(view.count_), spec_(&(*view.spec_)[c]), component_(c) {}
inline std::int64_t PoolCapacity::count(int what) const {
    return spec_->present ? count_(alloc_, tree_, what, component_) : 0;
}
inline std::int64_t PoolCapacity::most() const {
    const std::int64_t arena = spec_->usable_pages();
    const std::int64_t bound = count(CapacityView::bound);
    return bound > 0 ? std::min(arena, bound) : arena;
}
inline std::int64_t PoolCapacity::free() const { return count(CapacityView::free); }
inline std::int64_t PoolCapacity::schedulable() const { return count(CapacityView::schedulable); }
inline std::int64_t PoolCapacity::evictable() const { return count(CapacityView::evictable); }
inline std::int64_t PoolCapacity::locked() const { return count(CapacityView::locked); }
inline std::int64_t PoolCapacity::in_flight() const { return count(CapacityView::in_flight); }
inline std::int64_t PoolCapacity::holes() const { return count(CapacityView::holes); }
inline bool PoolCapacity::moves_blocked() const { return count(CapacityView::pool_moves_blocked) != 0; }

}  // namespace unikv
