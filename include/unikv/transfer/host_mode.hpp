#pragma once
/// \file
/// Host modes, as tag types: what the host tier is for. `CacheMode` is the only one today: host pages are a
/// second cache tier, matched (host hits) and loaded back. `BufferOnly` (host memory as staging on the way to
/// the storage tier, never matched) comes with the storage tier, which is what it stages for.

#include <concepts>

namespace unikv {

/// The host tier caches: host copies are matched and loaded back to the device.
struct CacheMode {
    /// Host copies count as matches (`HostHits::include`).
    static constexpr bool matches_host = true;
};

/// Rule: `M` is a host mode (it says whether host copies are matched).
template <class M>
inline constexpr bool is_host_mode_v = requires {
    { M::matches_host } -> std::convertible_to<bool>;
};

/// Checks `is_host_mode_v<M>` with one `unikv:` message. Returns true.
template <class M>
consteval bool check_host_mode() {
    static_assert(is_host_mode_v<M>,
                  "unikv: a host mode says whether host copies are matched (static constexpr bool matches_host); use "
                  "CacheMode");
    return true;
}

static_assert(check_host_mode<CacheMode>());

}  // namespace unikv
