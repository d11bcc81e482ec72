#pragma once
/// \file
/// The sub-pool policy kind (`LazyEndPool`, `EagerEndPool`, `FloatPool`): what a layout and the unified
/// allocator need from a policy tag. One detection trait per requirement, so a host can `static_assert`
/// each one and name the missing member; `is_pool_policy_v` aggregates them; `PoolPolicy` is the concept.
///
/// A policy is a small tag type:
/// * `placement`: `Placement::end` (grows from one end of the arena) or `Placement::middle` (floats);
/// * `compaction`: when it moves pages (`eager` on every free, `lazy` in `flush`, `on_demand` in
///   `make_room` / `compact_holes`);
/// * `grow` (ends only): the direction it grows in;
/// * a nested `template <class Backend> using impl = ...`, the sub-allocator the unified allocator
///   instantiates (the shipped bodies live in `detail/pools/`, as cuco's storage and probing tags do).
///
/// What the allocator calls on an `impl` is the protocol below: one trait per member, common to every role
/// (capacity questions included: one `project` query, answered by ends and floats alike), then the moves only
/// a float makes. `UnifiedAllocator` asserts each with its own message (`detail::check_pool_impl<P, B>()` in
/// `pools/unified_allocator.hpp`).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/pools/pool_core.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/results.hpp>

namespace unikv {

/// Where a pool sits in a layout's chain.
enum class Placement : std::uint8_t {
    end,     ///< grows from one end of the arena toward the middle
    middle,  ///< floats between the two ends
};

/// When a pool moves its pages.
enum class Compaction : std::uint8_t {
    eager,      ///< every free compacts at once (no holes ever)
    lazy,       ///< frees leave holes; `flush` packs them
    on_demand,  ///< holes are reused in place; pages move only in `make_room` / `compact_holes`
};

/// Has `P::placement` of type `Placement`.
template <class P>
inline constexpr bool has_placement_v = requires {
    { P::placement } -> std::convertible_to<Placement>;
};

/// Has `P::compaction` of type `Compaction`.
template <class P>
inline constexpr bool has_compaction_v = requires {
    { P::compaction } -> std::convertible_to<Compaction>;
};

namespace detail {
template <class P>
constexpr bool grow_if_end() {
    if constexpr (has_placement_v<P>) {
        if constexpr (P::placement == Placement::end) {
            return requires { { P::grow } -> std::convertible_to<Grow>; };
        } else {
            return true;
        }
    } else {
        return true;
    }
}
template <class P>
constexpr bool placed(Placement where) {
    if constexpr (has_placement_v<P>) {
        return P::placement == where;
    } else {
        return false;
    }
}
template <class P>
constexpr Compaction compaction_or_eager() {
    if constexpr (has_compaction_v<P>) {
        return static_cast<Compaction>(P::compaction);
    } else {
        return Compaction::eager;
    }
}
}  // namespace detail

/// An end policy (`placement == Placement::end`) has `P::grow`; a middle policy needs none.
template <class P>
inline constexpr bool has_grow_if_end_v = detail::grow_if_end<P>();

namespace detail {
/// A stand-in backend for conformance checks that only name `impl<B>` (naming does not instantiate it).
struct backend_archetype {};
}  // namespace detail

/// Has a nested `impl<B>` class template for backend `B`.
template <class P, class B>
inline constexpr bool has_pool_impl_v = requires { typename P::template impl<B>; };

/// True when `P` models every sub-pool policy requirement for backend `B`.
template <class P, class B>
inline constexpr bool is_pool_policy_v =
    has_placement_v<P> && has_compaction_v<P> && has_grow_if_end_v<P> && has_pool_impl_v<P, B>;

/// A sub-pool policy tag usable with backend `B`.
template <class P, class B>
concept PoolPolicy = is_pool_policy_v<P, B>;

/// The bytes a pool may occupy now: from the facing edge of its nearest non-transparent neighbour below (or
/// the sink floor) to that of its nearest one above (or the arena's end). An end pool grows toward one edge
/// (an up end toward `high`, a down end toward `low`); a float may grow toward both.
struct ByteBand {
    std::size_t low = 0;
    std::size_t high = 0;
};

/// Whether a capacity question honours what blocks moves now (reserved or pending pages, closed gates), or
/// asks what would fit without them (which tells `Shortfall::moves_blocked` from `Shortfall::room`).
enum class Blockers : std::uint8_t { honoured, ignored };

/// What a capacity projection assumes the allocator did to a pool before the pool takes its pages (the
/// shortfall ladder then does exactly that). Every role reads the same fields.
struct Projection {
    /// An urgent flush ran: an end's holes and pending reuse went back to its frontier (unless reserved
    /// pages pin the end and blockers are honoured); a float absorbed its boundary holes (zero copy).
    bool flushed = false;
    /// The pool's pages then moved anywhere inside the room (when they can move, or blockers are ignored).
    /// A pool that never moves as a whole (an end) ignores it.
    bool relocated = false;
    Blockers blockers = Blockers::honoured;
};

// ---- what the unified allocator calls on a policy's `impl` (checked one by one by the host) ----------
// Ids are raw `std::int32_t` or strong ids (`VirtualPage`, `StateId`); the traits check the raw form.

/// `I(spec, num_virtual, ids)` builds the pool over `spec` with `num_virtual` v2p entries, minting its ids
/// (`id_source::owner`) or binding another pool's (`id_source::borrowed`).
template <class I>
inline constexpr bool has_pool_constructor_v = std::constructible_from<I, const SubPoolSpec&, std::int32_t, detail::id_source>;
/// `impl.core()` gives the shared pool state (`detail::pool_core`), mutable and const.
template <class I>
inline constexpr bool has_pool_core_v = requires(I& i, const I& ci) {
    { i.core() } -> std::same_as<detail::pool_core&>;
    { ci.core() } -> std::same_as<const detail::pool_core&>;
};
/// `impl.take_bound(ids, band, handed)` binds each id to a page (holes first, then growth inside `band`),
/// appending the pages to `*handed` when it is not null. The allocator guarantees the room.
template <class I>
inline constexpr bool has_take_bound_v =
    requires(I& i, std::span<const std::int32_t> ids, ByteBand band, std::vector<std::int32_t>* handed) {
        i.take_bound(ids, band, handed);
    };
/// `impl.take_reserved(n, band, out, handed)` takes `n` unbound pages for a reservation into `out`.
template <class I>
inline constexpr bool has_take_reserved_v =
    requires(I& i, ByteBand band, std::vector<PhysicalPage>& out, std::vector<std::int32_t>* handed) {
        i.take_reserved(std::int32_t{}, band, out, handed);
    };
/// `impl.release_page(page)` takes back a page its caller just unbound.
template <class I>
inline constexpr bool has_release_page_v = requires(I& i, std::int32_t p) { i.release_page(p); };
/// `impl.after_release(context)` runs after a batch of releases (an eager pool compacts there).
template <class I, class Context>
inline constexpr bool has_after_release_v = requires(I& i, Context& c) { i.after_release(c); };
/// `impl.flush(context, mode, blocked, cap)` compacts (or absorbs) and returns a `FlushResult`.
template <class I, class Context>
inline constexpr bool has_flush_v = requires(I& i, Context& c, std::size_t cap) {
    { i.flush(c, FlushMode::urgent, false, cap) } -> std::same_as<FlushResult>;
};
/// `impl.idle()` says a flush has nothing to do.
template <class I>
inline constexpr bool has_idle_v = requires(const I& i) {
    { i.idle() } -> std::convertible_to<bool>;
};
/// `impl.flushable()` counts the pages an urgent flush hands back to the pool's frontier.
template <class I>
inline constexpr bool has_flushable_v = requires(const I& i) {
    { i.flushable() } -> std::convertible_to<std::int32_t>;
};
/// `impl.verify()` returns one line per broken invariant (empty: healthy).
template <class I>
inline constexpr bool has_verify_v = requires(const I& i) {
    { i.verify() } -> std::same_as<std::vector<std::string>>;
};
/// `impl.low_bytes()` and `impl.high_bytes()` give the pool's byte span `[low, high)` on the chain.
template <class I>
inline constexpr bool has_byte_span_v = requires(const I& i) {
    { i.low_bytes() } -> std::convertible_to<std::size_t>;
    { i.high_bytes() } -> std::convertible_to<std::size_t>;
};
/// `impl.project(room, pages, how)` is the pool's one capacity answer: the bytes it would claim inside `room`
/// once it took `pages` more pages (holes first) after the relief `how` describes, or `std::nullopt` when
/// they do not fit there. An end claims its span; a float claims its span when its holes cover the take,
/// else the page grid of `room` it may grow or move into. The capacity engine chains it (the down end inside
/// the arena, the up end inside what the down end leaves, the float between them); alloc and free fast
/// paths never call it. It changes nothing.
template <class I>
inline constexpr bool has_project_v = requires(const I& i, ByteBand room, std::int64_t pages, Projection how) {
    { i.project(room, pages, how) } -> std::same_as<std::optional<ByteBand>>;
};
/// `impl.transparent()` says the pool owns no bytes now, so its neighbours' bands look through it.
template <class I>
inline constexpr bool has_transparent_v = requires(const I& i) {
    { i.transparent() } -> std::convertible_to<bool>;
};

// Float role: `make_room`, `compact_holes` and the shortfall ladder move the float as a whole (an end never
// moves as a whole: it only packs inside its span, in `flush`).

/// `impl.relocatable()` and `impl.relocate_into(band, context)` move the float into a byte band's page grid.
template <class I, class Context>
inline constexpr bool has_relocation_v = requires(I& i, const I& ci, Context& c, ByteBand band) {
    { ci.relocatable() } -> std::convertible_to<bool>;
    { i.relocate_into(band, c) } -> std::convertible_to<bool>;
};
/// `impl.make_room(side, bytes, band, context, blocked)` and `impl.compact_holes(side, context, blocked)`.
template <class I, class Context>
inline constexpr bool has_float_moves_v = requires(I& i, Context& c, ByteBand band) {
    { i.make_room(Side::low, std::size_t{}, band, c, false) } -> std::convertible_to<std::size_t>;
    { i.compact_holes(Side::low, c, false) } -> std::convertible_to<std::size_t>;
};

/// True for end policies (`placement == Placement::end`).
template <class P>
inline constexpr bool is_end_policy_v = detail::placed<P>(Placement::end);

/// True for floating policies (`placement == Placement::middle`).
template <class P>
inline constexpr bool is_float_policy_v = detail::placed<P>(Placement::middle);

/// The compaction of `P`, or `Compaction::eager` for a type that is not a policy (traits stay total).
template <class P>
inline constexpr Compaction compaction_of_v = detail::compaction_or_eager<P>();

}  // namespace unikv
