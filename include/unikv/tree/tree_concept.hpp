#pragma once
/// \file
/// The tree-core contract: one detection trait per requirement, the aggregate `is_tree_core_v`, the C++20
/// concept `TreeCoreModel`, and `check_tree_core<T>()`, which a consumer calls to get one named error per
/// missing member. `RadixTree` and `ReferenceTree` both model it; contract tests run on both.
///
/// A composed type names a tree core by its policy tag (`RadixTreeCore`, `ReferenceTreeCore`: a nested
/// `impl<Cs...>`), checked by `check_tree_core_policy<Core>()`, and derives the tree from its layout's component
/// mask with `tree_core_t<Core, Mask>`, so a tree that does not match the layout's pools cannot be written.

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/tree/components.hpp>
#include <unikv/tree/events.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/results.hpp>

namespace unikv {

/// `T::components` is a `tree_component_set`, and `T::config()` returns the `TreeConfig`.
template <class T>
inline constexpr bool has_tree_config_v = requires(const T& t) {
    { T::components::valid } -> std::convertible_to<bool>;
    { t.config() } -> std::convertible_to<TreeConfig>;
};

/// `t.match_prefix(key, options)` returns a `MatchResult`.
template <class T>
inline constexpr bool has_match_prefix_v = requires(T& t, TokenKey k, MatchOptions o) {
    { t.match_prefix(k, o) } -> std::same_as<MatchResult>;
};

/// `t.peek_prefix(key)` on a const tree returns a `PrefixPeek`: `match_prefix`'s lengths, changing nothing.
template <class T>
inline constexpr bool has_peek_prefix_v = requires(const T& t, TokenKey k) {
    { t.peek_prefix(k) } -> std::same_as<PrefixPeek>;
};

/// `t.insert(key, values)` returns an `InsertResult`.
template <class T>
inline constexpr bool has_insert_v = requires(T& t, TokenKey k, const InsertValues& v) {
    { t.insert(k, v) } -> std::same_as<InsertResult>;
};

/// `t.lock(node, options)` returns a `LockReceipt`.
template <class T>
inline constexpr bool has_lock_v = requires(T& t, NodeRef n, LockOptions o) {
    { t.lock(n, o) } -> std::same_as<LockReceipt>;
};

/// `t.unlock(std::move(receipt))` and `t.release_swa(receipt)` exist.
template <class T>
inline constexpr bool has_unlock_v = requires(T& t, LockReceipt r) {
    t.unlock(std::move(r));
    t.release_swa(r);
};

/// `t.evict(component, n, options)` returns an `EvictResult`.
template <class T>
inline constexpr bool has_evict_v = requires(T& t, Component c, std::int64_t n, EvictOptions o) {
    { t.evict(c, n, o) } -> std::same_as<EvictResult>;
};

/// `t.evict_host(component, n)` returns an `EvictResult`.
template <class T>
inline constexpr bool has_evict_host_v = requires(T& t, Component c, std::int64_t n) {
    { t.evict_host(c, n) } -> std::same_as<EvictResult>;
};

/// `set_host` and `finish_backup` record host copies, `skip_write_through` gives up a write-through and
/// `drop_host` undoes a committed one or lets go of a stored one; `finish_backup` and `drop_host` return an
/// `EvictResult`.
template <class T>
inline constexpr bool has_host_values_v = requires(T& t, NodeRef n, Component c, std::span<const HostPage> h) {
    t.set_host(n, c, h);
    { t.finish_backup(n, c, h) } -> std::same_as<EvictResult>;
    t.skip_write_through(n, c);
    { t.drop_host(n, c, HostDrop::stored) } -> std::same_as<EvictResult>;
};

/// `t.insert_host(key, values)` grafts host copies of a key's pages read back from a storage tier and returns a
/// `HostInsertResult`.
template <class T>
inline constexpr bool has_host_insert_v = requires(T& t, TokenKey k, const HostInsertValues& v) {
    { t.insert_host(k, v) } -> std::same_as<HostInsertResult>;
};

/// `host_chain_break()` says where host copies stop forming chains from the root; `set_write_through_threshold(t)`
/// changes the write-through threshold (a write-policy switch).
template <class T>
inline constexpr bool has_write_switch_v = requires(T& t, const T& ct, std::uint32_t threshold) {
    { ct.host_chain_break() } -> std::same_as<HostChainBreak>;
    t.set_write_through_threshold(threshold);
};

/// `commit_load_back(node, component, value)` records data loaded back from host.
template <class T>
inline constexpr bool has_commit_load_back_v = requires(T& t, NodeRef n, Component c, const LoadedValue& v) {
    t.commit_load_back(n, c, v);
};

/// `load_back_plan(node)` lists the load-backs a request ending at `node` needs.
template <class T>
inline constexpr bool has_load_back_plan_v = requires(T& t, NodeRef n) {
    { t.load_back_plan(n) } -> std::same_as<std::span<const LoadBackStep>>;
};

namespace detail {
// A `move_swa` callable, to check `finish_load` with.
struct swa_move_probe {
    void operator()(std::span<const VirtualPage>, std::span<const VirtualPage>) const noexcept {}
};
}  // namespace detail

/// `begin_load(node, id, dest)` records a queued load-back; `finish_load(id, copied, move_swa)` installs it at
/// its ack.
template <class T>
inline constexpr bool has_load_records_v = requires(T& t, NodeRef n, std::uint64_t id, const LoadedValue& v) {
    t.begin_load(n, id, v);
    { t.finish_load(id, true, detail::swa_move_probe{}) } -> std::same_as<LoadLeftovers>;
    { std::as_const(t).loads_in_flight() } -> std::same_as<std::size_t>;
};

/// `prefix_pages(node, out)` writes the FULL device pages of the prefix ending at `node`.
template <class T>
inline constexpr bool has_prefix_pages_v = requires(const T& t, NodeRef n, std::span<VirtualPage> out) {
    { t.prefix_pages(n, out) } -> std::same_as<std::size_t>;
};

/// `evictable_size`, `protected_size` and `host_size` report per-component units.
template <class T>
inline constexpr bool has_sizes_v = requires(const T& t, Component c) {
    { t.evictable_size(c) } -> std::same_as<std::int64_t>;
    { t.protected_size(c) } -> std::same_as<std::int64_t>;
    { t.host_size(c) } -> std::same_as<std::int64_t>;
};

/// `set_retention(node, class)` exists.
template <class T>
inline constexpr bool has_set_retention_v = requires(T& t, NodeRef n, std::uint8_t c) { t.set_retention(n, c); };

/// `take_events()` returns the recorded events.
template <class T>
inline constexpr bool has_take_events_v = requires(T& t) {
    { t.take_events() } -> std::same_as<std::vector<KvEvent>>;
};

/// Inspection: `node_info`, `node_count`, `nodes`, `contains`, and `verify` (one line per broken invariant).
template <class T>
inline constexpr bool has_inspection_v = requires(const T& t, NodeRef n) {
    { t.node_info(n) } -> std::same_as<NodeInfo>;
    { t.node_count() } -> std::same_as<std::size_t>;
    { t.nodes() } -> std::same_as<std::vector<NodeRef>>;
    { t.contains(n) } -> std::same_as<bool>;
    { t.verify() } -> std::same_as<std::vector<std::string>>;
};

/// Owners are move-only.
template <class T>
inline constexpr bool is_move_only_owner_v =
    std::is_nothrow_move_constructible_v<T> && !std::is_copy_constructible_v<T>;

/// True when `T` meets every requirement of the tree-core contract.
template <class T>
inline constexpr bool is_tree_core_v =
    has_tree_config_v<T> && has_match_prefix_v<T> && has_peek_prefix_v<T> && has_insert_v<T> && has_lock_v<T> &&
    has_unlock_v<T> && has_evict_v<T> && has_evict_host_v<T> && has_host_values_v<T> && has_host_insert_v<T> &&
    has_write_switch_v<T> && has_commit_load_back_v<T> && has_load_back_plan_v<T> && has_sizes_v<T> &&
    has_set_retention_v<T> && has_take_events_v<T> && has_inspection_v<T> && is_move_only_owner_v<T>;

/// A tree core: a policy a cache can hold to decide what is cached, matched and evicted.
template <class T>
concept TreeCoreModel = is_tree_core_v<T>;

/// Checks each requirement separately so a missing member is named in the error. Returns true.
template <class T>
consteval bool check_tree_core() {
    static_assert(has_tree_config_v<T>, "unikv: tree core needs `components` and `config()`");
    static_assert(has_match_prefix_v<T>, "unikv: tree core needs `MatchResult match_prefix(TokenKey, MatchOptions)`");
    static_assert(has_peek_prefix_v<T>, "unikv: tree core needs `PrefixPeek peek_prefix(TokenKey) const`");
    static_assert(has_insert_v<T>, "unikv: tree core needs `InsertResult insert(TokenKey, const InsertValues&)`");
    static_assert(has_lock_v<T>, "unikv: tree core needs `LockReceipt lock(NodeRef, LockOptions)`");
    static_assert(has_unlock_v<T>, "unikv: tree core needs `unlock(LockReceipt&&)` and `release_swa(LockReceipt&)`");
    static_assert(has_evict_v<T>, "unikv: tree core needs `EvictResult evict(Component, int64, EvictOptions)`");
    static_assert(has_evict_host_v<T>, "unikv: tree core needs `EvictResult evict_host(Component, int64)`");
    static_assert(has_host_values_v<T>, "unikv: tree core needs `set_host`, `EvictResult finish_backup(...)`, "
                                        "`skip_write_through(NodeRef, Component)` and `EvictResult drop_host(NodeRef, Component, HostDrop)`");
    static_assert(has_host_insert_v<T>,
                  "unikv: tree core needs `HostInsertResult insert_host(TokenKey, const HostInsertValues&)`");
    static_assert(has_write_switch_v<T>, "unikv: tree core needs `HostChainBreak host_chain_break() const` and "
                                         "`set_write_through_threshold(uint32)`");
    static_assert(has_commit_load_back_v<T>,
                  "unikv: tree core needs `commit_load_back(NodeRef, Component, const LoadedValue&)`");
    static_assert(has_load_back_plan_v<T>,
                  "unikv: tree core needs `std::span<const LoadBackStep> load_back_plan(NodeRef)`");
    static_assert(has_load_records_v<T>, "unikv: tree core needs `begin_load(NodeRef, uint64_t, const LoadedValue&)`, "
                                         "`LoadLeftovers finish_load(uint64_t, bool, MoveSwa&&)` and `loads_in_flight()`");
    static_assert(has_prefix_pages_v<T>, "unikv: tree core needs `size_t prefix_pages(NodeRef, span<VirtualPage>) const`");
    static_assert(has_sizes_v<T>, "unikv: tree core needs `evictable_size`, `protected_size`, `host_size`");
    static_assert(has_set_retention_v<T>, "unikv: tree core needs `set_retention(NodeRef, uint8_t)`");
    static_assert(has_take_events_v<T>, "unikv: tree core needs `std::vector<KvEvent> take_events()`");
    static_assert(has_inspection_v<T>, "unikv: tree core needs `node_info`, `node_count`, `nodes`, `contains`, "
                                        "`std::vector<std::string> verify() const`");
    static_assert(is_move_only_owner_v<T>, "unikv: a tree core is an owner: nothrow-movable and not copyable");
    return true;
}

// ---- tree-core policy tags ------------------------------------------------------------------------------

/// Has a nested `impl<Cs...>` alias template: `Core::template impl<Full>` names a tree.
template <class Core>
inline constexpr bool has_tree_impl_v = requires { typename Core::template impl<Full>; };

namespace detail {
template <class Core>
consteval bool tree_impl_is_core() {
    if constexpr (has_tree_impl_v<Core>) {
        return is_tree_core_v<typename Core::template impl<Full>>;
    } else {
        return false;
    }
}
}  // namespace detail

/// `Core::template impl<Full>` models the tree-core contract (`TreeCoreModel`).
template <class Core>
inline constexpr bool tree_impl_is_core_v = detail::tree_impl_is_core<Core>();

/// True when `Core` is a tree-core policy tag: a nested `impl<Cs...>` that is a tree core over `Cs...`.
template <class Core>
inline constexpr bool is_tree_core_policy_v = has_tree_impl_v<Core> && tree_impl_is_core_v<Core>;

/// A tree-core policy tag (`RadixTreeCore`, `ReferenceTreeCore`): what a composed type names to pick its tree.
template <class Core>
concept TreeCorePolicy = is_tree_core_policy_v<Core>;

/// Checks a tree-core tag, one rule per `static_assert`, each guarded by the ones before it so a bad tag gets
/// exactly one message. Returns true, so it sits inside a `static_assert`.
template <class Core>
consteval bool check_tree_core_policy() {
    static_assert(has_tree_impl_v<Core>,
                  "unikv: a tree-core policy tag names its tree through a nested `template <class... Cs> using "
                  "impl = ...`; add it (e.g. `using impl = RadixTree<Cs...>`), or pick RadixTreeCore or "
                  "ReferenceTreeCore");
    static_assert(!has_tree_impl_v<Core> || tree_impl_is_core_v<Core>,
                  "unikv: a tree-core policy tag's impl<Full> is not a tree core; make impl<Cs...> name a type "
                  "that models TreeCoreModel (check_tree_core<Core::impl<Full>>() names the missing member), or "
                  "pick RadixTreeCore or ReferenceTreeCore");
    return true;
}

namespace detail {
template <class... Cs>
struct component_list {};

template <class List, bool Add, class C>
struct append_if {
    using type = List;
};
template <class... Cs, class C>
struct append_if<component_list<Cs...>, true, C> {
    using type = component_list<Cs..., C>;
};

// The component policies of a mask, in the order a tree lists them: Full, Swa, Mamba.
template <ComponentMask Mask>
using mask_components_t = typename append_if<
    typename append_if<typename append_if<component_list<>, Mask.has(Component::full), Full>::type,
                       Mask.has(Component::swa), Swa>::type,
    Mask.has(Component::mamba), Mamba>::type;

// What a tag without `impl` gives, so that its one message is the tag check's.
struct not_a_tree_core {};

template <class Core, class List, bool = has_tree_impl_v<Core>>
struct apply_tree_core {
    using type = not_a_tree_core;
};
template <class Core, class... Cs>
struct apply_tree_core<Core, component_list<Cs...>, true> {
    using type = typename Core::template impl<Cs...>;
};

// True unless `Tree` is a tree whose components are not `Mask` (a type that is no tree was already reported).
template <class Tree, ComponentMask Mask>
consteval bool holds_mask() {
    if constexpr (requires { Tree::components::mask; }) {
        return Tree::components::mask == Mask;
    } else {
        return true;
    }
}

}  // namespace detail

/// Rule: given the components of `Mask`, `Core::impl` holds exactly them, so the tree a composed type derives
/// matches its layout's pools. (True for a tag without `impl` or with a non-tree `impl`: those are reported by
/// `check_tree_core_policy`.)
template <class Core, ComponentMask Mask>
inline constexpr bool tree_impl_holds_mask_v =
    detail::holds_mask<typename detail::apply_tree_core<Core, detail::mask_components_t<Mask>>::type, Mask>();

namespace detail {
template <class Core, ComponentMask Mask>
struct tree_core_for {
    static_assert(check_tree_core_policy<Core>());
    static_assert(!is_tree_core_policy_v<Core> || tree_impl_holds_mask_v<Core, Mask>,
                  "unikv: a tree-core policy tag's impl<Cs...> must hold exactly the components it is given, so "
                  "the tree matches the layout's pools; make impl<Cs...> forward Cs... to the tree (e.g. "
                  "`using impl = RadixTree<Cs...>`)");
    using type = typename apply_tree_core<Core, mask_components_t<Mask>>::type;
};
}  // namespace detail

/// The tree of core `Core` over the components of `Mask` (Full, then Swa and Mamba when the mask has them), e.g.
/// `tree_core_t<RadixTreeCore, layout_components_v<L>>`: a composed type derives its tree from its layout, so the
/// two cannot disagree. A mask the tree rejects (no Full, empty) fails with the tree's component-set message.
template <class Core, ComponentMask Mask>
using tree_core_t = typename detail::tree_core_for<Core, Mask>::type;

}  // namespace unikv
