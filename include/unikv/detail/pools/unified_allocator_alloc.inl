#pragma once
/// \file
/// `UnifiedAllocator` definitions: construction, pool access, allocation, frees and translation.
/// Included at the bottom of `pools/unified_allocator.hpp`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

namespace unikv {

template <class L, class B>
UnifiedAllocator<L, B>::UnifiedAllocator(B& backend, const ArenaConfig& config, stream_ref stream,
                                         AllocatorOptions options)
    : backend_(backend),
      spec_(make_arena_spec(config, layout_components_v<L>)),
      options_(options),
      stream_(stream),
      pools_([this]<std::size_t... I>(std::index_sequence<I...>) {
          const std::int32_t full_ids = spec_[Component::full].num_pages;
          const auto make = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
              constexpr Component c = layout_member_t<L, J>::component;
              const SubPoolSpec& s = spec_[c];
              return impl_t<J>(s, c == Component::swa ? full_ids : s.num_pages,
                               c == Component::swa ? detail::id_source::borrowed : detail::id_source::owner);
          };
          return std::make_unique<pools_t>(make(std::integral_constant<std::size_t, I>{})...);
      }(std::make_index_sequence<size_>{})),
      mirrors_([&]<std::size_t... I>(std::index_sequence<I...>) {
          return std::array<PageTableMirror<B>, size_>{PageTableMirror<B>(backend, pool<I>().core().table(), stream)...};
      }(std::make_index_sequence<size_>{})),
      arena_(backend.allocate_device(config.arena_bytes), stream),
      forward_(spec_[Component::full].num_pages, has_mamba ? spec_[Component::mamba].num_pages : 0) {
    registry_->set_owner(pools_.get(), &drop_reservation);
    const std::int32_t ids = std::max(spec_[Component::full].num_pages, has_mamba ? spec_[Component::mamba].num_pages : 0);
    marks_.assign(static_cast<std::size_t>(ids) + 1, 0);
    held_.assign(static_cast<std::size_t>(ids) + 1, 0);
    constexpr std::size_t warm = 256;  // scratch capacity reserved up front; grows once past it
    ids_.reserve(warm);
    handed_.reserve(warm);
    move_src_.reserve(warm);
    move_dst_.reserve(warm);
}

template <class L, class B>
const detail::pool_core& UnifiedAllocator<L, B>::core_of(Component c, const char* call) const {
    switch (c) {
        case Component::full: return pool<full_index>().core();
        case Component::swa:
            if constexpr (has_swa) return pool<swa_index>().core();
            break;
        case Component::mamba:
            if constexpr (has_mamba) return pool<mamba_index>().core();
            break;
    }
    detail::misuse(call, "the layout has no ", to_string(c), " pool (component ", static_cast<int>(c), ")");
}

template <class L, class B>
template <class F>
void UnifiedAllocator<L, B>::for_each_pool(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (f(pool<I>(), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<size_>{});
}

template <class L, class B>
template <class F>
void UnifiedAllocator<L, B>::for_each_pool(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (f(pool<I>(), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<size_>{});
}

template <class L, class B>
template <std::size_t I>
ByteBand UnifiedAllocator<L, B>::band_of() const noexcept {
    ByteBand band{spec_.sink_floor_bytes, spec_.arena_bytes};
    // The members below I in chain order, then those above it from the far end inward, so the nearest
    // opaque neighbour on each side is written last. The index tests fold at compile time.
    [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((J < I && !pool<J>().transparent() ? void(band.low = pool<J>().high_bytes()) : void()), ...);
        ((size_ - 1 - J > I && !pool<size_ - 1 - J>().transparent() ? void(band.high = pool<size_ - 1 - J>().low_bytes())
                                                                     : void()),
         ...);
    }(std::make_index_sequence<size_>{});
    return band;
}

template <class L, class B>
template <std::size_t I, class Id>
void UnifiedAllocator<L, B>::take_bound(std::span<const Id> ids) {
    detail::pool_core& core = pool<I>().core();
    if (ids.size() <= static_cast<std::size_t>(core.hole_pages()) && options_.handout_fill != HandoutFill::zero) {
        // Every policy binds holes first, and holes that cover the batch need no limits (the fast path).
        (void)core.bind_from_holes(ids, nullptr);
        return;
    }
    take_bound_slow<I>(ids);
}

template <class L, class B>
template <std::size_t I, class Id>
void UnifiedAllocator<L, B>::take_bound_slow(std::span<const Id> ids) {
    handed_.clear();
    std::vector<std::int32_t>* handed = options_.handout_fill == HandoutFill::zero ? &handed_ : nullptr;
    pool<I>().take_bound(ids, band_of<I>(), handed);
    fill_handed<I>();
}

template <class L, class B>
template <std::size_t I>
void UnifiedAllocator<L, B>::fill_handed() {
    if (options_.handout_fill != HandoutFill::zero || handed_.empty()) return;
    backend_.fill_pages_async(region(), handed_, pool<I>().core().spec().page_bytes, std::byte{0}, stream_);
}

// ---- allocation -------------------------------------------------------------------------------------------

template <class L, class B>
template <typename UnifiedAllocator<L, B>::swa_bind S, class Id>
AllocResult UnifiedAllocator<L, B>::bind_new_pages(std::span<Id> out) {
    constexpr bool bind_swa = has_swa && S == swa_bind::with_swa;
    const auto n = static_cast<std::int32_t>(out.size());
    const CapacityDemand demand{.full = n, .swa = bind_swa ? n : 0};
    if (!covered_by_holes(demand)) {
        if (AllocResult r = relieve(demand); !r) return r;
    }
    auto& full = pool<full_index>().core();
    for (Id& id : out) id = Id{full.pop_id()};
    const std::span<const Id> ids(out.data(), out.size());
    take_bound<full_index>(ids);
    if constexpr (bind_swa) take_bound<swa_index>(ids);
    return {};
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc_pages(std::int32_t n) {
    ids_.resize(static_cast<std::size_t>(n));
    return bind_new_pages<swa_bind::with_swa>(std::span<std::int32_t>(ids_));
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc(std::span<VirtualPage> out) {
    if (out.empty()) return {};
    UNIKV_EXPECTS(out.size() <= static_cast<std::size_t>(spec_[Component::full].num_pages), "cannot allocate ",
                  out.size(), " pages: the FULL pool has ", spec_[Component::full].num_pages);
    return bind_new_pages<swa_bind::with_swa>(out);
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc_full(std::span<VirtualPage> out) {
    if (out.empty()) return {};
    UNIKV_EXPECTS(out.size() <= static_cast<std::size_t>(spec_[Component::full].num_pages), "alloc_full: cannot allocate ",
                  out.size(), " pages: the FULL pool has ", spec_[Component::full].num_pages);
    return bind_new_pages<swa_bind::tombstone>(out);
}

template <class L, class B>
void UnifiedAllocator<L, B>::check_last_loc(VirtualToken last, std::int32_t expected_offset, std::size_t request,
                                            const char* call) const {
    const std::int32_t ps = spec_[Component::full].page_size;
    const std::int32_t t = last.value();
    const std::int32_t v = t < 0 ? -1 : t / ps;
    if (t < 0 || pool<full_index>().core().table().physical_of(v) <= 0) {
        detail::misuse(call, "request ", request, ": last_loc ", t, " is not a token of an allocated page");
    }
    if (t % ps != expected_offset) {
        detail::misuse(call, "request ", request, ": last_loc ", t, " sits at page offset ", t % ps,
                       " but the prefix ends at offset ", expected_offset);
    }
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out) {
    const std::size_t n = batch.seq_lens.size();
    UNIKV_EXPECTS(batch.prefix_lens.size() == n && batch.last_locs.size() == n, "the batch has ", n,
                  " seq_lens, ", batch.prefix_lens.size(), " prefix_lens and ", batch.last_locs.size(), " last_locs");
    const std::int32_t ps = spec_[Component::full].page_size;
    std::int64_t tokens = 0;
    std::int64_t pages = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t p = batch.prefix_lens[i];
        const std::int32_t s = batch.seq_lens[i];
        UNIKV_EXPECTS(p >= 0 && s >= p, "request ", i, " has prefix_len ", p, " and seq_len ", s);
        tokens += s - p;
        pages += (static_cast<std::int64_t>(s) + ps - 1) / ps - (static_cast<std::int64_t>(p) + ps - 1) / ps;
        if (p % ps != 0 && s > p) check_last_loc(batch.last_locs[i], (p - 1) % ps, i, "alloc_extend");
    }
    UNIKV_EXPECTS(static_cast<std::int64_t>(out.size()) == tokens, "out holds ", out.size(), " tokens but the batch extends by ",
                  tokens);
    UNIKV_EXPECTS(pages <= spec_[Component::full].num_pages, "the batch needs ", pages, " pages, more than the FULL pool has");
    if (pages > 0) {
        if (AllocResult r = alloc_pages(static_cast<std::int32_t>(pages)); !r) return r;
    }
    std::size_t k = 0;
    std::size_t next = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::int32_t pos = batch.prefix_lens[i];
        const std::int32_t s = batch.seq_lens[i];
        std::int32_t t = batch.last_locs[i].value() + 1;
        for (; pos < s && pos % ps != 0; ++pos) out[k++] = VirtualToken{t++};
        while (pos < s) {
            const std::int32_t base = ids_[next++] * ps;
            for (std::int32_t off = 0; off < ps && pos < s; ++off, ++pos) out[k++] = VirtualToken{base + off};
        }
    }
    return {};
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
    const std::size_t n = batch.seq_lens.size();
    UNIKV_EXPECTS(batch.last_locs.size() == n && out.size() == n, "the batch has ", n, " seq_lens, ",
                  batch.last_locs.size(), " last_locs and out holds ", out.size());
    const std::int32_t ps = spec_[Component::full].page_size;
    std::int32_t pages = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t s = batch.seq_lens[i];
        UNIKV_EXPECTS(s >= 1, "request ", i, " has seq_len ", s);
        if ((s - 1) % ps == 0) ++pages;
        else check_last_loc(batch.last_locs[i], (s - 2) % ps, i, "alloc_decode");
    }
    if (pages > 0) {
        if (AllocResult r = alloc_pages(pages); !r) return r;
    }
    std::size_t next = 0;
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = (batch.seq_lens[i] - 1) % ps == 0 ? VirtualToken{ids_[next++] * ps}
                                                   : VirtualToken{batch.last_locs[i].value() + 1};
    }
    return {};
}

// ---- frees ------------------------------------------------------------------------------------------------

template <class L, class B>
template <typename UnifiedAllocator<L, B>::swa_entry E, typename UnifiedAllocator<L, B>::repeat_marks M>
void UnifiedAllocator<L, B>::check_virtual_pages(std::span<const VirtualPage> pages, Holder by, const char* call) {
    const PageTable& full = pool<full_index>().core().table();
    const bool track_repeats = pages.size() > 1;  // a single page cannot repeat: skip the marks (fast path)
    std::size_t marked = 0;
    const auto fail = [&](auto&&... parts) {
        for (std::size_t j = 0; j < marked; ++j) marks_[static_cast<std::size_t>(pages[j].value())] = 0;
        detail::misuse(call, parts...);
    };
    for (const VirtualPage page : pages) {
        const std::int32_t v = page.value();
        if (v <= 0 || v >= full.num_virtual() || full.physical_of(v) <= 0) fail("virtual page ", v, " is not allocated");
        if (track_repeats && marks_[static_cast<std::size_t>(v)] != 0) fail("virtual page ", v, " is listed twice");
        if (by == Holder::request && (held_[static_cast<std::size_t>(v)] & held_page) != 0) {
            fail("virtual page ", v, " is held by the tree (a cached prefix): free only a request's own pages, and "
                 "tombstone only their SWA rows");
        }
        if constexpr (has_swa) {
            const detail::pool_core& swa = pool<swa_index>().core();
            const std::int32_t sp = swa.table().physical_of(v);
            if constexpr (E == swa_entry::bound) {
                if (sp <= 0) fail("the SWA entry of virtual page ", v, " is already a tombstone");
            }
            if constexpr (E == swa_entry::tombstone) {
                if (sp > 0) fail("virtual page ", v, " still has SWA page ", sp, "; tombstone it with free_swa first");
            }
            if (sp > 0 && swa.state(sp) == detail::page_state::live_reserved) {
                fail("virtual page ", v, " is bound to SWA page ", sp,
                     " of a reservation whose load is not submitted; cancel the reservation first");
            }
        }
        if (track_repeats) {
            marks_[static_cast<std::size_t>(v)] = 1;
            ++marked;
        }
    }
    if constexpr (M == repeat_marks::clear) {
        if (track_repeats) {
            for (const VirtualPage page : pages) marks_[static_cast<std::size_t>(page.value())] = 0;
        }
    }
}

template <class L, class B>
template <typename UnifiedAllocator<L, B>::free_part P>
void UnifiedAllocator<L, B>::free_virtual(std::span<const VirtualPage> pages, Holder by, const char* call) {
    static_assert(P != free_part::swa || has_swa, "unikv: free_swa needs a layout with a Swa pool");
    constexpr swa_entry need = P == free_part::swa ? swa_entry::bound : P == free_part::full ? swa_entry::tombstone : swa_entry::any;
    check_virtual_pages<need, repeat_marks::keep>(pages, by, call);
    auto& full = pool<full_index>();
    // Last to first: ids and holes are stacks, so the next allocation takes a freed row back in its order (a
    // request's rows stay ascending runs, which translation copies in bulk).
    for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
        const std::int32_t v = it->value();
        marks_[static_cast<std::size_t>(v)] = 0;
        if constexpr (has_swa && P != free_part::full) {
            auto& swa = pool<swa_index>();
            if (P == free_part::swa || swa.core().table().physical_of(v) > 0) swa.release_page(swa.core().release_bound(v));
        }
        if constexpr (P != free_part::swa) {
            if (by == Holder::tree) {  // a request's free met no held page (checked above)
                std::uint8_t& held = held_[static_cast<std::size_t>(v)];
                held_pages_ -= held & held_page;
                held = static_cast<std::uint8_t>(held & ~held_page);
            }
            full.release_page(full.core().release_bound(v));
            full.core().push_id(v);
        }
    }
    if constexpr (has_eager_) {
        if (!pages.empty()) {
            with_moves([&](auto& ctx) {
                for_each_pool([&](auto& p, auto i) {
                    constexpr Component c = layout_member_t<L, decltype(i)::value>::component;
                    if constexpr (c == Component::full ? P != free_part::swa : c == Component::swa && P != free_part::full) {
                        p.after_release(ctx);
                    }
                });
            });
        }
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::transfer_swa(std::span<const VirtualPage> kept, std::span<const VirtualPage> incoming) {
    static_assert(has_swa, "unikv: transfer_swa needs a layout with a Swa pool");
    if constexpr (has_swa) {  // without SWA the assert above is the one error
        UNIKV_EXPECTS(kept.size() == incoming.size(), "transfer_swa: ", kept.size(), " kept pages but ",
                      incoming.size(), " incoming pages");
        // A kept page has an SWA tombstone and an incoming one an SWA page, so no id can be in both lists.
        check_virtual_pages<swa_entry::tombstone, repeat_marks::clear>(kept, Holder::tree, "transfer_swa (kept)");
        check_virtual_pages<swa_entry::bound, repeat_marks::clear>(incoming, Holder::tree, "transfer_swa (incoming)");
        detail::pool_core& swa = pool<swa_index>().core();
        for (std::size_t i = 0; i < kept.size(); ++i)
            swa.occupy_bound(swa.release_bound(incoming[i].value()), kept[i].value());
    }
}

template <class L, class B>
AllocResult UnifiedAllocator<L, B>::alloc_state(std::span<StateId> out) {
    static_assert(has_mamba, "unikv: alloc_state needs a layout with a Mamba pool");
    if (out.empty()) return {};
    auto& mamba = pool<mamba_index>();
    UNIKV_EXPECTS(out.size() <= static_cast<std::size_t>(mamba.core().spec().num_pages), "cannot allocate ", out.size(),
                  " state slots");
    const auto n = static_cast<std::int32_t>(out.size());
    if (AllocResult r = relieve(CapacityDemand{.mamba = n}); !r) return r;
    for (StateId& id : out) id = StateId{mamba.core().pop_id()};
    take_bound<mamba_index>(std::span<const StateId>(out.data(), out.size()));
    return {};
}

template <class L, class B>
void UnifiedAllocator<L, B>::expect_allocated(std::span<const VirtualPage> pages, const char* call) const {
    const PageTable& full = pool<full_index>().core().table();
    for (const VirtualPage page : pages) {
        const std::int32_t v = page.value();
        if (v <= 0 || v >= full.num_virtual() || full.physical_of(v) <= 0) {
            detail::misuse(call, "virtual page ", v, " is not allocated");
        }
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::expect_allocated(std::span<const StateId> states, const char* call) const {
    static_assert(has_mamba, "unikv: expect_allocated of states needs a layout with a Mamba pool");
    const PageTable& table = pool<mamba_index>().core().table();
    for (const StateId id : states) {
        const std::int32_t v = id.value();
        if (v <= 0 || v >= table.num_virtual() || table.physical_of(v) <= 0) {
            detail::misuse(call, "state slot ", v, " is not allocated");
        }
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::hold(std::span<const VirtualPage> pages) noexcept {
    for (const VirtualPage page : pages) {
        std::uint8_t& held = held_[static_cast<std::size_t>(page.value())];
        held_pages_ += (held & held_page) == 0 ? 1 : 0;
        held |= held_page;
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::hold(std::span<const StateId> states) noexcept {
    static_assert(has_mamba, "unikv: hold of states needs a layout with a Mamba pool");
    for (const StateId id : states) held_[static_cast<std::size_t>(id.value())] |= held_state;
}

template <class L, class B>
auto UnifiedAllocator<L, B>::status(VirtualPage page) const noexcept -> PageStatus {
    const std::int32_t v = page.value();
    const PageTable& full = pool<full_index>().core().table();
    if (v <= 0 || v >= full.num_virtual()) return {};
    PageStatus out{.allocated = full.physical_of(v) > 0, .held = (held_[static_cast<std::size_t>(v)] & held_page) != 0};
    if constexpr (has_swa) out.swa_bound = pool<swa_index>().core().table().physical_of(v) > 0;
    return out;
}

template <class L, class B>
auto UnifiedAllocator<L, B>::status(StateId s) const noexcept -> PageStatus {
    if constexpr (!has_mamba) {
        return {};
    } else {
        const std::int32_t v = s.value();
        const PageTable& table = pool<mamba_index>().core().table();
        if (v <= 0 || v >= table.num_virtual()) return {};
        return {.allocated = table.physical_of(v) > 0, .held = (held_[static_cast<std::size_t>(v)] & held_state) != 0};
    }
}

template <class L, class B>
void UnifiedAllocator<L, B>::free_state(std::span<const StateId> states, Holder by) {
    static_assert(has_mamba, "unikv: free_state needs a layout with a Mamba pool");
    auto& mamba = pool<mamba_index>();
    const PageTable& table = mamba.core().table();
    std::size_t marked = 0;
    for (const StateId id : states) {
        const std::int32_t v = id.value();
        const char* problem = v <= 0 || v >= table.num_virtual() || table.physical_of(v) <= 0 ? "is not allocated"
                              : marks_[static_cast<std::size_t>(v)] != 0                      ? "is listed twice"
                              : by == Holder::request && (held_[static_cast<std::size_t>(v)] & held_state) != 0
                                  ? "is held by the tree (a cached prefix): free only a request's own state"
                                  : nullptr;
        if (problem != nullptr) {
            for (std::size_t j = 0; j < marked; ++j) marks_[static_cast<std::size_t>(states[j].value())] = 0;
            detail::misuse("free_state", "state slot ", v, " ", problem);
        }
        marks_[static_cast<std::size_t>(v)] = 1;
        ++marked;
    }
    for (auto it = states.rbegin(); it != states.rend(); ++it) {  // last to first, as in `free`
        marks_[static_cast<std::size_t>(it->value())] = 0;
        if (by == Holder::tree) held_[static_cast<std::size_t>(it->value())] &= static_cast<std::uint8_t>(~held_state);
        mamba.release_page(mamba.core().release_bound(it->value()));
        mamba.core().push_id(it->value());
    }
    if constexpr (has_eager_) {
        if (!states.empty()) with_moves([&](auto& ctx) { mamba.after_release(ctx); });
    }
}

// ---- translation ------------------------------------------------------------------------------------------

template <class L, class B>
void UnifiedAllocator<L, B>::translate_full(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const {
    UNIKV_EXPECTS(out.size() >= in.size(), "out holds ", out.size(), " ids for ", in.size(), " inputs");
    pool<full_index>().core().table().translate(in, out);
}

template <class L, class B>
void UnifiedAllocator<L, B>::translate_full(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const {
    UNIKV_EXPECTS(out.size() >= in.size(), "out holds ", out.size(), " ids for ", in.size(), " inputs");
    pool<full_index>().core().table().translate(in, out);
}

template <class L, class B>
void UnifiedAllocator<L, B>::translate_swa(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const {
    static_assert(has_swa, "unikv: translate_swa needs a layout with a Swa pool");
    UNIKV_EXPECTS(out.size() >= in.size(), "out holds ", out.size(), " ids for ", in.size(), " inputs");
    pool<swa_index>().core().table().translate(in, out);
}

template <class L, class B>
void UnifiedAllocator<L, B>::translate_swa(std::span<const VirtualPage> in, std::span<PhysicalPage> out) const {
    static_assert(has_swa, "unikv: translate_swa needs a layout with a Swa pool");
    UNIKV_EXPECTS(out.size() >= in.size(), "out holds ", out.size(), " ids for ", in.size(), " inputs");
    pool<swa_index>().core().table().translate(in, out);
}

template <class L, class B>
void UnifiedAllocator<L, B>::copy_state(StateId from, StateId to) {
    static_assert(has_mamba, "unikv: copy_state needs a layout with a Mamba pool");
    const StateId both[] = {from, to};
    expect_allocated(both, "copy_state");
    UNIKV_EXPECTS(from != to, "copy_state: state slot ", from.value(), " copied onto itself");
    PhysicalPage slots[2];
    translate_state(both, slots);
    const std::int32_t src[] = {slots[0].value()};
    const std::int32_t dst[] = {slots[1].value()};
    backend_.copy_pages_async(region(), src, region(), dst, pool<mamba_index>().core().spec().page_bytes, stream_);
}

template <class L, class B>
void UnifiedAllocator<L, B>::translate_state(std::span<const StateId> in, std::span<PhysicalPage> out) const {
    static_assert(has_mamba, "unikv: translate_state needs a layout with a Mamba pool");
    UNIKV_EXPECTS(out.size() >= in.size(), "out holds ", out.size(), " ids for ", in.size(), " inputs");
    translate_pages(pool<mamba_index>().core().table().translation(), in, out);
}

// ---- device page tables -----------------------------------------------------------------------------------

template <class L, class B>
void UnifiedAllocator<L, B>::publish_tables() {
    for_each_pool([&](auto& p, auto i) { (void)p.core().publish_table(mirrors_[decltype(i)::value], stream_); });
}

template <class L, class B>
DeviceTables UnifiedAllocator<L, B>::device_tables() {
    publish_tables();
    DeviceTables out;
    out.full = mirrors_[full_index].device_table();
    if constexpr (has_swa) out.swa = mirrors_[swa_index].device_table();
    if constexpr (has_mamba) out.mamba = mirrors_[mamba_index].device_table();
    return out;
}

}  // namespace unikv
