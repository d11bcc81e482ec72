#pragma once
/// \file
/// Host modes, as runtime values (`HostConfig::mode`): what the host tier is for. Under `HostMode::cache` host
/// pages are a second cache tier, matched (host hits) and loaded back. Under `HostMode::buffer_only` host
/// memory only stages copies on their way to the storage tier and is never matched; a cache refuses that mode
/// (`logic_error`) over a layout with Mamba, and without a storage tier to stage for.

#include <cstdint>

namespace unikv {

/// What the host tier is for.
enum class HostMode : std::uint8_t {
    /// The host tier caches: host copies are matched (`HostHits::include`) and loaded back to the device.
    cache,
    /// The host tier stages copies for the storage tier: host copies are not matched (`HostHits::exclude`), so
    /// every hit is a device hit or a storage hit.
    buffer_only,
};

}  // namespace unikv
