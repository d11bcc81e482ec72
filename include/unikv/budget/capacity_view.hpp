#pragma once
/// \file
/// `CapacityView`: everything a budget reads of a cache, and nothing else (reference §6.1). The cache fills
/// it (`Cache::capacity()`) from its allocator and its tree, converting the tree's units (tokens; states for
/// Mamba) into pages once, here, so a budget never converts by hand; a budget's calls take it by const
/// reference and return what the cache should do (`Selection`, `Reclaim`), so the budget concept can check
/// every call a budget makes (`budget_concept.hpp`). Plain values plus one capacity query (`can_reserve`),
/// which the view forwards to the allocator it was taken from: valid until the next call that changes the
/// cache.

#include <cstddef>
#include <cstdint>

#include <unikv/component.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

/// One pool as a budget sees it, in pages of that pool (Mamba: states).
struct PoolCapacity {
    /// The layout has the pool; every count below is 0 otherwise.
    bool present = false;
    /// Bytes of one page (one state).
    std::size_t page_bytes = 0;
    /// Tokens per page (1 for Mamba).
    std::int32_t page_tokens = 1;
    /// Free pages now (`UnifiedAllocator::available_size`).
    std::int64_t free = 0;
    /// Free pages an allocation can reach: `free` plus the flushable holes compaction would hand over, within
    /// the pool's bound (`schedulable_available_size`).
    std::int64_t schedulable = 0;
    /// Pages of unlocked tree data eviction can free (the tree's evictable size).
    std::int64_t evictable = 0;
    /// Pages of tree data held by locks: running requests, admission pins, loads awaiting their ack.
    std::int64_t locked = 0;
    /// Pages of reservations that in-flight loads have not bound yet.
    std::int64_t in_flight = 0;
    /// Holes compaction would return, and cannot while the pool's moves are blocked (`moves_blocked`).
    std::int64_t holes = 0;
    /// The pool's moves are blocked (a pending reservation or a host transfer in flight).
    bool moves_blocked = false;
};

/// What a budget reads of a cache (see the file comment). Taken with `of`; O(pools) to take, O(1) to read.
class CapacityView {
public:
    /// The view of `alloc` (a `UnifiedAllocator`) and `tree` (a tree core) as they stand. O(pools).
    template <class Alloc, class Tree>
    [[nodiscard]] static CapacityView of(const Alloc& alloc, const Tree& tree) {
        CapacityView v;
        v.alloc_ = &alloc;
        v.can_reserve_ = [](const void* a, const CapacityDemand& d) {
            return static_cast<const Alloc*>(a)->can_reserve(d);
        };
        v.page_tokens_ = tree.config().page_size.tokens;
        v.swa_window_ = tree.config().swa_window;
        v.moves_blocked_ = alloc.moves_blocked();
        for (Component c : all_components) {
            const auto& spec = alloc.spec()[c];
            if (!spec.present) continue;
            const std::int64_t tokens = spec.page_size;  // tree units per page
            v.pools_[c] = {.present = true,
                           .page_bytes = spec.page_bytes,
                           .page_tokens = spec.page_size,
                           .free = alloc.available_size(c),
                           .schedulable = alloc.schedulable_available_size(c),
                           .evictable = tree.evictable_size(c) / tokens,
                           .locked = tree.protected_size(c) / tokens,
                           .in_flight = alloc.reserved_pages(c),
                           .holes = alloc.hole_pages(c),
                           .moves_blocked = alloc.moves_blocked(c)};
        }
        return v;
    }

    /// Pool `c`. O(1).
    [[nodiscard]] const PoolCapacity& operator[](Component c) const noexcept { return pools_[c]; }
    /// Tokens per FULL and SWA page.
    [[nodiscard]] std::int32_t page_tokens() const noexcept { return page_tokens_; }
    /// The SWA window in tokens (0: no window).
    [[nodiscard]] std::int32_t swa_window() const noexcept { return swa_window_; }
    /// Some pool's moves are blocked: compaction cannot hand bytes between pools now.
    [[nodiscard]] bool moves_blocked() const noexcept { return moves_blocked_; }
    /// Whether `demand` fits in free pages with the compaction an allocation may run
    /// (`UnifiedAllocator::can_reserve`). O(pools) or a memo hit.
    [[nodiscard]] bool can_reserve(const CapacityDemand& demand) const { return can_reserve_(alloc_, demand); }

private:
    CapacityView() = default;

    per_component<PoolCapacity> pools_{};
    std::int32_t page_tokens_ = 1;
    std::int32_t swa_window_ = 0;
    bool moves_blocked_ = false;
    const void* alloc_ = nullptr;
    bool (*can_reserve_)(const void*, const CapacityDemand&) = nullptr;
};

}  // namespace unikv
