// RedisClusterStorage put and get throughput of one batch of objects against the floor: raw hiredis pipelining
// the same SET NX / GET commands of the same stored values (header + payload) to the same nodes, routed by the
// same slot map (CLUSTER SLOTS, CRC16 of each key), one blocking context per node: append every node's
// commands, write each node's pipeline, then read each node's replies; a raw GET's payload is copied into the
// caller's buffer, as the store delivers it. Needs the cluster UNIKV_REDIS_CLUSTER names
// (scripts/redis-cluster.sh start; UNIKV_REDIS_CLUSTER=127.0.0.1:7301).
// Rows: <op><client>/object_bytes:N/objects:M; bytes_per_second counts payload bytes. A put stores fresh keys:
// those of the iteration before are deleted, untimed. The store's rows also time one raw batch after each of
// their own (untimed for the row) and report x_raw = raw time / store time over the same period, so load from
// other processes cancels out; x_raw above 1 is faster than the floor.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include <hiredis/hiredis.h>

#include <unikv/storage/redis_cluster_storage.hpp>

namespace {

using unikv::ObjectKey;
using unikv::ObjectKind;
using unikv::PageResult;
using unikv::RedisClusterStorage;
using bench_clock = std::chrono::steady_clock;

constexpr const char* no_cluster =
    "UNIKV_REDIS_CLUSTER is not set: run scripts/redis-cluster.sh start, then "
    "UNIKV_REDIS_CLUSTER=127.0.0.1:7301 build/default/bench/bench_storage_redis_storage";

// One batch's objects: keys, payloads, their Redis keys and stored values, and buffers to read them into.
struct Batch {
    std::vector<ObjectKey> keys;
    std::vector<std::vector<std::byte>> payloads;
    std::vector<std::string> names;
    std::vector<std::string> values;  // what the store stores: the 64-byte header, then the payload
    std::vector<std::vector<std::byte>> read;

    Batch(std::string_view prefix, std::size_t object_bytes, std::size_t objects) {
        for (std::size_t i = 0; i < objects; ++i) {
            const ObjectKey key{0xbe4c400000000000ull | i, (i + 1) * 0x9E3779B97F4A7C15ull};
            keys.push_back(key);
            payloads.emplace_back(object_bytes);
            for (std::size_t b = 0; b < object_bytes; b += 8) payloads.back()[b] = static_cast<std::byte>(i + b / 8);
            char hex[40];
            std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(key.high),
                          static_cast<unsigned long long>(key.low));
            names.push_back(std::string(prefix) + hex);
            std::string value(unikv::object_header_bytes + object_bytes, '\0');
            auto* header = reinterpret_cast<std::byte*>(value.data());
            unikv::store_header(unikv::make_header(key, ObjectKind::full, payloads.back()),
                                std::span<std::byte, unikv::object_header_bytes>(header, unikv::object_header_bytes));
            std::memcpy(value.data() + unikv::object_header_bytes, payloads.back().data(), object_bytes);
            values.push_back(std::move(value));
            read.emplace_back(object_bytes);
        }
    }
    [[nodiscard]] std::size_t payload_bytes() const { return payloads.size() * payloads.front().size(); }
};

struct reply_free {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
struct context_free {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using Reply = std::unique_ptr<redisReply, reply_free>;
using Context = std::unique_ptr<redisContext, context_free>;

// The floor: raw hiredis, one blocking context per master, routed by the slot map read once.
class RawHiredis {
public:
    explicit RawHiredis(const std::string& seed) : owner_(16384, -1) {
        const std::size_t colon = seed.rfind(':');
        Context c(redisConnect(seed.substr(0, colon).c_str(), std::atoi(seed.c_str() + colon + 1)));
        if (c == nullptr || c->err != 0) {
            error_ = "cannot reach " + seed + ": run scripts/redis-cluster.sh start";
            return;
        }
        const Reply slots(static_cast<redisReply*>(redisCommand(c.get(), "CLUSTER SLOTS")));
        if (slots == nullptr || slots->type != REDIS_REPLY_ARRAY) {
            error_ = "CLUSTER SLOTS failed on " + seed;
            return;
        }
        for (std::size_t r = 0; r < slots->elements; ++r) {
            const redisReply* range = slots->element[r];
            const redisReply* node = range->element[2];
            const std::string host(node->element[0]->str, node->element[0]->len);
            const int port = static_cast<int>(node->element[1]->integer);
            int index = -1;
            for (std::size_t n = 0; n < endpoints_.size(); ++n)
                if (endpoints_[n] == host + ":" + std::to_string(port)) index = static_cast<int>(n);
            if (index < 0) {
                Context node_context(redisConnect(host.c_str(), port));
                if (node_context == nullptr || node_context->err != 0) {
                    error_ = "cannot reach " + host + ":" + std::to_string(port);
                    return;
                }
                endpoints_.push_back(host + ":" + std::to_string(port));
                nodes_.push_back(std::move(node_context));
                index = static_cast<int>(nodes_.size() - 1);
            }
            for (long long s = range->element[0]->integer; s <= range->element[1]->integer; ++s)
                owner_[static_cast<std::size_t>(s)] = index;
        }
    }
    [[nodiscard]] const std::string& error() const { return error_; }

    bool put(Batch& b) {
        return pipeline(b, [&](redisContext* c, std::size_t i) {
            const char* argv[4] = {"SET", b.names[i].data(), b.values[i].data(), "NX"};
            const std::size_t lengths[4] = {3, b.names[i].size(), b.values[i].size(), 2};
            redisAppendCommandArgv(c, 4, argv, lengths);
        }, [&](std::size_t, const redisReply* r) { return r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_NIL; });
    }
    bool get(Batch& b) {
        return pipeline(b, [&](redisContext* c, std::size_t i) {
            const char* argv[2] = {"GET", b.names[i].data()};
            const std::size_t lengths[2] = {3, b.names[i].size()};
            redisAppendCommandArgv(c, 2, argv, lengths);
        }, [&](std::size_t i, const redisReply* r) {
            if (r->type != REDIS_REPLY_STRING || r->len != b.values[i].size()) return false;
            std::memcpy(b.read[i].data(), r->str + unikv::object_header_bytes, b.read[i].size());
            return true;
        });
    }
    bool del(Batch& b) {
        return pipeline(b, [&](redisContext* c, std::size_t i) {
            const char* argv[2] = {"DEL", b.names[i].data()};
            const std::size_t lengths[2] = {3, b.names[i].size()};
            redisAppendCommandArgv(c, 2, argv, lengths);
        }, [&](std::size_t, const redisReply* r) { return r->type == REDIS_REPLY_INTEGER; });
    }

private:
    // Appends each object's command to its node's context, writes every node's pipeline, then reads every node's
    // replies in order; false when a reply is not what `take` accepts.
    template <class Append, class Take>
    bool pipeline(Batch& b, Append append, Take take) {
        order_.assign(nodes_.size(), {});
        for (std::size_t i = 0; i < b.names.size(); ++i) {
            const int n = owner_[RedisClusterStorage::key_slot(b.names[i])];
            append(nodes_[static_cast<std::size_t>(n)].get(), i);
            order_[static_cast<std::size_t>(n)].push_back(i);
        }
        for (std::size_t n = 0; n < nodes_.size(); ++n) {
            int done = 0;
            while (!done)
                if (redisBufferWrite(nodes_[n].get(), &done) != REDIS_OK) return false;
        }
        bool good = true;
        for (std::size_t n = 0; n < nodes_.size(); ++n)
            for (const std::size_t i : order_[n]) {
                void* raw = nullptr;
                if (redisGetReply(nodes_[n].get(), &raw) != REDIS_OK) return false;
                const Reply r(static_cast<redisReply*>(raw));
                good = take(i, r.get()) && good;
            }
        return good;
    }

    std::vector<int> owner_;
    std::vector<std::string> endpoints_;
    std::vector<Context> nodes_;
    std::vector<std::vector<std::size_t>> order_;
    std::string error_;
};

// The store under test, with the prefix the batch's names carry.
class Store {
public:
    Store(const std::string& seed, const std::string& prefix) : store_({.seeds = {seed}, .key_prefix = prefix}) {}
    bool put(Batch& b) {
        writes_.clear();
        for (std::size_t i = 0; i < b.keys.size(); ++i) writes_.push_back({b.keys[i], ObjectKind::full, b.payloads[i]});
        return wait(store_.put(writes_));
    }
    bool get(Batch& b) {
        reads_.clear();
        for (std::size_t i = 0; i < b.keys.size(); ++i) reads_.push_back({b.keys[i], ObjectKind::full, b.read[i]});
        return wait(store_.get(reads_));
    }

private:
    // Waits (at most a minute) for batch `t`; true when every object is a hit.
    bool wait(unikv::StorageTicket t) {
        const auto deadline = bench_clock::now() + std::chrono::minutes(1);
        while (bench_clock::now() < deadline)
            for (const unikv::StorageDone& d : store_.poll(std::chrono::seconds(1)))
                if (d.ticket == t) {
                    for (const PageResult r : d.results)
                        if (r != PageResult::hit) return false;
                    return true;
                }
        return false;
    }

    RedisClusterStorage store_;
    std::vector<unikv::ObjectWrite> writes_;
    std::vector<unikv::ObjectRead> reads_;
};

double seconds_since(bench_clock::time_point t0) { return std::chrono::duration<double>(bench_clock::now() - t0).count(); }

enum class Op { put, get };

template <Op op, class Client>
void run(benchmark::State& state) {
    const char* seed = std::getenv("UNIKV_REDIS_CLUSTER");
    if (seed == nullptr || *seed == '\0') return state.SkipWithError(no_cluster);
    const std::string prefix = "unikv-bench:" + std::to_string(::getpid()) + ":" + std::to_string(state.range(0)) + ":";
    Batch batch(prefix, static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
    RawHiredis raw(seed);
    if (!raw.error().empty()) return state.SkipWithError(raw.error().c_str());
    std::unique_ptr<Store> store;
    if constexpr (std::is_same_v<Client, Store>) store = std::make_unique<Store>(seed, prefix);
    const auto one = [&](auto& client) { return op == Op::put ? client.put(batch) : client.get(batch); };
    // Warm up (connections, slot maps); a get reads what a put stored.
    if (!raw.del(batch) || !raw.put(batch) || (store && !store->put(batch)) || (store ? !one(*store) : !one(raw)))
        return state.SkipWithError("the warm-up batch failed: is the cluster ok? (scripts/redis-cluster.sh status)");
    double ours = 0, floor = 0;
    for (auto _ : state) {
        if (op == Op::put) {
            state.PauseTiming();
            raw.del(batch);
            state.ResumeTiming();
        }
        const auto t0 = bench_clock::now();
        const bool good = store ? one(*store) : one(raw);
        ours += seconds_since(t0);
        if (!good) return state.SkipWithError("a batch had an object that was not a hit");
        if (store) {
            state.PauseTiming();
            if (op == Op::put) raw.del(batch);
            const auto t1 = bench_clock::now();
            if (!one(raw)) return state.SkipWithError("a raw batch failed");
            floor += seconds_since(t1);
            state.ResumeTiming();
        }
    }
    if (op == Op::get && batch.read != batch.payloads) return state.SkipWithError("a get read other bytes than were put");
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch.payload_bytes()));
    if (store) {
        state.counters["x_raw"] = floor / ours;
        state.counters["raw_bytes_per_second"] =
            benchmark::Counter(static_cast<double>(state.iterations() * batch.payload_bytes()) / floor);
    }
    raw.del(batch);
}

void sizes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"object_bytes", "objects"});
    for (const long bytes : {64l << 10, 256l << 10, 1l << 20}) b->Args({bytes, 32});
    b->Unit(benchmark::kMillisecond)->UseRealTime();  // the work is on the store's lanes and in the servers
}

BENCHMARK_TEMPLATE(run, Op::put, Store)->Name("put/RedisClusterStorage")->Apply(sizes);
BENCHMARK_TEMPLATE(run, Op::put, RawHiredis)->Name("put/raw_hiredis")->Apply(sizes);
BENCHMARK_TEMPLATE(run, Op::get, Store)->Name("get/RedisClusterStorage")->Apply(sizes);
BENCHMARK_TEMPLATE(run, Op::get, RawHiredis)->Name("get/raw_hiredis")->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
