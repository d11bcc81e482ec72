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
/// * a nested `template <class Backend> class impl`, the sub-allocator the unified allocator instantiates.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <unikv/component.hpp>
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

// ---- what the unified allocator calls on a policy's `impl` (checked one by one by the host) ----------

/// `impl.core()` gives the shared pool state.
template <class I>
inline constexpr bool has_pool_core_v = requires(I& i) { i.core(); };
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
/// `impl.idle()` says a flush has nothing to do; `impl.drainable()` counts what an urgent flush frees.
template <class I>
inline constexpr bool has_idle_and_drainable_v = requires(const I& i) {
    { i.idle() } -> std::convertible_to<bool>;
    { i.drainable() } -> std::convertible_to<std::int32_t>;
};
/// `impl.verify(out)` appends broken invariants.
template <class I>
inline constexpr bool has_verify_v = requires(const I& i, std::vector<std::string>& out) { i.verify(out); };
/// `impl.low_bytes()`, `impl.high_bytes()` and `impl.transparent()` place the pool on the chain.
template <class I>
inline constexpr bool has_byte_span_v = requires(const I& i) {
    { i.low_bytes() } -> std::convertible_to<std::size_t>;
    { i.high_bytes() } -> std::convertible_to<std::size_t>;
    { i.transparent() } -> std::convertible_to<bool>;
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
