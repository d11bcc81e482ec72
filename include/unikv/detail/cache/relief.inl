#pragma once
// Definitions of `CacheCore` (cache.hpp): the one relief path.

#include <unikv/detail/budget/capacity.hpp>
#include <unikv/detail/transfer/with_relief.hpp>

namespace unikv::detail::cache {

// ---- relief ----------------------------------------------------------------------------------------------

template <class P>
bool CacheCore<P>::relieve(const AllocResult& short_of, ComponentMask pools) {
    const ArenaSpec& spec = alloc_.spec();
    const Pages missing = short_of.missing;
    const auto missing_bytes = static_cast<std::int64_t>(spec[missing.component].page_bytes) * missing.count;
    const auto evicted = [&](Component c) {
        if (!spec[c].present || tree_.evictable_size(c) == 0) return false;
        const auto page_bytes = static_cast<std::int64_t>(spec[c].page_bytes);
        const Pages pages{c, (missing_bytes + page_bytes - 1) / page_bytes};
        make_backup_room(pages);
        const Eviction ev = evict(pages);
        return ev.pages_freed[Component::full] + ev.pages_freed[Component::swa] + ev.pages_freed[Component::mamba] > 0;
    };
    if (evicted(missing.component)) return true;
    if (short_of.shortfall != Shortfall::room) return false;
    for (const Component c : all_components) {
        if (c != missing.component && pools.has(c) && evicted(c)) return true;
    }
    return false;
}

template <class P>
BudgetCheck CacheCore<P>::reclaim(const CapacityDemand& d, ComponentMask pools) {
    const AllocResult r = detail::with_relief([&] { return alloc_.ensure_capacity(d); },
                                              [&](const AllocResult& short_of) { return relieve(short_of, pools); });
    if (r) return {};
    return BudgetCheck::refused(detail::refusal_of(capacity(), RefusalCause::no_room, r.missing));
}

template <class P>
bool CacheCore<P>::relieve_host(const HostAllocResult& short_of) {
    if (short_of.shortfall != HostShortfall::capacity) return false;
    return evict_host(short_of.missing).count > 0;
}

// A FULL eviction backs up FULL pages and the SWA windows under them (at most as many pages), an SWA eviction
// SWA windows; a Mamba eviction's states are backed up when there is room. Locked host copies (a pinned host
// match among them) stay.
template <class P>
void CacheCore<P>::make_backup_room(Pages pages) {
    if (!backs_up_on_evict(host_writes_) || pages.component == Component::mamba) return;
    for (const Component k : {Component::full, Component::swa}) {
        if (!alloc_.spec()[k].present || (k == Component::full && pages.component != k)) continue;
        if (const std::int64_t missing = pages.count - host_.available(k); missing > 0) (void)evict_host({k, missing});
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
