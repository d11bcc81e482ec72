#pragma once
// Definitions of `RedisClusterStorage` (storage/redis_cluster_storage.hpp).

#include <algorithm>
#include <utility>

#include <unikv/detail/storage/io_lanes.hpp>
#include <unikv/detail/storage/redis_cluster_client.hpp>
#include <unikv/detail/storage/redis_slots.hpp>
#include <unikv/error.hpp>

namespace unikv {

namespace detail::storage {

// A lane's work: its own client (its connections and slot map), used by its thread only.
struct redis_run {
    redis_cluster_client* client = nullptr;
    void operator()(redis_batch& b) const { client->run(b); }
};

}  // namespace detail::storage

struct RedisClusterStorage::state {
    using batch = detail::storage::redis_batch;
    using lane = detail::storage::io_lane<batch, detail::storage::redis_run>;

    RedisClusterStorageConfig config;
    StorageStats stats{};
    std::uint64_t next_ticket = 1;
    std::size_t in_flight = 0;
    std::vector<std::unique_ptr<batch>> spare;
    std::vector<batch*> done_now;
    std::vector<std::unique_ptr<batch>> reported;  // the batches the last `poll` returned, recycled by the next
    std::vector<std::unique_ptr<batch>> owned;     // every batch submitted and not yet reported
    std::vector<StorageDone> out;
    detail::storage::completions<batch> done;
    detail::storage::redis_cluster_client read_client;
    detail::storage::redis_cluster_client write_client;
    // Last: destroyed first, so their threads finish the queued batches while everything above still exists.
    std::unique_ptr<lane> reads;
    std::unique_ptr<lane> writes;

    state(RedisClusterStorageConfig c, const detail::storage::redis_client_options& options)
        : config(std::move(c)), read_client(options), write_client(options) {
        reads = std::make_unique<lane>(done, detail::storage::redis_run{&read_client});
        writes = std::make_unique<lane>(done, detail::storage::redis_run{&write_client});
    }
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() {
        reads.reset();
        writes.reset();
    }

    batch& new_batch(StorageOp op, std::size_t n) {
        std::unique_ptr<batch> b;
        if (!spare.empty()) {
            b = std::move(spare.back());
            spare.pop_back();
        } else {
            b = std::make_unique<batch>();
        }
        b->ticket = StorageTicket{next_ticket++};
        b->op = op;
        b->items.assign(n, detail::storage::redis_item{});
        b->results.clear();
        owned.push_back(std::move(b));
        ++in_flight;
        return *owned.back();
    }
    void dispatch(batch& b, lane& to) {
        if (b.items.empty())
            done.push(&b);
        else
            to.submit(&b);
    }
    // The driving thread's side of a completed batch: the counters follow what the lane found.
    void finish(batch& b) {
        for (const detail::storage::redis_item& it : b.items) {
            if (b.op == StorageOp::get) {
                if (it.result == PageResult::hit) {
                    ++stats.hits;
                    stats.bytes_read += it.size;
                } else if (it.result == PageResult::miss) {
                    ++stats.misses;
                    if (it.corrupt) ++stats.corrupt;
                }
            } else if (b.op == StorageOp::put && it.written) {
                ++stats.stored;
                stats.bytes_written += it.size;
            }
            if (it.result == PageResult::error) ++stats.errors;
            b.results.push_back(it.result);
        }
    }
};

inline RedisClusterStorage::RedisClusterStorage(RedisClusterStorageConfig config) {
    using std::chrono::milliseconds;
    UNIKV_EXPECTS(!config.seeds.empty(), "RedisClusterStorage: name at least one node in seeds (\"host:port\")");
    detail::storage::redis_client_options options;
    for (const std::string& seed : config.seeds) {
        detail::storage::redis_endpoint at;
        UNIKV_EXPECTS(detail::storage::parse_redis_endpoint(seed, at), "RedisClusterStorage: seed \"", seed,
                      "\" is not host:port with a port 1..65535");
        if (std::find(options.seeds.begin(), options.seeds.end(), at) == options.seeds.end()) options.seeds.push_back(at);
    }
    UNIKV_EXPECTS(config.connect_timeout > milliseconds::zero(), "RedisClusterStorage: connect_timeout is ",
                  config.connect_timeout.count(), " ms; give a positive time");
    UNIKV_EXPECTS(config.command_timeout > milliseconds::zero(), "RedisClusterStorage: command_timeout is ",
                  config.command_timeout.count(), " ms; give a positive time");
    UNIKV_EXPECTS(config.round_timeout >= config.command_timeout, "RedisClusterStorage: round_timeout (",
                  config.round_timeout.count(), " ms) is shorter than command_timeout (", config.command_timeout.count(), " ms)");
    UNIKV_EXPECTS(config.backoff_initial > milliseconds::zero(), "RedisClusterStorage: backoff_initial is ",
                  config.backoff_initial.count(), " ms; give a positive time");
    UNIKV_EXPECTS(config.backoff_max >= config.backoff_initial, "RedisClusterStorage: backoff_max (", config.backoff_max.count(),
                  " ms) is shorter than backoff_initial (", config.backoff_initial.count(), " ms)");
    UNIKV_EXPECTS(config.max_batch > 0, "RedisClusterStorage: max_batch is 0; give the objects per round");
    options.key_prefix = config.key_prefix;
    options.connect_timeout = config.connect_timeout;
    options.command_timeout = config.command_timeout;
    options.round_timeout = config.round_timeout;
    options.backoff_initial = config.backoff_initial;
    options.backoff_max = config.backoff_max;
    options.max_redirects = config.max_redirects;
    options.max_batch = config.max_batch;
    state_ = std::make_unique<state>(std::move(config), options);
}
inline RedisClusterStorage::RedisClusterStorage(RedisClusterStorage&&) noexcept = default;
inline RedisClusterStorage& RedisClusterStorage::operator=(RedisClusterStorage&&) noexcept = default;
inline RedisClusterStorage::~RedisClusterStorage() = default;

inline StorageTicket RedisClusterStorage::exists(std::span<const ObjectKey> keys) {
    state& s = *state_;
    state::batch& b = s.new_batch(StorageOp::exists, keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) b.items[i].key = keys[i];
    s.dispatch(b, *s.reads);
    return b.ticket;
}

inline StorageTicket RedisClusterStorage::get(std::span<const ObjectRead> items) {
    state& s = *state_;
    state::batch& b = s.new_batch(StorageOp::get, items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        detail::storage::redis_item& it = b.items[i];
        it.key = items[i].key;
        it.kind = items[i].kind;
        it.data = items[i].bytes.data();
        it.size = items[i].bytes.size();
    }
    s.dispatch(b, *s.reads);
    return b.ticket;
}

inline StorageTicket RedisClusterStorage::put(std::span<const ObjectWrite> items) {
    state& s = *state_;
    state::batch& b = s.new_batch(StorageOp::put, items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        detail::storage::redis_item& it = b.items[i];
        it.key = items[i].key;
        it.kind = items[i].kind;
        it.data = const_cast<std::byte*>(items[i].bytes.data());  // only read: the write lane's source
        it.size = items[i].bytes.size();
    }
    s.dispatch(b, *s.writes);
    return b.ticket;
}

inline std::span<const StorageDone> RedisClusterStorage::poll(std::chrono::nanoseconds wait) {
    state& s = *state_;
    for (auto& b : s.reported) s.spare.push_back(std::move(b));
    s.reported.clear();
    s.out.clear();
    if (s.in_flight == 0) return {};
    s.done.take(s.done_now, wait);
    for (state::batch* b : s.done_now) {
        s.finish(*b);
        const auto it = std::find_if(s.owned.begin(), s.owned.end(), [&](const auto& p) { return p.get() == b; });
        s.reported.push_back(std::move(*it));
        s.owned.erase(it);
        --s.in_flight;
    }
    for (const auto& b : s.reported) s.out.push_back({.ticket = b->ticket, .op = b->op, .results = b->results});
    return s.out;
}

inline std::size_t RedisClusterStorage::in_flight() const noexcept { return state_->in_flight; }
inline StorageStats RedisClusterStorage::stats() const noexcept { return state_->stats; }
inline const RedisClusterStorageConfig& RedisClusterStorage::config() const noexcept { return state_->config; }

inline std::string RedisClusterStorage::key_name(ObjectKey key) const {
    std::string name(detail::storage::redis_name_bytes(state_->config.key_prefix), '\0');
    detail::storage::redis_write_name(state_->config.key_prefix, key, name.data());
    return name;
}
inline std::uint16_t RedisClusterStorage::key_slot(std::string_view name) noexcept {
    return detail::storage::redis_key_slot(name);
}
inline std::uint16_t RedisClusterStorage::crc16(std::string_view bytes) noexcept {
    return detail::storage::redis_crc16(bytes);
}

}  // namespace unikv
