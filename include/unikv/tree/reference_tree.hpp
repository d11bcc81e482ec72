#pragma once
/// \file
/// `ReferenceTree<Components...>`: the deliberately simple twin of `RadixTree`. Same contract, same decisions,
/// none of the speed: children are scanned linearly, sizes and eviction candidates are recomputed from every
/// node on each call, and prefix hashes are recomputed from the path's tokens. Freed slots go on a free list
/// (with a generation bump) only so that long randomized runs stay proportional to the live tree.
/// It exists so the randomized differential test can check `RadixTree` operation by operation against code
/// that is short enough to be read as the specification. Do not use it to serve.
///
/// The rules it implements are written out once, in `docs/tree.md`; `RadixTree`'s header documents each call.

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unikv/detail/tree/load_records.hpp>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/tree/actions.hpp>
#include <unikv/tree/components.hpp>
#include <unikv/tree/events.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/keys.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/results.hpp>
#include <unikv/tree/tree_concept.hpp>

namespace unikv {

/// The simple, obviously correct tree core (see the file comment). Every call is O(nodes) or worse. A moved-from
/// tree holds nothing, like a moved-from `RadixTree`.
template <class... Components>
class ReferenceTree {
    static_assert(check_tree_components<Components...>());

public:
    /// The component set.
    using components = tree_component_set<Components...>;

    /// Builds an empty tree. Precondition: page size >= 1; `swa_window > 0` exactly when `Swa` is a component.
    explicit ReferenceTree(TreeConfig config);
    /// Move-only owner: receipts and node handles stay valid across moves (they name the tree by id).
    ReferenceTree(ReferenceTree&&) noexcept = default;
    /// Move assignment; see the move constructor.
    ReferenceTree& operator=(ReferenceTree&&) noexcept = default;
    ReferenceTree(const ReferenceTree&) = delete;
    ReferenceTree& operator=(const ReferenceTree&) = delete;

    /// The configuration.
    [[nodiscard]] const TreeConfig& config() const noexcept { return config_; }
    /// See `RadixTree::match_prefix`.
    MatchResult match_prefix(TokenKey key, MatchOptions options = {});
    /// See `RadixTree::peek_prefix`.
    [[nodiscard]] PrefixPeek peek_prefix(TokenKey key) const;
    /// See `RadixTree::insert`.
    InsertResult insert(TokenKey key, const InsertValues& values);
    /// See `RadixTree::lock`.
    [[nodiscard]] LockReceipt lock(NodeRef node, LockOptions options = {});
    /// See `RadixTree::unlock`.
    void unlock(LockReceipt&& receipt);
    /// See `RadixTree::release_swa`.
    void release_swa(LockReceipt& receipt);
    /// See `RadixTree::evict`.
    EvictResult evict(Component component, std::int64_t amount, EvictOptions options = {});
    /// See `RadixTree::evict_host`.
    EvictResult evict_host(Component component, std::int64_t amount);
    /// See `RadixTree::set_host`.
    void set_host(NodeRef node, Component component, std::span<const HostPage> host);
    /// See `RadixTree::skip_write_through`.
    void skip_write_through(NodeRef node, Component component);
    /// See `RadixTree::drop_host`.
    EvictResult drop_host(NodeRef node, Component component, HostDrop why = HostDrop::failed);
    /// See `RadixTree::finish_backup`.
    EvictResult finish_backup(NodeRef node, Component component, std::span<const HostPage> host);
    /// See `RadixTree::host_chain_break`.
    [[nodiscard]] HostChainBreak host_chain_break() const noexcept;
    /// See `RadixTree::set_write_through_threshold`.
    void set_write_through_threshold(std::uint32_t threshold) noexcept { config_.write_through_threshold = threshold; }
    /// See `RadixTree::insert_host`.
    HostInsertResult insert_host(TokenKey key, const HostInsertValues& values);
    /// See `RadixTree::commit_load_back`.
    void commit_load_back(NodeRef node, Component component, const LoadedValue& value = {});
    /// See `RadixTree::load_back_plan`.
    [[nodiscard]] std::span<const LoadBackStep> load_back_plan(NodeRef node);
    /// See `RadixTree::begin_load`.
    void begin_load(NodeRef node, std::uint64_t id, const LoadedValue& dest, std::span<const LoadBackStep> plan = {});
    /// See `RadixTree::finish_load`.
    template <class MoveSwa>
    [[nodiscard]] LoadLeftovers finish_load(std::uint64_t id, bool copied, MoveSwa&& move_swa);
    /// See `RadixTree::loads_in_flight`.
    [[nodiscard]] std::size_t loads_in_flight() const noexcept { return loads_.size(); }
    /// See `RadixTree::prefix_pages`.
    std::size_t prefix_pages(NodeRef node, std::span<VirtualPage> out) const;
    /// See `RadixTree::set_retention`.
    void set_retention(NodeRef node, std::uint8_t retention);
    /// See `RadixTree::evictable_size`.
    [[nodiscard]] std::int64_t evictable_size(Component component) const {
        return sum_device(component, LockState::unlocked);
    }
    /// See `RadixTree::protected_size`.
    [[nodiscard]] std::int64_t protected_size(Component component) const {
        return sum_device(component, LockState::locked);
    }
    /// See `RadixTree::host_size`.
    [[nodiscard]] std::int64_t host_size(Component component) const;
    /// See `RadixTree::take_events`.
    [[nodiscard]] std::vector<KvEvent> take_events() { return std::exchange(events_, {}); }
    /// See `RadixTree::node_info`.
    [[nodiscard]] NodeInfo node_info(NodeRef node) const;
    /// See `RadixTree::node_count`.
    [[nodiscard]] std::size_t node_count() const;
    /// See `RadixTree::nodes`.
    [[nodiscard]] std::vector<NodeRef> nodes() const;
    /// See `RadixTree::contains`.
    [[nodiscard]] bool contains(NodeRef node) const noexcept {
        return node.index() < nodes_.size() && nodes_[node.index()].alive &&
               nodes_[node.index()].generation == node.generation();
    }
    /// See `RadixTree::verify`. This tree caches almost nothing, so it checks only its links, lengths and the
    /// pending-backup count; the differential test checks the rest against `RadixTree`.
    [[nodiscard]] std::vector<std::string> verify() const;

private:
    using Id = std::uint32_t;
    static constexpr Id root = 0;

    // Whether a node's SWA rows are bound (new or adopted nodes).
    enum class SwaRows : std::uint8_t { tombstone, live };
    // Which device units a size sums.
    enum class LockState : std::uint8_t { unlocked, locked };

    struct Node {
        bool alive = true;
        std::uint32_t generation = 0;
        Id parent = 0;
        std::vector<Id> children;
        KeyNamespace ns{};
        std::int32_t start = 0;
        std::vector<TokenId> tokens;
        std::vector<VirtualPage> pages;                        // FULL device pages; empty = none
        bool swa = false;                                      // SWA rows bound to `pages`
        StateId state{};                                       // Mamba device state
        per_component<std::vector<HostPage>> host;             // host copies (Mamba: 0 or 1 page)
        per_component<bool> pending{};
        per_component<bool> write_pending{};  // a write_through was emitted, not committed or skipped yet
        // Full, Swa: this node's pending write or host copy and its parent's are one value cut by a split.
        per_component<bool> joined{};
        per_component<bool> stored{};  // Full, Swa: the storage tier holds it (`HostDrop::stored`)
        std::uint32_t hits = 0;  // inserts over the node (saturating)
        per_component<std::uint32_t> locks{};
        per_component<std::uint32_t> host_locks{};
        per_component<std::uint64_t> stamp{};
        std::uint8_t retention = 0;
        std::uint8_t window_class = 0;  // orders SWA eviction after `retention`

        [[nodiscard]] std::int32_t length() const { return static_cast<std::int32_t>(tokens.size()); }
        [[nodiscard]] std::int32_t end() const { return start + length(); }
    };

    // ---- plain predicates: each is the definition of the rule it names ----
    [[nodiscard]] bool in_set(Component c) const { return components::mask.has(c); }
    [[nodiscard]] static bool has_device(const Node& n, Component c) {
        return c == Component::full ? !n.pages.empty() : c == Component::swa ? n.swa : n.state.is_valid();
    }
    [[nodiscard]] static bool has_host(const Node& n, Component c) { return !n.host[c].empty(); }
    [[nodiscard]] bool keeps(const Node& n, Component c) const {
        return has_device(n, c) || has_host(n, c) || n.pending[c];
    }
    [[nodiscard]] bool dead(const Node& n) const {
        for (Component c : all_components)
            if (in_set(c) && !keeps(n, c)) return true;
        return false;
    }
    [[nodiscard]] bool holds_nothing(const Node& n) const {
        for (Component c : all_components)
            if (keeps(n, c)) return false;
        return true;
    }
    [[nodiscard]] static bool device_unlocked(const Node& n) {
        return n.locks[Component::full] == 0 && n.locks[Component::swa] == 0 && n.locks[Component::mamba] == 0;
    }
    [[nodiscard]] static bool no_pending(const Node& n) {
        return !n.pending[Component::full] && !n.pending[Component::swa] && !n.pending[Component::mamba];
    }
    // No host lock and no copy in flight (a backup, or a write-through not committed or skipped): a copy's record
    // names its node, so no clean-up deletes it.
    [[nodiscard]] static bool host_clear(const Node& n) {
        return n.host_locks[Component::full] == 0 && n.host_locks[Component::swa] == 0 &&
               n.host_locks[Component::mamba] == 0 && no_pending(n) && !n.write_pending[Component::full] &&
               !n.write_pending[Component::swa] && !n.write_pending[Component::mamba];
    }
    [[nodiscard]] bool device_leaf(const Node& n) const {
        return std::none_of(n.children.begin(), n.children.end(),
                            [&](Id c) { return !nodes_[c].pages.empty(); });
    }
    [[nodiscard]] bool device_candidate(Id id, Component c) const {
        const Node& n = nodes_[id];
        if (id == root || !n.alive || !has_device(n, c) || !no_pending(n)) return false;
        for (Component w : all_components)
            if (n.write_pending[w]) return false;  // set_host needs the rows
        if (c == Component::full) return device_leaf(n) && device_unlocked(n);
        return n.locks[c] == 0;
    }
    [[nodiscard]] bool host_candidate(Id id, Component c) const {
        const Node& n = nodes_[id];
        if (id == root || !n.alive || !has_host(n, c) || has_device(n, c)) return false;
        if (c == Component::full) return n.children.empty() && host_clear(n) && device_unlocked(n);
        return n.host_locks[c] == 0;
    }
    [[nodiscard]] std::int64_t units(const Node& n, Component c) const {
        return c == Component::mamba ? 1 : n.length();
    }
    [[nodiscard]] std::int64_t sum_device(Component component, LockState state) const;

    // ---- structure ----
    [[nodiscard]] NodeRef ref(Id id) const { return NodeRef{id, nodes_[id].generation}; }
    void expect_live() const;
    Id fresh_slot();
    [[nodiscard]] Id id_of(NodeRef node, const char* what) const;
    [[nodiscard]] std::optional<Id> find_child(Id parent, KeyNamespace ns, std::span<const TokenId> page) const;
    Id add_node(Id parent, KeyNamespace ns, std::int32_t start, std::span<const TokenId> tokens,
                std::span<const VirtualPage> pages, SwaRows swa);
    Id split(Id id, std::int32_t at);
    void remove_node(Id id, detail::ActionsBuilder& out, EvictResult& result);
    void unlink(Id id);
    void collect(Id id, detail::ActionsBuilder& out, EvictResult& result);
    void collect_empty(Id id);
    [[nodiscard]] std::optional<Id> unreachable_top(Id id) const;
    void drop_below(Id id, detail::ActionsBuilder& out, EvictResult& result);
    [[nodiscard]] std::vector<Id> path_to(Id id) const;
    void refresh(Id target);

    // ---- insert steps ----
    struct InsertState {
        TokenKey key;
        const InsertValues& values;
        detail::ActionsBuilder out;
    };
    Id overlap(Id id, InsertState& st);
    void adopt(Id id, std::span<const VirtualPage> pages, SwaRows swa);
    void recover_swa(Id id, std::span<const VirtualPage> incoming, detail::ActionsBuilder& out);
    void count_hits(const std::vector<Id>& path, std::int32_t end, detail::ActionsBuilder& out);
    [[nodiscard]] std::vector<Id> parts(Id id, Component c) const;
    void forget_host(Id id, Component c);
    Id add_leaves(Id parent, std::int32_t from, InsertState& st);

    // ---- eviction steps ----
    [[nodiscard]] std::optional<Id> oldest(Tier tier, Component c) const;
    void evict_node_data(Id id, detail::ActionsBuilder& out, EvictResult& result);
    [[nodiscard]] std::optional<Id> window_split(Id id);
    void backup(Id id, Component c, detail::ActionsBuilder& out);
    void evict_whole(Id id, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result);
    void drop_without_backup(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result);
    void drop_device(Id id, Component c, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result);
    void drop_host(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result);

    // ---- locks ----
    [[nodiscard]] std::vector<Id> swa_segment(Id anchor, std::int32_t start) const;
    void check_receipt(const LockReceipt& r, ComponentMask parts) const;
    void apply_release(const LockReceipt& r, ComponentMask parts);

    // ---- events ----
    [[nodiscard]] std::uint64_t prefix_hash(Id id, std::int32_t upto) const;
    void emit(EventKind kind, Component c, Tier tier, Id id);

    TreeConfig config_;
    std::uint64_t tree_id_ = detail::next_tree_id();
    std::vector<Node> nodes_;
    std::vector<Id> free_;
    std::vector<KvEvent> events_;
    std::vector<std::span<const VirtualPage>> match_runs_;  // MatchResult::device_pages
    std::vector<LoadBackStep> plan_;                        // load_back_plan's result
    detail::tree::LoadRecords loads_;                       // loads between begin_load and finish_load
    std::uint64_t clock_ = 0;
    std::int64_t pending_backups_ = 0;
    bool beside_host_ = false;  // the running insert's `InsertResult::beside_host`
};

}  // namespace unikv

#include <unikv/detail/tree/reference_tree_core.inl>
#include <unikv/detail/tree/reference_tree_match_insert.inl>
#include <unikv/detail/tree/reference_tree_evict_lock.inl>

namespace unikv {

/// The reference tree core as a policy tag (for differential tests; not for serving): `impl<Cs...>` is
/// `ReferenceTree<Cs...>`. A composed type takes the tag and derives its tree from the layout's components with
/// `tree_core_t<ReferenceTreeCore, Mask>`.
struct ReferenceTreeCore {
    /// The tree over components `Cs...` (`Full` first, then any of `Swa`, `Mamba`).
    template <class... Cs>
    using impl = ReferenceTree<Cs...>;
};

static_assert(check_tree_core_policy<ReferenceTreeCore>());
static_assert(is_tree_core_v<ReferenceTree<Full>>);
static_assert(is_tree_core_v<ReferenceTree<Full, Swa>>);
static_assert(is_tree_core_v<ReferenceTree<Full, Mamba>>);
static_assert(is_tree_core_v<ReferenceTree<Full, Swa, Mamba>>);
}  // namespace unikv
