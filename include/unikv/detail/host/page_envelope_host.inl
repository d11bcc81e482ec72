#pragma once
// Definitions of `page_envelope_host_impl` (declared in page_envelope_host.hpp).

#include <algorithm>

namespace unikv::detail::host {

template <class B, class L, Component... Sides>
page_envelope_host_impl<B, L, Sides...>::page_envelope_host_impl(B& backend, const ArenaSpec& device,
                                                                 const HostConfig& config, stream_ref stream)
    : stream_(stream), backend_(backend) {
    for (Component c : all_components) {
        UNIKV_EXPECTS(!components.has(c) || (device[c].present && device[c].page_bytes > 0), "the device spec has no ",
                      to_string(c), " pool but the host arena has that side; build the spec for the same layout");
    }
    arena_bytes_ = host_arena_bytes(device, components, config);
    buffer_ = backend.allocate_pinned(arena_bytes_);
    for (Component c : all_components) {
        if (!components.has(c)) continue;
        envelope_side& s = c == Component::full ? top_ : bottom_;
        s.reset(c, c == Component::full, device[c].page_bytes, arena_bytes_);
        lease_side& l = leases_.sides()[c];
        l.region = buffer_.region();
        l.page_bytes = device[c].page_bytes;
        l.to_physical.assign(static_cast<std::size_t>(s.limit), -1);
    }
}

template <class B, class L, Component... Sides>
auto page_envelope_host_impl<B, L, Sides...>::operator=(page_envelope_host_impl&& o) noexcept -> page_envelope_host_impl& {
    if (this != &o) {
        leases_.synchronize_released();
        stream_ = o.stream_;
        backend_ = o.backend_;
        arena_bytes_ = o.arena_bytes_;
        buffer_ = std::move(o.buffer_);
        bottom_ = std::move(o.bottom_);
        top_ = std::move(o.top_);
        leases_ = std::move(o.leases_);
    }
    return *this;
}

template <class B, class L, Component... Sides>
std::size_t page_envelope_host_impl<B, L, Sides...>::top_edge_bytes(std::int32_t top_mark) const noexcept {
    if (!top_.present || top_mark == top_.limit) return arena_bytes_;
    return static_cast<std::size_t>(top_mark) * top_.page_bytes;
}

template <class B, class L, Component... Sides>
std::int32_t page_envelope_host_impl<B, L, Sides...>::capacity(Component c) const noexcept {
    const envelope_side* s = side_of(c);
    if (s == nullptr) return 0;
    if (!s->top) return static_cast<std::int32_t>(top_edge_bytes(top_.present ? top_.packed_mark() : 0) / s->page_bytes);
    const std::size_t below = bottom_.present ? static_cast<std::size_t>(bottom_.used) * bottom_.page_bytes : 0;
    // Clamped: bottom pages may reach into the slack above FULL's last whole page while FULL is empty.
    return std::max(0, s->limit - static_cast<std::int32_t>(ceil_div(below, s->page_bytes)));
}

template <class B, class L, Component... Sides>
auto page_envelope_host_impl<B, L, Sides...>::fits(std::int32_t need_bottom, std::int32_t need_top,
                                                   bool packed) const noexcept -> fit {
    // Packed, the occupied ranges are the live pages alone; otherwise the holes serve first.
    const std::int32_t bottom_mark = !bottom_.present ? 0 : packed ? bottom_.packed_mark() : bottom_.mark;
    const std::int32_t top_mark = !top_.present ? 0 : packed ? top_.packed_mark() : top_.mark;
    const std::int32_t grow_bottom = std::max(0, need_bottom - (packed ? 0 : bottom_.hole_count()));
    const std::int32_t grow_top = std::max(0, need_top - (packed ? 0 : top_.hole_count()));
    // FULL, the anchor every other host value hangs on, is placed first: when the sides compete for the gap,
    // the other side is the one named short.
    if (top_.present && grow_top > 0) {
        const std::size_t below = bottom_.present ? static_cast<std::size_t>(bottom_mark) * bottom_.page_bytes : 0;
        const std::int32_t room = std::max(0, top_mark - static_cast<std::int32_t>(ceil_div(below, top_.page_bytes)));
        if (grow_top > room) return {.ok = false, .missing = {top_.component, grow_top - room}};
    }
    if (bottom_.present && grow_bottom > 0) {
        const std::int32_t grown_top = top_.present ? top_mark - grow_top : 0;
        const auto room = static_cast<std::int32_t>(top_edge_bytes(grown_top) / bottom_.page_bytes) - bottom_mark;
        if (grow_bottom > room) return {.ok = false, .missing = {bottom_.component, grow_bottom - room}};
    }
    return {};
}

template <class B, class L, Component... Sides>
HostAllocResult page_envelope_host_impl<B, L, Sides...>::alloc(std::span<const HostRequest> batch) {
    per_component<std::int32_t> need{};
    for (const HostRequest& r : batch) need[r.component] += static_cast<std::int32_t>(r.out.size());
    for (Component c : all_components) {
        if (need[c] > 0 && side_of(c) == nullptr) {
            return {.missing = {c, need[c]}, .shortfall = HostShortfall::capacity};
        }
    }
    const std::int32_t need_bottom = bottom_.present ? need[bottom_.component] : 0;
    const std::int32_t need_top = top_.present ? need[top_.component] : 0;
    if (const fit now = fits(need_bottom, need_top, false); !now.ok) {
        if (const fit packed = fits(need_bottom, need_top, true); !packed.ok) {
            return {.missing = packed.missing, .shortfall = HostShortfall::capacity};
        }
        if (!compact()) {
            return {.missing = now.missing, .shortfall = HostShortfall::leased};
        }
    }
    for (const HostRequest& r : batch) {
        envelope_side& s = *side_of(r.component);
        std::vector<std::int32_t>& to_physical = leases_.sides()[r.component].to_physical;
        for (HostPage& out : r.out) {
            const std::int32_t logical = s.free_logical.back();
            s.free_logical.pop_back();
            const std::int32_t p = s.take_physical();
            s.to_logical[static_cast<std::size_t>(p)] = logical;
            to_physical[static_cast<std::size_t>(logical)] = p;
            ++s.used;
            out = HostPage{logical};
        }
    }
    return {};
}

template <class B, class L, Component... Sides>
void page_envelope_host_impl<B, L, Sides...>::free(Component c, std::span<const HostPage> pages) {
    std::vector<std::int32_t>& to_physical = leases_.sides()[c].to_physical;
    expect_allocated_once("PageEnvelopeHost::free", c, to_physical, pages);
    if (pages.empty()) return;
    envelope_side& s = *side_of(c);  // a page of `c` was allocated, so `c` is a side
    for (HostPage h : pages) {
        std::int32_t& p = to_physical[static_cast<std::size_t>(h.value())];
        s.release_physical(p);
        p = -1;
        s.free_logical.push_back(h.value());
        --s.used;
    }
}

template <class B, class L, Component... Sides>
void page_envelope_host_impl<B, L, Sides...>::pack(envelope_side& s, std::vector<std::int32_t>& src,
                                                   std::vector<std::int32_t>& dst) {
    src.clear();
    dst.clear();
    const std::int32_t target = s.packed_mark();
    // Live pages outside the packed range move into the holes inside it; there are exactly as many of each.
    const std::int32_t lo = s.top ? s.mark : target;
    const std::int32_t hi = s.top ? target : s.mark;
    for (std::int32_t p = lo; p < hi; ++p) {
        if (s.to_logical[static_cast<std::size_t>(p)] >= 0) src.push_back(p);
    }
    for (std::int32_t p : s.holes) {
        if (s.top ? p >= target : p < target) dst.push_back(p);
    }
    UNIKV_ASSERT(src.size() == dst.size());
    if (!src.empty()) backend_.copy_pages_async(buffer_.region(), src, buffer_.region(), dst, s.page_bytes, stream_);
    std::vector<std::int32_t>& to_physical = leases_.sides()[s.component].to_physical;
    for (std::size_t i = 0; i < src.size(); ++i) {
        const std::int32_t logical = s.to_logical[static_cast<std::size_t>(src[i])];
        s.to_logical[static_cast<std::size_t>(dst[i])] = logical;
        s.to_logical[static_cast<std::size_t>(src[i])] = -1;
        to_physical[static_cast<std::size_t>(logical)] = dst[i];
    }
    s.clear_holes();
    s.mark = target;
}

template <class B, class L, Component... Sides>
bool page_envelope_host_impl<B, L, Sides...>::compact() {
    if (leases_.held()) return false;
    if (bottom_.hole_count() == 0 && top_.hole_count() == 0) return true;
    leases_.order_after_released(stream_);
    std::vector<std::int32_t> src;
    std::vector<std::int32_t> dst;
    if (bottom_.present) pack(bottom_, src, dst);
    if (top_.present) pack(top_, src, dst);
    stream_.synchronize();
    return true;
}

template <class B, class L, Component... Sides>
std::vector<std::string> page_envelope_host_impl<B, L, Sides...>::verify() const {
    std::vector<std::string> out;
    for (const envelope_side* s : {&bottom_, &top_}) {
        if (s->present) s->verify(leases_.sides()[s->component].to_physical, out);
    }
    const std::size_t bottom_end = bottom_.present ? static_cast<std::size_t>(bottom_.mark) * bottom_.page_bytes : 0;
    if (bottom_end > top_edge_bytes(top_.present ? top_.mark : 0)) {
        out.push_back(concat("the bottom side ends at byte ", bottom_end, ", above the top side's start ",
                             top_edge_bytes(top_.present ? top_.mark : 0)));
    }
    if (bottom_end > arena_bytes_) out.push_back(concat("the bottom side ends past the arena"));
    return out;
}

}  // namespace unikv::detail::host
