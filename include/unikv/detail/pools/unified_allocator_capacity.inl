#pragma once
/// \file
/// `UnifiedAllocator` definitions: the capacity engine (one exact feasibility check used by every query and
/// by the shortfall ladder), its memos, and `verify`. Included at the bottom of
/// `pools/unified_allocator.hpp`.
///
/// `fits(demand, plan)` asks: would every pool get its pages if the ends extended from their current
/// frontiers (after flushing the holes of the ends the plan names) and the float took the band left
/// between them (anywhere in it when the plan relocates it)? Each pool answers its part with the protocol's
/// one capacity query, `project`, inside the room its neighbours leave. The ladder (`relieve`) realizes exactly what
/// the plan assumes (urgent flushes, then one float relocation), so `can_reserve` and `ensure_capacity`
/// agree.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace unikv {

namespace detail {
/// Demand of `n` pages for a memo shape: one component, or the composite (FULL with SWA when present).
[[nodiscard]] constexpr CapacityDemand demand_of_shape(std::size_t shape, std::int64_t n, bool with_swa) noexcept {
    if (shape != component_count) return CapacityDemand::single(static_cast<Component>(shape), n);
    return {.full = n, .swa = with_swa ? n : 0};
}
}  // namespace detail

template <class L, class B>
std::uint64_t UnifiedAllocator<L, B>::epoch() const noexcept {
    std::uint64_t sum = 0;
    for_each_pool([&](const auto& p, auto) { sum += p.core().epoch(); });
    return sum;
}

template <class L, class B>
auto UnifiedAllocator<L, B>::movable() const -> member_roles {
    const bool open = gates_.open();
    const auto allowed = [&](const auto& p) { return open && p.core().pending_load_pages() == 0; };
    member_roles m{.down = allowed(pool<down_index>())};
    if constexpr (has_up_end_) m.up = allowed(pool<up_index>());
    if constexpr (has_float) m.middle = allowed(pool<float_index>());
    return m;
}

template <class L, class B>
void UnifiedAllocator<L, B>::bound_pages(const CapacityDemand& bounds) {
    check_demand(bounds, "bound_pages");
    std::size_t bytes = 0;
    for (const Component c : all_components) {
        if (bounds[c] == 0) continue;
        bytes += static_cast<std::size_t>(bounds[c]) * spec_[c].page_bytes;
        if (live_pages(c) + reserved_pages(c) > bounds[c]) {
            detail::misuse("bound_pages", to_string(c), " bound ", bounds[c], " pages is below the ",
                           live_pages(c) + reserved_pages(c), " it holds; bound the pools before allocating");
        }
    }
    const std::size_t usable = spec_.arena_bytes - spec_.sink_floor_bytes;
    if (bytes > usable) {
        detail::misuse("bound_pages", "bounds {full ", bounds.full, ", swa ", bounds.swa, ", mamba ", bounds.mamba,
                       "} take ", bytes, " bytes of an arena that has ", usable, "; size them from the same memory");
    }
    bounds_ = bounds;
    memo_ = {};  // the bounds change every answer, not the epoch
}

template <class L, class B>
std::pair<Component, std::int64_t> UnifiedAllocator<L, B>::past_bound(const CapacityDemand& d) const {
    for (const Component c : all_components) {
        if (bounds_[c] == 0 || d[c] == 0) continue;
        const detail::pool_core& core = core_of(c, "bound");
        const std::int64_t past = core.live_pages() + core.reserved_pages() + d[c] - bounds_[c];
        if (past > 0) return {c, past};
    }
    return {Component::full, 0};
}

template <class L, class B>
bool UnifiedAllocator<L, B>::fits(const CapacityDemand& d, relief_plan plan, Blockers b) const {
    if (past_bound(d).second > 0) return false;
    if (d[Component::full] > pool<down_index>().core().free_ids()) return false;
    if constexpr (has_mamba) {
        if (d[Component::mamba] > pool<mamba_index>().core().free_ids()) return false;
    }
    const std::optional<ByteBand> between = between_ends(d, plan, b);
    if constexpr (has_float) {
        return between && pool<float_index>()
                              .project(*between, d[Component::swa],
                                       {.flushed = plan.flushed.middle, .relocated = plan.relocate_float, .blockers = b})
                              .has_value();
    } else {
        return between.has_value();
    }
}

template <class L, class B>
std::optional<ByteBand> UnifiedAllocator<L, B>::between_ends(const CapacityDemand& d, relief_plan plan, Blockers b) const {
    const ByteBand arena{spec_.sink_floor_bytes, spec_.arena_bytes};
    const std::optional<ByteBand> down =
        pool<down_index>().project(arena, d[Component::full], {.flushed = plan.flushed.down, .blockers = b});
    if (!down) return std::nullopt;
    if constexpr (!has_up_end_) {
        return ByteBand{arena.low, down->low};  // a lone FULL pool stays above its sink floor
    } else {
        const std::optional<ByteBand> up =
            pool<up_index>().project({arena.low, down->low}, d[up_component_], {.flushed = plan.flushed.up, .blockers = b});
        if (!up) return std::nullopt;
        return ByteBand{up->high, down->low};
    }
}

template <class L, class B>
auto UnifiedAllocator<L, B>::relief_for(const CapacityDemand& d, Blockers b) const -> relief_plan {
    const member_roles movable = b == Blockers::ignored ? member_roles{.up = true, .middle = true, .down = true} : this->movable();
    relief_plan plan;
    if constexpr (!has_up_end_) {
        (void)d;  // no growth-side neighbour: flushing its own holes would only copy pages it can reuse in place
    } else if constexpr (!has_float) {
        // Each end grows into its neighbour's flushed holes.
        plan.flushed.up = is_lazy_v<up_index> && movable.up && d[Component::full] > 0;
        plan.flushed.down = is_lazy_v<down_index> && movable.down && d[up_component_] > 0;
    } else if (d.full + d.swa + d.mamba > 0) {
        // The float always absorbs its boundary holes; it relocates only when its moves are allowed.
        plan = {.flushed = {.up = is_lazy_v<up_index> && movable.up, .middle = true,
                            .down = is_lazy_v<down_index> && movable.down},
                .relocate_float = movable.middle};
    }
    return plan;
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::largest_fit(std::size_t shape, relief_plan plan) const {
    std::int64_t lo = 0;
    std::int64_t hi = shape == component_count ? spec_[Component::full].usable_pages()
                                               : spec_[static_cast<Component>(shape)].usable_pages();
    while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(detail::demand_of_shape(shape, mid, has_swa), plan, Blockers::honoured)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

template <class L, class B>
auto UnifiedAllocator<L, B>::schedulable_credit(std::size_t shape, member_roles movable) const -> relief_plan {
    // Only lazy growth-side neighbours whose moves are allowed are credited with their flushable holes.
    relief_plan credit;
    const bool joint = shape == component_count;
    if constexpr (!has_up_end_) {
        (void)joint;  // no growth-side neighbour to credit
    } else if constexpr (!has_float) {
        credit.flushed.up = is_lazy_v<up_index> && movable.up && (joint || shape == index_of(Component::full));
        credit.flushed.down =
            is_lazy_v<down_index> && movable.down && ((joint && has_swa) || shape == index_of(up_component_));
    } else if (joint || shape == index_of(Component::swa)) {
        // The ends face the float, which is not lazy; the float faces both ends.
        credit.flushed.up = is_lazy_v<up_index> && movable.up;
        credit.flushed.down = is_lazy_v<down_index> && movable.down;
    }
    return credit;
}

template <class L, class B>
std::int64_t UnifiedAllocator<L, B>::memoized(memo_kind kind, std::size_t shape) const {
    const std::uint64_t e = epoch();
    const relief_plan credit = kind == memo_kind::available ? relief_plan{} : schedulable_credit(shape, movable());
    memo_entry& entry = memo_[static_cast<std::size_t>(kind)][shape];
    if (entry.epoch == e && entry.credit == credit) return entry.value;
    entry = {e, credit, largest_fit(shape, credit)};
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
void UnifiedAllocator<L, B>::check_demand(const CapacityDemand& d, const char* call) const {
    for (const Component c : all_components) {
        if (d[c] < 0 || (d[c] > 0 && !layout_components_v<L>.has(c))) {
            detail::misuse(call, "demand {full ", d.full, ", swa ", d.swa, ", mamba ", d.mamba, "}: ", d[c],
                           d[c] < 0 ? " pages is negative for " : " pages of a pool the layout lacks: ", to_string(c));
        }
    }
}

template <class L, class B>
bool UnifiedAllocator<L, B>::can_reserve(const CapacityDemand& demand) const {
    check_demand(demand, "can_reserve");
    return fits(demand, {}, Blockers::honoured) || fits(demand, relief_for(demand, Blockers::honoured), Blockers::honoured);
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::ensure_capacity(const CapacityDemand& demand) {
    check_demand(demand, "ensure_capacity");
    return relieve(demand);
}

template <class L, class B>
bool UnifiedAllocator<L, B>::covered_by_holes(const CapacityDemand& d) const noexcept {
    const detail::pool_core& full = pool<down_index>().core();
    bool from_holes = d.full <= full.hole_pages() && d.full <= full.free_ids();
    if constexpr (has_swa) from_holes = from_holes && d.swa <= pool<swa_index>().core().hole_pages();
    if constexpr (has_mamba) {
        const detail::pool_core& m = pool<mamba_index>().core();
        from_holes = from_holes && d.mamba <= m.hole_pages() && d.mamba <= m.free_ids();
    }
    return from_holes;
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::relieve(const CapacityDemand& d) {
    if (const auto [c, past] = past_bound(d); past > 0) return {Shortfall::partition, {c, past}};
    if (covered_by_holes(d)) return {};
    if (fits(d, {}, Blockers::honoured)) return {};
    return with_moves([&](auto& ctx) -> AllocResult {
        if constexpr (has_float) {
            // Zero-copy absorption of the float's boundary holes is always allowed, and often enough.
            (void)pool<float_index>().flush(ctx, FlushMode::urgent, false, 0);
            if (fits(d, {}, Blockers::honoured)) return {};
        }
        const relief_plan plan = relief_for(d, Blockers::honoured);
        if (plan == relief_plan{}) return shortfall_of(d);
        const auto flush_holes = [&](auto& p, bool flushed) {
            if (flushed && p.flushable() > 0) (void)p.flush(ctx, FlushMode::urgent, false, 0);
        };
        if constexpr (has_up_end_) flush_holes(pool<up_index>(), plan.flushed.up);
        flush_holes(pool<down_index>(), plan.flushed.down);
        if (fits(d, {}, Blockers::honoured)) return {};
        if constexpr (has_float) {
            auto& fl = pool<float_index>();
            if (plan.relocate_float && fl.relocatable() && !fl.transparent()) {
                // Relocate the float into the band the ends leave once they took their demand. None is left when
                // an end cannot take its part, and then no relocation would make `d` fit.
                if (const std::optional<ByteBand> between = between_ends(d, {}, Blockers::honoured)) {
                    (void)fl.relocate_into(*between, ctx);
                }
                if (fits(d, {}, Blockers::honoured)) return {};
            }
        }
        return shortfall_of(d);
    });
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::shortfall_of(const CapacityDemand& d) const {
    // `relieve` answered a demand past a bound before it came here.
    // The first component asked for that does not fit alone, else the first one asked for.
    const auto asked = std::find_if(all_components.begin(), all_components.end(), [&](Component c) { return d[c] > 0; });
    Component short_pool = asked != all_components.end() ? *asked : Component::mamba;
    for (const Component c : all_components) {
        if (d[c] > 0 && !fits(CapacityDemand::single(c, d[c]), {}, Blockers::honoured)) {
            short_pool = c;
            break;
        }
    }
    // The fewest pages of `short_pool` to take off `d` so that it fits under `plan` (binary search, failure
    // path only: fitting is monotone in the demand).
    const auto missing = [&](relief_plan plan, Blockers b) {
        std::int64_t lo = 0;
        std::int64_t hi = d[short_pool];
        while (lo < hi) {
            const std::int64_t mid = lo + (hi - lo) / 2;
            CapacityDemand less = d;
            less[short_pool] -= mid;
            if (fits(less, plan, b)) hi = mid;
            else lo = mid + 1;
        }
        return lo;
    };
    if (const std::int64_t ids = pool<down_index>().core().free_ids(); d.full > ids) {
        return {Shortfall::virtual_ids, {Component::full, d.full - ids}};
    }
    if constexpr (has_mamba) {
        if (const std::int64_t ids = pool<mamba_index>().core().free_ids(); d.mamba > ids) {
            return {Shortfall::virtual_ids, {Component::mamba, d.mamba - ids}};
        }
    }
    const relief_plan unblocked = relief_for(d, Blockers::ignored);
    if (fits(d, unblocked, Blockers::ignored)) return {Shortfall::moves_blocked, {short_pool, missing({}, Blockers::honoured)}};
    return {Shortfall::room, {short_pool, missing(unblocked, Blockers::ignored)}};
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
std::vector<std::string> UnifiedAllocator<L, B>::verify() const {
    std::vector<std::string> out;
    for_each_pool([&](const auto& p, auto) {
        for (std::string& line : p.verify()) out.push_back(std::move(line));
    });
    verify_composite(out);
    // A hold names a live id: the tree's frees release it, and a request's free of a held id throws.
    std::int64_t held_pages = 0;
    for (std::size_t v = 1; v < held_.size(); ++v) {
        if ((held_[v] & held_page) != 0) {
            ++held_pages;
            if (!status(VirtualPage{static_cast<std::int32_t>(v)}).allocated) {
                out.push_back(detail::concat("hold: virtual page ", v, " is held but not allocated"));
            }
        }
        if ((held_[v] & held_state) != 0 && !status(StateId{static_cast<std::int32_t>(v)}).allocated) {
            out.push_back(detail::concat("hold: state slot ", v, " is held but not allocated"));
        }
    }
    if (held_pages != held_pages_) {
        out.push_back(detail::concat("hold: ", held_pages, " pages are held, the count says ", held_pages_));
    }
    return out;
}

template <class L, class B>
void UnifiedAllocator<L, B>::verify_composite(std::vector<std::string>& out) const {
    // Byte frontiers are ordered along the chain (a parked float is transparent).
    std::size_t up_high = spec_.sink_floor_bytes;
    if constexpr (has_up_end_) up_high = pool<up_index>().high_bytes();
    const std::size_t down_low = pool<down_index>().low_bytes();
    if (up_high > down_low) out.push_back(detail::concat("chain: up end ends at byte ", up_high, " above the down end's start ", down_low));
    if (up_high < spec_.sink_floor_bytes) out.push_back("chain: the up end starts inside the sink");
    if constexpr (has_float) {
        const auto& fl = pool<float_index>();
        if (!fl.transparent() && (fl.low_bytes() < up_high || fl.high_bytes() > down_low)) {
            out.push_back(detail::concat("chain: float bytes [", fl.low_bytes(), ", ", fl.high_bytes(),
                                         ") overlap the ends [.., ", up_high, ") and [", down_low, ", ..)"));
        }
    }
    // SWA binds only FULL's live ids; pending reservations match the pending-load count.
    if constexpr (has_swa) {
        const auto swa_v2p = pool<swa_index>().core().table().v2p();
        const PageTable& full = pool<down_index>().core().table();
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
    const member_roles now_movable = movable();
    for (std::size_t kind = 0; kind < memo_.size(); ++kind) {
        for (std::size_t shape = 0; shape <= component_count; ++shape) {
            const memo_entry& entry = memo_[kind][shape];
            if (entry.epoch != e) continue;
            const relief_plan credit = static_cast<memo_kind>(kind) == memo_kind::available
                                           ? relief_plan{}
                                           : schedulable_credit(shape, now_movable);
            if (entry.credit != credit) continue;
            if (const std::int64_t fresh = largest_fit(shape, credit); fresh != entry.value) {
                out.push_back(detail::concat("memo: cached capacity ", entry.value, " for shape ", shape, " kind ", kind,
                                             " but a fresh computation gives ", fresh, " (a change did not bump the epoch)"));
            }
        }
    }
}

}  // namespace unikv
