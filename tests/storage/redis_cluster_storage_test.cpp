// RedisClusterStorage against a live Redis Cluster (scripts/redis-cluster.sh start; UNIKV_REDIS_CLUSTER names
// it): the backend contract, slot routing, ASK while a slot migrates and MOVED once it has, and faults (a node
// killed and restarted, a node paused past the command timeout, corrupt values), each read back byte for byte.
// Slot hashing, bad configurations and an unreachable cluster need no cluster.

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>

#include <unikv/storage/redis_cluster_storage.hpp>

#include "redis_support.hpp"
#include "store_contract.hpp"

namespace {

using unikv::ObjectKey;
using unikv::ObjectKind;
using unikv::PageResult;
using unikv::RedisClusterStorage;
using unikv::RedisClusterStorageConfig;
using namespace unikv::test;

constexpr std::size_t redis_page = 16 << 10;


// Puts objects until a batch has some on master `m` and some elsewhere; the keys are `base`.. on.
struct redis_spread {
    std::vector<ObjectKey> keys;
    std::vector<std::vector<std::byte>> payloads;
    std::vector<bool> on_victim;
};
redis_spread redis_spread_over(const RedisClusterStorage& store, const redis_view& view, std::size_t m, std::uint64_t base,
                               std::size_t n) {
    redis_spread s{test_keys(base, n), marked_payloads(base, n, redis_page), {}};
    std::size_t there = 0;
    for (const ObjectKey& k : s.keys) {
        s.on_victim.push_back(view.owner(RedisClusterStorage::key_slot(store.key_name(k))) == m);
        there += s.on_victim.back() ? 1 : 0;
    }
    REQUIRE(there > 0);
    REQUIRE(there < n);
    return s;
}

}  // namespace

TEST_CASE("Redis Cluster hash slots are CRC16/XMODEM mod 16384 of the key or its hash tag") {
    CHECK(RedisClusterStorage::crc16("123456789") == 0x31C3);
    CHECK(RedisClusterStorage::crc16("") == 0);
    // CLUSTER KEYSLOT's answers (Redis 7.0.15).
    CHECK(RedisClusterStorage::key_slot("foo") == 12182);
    CHECK(RedisClusterStorage::key_slot("bar") == 5061);
    CHECK(RedisClusterStorage::key_slot("hello") == 866);
    CHECK(RedisClusterStorage::key_slot("somekey") == 11058);
    CHECK(RedisClusterStorage::key_slot("") == 0);
    // The hash tag: the bytes between the first '{' and the next '}', when there are any.
    CHECK(RedisClusterStorage::key_slot("{user1000}.following") == 3443);
    CHECK(RedisClusterStorage::key_slot("{user1000}.following") == RedisClusterStorage::key_slot("{user1000}.followers"));
    CHECK(RedisClusterStorage::key_slot("{user1000}.following") == RedisClusterStorage::key_slot("user1000"));
    CHECK(RedisClusterStorage::key_slot("foo{bar}{zap}") == RedisClusterStorage::key_slot("bar"));
    CHECK(RedisClusterStorage::key_slot("foo{}{bar}") == 8363);                                          // empty tag: all hashed
    CHECK(RedisClusterStorage::key_slot("foo{{bar}}zap") == RedisClusterStorage::key_slot("{bar"));    // tag "{bar"
    CHECK(RedisClusterStorage::key_slot("foo{bar") == RedisClusterStorage::crc16("foo{bar") % 16384);  // unclosed
}

TEST_CASE("RedisClusterStorage refuses a bad configuration and answers an unreachable cluster with errors") {
    const auto bad = [](auto change) {
        RedisClusterStorageConfig c{.seeds = {"127.0.0.1:7301"}};
        change(c);
        return c;
    };
    using std::chrono::milliseconds;
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.seeds.clear(); })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.seeds = {"localhost"}; })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.seeds = {"127.0.0.1:0"}; })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.seeds = {"127.0.0.1:65536"}; })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.seeds = {":7301"}; })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.connect_timeout = milliseconds(0); })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.command_timeout = milliseconds(0); })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.round_timeout = milliseconds(1); })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.backoff_max = milliseconds(1); })), unikv::logic_error);
    CHECK_THROWS_AS(RedisClusterStorage(bad([](auto& c) { c.max_batch = 0; })), unikv::logic_error);
    CHECK_NOTHROW(RedisClusterStorage(bad([](auto& c) { c.seeds = {"[::1]:7301", "127.0.0.1:7301", "127.0.0.1:7301"}; })));

    // Nothing listens on port 1: every object of every call is an error, at once, never an exception.
    RedisClusterStorage store({.seeds = {"127.0.0.1:1"}, .connect_timeout = milliseconds(200)});
    const auto start = redis_clock::now();
    const auto keys = test_keys(1, 3);
    const auto payloads = marked_payloads(1, 3, redis_page);
    CHECK(put_all(store, keys, payloads) == std::vector<PageResult>(3, PageResult::error));
    CHECK(wait_for(store, store.exists(keys)) == std::vector<PageResult>(3, PageResult::error));
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(store, keys, redis_page, read) == std::vector<PageResult>(3, PageResult::error));
    CHECK(store.stats().errors == 9);
    CHECK(redis_clock::now() - start < std::chrono::seconds(3));
    CHECK(store.key_name(ObjectKey{.high = 0x0123456789abcdefull, .low = 0xfedcba9876543210ull}) ==
          "unikv:0123456789abcdeffedcba9876543210");
}

TEST_CASE("RedisClusterStorage keeps the storage-backend contract") {
    RedisClusterStorage store(redis_config(redis_prefix("contract")));
    check_store_contract(store, 1);
    CHECK(store.stats().errors == 0);
    CHECK(store.stats().corrupt == 0);
}

TEST_CASE("RedisClusterStorage routes each object to the node serving its key's slot") {
    const redis_view view = redis_view::load();
    RedisClusterStorage store(redis_config(redis_prefix("routing")));
    const auto keys = test_keys(10, 48);
    const auto payloads = marked_payloads(10, 48, 4096);
    REQUIRE(put_all(store, keys, payloads) == std::vector<PageResult>(48, PageResult::hit));
    std::vector<redis_admin> admins;
    for (std::size_t m = 0; m < view.masters.size(); ++m) admins.push_back(view.admin(m));
    std::vector<int> per_master(view.masters.size(), 0);
    for (const ObjectKey& k : keys) {
        const std::string name = store.key_name(k);
        const std::uint16_t slot = RedisClusterStorage::key_slot(name);
        const redis_reply computed = admins[0].run({"CLUSTER", "KEYSLOT", name});
        CHECK(computed->integer == slot);
        const std::size_t m = view.owner(slot);
        ++per_master[m];
        // Stored on its slot's node, as the header and payload.
        const redis_reply value = admins[m].run({"STRLEN", name});
        CHECK(value->integer == static_cast<long long>(unikv::object_header_bytes + 4096));
    }
    for (int n : per_master) CHECK(n > 0);
    CHECK(store.stats().stored == 48);
    CHECK(store.stats().bytes_written == 48 * 4096);
}

TEST_CASE("RedisClusterStorage follows ASK while a slot migrates and MOVED once it has moved, byte for byte") {
    const redis_view view = redis_view::load();
    // Every key of these stores shares one slot (the prefix's hash tag): an empty one (earlier runs' keys stay in
    // the cluster) served by the first master.
    const redis_master& a = view.masters[0];
    const redis_master& b = view.masters[1];
    redis_admin on_a = view.admin(0), on_b = view.admin(1), on_c = view.admin(2);
    std::string tag;
    std::uint16_t slot = 0;
    for (int i = 0;; ++i) {
        REQUIRE(i < 1000);
        tag = "redirect-" + std::to_string(::getpid()) + "-" + std::to_string(i);
        slot = RedisClusterStorage::key_slot(tag);
        if (view.owner(slot) == 0 && on_a.run({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)})->integer == 0) break;
    }
    const std::string slot_text = std::to_string(slot);
    const std::string prefix = redis_prefix("redirect") + "{" + tag + "}:";
    RedisClusterStorage store(redis_config(prefix));
    RedisClusterStorage late(redis_config(prefix));  // learns the map after the migration began

    // Whatever happens below, the slot goes back to the first master, its keys deleted. Taken back the way it
    // was given (importing on the first master, which then bumps its epoch past the second's), so that no
    // heartbeat of the second master can claim it again.
    struct give_back {
        redis_admin &a_, &b_, &c_;
        const std::string& slot_;
        const std::string &a_id_, &b_id_;
        ~give_back() {  // no REQUIRE (no throw) here: best effort
            for (redis_admin* n : {&a_, &b_})
                for (int round = 0; round < 10; ++round) {
                    const redis_reply keys = n->try_run({"CLUSTER", "GETKEYSINSLOT", slot_, "100"});
                    if (keys == nullptr || keys->type != REDIS_REPLY_ARRAY || keys->elements == 0) break;
                    for (std::size_t i = 0; i < keys->elements; ++i) {
                        (void)n->try_run({"ASKING"});
                        (void)n->try_run({"DEL", std::string_view(keys->element[i]->str, keys->element[i]->len)});
                    }
                }
            (void)a_.try_run({"CLUSTER", "SETSLOT", slot_, "STABLE"});
            (void)b_.try_run({"CLUSTER", "SETSLOT", slot_, "STABLE"});
            const redis_reply importing = a_.try_run({"CLUSTER", "SETSLOT", slot_, "IMPORTING", b_id_});
            if (importing == nullptr || importing->type == REDIS_REPLY_ERROR) return;  // the first master's still
            (void)b_.try_run({"CLUSTER", "SETSLOT", slot_, "MIGRATING", a_id_});
            for (redis_admin* n : {&a_, &b_, &c_}) (void)n->try_run({"CLUSTER", "SETSLOT", slot_, "NODE", a_id_});
        }
    } restore{on_a, on_b, on_c, slot_text, a.id, b.id};

    const auto keys = test_keys(100, 6);
    const auto payloads = marked_payloads(100, 6, redis_page);
    const std::vector<ObjectKey> first4(keys.begin(), keys.begin() + 4);
    REQUIRE(put_all(store, first4, payloads) == std::vector<PageResult>(4, PageResult::hit));

    // Migration under way: keys 0 and 1 are on the second master already, 2 and 3 still on the first.
    on_b.ok({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", a.id});
    on_a.ok({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", b.id});
    on_a.ok({"MIGRATE", b.host, std::to_string(b.port), "", "0", "5000", "KEYS", store.key_name(keys[0]), store.key_name(keys[1])});
    std::vector<std::vector<std::byte>> read;
    CHECK(get_all(store, first4, redis_page, read) == std::vector<PageResult>(4, PageResult::hit));
    for (std::size_t i = 0; i < 4; ++i) CHECK(read[i] == payloads[i]);
    // A new key goes to the importing node (ASK, then ASKING there).
    const std::vector<ObjectKey> fifth{keys[4]};
    const std::vector<std::vector<std::byte>> fifth_payload{payloads[4]};
    CHECK(put_all(store, fifth, fifth_payload) == std::vector<PageResult>{PageResult::hit});
    (void)on_b.run({"ASKING"});
    CHECK(on_b.run({"EXISTS", store.key_name(keys[4])})->integer == 1);
    CHECK(on_a.run({"EXISTS", store.key_name(keys[4])})->integer == 0);
    std::vector<PageResult> five_of_six(6, PageResult::hit);
    five_of_six[5] = PageResult::miss;
    CHECK(wait_for(late, late.exists(keys)) == five_of_six);

    // Migration done: the slot is the second master's, and both stores' maps are stale.
    on_a.ok({"MIGRATE", b.host, std::to_string(b.port), "", "0", "5000", "KEYS", store.key_name(keys[2]), store.key_name(keys[3])});
    on_b.ok({"CLUSTER", "SETSLOT", slot_text, "NODE", b.id});
    on_a.ok({"CLUSTER", "SETSLOT", slot_text, "NODE", b.id});
    on_c.ok({"CLUSTER", "SETSLOT", slot_text, "NODE", b.id});
    const std::vector<ObjectKey> first5(keys.begin(), keys.begin() + 5);
    CHECK(get_all(store, first5, redis_page, read) == std::vector<PageResult>(5, PageResult::hit));
    for (std::size_t i = 0; i < 5; ++i) CHECK(read[i] == payloads[i]);
    const std::vector<ObjectKey> sixth{keys[5]};
    const std::vector<std::vector<std::byte>> sixth_payload{payloads[5]};
    CHECK(put_all(late, sixth, sixth_payload) == std::vector<PageResult>{PageResult::hit});
    CHECK(on_b.run({"EXISTS", store.key_name(keys[5])})->integer == 1);
    CHECK(get_all(store, keys, redis_page, read) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(read == payloads);
    CHECK(store.stats().errors == 0);
    CHECK(late.stats().errors == 0);
}

TEST_CASE("a killed Redis node's objects are errors while the others are served, and it serves again once restarted") {
    const redis_view view = redis_view::load();
    RedisClusterStorage store(redis_config(redis_prefix("killed")));
    const std::size_t victim = 2;  // not the seed: the store learns the cluster from a live node either way
    redis_node_process node(view, victim);
    const redis_spread s = redis_spread_over(store, view, victim, 200, 24);
    REQUIRE(put_all(store, s.keys, s.payloads) == std::vector<PageResult>(24, PageResult::hit));

    node.kill();
    const auto start = redis_clock::now();
    std::vector<std::vector<std::byte>> read;
    const auto got = get_all(store, s.keys, redis_page, read);
    for (std::size_t i = 0; i < s.keys.size(); ++i) {
        CHECK(got[i] == (s.on_victim[i] ? PageResult::error : PageResult::hit));
        if (!s.on_victim[i]) CHECK(read[i] == s.payloads[i]);
    }
    // New objects: the victim's are errors (dialled after a backoff, refused), the others stored.
    const redis_spread more = redis_spread_over(store, view, victim, 300, 24);
    const auto put = put_all(store, more.keys, more.payloads);
    for (std::size_t i = 0; i < more.keys.size(); ++i) CHECK(put[i] == (more.on_victim[i] ? PageResult::error : PageResult::hit));
    CHECK(redis_clock::now() - start < std::chrono::seconds(3));
    CHECK(store.stats().errors > 0);

    // Restarted (empty: the test cluster keeps nothing on disk), it takes and serves objects again.
    node.restart();
    const std::vector<PageResult> all_hits(24, PageResult::hit);
    CHECK(redis_eventually(std::chrono::seconds(10), [&] { return put_all(store, more.keys, more.payloads) == all_hits; }));
    CHECK(get_all(store, more.keys, redis_page, read) == std::vector<PageResult>(24, PageResult::hit));
    CHECK(read == more.payloads);
    const auto old = get_all(store, s.keys, redis_page, read);
    for (std::size_t i = 0; i < s.keys.size(); ++i) {
        CHECK(old[i] == (s.on_victim[i] ? PageResult::miss : PageResult::hit));
        if (!s.on_victim[i]) CHECK(read[i] == s.payloads[i]);
    }
}

TEST_CASE("a Redis node paused past the command timeout answers errors for its objects in bounded time, the others are served") {
    const redis_view view = redis_view::load();
    RedisClusterStorage store(redis_config(redis_prefix("paused")));
    const std::size_t victim = 1;
    const redis_spread s = redis_spread_over(store, view, victim, 400, 24);
    REQUIRE(put_all(store, s.keys, s.payloads) == std::vector<PageResult>(24, PageResult::hit));

    redis_admin admin = view.admin(victim);
    const auto paused = redis_clock::now();
    admin.ok({"CLIENT", "PAUSE", "1500"});
    std::vector<std::vector<std::byte>> read;
    const auto got = get_all(store, s.keys, redis_page, read);
    const auto took = redis_clock::now() - paused;
    for (std::size_t i = 0; i < s.keys.size(); ++i) {
        CHECK(got[i] == (s.on_victim[i] ? PageResult::error : PageResult::hit));
        if (!s.on_victim[i]) CHECK(read[i] == s.payloads[i]);
    }
    CHECK(took >= std::chrono::milliseconds(300));  // the command timeout, not an early give-up
    CHECK(took < std::chrono::milliseconds(1400));  // ... and not the pause
    // The pause over, the node serves again (after the store's backoff).
    std::this_thread::sleep_until(paused + std::chrono::milliseconds(1500));
    const std::vector<PageResult> all_hits(24, PageResult::hit);
    CHECK(redis_eventually(std::chrono::seconds(5), [&] { return get_all(store, s.keys, redis_page, read) == all_hits; }));
    CHECK(read == s.payloads);
}

TEST_CASE("a corrupt, truncated or foreign Redis value is a miss counted as corrupt, never served, and deleted") {
    const redis_view view = redis_view::load();
    RedisClusterStorage store(redis_config(redis_prefix("corrupt")));
    const auto keys = test_keys(500, 6);
    const auto payloads = marked_payloads(500, 6, redis_page);
    REQUIRE(put_all(store, keys, payloads) == std::vector<PageResult>(6, PageResult::hit));
    const auto value_of = [&](std::size_t i) {
        const std::string name = store.key_name(keys[i]);
        redis_admin admin = view.admin(view.owner(RedisClusterStorage::key_slot(name)));
        const redis_reply r = admin.run({"GET", name});
        REQUIRE(r->type == REDIS_REPLY_STRING);
        return std::string(r->str, r->len);
    };
    const auto overwrite = [&](std::size_t i, const std::string& value) {
        const std::string name = store.key_name(keys[i]);
        view.admin(view.owner(RedisClusterStorage::key_slot(name))).ok({"SET", name, value});
    };
    std::vector<std::string> stored;
    for (std::size_t i = 0; i < keys.size(); ++i) stored.push_back(value_of(i));
    REQUIRE(stored[0].size() == unikv::object_header_bytes + redis_page);
    std::string flipped = stored[3];
    flipped[unikv::object_header_bytes + 1000] ^= 0x20;
    overwrite(0, "short");                                        // shorter than a header
    overwrite(1, std::string(stored[1].size(), 'x'));             // garbage of the right length
    overwrite(2, stored[2].substr(0, stored[2].size() / 2));      // truncated
    overwrite(3, flipped);                                        // a payload byte changed
    overwrite(4, stored[5]);                                      // another object's value
    std::vector<std::vector<std::byte>> read;
    std::vector<PageResult> last_only(6, PageResult::miss);
    last_only[5] = PageResult::hit;
    CHECK(get_all(store, keys, redis_page, read) == last_only);
    CHECK(read[5] == payloads[5]);
    CHECK(store.stats().corrupt == 5);
    CHECK(store.stats().misses == 5);
    // Deleted, so that a put stores them again.
    CHECK(wait_for(store, store.exists(keys)) == last_only);
    CHECK(put_all(store, keys, payloads) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(get_all(store, keys, redis_page, read) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(read == payloads);
    CHECK(store.stats().stored == 6 + 5);
    CHECK(store.stats().errors == 0);
}
