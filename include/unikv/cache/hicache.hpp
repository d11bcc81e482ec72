#pragma once
/// \file
/// `HiCache<Policies>`: the device cache with its host tier, composed from the parts below it: the allocator,
/// the tree, the action executor, the host pools and the transfer controller, side by side (reference §3.4,
/// §4.2, §7, §11). "The tree decides, the cache executes": each call asks the tree, runs the actions through
/// the executor, and makes the copies the actions ask for.
///
/// * Load-back (`load_back`, `start_loading`, `loading_check`): the host match is host-locked and the target
///   device-locked; the device side is allocated by `prepare_load_back` (FULL ids, the SWA reservation of only
///   the missing window rows, the Mamba slot; a pool that falls short is relieved, `relieve`, and retried)
///   and queued as one load. The targets stay owned until the ack: the pending reservation blocks
///   moves until `start_loading` submits it, the host-transfer gate after. At the ack a copy that succeeded is
///   committed to the tree step by step, in plan order; a failed one frees its destinations, so the node stays
///   host-only and no wrong row is served. Either way both locks are released.
/// * Exceptions: a lock the cache takes for one of its calls is held by a guard (`detail::held_lock`) until a
///   record that outlives the call takes it, so a throw inside the call releases it. Acks are marked on their
///   records before any is finished, so a throw while finishing one (a commit, a `drop_host`) loses no other:
///   the next check finishes them. What such a throw leaves is said at each call.
/// * Write-through (`insert`, `start_writing`, `writing_check`), under `WritePolicy::through` / `selective`:
///   the cache sets the tree's `write_through_threshold` from the policy (`HostConfig::write`), so `insert` returns a
///   `write_through` action per component of each node that reached it. Per action: host pages (when short,
///   relieved by host eviction, `relieve_host`; still short: `skip_write_through`, no copy), a device lock of
///   the node (FULL and the component), the D2H queued, then `set_host` commits the host value. The lock is
///   held until the ack: the rows the copy reads cannot be evicted, and since the node keeps its device data
///   `evict_host` cannot take the host copy either (no host lock needed). At the ack the lock goes; a copy that
///   failed is first undone with `drop_host` (its host pages freed, on every part of a node split meanwhile),
///   so no row is served from a host copy that does not hold it, and the device data stays. A load-back never
///   targets such a node: it holds its device data.
/// * Eviction (`evict`): under `WritePolicy::back`, device data without a host copy is backed up before it is dropped:
///   host pages per backup, one D2H queue, submitted and drained (the only blocking call), and only then the
///   tree records the copies (`finish_backup`) and the executor frees the device rows. A backup the host
///   cannot take (no room, or a failed copy) is recorded as none: the tree drops the unbacked data (a FULL
///   leaf's subtree, never a locked node; an SWA window alone, the FULL rows stay). Under the other policies
///   eviction asks for no backups. `evict_host` frees host copies. A host shortfall during a write-back does
///   not evict host data and retry: the tree takes no call (`evict_host` included) while backups are pending,
///   so such a backup is made as "no copy".
/// * One write lane: write-backs and write-throughs share the controller's write queue, told apart by their
///   `HiCacheTag`. A policy does one or the other (`write_policies.hpp`), so the write-back drain of
///   `finish_evict`, run under `WritePolicy::back` only, meets backups alone.
/// * The write policy and the host mode are runtime values of `HostConfig` (`write`, `mode`), checked by the
///   constructor: one `HiCache` type serves every policy.
///
/// Move safety: no member points at another (the controller, the executor and every pending load or write refer
/// to the allocator and the host pools only through call arguments), so a `HiCache` moves with loads and writes
/// in flight and is acknowledged through the moved-to object. The backend lives outside and must outlive the
/// cache. Destruction with transfers in flight is allowed: their locks are released quietly (the tree goes
/// too) and the controller's stream finishes the copies before the memory they touch is freed.
/// Threading: one scheduler thread drives a cache.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <unikv/backend/default_backend.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/cache/action_executor.hpp>
#include <unikv/component.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/host/no_host_tier.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/transfer/host_mode.hpp>
#include <unikv/transfer/load_back.hpp>
#include <unikv/transfer/transfer_controller.hpp>
#include <unikv/transfer/write_policies.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/radix_tree.hpp>
#include <unikv/tree/results.hpp>
#include <unikv/tree/tree_concept.hpp>

namespace unikv {

/// The policies of a `HiCache` over `Layout`, with the defaults: the build's backend, the fast tree core,
/// separate host pools. Derive from it to change one. (The write policy and the host mode are runtime values:
/// `HostConfig::write`, `HostConfig::mode`.)
template <class Layout>
struct DefaultHiCachePolicies {
    using backend = DefaultBackend;        ///< the copy and stream backend
    using layout = Layout;                 ///< the device pools
    using tree_core = RadixTreeCore;       ///< tree core tag; the tree's components come from the layout
    using host_pools = SeparateHostPools;  ///< host-pool policy tag
};

/// What `HiCache::load_back` did.
struct [[nodiscard]] LoadBackStart {
    /// How the call ended.
    enum class Status : std::uint8_t {
        queued,      ///< the load is queued under `id`: `start_loading`, then `loading_check` acknowledges it
        device_hit,  ///< nothing to load: every component serves the node from the device
        short_of_pages,  ///< a pool stayed short once relief freed nothing more (`failure`); everything rolled back
        /// an earlier load still in flight loads SWA rows this one needs (they are bound under the same FULL
        /// pages): nothing was done; acknowledge it (`loading_check`) and match again
        loading,
    };
    Status status = Status::device_hit;
    /// The load's id (`queued` only; ids start at 1).
    std::uint64_t id = 0;
    /// The pool that stayed short (`short_of_pages` only).
    LoadBackShortfall failure{};
    /// True when the load was queued.
    explicit operator bool() const noexcept { return status == Status::queued; }
};

/// One load acknowledged by `HiCache::loading_check`.
struct LoadDone {
    /// The id `load_back` returned.
    std::uint64_t id = 0;
    /// The node loaded.
    NodeRef node{};
    /// True when the copy succeeded and the tree serves the node from the device now; false when it failed:
    /// its destinations were freed and the node is as before the load (host-only where it was).
    bool committed = false;
};

/// What an eviction did (`HiCache::evict`).
struct Eviction {
    /// Device units freed per component (tokens; states for Mamba), backed-up data included.
    per_component<std::int64_t> freed{};
    /// Backups whose copy was made and recorded as the host value.
    std::int32_t backed_up = 0;
    /// Backups recorded as no copy (no host room, or the copy failed): their data was dropped.
    std::int32_t dropped = 0;
};

/// One write-through acknowledged by `HiCache::writing_check`.
struct WriteDone {
    /// The write's id (`CacheInsert::first_write` onwards).
    std::uint64_t id = 0;
    /// The node written (its lower part when it was split meanwhile).
    NodeRef node{};
    /// The component copied.
    Component component = Component::full;
    /// True when the copy succeeded and the node's host copy stands; false when it failed (the host value was
    /// dropped: `drop_host`, its pages freed) or the tree never took it (`set_host` threw): the device data
    /// stays.
    bool committed = false;
};

/// What `HiCache::insert` did.
struct CacheInsert {
    /// The node ending at the key's end: lock it for the request.
    NodeRef node{};
    /// Tokens of the key that were already cached.
    std::int32_t prefix_length = 0;
    /// Write-throughs queued (committed with `set_host`); their ids are `first_write` onwards, one each.
    std::int32_t writes = 0;
    /// Write-throughs skipped: the host had no room even after evicting host data.
    std::int32_t skipped = 0;
    /// The id of the first write queued by this insert (the next id when `writes == 0`).
    std::uint64_t first_write = 0;
};

/// The tag of a `HiCache` transfer on its controller: which kind, and its id within that kind (a load's id, a
/// backup's index in its eviction run, a write-through's id). Write-backs and write-throughs share the write
/// lane, so the kind tells their acks apart.
struct HiCacheTag {
    /// What the transfer is.
    enum class Kind : std::uint8_t { load, write_back, write_through };
    Kind kind = Kind::load;
    std::uint64_t id = 0;
};

/// The device cache with its host tier (see the file comment). `Policies` names `backend`, `layout`,
/// `tree_core` and `host_pools` (`DefaultHiCachePolicies<L>` gives all but the layout). Move-only.
template <class Policies>
class HiCache {
public:
    using backend_type = typename Policies::backend;
    using layout_type = typename Policies::layout;
    using allocator_type = UnifiedAllocator<layout_type, backend_type>;
    using tree_type = tree_core_t<typename Policies::tree_core, layout_components_v<layout_type>>;
    using host_pools_type = typename Policies::host_pools::template impl<backend_type, layout_type>;
    using controller_type = TransferController<backend_type, host_pools_type, HiCacheTag>;
    using stream_ref = typename backend_type::stream_ref;

    static_assert(check_host_pool<typename Policies::host_pools, backend_type, layout_type>());

    /// The backups of one eviction, submitted and not yet recorded (`start_evict`). Move-only; hand it to
    /// `finish_evict`, which must be the next call on the cache (the tree takes no other call meanwhile).
    class [[nodiscard]] WriteBackRun {
    public:
        WriteBackRun(WriteBackRun&&) noexcept = default;
        WriteBackRun& operator=(WriteBackRun&&) noexcept = default;
        /// Copies (D2H) submitted on the transfer stream.
        [[nodiscard]] std::size_t copies() const noexcept { return copies_; }

    private:
        friend class HiCache;
        explicit WriteBackRun(HostActions&& work) noexcept : work_(std::move(work)) {}
        struct Backup {
            NodeRef node{};
            Component component = Component::full;
            std::vector<HostPage> host;  // empty: no copy
        };
        HostActions work_;
        std::vector<Backup> backups_;
        per_component<std::int64_t> freed_{};
        std::size_t copies_ = 0;
    };

    /// An empty cache over `backend` (which must outlive it at its address): the allocator over `arena` with
    /// `stream` as its stream, host pools of `host` on the same stream, a tree of `tree`, a controller with its
    /// own transfer stream. The write policy and the host mode are `host.write` and `host.mode`; the tree's
    /// `write_through_threshold` comes from the policy: leave it 0 (or give the policy's value); another value
    /// throws `logic_error`, naming both. Throws `logic_error`, before anything is built, for a bad policy
    /// (`check_host_writes`), a policy other than `WritePolicy::none` under `NoHostTier`, and
    /// `HostMode::buffer_only` over a layout with Mamba. Throws what the parts throw for a bad configuration
    /// (`logic_error`) or memory (`out_of_memory`).
    HiCache(backend_type& backend, const ArenaConfig& arena, const HostConfig& host, const TreeConfig& tree,
            stream_ref stream);
    /// Moves every part; loads and writes in flight are acknowledged through the moved-to cache.
    HiCache(HiCache&&) noexcept = default;
    HiCache(const HiCache&) = delete;
    HiCache& operator=(const HiCache&) = delete;
    /// Not assignable: the controller refuses an assignment over copies in flight, so build a new cache.
    HiCache& operator=(HiCache&&) = delete;
    /// Releases the locks of the loads and writes still in flight (without committing or undoing anything:
    /// the tree goes with the cache); the controller's stream then finishes their copies.
    ~HiCache();

    // ---- the tree, executed ------------------------------------------------------------------------------
    /// The longest cached prefix of `key`, host hits included under `HostMode::cache` (`best_node` then needs
    /// a `load_back`). Same cost and validity as `match_prefix`.
    MatchResult match(TokenKey key) { return tree_.match_prefix(key, {.host_hits = host_hits_}); }
    /// Caches `key` with the request's `values` (its pages from `allocator()`) and executes the actions
    /// (duplicate pages freed, SWA recoveries). Under a write-through policy it then queues the write-throughs the
    /// tree asks for (see the file comment; `start_writing` submits them), evicting host data for room and
    /// skipping a write the host still cannot take. On an exception the writes not yet queued are skipped; a
    /// write whose copy was queued keeps its lock until its ack, which also frees host pages the tree did not
    /// take. Preconditions: those of `insert`; no eviction run open.
    /// O(key + pages written) plus a host eviction when short; allocates nothing once the write records and
    /// the host-page scratch have grown.
    CacheInsert insert(TokenKey key, const InsertValues& values);
    /// `lock` of the tree (device or host tier).
    [[nodiscard]] LockReceipt lock(NodeRef node, LockOptions options = {}) { return tree_.lock(node, options); }
    /// `unlock` of the tree.
    void unlock(LockReceipt&& receipt) { tree_.unlock(std::move(receipt)); }

    // ---- load-back ---------------------------------------------------------------------------------------
    /// Loads `node` (a host-hit match's `best_node`) back: locks it (host and device tiers), allocates its
    /// plan's destinations, relieving a pool that falls short (`relieve`) while that frees something, queues
    /// one load of every step and keeps the load until its ack. On a shortfall, and on an exception from any
    /// part of it (the plan, an eviction, the queue), everything it allocated is rolled back, both locks are
    /// released and nothing is queued. Precondition (`logic_error`, nothing
    /// changes): `node` alive, every component accepts it in some tier, no eviction run open. O(pages of the
    /// plan); allocates the load's record.
    LoadBackStart load_back(NodeRef node);
    /// `load_back(node)` with the caller's own locks on `node` handed over instead of taking new ones (admission
    /// pins a host hit this way): `host` and `device` lock `node` itself in the host and the device tier, every
    /// component each (`lock(node, {.tier = ...})`). When the load is queued it moves both into its record and
    /// keeps them until its ack; on any other outcome, a throw included, they stay the caller's, unchanged.
    /// Precondition (`logic_error`, nothing changes): those of `load_back(node)`, and the receipts as described.
    LoadBackStart load_back(NodeRef node, LockReceipt& host, LockReceipt& device);
    /// The tree's `load_back_plan(node)`: what a load-back of `node` would copy, without copying anything
    /// (admission counts the FULL rows a load adds from it). Valid until the next call that changes the tree.
    [[nodiscard]] std::span<const LoadBackStep> load_back_plan(NodeRef node) { return tree_.load_back_plan(node); }
    /// Submits every queued load (`TransferController::start_loading`); returns the number submitted.
    std::size_t start_loading() { return ctl_.start_loading(alloc_, host_); }
    /// Acknowledges finished loads, in submission order, never blocking: commits each successful one to the
    /// tree step by step in plan order (FULL with its pages, SWA, Mamba with its slot), frees the destinations
    /// of a failed one, and releases both locks of each. The span is valid until the next `loading_check`.
    /// When a commit throws (memory, a broken tree invariant) the exception propagates after that load's locks
    /// are released: the node is served from device as far as it committed, from the host beyond, and the
    /// destinations it did not commit stay allocated (the tree may hold part of them: nothing is freed
    /// twice). The loads acknowledged after it, and those finished before it, are reported by the next check.
    [[nodiscard]] std::span<const LoadDone> loading_check();
    /// Makes `compute` wait (a stream wait) for layer `layer` of the latest submitted loads.
    void wait_layer(stream_ref compute, std::int32_t layer) const { ctl_.wait_layer(compute, layer); }
    /// Loads queued or submitted and not yet acknowledged.
    [[nodiscard]] std::size_t loads_in_flight() const noexcept { return loads_.size(); }

    // ---- write-through -----------------------------------------------------------------------------------
    /// Submits every queued write (`TransferController::start_writing`); returns the number submitted. Rows a
    /// forward computed: make `controller().stream()` wait the forward's event first. Never blocks.
    std::size_t start_writing() { return ctl_.start_writing(alloc_, host_); }
    /// Acknowledges finished write-throughs in queue order, never blocking (plus those a throw in the last
    /// check left finished but unreported): releases each one's device lock, after `drop_host`
    /// for a failed copy. The span is valid until the next `writing_check`. Precondition (`logic_error`): no
    /// eviction run open (its backups' acks belong to `finish_evict`). O(acks + writes in flight). When a
    /// `drop_host` throws, that write keeps its lock (its host copy must not serve a row) and the next check
    /// finishes it with the writes after it; the writes finished before it are reported then too.
    [[nodiscard]] std::span<const WriteDone> writing_check();
    /// Write-throughs queued or submitted and not yet acknowledged.
    [[nodiscard]] std::size_t writes_in_flight() const noexcept { return writes_.size(); }

    // ---- eviction ----------------------------------------------------------------------------------------
    /// Frees `amount` device units of `component` (tokens; states for Mamba) or all that can go:
    /// `finish_evict(start_evict(component, amount))`. Blocks on the write-back copies (`WritePolicy::back` only).
    Eviction evict(Component component, std::int64_t amount) { return finish_evict(start_evict(component, amount)); }
    /// The first half of `evict`: asks the tree (write-back per the policy), runs the device frees that come
    /// before the first backup, frees the host pages the tree gives up, takes host pages for each backup (none
    /// when the host is short: no copy) and submits the copies, without waiting for them. The rows the
    /// copies read stay allocated until `finish_evict`. Nodes with a
    /// write-through in flight are device-locked, so they are no candidates.
    WriteBackRun start_evict(Component component, std::int64_t amount);
    /// The second half of `evict`: drains the copies (blocks), records each backup with the tree (its host
    /// pages, or none for a failed copy, whose host pages are freed), executes what that frees, then frees the
    /// device rows the backups read (a throw while they are recorded leaves the rest pending in the tree: it is
    /// not recovered). Precondition: `run` is from the previous call on this cache.
    Eviction finish_evict(WriteBackRun&& run);
    /// Frees `amount` host units of `component` or all that can go (`evict_host` of the tree, executed);
    /// returns the host units freed.
    std::int64_t evict_host(Component component, std::int64_t amount);

    // ---- relief: the one way every allocation that fell short makes room ---------------------------------
    /// One round of relief for a device allocation that fell short as `short_of` says (the pool, its pages
    /// missing, why): evicts those pages of that pool; when the pool has nothing evictable and bytes are
    /// missing (`Shortfall::room`: the pools share the arena, and compaction hands freed bytes over), the same
    /// bytes from the first other pool of `pools` that has something to evict. Under write-back it first
    /// evicts host data until the host can take the backups of what it evicts (FULL pages and SWA windows;
    /// states when there is room), so nothing is dropped unbacked where the host could make room. Returns
    /// true when something was freed: the caller retries, and relieves again while it does
    /// (`detail::with_relief`); every round frees something, so the rounds end. The cache's allocations,
    /// load-back and the budgets' reclaim all relieve here. Cold: one eviction (blocking on its backups under
    /// write-back) and one host eviction per round.
    bool relieve(const AllocResult& short_of, ComponentMask pools = ComponentMask::all());
    /// One round of relief for a host allocation that fell short as `short_of` says: evicts its missing pages
    /// of host data (`evict_host`). True when something was freed; false for a `leased` shortfall, which
    /// eviction cannot relieve. Write-through and retraction relieve their host pages here. Cold.
    bool relieve_host(const HostAllocResult& short_of);
    /// Makes demand `d` (pages per pool; Mamba: states) fit in pages that are free now: compacts toward it
    /// (`ensure_capacity`) and, while a pool is short, relieves it (`relieve`, evicting from `pools`), until
    /// it fits or relief frees nothing more; then refused with the short pool's breakdown. What a budget's
    /// `Reclaim` asks before a load-back is queued (reference §6.1, `reclaim_for_prealloc`). Each round frees
    /// something, so it ends; O(rounds * (eviction + compaction)). Cold.
    BudgetCheck reclaim(const CapacityDemand& d, ComponentMask pools);
    /// What a budget reads of the cache now (`CapacityView::of`). O(pools).
    [[nodiscard]] CapacityView capacity() const { return CapacityView::of(alloc_, tree_); }
    /// Tokens per page of `component` (1 for Mamba: a page is a state), the unit the tree counts in.
    [[nodiscard]] std::int32_t page_size(Component component) const noexcept {
        return alloc_.spec()[component].page_size;
    }

    // ---- inspection --------------------------------------------------------------------------------------
    /// Allocator accounting, tree invariants and host-pool checks, one line per broken rule (empty: healthy).
    /// Cold path.
    [[nodiscard]] std::vector<std::string> verify() const;
    /// The allocator: a request allocates its own pages here and translates its rows.
    [[nodiscard]] allocator_type& allocator() noexcept { return alloc_; }
    [[nodiscard]] const allocator_type& allocator() const noexcept { return alloc_; }
    /// The tree, for inspection (`node_info`, sizes).
    [[nodiscard]] const tree_type& tree() const noexcept { return tree_; }
    /// The host pools, for inspection (usage, a lease to read host rows). Allocating or freeing here behind the
    /// cache's back breaks the tree's host accounting.
    [[nodiscard]] host_pools_type& host_pools() noexcept { return host_; }
    /// The transfer controller, for inspection (its stream, what is in flight).
    [[nodiscard]] const controller_type& controller() const noexcept { return ctl_; }
    /// The write policy the cache runs (`HostConfig::write`, checked).
    [[nodiscard]] const HostWrites& writes() const noexcept { return host_writes_; }
    /// The host mode the cache runs (`HostConfig::mode`, checked).
    [[nodiscard]] HostMode host_mode() const noexcept { return host_mode_; }
    /// The transfer controller, for what runs its own transfers beside the cache's (retraction: `retract`,
    /// `restore`, which drain their lane). Queueing here otherwise mixes foreign acks into the cache's.
    [[nodiscard]] controller_type& controller() noexcept { return ctl_; }

private:

    // A step of an ongoing load, kept for its commit (the tree's plan is only valid until its next call).
    struct Step {
        NodeRef node{};
        Component component = Component::full;
        std::int32_t start = 0;          // first token of the node when the load was made
        std::uint32_t full_offset = 0;   // FULL: first of its pages in the destinations
        std::uint32_t under_offset = 0;  // SWA on resident FULL pages: first of them in `swa_under`
        std::uint32_t pages = 0;
        bool resident = false;           // SWA: bound under the node's resident FULL pages (not this load's)
    };
    // One load queued or submitted, until its ack.
    struct Loading {
        std::uint64_t id = 0;
        NodeRef node{};
        LockReceipt device;
        LockReceipt host;
        bool acked = false;      // the controller acknowledged it; `loading_check` finishes it
        bool succeeded = false;  // the copy succeeded (once acked)
        std::vector<Step> steps;
        LoadBackDestinations dest;
        std::vector<VirtualPage> swa_under;  // resident FULL pages SWA rows were bound under (freed on failure)
    };

    // One write-through queued or submitted, until its ack. The host pages need no record: the tree holds them
    // from `set_host`, and `drop_host` hands them back for a failed copy.
    struct Writing {
        std::uint64_t id = 0;
        NodeRef node{};
        Component component = Component::full;
        LockReceipt device;  // FULL and `component`: the rows the copy reads stay put
        bool hosted = false;     // the tree holds the host value (`set_host` returned, or got that far)
        bool acked = false;      // the controller acknowledged it; `finish_writes` finishes it
        bool succeeded = false;  // the copy succeeded (once acked)
        bool dropped = false;    // a failed copy's host value was dropped (`drop_host` returned)
        std::vector<HostPage> orphan{};  // host pages of a `set_host` that threw before the tree took them
    };

    // `host` with its write policy and host mode checked against each other and the policies (see the
    // constructor); throws `logic_error`.
    static const HostConfig& checked(const HostConfig& host);
    static TreeConfig tree_config(TreeConfig tree, const HostWrites& writes);
    // The D2H request of a `backup` or `write_through` action into `host`.
    static TransferRequest d2h(const HostActions& work, const TreeAction& a, std::span<const HostPage> host);
    // Host pages for `out`, relieved (`relieve_host`) while short; false when still short.
    bool host_room(Component component, std::span<HostPage> out);
    // Under write-back: evicts host data until the host can take the backups of evicting `pages` pages of `c`.
    void make_backup_room(Component c, std::int64_t pages);
    // Queues the write-through `a` of `work`, or skips it; true when queued.
    bool write_through(const HostActions& work, const TreeAction& a);
    // Marks the write-throughs among `acks` acknowledged: the oldest unmarked records (one FIFO write lane).
    void mark_writes(std::span<const typename controller_type::ack_type> acks) noexcept;
    // Finishes the acknowledged write-throughs (a prefix of `writes_`), reports them into `write_acked_` and
    // forgets them; a throw leaves the one that threw, and those after it, for the next call.
    void finish_writes();
    // Copies `plan` into `plan_` (spans into the cache's buffers), so evictions during allocation keep it.
    void copy_plan(std::span<const LoadBackStep> plan);
    // Frees the destinations of a failed load (the reservation itself was consumed by the submission).
    void release(Loading& load) noexcept;
    // True when any of `pages` has SWA rows bound although the tree holds their SWA as evicted: only a load in
    // flight binds them so (under resident FULL pages), and it commits them at its ack. O(pages).
    [[nodiscard]] bool swa_bound_by_load(std::span<const VirtualPage> pages);
    // Commits a load whose copy succeeded, against the tree's plan as it is now, and frees what it no longer needs.
    void commit(Loading& load);
    // Executes a tree result that asks for no backup: device frees and host frees.
    template <class Result>
    void run_actions(Result& result);
    void free_host(const HostActions& work);

    HostWrites host_writes_;  // first: checked before any part is built
    HostMode host_mode_ = HostMode::cache;
    HostHits host_hits_ = HostHits::include;  // `match`'s: host copies are matched under `HostMode::cache` only
    allocator_type alloc_;
    host_pools_type host_;
    tree_type tree_;
    ActionExecutor exec_;
    std::vector<Loading> loads_;  // in submission order
    std::vector<LoadDone> done_;  // the acks of the last `loading_check`
    std::vector<LoadDone> load_acked_;  // finished, reported by the next `loading_check`
    std::uint64_t next_load_ = 1;
    std::vector<Writing> writes_;           // in queue order, which is ack order (one FIFO write lane)
    std::vector<WriteDone> write_done_;     // the acks of the last `writing_check`
    std::vector<WriteDone> write_acked_;    // finished by a check that threw, reported by the next one
    std::vector<HostPage> write_host_;      // scratch: a write-through's host pages
    std::uint64_t next_write_ = 1;
    std::size_t open_backups_ = 0;          // copies of the eviction run between `start_evict` and `finish_evict`
    std::vector<LoadBackStep> plan_;                   // scratch: the plan being allocated
    per_component<std::vector<HostPage>> plan_host_;   // scratch: its host pages, per component, plan order
    std::vector<VirtualPage> plan_under_;              // scratch: SWA steps' resident FULL pages
    std::vector<std::uint8_t> taken_;                  // scratch of `commit`: destinations committed
    std::vector<VirtualPage> spare_;                   // scratch of `commit`: destinations to free
    std::vector<PhysicalPage> bound_;                  // scratch of `swa_bound_by_load`
    controller_type ctl_;  // last: destroyed first, so its stream finishes copies into the memory above
};

}  // namespace unikv

#include <unikv/detail/cache/hicache.inl>
