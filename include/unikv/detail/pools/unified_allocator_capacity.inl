#pragma once
/// \file
/// `UnifiedAllocator` definitions: the capacity engine (one exact feasibility check used by every query and
/// by the shortfall ladder), its memos, and `verify_byte_accounting`. Included at the bottom of
/// `pools/unified_allocator.hpp`.
///
/// `fits(demand, drain_mask)` asks: would every pool get its pages if the ends extended from their current
/// frontiers (after draining the holes of the ends in `drain_mask`) and the float took the band left
/// between them (anywhere in it when the float is in `drain_mask` and relocatable)? The ladder realizes
/// exactly what the mask assumes (urgent flushes, then one float relocation), so `can_reserve` and
/// `ensure_capacity` agree.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace unikv {

namespace detail {
/// Demand of `n` pages for a memo shape: one component, or the composite (FULL with SWA when present).
[[nodiscard]] constexpr CapacityDemand demand_of_shape(std::size_t shape, std::int64_t n, bool with_swa) noexcept {
    CapacityDemand d;
    if (shape == component_count) {
        d.full = n;
        d.swa = with_swa ? n : 0;
    } else if (shape == index_of(Component::full)) {
        d.full = n;
    } else if (shape == index_of(Component::swa)) {
        d.swa = n;
    } else {
        d.mamba = n;
    }
    return d;
}
}  // namespace detail

template <class L, class B>
std::uint64_t UnifiedAllocator<L, B>::epoch() const noexcept {
    std::uint64_t sum = 0;
    for_each_pool([&](const auto& p, auto) { sum += p.core().epoch(); });
    return sum;
}

template <class L, class B>
bool UnifiedAllocator<L, B>::fits(const CapacityDemand& d, std::uint32_t drain_mask, bool ignore_pins) const {
    if (d.full > pool<full_index>().core().free_ids()) return false;
    if constexpr (has_mamba) {
        if (d.mamba > pool<mamba_index>().core().free_ids()) return false;
    }
    // Where each end's frontier lands once it took its demand (holes first, drained holes when in the mask).
    const auto project = [&](const auto& p, std::size_t index, std::int64_t demand, std::size_t& front) {
        const detail::pool_core& c = p.core();
        const bool drain = ((drain_mask >> index) & 1u) != 0 && (ignore_pins || c.reserved_pages() == 0);
        const std::int64_t holes = drain ? 0 : c.hole_pages();
        const std::int64_t start = p.extent() - (drain ? c.hole_pages() + c.pending_reuse_pages() : 0);
        const std::int64_t end = start + std::max<std::int64_t>(0, demand - holes);
        if (end > c.spec().usable_pages()) return false;
        front = p.frontier_bytes_at(static_cast<std::int32_t>(end));
        return true;
    };
    std::size_t up_front = 0;
    std::size_t down_front = 0;
    if (!project(pool<full_index>(), full_index, d.full, down_front)) return false;
    if constexpr (!has_up_end_) {
        return true;  // a lone FULL pool stays above its sink floor (`usable_pages`)
    } else if (!project(pool<0>(), 0, d.of(layout_member_t<L, 0>::component), up_front) || up_front > down_front) {
        return false;
    } else if constexpr (!has_float) {
        return true;
    } else {
        const auto& fl = pool<1>();
        const detail::pool_core& c = fl.core();
        const std::int64_t band = std::max(0, fl.band_hi(down_front) - fl.band_lo(up_front));
        const bool relocate = (drain_mask & relocate_bit) != 0 && (ignore_pins || fl.relocatable());
        if (relocate || fl.transparent()) {
            const std::int64_t occupied = fl.transparent() ? 0 : c.occupied_pages() - c.hole_pages();
            return occupied + d.swa == 0 || band >= occupied + d.swa;
        }
        // Bit 1: the float's boundary holes are absorbed first (zero copy, allowed even when moves are not).
        const auto [lo, hi] = ((drain_mask >> 1) & 1u) != 0 ? fl.absorbed_span() : std::pair{fl.span_lo(), fl.span_hi()};
        const std::size_t page_bytes = c.spec().page_bytes;
        if (up_front > static_cast<std::size_t>(lo) * page_bytes || static_cast<std::size_t>(hi) * page_bytes > down_front) return false;
        const std::int64_t holes = c.hole_pages() - (lo - fl.span_lo()) - (fl.span_hi() - hi);
        const std::int64_t room = holes + std::max(0, lo - fl.band_lo(up_front)) + std::max(0, fl.band_hi(down_front) - hi);
        return room >= d.swa;
    }
}

template <class L, class B>
std::uint32_t UnifiedAllocator<L, B>::compaction_set(const CapacityDemand& d, bool ignore_blocking) const {
    const std::uint32_t movable = ignore_blocking ? ~0u : movable_mask();
    const auto lazy_bit = [&]<std::size_t I>() -> std::uint32_t {
        return is_lazy_v<I> && ((movable >> I) & 1u) != 0 ? (1u << I) : 0u;
    };
    const std::int64_t up_demand = d.of(layout_member_t<L, 0>::component);
    if constexpr (!has_up_end_) {
        return 0;  // no growth-side neighbour: draining its own holes would only copy pages it can reuse
    } else if constexpr (!has_float) {
        std::uint32_t set = 0;
        if (up_demand > 0) set |= lazy_bit.template operator()<full_index>();
        if (d.full > 0) set |= lazy_bit.template operator()<0>();
        return set;
    } else {
        if (d.full + d.swa + d.mamba <= 0) return 0;
        // The float always absorbs its boundary holes; it relocates only when its moves are allowed.
        return lazy_bit.template operator()<0>() | lazy_bit.template operator()<full_index>() | 2u |
               ((movable & 2u) != 0 ? relocate_bit : 0u);
    }
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::largest_fit(std::size_t shape, std::uint32_t drain_mask) const {
    std::int64_t lo = 0;
    std::int64_t hi = shape == component_count ? spec_[Component::full].usable_pages()
                                               : spec_[static_cast<Component>(shape)].usable_pages();
    while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(detail::demand_of_shape(shape, mid, has_swa), drain_mask, false)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

template <class L, class B>
std::uint32_t UnifiedAllocator<L, B>::schedulable_credit(std::size_t shape, std::uint32_t movable) const {
    // Only lazy growth-side neighbours whose moves are allowed are credited with their drainable holes.
    const auto lazy_bit = [&]<std::size_t I>() -> std::uint32_t {
        return is_lazy_v<I> && ((movable >> I) & 1u) != 0 ? (1u << I) : 0u;
    };
    const bool joint = shape == component_count;
    const std::size_t up_shape = index_of(layout_member_t<L, 0>::component);
    if constexpr (!has_up_end_) {
        return 0;  // no growth-side neighbour to credit
    } else if constexpr (!has_float) {
        std::uint32_t credit = 0;
        if (joint || shape == index_of(Component::full)) credit |= lazy_bit.template operator()<0>();
        if ((joint && has_swa) || shape == up_shape) credit |= lazy_bit.template operator()<full_index>();
        return credit;
    } else {
        // The ends face the float, which is not lazy; the float faces both ends.
        if (joint || shape == index_of(Component::swa)) {
            return lazy_bit.template operator()<0>() | lazy_bit.template operator()<full_index>();
        }
        return 0;
    }
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::memoized(memo_kind kind, std::size_t shape) const {
    const std::uint64_t e = epoch();
    const std::uint32_t mask = kind == memo_kind::available ? 0u : schedulable_credit(shape, movable_mask());
    memo_entry& entry = memo_[static_cast<std::size_t>(kind)][shape];
    if (entry.epoch == e && entry.mask == mask) return entry.value;
    entry = {e, mask, largest_fit(shape, mask)};
    return entry.value;
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::available_size() const {
    return memoized(memo_kind::available, component_count);
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::available_size(Component c) const {
    (void)core_of(c, "available_size");
    return memoized(memo_kind::available, index_of(c));
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::schedulable_available_size() const {
    return memoized(memo_kind::schedulable, component_count);
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::schedulable_available_size(Component c) const {
    (void)core_of(c, "schedulable_available_size");
    return memoized(memo_kind::schedulable, index_of(c));
}

template <class L, class B>
bool UnifiedAllocator<L, B>::can_reserve(const CapacityDemand& demand) const {
    UNIKV_EXPECTS(demand.full >= 0 && demand.swa >= 0 && demand.mamba >= 0 && (has_swa || demand.swa == 0) &&
                      (has_mamba || demand.mamba == 0),
                  "demand {full ", demand.full, ", swa ", demand.swa, ", mamba ", demand.mamba,
                  "} is negative or names a pool the layout lacks");
    return fits(demand, 0, false) || fits(demand, compaction_set(demand, false), false);
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::ensure_capacity(const CapacityDemand& demand) {
    UNIKV_EXPECTS(demand.full >= 0 && demand.swa >= 0 && demand.mamba >= 0 && (has_swa || demand.swa == 0) &&
                      (has_mamba || demand.mamba == 0),
                  "demand {full ", demand.full, ", swa ", demand.swa, ", mamba ", demand.mamba,
                  "} is negative or names a pool the layout lacks");
    return relieve(demand);
}

template <class L, class B>
bool UnifiedAllocator<L, B>::covered_by_holes(const CapacityDemand& d) const noexcept {
    bool from_holes = d.full <= pool<full_index>().core().hole_pages() && d.full <= pool<full_index>().core().free_ids();
    if constexpr (has_swa) from_holes = from_holes && d.swa <= pool<swa_index>().core().hole_pages();
    if constexpr (has_mamba) {
        const detail::pool_core& m = pool<mamba_index>().core();
        from_holes = from_holes && d.mamba <= m.hole_pages() && d.mamba <= m.free_ids();
    }
    return from_holes;
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::relieve(const CapacityDemand& d) {
    if (covered_by_holes(d)) return {};
    if (fits(d, 0, false)) return {};
    return with_moves([&](auto& ctx) -> AllocResult {
        if constexpr (has_float) {
            // Zero-copy absorption of the float's boundary holes is always allowed, and often enough.
            (void)pool<1>().flush(ctx, FlushMode::urgent, false, 0);
            if (fits(d, 0, false)) return {};
        }
        const std::uint32_t set = compaction_set(d, false);
        if (set == 0) return shortfall_of(d);
        for_each_pool([&](auto& p, auto i) {
            if constexpr (decltype(i)::value != 1 || !has_float) {
                if (((set >> decltype(i)::value) & 1u) != 0 && p.drainable() > 0) (void)p.flush(ctx, FlushMode::urgent, false, 0);
            }
        });
        if (fits(d, 0, false)) return {};
        if constexpr (has_float) {
            auto& fl = pool<1>();
            if ((set & relocate_bit) != 0 && fl.relocatable() && !fl.transparent()) {
                // Relocate the float into the band the ends leave once they took their demand.
                const auto front = [](const auto& p, std::int64_t demand) {
                    const std::int64_t end = p.extent() + std::max<std::int64_t>(0, demand - p.core().hole_pages());
                    return p.frontier_bytes_at(static_cast<std::int32_t>(std::min<std::int64_t>(end, p.core().spec().usable_pages())));
                };
                const std::size_t up_front = front(pool<0>(), d.of(layout_member_t<L, 0>::component));
                const std::size_t down_front = front(pool<full_index>(), d.full);
                if (up_front <= down_front) (void)fl.relocate_into(fl.band_lo(up_front), fl.band_hi(down_front), ctx);
                if (fits(d, 0, false)) return {};
            }
        }
        return shortfall_of(d);
    });
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::shortfall_of(const CapacityDemand& d) const {
    Component short_pool = d.full > 0 ? Component::full : d.swa > 0 ? Component::swa : Component::mamba;
    for (Component c : {Component::full, Component::swa, Component::mamba}) {
        CapacityDemand alone;
        if (c == Component::full) alone.full = d.full;
        else if (c == Component::swa) alone.swa = d.swa;
        else alone.mamba = d.mamba;
        if (d.of(c) > 0 && !fits(alone, 0, false)) {
            short_pool = c;
            break;
        }
    }
    // The fewest pages of `short_pool` to take off `d` so that it fits under `mask` (binary search, failure
    // path only: fitting is monotone in the demand).
    const auto missing = [&](std::uint32_t mask, bool ignore_pins) {
        std::int64_t lo = 0;
        std::int64_t hi = d.of(short_pool);
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            CapacityDemand less = d;
            (short_pool == Component::full ? less.full : short_pool == Component::swa ? less.swa : less.mamba) -= mid;
            if (fits(less, mask, ignore_pins)) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    };
    if (const std::int64_t ids = pool<full_index>().core().free_ids(); d.full > ids) {
        return {Shortfall::virtual_ids, Component::full, d.full - ids};
    }
    if constexpr (has_mamba) {
        if (const std::int64_t ids = pool<mamba_index>().core().free_ids(); d.mamba > ids) {
            return {Shortfall::virtual_ids, Component::mamba, d.mamba - ids};
        }
    }
    if (fits(d, compaction_set(d, true), true)) return {Shortfall::moves_blocked, short_pool, missing(0, false)};
    return {Shortfall::room, short_pool, missing(compaction_set(d, true), true)};
}

template <class L, class B>
std::pair<std::size_t, std::size_t> UnifiedAllocator<L, B>::byte_span(Component c) const {
    (void)core_of(c, "byte_span");
    std::pair<std::size_t, std::size_t> span{};
    for_each_pool([&](const auto& p, auto i) {
        if (layout_member_t<L, decltype(i)::value>::component == c) span = {p.low_bytes(), p.high_bytes()};
    });
    return span;
}

// ---- verification -----------------------------------------------------------------------------------------

template <class L, class B>
std::vector<std::string> UnifiedAllocator<L, B>::verify_byte_accounting() const {
    std::vector<std::string> out;
    for_each_pool([&](const auto& p, auto) { p.verify(out); });
    verify_composite(out);
    return out;
}

template <class L, class B>
void UnifiedAllocator<L, B>::verify_composite(std::vector<std::string>& out) const {
    // Byte frontiers are ordered along the chain (a parked float is transparent).
    const std::size_t up_high = has_up_end_ ? pool<0>().high_bytes() : spec_.sink_floor_bytes;
    const std::size_t down_low = pool<full_index>().low_bytes();
    if (up_high > down_low) out.push_back(detail::concat("chain: up end ends at byte ", up_high, " above the down end's start ", down_low));
    if (up_high < spec_.sink_floor_bytes) out.push_back("chain: the up end starts inside the sink");
    if constexpr (has_float) {
        const auto& fl = pool<1>();
        if (!fl.transparent() && (fl.low_bytes() < up_high || fl.high_bytes() > down_low)) {
            out.push_back(detail::concat("chain: float bytes [", fl.low_bytes(), ", ", fl.high_bytes(),
                                         ") overlap the ends [.., ", up_high, ") and [", down_low, ", ..)"));
        }
    }
    // SWA binds only FULL's live ids; pending reservations match the pending-load count.
    if constexpr (has_swa) {
        const auto swa_v2p = pool<swa_index>().core().table().v2p();
        const PageTable& full = pool<full_index>().core().table();
        for (std::size_t v = 1; v + 1 < swa_v2p.size(); ++v) {
            if (swa_v2p[v] > 0 && full.physical_of(static_cast<std::int32_t>(v)) <= 0) {
                out.push_back(detail::concat("swa: virtual page ", static_cast<std::int64_t>(v), " is bound to SWA page ",
                                             swa_v2p[v], " but its FULL page is free"));
            }
        }
        std::int64_t pending = 0;
        const detail::pool_core& swa = pool<swa_index>().core();
        for (std::size_t i = 0; i < registry_->size(); ++i) {
            const detail::reservation_slot& slot = registry_->slot(static_cast<std::uint32_t>(i));
            if (slot.state != detail::reservation_state::pending) continue;
            for (const PhysicalPage page : slot.pages) {
                ++pending;
                const detail::page_state s = swa.state(page.value());
                if (s != detail::page_state::reserved && s != detail::page_state::live_reserved) {
                    out.push_back(detail::concat("swa: page ", page.value(), " of a pending reservation is in state ",
                                                 static_cast<int>(s)));
                }
            }
        }
        if (pending != swa.pending_load_pages()) {
            out.push_back(detail::concat("swa: pending reservations hold ", pending, " pages but the pending-load count is ",
                                         swa.pending_load_pages()));
        }
    }
    // Memo coherence: a cached value whose key is current must equal a fresh computation.
    const std::uint64_t e = epoch();
    const std::uint32_t movable = movable_mask();
    for (std::size_t kind = 0; kind < memo_.size(); ++kind) {
        for (std::size_t shape = 0; shape <= component_count; ++shape) {
            const memo_entry& entry = memo_[kind][shape];
            if (entry.epoch != e) continue;
            const std::uint32_t mask = kind == 0 ? 0u : schedulable_credit(shape, movable);
            if (entry.mask != mask) continue;
            if (const std::int64_t fresh = largest_fit(shape, mask); fresh != entry.value) {
                out.push_back(detail::concat("memo: cached capacity ", entry.value, " for shape ", shape, " kind ", kind,
                                             " but a fresh computation gives ", fresh, " (a change did not bump the epoch)"));
            }
        }
    }
}

}  // namespace unikv
