#pragma once
/// \file
/// Runtime configuration of a tree and the options of its calls (named fields, designated initializers).

#include <cstddef>
#include <cstdint>
#include <span>

#include <unikv/ids.hpp>
#include <unikv/tree/components.hpp>

namespace unikv {

/// Whether a tree records KV events (see `events.hpp`). Recording costs one page-chained hash per inserted page.
enum class EventMode : std::uint8_t {
    off,     ///< no events; `take_events()` stays empty
    record,  ///< stored/removed events are appended until `take_events()` takes them
};

/// Runtime configuration of a tree core. The component set is compile-time (the tree's template arguments).
struct TreeConfig {
    /// Tokens per page. Keys and values are read at page granularity; a trailing partial page is never cached.
    PageSize page_size{1};
    /// Sliding window W in tokens. Must be > 0 when the tree has `Swa`, and 0 otherwise.
    std::int32_t swa_window = 0;
    /// Whether KV events are recorded.
    EventMode events = EventMode::off;
    /// Write-through: the number of inserts over a node after which `insert` asks for a host copy of its
    /// device data (`ActionKind::write_through`). 0: never (write-back or no host tier); 1: every inserted
    /// node (`WritePolicy::through`); 2: from the second hit on (`WritePolicy::selective`'s default).
    std::uint32_t write_through_threshold = 0;
};

/// Whether a match may end on data that lives only in the host tier.
enum class HostHits : std::uint8_t {
    exclude,  ///< the best node is the best device node
    include,  ///< the best node may extend into host-only data (to be loaded back)
};

/// Why a host copy beside device data is dropped (`drop_host`).
enum class HostDrop : std::uint8_t {
    /// Its copy failed: the rows never reached it, and a later insert may write the node again.
    failed,
    /// The storage tier holds it (a buffer-only host stages copies only): the node and the parts split off it are
    /// marked stored, and no write-through of the component is emitted for them again (FULL and SWA only).
    stored,
};

/// Options of `match_prefix`.
struct MatchOptions {
    /// Whether host-only data counts for the best node.
    HostHits host_hits = HostHits::exclude;
};

/// The values a request brings to `insert`.
struct InsertValues {
    /// FULL virtual pages of the key, one per page (`key.tokens.size() / page_size` entries).
    std::span<const VirtualPage> pages;
    /// The request's SWA cursor in tokens (page aligned): SWA rows before it were already dropped by the request
    /// (tombstones), rows from it on are live. 0 means every SWA row is live. Ignored without `Swa`.
    std::int32_t swa_evicted = 0;
    /// The Mamba state at the end of the key, or none. Ignored without `Mamba`.
    StateId state{};
    /// Retention class raised on every node of the key's path (lower classes are evicted first). Insert never
    /// lowers a class.
    std::uint8_t retention = 0;
    /// Window class raised on the SWA of the nodes within one window before the key's end (Swa only; lower
    /// classes are evicted first, after the retention class): what the window there serves. 0: nothing beyond a
    /// chunk boundary; 1: a cached prefix's end (a prompt, a finished request, a sparse checkpoint); 2: a branch
    /// point, where prompts that share the prefix part. Insert never lowers a class.
    std::uint8_t window_class = 0;
};

/// What a load-back placed on device for one node and component (`commit_load_back`).
struct LoadedValue {
    /// Full: the virtual pages the node's host rows were loaded into, one per page of the node. Empty for Swa
    /// (the allocator binds the loaded SWA rows under the node's own FULL pages) and for Mamba.
    std::span<const VirtualPage> pages{};
    /// Mamba: the state slot the node's host state was loaded into. None for Full and Swa.
    StateId state{};
};

/// What `insert_host` grafts: host copies of a key's pages read back from a storage tier (a prefetch into the
/// host tier). The host pages are the caller's (allocated from the host tier); `HostInsertResult::unused` returns
/// those the tree did not take.
struct HostInsertValues {
    /// First token the FULL host pages cover (page aligned, <= key length). The key's tokens before it must be
    /// cached in the tree already (any tier) for anything to be grafted.
    std::int32_t from = 0;
    /// FULL host pages for the key's pages [from, key end): (length - from) / page_size entries.
    std::span<const HostPage> full{};
    /// SWA host pages for the last swa.size() pages of the key: the window that ends at the key's end.
    /// Without Swa: empty. With Swa: exactly min(ceil(swa_window / page_size), length / page_size) entries.
    std::span<const HostPage> swa{};
    /// The Mamba host state at the key's end. Without Mamba: invalid (none). With Mamba: valid.
    HostPage state{};
};

/// What `RadixTree::reserve` pre-sizes, so a steady state of that size never grows a buffer.
struct ReserveOptions {
    /// Nodes (root excluded) the arena, child table, free list and eviction heaps hold without growing.
    std::size_t nodes = 0;
    /// Key length in tokens that `match_prefix` and `load_back_plan` handle without growing their scratch buffers.
    std::size_t key_tokens = 0;
};

/// Whether eviction asks for backups of device data it drops from nodes that stay in the tree.
enum class EvictBackups : std::uint8_t {
    off,  ///< drop without backup (write-through: host copies already exist where the policy wants them)
    on,   ///< device data without a host copy is backed up before it is dropped: FULL leaves (demoted to
          ///< host-only), one SWA window before a dropped segment's end, Mamba states (see `RadixTree::evict`)
};

/// Options of `evict`.
struct EvictOptions {
    /// Backup behaviour for component data dropped from nodes that stay.
    EvictBackups write_back = EvictBackups::off;
};

/// The tier a lock protects.
enum class Tier : std::uint8_t {
    device,  ///< device values: protects them from `evict`
    host,    ///< host values: protects them from `evict_host`
};

/// Options of `lock`.
struct LockOptions {
    /// The tier to protect.
    Tier tier = Tier::device;
    /// The components to lock (those absent from the tree are ignored). Engines skip Mamba during decode. A
    /// device lock must include Full: SWA rows and Mamba states sit on FULL pages, and a node whose SWA or
    /// Mamba data is locked cannot be evicted, so its FULL tokens must count as protected, not evictable. A
    /// host lock may lock any subset.
    ComponentMask components = ComponentMask::all();
};

}  // namespace unikv
