#pragma once
/// \file
/// `pool_core::verify`: the shared invariants of one sub-pool. Included at the bottom of
/// `detail/pools/pool_core.hpp`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace unikv::detail {

inline void pool_core::verify(std::int32_t lo, std::int32_t hi, std::vector<std::string>& out) const {
    const std::string name(to_string(spec_.component));
    const auto fail = [&out, &name](auto&&... parts) { out.push_back(concat(name, " pool: ", parts...)); };
    std::int32_t counts[8] = {};
    for (std::int32_t p = 0; p < spec_.num_pages; ++p) {
        const page_state s = state_[static_cast<std::size_t>(p)];
        ++counts[static_cast<int>(s)];
        const bool inside = p >= lo && p < hi;
        if (p < spec_.min_page) {
            if (s != page_state::sink) fail("page ", p, " below min_page is not the sink");
            continue;
        }
        if (!inside && s != page_state::unowned) fail("page ", p, " outside the span [", lo, ", ", hi, ") is owned");
        if (inside && (s == page_state::unowned || s == page_state::sink)) {
            fail("page ", p, " inside the span [", lo, ", ", hi, ") is neither live, reserved, a hole nor pending reuse");
        }
        const std::int32_t v = table_.virtual_of(p);
        const bool bound = s == page_state::live || s == page_state::live_reserved;
        if (bound) {
            if (v <= 0 || table_.physical_of(v) != p) fail("live page ", p, " has p2v ", v, " whose v2p is ", table_.physical_of(v));
        } else if (v != -1) {
            fail("page ", p, " in state ", static_cast<int>(s), " has p2v ", v, " instead of -1");
        }
    }
    const auto count = [&counts](page_state s) { return counts[static_cast<int>(s)]; };
    if (count(page_state::live) + count(page_state::live_reserved) != live_)
        fail("live count ", live_, " but ", count(page_state::live) + count(page_state::live_reserved), " bound pages");
    if (count(page_state::reserved) + count(page_state::held) != reserved_)
        fail("reserved count ", reserved_, " but ", count(page_state::reserved) + count(page_state::held), " unbound reservation pages");
    if (count(page_state::pending_reuse) != pending_reuse_)
        fail("pending-reuse count ", pending_reuse_, " but ", count(page_state::pending_reuse), " pages");
    if (count(page_state::hole) != hole_pages()) fail("hole list of ", hole_pages(), " but ", count(page_state::hole), " hole pages");
    for (std::int32_t p : holes_) {
        if (state(p) != page_state::hole) fail("hole list entry ", p, " is not a hole (double free?)");
    }
    if (pending_load_ != count(page_state::reserved) + count(page_state::live_reserved))
        fail("pending-load count ", pending_load_, " but ", count(page_state::reserved) + count(page_state::live_reserved),
             " pages of pending reservations");
    const std::int32_t span = hi - lo;
    if (span != occupied_pages())
        fail("span of ", span, " pages != live ", live_, " + reserved ", reserved_, " + holes ", hole_pages(), " + pending reuse ", pending_reuse_);

    const auto v2p = table_.v2p();
    const auto p2v = table_.p2v();
    if (v2p.back() != -1) fail("v2p sentinel is ", v2p.back(), " instead of -1");
    if (p2v.back() != -1) fail("p2v sentinel is ", p2v.back(), " instead of -1");
    if (v2p[0] != 0 || p2v[0] != 0) fail("the sink entries are not 0");
    std::int32_t bound_ids = 0;
    for (std::size_t v = 1; v + 1 < v2p.size(); ++v) {
        const std::int32_t p = v2p[v];
        if (p == -1) continue;
        ++bound_ids;
        if (p <= 0 || p >= spec_.num_pages || p2v[static_cast<std::size_t>(p)] != static_cast<std::int32_t>(v))
            fail("v2p[", static_cast<std::int64_t>(v), "] = ", p, " is not mirrored by p2v");
    }
    if (bound_ids != live_) fail(bound_ids, " bound virtual ids but ", live_, " live pages");
    if (owns_ids_) {
        std::vector<char> seen(v2p.size(), 0);
        for (std::int32_t v : free_ids_) {
            if (v < spec_.min_page || v + 1 >= static_cast<std::int32_t>(v2p.size()) || seen[static_cast<std::size_t>(v)]) {
                fail("free id ", v, " is out of range or listed twice");
                continue;
            }
            seen[static_cast<std::size_t>(v)] = 1;
            if (v2p[static_cast<std::size_t>(v)] != -1) fail("free id ", v, " is bound");
        }
        const std::int32_t ids = static_cast<std::int32_t>(v2p.size()) - 1 - spec_.min_page;
        if (free_ids() + live_ != ids) fail("free ids ", free_ids(), " + live ", live_, " != id range ", ids);
    }
}

}  // namespace unikv::detail
