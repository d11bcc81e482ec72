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
/// Composition: a `Cache` holds one `HiCache` (allocator, tree, action executor, host pools, transfer
/// controller) and the budget, and adds what an engine needs above them. It composes the `HiCache` rather
/// than its parts because the `HiCache` already owns the rules that tie those parts together (a load's locks
/// and ticket until its ack, the write-back drain before rows are freed, one FIFO write lane), and each rule
/// should have one owner; the cache only adds calls that sit above them:
/// * one configuration (`CacheConfig`): the tree's page size and window are taken from the arena's, so the
///   two cannot disagree;
/// * request allocation with relief: `alloc_extend` / `alloc_decode` that fall short are relieved by the
///   `HiCache`'s one relief path (`relieve`, shared with load-back and the budgets) and retried while it frees
///   something (room made for one pool can leave another short);
/// * retraction (`backup` / `restore`) on the `HiCache`'s controller and host pools, whose host shortfall
///   evicts host data through the tree;
/// * admission (`begin_step`, `try_admit`, `prepare_load_back`): the budget holds no pointer, so the cache
///   hands it its `HiCache` on every call (`budget/admission.hpp`);
/// * a request's rows (`prefix_rows`, `alloc_rows`, `finish`): the bookkeeping every engine repeats between
///   admission and insert (the prefix's rows from the match, a tail page that the tree cannot take);
/// * the bundle's compatibility check, and the constructor's checks of the write policy and host mode against
///   it.
/// Every hot call (match, insert, lock, allocation without shortfall, translation, waits) inlines straight
/// through to the allocator and the tree: no virtual call, no `std::function`.
///
/// Move safety: the `HiCache` holds no pointer between its parts and the cache adds none, so a `Cache` moves
/// with loads in flight (acknowledged through the moved-to object). The backend lives outside and must outlive
/// the cache. Threading: one scheduler thread drives a cache.

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <unikv/arena/model.hpp>
#include <unikv/backend/default_backend.hpp>
#include <unikv/budget/admission.hpp>
#include <unikv/budget/base_budget.hpp>
#include <unikv/budget/budget_concept.hpp>
#include <unikv/cache/compatibility.hpp>
#include <unikv/cache/hicache.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/host/no_host_tier.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/results.hpp>
#include <unikv/storage/no_storage.hpp>
#include <unikv/transfer/host_mode.hpp>
#include <unikv/transfer/retraction.hpp>
#include <unikv/transfer/write_policies.hpp>
#include <unikv/tree/options.hpp>
#include <unikv/tree/radix_tree.hpp>

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

/// Runtime configuration of a `Cache` (named fields).
struct CacheConfig {
    /// The arena: model shapes, page sizes (the tree's page size is FULL's), window (the tree's, with Swa),
    /// bytes.
    ArenaConfig arena{};
    /// The host tier: its sizes (leave them 0 under `NoHostTier`), the write policy (`write`; `WritePolicy::none`
    /// under `NoHostTier`) and the host mode (`mode`).
    HostConfig host{};
    /// Whether the tree records KV events.
    EventMode events = EventMode::off;
    /// The budget's configuration (static partitions of `PartitionedSWABudget`).
    BudgetConfig budget{};
};

/// A running request's own rows, for `Cache::backup` and `Cache::restore`.
struct RequestRows {
    /// The request's own FULL virtual pages (after the shared prefix), in sequence order, covering tokens
    /// `[prefix_tokens, seq_len)`.
    std::span<const VirtualPage> own{};
    /// Tokens of the shared, tree-owned prefix before `own` (whole pages).
    std::int32_t prefix_tokens = 0;
    /// The request's sequence length, prefix included.
    std::int32_t seq_len = 0;
};

/// What `Cache::finish` hands the tree beside a request's rows (named fields; all optional).
struct FinishOptions {
    /// The request's SWA cursor in tokens (page aligned): the SWA rows before it were dropped with `free_swa`.
    /// 0 when every SWA row is live. Ignored without Swa.
    std::int32_t swa_evicted = 0;
    /// The request's Mamba state after its last row, or none. Ignored without Mamba.
    StateId state{};
    /// Retention class raised on the inserted path (`InsertValues::retention`).
    std::uint8_t retention = 0;
};

namespace detail::cache {

// The tag of an explicit tree (`tree_core = RadixTree<Full, Swa>`), so the `HiCache` takes it like any tag.
template <class Tree>
struct fixed_tree_core {
    template <class... Cs>
    using impl = Tree;
};

template <class T>
using tree_core_tag_t = std::conditional_t<is_explicit_tree_v<T>, fixed_tree_core<T>, T>;

// The `HiCache` bundle of a cache bundle: keyed on the four policies a `HiCache` uses, not on the whole bundle, so
// bundles that differ only in their budget (or storage) share one `HiCache` instantiation.
template <class Backend, class Layout, class TreeCore, class HostPools>
struct hicache_policies {
    using backend = Backend;
    using layout = Layout;
    using tree_core = TreeCore;
    using host_pools = HostPools;
};

template <class P>
using hicache_of_t = HiCache<hicache_policies<typename P::backend, typename P::layout,
                                              tree_core_tag_t<typename P::tree_core>, typename P::host_pools>>;

}  // namespace detail::cache

/// The composed cache (see the file comment). Move-only.
template <class Policies>
class Cache {
public:
    using policies = Policies;
    using hicache_type = detail::cache::hicache_of_t<Policies>;
    using backend_type = typename hicache_type::backend_type;
    using layout_type = typename hicache_type::layout_type;
    using allocator_type = typename hicache_type::allocator_type;
    using tree_type = typename hicache_type::tree_type;
    using host_pools_type = typename hicache_type::host_pools_type;
    using controller_type = typename hicache_type::controller_type;
    using budget_type = budget_t<typename Policies::budget, typename Policies::layout>;
    using stream_ref = typename backend_type::stream_ref;
    /// The layout's pools.
    static constexpr bool has_swa = allocator_type::has_swa;
    static constexpr bool has_mamba = allocator_type::has_mamba;
    /// `backup` and `restore` compile (a host tier, no Mamba).
    static constexpr bool can_retract = cache_retracts_v<Policies>;

    /// An empty cache over `backend` (which must outlive it at its address), its allocator's work on `stream`:
    /// the arena, host pools and tree of `config` (the tree's page size and window are the arena's). Throws
    /// what the parts throw for a bad configuration (`logic_error`, naming what to change) or for memory
    /// (`out_of_memory`); before anything is built, `logic_error` for a write policy or host mode the bundle
    /// cannot run: a bad `HostWrites` (`check_host_writes`), a policy other than `WritePolicy::none` under
    /// `NoHostTier`, `HostMode::buffer_only` over a layout with Mamba or without a storage tier.
    Cache(backend_type& backend, const CacheConfig& config, stream_ref stream);
    /// Moves every part; transfers in flight are acknowledged through the moved-to cache.
    Cache(Cache&&) noexcept = default;
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;
    /// Not assignable, like its `HiCache`: build a new cache.
    Cache& operator=(Cache&&) = delete;
    ~Cache() = default;

    // ---- requests and the tree (hot) ---------------------------------------------------------------------
    /// The longest cached prefix of `key`, host hits included under `HostMode::cache` (`best_node` then needs a
    /// `load_back`). O(key / page size), no allocation once the tree's scratch has grown.
    MatchResult match(TokenKey key) { return hc_.match(key); }
    /// Caches `key` (whole pages) with the request's `values`; duplicate pages are freed. See
    /// `HiCache::insert`. O(key + new pages).
    CacheInsert insert(TokenKey key, const InsertValues& values) { return hc_.insert(key, values); }
    /// Locks `node` for a request (device tier by default): its data is not evicted until `unlock`. O(depth).
    [[nodiscard]] LockReceipt lock(NodeRef node, LockOptions options = {}) { return hc_.lock(node, options); }
    /// Releases a lock. O(depth).
    void unlock(LockReceipt&& receipt) { hc_.unlock(std::move(receipt)); }

    // ---- a request's rows (hot; the engine's side of admission and finish) --------------------------------
    /// Writes the virtual tokens of `prefix`, an admitted request's cached prefix
    /// (`prompt.first(Admission::prefix_length)`), into `out[0, prefix size)`: the tree's rows the request reads.
    /// A loaded-back prefix must be acknowledged first (`loading_check`). Throws `logic_error` (nothing written)
    /// when `out` is shorter than the prefix or the device does not serve the whole prefix. O(prefix tokens),
    /// no allocation once the tree's match scratch has grown.
    void prefix_rows(TokenKey prefix, std::span<VirtualToken> out);
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
    /// `logic_error` (nothing changed) when `tokens` is shorter than `rows`; an exception from `insert`
    /// propagates with the tail, the state and the lock still the caller's. O(rows / page size + key) plus the
    /// insert's; allocates nothing once its page scratch has grown.
    CacheInsert finish(TokenKey tokens, std::span<const VirtualToken> rows, LockReceipt&& lock,
                       const FinishOptions& options = {});

    // ---- admission ---------------------------------------------------------------------------------------
    /// Starts a scheduling step: the running decode requests' pending tokens are pre-charged and the chunked
    /// prefill budget set (`StepDemand`). O(1).
    void begin_step(const StepDemand& step) { budget_.begin_step(step); }
    /// Admits `request` into the step, or says why not (`unikv::try_admit`, reference §6.2): match, selection
    /// by the budget, a host hit pinned, reclaimed for and queued for load-back, the budget charged and the
    /// request's node locked (`Admission::lock`; unlock it when done). A refusal is a value naming the
    /// component, pages short, reclaimable, blocked by transfers and held by locks. Every pin is released on
    /// every path. Cost: see `unikv::try_admit`.
    [[nodiscard]] Admission try_admit(const AdmitRequest& request) { return unikv::try_admit(hc_, budget_, request); }
    /// Realizes the budget for a load-back before it is queued (shared budgets evict and compact here, since a
    /// queued load blocks page moves); `try_admit` calls it for its host hits. Cold.
    [[nodiscard]] BudgetCheck prepare_load_back(const LoadBackAsk& ask) {
        return detail::prepare_load_back(hc_, budget_, ask);
    }

    // ---- running requests (hot) --------------------------------------------------------------------------
    /// Allocates the extensions of `batch` (`UnifiedAllocator::alloc_extend`). On a shortfall it relieves the
    /// pool (`HiCache::relieve`: evicts its shortfall from the tree, backing it up first under `WritePolicy::back`, or
    /// the missing bytes from the other pools when it has nothing evictable) and retries, as long as each
    /// relief frees something: in the one arena, room made for one pool can leave the next one short (an SWA
    /// page is not a FULL page's size). Nothing is allocated on failure. O(tokens) without a shortfall, no
    /// allocation; a shortfall adds the evictions (cold).
    AllocResult alloc_extend(const ExtendBatch& batch, std::span<VirtualToken> out);
    /// One decode token per request of `batch` (`UnifiedAllocator::alloc_decode`), with the same relief and
    /// cost (O(batch) without a shortfall).
    AllocResult alloc_decode(const DecodeBatch& batch, std::span<VirtualToken> out);
    /// Frees a request's own whole virtual pages (those the tree did not take): `UnifiedAllocator::free`.
    /// Throws `logic_error` for pages not allocated (nothing freed). O(pages), no stream work on lazy pools.
    void free(std::span<const VirtualPage> pages) { hc_.allocator().free(pages); }
    /// Tombstones the SWA rows of pages that slid out of a request's window (`UnifiedAllocator::free_swa`).
    void free_swa(std::span<const VirtualPage> pages)
        requires has_swa
    {
        hc_.allocator().free_swa(pages);
    }
    /// Mamba state slots for requests (`UnifiedAllocator::alloc_state`), with the same relief as
    /// `alloc_extend`.
    AllocResult alloc_state(std::span<StateId> out)
        requires has_mamba;
    /// Frees Mamba state slots (`UnifiedAllocator::free_state`).
    void free_state(std::span<const StateId> states)
        requires has_mamba
    {
        hc_.allocator().free_state(states);
    }

    // ---- translation (hot; allocation-free; unmapped ids give the sink) ----------------------------------
    /// Physical FULL tokens of virtual tokens. O(n).
    void translate_full(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const {
        hc_.allocator().translate_full(in, out);
    }
    /// Physical SWA tokens of virtual tokens (tombstones give the sink). O(n).
    void translate_swa(std::span<const VirtualToken> in, std::span<PhysicalToken> out) const
        requires has_swa
    {
        hc_.allocator().translate_swa(in, out);
    }
    /// Physical Mamba slots of state ids. O(n).
    void translate_state(std::span<const StateId> in, std::span<PhysicalPage> out) const
        requires has_mamba
    {
        hc_.allocator().translate_state(in, out);
    }
    /// The device page tables for kernels that translate on the device (`UnifiedAllocator::device_tables`):
    /// call it right before queueing them. Never blocks.
    [[nodiscard]] DeviceTables device_tables() { return hc_.allocator().device_tables(); }

    // ---- load-back and per-layer waits -------------------------------------------------------------------
    /// Loads a host-hit match's `best_node` back (`HiCache::load_back`: locks, destinations relieved while
    /// short, one queued load; all rolled back on a shortfall). O(pages of the plan).
    LoadBackStart load_back(NodeRef node) { return hc_.load_back(node); }
    /// Submits every queued load; returns the number submitted. Never blocks.
    std::size_t start_loading() { return hc_.start_loading(); }
    /// Acknowledges finished loads, never blocking (`HiCache::loading_check`). Valid until the next call.
    [[nodiscard]] std::span<const LoadDone> loading_check() { return hc_.loading_check(); }
    /// Makes `compute` wait (a stream wait, never a host block) for layer `layer` of the submitted loads, so
    /// layer `layer` computes while later layers still load.
    void wait_layer(stream_ref compute, std::int32_t layer) const { hc_.wait_layer(compute, layer); }
    /// Loads queued or submitted and not yet acknowledged.
    [[nodiscard]] std::size_t loads_in_flight() const noexcept { return hc_.loads_in_flight(); }

    // ---- write-through -----------------------------------------------------------------------------------
    /// Submits the write-throughs `insert` queued (under a write-through policy); returns the number submitted. Never
    /// blocks.
    std::size_t start_writing() { return hc_.start_writing(); }
    /// Acknowledges finished write-throughs, never blocking (`HiCache::writing_check`), together with those a
    /// `backup` settled since the last call. Valid until the next call. O(acks); allocates nothing unless a
    /// `backup` settled writes.
    [[nodiscard]] std::span<const WriteDone> writing_check();
    /// Write-throughs queued or submitted and not yet acknowledged.
    [[nodiscard]] std::size_t writes_in_flight() const noexcept { return hc_.writes_in_flight(); }

    // ---- eviction ----------------------------------------------------------------------------------------
    /// Frees `amount` device units of `component` (tokens; states for Mamba) or all that can go, backing up
    /// first under `WritePolicy::back` (blocks on those copies). Cold.
    Eviction evict(Component component, std::int64_t amount) { return hc_.evict(component, amount); }
    /// Frees `amount` host units of `component` or all that can go; returns the units freed. Cold.
    std::int64_t evict_host(Component component, std::int64_t amount) { return hc_.evict_host(component, amount); }

    // ---- retraction (preempted decode requests; needs `can_retract`) -------------------------------------
    /// Backs `request`'s own FULL rows and SWA window up into the host pool (`retract`, synchronized), relieving
    /// a host shortfall by host eviction (`HiCache::relieve_host`) while that frees something. On a live backup the caller
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
    void discard(RetractionBackup& backup) { backup.discard(hc_.host_pools()); }

    // ---- inspection --------------------------------------------------------------------------------------
    /// Every broken rule of the allocator's byte accounting, the tree's invariants and the host pools, one
    /// line each; empty when healthy. Callable in production (cold: O(pages + nodes)).
    [[nodiscard]] std::vector<std::string> verify() const { return hc_.verify(); }
    /// The allocator, for what the cache does not forward (flushes, capacity queries). Freeing tree-owned
    /// pages here breaks the tree.
    [[nodiscard]] allocator_type& allocator() noexcept { return hc_.allocator(); }
    [[nodiscard]] const allocator_type& allocator() const noexcept { return hc_.allocator(); }
    /// The tree, for inspection (`node_info`, sizes).
    [[nodiscard]] const tree_type& tree() const noexcept { return hc_.tree(); }
    /// The host pools, for inspection (usage, a lease to read host rows). Allocating or freeing here behind the
    /// cache's back breaks the tree's host accounting.
    [[nodiscard]] host_pools_type& host_pools() noexcept { return hc_.host_pools(); }
    /// The transfer controller, for inspection (its stream, what is in flight).
    [[nodiscard]] const controller_type& controller() const noexcept { return hc_.controller(); }
    /// The write policy the cache runs (`HostConfig::write`, checked).
    [[nodiscard]] const HostWrites& writes() const noexcept { return hc_.writes(); }
    /// The host mode the cache runs (`HostConfig::mode`, checked).
    [[nodiscard]] HostMode host_mode() const noexcept { return hc_.host_mode(); }
    /// The budget, for inspection (its offsets).
    [[nodiscard]] const budget_type& budget() const noexcept { return budget_; }
    /// What the budget reads of the cache now (`CapacityView`: per pool free, evictable, locked and in-flight
    /// pages). O(pools).
    [[nodiscard]] CapacityView capacity() const { return hc_.capacity(); }
    /// Tokens per page of `component` (1 for Mamba: a page is a state): the one conversion between the tree's
    /// units (tokens; states) and pages.
    [[nodiscard]] std::int32_t page_size(Component component) const noexcept { return hc_.page_size(component); }
    /// The window of the SWA layers in tokens (0 without Swa).
    [[nodiscard]] std::int32_t window_tokens() const noexcept { return window_; }

private:
    // `alloc()`, relieved (`HiCache::relieve`) and retried while the relief frees something.
    template <class Alloc>
    AllocResult relieved(Alloc&& alloc);
    // The retraction request of `rows` in this cache's geometry.
    RetractionRequest retraction_of(const RequestRows& rows) const;
    // Submits, waits for and acknowledges every write-through in flight, keeping the acks in `settled_`.
    void settle_writes();

    hicache_type hc_;
    budget_type budget_;
    std::int32_t window_ = 0;
    std::vector<WriteDone> settled_;   // acks of writes a `backup` settled, for the next `writing_check`
    std::vector<WriteDone> reported_;  // what the last `writing_check` returned when it had settled acks
    std::vector<VirtualPage> finish_pages_;  // scratch of `finish`: a request's pages, whole ones first
};

/// A bundle that breaks a rule gets this empty stand-in, whose only member is the failing check: the rule's
/// message is the one error, where the class above would add errors from members computed over the bundle.
template <class Policies>
    requires(!is_valid_cache_policies_v<Policies>)
class Cache<Policies> {
    static_assert(check_cache_policies<Policies>());
};

}  // namespace unikv

#include <unikv/detail/cache/cache.inl>
