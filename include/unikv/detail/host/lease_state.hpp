#pragma once
/// \file
/// The heap state a host pool shares with its leases: each component's logical -> physical host page table
/// (what a lease translates through), the count of leases held, and the completion events of released leases
/// that the pool has not yet seen complete. Neither the pool nor a lease contains it, so moving either keeps
/// leases working; the pool owns it until it is destroyed with leases still held (`orphaned`), and then the
/// last of those leases frees it (the `pools/move_gates.hpp` rule). Driven from the pool's thread only.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <unikv/backend/page_copy.hpp>
#include <unikv/component.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>

namespace unikv::detail::host {

/// One component's pages as a lease sees them.
struct lease_side {
    /// Logical host page -> physical page in `region`; -1 for a logical page not allocated to the component.
    /// Sized by the logical id space, so a lookup is one bounds check and one load.
    std::vector<std::int32_t> to_physical;
    /// The bytes the physical pages index: page `P` is `[P * page_bytes, (P + 1) * page_bytes)`.
    pinned_region_ref region{};
    /// 0 for a component the pool holds no pages of.
    std::size_t page_bytes = 0;
};

/// See the file comment.
template <class B>
struct lease_state {
    per_component<lease_side> sides{};
    std::uint32_t held = 0;                      // leases alive and not released; > 0 forbids every move
    std::vector<typename B::event_ref> pending;  // released leases' copy events, complete or not
    std::size_t prune_at = 16;                   // `pending` size at which completed events are dropped
    bool orphaned = false;                       // the pool is gone; the last held lease deletes the state

    /// Hands a released lease's event to the pool. Amortized O(1): completed events are queried and dropped
    /// only when the list doubled since the last time, so a steady stream of transfers allocates nothing.
    void defer(typename B::event_ref done) {
        if (pending.size() >= prune_at) {
            std::erase_if(pending, [](const typename B::event_ref& e) { return e.query(); });
            prune_at = std::max<std::size_t>(16, 2 * pending.size());
        }
        pending.push_back(std::move(done));
    }
};

/// Throws `logic_error` naming `call` unless every page of `pages` is allocated in `table` (a component's
/// `to_physical`) and none is listed twice. Leaves `table` as it found it. O(n), no allocation: listed pages
/// are marked in place (`-2 - physical`) and the marks undone before returning or throwing.
inline void expect_allocated_once(const char* call, Component c, std::vector<std::int32_t>& table,
                                  std::span<const HostPage> pages) {
    const auto valid = [&table](HostPage h) {
        return h.is_valid() && static_cast<std::size_t>(h.value()) < table.size();
    };
    std::size_t marked = 0;
    const auto unmark = [&] {
        for (std::size_t i = 0; i < marked; ++i) {
            std::int32_t& p = table[static_cast<std::size_t>(pages[i].value())];
            p = -2 - p;
        }
    };
    for (; marked < pages.size(); ++marked) {
        const HostPage h = pages[marked];
        const std::int32_t p = valid(h) ? table[static_cast<std::size_t>(h.value())] : -1;
        if (p < 0) {
            unmark();
            if (p <= -2) misuse(call, "host page ", h, " of ", to_string(c), " is listed twice");
            misuse(call, "host page ", h, " is not allocated to ", to_string(c),
                   "; free only pages that alloc handed out for that component, once");
        }
        table[static_cast<std::size_t>(h.value())] = -2 - p;
    }
    unmark();
}

}  // namespace unikv::detail::host
