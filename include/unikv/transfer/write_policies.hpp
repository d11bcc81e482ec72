#pragma once
/// \file
/// Write policies of the host tier, as runtime values (reference §4.2): when device data gets its host copy.
/// A cache reads them from `HostConfig::write` (`HostWrites`), so every policy runs on one cache type.
///
/// | `WritePolicy` | backs up                                  | tree threshold | backs up on evict |
/// |---------------|-------------------------------------------|----------------|-------------------|
/// | `through`     | every inserted node                       | 1              | no                |
/// | `selective`   | a node once it was hit `threshold` times  | `threshold`    | no                |
/// | `back`        | a device leaf when it is evicted          | 0 (never insert) | yes             |
/// | `none`        | nothing (a device-only cache, or a host tier kept for retraction) | 0 | no      |
///
/// (tree threshold: `write_through_threshold`; backs up on evict: `backs_up_on_evict`.) Under write-back the
/// copy is drained before the device rows are freed; when the host cannot take it, the unbacked data is
/// dropped (never a locked node); the policy sets the tree's per-eviction option to `EvictBackups::on`
/// (`tree/options.hpp`). A policy backs up on insert or on eviction, never both, so the write lane of a
/// cache carries write-throughs or write-backs, not a mix. `check_host_writes` refuses a bad value.

#include <cstdint>

#include <unikv/error.hpp>

namespace unikv {

/// When device data gets its host copy (see the file comment).
enum class WritePolicy : std::uint8_t {
    none,       ///< never: nothing is copied to the host tier
    through,    ///< every inserted node is backed up (write-through)
    selective,  ///< a node is backed up on its `HostWrites::threshold`-th hit (selective write-through)
    back,       ///< device data without a host copy is backed up when eviction drops it (write-back)
};

/// The host tier's write policy with its parameter (named fields), e.g.
/// `HostWrites{.policy = WritePolicy::selective, .threshold = 3}`.
struct HostWrites {
    /// When device data gets its host copy.
    WritePolicy policy = WritePolicy::back;
    /// Hits before a selective write-through backs a node up (>= 1); read under `selective` only.
    std::uint32_t threshold = 2;
};

/// Hits after which the tree asks to back a node up on insert: 1 under `through`, `threshold` under
/// `selective`, 0 (never on insert) otherwise. O(1).
[[nodiscard]] constexpr std::uint32_t write_through_threshold(const HostWrites& w) noexcept {
    switch (w.policy) {
        case WritePolicy::through: return 1;
        case WritePolicy::selective: return w.threshold;
        default: return 0;
    }
}

/// True when eviction backs up the device data it drops (`back` only). O(1).
[[nodiscard]] constexpr bool backs_up_on_evict(const HostWrites& w) noexcept { return w.policy == WritePolicy::back; }

/// True when the policy copies device data to the host tier (on insert or on eviction). O(1).
[[nodiscard]] constexpr bool writes_host(const HostWrites& w) noexcept { return w.policy != WritePolicy::none; }

/// The name of `p` (`none`, `through`, `selective`, `back`; `?` for a value outside the enum). O(1).
[[nodiscard]] constexpr const char* write_policy_name(WritePolicy p) noexcept {
    switch (p) {
        case WritePolicy::none: return "none";
        case WritePolicy::through: return "through";
        case WritePolicy::selective: return "selective";
        case WritePolicy::back: return "back";
    }
    return "?";
}

/// Checks that `w` is a write policy: a value of the enum, and under `selective` a threshold >= 1. Throws
/// `logic_error` naming the value and the fix; returns `w`.
inline const HostWrites& check_host_writes(const HostWrites& w) {
    UNIKV_EXPECTS(w.policy == WritePolicy::none || w.policy == WritePolicy::through ||
                      w.policy == WritePolicy::selective || w.policy == WritePolicy::back,
                  "HostWrites::policy is ", static_cast<unsigned>(w.policy),
                  ", not a WritePolicy; use WritePolicy::through, selective, back or none");
    UNIKV_EXPECTS(w.policy != WritePolicy::selective || w.threshold >= 1,
                  "HostWrites: WritePolicy::selective backs a node up on its threshold-th hit, so it needs "
                  "threshold >= 1, not 0; give threshold 1 (or WritePolicy::through) to back up every insert");
    return w;
}

}  // namespace unikv
