// Randomized: the cache over a FileStorage under random requests over shared and branching prefixes, prefetches,
// device and host evictions, write acks and store polls, in each host mode and write policy a store serves. Every
// request reads every row it attends to (computed, loaded from the host, or fetched from the store) as it was
// computed, and `verify()` is healthy every few operations and at the end. A buffer-only host, once its writes and
// the store are settled, holds no copy beside device data. UNIKV_TIER_FUZZ_OPS (operations per mode, default 600;
// run 20000 or more off CI) and UNIKV_TIER_FUZZ_SEED run it longer or differently; UNIKV_TIER_FUZZ_TRACE prints each
// operation.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <unikv/storage/file_storage.hpp>

#include "cache/handle_engine.hpp"
#include "fuzz_env.hpp"
#include "storage/store_support.hpp"

namespace {

using namespace unikv;
using handle_test::HandleEngine;
using handle_test::tokens;

struct FilePolicies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = SwaFullLayout;
    using storage = FileStorage;
};
using Engine = HandleEngine<FilePolicies>;

struct Mode {
    const char* name;
    HostMode host;
    WritePolicy policy;
};

class TierFuzz {
public:
    TierFuzz(Engine& e, std::uint64_t seed) : e_(e), rng_(seed) {}

    void run(std::uint64_t ops) {
        for (std::uint64_t i = 0; i < ops; ++i) {
            INFO("operation ", i);
            step();
            if (i % 25 == 24) REQUIRE(e_.broken() == "");
        }
        settle();
        REQUIRE(e_.broken() == "");
    }

    // Acknowledges the writes in flight and drives the store until it holds no task (bounded).
    void settle() {
        for (int round = 0; round < 400 && (e_.cache.storage_in_flight() > 0 || e_.cache.writes_in_flight() > 0); ++round) {
            acknowledge_writes();
            (void)e_.cache.storage_check(std::chrono::milliseconds(20));
        }
        REQUIRE(e_.cache.storage_in_flight() == 0);
        REQUIRE(e_.cache.writes_in_flight() == 0);
    }

    std::map<std::string, int> stats;

private:
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

    // One of three roots, 2 to 10 pages and a few tokens long, a branch off it now and then: prompts share prefixes
    // of every length, and some diverge inside a page.
    std::vector<TokenId> prompt() {
        constexpr std::int32_t ps = handle_test::page_size;
        const TokenId root = 10'000 * (1 + pick(3));
        std::vector<TokenId> p = tokens(root, (2 + pick(9)) * ps + pick(ps));
        if (pick(10) < 3) p = handle_test::join(p, tokens(500'000 + 1'000 * pick(3), 1 + pick(3 * ps)));
        return p;
    }

    void acknowledge_writes() {
        (void)e_.cache.start_writing();
        e_.cache.transfer_stream().synchronize();
        (void)e_.cache.writing_check();
    }

    void report(std::span<const PrefetchDone> done) {
        for (const PrefetchDone& d : done) {
            trace("prefetch " + std::to_string(d.id) + " done: " + std::to_string(static_cast<int>(d.status)) +
                  " length " + std::to_string(d.length) + " fetched " + std::to_string(d.fetched));
            ++stats[d.status == PrefetchDone::Status::grafted ? "grafted" : "prefetch missed or timed out"];
        }
    }

    void trace(const std::string& what) const {
        if (trace_) MESSAGE(what);
    }

    void step() {
        const int dice = pick(100);
        if (dice < 40) {
            const std::vector<TokenId> p = prompt();
            const std::int32_t decodes = pick(3);
            trace("serve " + std::to_string(p.size()) + " tokens from " + std::to_string(p.front()) + " (last " +
                  std::to_string(p.back()) + "), decode " + std::to_string(decodes) + ", match " +
                  std::to_string(e_.cache.match({p}).best_length) + " device " +
                  std::to_string(e_.cache.match({p}).device_length));
            // An engine's step: the writes of the last one acknowledged and the store's answers taken first (a
            // buffer-only host's staged copies hold their rows until then).
            acknowledge_writes();
            report(e_.cache.storage_check());
            const int wrong = e_.serve(p, decodes);
            REQUIRE(wrong <= 0);  // -1: refused; never a row read wrong
            ++stats[wrong < 0 ? "refused" : "served"];
        } else if (dice < 55) {
            const std::vector<TokenId> p = prompt();
            const PrefetchStart s = e_.cache.prefetch({p});
            trace("prefetch " + std::to_string(p.size()) + " tokens from " + std::to_string(p.front()) + ": " +
                  std::to_string(static_cast<int>(s.status)));
            ++stats[s.status == PrefetchStart::Status::started ? "prefetch started" : "prefetch not needed"];
        } else if (dice < 70) {
            report(e_.cache.storage_check(std::chrono::milliseconds(pick(2) * 5)));
        } else if (dice < 82) {
            trace("acknowledge writes");
            acknowledge_writes();
        } else if (dice < 92) {
            const Component c = pick(2) == 0 ? Component::full : Component::swa;
            const std::int32_t n = 1 + pick(40);
            trace("evict " + std::string(to_string(c)) + " " + std::to_string(n));
            (void)e_.cache.evict({c, n});
            ++stats["device evicted"];
        } else {
            const Component c = pick(2) == 0 ? Component::full : Component::swa;
            const std::int32_t n = 1 + pick(40);
            trace("evict host " + std::string(to_string(c)) + " " + std::to_string(n));
            (void)e_.cache.evict_host({c, n});
            ++stats["host evicted"];
        }
    }

    Engine& e_;
    std::mt19937_64 rng_;
    bool trace_ = std::getenv("UNIKV_TIER_FUZZ_TRACE") != nullptr;
};

// Nodes holding a host copy beside device data of the same component.
std::size_t copies_beside_device(const Engine& e) {
    std::size_t n = 0;
    for (NodeRef x : e.cache.tree().nodes()) {
        const NodeInfo info = e.cache.tree().node_info(x);
        for (Component c : {Component::full, Component::swa}) n += info.device[c] && !info.host[c].empty();
    }
    return n;
}

}  // namespace

TEST_CASE("randomized: requests, prefetches, evictions and store polls in every mode read every row as computed") {
    const std::uint64_t ops = unikv::test::env_or("UNIKV_TIER_FUZZ_OPS", 600);
    const std::uint64_t seed = unikv::test::env_or("UNIKV_TIER_FUZZ_SEED", 20261207);
    for (const Mode mode : {Mode{"cache, write-through", HostMode::cache, WritePolicy::through},
                            Mode{"cache, write-back", HostMode::cache, WritePolicy::back},
                            Mode{"buffer-only, write-through", HostMode::buffer_only, WritePolicy::through}}) {
        INFO("mode ", std::string(mode.name), ", seed ", seed, ", ops ", ops);
        const unikv::test::TempDir dir;
        FileStorage store({.directory = dir.path(), .capacity_bytes = 8ull << 20});
        CacheConfig config = handle_test::config(96);
        config.host = {.total_bytes = std::size_t{8} << 10, .write = {.policy = mode.policy, .threshold = 1},
                       .mode = mode.host};
        Engine e(config);
        e.cache.attach_storage(store, {.model = "m", .layout = "l"});
        TierFuzz fuzz(e, seed + static_cast<std::uint64_t>(mode.host) * 7 + static_cast<std::uint64_t>(mode.policy));
        fuzz.run(ops);
        if (std::getenv("UNIKV_TIER_FUZZ_OPS") != nullptr)  // a long run says what it exercised
            for (const auto& [what, count] : fuzz.stats) MESSAGE(std::string(mode.name), ": ", what, " ", count);
        const StorageCounters& counters = e.cache.storage_counters();
        CHECK(counters.put_objects > 0);
        CHECK(counters.prefetches > 0);
        CHECK(fuzz.stats["served"] > 0);
        CHECK(fuzz.stats["grafted"] > 0);  // 5 to 34 per mode at 600 operations over seeds 1-8
        if (mode.host == HostMode::buffer_only) CHECK(copies_beside_device(e) == 0);
        e.cache.detach_storage();
    }
}
