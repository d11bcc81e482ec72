#pragma once
/// \file
/// Host modes, as runtime values (`HostConfig::mode`): what the host tier is for. Under `HostMode::cache` host
/// pages are a second cache tier, matched (host hits) and loaded back. Under `HostMode::buffer_only` host
/// memory only stages copies between the device and the storage tier: a write-through's copy until the store holds
/// it, a prefetched copy until a request loads it to the device. A cache refuses that mode (`logic_error`) over a
/// layout with Mamba, without a storage tier to stage for, and with a write policy other than through or selective.

#include <cstdint>

namespace unikv {

/// What the host tier is for.
enum class HostMode : std::uint8_t {
    /// The host tier caches: host copies are matched (`HostHits::include`) and loaded back to the device.
    cache,
    /// The host tier stages copies for the storage tier: a write-through's host copy goes to the store with the
    /// rows it was copied from still device-locked, and leaves the host at the store's answer (the node is marked
    /// stored and not written again); a prefetch grafts host copies that a request matches and loads, and they
    /// leave the host at the load's ack (or to host eviction, when no request loads them). Every hit is a device
    /// hit or one from the store.
    buffer_only,
};

}  // namespace unikv
