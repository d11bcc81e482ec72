#pragma once
// Definitions of `CacheCore` (cache.hpp): the one relief path.

#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/transfer/with_relief.hpp>

namespace unikv::detail::cache {

// ---- relief ----------------------------------------------------------------------------------------------

template <class P>
bool CacheCore<P>::relieve(const AllocResult& short_of, ComponentMask pools) {
    const ArenaSpec& spec = alloc_.spec();
    const auto missing_bytes = static_cast<std::int64_t>(spec[short_of.component].page_bytes) * short_of.pages_short;
    const auto evicted = [&](Component c) {
        if (!spec[c].present || tree_.evictable_size(c) == 0) return false;
        const auto page_bytes = static_cast<std::int64_t>(spec[c].page_bytes);
        const std::int64_t pages = (missing_bytes + page_bytes - 1) / page_bytes;
        make_backup_room(c, pages);
        const Eviction ev = evict(c, pages * page_size(c));
        return ev.freed[Component::full] + ev.freed[Component::swa] + ev.freed[Component::mamba] > 0;
    };
    if (evicted(short_of.component)) return true;
    if (short_of.shortfall != Shortfall::room) return false;
    for (const Component c : all_components) {
        if (c != short_of.component && pools.has(c) && evicted(c)) return true;
    }
    return false;
}

template <class P>
BudgetCheck CacheCore<P>::reclaim(const CapacityDemand& d, ComponentMask pools) {
    const AllocResult r = detail::with_relief([&] { return alloc_.ensure_capacity(d); },
                                              [&](const AllocResult& short_of) { return relieve(short_of, pools); });
    if (r) return {};
    return BudgetCheck::refused(detail::refusal_of(capacity(), RefusalCause::no_room, r.component, r.pages_short));
}

template <class P>
bool CacheCore<P>::relieve_host(const HostAllocResult& short_of) {
    if (short_of.shortfall != HostShortfall::capacity) return false;
    return evict_host(short_of.component, std::int64_t{short_of.pages_short} * page_size(short_of.component)) > 0;
}

// A FULL eviction backs up FULL pages and the SWA windows under them (at most as many pages), an SWA eviction
// SWA windows; a Mamba eviction's states are backed up when there is room. Locked host copies (a pinned host
// match among them) stay.
template <class P>
void CacheCore<P>::make_backup_room(Component c, std::int64_t pages) {
    if (!backs_up_on_evict(host_writes_)) return;
    for (const Component k : {Component::full, Component::swa}) {
        if (!alloc_.spec()[k].present || c == Component::mamba || (k == Component::full && c != k)) continue;
        const std::int64_t missing = pages - host_.available(k);
        if (missing > 0) (void)evict_host(k, missing * page_size(k));
    }
}

template <class P>
bool CacheCore<P>::host_room(Component component, std::span<HostPage> out) {
    const HostRequest request{.component = component, .out = out};
    return static_cast<bool>(detail::with_relief([&] { return host_.alloc(std::span(&request, 1)); },
                                                 [&](const HostAllocResult& r) { return relieve_host(r); }));
}

template <class P>
template <class Alloc>
AllocResult CacheCore<P>::relieved(Alloc&& alloc) {
    return detail::with_relief(alloc, [this](const AllocResult& r) { return relieve(r); });
}

}  // namespace unikv::detail::cache
