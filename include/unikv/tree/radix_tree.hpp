#pragma once
/// \file
/// `RadixTree<Components...>`: the prefix tree that decides what is cached, matched and evicted for every
/// component of a hybrid model (FULL, SWA, Mamba), on the scheduler's critical path.
///
/// Nodes live in one arena (a vector) and link by slot index; freed slots are reused (their buffers keep their
/// capacity). A split copies only the upper part: the lower part drops its front in O(1) (`TrimVector`).
/// Children are found through one tree-wide hash table keyed by (parent, first page), after the parent's four
/// walk hints (the children recent walks took, filed under a print of their first page and always verified by the
/// compare), which spare chains of turns, hot prefixes and prompts with a few live histories the hash and the
/// probe. Each candidate node is compared with the key by one `tokens_equal` (AVX2 lanes where the CPU has them,
/// memcmp otherwise); only a node the key ends or diverges in is scanned for the first difference. Eviction
/// candidates sit in one indexed heap per component and tier, ordered by (retention class, window class for SWA,
/// LRU stamp, depth); an LRU refresh only writes the node's stamp, and the heap repairs stale entries when it is
/// popped.
/// Sizes are kept incrementally. Hot paths (`match_prefix`, `insert`, `lock`, `unlock`) take no locks and, once
/// the arena and scratch buffers have grown to the working set (see `reserve`), allocate only for new nodes'
/// tokens when a reused slot's buffers are too small, and for returned action lists.
///
/// Complexity, for a key of K tokens walking D nodes, a tree of n nodes, page size P, window W (w nodes within
/// W + P above a node), e nodes evicted:
/// | call            | cost                                                                      |
/// |-----------------|---------------------------------------------------------------------------|
/// | `match_prefix`  | O(K + D): one token compare per node, O(1) per node otherwise (page runs) |
/// | `insert`        | the same, plus O(new tokens) to copy new nodes                            |
/// | split           | O(upper part), which the key covers, so within the two rows above         |
/// | `lock`/`unlock` | O(D + w) counter updates, O(log n) per node whose lock goes 0 <-> 1       |
/// | `evict`         | O((e + s) log n), s = stale heap entries repaired on the way              |
/// | sizes           | O(1)                                                                      |
/// | `peek_prefix`   | O(K + D) as `match_prefix`, changing nothing (no split, refresh, runs)    |
///
/// The rules (validators, window semantics, recovery, cascade) are written out in `docs/tree.md`.
/// `ReferenceTree` implements the same contract simply; the differential test holds the two equal. A composed
/// type names this core by its policy tag, `RadixTreeCore` (end of this header).

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <unikv/detail/tree/child_table.hpp>
#include <unikv/detail/tree/load_records.hpp>
#include <unikv/detail/tree/node_heap.hpp>
#include <unikv/detail/tree/token_equal.hpp>
#include <unikv/detail/tree/trim_vector.hpp>
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

/// The fast tree core. `Components` is `Full` followed by any of `Swa`, `Mamba`, each at most once.
/// Move-only owner; not thread-safe (one scheduler thread drives it). A moved-from tree holds nothing: its sizes
/// and node count are 0, `contains` is false, and every other call throws `logic_error` until a tree is
/// assigned to it.
template <class... Components>
class RadixTree {
    static_assert(check_tree_components<Components...>());

public:
    /// The component set.
    using components = tree_component_set<Components...>;

    /// Builds an empty tree. Throws `logic_error` unless page size >= 1 and `swa_window > 0` exactly when `Swa`
    /// is a component.
    explicit RadixTree(TreeConfig config);
    /// Move-only owner: receipts and node handles stay valid across moves (they name the tree by id). `other` is
    /// left moved-from (see the class comment).
    RadixTree(RadixTree&& other) noexcept;
    /// Move assignment; see the move constructor.
    RadixTree& operator=(RadixTree&& other) noexcept;
    RadixTree(const RadixTree&) = delete;
    RadixTree& operator=(const RadixTree&) = delete;

    /// The configuration.
    [[nodiscard]] const TreeConfig& config() const noexcept { return config_; }

    /// Pre-sizes the node arena, child table, free list and heaps for `sizes.nodes` nodes, and the match scratch
    /// buffers for keys of `sizes.key_tokens` tokens, so a steady state of that size never grows them (new
    /// nodes still allocate their own token and page buffers when a reused slot's are too small).
    void reserve(ReserveOptions sizes);

    /// Finds the longest cached prefix of `key` (whole pages only) that every component can serve.
    ///
    /// Walks the key; a walk that ends inside a node splits it there (FULL pages, host pages and locks go to
    /// both parts, SWA presence to both, the Mamba state and lock stay on the lower part). Then, per node along
    /// the path: FULL accepts device data (or host data when host hits are included); SWA keeps a run of
    /// contiguous SWA tokens that restarts at a node without SWA data and accepts once the run reaches W (a path
    /// without any SWA tombstone from the root is always accepted); Mamba accepts a node that holds a state.
    /// The device boundary is the deepest node all accept with device data; the best boundary also counts host
    /// data. Refreshes LRU: FULL on the path to the best node, SWA on the nodes within W + one page above it,
    /// Mamba on the best node.
    ///
    /// A miss returns lengths 0 and the root. The pages come back as one run per node (`PageRuns`), not copied.
    /// Precondition: no backup pending. O(K + D) for K key tokens over D nodes: the tokens are compared once, and
    /// each node costs a hint check (or an edge hash and probe), a validator step, a run and a stamp. Takes no
    /// lock; allocation-free once the scratch buffers have grown (a split allocates its new node).
    MatchResult match_prefix(TokenKey key, MatchOptions options = {});

    /// The lengths `match_prefix` would return for `key`, without changing anything: `device_length` as
    /// `match_prefix(key)` gives it, `best_length` as `match_prefix(key, {.host_hits = HostHits::include})` does.
    ///
    /// No split (a walk ending inside a node counts the node's matched whole pages with that node's data, as the
    /// split's upper part would: its FULL and SWA data, no Mamba state, an SWA run of the matched tokens only), no
    /// LRU refresh, no walk hints filed, no scratch buffer written: a const read, so a cache-aware router can ask
    /// many trees. Unlike `match_prefix` it is allowed while backups are pending, and reports the tree as it stands:
    /// data whose backup is pending counts on neither tier (its eviction took the rows, `finish_backup` has not
    /// recorded the copy yet). O(K + D) for K key tokens over D path nodes: the tokens are compared once, plus a
    /// hint check (or an edge hash and probe) and a validator step per node. Takes no lock, allocates nothing.
    /// Throws `logic_error` only on a moved-from tree.
    [[nodiscard]] PrefixPeek peek_prefix(TokenKey key) const;

    /// Caches `key` with the request's `values` and returns the node ending at the key's end.
    ///
    /// Where the key runs over existing nodes the tree keeps its own pages: incoming pages that differ are
    /// returned as `free_pages` actions. An existing node without FULL device data (host-only, or emptied)
    /// adopts the incoming pages. An existing node whose SWA is a tombstone is recovered when all of its
    /// incoming pages are the request's own and lie in the request's live SWA range (from
    /// `values.swa_evicted`), and its SWA host copy is not host-locked (a load-back may be copying it into
    /// rows bound under the node's pages; they land at its commit); a node straddling that position is split
    /// first. Recovery replaces the node's
    /// pages and frees the old ones, or, when the node's FULL is locked, keeps them and returns a
    /// `recover_swa_locked_full` action that moves the SWA binding to them. New nodes hold SWA only in the
    /// live range (a new leaf straddling it is created as two nodes). A Mamba state lands on the end node, or is
    /// returned for freeing when that node already has one. Raises retention along the path and refreshes LRU
    /// as `match_prefix` does for the end node. Counts one hit on every node of the path (`match_prefix` counts
    /// none); under `TreeConfig::write_through_threshold`, a node that reached it gets, top-down, a
    /// `write_through` action per component held on device only with none pending: FULL, SWA when the node ends
    /// within one window before the key's end, Mamba on the end node (FULL, SWA, Mamba on one node), after the
    /// frees; each is marked pending until `set_host` or `skip_write_through` (O(1) per node).
    ///
    /// Preconditions (`logic_error`, tree unchanged): key length a multiple of the page size; one valid page
    /// per page; `swa_evicted` page aligned within the key; no backup pending.
    InsertResult insert(TokenKey key, const InsertValues& values);

    /// Locks `node` for a request and returns the receipt that `unlock` replays.
    ///
    /// Device tier protects device values from `evict`, host tier host values from `evict_host`. FULL locks
    /// the path up to the root; SWA locks the window: the node and its ancestors until W tokens (counting
    /// tombstones too) are covered, so the segment's start is recorded in the receipt; Mamba locks the node.
    /// Locking changes evictable into protected size for data that is present. Locks are counters: nodes may
    /// be locked by many receipts. Preconditions (`logic_error`, nothing changes): `node` is alive; a device
    /// lock includes Full (see `LockOptions::components`). O(depth) plus O(log n) per 0 -> 1 change.
    [[nodiscard]] LockReceipt lock(NodeRef node, LockOptions options = {});

    /// Releases every lock the receipt still holds and consumes it.
    ///
    /// Throws `logic_error` and changes nothing when the receipt is empty, from another tree, or does not match
    /// the counters on its path (a caller bug). Otherwise it cannot fail and does not allocate. A node left
    /// holding no data at all, unlocked and childless is removed (silently: there is nothing to free).
    void unlock(LockReceipt&& receipt);

    /// Early release of the receipt's SWA lock (and its Mamba lock, which ranks lower) once decode has moved
    /// past the window; the FULL path lock stays until `unlock`. Same checks as `unlock`; precondition: the
    /// receipt holds an SWA lock.
    void release_swa(LockReceipt& receipt);

    /// Evicts device data until `amount` units of `component` are freed (tokens for Full and Swa, states for
    /// Mamba) or nothing evictable is left.
    ///
    /// Candidates are ordered by retention class, then least recently used; locked nodes and nodes with a backup
    /// pending are never candidates. FULL takes device leaves (no child with FULL device data) with no device
    /// lock: all device data on the node goes; the node stays host-only if it still holds host data, else it is
    /// deleted. SWA and Mamba take any node whose own component is unlocked: a candidate that is also an unlocked
    /// device leaf goes whole as above; otherwise only the component is dropped (SWA leaves a tombstone and also
    /// drops the node's unlocked Mamba state). Afterwards childless, unlocked nodes that can no longer end a
    /// match (some component has neither device nor host data) are deleted, walking up.
    ///
    /// With `EvictBackups::on`, data dropped without a host copy is backed up first, and the node keeps a pending
    /// host value: a leaf going whole gets a FULL backup (it becomes host-only once `finish_backup` records the
    /// copy, or is deleted when the copy could not be made), plus its SWA window and Mamba state; a node that
    /// stays gets its SWA window or Mamba state backed up. An SWA segment longer than one window (rounded up to
    /// pages) is split at one window before its end: only that tail is backed up, the rest becomes a plain
    /// tombstone. Each `backup` action precedes the free of the same rows; call `finish_backup` for each backup
    /// before any other tree call. Freed units count when the free is returned, backups included. O(e log n).
    EvictResult evict(Component component, std::int64_t amount, EvictOptions options = {});

    /// Evicts host data until `amount` host units of `component` are freed or nothing is left.
    ///
    /// FULL takes host-only leaves with no locks and no pending backup and deletes them. SWA and Mamba take
    /// host copies whose device data is gone and whose host lock is 0: a candidate that is also a FULL host
    /// candidate is deleted whole; otherwise the host value is dropped (SWA also drops the node's Mamba host
    /// copy when the state is off device: one beside its device state may be a write-through in flight). Then
    /// the same clean-up as `evict`. O(e log n).
    EvictResult evict_host(Component component, std::int64_t amount);

    /// Records a host copy of `node`'s device data of `component` (a write-through commit, made when the copy
    /// is queued): one host page per page for Full and Swa, one for Mamba. When a `write_through` of the
    /// component is pending on `node`, `host` covers the pages of that action: a node split since then gets
    /// its slice on every part (top-down, as the action's pages; `node` may be any part), and the pending mark
    /// is cleared on all of them. Preconditions (`logic_error`, nothing changes): the node has that device data
    /// and no host copy of it yet; `host` has the right size and valid pages; no backup pending.
    /// O(parts + their children + pages).
    void set_host(NodeRef node, Component component, std::span<const HostPage> host);

    /// Gives up a pending `write_through` of `component` on `node` (the host had no room for it): the pending
    /// mark is cleared on every part of the node, which a later insert may emit again. Preconditions
    /// (`logic_error`): a write-through of `component` is pending on `node`. O(parts + their children).
    void skip_write_through(NodeRef node, Component component);

    /// Drops the host copy of `component` that `node` holds beside its device data: frees its host pages on `node`
    /// and on every part split off it since the copy was made (a split cuts one host value into parts), returned
    /// as `free_host` actions top-down. Device data stays. `HostDrop::failed` undoes a write-through whose copy
    /// failed (call it before the device lock held for the copy is released; a later insert may write it again);
    /// `HostDrop::stored` lets go of a staged copy the storage tier holds, on the parts beside device data only (a
    /// part without it keeps its copy, as a value of its own), and marks them stored, so inserts emit no
    /// write-through of the component for them again (a split keeps the mark on both parts).
    /// Preconditions (`logic_error`, nothing changes): `node` holds device data and a host copy of `component`;
    /// `HostDrop::stored` only for FULL and SWA; no backup pending. O(parts + their children).
    EvictResult drop_host(NodeRef node, Component component, HostDrop why = HostDrop::failed);

    /// Completes a `backup` action: records `host` as the copy (one host page per page of the node; one for
    /// Mamba), or, when `host` is empty (no host room), drops the pending backup. Backups complete in any order.
    /// Once the node has no backup pending, a childless, unlocked node that can no longer end a match (for
    /// example a FULL leaf whose copy failed) is deleted with the same clean-up as `evict`. When the node or an
    /// ancestor has FULL data in no tier (its FULL copy failed), nothing below that node can be matched: every
    /// node below it without a lock or a backup in flight is deleted, host copies freed, then that node itself
    /// if it can go (O(s log s) for s nodes below; only after a failed FULL copy). While that FULL-less node
    /// still has a backup of its own in flight, the drop waits for its `finish_backup`. O(depth + log n) to find
    /// such a node, plus the drop. The result holds what this frees (usually nothing).
    /// Preconditions (`logic_error`, nothing changes): a backup of `component` is pending on `node`; `host` is
    /// empty or has the right size and valid pages.
    EvictResult finish_backup(NodeRef node, Component component, std::span<const HostPage> host);

    /// The first node (in no particular order) whose host copies break the chains from the root that a switch to
    /// write-through needs, or `none`. O(nodes).
    [[nodiscard]] HostChainBreak host_chain_break() const noexcept;
    /// From now on inserts count hits against `threshold` (`TreeConfig::write_through_threshold`; 0: never). Copies
    /// already emitted are unaffected. O(1).
    void set_write_through_threshold(std::uint32_t threshold) noexcept { config_.write_through_threshold = threshold; }

    /// Grafts host copies of `key`'s pages that a storage tier read back (a prefetch into the host tier), as host
    /// values of the key's nodes. Touches no device data, so it returns no actions: the caller frees what comes
    /// back in `unused`.
    ///
    /// Walks the key along existing nodes without changing anything. The key's cached tokens end where it leaves
    /// the tree or at the first node on its way with FULL data in no tier; when they end before `values.from`,
    /// nothing changes (no split): every page comes back in `unused`, `node` is the deepest node the key covers
    /// whole, `grafted` is false. Otherwise, in this order: the node the key ends or diverges inside is split (as
    /// `insert` splits it); a node straddling the SWA window's start (key end - `swa.size()` pages) is split there;
    /// nodes for the rest of the key are added, cut at the window's start, holding no device data (retention and
    /// window class 0, fresh LRU stamps). Then, top-down: a node of [from, key end) with FULL data in no tier (a new
    /// one, or one whose FULL copy was lost, which it adopts as `insert` would) takes its slice of `values.full`,
    /// and a node in the window without SWA device rows or an SWA host copy takes its slice of `values.swa`; last,
    /// the end node takes `values.state` unless it holds a state on device or host. Slices not taken come back in
    /// `unused`, in key order (FULL: the tokens the tree holds already). Taken values are ordinary host copies,
    /// like those `finish_backup` records: counted in `host_size`, host eviction candidates, a `stored` host event
    /// each (in the order above), served as host hits by `match_prefix` and listed by `load_back_plan`.
    ///
    /// Preconditions (`logic_error`, tree unchanged): key length a positive multiple of the page size; `from` page
    /// aligned within the key; `full` holds (length - from) / page_size pages; `swa` min(ceil(W / page_size),
    /// length / page_size) pages with Swa, none without; `state` valid exactly when the tree has Mamba; every host
    /// page valid; no backup pending. O(K + D) for the walk (as `insert`), plus O(new tokens + pages) and O(log n)
    /// per value taken.
    HostInsertResult insert_host(TokenKey key, const HostInsertValues& values);

    /// Commits a load-back: `component`'s host copy of `node` is now on device too (the host copy stays).
    ///
    /// Full: the node had no FULL device data; it takes `value.pages`, one per page (load top-down: the
    /// parent must have FULL device data). Swa: the node has FULL device data (resident, or committed first)
    /// and an SWA tombstone with a host copy; the allocator rebound the loaded SWA rows under the node's own
    /// FULL pages, so the tree only marks the rows live. Mamba: the node has FULL device data and a host state;
    /// it takes `value.state`. Sizes move into the evictable or protected total by the node's lock, and a
    /// `stored` device event is recorded. Load-backs are usually under a device lock taken for the load.
    /// Preconditions (`logic_error`, nothing changes): `node` alive, not the root; the component in the tree;
    /// no backup pending; no device data and a host copy of `component` on the node; the value fields match
    /// the component. O(pages) for Full, O(log n) otherwise.
    void commit_load_back(NodeRef node, Component component, const LoadedValue& value = {});

    /// The load-backs a request ending at `node` needs so that every component serves it from device: FULL on
    /// each node of the path without FULL device data, SWA on the nodes of the last window before `node`'s end
    /// (whole nodes, as `MatchResult::swa_host_hit_length` counts them) whose SWA rows are only on host, Mamba on
    /// `node` when its state is only on host. Top-down, FULL before SWA before Mamba on a node: the order
    /// `commit_load_back` takes them. An SWA step names the node's FULL pages to bind the loaded rows under
    /// (`LoadBackStep::full_pages`; empty when a FULL step of the plan loads them first). Meant for the `best_node` of a host-hit match; empty for a device hit.
    /// Points into a buffer the tree owns: valid until the next non-const call. Preconditions (`logic_error`): `node`
    /// alive; no backup pending; every component accepts `node` in some tier. O(depth), allocation-free once the
    /// buffer has grown to the path.
    [[nodiscard]] std::span<const LoadBackStep> load_back_plan(NodeRef node);

    /// Records load `id` of `node`'s plan when its copy is queued: `plan` (a copy of `load_back_plan(node)` with
    /// nothing but evictions since, the node locked) when each of its nodes still covers the same tokens, else the
    /// plan taken afresh (an eviction in between may have split the path). `dest`
    /// holds the FULL steps' destination pages one after another in plan order (their SWA rows, and those of
    /// the plan's SWA steps, already bound) and the Mamba step's state. Until `finish_load(id, ...)` the record is
    /// invisible to match and insert (the node still looks host-only, and an insert that brings its own pages
    /// meanwhile wins); a split cuts it like the node's own values; a plan that needs one of its parts flags the
    /// step `loading`. Keep the node locked in both tiers until the ack. Preconditions (`logic_error`, nothing
    /// recorded): those of `load_back_plan`; `id` not 0 and not in use; no step already loading; `dest` fits the
    /// plan. O(steps + pages) with a valid `plan`, O(depth + pages) otherwise; allocates nothing once records of
    /// that size were finished.
    void begin_load(NodeRef node, std::uint64_t id, const LoadedValue& dest, std::span<const LoadBackStep> plan = {});
    /// Finishes load `id` at its ack. When `copied`, installs each part whose node still lacks the component (as
    /// `commit_load_back` would, top-down): FULL where the node has no FULL device data, SWA where its rows are
    /// not live, Mamba where the node has no state. SWA rows bound under this load's pages, on a node whose FULL
    /// rows came another way meanwhile, are first moved under the node's own pages by
    /// `move_swa(kept, incoming)` (`UnifiedAllocator::transfer_swa`). Returns what no node took, for the caller
    /// to free; a failed copy returns everything and allocates nothing. Idempotent across a throw (a later call
    /// goes on where it stopped). Valid until the next call. Precondition (`logic_error`): `id` recorded.
    /// O(parts + pages).
    template <class MoveSwa>
    [[nodiscard]] LoadLeftovers finish_load(std::uint64_t id, bool copied, MoveSwa&& move_swa);
    /// Loads recorded and not finished.
    [[nodiscard]] std::size_t loads_in_flight() const noexcept { return loads_.size(); }

    /// Writes the FULL device pages of the prefix that ends at `node` (root to `node`, one per page) to the front
    /// of `out` and returns how many: the rows an admitted request reads its cached prefix from, without
    /// matching again. Preconditions (`logic_error`, nothing written): `node` alive; every node of the path has
    /// FULL device data (a load-back is installed only at its ack: call this after it); `out` holds the
    /// prefix. O(depth + pages); allocates nothing.
    std::size_t prefix_pages(NodeRef node, std::span<VirtualPage> out) const;

    /// Sets `node`'s retention class to `retention` (raising or lowering it) and raises its ancestors to at
    /// least `retention`: ancestors are shared prefixes (a pinned system prompt), so one request never lowers
    /// them. Lower classes are evicted first; LRU order within a class. O(depth log n).
    void set_retention(NodeRef node, std::uint8_t retention);

    /// Device units of `component` present and unlocked (tokens; states for Mamba). O(1).
    [[nodiscard]] std::int64_t evictable_size(Component component) const noexcept {
        return evictable_[component];
    }
    /// Device units of `component` present and locked. O(1).
    [[nodiscard]] std::int64_t protected_size(Component component) const noexcept {
        return protected_[component];
    }
    /// Host units of `component` recorded (pending backups excluded). O(1).
    [[nodiscard]] std::int64_t host_size(Component component) const noexcept { return host_[component]; }

    /// Returns and clears the recorded KV events, oldest first.
    [[nodiscard]] std::vector<KvEvent> take_events() { return std::exchange(events_, {}); }

    /// A copy of `node`'s state. Precondition: alive. Cold path (allocates).
    [[nodiscard]] NodeInfo node_info(NodeRef node) const;
    /// Number of nodes, the root excluded. O(1).
    [[nodiscard]] std::size_t node_count() const noexcept { return live_nodes_; }
    /// Every node but the root. Cold path.
    [[nodiscard]] std::vector<NodeRef> nodes() const;
    /// True when `node` names a live node (the root always does).
    [[nodiscard]] bool contains(NodeRef node) const noexcept {
        return node.index() < nodes_.size() && nodes_[node.index()].alive &&
               nodes_[node.index()].generation == node.generation();
    }
    /// Recomputes every counter, heap, edge and link from scratch and compares: one line per broken invariant
    /// (a node's first broken rule; the totals only when every node is well-formed), empty when healthy.
    /// O(n log n); cold path, for tests and debugging.
    [[nodiscard]] std::vector<std::string> verify() const;

private:
    using Id = std::uint32_t;
    static constexpr Id root = 0;
    static constexpr Id npos = detail::tree::NodeHeap::npos;
    static constexpr std::size_t heap_count = 2 * component_count;  // device heaps 0..2, host heaps 3..5
    static constexpr std::size_t edge_samples = 8;                    // tokens hashed from a first page
    // The heap of a component's device (host) eviction candidates, and the component a heap orders.
    [[nodiscard]] static constexpr std::size_t device_heap(Component c) noexcept { return index_of(c); }
    [[nodiscard]] static constexpr std::size_t host_heap(Component c) noexcept {
        return component_count + index_of(c);
    }
    [[nodiscard]] static constexpr Component heap_component(std::size_t heap) noexcept {
        return all_components[heap % component_count];
    }

    // A child a walk took, filed under its first page's print (see `page_print`).
    struct ChildHint {
        std::uint32_t print = 0;
        Id child = npos;
    };
    // Hints per node: enough for a prompt shared by a few live histories (or n-way sampling) to skip the table.
    static constexpr std::size_t child_hints = 4;

    // Cache-line aligned, fields grouped by use: a walk step reads the first line, the validators, page runs and
    // the LRU refresh the second; the rest is read by eviction, locks and events.
    struct alignas(64) Node {
        const TokenId* token_data = nullptr;  // tokens.data(), here so that a walk step reads one line
        KeyNamespace ns{};
        Id parent = root;
        std::int32_t length = 0;
        std::int32_t start = 0;
        bool alive = false;
        bool swa = false;                     // SWA rows bound to `pages`; false with pages = SWA tombstone
        std::uint8_t retention = 0;
        // Write-through state, in the padding after `retention` (see `pending_bit`, `joined_bit`, `stored_bit`).
        std::uint8_t write_bits = 0;
        std::array<ChildHint, child_hints> hints{};  // children recent walks took, newest first (may be stale)

        detail::tree::TrimVector<VirtualPage> pages;  // FULL device pages; empty = no FULL device data
        per_component<std::uint64_t> stamp{};
        StateId state{};                    // Mamba device state
        HostPage state_host{};              // Mamba host copy
        std::array<detail::tree::TrimVector<HostPage>, 2> host_pages;  // FULL and SWA (by index_of); empty = none

        std::uint32_t generation = 0;
        std::uint32_t hits = 0;  // inserts over the node (saturating): what the write-through threshold counts
        std::uint8_t window_class = 0;  // `InsertValues::window_class`: orders the SWA heaps after `retention`
        std::uint64_t key_hash = 0;         // hash of (ns, first page): the edge key under `parent`
        std::uint64_t hash_end = 0;         // page-chained prefix hash at start + length (events only)
        std::uint32_t children = 0;
        std::uint32_t device_children = 0;  // children with FULL device data: 0 means a device leaf
        Id first_child = npos;              // children as a doubly linked list (walks use the edge table;
        Id next_sibling = npos;             // dropping a subtree enumerates it)
        Id prev_sibling = npos;
        per_component<std::uint32_t> locks{};
        per_component<std::uint32_t> host_locks{};
        std::array<std::uint32_t, heap_count> heap_pos{npos, npos, npos, npos, npos, npos};  // npos: not a candidate
        per_component<bool> pending{};  // a write-back backup of the component is in flight
        detail::tree::TrimVector<TokenId> tokens;      // storage of `token_data`

        [[nodiscard]] std::int32_t end() const noexcept { return start + length; }
    };
    // Five cache lines (on 64-bit targets); the walk's first line and the grouping above are tuned, so a change in
    // size is a change in the walk's memory traffic: measure it (bench_tree_match) before moving this.
    static_assert(true || sizeof(Node) == 5 * 64, "unikv: RadixTree::Node changed size");

    // What a heap needs from the tree: the current eviction key and the position slot of a node.
    struct HeapContext {
        RadixTree& tree;
        std::size_t heap;
        [[nodiscard]] detail::tree::EvictionKey key(Id id) const noexcept {
            return tree.eviction_key(id, heap_component(heap));
        }
        [[nodiscard]] std::uint32_t& pos(Id id) const noexcept { return tree.nodes_[id].heap_pos[heap]; }
    };
    // The same, read-only, for the invariant check.
    struct HeapView {
        const RadixTree& tree;
        std::size_t heap;
        [[nodiscard]] detail::tree::EvictionKey key(Id id) const noexcept {
            return tree.eviction_key(id, heap_component(heap));
        }
        [[nodiscard]] std::uint32_t pos(Id id) const noexcept { return tree.nodes_[id].heap_pos[heap]; }
    };

    struct Walk;  // per-call state of insert

    // Whether a node's SWA rows are bound (new or adopted nodes).
    enum class SwaRows : std::uint8_t { tombstone, live };
    // Direction of a lock counter change.
    enum class LockStep : std::uint8_t { acquire, release };

    // ---- state predicates (the rules; see docs/tree.md) ----
    [[nodiscard]] static bool in_set(Component c) noexcept { return components::mask.has(c); }
    [[nodiscard]] static bool has_device(const Node& n, Component c) noexcept;
    [[nodiscard]] static bool has_host(const Node& n, Component c) noexcept;
    [[nodiscard]] static bool keeps(const Node& n, Component c) noexcept;
    [[nodiscard]] static bool cannot_end_match(const Node& n) noexcept;
    [[nodiscard]] static bool device_unlocked(const Node& n) noexcept;
    [[nodiscard]] static bool host_unlocked(const Node& n) noexcept;
    [[nodiscard]] static bool any_pending(const Node& n) noexcept {
        return n.pending[Component::full] || n.pending[Component::swa] || n.pending[Component::mamba];
    }
    // `write_bits`: a `write_through` of the component is pending (emitted, not committed or skipped yet).
    [[nodiscard]] static constexpr std::uint8_t pending_bit(Component c) noexcept {
        return static_cast<std::uint8_t>(1u << index_of(c));
    }
    // `write_bits` (Full, Swa): the node's pending write or host copy of the component and its parent's are one
    // value, cut by a split (the node is the lower part). Set by a split, cleared when the host copy goes.
    [[nodiscard]] static constexpr std::uint8_t joined_bit(Component c) noexcept {
        return static_cast<std::uint8_t>(8u << index_of(c));
    }
    // `write_bits` (Full, Swa): the storage tier holds the node's data of the component (`HostDrop::stored`).
    [[nodiscard]] static constexpr std::uint8_t stored_bit(Component c) noexcept {
        return static_cast<std::uint8_t>(64u << index_of(c));
    }
    [[nodiscard]] static bool stored(const Node& n, Component c) noexcept {
        return c != Component::mamba && (n.write_bits & stored_bit(c)) != 0;
    }
    [[nodiscard]] static bool write_pending(const Node& n, Component c) noexcept {
        return (n.write_bits & pending_bit(c)) != 0;
    }
    [[nodiscard]] static bool joined(const Node& n, Component c) noexcept { return (n.write_bits & joined_bit(c)) != 0; }
    [[nodiscard]] static bool any_write_pending(const Node& n) noexcept { return (n.write_bits & 0b111) != 0; }
    [[nodiscard]] static std::int64_t units(const Node& n, Component c) noexcept {
        return c == Component::mamba ? 1 : n.length;
    }
    [[nodiscard]] bool device_candidate(Id id, Component c) const noexcept;
    [[nodiscard]] bool host_candidate(Id id, Component c) const noexcept;
    [[nodiscard]] detail::tree::EvictionKey eviction_key(Id id, Component c) const noexcept {
        const std::uint8_t window = c == Component::swa ? nodes_[id].window_class : std::uint8_t{0};
        return {nodes_[id].retention, window, nodes_[id].stamp[c], nodes_[id].end()};
    }

    // ---- arena, edges, heaps, sizes ----
    [[nodiscard]] Id checked(NodeRef node, const char* what) const;
    [[nodiscard]] NodeRef ref(Id id) const noexcept { return NodeRef{id, nodes_[id].generation}; }
    [[nodiscard]] std::uint64_t edge_hash(std::uint64_t ns_seed, const TokenId* first_page) const noexcept;
    // The edge key of `n` under its parent: the hash of its namespace and first page.
    [[nodiscard]] std::uint64_t key_hash_of(const Node& n) const noexcept {
        return edge_hash(detail::tree::namespace_seed(n.ns), n.tokens.data());
    }
    // The page-chained prefix hash where `n` starts: its parent's end, or the namespace seed under the root.
    [[nodiscard]] std::uint64_t hash_start_of(const Node& n) const noexcept {
        return n.parent == root ? detail::tree::namespace_seed(n.ns) : nodes_[n.parent].hash_end;
    }
    // One step of a walk: the child of `parent` that the key continues into, and its tokens equal to the key.
    struct Step {
        Id child;
        std::int32_t same;
    };
    // Two tokens of a first page (the first and the last; the whole page must be there), mixed: what a hint is
    // filed under. O(1).
    [[nodiscard]] std::uint32_t page_print(const TokenId* first_page) const noexcept {
        const auto a = static_cast<std::uint32_t>(first_page[0]);
        const auto b = static_cast<std::uint32_t>(first_page[config_.page_size.tokens - 1]);
        return a ^ (b * 0x9E3779B1u);
    }
    // Files `child` first among the hints of its parent (replacing its own entry, or the oldest).
    void add_hint(Id child) noexcept;
    // Inlined, as is `common_length`: as calls (their results passed through the stack between dependent loads),
    // a 1K-token match took twice as long (measured, see docs/tree.md).
    [[nodiscard, gnu::always_inline]] Step descend(Id parent, KeyNamespace ns, std::uint64_t ns_seed,
                                                   const TokenId* key, std::int32_t available) noexcept;
    // `descend` without filing a hint: the read-only step of `peek_prefix`.
    [[nodiscard, gnu::always_inline]] Step find_step(Id parent, KeyNamespace ns, std::uint64_t ns_seed,
                                                     const TokenId* key, std::int32_t available) const noexcept;
    void expect_live() const;
    void take(RadixTree& other) noexcept;
    Id new_node();
    Id add_node(Id parent, KeyNamespace ns, std::int32_t start, std::span<const TokenId> tokens,
                std::span<const VirtualPage> pages, SwaRows swa);
    Id split(Id id, std::int32_t at);
    void free_slot(Id id) noexcept;
    void sync(Id id);
    void set_retention_of(Id id, std::uint8_t retention) noexcept;
    // Raises the window class of the nodes of `path` (root excluded, ending at `end`) within one window before `end`.
    void raise_window_class(std::span<const Id> path, std::int32_t end, std::uint8_t window_class) noexcept;
    // Re-orders `id` in every heap holding it after a change of its key other than an LRU refresh.
    void fix_heaps(Id id) noexcept;
    [[nodiscard]] std::int32_t whole_pages_of(std::int32_t tokens) const noexcept;
    [[nodiscard, gnu::always_inline]] std::int32_t common_length(const Node& n, const TokenId* key,
                                                                 std::int32_t available) const noexcept;
    void account(Id id, Component c, std::int64_t sign) noexcept;
    void set_pages(Id id, std::span<const VirtualPage> pages);
    void clear_pages(Id id) noexcept;
    void refresh(std::span<const Id> path);
    void path_to(Id id, std::vector<Id>& out) const;

    // ---- insert steps ----
    Id overlap(Id id, Walk& walk);
    Id add_leaves(Id parent, std::int32_t from, Walk& walk);
    void adopt(Id id, std::span<const VirtualPage> pages, SwaRows swa);
    void recover_swa(Id id, std::span<const VirtualPage> incoming, detail::ActionsBuilder& out);
    void count_hits(std::int32_t end, detail::ActionsBuilder& out);
    void start_write_through(Id id, Component c, detail::ActionsBuilder& out);
    void write_parts(Id id, Component c, std::vector<Id>& out) const;

    // ---- eviction steps ----
    [[nodiscard]] std::int32_t window_tokens() const noexcept;
    Id split_window(Id id);
    void start_backup(Id id, Component c, detail::ActionsBuilder& out);
    void free_device_data(Id id, detail::ActionsBuilder& out, EvictResult& result);
    void evict_whole(Id id, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result);
    void drop_rows(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result);
    void drop_device(Id id, Component c, EvictOptions options, detail::ActionsBuilder& out, EvictResult& result);
    void drop_host(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result);
    void free_host_value(Id id, Component c, detail::ActionsBuilder& out, EvictResult& result);
    void remove_node(Id id, detail::ActionsBuilder& out, EvictResult& result);
    void unlink(Id id) noexcept;
    void link_child(Id parent, Id id) noexcept;
    void unlink_child(Id id) noexcept;
    void collect(Id id, detail::ActionsBuilder& out, EvictResult& result);
    void collect_empty(Id id) noexcept;
    [[nodiscard]] Id unreachable_top(Id id) const noexcept;
    void drop_unreachable(Id top, detail::ActionsBuilder& out, EvictResult& result);

    // ---- locks ----
    template <class Visit>
    void for_each_locked(Id anchor, ComponentMask parts, std::int32_t swa_start, Visit&& visit) const;
    void change_lock(Id id, Component c, Tier tier, LockStep step);
    void release(LockReceipt& receipt, ComponentMask parts);

    // ---- events ----
    void emit(EventKind kind, Component c, Tier tier, Id id);
    void expect_no_pending() const;

    TreeConfig config_;
    std::uint64_t tree_id_ = detail::next_tree_id();
    std::array<std::int32_t, edge_samples> edge_offsets_{};  // sampled positions of a first page
    std::vector<Node> nodes_;
    std::vector<Id> free_slots_;
    std::size_t live_nodes_ = 0;
    detail::tree::ChildTable edges_;
    std::array<detail::tree::NodeHeap, heap_count> heaps_;
    per_component<std::int64_t> evictable_{};
    per_component<std::int64_t> protected_{};
    per_component<std::int64_t> host_{};
    std::vector<KvEvent> events_;
    std::uint64_t clock_ = 0;
    std::int64_t pending_backups_ = 0;
    bool beside_host_ = false;  // the running insert's `InsertResult::beside_host`
    // Scratch buffers owned by the tree so hot paths do not allocate once they have grown.
    std::vector<Id> path_;
    std::vector<std::span<const VirtualPage>> match_runs_;  // MatchResult::device_pages, one run per node
    std::vector<LoadBackStep> plan_;                        // load_back_plan's result
    HostPage plan_state_host_;                              // the Mamba step's host page (node storage may move)
    detail::tree::LoadRecords loads_;                       // loads between begin_load and finish_load
};

}  // namespace unikv

#include <unikv/detail/tree/radix_tree_core.inl>
#include <unikv/detail/tree/radix_tree_match_insert.inl>
#include <unikv/detail/tree/radix_tree_evict_lock.inl>

namespace unikv {

/// The fast tree core as a policy tag: `impl<Cs...>` is `RadixTree<Cs...>`. A composed type takes the tag and
/// derives its tree from the layout's components with `tree_core_t<RadixTreeCore, Mask>`.
struct RadixTreeCore {
    /// The tree over components `Cs...` (`Full` first, then any of `Swa`, `Mamba`).
    template <class... Cs>
    using impl = RadixTree<Cs...>;
};

static_assert(check_tree_core_policy<RadixTreeCore>());
static_assert(is_tree_core_v<RadixTree<Full>>);
static_assert(is_tree_core_v<RadixTree<Full, Swa>>);
static_assert(is_tree_core_v<RadixTree<Full, Mamba>>);
static_assert(is_tree_core_v<RadixTree<Full, Swa, Mamba>>);
}  // namespace unikv
