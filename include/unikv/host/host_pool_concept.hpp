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

namespace unikv {

/// Sizes of the host tier. Give either `total_bytes` (split over the components in proportion to their
/// device bytes, see `split_host_bytes`) or `pages` per component (0 for an absent component).
struct HostConfig {
    /// Host bytes in all; used when every entry of `pages` is 0.
    std::size_t total_bytes = 0;
    /// Host pages per component; when any is non-zero, these are the capacities and `total_bytes` is ignored.
    per_component<std::int32_t> pages{};
    /// Device bytes each component is expected to occupy, the weights of the split of `total_bytes`. All 0:
    /// weight by page envelope bytes, so every component gets the same number of host pages.
    per_component<std::size_t> device_bytes{};
};

/// One entry of a host allocation batch: `out.size()` pages of `component`.
struct HostRequest {
    Component component = Component::full;
    std::span<HostPage> out{};
};

/// The outcome of a host allocation batch.
struct [[nodiscard]] HostAllocResult {
    /// The component that fell short (meaningful on failure).
    Component component = Component::full;
    /// Pages of `component` missing on failure; 0 on success.
    std::int32_t pages_short = 0;
    explicit operator bool() const noexcept { return pages_short == 0; }
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

}  // namespace unikv
