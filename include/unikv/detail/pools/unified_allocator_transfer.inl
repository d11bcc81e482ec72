#pragma once
/// \file
/// `UnifiedAllocator` definitions: physical reservations, transfer events, move gates, flushes and the
/// float's moves. Included at the bottom of `pools/unified_allocator.hpp`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

namespace unikv {

template <class L, class B>
template <class F>
decltype(auto) UnifiedAllocator<L, B>::with_moves(F&& f) {
    detail::move_context<B> ctx(backend_, region(), stream_, events_, forward_, move_src_, move_dst_);
    // The moves are done when `f` returns (pages released, copies queued), so publishing must not throw
    // past them: a failed publish (no pinned memory for a staging slab) leaves the chunks dirty, and
    // `device_tables()` publishes them again and reports the error to the caller that needs the tables.
    const auto publish_moves = [&]() noexcept {
        if (ctx.pages_moved == 0) return;
        bytes_moved_ += ctx.bytes_moved;
        try {
            publish_tables();
        } catch (...) {
        }
    };
    if constexpr (std::is_void_v<std::invoke_result_t<F&, detail::move_context<B>&>>) {
        f(ctx);
        publish_moves();
    } else {
        auto result = f(ctx);
        publish_moves();
        return result;
    }
}

template <class L, class B>
bool UnifiedAllocator<L, B>::moves_blocked() const {
    if (!gates_.open()) return true;
    bool pending = false;
    for_each_pool([&](const auto& p, auto) { pending = pending || p.core().pending_load_pages() > 0; });
    return pending;
}

template <class L, class B>
bool UnifiedAllocator<L, B>::moves_blocked(Component c) const {
    const detail::pool_core& core = core_of(c, "moves_blocked");
    return core.pending_load_pages() > 0 || !gates_.open();
}

// ---- reservations -----------------------------------------------------------------------------------------

template <class L, class B>
ReserveResult UnifiedAllocator<L, B>::alloc_physical(Component c, std::int32_t pages) {
    if constexpr (!has_reservations) {
        detail::misuse("alloc_physical", "no pool of this layout takes reservations (asked for ", to_string(c), ")");
    } else {
        if (c != Component::swa) {
            detail::misuse("alloc_physical", "the ", to_string(c), " pool takes no reservations; only swa does");
        }
        auto& swa = pool<swa_index>();
        UNIKV_EXPECTS(pages >= 1 && pages <= swa.core().spec().num_pages, "cannot reserve ", pages, " pages");
        if (AllocResult r = relieve(CapacityDemand{.swa = pages}); !r) return {Reservation{}, r.shortfall, r.missing};
        const std::uint32_t slot = registry_->open(Component::swa);
        std::vector<PhysicalPage>& out = registry_->slot(slot).pages;
        handed_.clear();
        std::vector<std::int32_t>* handed = options_.handout_fill == HandoutFill::zero ? &handed_ : nullptr;
        swa.take_reserved(pages, band_of<swa_index>(), out, handed);
        fill_handed<swa_index>();
        return {detail::reservation_access::make(registry_.get(), slot), Shortfall::none};
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::bind_swa(std::span<const VirtualPage> full_pages, const Reservation& reservation,
                                      std::size_t first) {
    static_assert(has_reservations, "unikv: bind_swa needs a Swa pool with PhysicalReservations");
    using access = detail::reservation_access;
    UNIKV_EXPECTS(!reservation.empty() && access::registry(reservation) == registry_.get() && access::current(reservation),
                  "the reservation is empty or belongs to another allocator");
    const auto reserved = reservation.pages();
    UNIKV_EXPECTS(first <= reserved.size() && full_pages.size() <= reserved.size() - first, "binding ", full_pages.size(),
                  " pages from index ", first, " of a reservation of ", reserved.size());
    auto& swa = pool<swa_index>().core();
    check_virtual_pages<swa_entry::tombstone, repeat_marks::clear>(full_pages, Holder::tree, "bind_swa");
    for (std::size_t i = 0; i < full_pages.size(); ++i) {
        const std::int32_t p = reserved[first + i].value();
        const detail::page_state s = swa.state(p);
        if (s != detail::page_state::reserved && s != detail::page_state::held) {
            detail::misuse("bind_swa", "reserved page ", p, " (index ", first + i, ") is already bound");
        }
    }
    for (std::size_t i = 0; i < full_pages.size(); ++i) swa.bind_reserved(reserved[first + i].value(), full_pages[i].value());
}

template <class L, class B>
void UnifiedAllocator<L, B>::release_slot_pages(pools_t& pools, detail::reservation_registry& registry,
                                                std::uint32_t slot) noexcept {
    if constexpr (has_reservations) {
        auto& swa = std::get<swa_index>(pools);
        for (const PhysicalPage page : registry.slot(slot).pages) {
            const detail::page_state s = swa.core().state(page.value());
            if (s != detail::page_state::reserved && s != detail::page_state::live_reserved) continue;
            swa.core().release_reservation_page(page.value());
            swa.release_page(page.value());
        }
    }
    registry.close(slot);
}

template <class L, class B>
void UnifiedAllocator<L, B>::drop_reservation(void* owner, detail::reservation_registry& registry,
                                              std::uint32_t slot) noexcept {
    release_slot_pages(*static_cast<pools_t*>(owner), registry, slot);
}

template <class L, class B>
void UnifiedAllocator<L, B>::cancel(Reservation&& reservation) {
    using access = detail::reservation_access;
    UNIKV_EXPECTS(!reservation.empty() && access::registry(reservation) == registry_.get() && access::current(reservation),
                  "the reservation is empty or belongs to another allocator");
    const std::uint32_t slot = access::slot(reservation);
    UNIKV_EXPECTS(registry_->slot(slot).state == detail::reservation_state::pending, "the reservation of ",
                  reservation.pages().size(), " pages starting at physical page ",
                  reservation.pages().empty() ? -1 : reservation.pages()[0].value(),
                  " was submitted with its load; free its pages with free_physical after the ack");
    release_slot_pages(*pools_, *registry_.get(), slot);
    access::forget(reservation);
}

template <class L, class B>
void UnifiedAllocator<L, B>::free_physical(Component c, std::span<const PhysicalPage> pages) {
    if constexpr (!has_reservations) {
        detail::misuse("free_physical", "no pool of this layout takes reservations (asked for ", to_string(c), ")");
    } else {
        if (c != Component::swa) detail::misuse("free_physical", "the ", to_string(c), " pool takes no reservations");
        auto& swa = pool<swa_index>();
        const auto& core = swa.core();
        for (const PhysicalPage page : pages) {
            const std::int32_t p = page.value();
            const detail::page_state s = core.state(p);
            if (s == detail::page_state::reserved || s == detail::page_state::live_reserved) {
                detail::misuse("free_physical", "swa physical page ", p,
                               " belongs to a reservation whose load is not submitted; cancel it instead");
            }
            if (s != detail::page_state::held && s != detail::page_state::live) {
                detail::misuse("free_physical", "swa physical page ", p, " is neither reserved nor bound");
            }
        }
        move_src_.clear();
        for (const PhysicalPage page : pages) move_src_.push_back(page.value());
        std::sort(move_src_.begin(), move_src_.end());
        if (const auto dup = std::adjacent_find(move_src_.begin(), move_src_.end()); dup != move_src_.end()) {
            detail::misuse("free_physical", "swa physical page ", *dup, " is listed twice");
        }
        events_.wait_all(stream_);
        for (const PhysicalPage page : pages) {
            swa.core().release_reservation_page(page.value());
            swa.release_page(page.value());
        }
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::set_transfer_done_event(TransferKey key, event_ref event) {
    events_.set(key, std::move(event));
    if (key.direction != TransferDirection::load) return;
    if constexpr (has_reservations) {
        auto& swa = pool<swa_index>().core();
        for (std::size_t i = 0; i < registry_->size(); ++i) {
            detail::reservation_slot& slot = registry_->slot(static_cast<std::uint32_t>(i));
            if (slot.state != detail::reservation_state::pending) continue;
            for (const PhysicalPage page : slot.pages) swa.submit_page(page.value());
            slot.state = detail::reservation_state::submitted;
        }
    }
}

template <class L, class B>
MoveGateHold UnifiedAllocator<L, B>::install_move_gate(MoveGateSlot slot) noexcept {
    static_assert(layout_allows_move_gates_v<L>,
                  "unikv: install_move_gate needs every pool of the layout to compact lazily or on demand; an "
                  "EagerEndPool compacts on every free, which a closed gate would have to block; use LazyEndPool for "
                  "every end of a layout that installs move gates");
    return gates_.hold(slot);
}

// ---- compaction -------------------------------------------------------------------------------------------

template <class L, class B>
FlushResult UnifiedAllocator<L, B>::flush(FlushMode mode) {
    FlushResult total;
    bool idle = true;
    for_each_pool([&](const auto& p, auto) { idle = idle && p.idle(); });
    if (idle) return total;
    const bool open = gates_.open();
    with_moves([&](auto& ctx) {
        const auto run = [&](auto& p) {
            const FlushResult r = p.flush(ctx, mode, !open || p.core().pending_load_pages() > 0,
                                          options_.max_moves_per_opportunistic_flush);
            total.blocked = total.blocked || r.blocked;
            total.stopped_by_forward = total.stopped_by_forward || r.stopped_by_forward;
        };
        // The float first: its zero-copy absorption can make the ends' moves unnecessary.
        if constexpr (has_float) run(pool<float_index>());
        run(pool<down_index>());
        if constexpr (has_up_end_) run(pool<up_index>());
        total.pages_moved = ctx.pages_moved;
        total.bytes_moved = ctx.bytes_moved;
    });
    return total;
}

template <class L, class B>
std::size_t UnifiedAllocator<L, B>::make_room(Side side, std::size_t min_bytes) {
    static_assert(has_float, "unikv: make_room needs a TriPool layout with a FloatPool in the middle");
    if constexpr (has_float) {  // without a float the assert is the one error: the body is not instantiated
        auto& fl = pool<float_index>();
        const bool blocked = !gates_.open() || fl.core().pending_load_pages() > 0;
        return with_moves([&](auto& ctx) { return fl.make_room(side, min_bytes, band_of<float_index>(), ctx, blocked); });
    } else {
        return 0;
    }
}

template <class L, class B>
std::size_t UnifiedAllocator<L, B>::compact_holes(Side retreat_side) {
    static_assert(has_float, "unikv: compact_holes needs a TriPool layout with a FloatPool in the middle");
    if constexpr (has_float) {  // as in make_room: one error without a float
        auto& fl = pool<float_index>();
        const bool blocked = !gates_.open() || fl.core().pending_load_pages() > 0;
        return with_moves([&](auto& ctx) { return fl.compact_holes(retreat_side, ctx, blocked); });
    } else {
        return 0;
    }
}

}  // namespace unikv
