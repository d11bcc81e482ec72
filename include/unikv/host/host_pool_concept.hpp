#pragma once
/// \file
/// The host-pool policy kind (`PageEnvelopeHost`, `SeparateHostPools`): what the transfer controller and the
/// cache need from the host (pinned CPU) tier. A policy is a tag with a nested
/// `template <class Backend, class Layout> using impl = ...`; the impl owns pinned host memory holding page
/// envelopes of the layout's pools, one host page per device page envelope (a Mamba state slot is one page).
///
/// Id domains: the tree owns *logical* host pages (`HostPage`), stable for the life of the copy they hold.
/// Where a page's bytes sit (its *physical* host page) is private to the pool and may change whenever the pool
/// compacts; only a `HostLease` translates logical to physical, and while a lease is held, or its copy's event
/// has not completed, the pool does not move bytes.
///
/// The protocol an `impl<B, L>` models, one trait per member below (`check_host_pool<P, B, L>()` names the
/// first one missing):
/// * `impl(B& backend, const ArenaSpec& device, const HostConfig& config, typename B::stream_ref stream)`:
///   pinned memory from `backend.allocate_pinned`, host-side compaction copies queued on `stream`;
/// * `page_bytes(c)`, `capacity(c)`, `used(c)`, `available(c)`: bytes of a host page of component `c` (equal
///   to the device envelope `device[c].page_bytes`) and page counts;
/// * `alloc(batch)`: all of a batch of `HostRequest`s or nothing (`HostAllocResult` says which component
///   fell short, and by how many pages); may compact the host side first when the batch fits only packed;
/// * `free(c, pages)`: throws `logic_error` (nothing freed) for a page not allocated to `c` or listed twice;
/// * `lease()`: a `HostLease` (see `host_lease.hpp`);
/// * `verify()`: every broken invariant, one line each (empty: healthy).
///
/// A policy may also restrict the layouts it serves: a `template <class L> static constexpr host_layout_rule
/// layout_rule` member names the first rule `L` breaks (`host_layout_rule::none` when it serves `L`).
/// `check_host_pool<P, B, L>()` reports that rule, or else the first protocol member missing, with one
/// `unikv:` message; `HostPoolPolicy<P, B, L>` is the concept.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/transfer/host_mode.hpp>
#include <unikv/transfer/write_policies.hpp>

namespace unikv {

/// The host tier's configuration. Sizes: give either `total_bytes` (split over the components in proportion to
/// their device bytes by `SeparateHostPools`, see `split_host_bytes`; one buffer shared by the sides of
/// `PageEnvelopeHost`) or `pages` per component (0 for an absent component). Use: `write` and `mode`, read by
/// the cache (`Cache`), which checks them; the host pools ignore them.
struct HostConfig {
    /// Host bytes in all; used when every entry of `pages` is 0.
    std::size_t total_bytes = 0;
    /// Host pages per component; when any is non-zero, these are the capacities and `total_bytes` is ignored.
    per_component<std::int32_t> pages{};
    /// Device bytes each component is expected to occupy, the weights of the split of `total_bytes`. All 0:
    /// weight by each component's bytes per cached token (FULL and SWA: page bytes over page tokens; Mamba: a
    /// state over `tokens_per_state`), so the host holds about as many tokens of each.
    per_component<std::size_t> device_bytes{};
    /// The cached tokens one Mamba state serves, for the default split: about one state (a checkpoint) per
    /// cached turn of this length (measured: `docs/host.md`). Setting it to the page size gives each pool the same
    /// page count.
    std::int32_t tokens_per_state = 256;
    /// When device data gets its host copy (`WritePolicy::none` under `NoHostTier`).
    HostWrites write{};
    /// What the host tier is for.
    HostMode mode = HostMode::cache;
};

/// One entry of a host allocation batch: `out.size()` pages of `component`.
struct HostRequest {
    Component component = Component::full;
    std::span<HostPage> out{};
};

/// Why a host allocation batch failed.
enum class HostShortfall : std::uint8_t {
    none,      ///< it succeeded
    capacity,  ///< the pool cannot hold the batch even packed: evict host pages first
    leased,    ///< the batch fits only packed, and a held lease forbids the compaction: retry after the transfer
};

/// The outcome of a host allocation batch. On failure nothing was allocated and nothing moved.
struct [[nodiscard]] HostAllocResult {
    /// The pages missing of the component that fell short (a count of 0 on success).
    Pages missing{};
    /// Why it failed; `none` on success.
    HostShortfall shortfall = HostShortfall::none;
    explicit operator bool() const noexcept { return shortfall == HostShortfall::none; }
};

/// Has `impl(B&, const ArenaSpec&, const HostConfig&, B::stream_ref)`.
template <class I, class B>
inline constexpr bool has_host_pool_constructor_v =
    std::is_constructible_v<I, B&, const ArenaSpec&, const HostConfig&, typename B::stream_ref>;

/// Has `page_bytes`, `capacity`, `used` and `available`, per component.
template <class I>
inline constexpr bool has_host_pool_sizes_v = requires(const I& p, Component c) {
    { p.page_bytes(c) } -> std::same_as<std::size_t>;
    { p.capacity(c) } -> std::same_as<std::int32_t>;
    { p.used(c) } -> std::same_as<std::int32_t>;
    { p.available(c) } -> std::same_as<std::int32_t>;
};

/// Has `HostAllocResult alloc(std::span<const HostRequest>)`.
template <class I>
inline constexpr bool has_host_pool_alloc_v = requires(I& p, std::span<const HostRequest> batch) {
    { p.alloc(batch) } -> std::same_as<HostAllocResult>;
};

/// Has `free(Component, std::span<const HostPage>)`.
template <class I>
inline constexpr bool has_host_pool_free_v = requires(I& p, Component c, std::span<const HostPage> pages) {
    p.free(c, pages);
};

/// Has `lease()`, returning a move-only lease.
template <class I>
inline constexpr bool has_host_pool_lease_v = requires(I& p) {
    p.lease();
    requires std::is_move_constructible_v<decltype(p.lease())>;
    requires !std::is_copy_constructible_v<decltype(p.lease())>;
};

/// Has `std::vector<std::string> verify() const`.
template <class I>
inline constexpr bool has_host_pool_verify_v = requires(const I& p) {
    { p.verify() } -> std::same_as<std::vector<std::string>>;
};

/// True when `I` models every member of the host-pool protocol for backend `B`.
template <class I, class B>
inline constexpr bool is_host_pool_impl_v = has_host_pool_constructor_v<I, B> && has_host_pool_sizes_v<I> &&
                                            has_host_pool_alloc_v<I> && has_host_pool_free_v<I> &&
                                            has_host_pool_lease_v<I> && has_host_pool_verify_v<I>;

/// The layout rules a host-pool policy may impose (see the file comment), in the order they are reported.
enum class host_layout_rule : std::uint8_t {
    none,            ///< the policy serves the layout
    no_float,        ///< the layout has a floating pool, which a two-end host arena cannot mirror
    at_most_two,     ///< more than two sides: a host arena has two ends
    sides_in_layout, ///< a side names a component that is not a pool of the layout (no shared device region)
    sides_unique,    ///< a side is listed twice
};

/// The first layout rule policy `P` finds broken by layout `L`; `none` when `P` restricts no layout.
template <class P, class L>
inline constexpr host_layout_rule host_layout_rule_of_v = [] {
    if constexpr (requires { { P::template layout_rule<L> } -> std::convertible_to<host_layout_rule>; }) {
        return static_cast<host_layout_rule>(P::template layout_rule<L>);
    } else {
        return host_layout_rule::none;
    }
}();

/// True when host-pool policy `P` keeps the pages of its components in one shared host arena
/// (`static constexpr bool one_host_arena`, as `PageEnvelopeHost`), not one pool per component: a storage
/// backend that stores pages per component cannot use it (`needs_separate_pools_v`).
template <class P>
inline constexpr bool host_pools_share_one_arena_v = [] {
    if constexpr (requires { { P::one_host_arena } -> std::convertible_to<bool>; }) {
        return static_cast<bool>(P::one_host_arena);
    } else {
        return false;
    }
}();

/// Has a nested `impl<B, L>` class template.
template <class P, class B, class L>
inline constexpr bool has_host_pool_impl_v = requires { typename P::template impl<B, L>; };

/// A host-pool policy tag serving layout `L` on backend `B`. Short-circuits: the impl is only looked at for a
/// valid layout the policy serves.
template <class P, class B, class L>
concept HostPoolPolicy = is_valid_layout_v<L, B> && host_layout_rule_of_v<P, L> == host_layout_rule::none &&
                         has_host_pool_impl_v<P, B, L> && is_host_pool_impl_v<typename P::template impl<B, L>, B>;

/// Checks that policy `P` serves layout `L`: one `static_assert` per rule, each firing only when the rules
/// before it hold, so a bad combination gets exactly one message. An invalid layout reports its own rule
/// (`check_layout`). Returns true. The impls assert it on themselves.
template <class P, class B, class L>
consteval bool check_host_pool_layout() {
    if constexpr (!is_valid_layout_v<L, B>) {
        return check_layout<L, B>();
    } else {
        using rule = host_layout_rule;
        constexpr rule broken = host_layout_rule_of_v<P, L>;
        static_assert(broken != rule::no_float,
                      "unikv: PageEnvelopeHost mirrors a two-end device arena, but the layout has a FloatPool (the "
                      "tri-pool's floating Swa), whose pages have no end of the host arena to grow from; use "
                      "SeparateHostPools with TriPoolLayout");
        static_assert(broken != rule::at_most_two,
                      "unikv: PageEnvelopeHost takes at most two sides, one growing from each end of the host "
                      "arena; name at most two components, or use SeparateHostPools");
        static_assert(broken != rule::sides_in_layout,
                      "unikv: a PageEnvelopeHost side names a component that is not a pool of the layout, so it "
                      "shares no device region with the other side; name only the layout's pools "
                      "(PageEnvelopeHost<> takes them all)");
        static_assert(broken != rule::sides_unique,
                      "unikv: a PageEnvelopeHost side is listed twice; the sides grow from opposite ends of the "
                      "host arena, so name each component once");
        return true;
    }
}

/// Checks `check_host_pool_layout<P, B, L>()` and then each member of the protocol on `P::impl<B, L>`, one
/// message per missing member, so a bad bundle gets exactly one `unikv:` message naming the fix. Returns true.
template <class P, class B, class L>
consteval bool check_host_pool() {
    if constexpr (!is_valid_layout_v<L, B> || host_layout_rule_of_v<P, L> != host_layout_rule::none) {
        return check_host_pool_layout<P, B, L>();
    } else if constexpr (!has_host_pool_impl_v<P, B, L>) {
        static_assert(has_host_pool_impl_v<P, B, L>,
                      "unikv: a host-pool policy needs a nested template <class Backend, class Layout> using impl; "
                      "use PageEnvelopeHost<> or SeparateHostPools");
        return true;
    } else {
        using I = typename P::template impl<B, L>;
        constexpr bool ctor = has_host_pool_constructor_v<I, B>;
        constexpr bool sizes = ctor && has_host_pool_sizes_v<I>;
        constexpr bool alloc = sizes && has_host_pool_alloc_v<I>;
        constexpr bool free = alloc && has_host_pool_free_v<I>;
        constexpr bool lease = free && has_host_pool_lease_v<I>;
        static_assert(ctor, "unikv: a host pool's impl<B, L> needs a constructor (B&, const ArenaSpec&, const "
                            "HostConfig&, B::stream_ref)");
        static_assert(!ctor || sizes, "unikv: a host pool's impl<B, L> needs page_bytes(c), capacity(c), used(c) "
                                      "and available(c)");
        static_assert(!sizes || alloc, "unikv: a host pool's impl<B, L> needs HostAllocResult "
                                       "alloc(std::span<const HostRequest>)");
        static_assert(!alloc || free, "unikv: a host pool's impl<B, L> needs free(Component, std::span<const "
                                      "HostPage>)");
        static_assert(!free || lease, "unikv: a host pool's impl<B, L> needs lease() returning a move-only "
                                      "HostLease");
        static_assert(!lease || has_host_pool_verify_v<I>, "unikv: a host pool's impl<B, L> needs "
                                                           "std::vector<std::string> verify() const");
        return true;
    }
}

}  // namespace unikv
