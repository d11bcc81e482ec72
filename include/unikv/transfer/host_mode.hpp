#pragma once
/// \file
/// Host modes, as tag types: what the host tier is for. Under `CacheMode` host pages are a second cache tier,
/// matched (host hits) and loaded back. Under `BufferOnly` host memory only stages copies on their way to the
/// storage tier and is never matched; a cache bundle in that mode needs a storage tier and a layout without
/// Mamba (`cache/compatibility.hpp`).

#include <concepts>

namespace unikv {

/// The host tier caches: host copies are matched and loaded back to the device.
struct CacheMode {
    /// Host copies count as matches (`HostHits::include`).
    static constexpr bool matches_host = true;
};

/// The host tier stages copies for the storage tier: host copies are not matched (`HostHits::exclude`), so
/// every hit is a device hit or a storage hit.
struct BufferOnly {
    static constexpr bool matches_host = false;
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
                  "CacheMode or BufferOnly");
    return true;
}

static_assert(check_host_mode<CacheMode>());
static_assert(check_host_mode<BufferOnly>());

}  // namespace unikv
