#pragma once
/// \file
/// Write policies of the host tier, as tag types (reference §4.2): when device data gets its host copy.
///
/// | policy                         | backs up                         | threshold        | backs up on evict |
/// |--------------------------------|----------------------------------|------------------|-------------------|
/// | `WriteThrough`                 | every inserted node              | 1                | no                |
/// | `WriteThroughSelective<N = 2>` | a node once it was hit N times   | N                | no                |
/// | `WriteBack`                    | a device leaf when it is evicted | 0 (never insert) | yes               |
/// | `NoHostWrites`                 | nothing (no host tier)           | 0                | no                |
///
/// (threshold: `write_through_threshold_v`; backs up on evict: `backs_up_on_evict_v`.) Under write-back the
/// copy is drained before the device rows are freed; when the host cannot take it, the unbacked data is
/// dropped (never a locked node); the policy sets the tree's per-eviction option to `EvictBackups::on`
/// (`tree/options.hpp`). A composed cache reads a policy only through the traits, and checks it with
/// `check_write_policy` (one `unikv:` message).

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace unikv {

/// Backs up every inserted node (threshold 1): the host always holds what the device holds.
struct WriteThrough {
    /// Hits before the backup.
    static constexpr std::uint32_t write_through_threshold = 1;
};

/// Backs up a node after its `Threshold`-th hit, so one-off prompts cost no copy. `Threshold` >= 1.
template <std::uint32_t Threshold = 2>
struct WriteThroughSelective {
    static_assert(Threshold >= 1,
                  "unikv: WriteThroughSelective<Threshold> backs up on the Threshold-th hit, so it needs Threshold >= "
                  "1; use WriteThroughSelective<1> (or WriteThrough) to back up every insert");
    /// Hits before the backup.
    static constexpr std::uint32_t write_through_threshold = Threshold;
};

/// Backs up device data without a host copy when eviction drops it (the D2H drains before the rows go).
struct WriteBack {
    /// Eviction asks the tree for backups.
    static constexpr bool backs_up_on_evict = true;
};

/// Never copies device data to the host: the policy of a cache without a host tier (`NoHostTier`), whose
/// eviction drops device data with no backup.
struct NoHostWrites {
    /// Says so explicitly, so that a tag that forgot both triggers is still refused.
    static constexpr bool writes_host = false;
};

/// Hits after which a node is backed up on insert; 0 when the policy never backs up on insert.
template <class P>
inline constexpr std::uint32_t write_through_threshold_v = [] {
    if constexpr (requires { { P::write_through_threshold } -> std::convertible_to<std::uint32_t>; }) {
        return static_cast<std::uint32_t>(P::write_through_threshold);
    } else {
        return std::uint32_t{0};
    }
}();

/// True when eviction backs up the device data it drops (write-back).
template <class P>
inline constexpr bool backs_up_on_evict_v = [] {
    if constexpr (requires { { P::backs_up_on_evict } -> std::convertible_to<bool>; }) {
        return static_cast<bool>(P::backs_up_on_evict);
    } else {
        return false;
    }
}();

/// True for a policy that declares it never writes to the host (`NoHostWrites`).
template <class P>
inline constexpr bool declares_no_host_writes_v = [] {
    if constexpr (requires { { P::writes_host } -> std::convertible_to<bool>; }) {
        return !static_cast<bool>(P::writes_host);
    } else {
        return false;
    }
}();

/// True when policy `P` copies device data to the host tier (on insert or on eviction).
template <class P>
inline constexpr bool writes_host_v = write_through_threshold_v<P> > 0 || backs_up_on_evict_v<P>;

/// Rule: `P` is a write policy: it backs up on insert (a threshold) or on eviction, exactly one of the two, or
/// it declares that it never writes to the host and has neither trigger.
template <class P>
inline constexpr bool is_write_policy_v = declares_no_host_writes_v<P>
                                              ? !writes_host_v<P>
                                              : (write_through_threshold_v<P> > 0) != backs_up_on_evict_v<P>;

/// Checks `is_write_policy_v<P>` with one `unikv:` message. Returns true.
template <class P>
consteval bool check_write_policy() {
    static_assert(is_write_policy_v<P>,
                  "unikv: a write policy backs up either on insert (write_through_threshold >= 1) or on eviction "
                  "(backs_up_on_evict), exactly one; use WriteThrough, WriteThroughSelective<N> or WriteBack (or "
                  "NoHostWrites without a host tier)");
    return true;
}

static_assert(check_write_policy<WriteThrough>() && check_write_policy<WriteThroughSelective<>>() &&
              check_write_policy<WriteBack>() && check_write_policy<NoHostWrites>());

}  // namespace unikv
