// The cache with a storage tier, with row contents, over FileStorage and over the Redis test cluster alike: host
// copies go to the store (after a write-through's ack, after a write-back's backup); after device and host eviction
// a prefetch grafts the pages back as host copies and the request loads them and reads every row byte for byte;
// another cache instance over the same store serves the first one's prefix; a corrupt object, an unusable store, a
// slow prefetch, a host tier without room and a killed Redis node make the request compute, never serve a wrong row,
// and leave `verify()` healthy; a buffer-only host stages copies to and from the store and keeps none.

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <unikv/storage/file_storage.hpp>
#include <unikv/storage/redis_cluster_storage.hpp>

#include "cache/handle_engine.hpp"
#include "storage/redis_support.hpp"
#include "storage/store_support.hpp"
#include "storage_tier/tier_support.hpp"

namespace storage_tier_test {

using namespace unikv;
using handle_test::HandleEngine;
using handle_test::tokens;

// A place for a store that every `open()` reaches again (a second engine instance, a restart), a store there that
// cannot be used, and a way to damage what is stored there.
struct FileStore {
    using store_type = FileStorage;
    test::TempDir dir;
    [[nodiscard]] FileStorage open() const { return FileStorage({.directory = dir.path(), .capacity_bytes = 64ull << 20}); }
    // A directory under a regular file: nothing can be created there.
    [[nodiscard]] FileStorage unusable() const {
        { std::ofstream(dir.path() + "/file") << "x"; }
        FileStorage store({.directory = dir.path() + "/file/store", .capacity_bytes = 1 << 20});
        REQUIRE_FALSE(store.status().empty());
        return store;
    }
    // Scribbles over every third 4 KiB of every slab file: some page objects fail their checksums.
    void corrupt() const {
        for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
            if (f.path().filename().string().rfind("slab-", 0) != 0) continue;
            const int fd = ::open(f.path().c_str(), O_WRONLY);
            REQUIRE(fd >= 0);
            const std::vector<char> junk(64, 0x33);
            for (std::uint64_t off = 0; off < std::filesystem::file_size(f.path()); off += 3 * 4096)
                REQUIRE(::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(off + 16)) == 64);
            ::close(fd);
        }
    }
};

struct RedisStore {
    using store_type = RedisClusterStorage;
    std::string prefix = test::redis_prefix("tier");
    [[nodiscard]] RedisClusterStorage open() const { return RedisClusterStorage(test::redis_config(prefix)); }
    // A cluster nobody serves (port 1 of this machine): every call is an error per object.
    [[nodiscard]] RedisClusterStorage unusable() const {
        RedisClusterStorageConfig config = test::redis_config(prefix);
        config.seeds = {"127.0.0.1:1"};
        return RedisClusterStorage(config);
    }
    // Overwrites bytes inside every value stored under the prefix, on every master.
    void corrupt() const {
        const test::redis_view view = test::redis_view::load();
        std::size_t damaged = 0;
        for (std::size_t m = 0; m < view.masters.size(); ++m) {
            test::redis_admin admin = view.admin(m);
            std::string cursor = "0";
            const std::string pattern = prefix + "*";
            for (int round = 0; round < 10000; ++round) {  // SCAN ends when the cursor is 0 again
                const test::redis_reply r = admin.run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
                REQUIRE(r->type == REDIS_REPLY_ARRAY);
                cursor.assign(r->element[0]->str, r->element[0]->len);
                for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
                    const redisReply* key = r->element[1]->element[i];
                    (void)admin.run({"SETRANGE", std::string_view(key->str, key->len), "100", "garbage!"});
                    ++damaged;
                }
                if (cursor == "0") break;
            }
        }
        REQUIRE(damaged > 0);
    }
};

template <class Layout, class Fixture>
struct Stored : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = Layout;
    using storage = typename Fixture::store_type;
};
template <class Layout, class Fixture>
struct Case {
    using policies = Stored<Layout, Fixture>;
    using fixture = Fixture;
};

CacheConfig config_with(WritePolicy policy) {
    CacheConfig c = handle_test::config(64);
    c.host.write = {.policy = policy, .threshold = 1};
    return c;
}

using tier_support::settle;
using tier_support::write_through_acks;

// Empties the device and the host tiers.
template <class Engine>
void evict_everything(Engine& e) {
    (void)e.cache.evict({Component::full, 1 << 20});
    for (Component c : all_components)
        if (e.cache.allocator().spec()[c].present) (void)e.cache.evict_host({c, 1 << 20});
    for (Component c : all_components)
        if (e.cache.allocator().spec()[c].present) CHECK(e.cache.tree().host_size(c) == 0);
}

// Prefetches `prompt` and settles; returns its one outcome.
template <class Engine>
PrefetchDone prefetch(Engine& e, const std::vector<TokenId>& prompt) {
    const PrefetchStart s = e.cache.prefetch({prompt});
    REQUIRE(s.status == PrefetchStart::Status::started);
    const auto done = settle(e);
    REQUIRE(done.size() == 1);
    CHECK(done[0].id == s.id);
    return done[0];
}

// Serves `prompt`, puts its host copies to the store (write-through), settles, and empties both tiers.
template <class Engine>
void compute_store_and_forget(Engine& e, const std::vector<TokenId>& prompt) {
    REQUIRE(e.serve(prompt, 1) == 0);
    write_through_acks(e);
    (void)settle(e);
    evict_everything(e);
}

}  // namespace storage_tier_test

using namespace storage_tier_test;

#define UNIKV_TIER_CASES                                                                                        \
    Case<SwaFullLayout, FileStore>, Case<TriPoolLayout, FileStore>, Case<SwaFullLayout, RedisStore>,           \
        Case<TriPoolLayout, RedisStore>

TEST_CASE_TEMPLATE("host copies go to the store and come back after device and host eviction, row for row", C,
                   UNIKV_TIER_CASES) {
    for (WritePolicy policy : {WritePolicy::through, WritePolicy::back}) {
        CAPTURE(write_policy_name(policy));
        const typename C::fixture place;
        auto store = place.open();
        HandleEngine<typename C::policies> e(config_with(policy));
        e.cache.attach_storage(store, {.model = "test-model", .layout = "test-layout"});
        const auto prompt = tokens(100, 8 * handle_test::page_size + 2);
        REQUIRE(e.serve(prompt, 3) == 0);
        if (policy == WritePolicy::through) write_through_acks(e);
        (void)settle(e);
        if (policy == WritePolicy::back) {
            // Write-back makes host copies when the device evicts: evict, then settle the puts of the backups.
            (void)e.cache.evict({Component::full, 1 << 20});
            (void)settle(e);
        }
        CHECK(e.cache.storage_counters().put_objects > 0);
        CHECK(e.cache.storage_counters().put_failed == 0);
        evict_everything(e);
        CHECK(e.cache.match({prompt}).best_length == 0);

        const PrefetchDone got = prefetch(e, prompt);
        CHECK(got.status == PrefetchDone::Status::grafted);
        CHECK(got.length == 8 * handle_test::page_size);
        CHECK(got.fetched == got.length);
        CHECK(e.cache.match({prompt}).best_length == got.length);
        CHECK(e.broken() == "");
        // The request loads the grafted host copies back and reads every row of its prefix as computed.
        const std::int64_t host_hits = e.cache.reuse().host_hit_tokens;
        CHECK(e.serve(prompt, 2) == 0);
        CHECK(e.cache.reuse().host_hit_tokens - host_hits == got.length);
        CHECK(e.broken() == "");
    }
}

TEST_CASE_TEMPLATE("a buffer-only host stages copies: to the store until it answers (rows device-locked), from it until "
                   "the load's ack, row for row",
                   F, FileStore, RedisStore) {
    using P = Stored<SwaFullLayout, F>;
    constexpr std::int32_t ps = handle_test::page_size;
    const F place;
    auto store = place.open();
    CacheConfig config = config_with(WritePolicy::through);
    config.host.mode = HostMode::buffer_only;
    HandleEngine<P> e(config);
    e.cache.attach_storage(store, {.model = "m", .layout = "l"});
    const auto host_empty = [&] {
        return e.cache.tree().host_size(Component::full) == 0 && e.cache.tree().host_size(Component::swa) == 0;
    };
    const auto longer = tokens(900, 9 * ps + 2);
    const auto prompt = std::vector<TokenId>(longer.begin(), longer.begin() + 8 * ps + 2);

    // The write-throughs' acks hand the staged copies to the store; until it answers, eviction cannot take the rows
    // they were copied from.
    REQUIRE(e.serve(longer, 3) == 0);
    write_through_acks(e);
    CHECK(e.cache.storage_in_flight() > 0);
    CHECK_FALSE(host_empty());
    (void)e.cache.evict({Component::full, 1 << 20});
    CHECK(e.cache.match({longer}).device_length == 9 * ps);
    (void)settle(e);
    CHECK(host_empty());  // the store holds them: the host lets go
    const StorageCounters stored = e.cache.storage_counters();
    CHECK(stored.put_objects > 0);
    CHECK(stored.put_failed == 0);
    const MatchResult m = e.cache.match({longer});
    CHECK(e.cache.tree().node_info(m.best_node).stored == per_component<bool>{{true, true, false}});
    // A stored node is not written again: the same request makes no write-through.
    REQUIRE(e.serve(longer, 3) == 0);
    CHECK(e.cache.writes_in_flight() == 0);
    CHECK(e.broken() == "");

    // Device gone: the prefix is in the store only. A prefetch stages it on the host; the request loads it, reads
    // every row as computed, and the staged copies go at the load's ack.
    evict_everything(e);
    CHECK(e.cache.match({longer}).best_length == 0);
    const PrefetchDone got = prefetch(e, longer);
    REQUIRE(got.status == PrefetchDone::Status::grafted);
    CHECK(got.length == 9 * ps);
    CHECK_FALSE(host_empty());
    CHECK(e.cache.match({longer}).best_length == 9 * ps);
    std::int64_t host_hits = e.cache.reuse().host_hit_tokens;
    CHECK(e.serve(longer, 2) == 0);
    CHECK(e.cache.reuse().host_hit_tokens - host_hits == got.length);
    write_through_acks(e);  // the decoded page is new: staged for the store
    (void)settle(e);
    CHECK(host_empty());
    CHECK(e.broken() == "");

    // A staged load onto resident FULL pages binds only the missing window rows: the first 8 pages on device
    // without SWA rows (evicted), the store holding the 9th page and its window. The prefetch stages page 8 and the
    // window's SWA pages 7 and 8; the load binds SWA rows under resident page 7 and reads them back.
    evict_everything(e);
    REQUIRE(e.serve(prompt, 1) == 0);
    write_through_acks(e);
    (void)settle(e);
    LockReceipt keep = e.cache.lock(e.cache.match({prompt}).best_node, {.components = ComponentMask::of(Component::full)});
    (void)e.cache.evict({Component::swa, 1 << 20});
    e.cache.unlock(std::move(keep));
    CHECK(e.cache.match({longer}).full_length == 8 * ps);
    CHECK(e.cache.match({longer}).best_length < 8 * ps);
    const PrefetchDone tail = prefetch(e, longer);
    REQUIRE(tail.status == PrefetchDone::Status::grafted);
    CHECK(tail.fetched == ps);
    CHECK(e.cache.tree().host_size(Component::swa) == 2 * ps);
    host_hits = e.cache.reuse().host_hit_tokens;
    CHECK(e.serve(longer, 1) == 0);
    CHECK(e.cache.reuse().host_hit_tokens > host_hits);
    write_through_acks(e);
    (void)settle(e);
    CHECK(host_empty());
    CHECK(e.broken() == "");
}

TEST_CASE("a buffer-only host is refused under write-back, at construction and at an attach's switch") {
    using P = Stored<SwaFullLayout, FileStore>;
    CacheConfig config = config_with(WritePolicy::back);
    config.host.mode = HostMode::buffer_only;
    CHECK_THROWS_WITH_AS(HandleEngine<P>{config}, doctest::Contains("use WritePolicy::through or WritePolicy::selective"),
                         unikv::logic_error);
    config.host.write = {.policy = WritePolicy::through, .threshold = 1};
    HandleEngine<P> e(config);
    const FileStore place;
    auto store = place.open();
    CHECK_THROWS_WITH_AS(e.cache.attach_storage(store, {.model = "m", .layout = "l", .write = HostWrites{.policy = WritePolicy::back}}),
                         doctest::Contains("HostMode::buffer_only"), unikv::logic_error);
    CHECK(e.cache.storage_counters().prefetches == 0);
    const PrefetchStart s = e.cache.prefetch({tokens(1, 3 * handle_test::page_size)});
    CHECK(s.status == PrefetchStart::Status::no_storage);  // nothing was attached
}

TEST_CASE_TEMPLATE("a second cache instance over the same store serves the first one's prefix byte for byte", F,
                   FileStore, RedisStore) {
    using P = Stored<TriPoolLayout, F>;
    const F place;
    const auto prompt = tokens(500, 6 * handle_test::page_size);
    {
        auto store = place.open();
        HandleEngine<P> first(config_with(WritePolicy::through));
        first.cache.attach_storage(store, {.model = "m", .layout = "l"});
        REQUIRE(first.serve(prompt, 1) == 0);
        write_through_acks(first);
        (void)settle(first);
        first.cache.detach_storage();
    }
    auto store = place.open();
    HandleEngine<P> second(config_with(WritePolicy::through));
    // Another model's namespace shares nothing with it.
    second.cache.attach_storage(store, {.model = "other", .layout = "l"});
    CHECK(prefetch(second, prompt).status == PrefetchDone::Status::missed);
    second.cache.detach_storage();
    second.cache.attach_storage(store, {.model = "m", .layout = "l"});
    const PrefetchDone got = prefetch(second, prompt);
    REQUIRE(got.status == PrefetchDone::Status::grafted);
    CHECK(got.length == 6 * handle_test::page_size);
    // A follow-up turn: its prompt extends the stored one (a prompt's own last token is always computed, so a
    // state at its end serves only longer prompts). Every row reads as the first instance computed it.
    CHECK(second.serve(handle_test::join(prompt, tokens(7000, 3)), 1) == 0);
    CHECK(second.cache.reuse().host_hit_tokens == got.length);
    CHECK(second.broken() == "");
}

TEST_CASE_TEMPLATE("a corrupt object, an unusable store or a slow prefetch make the request compute, never serve a wrong row",
                   F, FileStore, RedisStore) {
    using Swa = Stored<SwaFullLayout, F>;
    using Tri = Stored<TriPoolLayout, F>;
    const auto prompt = tokens(900, 5 * handle_test::page_size);
    SUBCASE("a corrupt object: the prefetch misses (all or nothing for the window) and the request computes") {
        const F place;
        auto store = place.open();
        HandleEngine<Swa> e(config_with(WritePolicy::through));
        e.cache.attach_storage(store, {.model = "m"});
        compute_store_and_forget(e, prompt);
        place.corrupt();
        const PrefetchDone got = prefetch(e, prompt);
        CHECK(got.status == PrefetchDone::Status::missed);
        CHECK(e.cache.storage_counters().get_failed > 0);
        CHECK(store.stats().corrupt > 0);
        CHECK(e.cache.match({prompt}).best_length == 0);
        CHECK(e.serve(prompt, 1) == 0);
        CHECK(e.broken() == "");
    }
    SUBCASE("a store that cannot be used: puts and prefetches fail per object, the cache keeps serving") {
        const F place;
        auto store = place.unusable();
        HandleEngine<Tri> e(config_with(WritePolicy::through));
        e.cache.attach_storage(store);
        compute_store_and_forget(e, prompt);
        CHECK(e.cache.storage_counters().put_objects == 0);
        CHECK(e.cache.storage_counters().put_failed > 0);
        CHECK(prefetch(e, prompt).status == PrefetchDone::Status::missed);
        CHECK(e.serve(prompt, 1) == 0);
        CHECK(e.broken() == "");
    }
    SUBCASE("a prefetch past its timeout is reported timed out; its pages still land as host copies") {
        const F place;
        auto store = place.open();
        HandleEngine<Swa> e(config_with(WritePolicy::through));
        e.cache.attach_storage(store, {.prefetch_timeout = std::chrono::milliseconds(1)});
        compute_store_and_forget(e, prompt);
        REQUIRE(e.cache.prefetch({prompt}).status == PrefetchStart::Status::started);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const auto done = settle(e);
        REQUIRE(done.size() == 1);
        CHECK(done[0].status == PrefetchDone::Status::timed_out);
        CHECK(e.cache.storage_counters().timed_out == 1);
        CHECK(e.cache.storage_counters().grafted == 1);  // it finished after the report
        CHECK(e.cache.match({prompt}).best_length == 5 * handle_test::page_size);
        CHECK(e.serve(prompt, 1) == 0);
        CHECK(e.broken() == "");
    }
}

TEST_CASE("a prefetch whose window finds no host room misses and gives back the FULL pages it took") {
    using P = Stored<SwaFullLayout, FileStore>;
    const FileStore place;
    const auto prompt = tokens(300, 6 * handle_test::page_size);
    {
        auto store = place.open();
        HandleEngine<P> writer(config_with(WritePolicy::through));
        writer.cache.attach_storage(store, {.model = "m"});
        compute_store_and_forget(writer, prompt);
    }
    // Room for the FULL pages, not for the window's SWA pages (two, at a window of two pages).
    CacheConfig small = config_with(WritePolicy::through);
    small.host.pages[Component::full] = 16;
    small.host.pages[Component::swa] = 1;
    auto store = place.open();  // outlives the cache it is attached to
    HandleEngine<P> e(small);
    e.cache.attach_storage(store, {.model = "m"});
    const std::int32_t used_full = e.cache.host_pools().used(Component::full);
    CHECK(prefetch(e, prompt).status == PrefetchDone::Status::missed);
    CHECK(e.cache.host_pools().used(Component::full) == used_full);
    CHECK(e.cache.match({prompt}).best_length == 0);
    CHECK(e.serve(prompt, 1) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("a Redis node killed while its objects are stored: the prefetch misses, the request computes; restarted, "
          "it serves them byte for byte") {
    using P = Stored<TriPoolLayout, RedisStore>;
    const RedisStore place;
    auto store = place.open();
    HandleEngine<P> e(config_with(WritePolicy::through));
    e.cache.attach_storage(store, {.model = "m"});
    const auto prompt = tokens(1300, 12 * handle_test::page_size);
    compute_store_and_forget(e, prompt);
    const test::redis_view view = test::redis_view::load();
    {
        test::redis_node_process node(view, 1);
        node.kill();
        // Twelve pages' FULL objects and a window and a state: some live on the dead node, so the all-or-nothing
        // hybrid prefetch misses (asking for them is an error), and the request computes every row itself; its
        // puts to the dead node fail, the others are stored.
        const std::uint64_t errors = store.stats().errors;
        CHECK(prefetch(e, prompt).status == PrefetchDone::Status::missed);
        CHECK(store.stats().errors > errors);
        const std::int64_t put_failed = e.cache.storage_counters().put_failed;
        compute_store_and_forget(e, prompt);
        CHECK(e.cache.storage_counters().put_failed > put_failed);
        CHECK(e.broken() == "");
        node.restart();
    }
    // The node kept nothing (no persistence): what it held is gone. Past the store's backoff (200 ms at most) it is
    // dialled again; the request's puts reach it, and a prefetch serves the whole prefix.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    compute_store_and_forget(e, prompt);
    const PrefetchDone got = prefetch(e, prompt);
    REQUIRE(got.status == PrefetchDone::Status::grafted);
    CHECK(e.serve(handle_test::join(prompt, tokens(9000, 2)), 1) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("attaching with a switch from write-back to write-through: refused with nothing changed over a host copy "
          "that hangs from an unbacked parent, taken over chained host copies") {
    using P = Stored<SwaFullLayout, FileStore>;
    const FileStore place;
    auto store = place.open();
    HandleEngine<P> e(config_with(WritePolicy::back));
    const auto shared = tokens(2000, 4 * handle_test::page_size);
    const auto first = handle_test::join(shared, tokens(2100, 3 * handle_test::page_size));
    const auto second = handle_test::join(shared, tokens(2200, 3 * handle_test::page_size));
    REQUIRE(e.serve(first, 1) == 0);
    REQUIRE(e.serve(second, 1) == 0);
    // Write-back backs a leaf up when the device evicts it: a host copy under the shared part, which has none.
    (void)e.cache.evict({Component::full, 1});
    REQUIRE(e.cache.tree().host_size(Component::full) > 0);
    const HostChainBreak b = e.cache.tree().host_chain_break();
    REQUIRE(b.kind == HostChainBreak::Kind::under_unbacked_parent);
    CHECK(b.start >= 4 * handle_test::page_size);  // in the second half: the shared part has no host copy
    const std::string expected = "cannot switch from write_back to write_through: the node of tokens [" +
                                 std::to_string(b.start) + ", " + std::to_string(b.end) +
                                 ") holds a host copy under a parent without a FULL host copy";

    const std::int64_t host_before = e.cache.tree().host_size(Component::full);
    CHECK_THROWS_WITH_AS(e.cache.attach_storage(store, {.model = "m", .write = HostWrites{.policy = WritePolicy::through}}),
                         doctest::Contains(expected.c_str()),
                         logic_error);
    CHECK_FALSE(e.cache.storage_attached());
    CHECK(e.cache.writes().policy == WritePolicy::back);
    CHECK(e.cache.tree().config().write_through_threshold == 0);
    CHECK(e.cache.tree().host_size(Component::full) == host_before);
    CHECK_THROWS_WITH_AS(e.cache.attach_storage(store, {.write = HostWrites{.policy = WritePolicy::none}}),
                         doctest::Contains("write policy none makes no host copies"), logic_error);
    CHECK_FALSE(e.cache.storage_attached());
    CHECK(e.broken() == "");

    // With the host tier emptied the shape holds: the switch is taken, and the next prompt is written through to
    // the host tier and the store at its ack, then served back from the store row for row.
    (void)e.cache.evict_host({Component::full, 1 << 20});
    (void)e.cache.evict_host({Component::swa, 1 << 20});
    CHECK_FALSE(e.cache.tree().host_chain_break());
    e.cache.attach_storage(store, {.model = "m", .write = HostWrites{.policy = WritePolicy::through}});
    CHECK(e.cache.writes().policy == WritePolicy::through);
    CHECK(e.cache.tree().config().write_through_threshold == 1);
    const auto third = tokens(3000, 5 * handle_test::page_size);
    compute_store_and_forget(e, third);
    CHECK(e.cache.storage_counters().put_objects > 0);
    const PrefetchDone got = prefetch(e, third);
    REQUIRE(got.status == PrefetchDone::Status::grafted);
    CHECK(e.serve(handle_test::join(third, tokens(3100, 2)), 1) == 0);
    CHECK(e.broken() == "");
}

TEST_CASE("a write-through whose node a later request splits before the ack goes to the store whole") {
    using P = Stored<SwaFullLayout, FileStore>;
    const FileStore place;
    auto store = place.open();
    HandleEngine<P> e(config_with(WritePolicy::through));
    e.cache.attach_storage(store, {.model = "m"});
    const auto first = tokens(4000, 8 * handle_test::page_size);
    REQUIRE(e.serve(first, 1) == 0);  // its write-throughs are queued, not acknowledged
    // A second prompt shares the first half: the insert splits the node whose copy is in flight.
    const auto second = handle_test::join(std::vector<TokenId>(first.begin(), first.begin() + 4 * handle_test::page_size),
                                          tokens(4500, 3 * handle_test::page_size));
    REQUIRE(e.serve(second, 1) == 0);
    write_through_acks(e);
    (void)settle(e);
    CHECK(e.cache.storage_counters().put_failed == 0);
    evict_everything(e);
    // Both halves of the split copy are stored: the whole first prompt comes back from the store.
    const PrefetchDone got = prefetch(e, first);
    REQUIRE(got.status == PrefetchDone::Status::grafted);
    CHECK(got.length == 8 * handle_test::page_size);
    CHECK(e.serve(handle_test::join(first, tokens(4900, 2)), 1) == 0);
    CHECK(e.cache.reuse().host_hit_tokens >= got.length);
    CHECK(e.broken() == "");
}

TEST_CASE("a write-policy switch at the attach waits for the host writes in flight, refused with nothing changed") {
    using P = Stored<SwaFullLayout, FileStore>;
    const FileStore place;
    auto store = place.open();
    HandleEngine<P> e(config_with(WritePolicy::through));
    REQUIRE(e.serve(tokens(5000, 6 * handle_test::page_size), 1) == 0);
    REQUIRE(e.cache.writes_in_flight() > 0);
    CHECK_THROWS_WITH_AS(e.cache.attach_storage(store, {.write = HostWrites{.policy = WritePolicy::back}}),
                         doctest::Contains("switching the write policy with"), logic_error);
    CHECK_FALSE(e.cache.storage_attached());
    CHECK(e.cache.writes().policy == WritePolicy::through);
    write_through_acks(e);
    REQUIRE(e.cache.writes_in_flight() == 0);
    e.cache.attach_storage(store, {.write = HostWrites{.policy = WritePolicy::back}});
    CHECK(e.cache.writes().policy == WritePolicy::back);
    CHECK(e.cache.tree().config().write_through_threshold == 0);
    CHECK(e.broken() == "");
}
