#pragma once
/// \file
/// The body of `PageEnvelopeHost<Sides...>`: one pinned host arena shared by up to two sides growing from its
/// two ends (FULL from the top, the other side from byte 0), each with its device envelope as page bytes. The
/// tree holds logical host pages; physical pages are private, holes-first, then from the watermark; a batch
/// that fits only packed compacts first, unless a lease is held. Definitions in `page_envelope_host.inl`.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/backend_ref.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/host/envelope_side.hpp>
#include <unikv/host/host_capacity.hpp>
#include <unikv/host/host_lease.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layout.hpp>

namespace unikv {
template <Component... Sides>
struct PageEnvelopeHost;
}  // namespace unikv

namespace unikv::detail::host {

/// The sides of `PageEnvelopeHost<Sides...>` over `L`: the listed components, or the layout's pools when none
/// is listed. A mask, so a duplicate collapses (the rules count the list itself).
template <class L, Component... Sides>
inline constexpr ComponentMask envelope_sides_v = [] {
    if constexpr (sizeof...(Sides) == 0) {
        return layout_components_v<L>;
    } else {
        return (ComponentMask{} | ... | ComponentMask::of(Sides));
    }
}();

/// Components in `m`.
constexpr std::size_t mask_size(ComponentMask m) noexcept {
    std::size_t n = 0;
    for (Component c : all_components) n += m.has(c) ? 1 : 0;
    return n;
}

/// The first envelope rule layout `L` breaks with sides `Sides...` (see `host_layout_rule`).
template <class L, Component... Sides>
consteval host_layout_rule envelope_layout_rule() {
    constexpr std::size_t listed = sizeof...(Sides) == 0 ? L::size : sizeof...(Sides);
    if constexpr (layout_has_float_v<L>) {
        return host_layout_rule::no_float;
    } else if constexpr (listed > 2) {
        return host_layout_rule::at_most_two;
    } else if constexpr (!(true && ... && layout_has_v<L, Sides>)) {
        return host_layout_rule::sides_in_layout;
    } else if constexpr (sizeof...(Sides) != 0 && mask_size(envelope_sides_v<L, Sides...>) != sizeof...(Sides)) {
        return host_layout_rule::sides_unique;
    } else {
        return host_layout_rule::none;
    }
}

template <class B, class L, Component... Sides>
class page_envelope_host_impl {
    static_assert(check_host_pool_layout<PageEnvelopeHost<Sides...>, B, L>());

public:
    using stream_ref = typename B::stream_ref;
    /// The components with host pages: the sides.
    static constexpr ComponentMask components = envelope_sides_v<L, Sides...>;

    /// Allocates one zero-filled pinned arena of `host_arena_bytes(device, components, config)` bytes. Each
    /// side's pages are its device envelopes (`device[c].page_bytes`); its logical id space is the pages that
    /// fit the whole arena. Compaction copies are queued on `stream` (a stream of the pool's own: it is
    /// synchronized after each compaction). Throws `logic_error` for a device spec without a side's pool or a
    /// bad `config`, `out_of_memory` when pinned memory runs out.
    page_envelope_host_impl(B& backend, const ArenaSpec& device, const HostConfig& config, stream_ref stream);
    page_envelope_host_impl(page_envelope_host_impl&&) noexcept = default;
    /// Waits for the released leases' copies of the replaced arena before freeing it.
    page_envelope_host_impl& operator=(page_envelope_host_impl&& o) noexcept;

    /// Bytes of a host page of `c`; 0 for a component that is no side.
    [[nodiscard]] std::size_t page_bytes(Component c) const noexcept { return leases_.sides()[c].page_bytes; }
    /// The pages of `c` the arena could hold now, packed, next to the other side's live pages (it changes as
    /// the other side grows or shrinks). O(1).
    [[nodiscard]] std::int32_t capacity(Component c) const noexcept;
    /// Live pages of `c`.
    [[nodiscard]] std::int32_t used(Component c) const noexcept { return side_of(c) ? side_of(c)->used : 0; }
    /// `capacity(c) - used(c)`: pages of `c` alone that an alloc can still give (maybe after a compaction).
    [[nodiscard]] std::int32_t available(Component c) const noexcept { return capacity(c) - used(c); }
    /// Holes of `c` (freed pages below its watermark), for tests and accounting.
    [[nodiscard]] std::int32_t holes(Component c) const noexcept { return side_of(c) ? side_of(c)->hole_count() : 0; }
    /// The arena's bytes.
    [[nodiscard]] std::size_t arena_bytes() const noexcept { return arena_bytes_; }

    /// All of `batch` or nothing. Physical pages come from holes first, then past the watermark; when the
    /// batch fits only packed, the arena compacts first (see `compact`). Fails, with nothing changed, as
    /// `HostShortfall::capacity` when it does not fit even packed, or `HostShortfall::leased` when it fits only
    /// packed and a lease is held; the result names the side short and by how many pages (a component that is
    /// no side is short by its whole request; when both sides compete for the gap, FULL is placed first and
    /// the other side is named). Without a compaction O(pages) and allocation-free.
    HostAllocResult alloc(std::span<const HostRequest> batch);

    /// Frees `pages` of `c`: each becomes a hole, or, at its side's watermark, retreats the watermark over it
    /// and the holes behind it. Moves nothing. Throws `logic_error` (nothing freed) for a page not allocated to
    /// `c` or listed twice. O(n) amortized, no allocation.
    void free(Component c, std::span<const HostPage> pages);

    /// Packs both sides toward their ends so that the gap between them is all the free bytes: live pages above
    /// the packed watermark move into the holes below it (pinned->pinned copies on the pool's stream, ordered
    /// after every released lease's event), the stream is synchronized, and the maps are rebuilt. Every
    /// logical page keeps its bytes. Returns false, with nothing changed, while a lease is held. Cold: blocks
    /// the host, allocates staging lists.
    bool compact();

    /// A lease over every side's pages. O(1).
    [[nodiscard]] HostLease<B> lease() noexcept { return leases_.acquire(); }
    /// True while a lease is held (compaction is refused).
    [[nodiscard]] bool leased() const noexcept { return leases_.held(); }
    /// Released leases' events not yet known complete (a compaction orders its moves after them).
    [[nodiscard]] std::size_t pending_lease_events() const noexcept { return leases_.pending(); }

    /// Every broken invariant, one line each (empty: healthy): each side's maps inverse of each other, holes
    /// and watermarks consistent (`envelope_side`), and the two sides' bytes disjoint. O(pages).
    [[nodiscard]] std::vector<std::string> verify() const;

private:
    // Whether a batch needing `need_bottom` / `need_top` pages fits with the sides' occupied ranges ending at
    // `bottom_mark` / `top_mark` and with the holes given; on failure, the side short and by how much.
    struct fit {
        bool ok = true;
        Pages missing{};
    };
    [[nodiscard]] fit fits(std::int32_t need_bottom, std::int32_t need_top, bool packed) const noexcept;
    // The lowest byte the top side's pages reach with its mark at `top_mark` (the arena's end when empty).
    [[nodiscard]] std::size_t top_edge_bytes(std::int32_t top_mark) const noexcept;
    [[nodiscard]] const envelope_side* side_of(Component c) const noexcept {
        const envelope_side& s = c == Component::full ? top_ : bottom_;
        return s.present && s.component == c ? &s : nullptr;
    }
    [[nodiscard]] envelope_side* side_of(Component c) noexcept {
        return const_cast<envelope_side*>(std::as_const(*this).side_of(c));
    }
    // Queues the moves that pack `s` and rebinds its maps (the caller synchronizes the stream).
    void pack(envelope_side& s, std::vector<std::int32_t>& src, std::vector<std::int32_t>& dst);

    stream_ref stream_;
    backend_ref<B> backend_;
    std::size_t arena_bytes_ = 0;
    pinned_buffer_t<B> buffer_{};
    envelope_side bottom_{};  // the side that is not FULL, growing up from byte 0 (absent when FULL is alone)
    envelope_side top_{};     // FULL, growing down from the arena's end (absent when not a side)
    // Declared last, so destroyed first: the registry waits for released leases' copies while the arena they
    // touch still exists.
    lease_registry<B> leases_;
};

}  // namespace unikv::detail::host

#include <unikv/detail/host/page_envelope_host.inl>
