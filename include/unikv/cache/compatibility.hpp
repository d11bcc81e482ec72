#pragma once
/// \file
/// Compatibility of a cache policy bundle (`Cache<Policies>`, `cache.hpp`): one guarded chain of rules across
/// the policies, so a bad bundle gets exactly one `unikv:` message, naming the fix. `cache_rule_of_v<P>` names
/// the first rule bundle `P` breaks; `check_cache_policies<P>()` reports it. Rules a policy kind owns are
/// routed to that kind's own check (its message), so each rule is written once:
///
/// | rule (in the order checked)                                         | message from                    |
/// |---------------------------------------------------------------------|---------------------------------|
/// | the bundle names a layout                                           | here                            |
/// | the layout is valid for the backend                                 | `check_layout`                  |
/// | the tree core is a tree-core tag or an explicit tree                | `check_tree_core_policy`        |
/// | an explicit tree holds exactly the layout's components              | here                            |
/// | a tag's tree holds exactly the components it is given               | `tree_core_t`                   |
/// | the host pools serve the layout (e.g. no envelope over a float)     | `check_host_pool`               |
/// | the storage is a storage policy                                     | `check_storage_policy`          |
/// | storage that needs separate pools gets no shared host arena         | here                            |
/// | the budget serves the layout (e.g. `SharedSWABudget` needs Full+Swa)| `check_budget`                  |
///
/// The write policy and the host mode are runtime values (`HostConfig::write`, `HostConfig::mode`), so their
/// rules (a policy that writes to the host needs a host tier; buffer-only host mode needs a storage tier and
/// no Mamba pool) are checked by the cache's constructor (`logic_error`), not here.
///
/// Use-site rules: retraction (`Cache::backup` / `restore`) needs a host tier and a layout without Mamba
/// (`check_cache_retraction`, the second routed to `check_retraction`); a cache that never retracts may have
/// either.

#include <cstdint>
#include <type_traits>

#include <unikv/budget/budget_concept.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/host/no_host_tier.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/storage/storage_concept.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/tree/tree_concept.hpp>

namespace unikv {

/// The rules of a cache bundle, in the order they are checked (see the file comment).
enum class cache_rule : std::uint8_t {
    none,                ///< the bundle is good
    has_layout,          ///< it names `using layout = ...`
    layout,              ///< the layout is valid for the backend (`check_layout`)
    tree_core_kind,      ///< the tree core is a tag or a tree (`check_tree_core_policy`)
    explicit_tree_mask,  ///< an explicit tree's components are the layout's
    tag_tree_mask,       ///< a tag's tree holds the components it is given (`tree_core_t`)
    host_pools,          ///< the host pools serve the layout (`check_host_pool`)
    storage,             ///< the storage is a storage policy (`check_storage_policy`)
    storage_host_pools,  ///< storage that needs separate pools gets them
    budget,              ///< the budget serves the layout (`check_budget`)
};

namespace detail::cache {

template <class P>
inline constexpr bool has_layout_v = requires { typename P::layout; };

// An explicit tree (a type modelling the tree-core contract), as opposed to a tag naming one.
template <class T>
inline constexpr bool is_explicit_tree_v = !has_tree_impl_v<T> && is_tree_core_v<T>;

// False only for an explicit tree whose components are not `Mask`.
template <class T, ComponentMask Mask>
consteval bool explicit_tree_holds() {
    if constexpr (is_explicit_tree_v<T>) {
        return T::components::mask == Mask;
    } else {
        return true;
    }
}

template <class P>
consteval cache_rule first_broken_rule() {
    if constexpr (!has_layout_v<P>) {
        return cache_rule::has_layout;
    } else {
        using B = typename P::backend;
        using L = typename P::layout;
        using T = typename P::tree_core;
        using H = typename P::host_pools;
        using S = typename P::storage;
        if constexpr (!is_valid_layout_v<L, B>) {
            return cache_rule::layout;
        } else if constexpr (!is_tree_core_policy_v<T> && !is_explicit_tree_v<T>) {
            return cache_rule::tree_core_kind;
        } else if constexpr (!explicit_tree_holds<T, layout_components_v<L>>()) {
            return cache_rule::explicit_tree_mask;
        } else if constexpr (is_tree_core_policy_v<T> && !tree_impl_holds_mask_v<T, layout_components_v<L>>) {
            return cache_rule::tag_tree_mask;
        } else if constexpr (!is_no_host_tier_v<H> && !HostPoolPolicy<H, B, L>) {
            return cache_rule::host_pools;
        } else if constexpr (!is_storage_policy_v<S>) {
            return cache_rule::storage;
        } else if constexpr (needs_separate_pools_v<S> && host_pools_share_one_arena_v<H>) {
            return cache_rule::storage_host_pools;
        } else if constexpr (!is_budget_policy_v<typename P::budget, L>) {
            return cache_rule::budget;
        } else {
            return cache_rule::none;
        }
    }
}

}  // namespace detail::cache

/// The first rule cache bundle `P` breaks (`cache_rule::none` for a good bundle).
template <class P>
inline constexpr cache_rule cache_rule_of_v = detail::cache::first_broken_rule<P>();

/// True when `P` is a good cache bundle.
template <class P>
inline constexpr bool is_valid_cache_policies_v = cache_rule_of_v<P> == cache_rule::none;

/// Reports the first rule bundle `P` breaks with its one `unikv:` message (routed rules by their kind's own
/// check). Returns true, so it sits inside a `static_assert`.
template <class P>
consteval bool check_cache_policies() {
    constexpr cache_rule broken = cache_rule_of_v<P>;
    if constexpr (broken == cache_rule::has_layout) {
        static_assert(broken != cache_rule::has_layout,
                      "unikv: a cache policy bundle needs a layout, the one policy without a default; derive from "
                      "DefaultCachePolicies and add `using layout = SwaFullLayout;` (or another layout)");
    } else if constexpr (broken == cache_rule::layout) {
        return check_layout<typename P::layout, typename P::backend>();
    } else if constexpr (broken == cache_rule::tree_core_kind) {
        return check_tree_core_policy<typename P::tree_core>();
    } else if constexpr (broken == cache_rule::explicit_tree_mask) {
        static_assert(broken != cache_rule::explicit_tree_mask,
                      "unikv: the bundle's tree_core is an explicit tree whose components differ from the layout's "
                      "pools; name a tree-core tag (RadixTreeCore, ReferenceTreeCore), which derives the tree from "
                      "the layout, or list exactly the layout's components (RadixTree<Full, Swa> for SwaFullLayout)");
    } else if constexpr (broken == cache_rule::tag_tree_mask) {
        using tree = tree_core_t<typename P::tree_core, layout_components_v<typename P::layout>>;
        return sizeof(tree) > 0;
    } else if constexpr (broken == cache_rule::host_pools) {
        return check_host_pool<typename P::host_pools, typename P::backend, typename P::layout>();
    } else if constexpr (broken == cache_rule::storage) {
        return check_storage_policy<typename P::storage>();
    } else if constexpr (broken == cache_rule::storage_host_pools) {
        static_assert(broken != cache_rule::storage_host_pools,
                      "unikv: the bundle's storage needs separate host pools (it stores pages per component), but "
                      "its host_pools keep every component in one shared host arena (PageEnvelopeHost); use "
                      "host_pools = SeparateHostPools");
    } else if constexpr (broken == cache_rule::budget) {
        return check_budget<typename P::budget, typename P::layout>();
    }
    return true;
}

/// Rule of `Cache::backup` / `restore`: the bundle has a host tier to retract into, and a layout whose rows
/// the backup carries whole (no Mamba: `check_retraction`). One message. Returns true.
template <class P>
consteval bool check_cache_retraction() {
    if constexpr (is_no_host_tier_v<typename P::host_pools>) {
        static_assert(!is_no_host_tier_v<typename P::host_pools>,
                      "unikv: retraction backs a preempted request's rows up into the host pool, but host_pools is "
                      "NoHostTier; abort and recompute preempted requests, or give the bundle host pools "
                      "(SeparateHostPools, PageEnvelopeHost<>)");
        return true;
    } else {
        return check_retraction<typename P::layout>();
    }
}

/// True when a cache of bundle `P` can retract into the host pool.
template <class P>
inline constexpr bool cache_retracts_v =
    !is_no_host_tier_v<typename P::host_pools> && retraction_supports_layout_v<typename P::layout>;

}  // namespace unikv
