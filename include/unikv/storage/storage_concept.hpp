#pragma once
/// \file
/// The storage-tier (L3) policy kind, as far as the cache's compatibility rules need it today: a storage
/// policy is a tag that says whether it needs separate host pools (`needs_separate_pools`), because it stores
/// pages per component and so cannot read them out of one shared host arena. The backends themselves (an
/// embedded local directory, distributed stores) come with the storage tier; `NoStorage` is the only one yet.

#include <concepts>

namespace unikv {

/// Has `static constexpr bool needs_separate_pools`.
template <class S>
inline constexpr bool has_needs_separate_pools_v = requires {
    { S::needs_separate_pools } -> std::convertible_to<bool>;
};

/// True for a storage policy tag (it says whether it needs separate host pools).
template <class S>
inline constexpr bool is_storage_policy_v = has_needs_separate_pools_v<S>;

/// A storage policy tag.
template <class S>
concept StoragePolicy = is_storage_policy_v<S>;

/// True when storage `S` needs one host pool per component (`SeparateHostPools`), not a shared host arena.
template <class S>
inline constexpr bool needs_separate_pools_v = [] {
    if constexpr (has_needs_separate_pools_v<S>) {
        return static_cast<bool>(S::needs_separate_pools);
    } else {
        return false;
    }
}();

/// Checks that `S` is a storage policy, with one `unikv:` message. Returns true.
template <class S>
consteval bool check_storage_policy() {
    static_assert(is_storage_policy_v<S>,
                  "unikv: a storage policy says whether it needs separate host pools (static constexpr bool "
                  "needs_separate_pools); use NoStorage");
    return true;
}

}  // namespace unikv
