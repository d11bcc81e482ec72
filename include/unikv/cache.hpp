#pragma once
/// \file
/// `Cache<Policies>`: the one type an engine includes, composed from a policy bundle (ARCHITECTURE.md §2, §3):
///
/// ```cpp
/// struct GemmaPolicies : unikv::DefaultCachePolicies {
///     using layout = unikv::presets::Gemma3_27B::layout;
///     using budget = unikv::SharedSWABudget;
/// };
/// using GemmaCache = unikv::Cache<GemmaPolicies>;
/// GemmaCache cache(backend, {.arena = arena, .host = {.total_bytes = 32 << 30,
///                                                    .write = {.policy = unikv::WritePolicy::through}}}, stream);
/// ```
///
/// The bundle names the backend, layout, tree core, budget, host pools and storage; `DefaultCachePolicies`
/// gives all but the layout. A bad bundle is one compile error with one `unikv:` message naming the fix
/// (`cache/compatibility.hpp`). The write policy and the host mode are runtime values (`HostConfig::write`,
/// `HostConfig::mode`), so one cache type runs every policy; the constructor refuses a bad one
/// (`logic_error`, naming the fix).
///
/// One class: the cache owns its parts side by side (the allocator, the tree, the action executor, the host
/// pools, the transfer controller, the budget; reference §3.4, §4.2, §7, §11) and every rule that ties them
/// together. "The tree decides, the cache executes": each call asks the tree, runs the actions through the
/// executor, and makes the copies the actions ask for. Everything but the budget lives in its base
/// `detail::cache::CacheCore`, keyed on the policies it uses (backend, layout, tree core, host pools,
/// storage), so bundles that differ only in their budget share one instantiation of it; an engine names only
/// `Cache`. Its definitions are split by concern: `detail/cache/requests.inl` (construction, the tree,
/// requests' rows and allocation, inspection), `transfers.inl` (load-back, write-through, eviction with
/// write-back, retraction), `relief.inl` (the one relief path).
///
/// Rules the cache keeps:
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
/// * Buffer-only host (`HostMode::buffer_only`, `storage.inl`): a write-through's host copy goes to the store at
///   its ack, the put holding the write's device lock until the store answers; then the copy is let go of
///   (`drop_host`, marked stored when every object landed, so it is not written again); while its write or put is in
///   flight nothing else lets go of it. A load's ack lets go of the staged copies it read, and an insert of the
///   ones a request computed beside them (`InsertResult::beside_host`): they came from the store.
///   Matching includes them: they are the only host hits.
/// * One write lane: write-backs and write-throughs share the controller's write queue, told apart by their
///   `CacheTag`. A policy does one or the other (`write_policies.hpp`), so the write-back drain of
///   `finish_evict`, run under `WritePolicy::back` only, meets backups alone.
/// * The write policy and the host mode are runtime values of `HostConfig` (`write`, `mode`), checked by the
///   constructor: one cache type serves every policy.
///
/// * Admission (`begin_step`, `try_admit`, `prepare_load_back`): the budget holds no pointer; it reads the
///   cache's `capacity()` view and returns what the cache should do (`cache/admission.hpp`).
/// * A request's rows (`prefix_rows`, `alloc_rows`, `finish`): the bookkeeping every engine repeats between
///   admission and insert (the prefix's rows from the match, a tail page that the tree cannot take).
/// Every hot call (match, insert, lock, allocation without shortfall, translation, waits) inlines straight
/// through to the allocator and the tree: no virtual call, no `std::function`.
///
/// Move safety: no member points at another (the controller, the executor and every pending load or write refer
/// to the allocator and the host pools only through call arguments), so a cache moves with loads and writes
/// in flight and is acknowledged through the moved-to object. The backend lives outside and must outlive the
/// cache. Destruction with transfers in flight is allowed: their locks are released quietly (the tree goes
/// too) and the controller's stream finishes the copies before the memory they touch is freed.
/// Threading: one scheduler thread drives a cache.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/backend/default_backend.hpp>
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/budget/capacity_view.hpp>
#include <unikv/budget/refusal.hpp>
#include <unikv/cache/action_executor.hpp>
#include <unikv/cache/admission.hpp>
#include <unikv/cache/compatibility.hpp>
#include <unikv/cache/retention.hpp>
#include <unikv/cache/sequence.hpp>
#include <unikv/cache/storage_values.hpp>
#include <unikv/cache/values.hpp>
#include <unikv/component.hpp>
#include <unikv/detail/cache/storage_link.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/host/no_host_tier.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/reservation.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/storage/no_storage.hpp>
#include <unikv/transfer/host_mode.hpp>
#include <unikv/transfer/load_back.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/transfer/transfer_controller.hpp>
#include <unikv/transfer/write_policies.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/radix_tree.hpp>
#include <unikv/tree/results.hpp>
#include <unikv/tree/tree_concept.hpp>

namespace unikv {

/// The defaults of a cache bundle, all but the layout: the build's backend, the fast tree core, the one-pool
/// budget, separate host pools, no storage tier. Derive from it and add `using layout = ...`. (Write-back and
/// the host tier as a cache are the runtime defaults of `HostConfig`.)
struct DefaultCachePolicies {
    using backend = DefaultBackend;        ///< the copy and stream backend (`HostBackend`, or `CudaBackend` under nvcc)
    using tree_core = RadixTreeCore;       ///< a tree-core tag (the tree follows the layout) or an explicit tree
    using budget = BaseBudget;             ///< admission budget (`SharedSWABudget` for Full+Swa over one arena)
    using host_pools = SeparateHostPools;  ///< host-pool policy tag; `NoHostTier` for a device-only cache
    using storage = NoStorage;             ///< the tier below the host
};

namespace detail::cache {

// The tag of an explicit tree (`tree_core = RadixTree<Full, Swa>`), so the cache core takes it like any tag.
template <class Tree>
struct fixed_tree_core {
    template <class... Cs>
    using impl = Tree;
};

// A number per cache, so a `Sequence` knows which cache it runs in across moves of that cache.
inline std::uint64_t next_cache_id() noexcept {
    static std::atomic<std::uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

template <class T>
using tree_core_tag_t = std::conditional_t<is_explicit_tree_v<T>, fixed_tree_core<T>, T>;

// The policies a `CacheCore` uses: a cache bundle without its budget.
template <class Backend, class Layout, class TreeCore, class HostPools, class Storage>
struct core_policies {
    using backend = Backend;
    using layout = Layout;
    using tree_core = TreeCore;
    using host_pools = HostPools;
    using storage = Storage;
};

/// Everything of `Cache` but its budget (see the file comment): an engine names `Cache`, whose base this is.
/// `P` names `backend`, `layout`, `tree_core` (a tag), `host_pools` and `storage`. Move-only.
template <class P>
class CacheCore {
public:
    using backend_type = typename P::backend;
    using layout_type = typename P::layout;
    using allocator_type = UnifiedAllocator<layout_type, backend_type>;
    using tree_type = tree_core_t<typename P::tree_core, layout_components_v<layout_type>>;
    using host_pools_type = typename P::host_pools::template impl<backend_type, layout_type>;
    using controller_type = TransferController<backend_type, host_pools_type, CacheTag>;
    using stream_ref = typename backend_type::stream_ref;
    /// The layout's pools.
    static constexpr bool has_swa = allocator_type::has_swa;
    static constexpr bool has_mamba = allocator_type::has_mamba;
    /// `backup` and `restore` compile (a host tier, no Mamba).
    static constexpr bool can_retract = cache_retracts_v<P>;
    /// The bundle's storage policy: `NoStorage`, or the type of the store a cache attaches (`attach_storage`).
    using storage_type = typename P::storage;
    /// A store can be attached below the host tier (`storage_type` is a storage backend).
    static constexpr bool has_storage = is_storage_backend_v<storage_type>;

    static_assert(check_host_pool<typename P::host_pools, backend_type, layout_type>());

    /// The backups of one eviction, submitted and not yet recorded (`start_evict`). Move-only; hand it to
    /// `finish_evict`, which must be the next call on the cache (the tree takes no other call meanwhile; only the
    /// read-only `peek` may come between).
    class [[nodiscard]] WriteBackRun {
    public:
        WriteBackRun(WriteBackRun&&) noexcept = default;
        WriteBackRun& operator=(WriteBackRun&&) noexcept = default;
        /// Copies (D2H) submitted on the transfer stream.
        [[nodiscard]] std::size_t copies() const noexcept { return copies_; }

    private:
        friend class CacheCore;
        explicit WriteBackRun(HostActions&& work) noexcept : work_(std::move(work)) {}
        HostActions work_;  // its backups are the cache's write-back tickets
        per_component<std::int64_t> pages_freed_{};
        std::size_t copies_ = 0;
    };

    /// An empty cache over `backend` (which must outlive it at its address), its allocator's work on `stream`:
    /// the arena, host pools and tree of `config` (the tree's page size and window are the arena's, its
    /// `write_through_threshold` the write policy's), a controller with its own transfer stream. Throws
    /// `logic_error`, before anything is built, for a write policy or host mode the bundle cannot run: a bad
    /// `HostWrites` (`check_host_writes`), a policy other than `WritePolicy::none` under `NoHostTier`,
    /// `HostMode::buffer_only` over a layout with Mamba or without a storage tier. Throws what the parts throw
    /// for a bad configuration (`logic_error`, naming what to change) or for memory (`out_of_memory`).
    CacheCore(backend_type& backend, const CacheConfig& config, stream_ref stream);
    /// Moves every part; loads and writes in flight are acknowledged through the moved-to cache.
    CacheCore(CacheCore&&) noexcept = default;
    CacheCore(const CacheCore&) = delete;
    CacheCore& operator=(const CacheCore&) = delete;
    /// Not assignable: the controller refuses an assignment over copies in flight, so build a new cache.
    CacheCore& operator=(CacheCore&&) = delete;
    /// Releases the locks of the loads and writes still in flight (without committing or undoing anything:
    /// the tree goes with the cache); the controller's stream then finishes their copies.
    ~CacheCore();

    // ---- the tree, executed ------------------------------------------------------------------------------
    /// The longest cached prefix of `key`, host hits included (`best_node` then needs a `load_back`; under
    /// `HostMode::buffer_only` the host holds staged copies only: prefetched ones on their way to the device, and
    /// copies on their way to the store). Same cost and validity as `match_prefix`.
    MatchResult match(TokenKey key) { return tree_.match_prefix(key, {.host_hits = HostHits::include}); }
    /// How much of `key` this cache holds, for a cache-aware router asking several caches: the `device_length`
    /// and `best_length` that `match` would return (host hits counted), read by the tree's `peek_prefix`. Changes
    /// nothing: no split, no LRU refresh, no lock taken, nothing allocated. Allowed wherever `match` is, and inside
    /// an open eviction run too (`start_evict` .. `finish_evict`), where data whose backup is pending counts on
    /// neither tier until `finish_evict` records its copy. O(K + D) for K key tokens over D path nodes.
    [[nodiscard]] PrefixPeek peek(TokenKey key) const { return tree_.peek_prefix(key); }
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

    // ---- a request's rows (hot; the engine's side of admission and finish) --------------------------------
    /// Writes the virtual tokens of the cached prefix that ends at `node` (an admission's `node`, locked by its
    /// `lock`: `Admission::prefix_length` tokens) into the front of `out`: the tree's rows the request reads,
    /// from the admission's one match, without matching again (`tree().prefix_pages`). A loaded-back prefix
    /// must be acknowledged first (`loading_check`). Throws `logic_error` (nothing written) when `out` is shorter
    /// than the prefix or the device does not serve all of it. O(depth + prefix tokens), no allocation once
    /// its page scratch has grown.
    void prefix_rows(NodeRef node, std::span<VirtualToken> out);
    /// Allocates one request's rows `[from, rows.size())` after its rows `[0, from)` (the prefix, earlier
    /// chunks), writing them into `rows`: `alloc_extend` of a batch of one, with its relief. Success with
    /// nothing to do when `from == rows.size()`. Throws `logic_error` for `from` outside `[0, rows.size()]`. Cost
    /// as `alloc_extend`.
    AllocResult alloc_rows(std::span<VirtualToken> rows, std::int32_t from);
    /// Finishes a request whose rows are `rows` (token `i` of `tokens` at `rows[i]`; prefix rows included):
    /// its whole pages go to the tree under their tokens (`insert`, duplicates freed), the partial tail page
    /// is freed, `options.state` goes to the tree when the rows end on a page boundary and is freed otherwise
    /// (a state past the key's end serves no prefix), then `lock` (the request's, e.g. `Admission::lock`; empty:
    /// none) is released. `options.swa_evicted` is capped at the whole pages. Returns what the insert did. Throws
    /// `logic_error` (nothing changed) when `tokens` is shorter than `rows` or names rows not allocated; an
    /// exception from `insert` propagates with the tail and the lock still the caller's (the whole pages and
    /// the state are the tree's once it took them). O(rows / page size + key) plus the
    /// insert's; allocates nothing once its page scratch has grown.
    CacheInsert finish(TokenKey tokens, std::span<const VirtualToken> rows, LockReceipt&& lock,
                       const FinishOptions& options = {});

    // ---- requests as handles (`Sequence`, cache/sequence.hpp; admission: `Cache::admit`) ------------------
    /// The virtual rows of `seq`, one per token `[0, length())`: translate them for the forward
    /// (`translate_full`, `translate_swa`), which writes every pool's row of each token it computes (the SWA
    /// rows of a cached page serve later matches, whatever window this request needs). After an admission that loaded the prefix back, the first call reads
    /// the prefix's rows from the tree (and, with Mamba, queues the copy of the prefix's state into the
    /// request's), so call it after `loading_check` acknowledged that load. Throws `logic_error` (nothing
    /// changed) for a handle not running in this cache or whose load is not acknowledged, and `transfer_error`
    /// when that load failed (release the handle and admit it again). O(1); the first read after a load
    /// O(depth + prefix). The span is valid until the next call on the handle.
    std::span<const VirtualToken> rows(Sequence& seq);
    /// One decode step for each handle of `batch`: each handle's SWA window slides first (its own pages whose
    /// rows all lie before the window of the new row's query, before `length() - window_tokens()`, are
    /// tombstoned with one `free_swa` for the batch; pages of the tree's prefix are never touched), then token
    /// `next[i]` (the one the last forward sampled) gets the row at `batch[i]->length()` (one `alloc_decode`,
    /// relieved as it is). On a shortfall no row is added (the windows stay slid: those rows are never read
    /// again) and the result names the short pool: retract a handle (`retract`) and decode again. A handle's
    /// first decode, before its window slides, caches what the retention policies keep of its prompt
    /// (`CacheConfig::retention`: its prefix at its branch point, at its sparse points and at its prompt's last
    /// whole page, as `checkpoint` does; a write-through failure there throws, the handle's prefix then the
    /// tree's rows it cached). Throws `logic_error` (nothing changed) for a handle not running in this cache,
    /// prefilling, with a load not read (`rows`), at its `max_new_tokens`, or named twice, and for `next` of
    /// another size. O(batch) plus the pages tombstoned (and a handle's first decode, its inserts); allocates
    /// nothing once its scratch reached the batch size (`admit` reserved the handles' room), but for a first
    /// decode's inserts.
    AllocResult decode(std::span<Sequence* const> batch, std::span<const TokenId> next);
    /// Caches `seq`'s whole pages so far (a prefill chunk, a prompt's end) while it keeps running: its SWA window
    /// slides first (as in `decode`), then `insert` of its tokens and whole pages, its lock moved to the node returned, the prefix rows read again (the tree
    /// keeps its own page where it already cached the tokens, and frees the request's duplicate). With Mamba the
    /// node gets a state: on a page boundary a copy of the running state (a fresh slot, copied on the compute
    /// stream, after the forward that computed it; a chunk's running state itself, since `extend` starts the
    /// next chunk from a copy of the checkpoint), otherwise `state_at_pages` when given (a slot the engine
    /// allocated, `alloc_state`, holding the state after the last whole page; the cache takes it, and frees it
    /// when nothing is inserted). Before it, each point the retention policies keep below the last whole page
    /// (a branch point) is cached with its window the same way, and each insert carries its window class
    /// (`RetainPoints::class_at`). Nothing to cache (no whole page past the prefix): returns the current node.
    /// The rows are computed from then on (`compute_from() == length()`). Throws `logic_error` as `rows`
    /// (nothing changed). O(length / page + key) plus the insert's.
    CacheInsert checkpoint(Sequence& seq, StateId state_at_pages = {});
    /// Preempts `seq`: where the cache can (`can_retract`, a decoding handle) its own rows are backed up to host
    /// (`backup`); then its own pages and state are freed and its lock released, and it waits `retracted` for
    /// `Cache::restore`. True when backed up; false when `restore` will recompute its rows (no host room, a
    /// failed copy, a Mamba layout, a handle still prefilling or with no own row known computed, a prefix still
    /// loading). The rows not known computed (`compute_from()` on) are computed again after a restore, so the
    /// backup keeps the SWA window of the first of them. Throws `logic_error` (nothing changed) for a handle not
    /// running in this cache. On a device the copies read
    /// the rows after what the transfer stream waited for: make it wait the forward first. Cold: the backup's
    /// copies.
    bool retract(Sequence& seq);
    /// Finishes `seq`, whose rows are all computed: its SWA window slides (as in `decode`), its whole pages go
    /// to the tree (`finish` above, its SWA cursor and state with them: to cache a state at the last whole page
    /// of a sequence that does not end on one, `checkpoint` it with `state_at_pages` first), its partial tail
    /// page is freed, its lock released; the handle becomes `idle` (and may be admitted again, keeping its
    /// capacity). Throws `logic_error` (nothing changed) for a handle not running in this cache (a second
    /// finish included) or whose prefix is still loading, `transfer_error` as `rows`. Cost as `finish`.
    CacheInsert finish(Sequence& seq, std::uint8_t retention = 0);
    /// Drops `seq` without caching anything (an aborted request): its own pages and state are freed, its lock
    /// released, a retraction backup discarded; the handle becomes `idle`. Throws `logic_error` for a handle
    /// idle or of another cache. O(own pages).
    void release(Sequence& seq);

    // ---- running requests (hot) --------------------------------------------------------------------------
    /// Allocates the extensions of `batch` (`UnifiedAllocator::alloc_extend`). On a shortfall it relieves the
    /// pool (`relieve`: evicts its shortfall from the tree, backing it up first under `WritePolicy::back`, or
    /// the missing bytes from the other pools when it has nothing evictable) and retries, as long as each
    /// relief frees something: in the one arena, room made for one pool can leave the next one short (an SWA
    /// page is not a FULL page's size). Nothing is allocated on failure. O(tokens) without a shortfall, no
    /// allocation; a shortfall adds the evictions (cold).
    AllocResult alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out);
    /// One decode token per request of `batch` (`UnifiedAllocator::alloc_decode`), with the same relief and
    /// cost (O(batch) without a shortfall).
    AllocResult alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out);
    /// Frees a request's own whole virtual pages (those the tree did not take): `UnifiedAllocator::free`.
    /// Throws `logic_error` (nothing freed) for pages not allocated, listed twice, or held by the tree (a cached
    /// prefix: the tree frees its own). O(pages), no stream work on lazy pools.
    void free(std::span<const VirtualPage> pages) { alloc_.free(pages); }
    /// Tombstones the SWA rows of a request's own pages that slid out of its window
    /// (`UnifiedAllocator::free_swa`); throws as `free`, and for a page already tombstoned.
    void free_swa(std::span<const VirtualPage> pages)
        requires has_swa
    {
        alloc_.free_swa(pages);
    }
    /// Mamba state slots for requests (`UnifiedAllocator::alloc_state`), with the same relief as
    /// `alloc_extend`.
    AllocResult alloc_state(std::span<StateId> out)
        requires has_mamba;
    /// Frees a request's own Mamba state slots (`UnifiedAllocator::free_state`); throws as `free`.
    void free_state(std::span<const StateId> states)
        requires has_mamba
    {
        alloc_.free_state(states);
    }

    /// Blocks the host until everything queued on the compute stream (`allocator().stream()`, the stream the
    /// cache was built on) has run: the page moves of compaction that allocations and frees queued there, and
    /// the loads a `wait_layer` made it wait for. After it, rows translated now may be read and written from the
    /// host (the CPU backend, a host-side test) until the next call that allocates or frees; a row written
    /// before it may be overwritten by a move still queued. A device engine needs none: its kernels on the
    /// compute stream run after the moves. One stream synchronization (`docs/cache.md`, "Streams").
    void sync_for_host() const { alloc_.stream().synchronize(); }

    // ---- translation (hot; allocation-free; unmapped ids give the sink) ----------------------------------
    /// Physical FULL tokens of virtual tokens. O(n).
    void translate_full(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const {
        alloc_.translate_full(in, out);
    }
    /// Physical SWA tokens of virtual tokens (tombstones give the sink). O(n).
    void translate_swa(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const
        requires has_swa
    {
        alloc_.translate_swa(in, out);
    }
    /// Physical Mamba slots of state ids. O(n).
    void translate_state(std::span<const StateId> in, std::span<PhysicalPage> out) const
        requires has_mamba
    {
        alloc_.translate_state(in, out);
    }
    /// The device page tables for kernels that translate on the device (`UnifiedAllocator::device_tables`):
    /// call it right before queueing them. Never blocks.
    [[nodiscard]] DeviceTables device_tables() { return alloc_.device_tables(); }

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
    /// Acknowledges finished loads, in submission order, never blocking: the tree finishes each
    /// (`finish_load`: a successful copy is installed on every node that still lacks it, as the tree stands now),
    /// what no node took is freed (all of a failed copy's destinations), and both locks of each are released.
    /// The span is valid until the next `loading_check`. When finishing throws (memory) the load stays, locks
    /// and all: the tree's finish is idempotent, so the next check goes on where it stopped and reports it then,
    /// with the loads acknowledged after it. Nothing is lost or freed twice.
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
    /// check left finished but unreported, and those a `backup` settled since the last call): releases each
    /// one's device lock, after `drop_host` for a failed copy. The span is valid until the next
    /// `writing_check`. Precondition (`logic_error`): no eviction run open (its backups' acks belong to
    /// `finish_evict`). O(acks + writes in flight); allocates nothing unless a `backup` settled writes or a store
    /// is attached (each acknowledged copy is then put to it: O(depth + prefix) to key it, with `node_info`'s
    /// allocations, and the store's own submission work). When a
    /// `drop_host` throws, that write keeps its lock (its host copy must not serve a row) and the next check
    /// finishes it with the writes after it; the writes finished before it are reported then too.
    [[nodiscard]] std::span<const WriteDone> writing_check();
    /// Write-throughs queued or submitted and not yet acknowledged.
    [[nodiscard]] std::size_t writes_in_flight() const noexcept {
        return static_cast<std::size_t>(std::count_if(writes_.begin(), writes_.end(), [](const Ticket& t) {
            return t.tag.kind == CacheTag::Kind::write_through;
        }));
    }

    // ---- eviction ----------------------------------------------------------------------------------------
    /// Frees `pages` of device data (whole nodes, so possibly more) or all that can go:
    /// `finish_evict(start_evict(pages))`. Blocks on the write-back copies (`WritePolicy::back` only).
    Eviction evict(Pages pages) { return finish_evict(start_evict(pages)); }
    /// The first half of `evict`: asks the tree (write-back per the policy), runs the device frees that come
    /// before the first backup, frees the host pages the tree gives up, takes host pages for each backup (none
    /// when the host is short: no copy) and submits the copies, without waiting for them. The rows the
    /// copies read stay allocated until `finish_evict`. Nodes with a
    /// write-through in flight are device-locked, so they are no candidates.
    WriteBackRun start_evict(Pages pages);
    /// The second half of `evict`: drains the copies (blocks), records each backup with the tree (its host
    /// pages, or none for a failed copy, whose host pages are freed), executes what that frees, then frees the
    /// device rows the backups read (a throw while they are recorded leaves the rest pending in the tree: it is
    /// not recovered). Precondition: `run` is from the previous call on this cache.
    Eviction finish_evict(WriteBackRun&& run);
    /// Frees `pages` of host data (whole nodes, so possibly more) or all that can go (`evict_host` of the tree,
    /// executed); returns the host pages freed, of the same component.
    Pages evict_host(Pages pages);

    // ---- retraction (preempted decode requests; needs `can_retract`) -------------------------------------
    /// Backs `request`'s own FULL rows and SWA window up into the host pool (`retract`, synchronized), relieving
    /// a host shortfall by host eviction (`relieve_host`) while that frees something. On a live backup the caller
    /// frees the request's own pages (`free`) and drops its prefix lock; on a failed one (`failure()` says
    /// why) nothing changed. Retraction has the write lane to itself, so write-throughs in flight are first
    /// submitted, waited for and acknowledged (reported by the next `writing_check`). Throws `logic_error`
    /// (nothing changed) for rows that do not cover the request. Cold: O(pages) plus one or two host
    /// synchronizations.
    RetractionBackup backup(const RequestRows& request);
    /// Copies `backup` back into `fresh`, the request's new own pages (allocated by the caller, e.g. with
    /// `alloc_extend` from the re-matched prefix; same geometry), synchronized. True on success (the host
    /// pages are freed, `backup` becomes empty); false when the copy failed (`backup` stays live: retry or
    /// `discard`). Throws `logic_error` as `restore` does (nothing changed), also while a load-back is in
    /// flight: acknowledge it first (`loading_check`). Cold: O(pages) plus one host synchronization.
    bool restore(RetractionBackup& backup, const RequestRows& fresh);
    /// Gives a backup's host pages back without restoring it (the request is aborted).
    void discard(RetractionBackup& backup) { backup.discard(host_); }

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
    /// What a budget reads of the cache, each count read on access (`CapacityView::of`). O(1).
    [[nodiscard]] CapacityView capacity() const { return CapacityView::of(alloc_, tree_); }
    /// The layers a load-back is copied in, one `wait_layer` each (`ArenaSpec::load_layers`), known from
    /// construction (`controller().layers()` is 0 until the first load). O(1).
    [[nodiscard]] std::int32_t layers() const noexcept { return alloc_.spec().load_layers(); }
    /// Bytes moved so far: compaction in the arena, loads and writes over the host link. O(1).
    [[nodiscard]] BytesMoved bytes_moved() const noexcept {
        return {.compaction = alloc_.bytes_moved(),
                .loaded = ctl_.bytes_submitted(TransferDirection::load),
                .written = ctl_.bytes_submitted(TransferDirection::write)};
    }
    /// The stream the cache's host transfers run on (loads, write-throughs, write-backs, retractions); the
    /// compute stream is `allocator().stream()`.
    [[nodiscard]] stream_ref transfer_stream() const noexcept { return ctl_.stream(); }
    /// Tokens per page of `component` (1 for Mamba: a page is a state). The cache speaks `Pages`; the tree counts
    /// tokens (states for Mamba), and the cache converts at its one door to it (eviction) with this.
    [[nodiscard]] std::int32_t page_size(Component component) const noexcept {
        return alloc_.spec()[component].page_size;
    }

    // ---- the storage tier (needs `has_storage`; docs/storage.md) --------------------------------------------
    /// Attaches `store` (which must outlive the attachment at its address; one cache per store object, several
    /// caches share one store through `SharedStorage` shares) below the host tier: from now on every host copy
    /// the cache makes (a write-through's ack, a write-back's backup) is put to the store, and `prefetch` asks it
    /// for the pages a request's prefix lacks. Its keys start from the store
    /// namespace of `options` and the arena's geometry (page tokens and bytes per component, window), so instances
    /// of the same model, layout and rank share objects. `options.write` switches the write policy (see
    /// `StorageOptions::write`). Throws `logic_error` with nothing changed: a store attached already, a timeout of
    /// 0, an eviction run open, or a write-policy switch the tree's host copies do not allow. Cold: O(1), or O(nodes)
    /// with a write-policy switch from write-back.
    void attach_storage(storage_type& store, const StorageOptions& options = {})
        requires has_storage;
    /// Waits for every storage ticket in flight (puts, prefetches: grafted when they succeed, reported by the next
    /// `storage_check`) and detaches the store. No-op when none is attached. Blocks on the store.
    void detach_storage()
        requires has_storage;
    /// Asks the store for the pages of `key` the cache lacks (device and host): one `exists` of the FULL pages from
    /// where the cache's FULL pages end (and of the SWA pages and Mamba states that could end a match there),
    /// then one `get` of the longest run that ends on a complete window and state, into host pages; when all of it
    /// arrived (all or nothing for the window and the state; FULL-only trees keep the longest run), the pages are
    /// grafted into the tree as host copies (`insert_host`), so the request's admission finds them as host hits and
    /// loads them back. `storage_check` reports the outcome. Waits for no copy (the store's submission may do small
    /// synchronous work: `FileStorage` opens a slab or appends its journal). O(key) hashing plus the match.
    PrefetchStart prefetch(TokenKey key)
        requires has_storage;
    /// Finishes the storage tickets the store completed (puts: locks and leases released; prefetches: their next
    /// phase, or their graft) and reports the prefetches that finished or timed out since the last call; the span is
    /// valid until the next call. With `wait` 0 (an engine's step) it waits for no copy (as `prefetch`, the store's
    /// own bookkeeping aside); otherwise, with tickets in flight and none answered yet, it waits up to `wait` for the
    /// store's next answer (a caller that must settle the store, without polling in a loop). Precondition
    /// (`logic_error`): no eviction run open. A throw while finishing one answer leaves the others for the next
    /// call. O(tickets + objects completed).
    [[nodiscard]] std::span<const PrefetchDone> storage_check(std::chrono::nanoseconds wait = {})
        requires has_storage;
    /// Storage tickets (batches on the store) in flight.
    [[nodiscard]] std::size_t storage_in_flight() const noexcept {
        if constexpr (has_storage) {
            return stores_.size();
        } else {
            return 0;
        }
    }
    /// True while a store is attached.
    [[nodiscard]] bool storage_attached() const noexcept {
        if constexpr (has_storage) {
            return storage_.store != nullptr;
        } else {
            return false;
        }
    }
    /// What the storage tier did so far.
    [[nodiscard]] const StorageCounters& storage_counters() const noexcept
        requires has_storage
    {
        return storage_.counters;
    }

    // ---- inspection --------------------------------------------------------------------------------------
    /// Every broken rule of the allocator's byte accounting, the tree's invariants and the host pools, one
    /// line each; empty when healthy. Callable in production (cold: O(pages + nodes)).
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
    /// The window of the SWA layers in tokens (0 without Swa).
    [[nodiscard]] std::int32_t window_tokens() const noexcept { return tree_.config().swa_window; }
    /// The retention policies the cache runs (`CacheConfig::retention`, checked).
    [[nodiscard]] const RetentionConfig& retention() const noexcept { return retention_; }
    /// Prompt reuse of the requests `Cache::admit` started, by cause. O(1).
    [[nodiscard]] const ReuseCounters& reuse() const noexcept { return reuse_; }
    /// Where an admission's prefill chunk stops: under Mamba the first retained point (`RetainPoints`) after
    /// `prefix` of a prompt of `input` tokens whose cached FULL pages reach `cached`, so that a state is
    /// checkpointed there; `input` otherwise. O(1).
    [[nodiscard]] std::int32_t checkpoint_stop(std::int32_t prefix, std::int32_t input, std::int32_t cached) const noexcept {
        if constexpr (has_mamba) {
            return RetainPoints::of(retention_, input, cached, page_size(Component::full)).next_after(prefix, input);
        } else {
            (void)prefix;
            (void)cached;
            return input;
        }
    }

protected:
    // What `Cache::admit`, `extend` and `restore` share: the checks of a handle, and an admission made the
    // handle's (`start`).
    enum class start_kind : std::uint8_t { fresh, chunk, recompute };
    // Throws `logic_error` naming `call` unless `seq` is `want` and, when not idle, runs in this cache.
    void expect_sequence(const Sequence& seq, Sequence::Status want, const char* call) const;
    // The tokens `seq` asks an admission for: the prompt left to prefill, or all of a retracted one's rows.
    // Room in an idle `seq` for `request`'s prompt and decode, so that `decode` never allocates.
    static void reserve(Sequence& seq, const AdmitRequest& request) {
        const std::size_t room = request.prompt.tokens.size() + static_cast<std::size_t>(std::max(0, request.max_new_tokens));
        seq.tokens_.reserve(room);
        seq.rows_.reserve(room);
    }
    [[nodiscard]] static TokenKey admission_key(const Sequence& seq, std::int32_t rows) noexcept {
        return {std::span<const TokenId>(seq.tokens_).first(static_cast<std::size_t>(rows)), seq.ns_};
    }
    // Gives the admitted `a` to `seq`: the rows of its extension, a state (from the prefix's), the prefix's rows
    // (or, for a load, once it is read), the lock (a chunk's previous lock released). On a shortfall of rows or
    // state the admission's lock is released and a refusal returned, `seq` unchanged. `prompt`: a fresh
    // handle's tokens.
    Admission start(Sequence& seq, Admission&& a, start_kind kind, TokenKey prompt = {}, std::int32_t max_new = 0);
    // `insert`, calling `inserted(const CacheInsert&)` once the tree holds the pages and its duplicates are freed,
    // before the write-throughs (which may throw): the caller commits there what the insert changed for it.
    template <class Inserted>
    CacheInsert insert_then(TokenKey key, const InsertValues& values, Inserted&& inserted);
    // Adds a request's first admission `a` of a prompt of `prompt` tokens to `reuse()`.
    void count_reuse(const Admission& a, std::int32_t prompt) noexcept {
        ++reuse_.requests;
        reuse_.prompt_tokens += prompt;
        reuse_.device_hit_tokens += a.prefix_length - a.host_length;
        reuse_.host_hit_tokens += a.host_length;
        reuse_.missing_window_tokens += a.missing_window;
        reuse_.missing_state_tokens += a.missing_state;
    }
    // `restore`'s copy of `seq`'s backup into fresh rows after its old prefix; false when that cannot be done
    // (the admission does not serve that prefix on device, a chunk, rows short, a failed copy): nothing changed.
    bool copy_back(Sequence& seq, Admission& a);

private:
    // The FULL virtual pages of `rows` (the first at a page's start), into `finish_pages_`: one per page. O(pages).
    std::span<const VirtualPage> page_list(std::span<const VirtualToken> rows) {
        const PageSize page{page_size(Component::full)};
        finish_pages_.clear();
        for (std::size_t t = 0; t < rows.size(); t += static_cast<std::size_t>(page.tokens))
            finish_pages_.push_back(page_of(rows[t], page));
        return finish_pages_;
    }
    // `seq`'s own rows: those after the tree's prefix.
    [[nodiscard]] static std::span<const VirtualToken> own_rows(const Sequence& seq) noexcept {
        return std::span<const VirtualToken>(seq.rows_).subspan(static_cast<std::size_t>(seq.prefix_));
    }
    // The tokens of `seq`'s whole pages (what an insert of its rows caches).
    [[nodiscard]] std::int32_t whole_rows(const Sequence& seq) const noexcept {
        return seq.length() / page_size(Component::full) * page_size(Component::full);
    }
    // Rows `[prefix, end)` of one request after a page-aligned prefix, into `decode_out_` (`alloc_extend`).
    AllocResult alloc_own_rows(std::int32_t prefix, std::int32_t end);
    // Reads a loaded prefix's rows into `seq` (see `rows`).
    void bind_loaded_prefix(Sequence& seq);
    // Throws the misuse that makes `s` (at `at` in a batch) no handle to decode now. Cold.
    [[noreturn]] void decode_misuse(const Sequence* s, std::uint64_t mark, std::size_t at) const;
    // The SWA window of `seq`'s own pages: `collect_slid` names in `swa_slid_` the pages whose rows all lie before
    // the window, `free_slid` tombstones `swa_slid_`, `advance_window` moves the cursor past the pages collected;
    // `slide_window` does the three for one handle. O(pages slid).
    void collect_slid(const Sequence& seq, std::int32_t upto, PageSize page, std::int32_t window);
    void free_slid();
    static void advance_window(Sequence& seq, std::int32_t upto, PageSize page, std::int32_t window) noexcept;
    void slide_window(Sequence& seq, std::int32_t upto);
    // `checkpoint` of a handle already checked. O(length / page + key) plus the inserts'.
    CacheInsert checkpoint_rows(Sequence& seq, StateId state_at_pages);
    // Caches `seq`'s rows `[0, at)` (whole pages, `at` past its prefix) with `state` at `at`: its own SWA rows
    // before the window of `at` are tombstoned, the tree takes the rest with `window_class`, and the handle's
    // lock, node and prefix move to `at` (its prefix rows read again). O(at / page + key) plus the insert's.
    CacheInsert cache_prefix(Sequence& seq, std::int32_t at, StateId state, std::uint8_t window_class);
    // Caches `seq`'s prefix at each retained point before `whole` whose window it still holds (SWA layouts), so
    // the window there survives the slide past it. Cold: a few points per request.
    void keep_windows(Sequence& seq, std::int32_t whole);
    // What a handle's first decode keeps: its prompt's end and the points before it (`RetentionConfig`).
    void keep_prompt_end(Sequence& seq);
    // The SWA rows a retraction backup keeps: the window of the first row not known computed (which a restore
    // computes again), so `window_tokens()` plus the rows from `compute_from()` on.
    [[nodiscard]] std::int32_t restore_window(const Sequence& seq, std::int32_t length) const noexcept {
        return window_tokens() + length - seq.compute_from_;
    }
    // Back to idle, capacity kept.
    static void reset(Sequence& seq) noexcept;

    // The storage parts (`detail/cache/storage_link.hpp`): the link to the attached store, and what a storage ticket
    // carries beyond the common fields.
    using storage_types = detail::cache::storage_parts<has_storage, storage_type, host_pools_type>;

    // One copy in flight, from its queueing to its finish: a load-back, a write-through or a write-back between
    // device and host, or a put or a prefetch on the storage tier (`tag.kind`; a retraction drains its own copy
    // within its call). Plain values only, so the cache stays movable. The controller's copies finish in `finish`,
    // which commits or undoes them by kind and is idempotent (each step leaves a mark, so a call after a throw goes
    // on where it stopped); the store's in `finish_store`, with the store's answer. `abandon` releases a ticket
    // without an ack (the cache's destructor; a store batch refused, waited for or detached).
    struct Ticket {
        CacheTag tag{};
        NodeRef node{};
        Component component = Component::full;  // write-through, write-back, store_put: the component copied
        // load: the node, every component; write-through: FULL and `component`; store_put of a buffer-only host's
        // staged copy: the write-through's, taken over.
        LockReceipt device;
        // load: the host copies it reads; store_put: the host copy.
        LockReceipt host;
        Reservation swa;     // load: its SWA rows' reservation (cancelled if never submitted)
        std::vector<HostPage> host_pages;  // write-back: the copy's; write-through: those the tree did not take
        bool acked = false;      // the controller acknowledged it (or it was never queued: a write-back short of room)
        bool succeeded = false;  // the copy succeeded (once acked)
        bool hosted = false;     // write-through: the tree holds the host value (`set_host` got that far)
        bool undone = false;     // write-through: a failed copy's host value was dropped (`drop_host` returned)
        bool installed = false;  // load: the tree finished it (`finish_load` returned)
        bool stored = false;     // write-through: its host copy was handed to the storage tier
        typename storage_types::part store{};  // store_put, prefetch: the batch and what it reads or fills
    };

    // `host` with its write policy and host mode checked against each other and the policies (see the
    // constructor); throws `logic_error`.
    static const HostConfig& checked(const HostConfig& host);
    // `retention` checked against the arena's page size; throws `logic_error`.
    static const RetentionConfig& checked(const RetentionConfig& retention, const ArenaConfig& arena);
    // The tree of `config`: FULL's page size, the arena's window where the layout has Swa, the write policy's
    // write-through threshold.
    static TreeConfig tree_config(const CacheConfig& config, const HostWrites& writes);
    // The D2H request of a `backup` or `write_through` action into `host`.
    static TransferRequest d2h(const HostActions& work, const TreeAction& a, std::span<const HostPage> host);
    // Host pages for `out`, relieved (`relieve_host`) while short; false when still short.
    bool host_room(Component component, std::span<HostPage> out);
    // Under write-back: evicts host data until the host can take the backups of evicting `pages`.
    void make_backup_room(Pages pages);
    // The tree's units (tokens; states for Mamba) of `pages`, and the pages of the tree's `units` per component:
    // the one door between the cache's pages and the tree's counts. O(1).
    [[nodiscard]] std::int64_t tree_units(Pages pages) const noexcept {
        const std::int64_t page = page_size(pages.component);  // saturates: "evict everything" may ask for more
        return pages.count > std::numeric_limits<std::int64_t>::max() / page ? std::numeric_limits<std::int64_t>::max()
                                                                             : pages.count * page;
    }
    [[nodiscard]] per_component<std::int64_t> pages_of(const per_component<std::int64_t>& units) const noexcept {
        per_component<std::int64_t> out{};
        for (Component c : all_components) out[c] = units[c] == 0 ? 0 : units[c] / page_size(c);
        return out;
    }
    // Queues the write-through `a` of `work`, or skips it; true when queued.
    bool write_through(const HostActions& work, const TreeAction& a);
    // Marks each ticket of `lane` that one of `acks` names (by its tag) acknowledged. O(acks * lane).
    static void mark(std::vector<Ticket>& lane, std::span<const typename controller_type::ack_type> acks) noexcept;
    // Finishes acknowledged ticket `t` by its kind (see `Ticket`); a load's and a write-through's locks go last.
    void finish(Ticket& t);
    // Releases `t` without an ack: its locks, and its reservation if never submitted. Frees nothing else.
    void abandon(Ticket& t) noexcept;
    // Finishes the acknowledged write-throughs (a prefix of `writes_`), reports them into `write_acked_` and
    // forgets them; a throw leaves the one that threw, and those after it, for the next call.
    void finish_writes();
    // The write-throughs acknowledged now (`writing_check` without the settled ones).
    std::span<const WriteDone> check_writes();
    // Submits, waits for and acknowledges every write-through in flight, keeping the acks in `settled_`.
    void settle_writes();
    // The retraction request of `rows` in this cache's geometry.
    RetractionRequest retraction_of(const RequestRows& rows) const;
    // `alloc()`, relieved (`relieve`) and retried while the relief frees something.
    template <class Alloc>
    AllocResult relieved(Alloc&& alloc);
    // Copies `plan` into `plan_` (spans into the cache's buffers), so evictions during allocation keep it.
    void copy_plan(std::span<const LoadBackStep> plan);
    // Frees what the tree's `finish_load` handed back, in its order.
    void free_leftovers(const LoadLeftovers& left);
    // Executes a tree result that asks for no backup: device frees and host frees.
    template <class Result>
    void run_actions(Result& result);
    void free_host(const HostActions& work);
    // ---- the storage tier (detail/cache/storage.inl) ----
    // Puts `node`'s host copy of `c` to the store, when one is attached (a best effort: a node gone or without that
    // copy puts nothing); true when a put was submitted. A buffer-only host's staged copy comes with its write's
    // device lock (`staged`), which the put takes over.
    bool store_host_copy(NodeRef node, Component c, LockReceipt* staged = nullptr);
    // Under buffer-only: the acknowledged write-through `t`'s host copy goes to the store with `t`'s device lock, and
    // is let go of at the store's answer; with nothing to put it to it goes now (not stored).
    void stage_for_store(Ticket& t);
    // Ends put `t`: its host lock released, a staged copy let go of (`why`), then its device lock released.
    void end_put(Ticket& t, HostDrop why);
    // Drops `node`'s host copy of `c` beside its device data (`drop_host` for `why`), if it still holds one. Cold.
    void let_go(NodeRef node, Component c, HostDrop why);
    // Under buffer-only, after a load or an insert beside grafted copies: lets go of the staged copies (FULL, SWA)
    // beside device data on the path from `node` to the root whose value no write-through or put has in flight;
    // they came from the store. O(depth * (tickets + parts) + pages).
    void drop_staged(NodeRef node);
    // A write-through or a put in flight holds the value of which `x`'s copy of `c` is a part. Cold.
    bool staged_in_flight(NodeRef x, Component c);
    // The tokens of the prefix that ends at the node of `info` into `storage_.prefix`, and its namespace.
    // O(depth + prefix).
    KeyNamespace node_prefix(NodeInfo info);
    // The storage ticket `stores_[i]`'s next step with the store's answer `results`, by kind and phase: a put is
    // counted (and a staged copy let go of); a probe goes on with its fetch, a fetch is grafted. The ticket leaves
    // the lane once finished.
    void finish_store(std::size_t i, std::span<const PageResult> results);
    void start_fetch(std::size_t i, std::span<const PageResult> found);
    void graft(std::size_t i, std::span<const PageResult> got);
    void report(Ticket& t, PrefetchDone::Status status, std::int32_t length = 0, std::int32_t fetched = 0);
    void free_pages(per_component<std::vector<HostPage>>& pages);
    // Polls the store until no storage ticket is in flight (detach, destruction).
    void drain_storage();
    // Finishes the store's answers `polled` (none: those a throw left from the last poll), in order; a throw leaves
    // the rest for the next call.
    void finish_answers(std::span<const StorageDone> polled = {});
    // Waits for every batch the store holds, finishing none (the destructor's), and lets go of the tickets.
    void wait_for_store() noexcept;
    // Puts `t` in the storage lane and hands the store its batch (`call()`); a throw from either leaves neither.
    template <class Submit>
    void submit(Ticket&& t, Submit&& call);
    // The pages of one SWA window (0 without Swa).
    [[nodiscard]] std::int32_t window_pages() const noexcept {
        const std::int32_t ps = page_size(Component::full);
        return has_swa ? (window_tokens() + ps - 1) / ps : 0;
    }

    HostWrites host_writes_;  // first: checked before any part is built
    HostMode host_mode_ = HostMode::cache;
    RetentionConfig retention_{};
    ReuseCounters reuse_{};
    allocator_type alloc_;
    host_pools_type host_;
    tree_type tree_;
    ActionExecutor exec_;
    std::vector<Ticket> loads_;   // load tickets, in submission order
    std::vector<LoadDone> done_;  // the acks of the last `loading_check`
    std::vector<LoadDone> load_acked_;  // finished, reported by the next `loading_check`
    std::uint64_t next_load_ = 1;
    std::vector<Ticket> writes_;            // write-through and write-back tickets, in queue (= ack) order
    std::vector<WriteDone> write_done_;     // the acks of the last `writing_check`
    std::vector<WriteDone> write_acked_;    // finished by a check that threw, reported by the next one
    std::vector<HostPage> write_host_;      // scratch: a write-through's host pages
    std::uint64_t next_write_ = 1;
    std::size_t open_backups_ = 0;          // backups of the eviction run between `start_evict` and `finish_evict`
    std::vector<LoadBackStep> plan_;                   // scratch: the plan being allocated
    per_component<std::vector<HostPage>> plan_host_;   // scratch: its host pages, per component, plan order
    std::vector<VirtualPage> plan_under_;              // scratch: SWA steps' resident FULL pages
    std::vector<WriteDone> settled_;   // acks of writes a `backup` settled, for the next `writing_check`
    std::vector<WriteDone> reported_;  // what the last `writing_check` returned when it had settled acks
    std::vector<VirtualPage> finish_pages_;  // scratch of `finish`: a request's pages, whole ones first
    std::vector<VirtualPage> prefix_pages_;  // scratch of `prefix_rows`
    std::vector<std::int32_t> decode_lens_;   // scratch of `decode` and `start`
    std::vector<VirtualToken> decode_last_;
    std::vector<VirtualToken> decode_out_;
    std::vector<VirtualPage> swa_slid_;       // scratch of `decode`: pages whose SWA rows left the window
    std::uint64_t decode_mark_ = 0;           // `decode`'s batch number (a handle named twice)
    std::uint64_t id_ = next_cache_id();      // which cache a handle runs in
    typename storage_types::link storage_{};  // the attached store (host memory its batches use is host_'s)
    std::vector<Ticket> stores_;              // batches on the store, in submission order
    controller_type ctl_;  // last: destroyed first, so its stream finishes copies into the memory above
};

template <class P>
using core_of_t = CacheCore<core_policies<typename P::backend, typename P::layout, tree_core_tag_t<typename P::tree_core>,
                                          typename P::host_pools, typename P::storage>>;

}  // namespace detail::cache

/// The composed cache (see the file comment): `detail::cache::CacheCore`'s calls plus the budget and
/// admission. Move-only.
template <class Policies>
class Cache : public detail::cache::core_of_t<Policies> {
    using core = detail::cache::core_of_t<Policies>;

public:
    using policies = Policies;
    using budget_type = budget_t<typename Policies::budget, typename Policies::layout>;
    using typename core::stream_ref;
    using core::restore;  // beside `restore(Sequence&)`: the backup-level call

    /// The core of `config` (see `CacheCore`'s constructor) and the budget of `config.budget`; a static
    /// partition bounds the pools themselves (`PartitionedSWABudget`). Throws what those throw.
    Cache(typename core::backend_type& backend, const CacheConfig& config, stream_ref stream);
    /// Moves every part; transfers in flight are acknowledged through the moved-to cache.
    Cache(Cache&&) noexcept = default;
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;
    /// Not assignable: build a new cache.
    Cache& operator=(Cache&&) = delete;
    ~Cache() = default;

    // ---- admission ---------------------------------------------------------------------------------------
    /// Starts a scheduling step: the running decode requests' pending tokens are pre-charged and the chunked
    /// prefill budget set (`StepDemand`). O(1).
    void begin_step(const StepDemand& step) { budget_.begin_step(step); }
    /// Admits `request` into the step, or says why not (`unikv::try_admit`, reference §6.2): match, selection
    /// by the budget, a host hit pinned, reclaimed for and queued for load-back, the budget charged and the
    /// request's node locked (`Admission::lock`; unlock it when done). A refusal is a value naming the
    /// component, pages short, reclaimable, blocked by transfers and held by locks. Every pin is released on
    /// every path. Cost: see `unikv::try_admit`.
    [[nodiscard]] Admission try_admit(const AdmitRequest& request) { return unikv::try_admit(*this, budget_, request); }
    /// Realizes the budget for a load-back before it is queued (shared budgets evict and compact here, since a
    /// queued load blocks page moves); `try_admit` calls it for its host hits. Cold.
    [[nodiscard]] BudgetCheck prepare_load_back(const LoadBackAsk& ask) {
        return detail::prepare_load_back(*this, budget_, ask);
    }

    // ---- requests as handles (`Sequence`) -----------------------------------------------------------------
    /// Admits a new request into `seq` (idle: never admitted, or finished) through `try_admit`; on success the
    /// handle holds its prompt (copied, with room reserved for `max_new_tokens`), the rows of the admitted
    /// extension (`compute_from()` on), a Mamba state (a copy of the prefix's, queued on the compute stream),
    /// its lock (the returned `Admission::lock` is empty) and the prefix's rows (after a load-back: once read,
    /// `rows`). Refused: the admission's refusal, or `no_room` naming the pool when the rows or the state fell
    /// short after the budget admitted it; the handle is unchanged. Throws `logic_error` (nothing changed) for a
    /// handle that is not idle. Cost: `try_admit` plus O(prefix + extension).
    [[nodiscard]] Admission admit(Sequence& seq, const AdmitRequest& request) {
        this->expect_sequence(seq, Sequence::Status::idle, "admit");
        core::reserve(seq, request);  // before admitting: a throw here holds nothing
        Admission a = try_admit(request);
        if (!a) return a;
        a = this->start(seq, std::move(a), core::start_kind::fresh, request.prompt, request.max_new_tokens);
        if (a) this->count_reuse(a, static_cast<std::int32_t>(request.prompt.tokens.size()));
        return a;
    }
    /// Admits the next chunk of `seq`'s prompt (after `checkpoint` cached the last one; the budget may cut it
    /// again): the match finds the chunks cached so far. Refused as `admit`, the handle unchanged (it keeps its
    /// lock and may ask again). Throws `logic_error` (nothing changed) for a handle not running in this cache, not
    /// prefilling, or with rows not checkpointed. Cost as `admit`.
    [[nodiscard]] Admission extend(Sequence& seq) {
        this->expect_sequence(seq, Sequence::Status::running, "extend");
        UNIKV_EXPECTS(seq.prefilling() && seq.length() == seq.prefix_length(), "extend: the sequence has ",
                      seq.length() - seq.prefix_length(), " rows not checkpointed",
                      seq.prefilling() ? "; checkpoint the chunk first" : " and its prompt is all computed; decode it");
        Admission a = try_admit({.prompt = this->admission_key(seq, static_cast<std::int32_t>(seq.tokens().size())),
                                 .max_new_tokens = seq.max_new_tokens() - seq.decoded()});
        if (!a) return a;
        return this->start(seq, std::move(a), core::start_kind::chunk);
    }
    /// Brings a retracted `seq` back: an admission of all its rows; when it serves the prefix the handle had on
    /// device, fresh rows after it receive the backup (`restored_rows()`; the rows that were not known computed
    /// are computed again, `compute_from()`); otherwise the backup is discarded and the handle prefills again
    /// from the admitted prefix. Refused as
    /// `admit` (still retracted, backup kept), and refused `loading` before anything is done while a load-back
    /// is in flight and the handle has a backup (its copy needs the transfer lane to itself: acknowledge the
    /// loads, `loading_check`, and restore again). Throws `logic_error` (nothing changed) for a handle not
    /// retracted in this cache (a restore without a retraction). Cost as `admit` plus the copy.
    [[nodiscard]] Admission restore(Sequence& seq) {
        this->expect_sequence(seq, Sequence::Status::retracted, "restore");
        if (seq.backed_up() && this->loads_in_flight() > 0) return detail::refused_while_loading(Component::full);
        Admission a = try_admit({.prompt = this->admission_key(seq, static_cast<std::int32_t>(seq.tokens().size())),
                                 .max_new_tokens = seq.max_new_tokens() - seq.decoded()});
        if (!a) return a;
        if (seq.backed_up() && this->copy_back(seq, a)) return a;
        return this->start(seq, std::move(a), core::start_kind::recompute);
    }

    /// The budget, for inspection (its offsets).
    [[nodiscard]] const budget_type& budget() const noexcept { return budget_; }

private:
    budget_type budget_;
};

/// A bundle that breaks a rule gets this empty stand-in, whose only member is the failing check: the rule's
/// message is the one error, where the class above would add errors from members computed over the bundle.
template <class Policies>
    requires(!is_valid_cache_policies_v<Policies>)
class Cache<Policies> {
    static_assert(check_cache_policies<Policies>());
};

}  // namespace unikv

#include <unikv/detail/cache/requests.inl>
#include <unikv/detail/cache/transfers.inl>
#include <unikv/detail/cache/relief.inl>
#include <unikv/detail/cache/storage.inl>
#include <unikv/detail/cache/sequences.inl>
