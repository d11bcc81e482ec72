#pragma once
/// \file
/// The values a `Cache` takes and returns (named fields): its runtime configuration, a request's rows and finish
/// options, what its load-backs, evictions, write-throughs and inserts did, the bytes it moved, its reuse
/// counters, and the tag of its transfers. The cache itself is `cache.hpp`.

#include <cstdint>
#include <span>

#include <unikv/arena/model.hpp>
#include <unikv/budget/asks.hpp>
#include <unikv/cache/retention.hpp>
#include <unikv/component.hpp>
#include <unikv/host/host_pool_concept.hpp>
#include <unikv/ids.hpp>
#include <unikv/transfer/load_back.hpp>
#include <unikv/tree/handles.hpp>
#include <unikv/tree/options.hpp>

namespace unikv {

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
    /// Where SWA windows and Mamba states are kept besides chunk ends and request ends (`cache/retention.hpp`).
    RetentionConfig retention{};
};

/// Prompt reuse of the requests `Cache::admit` started, by what served or missed it (tokens; `Cache::reuse`).
struct ReuseCounters {
    /// Requests admitted (first admissions of handles; chunks and restores are not counted again).
    std::int64_t requests = 0;
    /// Their prompt tokens.
    std::int64_t prompt_tokens = 0;
    /// Served from the device.
    std::int64_t device_hit_tokens = 0;
    /// Served by a load-back from the host.
    std::int64_t host_hit_tokens = 0;
    /// Not served although the tree held their FULL pages: an SWA window was missing at their end.
    std::int64_t missing_window_tokens = 0;
    /// Not served although the tree held their FULL pages: no Mamba state at their end.
    std::int64_t missing_state_tokens = 0;
    /// The rest: FULL pages not cached (never seen, evicted, or still being computed by a running request).
    [[nodiscard]] std::int64_t not_cached_tokens() const noexcept {
        return prompt_tokens - device_hit_tokens - host_hit_tokens - missing_window_tokens - missing_state_tokens;
    }
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
    /// The SWA rows the backup keeps: those of the last `window_tokens` tokens (whole pages); 0 for the model's
    /// window. A restore gives the same value. Ignored without Swa.
    std::int32_t window_tokens = 0;
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
    /// Window class of the window before the end (`InsertValues::window_class`): a finished request's end.
    std::uint8_t window_class = window_class_end;
};

/// What `Cache::load_back` did.
struct [[nodiscard]] LoadBackStart {
    /// How the call ended.
    enum class Status : std::uint8_t {
        queued,      ///< the load is queued under `id`: `start_loading`, then `loading_check` acknowledges it
        device_hit,  ///< nothing to load: every component serves the node from the device
        short_of_pages,  ///< a pool stayed short once relief freed nothing more (`failure`); everything rolled back
        /// an earlier load still in flight copies part of what this one needs (`LoadBackStep::loading`): nothing
        /// was done; acknowledge it (`loading_check`) and match again
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

/// One load acknowledged by `Cache::loading_check`.
struct LoadDone {
    /// The id `load_back` returned.
    std::uint64_t id = 0;
    /// The node loaded.
    NodeRef node{};
    /// True when the copy succeeded and the tree serves the node from the device now; false when it failed:
    /// its destinations were freed and the node is as before the load (host-only where it was).
    bool committed = false;
};

/// What an eviction did (`Cache::evict`).
struct Eviction {
    /// Device pages freed per component (Mamba: states), backed-up data included.
    per_component<std::int64_t> pages_freed{};
    /// Backups whose copy was made and recorded as the host value.
    std::int32_t backed_up = 0;
    /// Backups recorded as no copy (no host room, or the copy failed): their data was dropped.
    std::int32_t dropped = 0;
};

/// One write-through acknowledged by `Cache::writing_check`.
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

/// What `Cache::insert` did.
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

/// Bytes a cache has moved so far (`Cache::bytes_moved`), each since construction.
struct BytesMoved {
    /// Within the arena: compaction's page moves on the compute stream.
    std::uint64_t compaction = 0;
    /// Host to device: load-backs and restores submitted on the transfer stream.
    std::uint64_t loaded = 0;
    /// Device to host: write-throughs, write-backs and retractions submitted on the transfer stream.
    std::uint64_t written = 0;
};

/// The tag of a cache transfer on its controller, and of its ticket: which kind, and its id within that kind (a
/// load's id, a backup's number in its eviction run, a write-through's id; a retraction's copies are drained
/// within their call and carry none). Write-backs and write-throughs share the write lane, so the kind tells
/// their acks apart.
struct CacheTag {
    /// What the transfer is.
    /// `store_put` and `prefetch` are batches on the storage tier, acknowledged by the store, not the controller.
    enum class Kind : std::uint8_t { load, write_back, write_through, retraction, store_put, prefetch };
    Kind kind = Kind::load;
    std::uint64_t id = 0;
};

}  // namespace unikv
