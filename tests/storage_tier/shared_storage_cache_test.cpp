// Two caches over shares of one FileStorage (SharedStorage), one thread driving both: one cache computes a prompt
// (row markers in every row) and writes it through to the host tier and the store; the other, which never saw it,
// prefetches it, loads it back and reads every row as the first computed it. Each cache's storage_check sees only
// its own batches: the first's never reports the second's prefetch, even when its polls take that prefetch's answers
// from the store. Run with the shares attached directly (a bundle naming the share type) and inside an AnyStorage.

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include <unikv/storage/any_storage.hpp>
#include <unikv/storage/file_storage.hpp>
#include <unikv/storage/shared_storage.hpp>

#include "cache/handle_engine.hpp"
#include "storage/store_support.hpp"
#include "storage_tier/tier_support.hpp"

namespace shared_tier_test {

using namespace unikv;
using handle_test::HandleEngine;
using Share = StorageShare<FileStorage>;

// A bundle naming the share type: each cache attaches its share directly.
struct DirectShare {
    using layout = SwaFullLayout;
    using storage = Share;
    static Share wrap(Share s) { return s; }
};
// A bundle naming AnyStorage: each cache attaches an AnyStorage holding its share.
struct ShareInAny {
    using layout = TriPoolLayout;
    using storage = AnyStorage;
    static AnyStorage wrap(Share s) { return AnyStorage(std::move(s)); }
};
template <class C>
struct SharedPolicies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = typename C::layout;
    using storage = typename C::storage;
};

CacheConfig write_through_config() {
    CacheConfig c = handle_test::config(64);
    c.host.write = {.policy = WritePolicy::through, .threshold = 1};
    return c;
}

using tier_support::settle;
using tier_support::write_through_acks;

TEST_CASE_TEMPLATE("two caches over shares of one store: the second serves the first one's prefix row for row, and "
                   "each storage_check sees only its own batches",
                   C, DirectShare, ShareInAny) {
    using Engine = HandleEngine<SharedPolicies<C>>;
    constexpr std::int32_t ps = handle_test::page_size;
    const test::TempDir dir;
    SharedStorage<FileStorage> shared(FileStorage({.directory = dir.path(), .capacity_bytes = 64ull << 20}));
    REQUIRE(shared.store().status().empty());
    // Declared before the caches: a cache waits for its store's batches when it goes, so its store outlives it.
    typename C::storage store_a = C::wrap(shared.share());
    typename C::storage store_b = C::wrap(shared.share());
    Engine a(write_through_config());
    Engine b(write_through_config());
    a.cache.attach_storage(store_a, {.model = "m", .layout = "l"});
    b.cache.attach_storage(store_b, {.model = "m", .layout = "l"});

    // A computes the prompt (a marker in every row), writes it through to its host tier, and puts the copies.
    const auto prompt = handle_test::tokens(100, 8 * ps + 2);
    REQUIRE(a.serve(prompt, 3) == 0);
    write_through_acks(a);
    CHECK(store_a.in_flight() > 0);
    CHECK(store_b.in_flight() == 0);
    CHECK(settle(a).empty());
    CHECK(a.cache.storage_counters().put_objects > 0);
    CHECK(a.cache.storage_counters().put_failed == 0);
    CHECK(store_a.in_flight() == 0);

    // A's next puts and B's prefetch in flight together. A is polled first, until its puts are answered: its polls
    // may take B's answers from the store (B's `exists` is answered at submission), which are kept for B. A reports
    // no prefetch; B's one batch is still B's.
    const auto other = handle_test::tokens(5000, 4 * ps + 2);
    REQUIRE(a.serve(other, 1) == 0);
    write_through_acks(a);
    CHECK(store_a.in_flight() > 0);
    CHECK(b.cache.match({prompt}).best_length == 0);  // B never saw the prompt
    const PrefetchStart started = b.cache.prefetch({prompt});
    REQUIRE(started.status == PrefetchStart::Status::started);
    CHECK(store_b.in_flight() == 1);
    CHECK(settle(a).empty());
    CHECK(a.cache.storage_counters().prefetches == 0);
    CHECK(store_a.in_flight() == 0);
    CHECK(store_b.in_flight() == 1);
    CHECK(b.cache.storage_in_flight() == 1);

    // B's prefetch: its exists and its get answered to B alone; the pages grafted as host copies.
    const auto done = settle(b);
    REQUIRE(done.size() == 1);
    CHECK(done[0].id == started.id);
    REQUIRE(done[0].status == PrefetchDone::Status::grafted);
    CHECK(done[0].length == 8 * ps);
    CHECK(done[0].fetched == done[0].length);
    CHECK(b.cache.storage_counters().put_objects == 0);
    CHECK(b.cache.match({prompt}).best_length == done[0].length);

    // B admits the prompt, loads the grafted pages back and reads every row through translation: each holds the
    // marker A's forward wrote (HandleEngine::forward counts a row read back wrong).
    const std::int64_t host_hits = b.cache.reuse().host_hit_tokens;
    CHECK(b.serve(prompt, 2) == 0);
    CHECK(b.cache.reuse().host_hit_tokens - host_hits == done[0].length);
    write_through_acks(b);
    CHECK(settle(b).empty());
    CHECK(settle(a).empty());
    CHECK(a.cache.storage_counters().grafted == 0);
    CHECK(b.cache.storage_counters().grafted == 1);
    CHECK(a.broken() == "");
    CHECK(b.broken() == "");
    CHECK(shared.store().verify().empty());
    CHECK(shared.in_flight() == 0);
}

}  // namespace shared_tier_test
