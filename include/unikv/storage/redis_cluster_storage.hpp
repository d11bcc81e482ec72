#pragma once
/// \file
/// `RedisClusterStorage`: the distributed storage backend, a Redis Cluster (ARCHITECTURE.md §1.8) reached through
/// hiredis (Debian's `libhiredis-dev`; link `-lhiredis`), so that every engine instance pointed at one cluster
/// shares what any of them stored.
///
/// * **Objects**: one Redis string per object, under the key `<key_prefix><32 hex digits of the ObjectKey>`,
///   holding the 64-byte checked header (`page_object.hpp`) and the payload. A get checks both against the key,
///   kind and size asked for: an object of another size or kind is a miss, a short, garbled or foreign value is a
///   miss counted in `stats().corrupt` and deleted, never served. A put is `SET ... NX`: a key already stored is
///   not written again (`hit`).
/// * **Routing**: a key's hash slot is CRC16/XMODEM mod 16384 of the key, or of its `{hash tag}`
///   (`RedisClusterStorage::key_slot`); the slot map comes from CLUSTER SLOTS. A `MOVED` reply updates the slot
///   and refreshes the map, then the object is sent again; an `ASK` reply (a slot being migrated) sends it to the
///   named node after `ASKING`. At most `max_redirects` redirects per object per call.
/// * **Pipelines**: a batch goes to each node as one pipeline, every node at once, so a batch of up to
///   `max_batch` objects costs one round trip per node. A put's payload is sent from the caller's buffer (no
///   staging copy); a get's value goes from hiredis's parse buffer straight into the caller's (no reply object).
/// * **Two lanes**: reads (`get`, `exists`) and writes (`put`) run on their own worker threads
///   (`detail/storage/io_lanes.hpp`), each with its own connections, so a large write-back never queues ahead of
///   a prefetch; `poll` hands their batches back on the driving thread.
/// * **Faults are results**: a node that cannot be reached, drops the connection, or is silent for
///   `command_timeout` answers `error` for its objects of the call, while the other nodes' objects are served;
///   it is dialled again after a backoff that doubles from `backoff_initial` to `backoff_max`, so a restarted
///   node serves again without any call from the engine. Only a bad configuration throws. Every wait is bounded
///   by the timeouts and every retry loop by `max_redirects`.
///
/// **Capacity is the cluster's**: the store never evicts (`stats().evicted` stays 0). The operator bounds each
/// node with `maxmemory` and an eviction policy, `allkeys-lru` for a cluster given to the store (the store sets
/// no TTL, so `volatile-*` policies never pick its objects); with `noeviction`, a put into a full node is
/// declined (`miss`). Evictions happen inside Redis, so a stored object may later be a miss: the cache then
/// computes it again.
///
/// **Pointing it at a cluster**: list one or more of its masters in `seeds` (the rest are learned from CLUSTER
/// SLOTS; name nodes by IP address, since hiredis resolves names without a timeout), and a `key_prefix` under
/// which nothing else in the cluster writes (object keys already hash the model, layout and rank, so engines on
/// one cluster share objects exactly when they should; the prefix keeps unikv's keys apart from other data). A
/// prefix holding `{...}` puts every object in one slot (one node): leave braces out unless that is meant. The cluster must serve the slots of its live nodes while
/// others are down (`cluster-require-full-coverage no`) for a dead node to cost only its own objects.
/// `scripts/redis-cluster.sh start` starts a 3-master test cluster on 127.0.0.1:7301-7303.
///
/// Costs: submission O(objects) on the driving thread (a copy of the spans); the lanes' work O(bytes) (the
/// payload's checksum beside its copies), one round trip per node per `max_batch` objects; `poll`
/// O(objects completed). Two connections per node (one per lane); each keeps a parse buffer about as large as
/// the largest value it read. One thread drives a store.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unikv/storage/object_key.hpp>
#include <unikv/storage/page_object.hpp>
#include <unikv/storage/storage_concept.hpp>

namespace unikv {

/// Which cluster a `RedisClusterStorage` uses, and how long it waits for it.
struct RedisClusterStorageConfig {
    /// Nodes to learn the cluster from, each `"host:port"` (`"[v6 address]:port"`); at least one.
    std::vector<std::string> seeds{};
    /// Put in front of every object's key (`<prefix><32 hex digits>`), keeping unikv's objects apart from other
    /// data in the cluster.
    std::string key_prefix = "unikv:";
    /// The longest a connection to one node may take to open.
    std::chrono::milliseconds connect_timeout{500};
    /// The longest a node may stay silent (no byte taken or sent) while it owes replies; then its objects of the
    /// call are errors.
    std::chrono::milliseconds command_timeout{2000};
    /// The longest one round (one pipeline per node) may take however steadily a node progresses; bounds a call
    /// to a node that trickles.
    std::chrono::milliseconds round_timeout{30000};
    /// Redirects (MOVED or ASK) an object may follow in one call; past them it is an error.
    std::uint32_t max_redirects = 5;
    /// After a node failed, the first wait before it is dialled again; each failure in a row doubles it.
    std::chrono::milliseconds backoff_initial{100};
    /// The longest wait before a failed node is dialled again.
    std::chrono::milliseconds backoff_max{5000};
    /// Objects per round: a larger batch goes in several rounds (each one pipeline per node).
    std::size_t max_batch = 512;
};

/// The Redis Cluster store (see the file comment). Move-only: moving keeps batches in flight valid.
class RedisClusterStorage {
public:
    /// Objects are stored per component (a FULL page, an SWA window, a Mamba state), so the host tier stages
    /// them in one pool per component.
    static constexpr bool needs_separate_pools = true;

    /// Checks `config` and starts the lanes; connects lazily, so an unreachable cluster makes errors of the calls,
    /// not of the construction. Throws `logic_error` for no seeds, a seed not `host:port`, a timeout or backoff of 0,
    /// `round_timeout < command_timeout`, `backoff_max < backoff_initial`, or `max_batch` 0.
    explicit RedisClusterStorage(RedisClusterStorageConfig config);
    RedisClusterStorage(RedisClusterStorage&&) noexcept;
    RedisClusterStorage& operator=(RedisClusterStorage&&) noexcept;
    RedisClusterStorage(const RedisClusterStorage&) = delete;
    RedisClusterStorage& operator=(const RedisClusterStorage&) = delete;
    /// Finishes the batches in flight (their buffers must stay valid until then; bounded by the timeouts).
    ~RedisClusterStorage();

    // ---- the backend protocol (storage_concept.hpp) ---------------------------------------------------------
    /// `hit` for each key the cluster holds now (EXISTS, on the read lane; the value is not checked).
    StorageTicket exists(std::span<const ObjectKey> keys);
    /// Reads each object into its `bytes` on the read lane; `miss` for a key not held, held at another size or
    /// kind, or failing its checks (then deleted); `error` when its node could not be asked.
    StorageTicket get(std::span<const ObjectRead> items);
    /// Writes each object on the write lane: `hit` once stored (or when already held), `miss` when the cluster
    /// declined it (full, under `noeviction`), `error` when its node could not be asked (the object may or may
    /// not have been stored).
    StorageTicket put(std::span<const ObjectWrite> items);
    /// The batches completed since the last call, waiting up to `wait` for one when none has.
    std::span<const StorageDone> poll(std::chrono::nanoseconds wait = {});
    /// Batches submitted and not yet reported by `poll`.
    [[nodiscard]] std::size_t in_flight() const noexcept;
    /// Counters; `evicted` stays 0 (the cluster evicts, unseen).
    [[nodiscard]] StorageStats stats() const noexcept;

    // ---- inspection -------------------------------------------------------------------------------------
    /// The configuration the store was made with.
    [[nodiscard]] const RedisClusterStorageConfig& config() const noexcept;
    /// The Redis key object `key` is stored under: `key_prefix` and the key's 32 hex digits (high word first).
    [[nodiscard]] std::string key_name(ObjectKey key) const;
    /// The hash slot of Redis key `name`: CRC16 of its hash tag (the bytes between the first `{` and the next
    /// `}`, when there are any) or of all of it, mod 16384. O(name).
    [[nodiscard]] static std::uint16_t key_slot(std::string_view name) noexcept;
    /// CRC16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster hashes keys with. O(bytes).
    [[nodiscard]] static std::uint16_t crc16(std::string_view bytes) noexcept;

private:
    struct state;
    std::unique_ptr<state> state_;
};

static_assert(check_storage_backend<RedisClusterStorage>());

}  // namespace unikv

#include <unikv/detail/storage/redis_cluster_storage.inl>
