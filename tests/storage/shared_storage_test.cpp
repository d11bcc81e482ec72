// SharedStorage: shares of one FileStorage each see only their own batches (every ticket returned once, to the share
// that submitted it, answers filed for a share that polls later returned to it then), read each other's objects
// back byte for byte, count their own batches in flight, survive a share destroyed with batches in flight, move
// safely, and keep the backend contract directly and inside an AnyStorage.

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <unikv/storage/any_storage.hpp>
#include <unikv/storage/file_storage.hpp>
#include <unikv/storage/shared_storage.hpp>

#include "store_contract.hpp"

namespace shared_storage_test {

using namespace unikv;
using namespace unikv::test;
using Shared = SharedStorage<FileStorage>;
using Share = StorageShare<FileStorage>;

static_assert(check_storage_backend<Share>());
static_assert(Share::needs_separate_pools == FileStorage::needs_separate_pools);
static_assert(!std::is_copy_constructible_v<Share> && std::is_nothrow_move_constructible_v<Share>);
static_assert(!std::is_copy_constructible_v<Shared> && std::is_nothrow_move_constructible_v<Shared>);

constexpr std::size_t object_bytes = 16 << 10;

Shared open_shared(const TempDir& dir) {
    FileStorage store({.directory = dir.path(), .capacity_bytes = 64ull << 20});
    REQUIRE(store.status().empty());
    return Shared(std::move(store));
}

// What one share polled back: each ticket's results, and every ticket it saw (to catch one returned twice).
struct Polled {
    std::map<std::uint64_t, std::vector<PageResult>> results;
    std::map<std::uint64_t, StorageOp> ops;
    std::size_t answers = 0;
};

// Polls `share` once with `wait`, recording what it returned; every ticket must be one of `mine` (submitted by it)
// and returned for the first time.
void poll_once(Share& share, std::chrono::nanoseconds wait, const std::set<std::uint64_t>& mine, Polled& seen) {
    for (const StorageDone& d : share.poll(wait)) {
        CAPTURE(d.ticket.value);
        CHECK(mine.count(d.ticket.value) == 1);
        CHECK(seen.results.count(d.ticket.value) == 0);
        seen.results[d.ticket.value].assign(d.results.begin(), d.results.end());
        seen.ops[d.ticket.value] = d.op;
        ++seen.answers;
    }
}

// Polls `share` until ticket `t` is among what it returned (bounded in time); returns its results.
std::vector<PageResult> poll_until(Share& share, StorageTicket t, const std::set<std::uint64_t>& mine, Polled& seen) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (seen.results.count(t.value) == 0) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("a share's batch did not come back in time");
        poll_once(share, std::chrono::milliseconds(50), mine, seen);
    }
    return seen.results[t.value];
}

std::vector<ObjectWrite> writes(std::span<const ObjectKey> keys, std::span<const std::vector<std::byte>> payloads) {
    std::vector<ObjectWrite> out;
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back({keys[i], ObjectKind::full, payloads[i]});
    return out;
}
std::vector<ObjectRead> reads(std::span<const ObjectKey> keys, std::vector<std::vector<std::byte>>& buffers) {
    buffers.assign(keys.size(), std::vector<std::byte>(object_bytes, std::byte{0xEE}));
    std::vector<ObjectRead> out;
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back({keys[i], ObjectKind::full, buffers[i]});
    return out;
}

TEST_CASE("shares of one FileStorage each poll back exactly their own batches; one reads what another put, byte for byte") {
    const TempDir dir;
    Shared shared = open_shared(dir);
    Share a = shared.share();
    Share b = shared.share();
    CHECK(shared.shares() == 2);
    std::set<std::uint64_t> mine_a, mine_b;
    Polled seen_a, seen_b;

    // A puts objects with distinct payloads; B, with nothing in flight, polls nothing and takes nothing of A's.
    const auto keys = test_keys(100, 6);
    const auto payloads = marked_payloads(100, 6, object_bytes);
    const auto put_items = writes(keys, payloads);
    const StorageTicket put = a.put(put_items);
    mine_a.insert(put.value);
    CHECK(a.in_flight() == 1);
    CHECK(b.in_flight() == 0);
    poll_once(b, std::chrono::milliseconds(20), mine_b, seen_b);
    CHECK(seen_b.answers == 0);
    CHECK(poll_until(a, put, mine_a, seen_a) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(seen_a.ops[put.value] == StorageOp::put);
    CHECK(a.in_flight() == 0);

    // B asks whether they are there and reads them back: its own tickets only, every byte as A wrote it.
    std::vector<std::vector<std::byte>> got;
    const auto get_items = reads(keys, got);
    const StorageTicket there = b.exists(keys);
    const StorageTicket get = b.get(get_items);
    mine_b.insert({there.value, get.value});
    CHECK(there != get);
    CHECK(b.in_flight() == 2);
    CHECK(a.in_flight() == 0);
    CHECK(poll_until(b, there, mine_b, seen_b) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(poll_until(b, get, mine_b, seen_b) == std::vector<PageResult>(6, PageResult::hit));
    CHECK(seen_b.ops[there.value] == StorageOp::exists);
    CHECK(seen_b.ops[get.value] == StorageOp::get);
    CHECK(got == payloads);
    CHECK(b.in_flight() == 0);
    CHECK(seen_a.answers == 1);

    // Answers filed for a share that polls later are returned to it later: `exists` is answered at submission, so
    // B's one poll of the store takes A's answer too and files it for A; A's next poll (wait 0) returns it.
    const StorageTicket a_there = a.exists(std::span<const ObjectKey>(keys).first(2));
    const StorageTicket b_there = b.exists(test_keys(900, 3));
    mine_a.insert(a_there.value);
    mine_b.insert(b_there.value);
    CHECK(a.in_flight() == 1);
    CHECK(b.in_flight() == 1);
    poll_once(b, {}, mine_b, seen_b);
    CHECK(seen_b.results.count(b_there.value) == 1);
    CHECK(seen_b.results[b_there.value] == std::vector<PageResult>(3, PageResult::miss));
    CHECK(shared.in_flight() == 0);  // the store handed both back: A's waits in A's inbox
    CHECK(a.in_flight() == 1);
    poll_once(a, {}, mine_a, seen_a);
    CHECK(seen_a.results.count(a_there.value) == 1);
    CHECK(seen_a.results[a_there.value] == std::vector<PageResult>(2, PageResult::hit));
    CHECK(a.in_flight() == 0);

    // Many batches of both, in flight together, polled in a random order with random waits: every ticket comes back
    // exactly once, to the share that submitted it, with its own results; every get reads its object's bytes.
    std::mt19937 rng(7);
    const std::vector<std::vector<std::byte>> more_payloads = marked_payloads(2000, 24, object_bytes);
    const auto more_keys = test_keys(2000, 24);
    std::vector<std::vector<ObjectWrite>> put_batches;
    std::vector<std::vector<std::vector<std::byte>>> read_buffers(8);
    std::vector<std::vector<ObjectRead>> read_batches;
    std::map<std::uint64_t, std::size_t> put_of, read_of;  // ticket -> batch
    std::set<std::uint64_t> all_a, all_b;
    for (std::size_t i = 0; i < 8; ++i) {
        Share& s = i % 2 == 0 ? a : b;
        std::set<std::uint64_t>& mine = i % 2 == 0 ? mine_a : mine_b;
        put_batches.push_back(writes(std::span<const ObjectKey>(more_keys).subspan(3 * i, 3),
                                     std::span<const std::vector<std::byte>>(more_payloads).subspan(3 * i, 3)));
        const StorageTicket p = s.put(put_batches.back());
        // The other share reads what A put at first (stored already), into its own buffers.
        Share& r = i % 2 == 0 ? b : a;
        std::set<std::uint64_t>& rmine = i % 2 == 0 ? mine_b : mine_a;
        read_batches.push_back(reads(std::span<const ObjectKey>(keys).subspan(i % 4, 2), read_buffers[i]));
        const StorageTicket g = r.get(read_batches.back());
        mine.insert(p.value);
        rmine.insert(g.value);
        (i % 2 == 0 ? all_a : all_b).insert(p.value);
        (i % 2 == 0 ? all_b : all_a).insert(g.value);
        put_of[p.value] = i;
        read_of[g.value] = i;
    }
    CHECK(a.in_flight() == 8);
    CHECK(b.in_flight() == 8);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const std::size_t before_a = seen_a.answers, before_b = seen_b.answers;
    while (a.in_flight() + b.in_flight() > 0) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        const std::chrono::milliseconds wait(rng() % 3 == 0 ? 0 : 10);
        if (rng() % 2 == 0) {
            poll_once(a, wait, mine_a, seen_a);
        } else {
            poll_once(b, wait, mine_b, seen_b);
        }
    }
    CHECK(seen_a.answers - before_a == 8);
    CHECK(seen_b.answers - before_b == 8);
    for (const auto& [ticket, i] : put_of) {
        Polled& seen = all_a.count(ticket) != 0 ? seen_a : seen_b;
        CHECK(seen.results[ticket] == std::vector<PageResult>(3, PageResult::hit));
        CHECK(seen.ops[ticket] == StorageOp::put);
    }
    for (const auto& [ticket, i] : read_of) {
        Polled& seen = all_a.count(ticket) != 0 ? seen_a : seen_b;
        CHECK(seen.results[ticket] == std::vector<PageResult>(2, PageResult::hit));
        CHECK(seen.ops[ticket] == StorageOp::get);
        CHECK(read_buffers[i][0] == payloads[i % 4]);
        CHECK(read_buffers[i][1] == payloads[i % 4 + 1]);
    }
    // Each share's puts read back through the other, byte for byte.
    std::vector<std::vector<std::byte>> all;
    const auto all_items = reads(more_keys, all);
    const StorageTicket last = b.get(all_items);
    mine_b.insert(last.value);
    CHECK(poll_until(b, last, mine_b, seen_b) == std::vector<PageResult>(24, PageResult::hit));
    CHECK(all == more_payloads);
    CHECK(shared.stats().stored == 30);
    CHECK(a.stats().stored == 30);  // the shared store's counters
    CHECK(shared.store().verify().empty());
}

TEST_CASE("a share destroyed with batches in flight or answers filed: those are dropped, the other shares keep theirs") {
    const TempDir dir;
    Shared shared = open_shared(dir);
    Share b = shared.share();
    std::set<std::uint64_t> mine_b, mine_c;
    Polled seen_b, seen_c;
    const auto keys = test_keys(300, 4);
    const auto payloads = marked_payloads(300, 4, object_bytes);
    const auto put_items = writes(keys, payloads);  // outlives the store's work on it
    std::uint64_t dropped_put = 0, dropped_exists = 0;
    {
        Share a = shared.share();
        // An answer filed for A (B's poll takes it from the store) and a put in flight when A goes.
        dropped_exists = a.exists(keys).value;
        const StorageTicket b_there = b.exists(keys);
        mine_b.insert(b_there.value);
        CHECK(poll_until(b, b_there, mine_b, seen_b) == std::vector<PageResult>(4, PageResult::miss));
        CHECK(a.in_flight() == 1);
        dropped_put = a.put(put_items).value;
        CHECK(a.in_flight() == 2);
        CHECK(shared.shares() == 2);
    }
    CHECK(shared.shares() == 1);
    // A new share takes A's place (its inbox) and gets none of A's answers; B neither.
    Share c = shared.share();
    CHECK(c.in_flight() == 0);
    Polled nothing;
    poll_once(c, std::chrono::milliseconds(20), mine_c, nothing);
    CHECK(nothing.answers == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (shared.in_flight() > 0) {  // until the store has answered A's put (dropped by whoever polls it)
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        const StorageTicket tb = b.exists(keys);
        const StorageTicket tc = c.exists(keys);
        mine_b.insert(tb.value);
        mine_c.insert(tc.value);
        (void)poll_until(c, tc, mine_c, seen_c);
        (void)poll_until(b, tb, mine_b, seen_b);
    }
    CHECK(seen_b.results.count(dropped_put) == 0);
    CHECK(seen_c.results.count(dropped_put) == 0);
    CHECK(seen_c.results.count(dropped_exists) == 0);
    CHECK(b.in_flight() == 0);
    CHECK(c.in_flight() == 0);
    // The dropped put still happened: the objects are stored and read back byte for byte.
    std::vector<std::vector<std::byte>> got;
    const auto get_items = reads(keys, got);
    const StorageTicket g = c.get(get_items);
    mine_c.insert(g.value);
    CHECK(poll_until(c, g, mine_c, seen_c) == std::vector<PageResult>(4, PageResult::hit));
    CHECK(got == payloads);
    CHECK(shared.store().verify().empty());
}

TEST_CASE("shares and their SharedStorage move with batches in flight; an empty share or a moved-from SharedStorage throws") {
    const TempDir dir;
    std::optional<Shared> first(open_shared(dir));
    Share a = first->share();
    const auto keys = test_keys(500, 2);
    const StorageTicket t = a.exists(keys);
    // The SharedStorage moves while a share exists: its state stays where the share points.
    Shared shared(std::move(*first));
    CHECK(shared.shares() == 1);
    CHECK(first->shares() == 0);
    CHECK_THROWS_AS((void)first->share(), logic_error);
    first.reset();
    // The share moves with its batch in flight; the moved-from one is empty.
    Share moved(std::move(a));
    CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): checking the moved-from state
    CHECK(a.in_flight() == 0);
    CHECK_THROWS_WITH_AS((void)a.poll(), doctest::Contains("the share is empty"), logic_error);
    CHECK_THROWS_AS((void)a.exists(keys), logic_error);
    CHECK(moved.in_flight() == 1);
    std::set<std::uint64_t> mine{t.value};
    Polled seen;
    CHECK(poll_until(moved, t, mine, seen) == std::vector<PageResult>(2, PageResult::miss));
    // Assigning over a share gives its inbox back.
    Share other = shared.share();
    CHECK(shared.shares() == 2);
    other = std::move(moved);
    CHECK(shared.shares() == 1);
    Share empty;
    CHECK_FALSE(static_cast<bool>(empty));
    CHECK(empty.stats().stored == 0);
}

TEST_CASE("a share keeps the storage-backend contract, directly and inside an AnyStorage, beside another share's traffic") {
    const TempDir dir;
    Shared shared = open_shared(dir);
    Share side = shared.share();
    const auto keys = test_keys(7000, 3);
    const auto payloads = marked_payloads(7000, 3, object_bytes);
    const auto items = writes(keys, payloads);
    // The side share's put is answered while the contract runs on another share: filed for it, never seen there.
    const StorageTicket put = side.put(items);
    {
        Share direct = shared.share();
        check_store_contract(direct, 1);
    }
    AnyStorage any(shared.share());
    REQUIRE(any.get_if<Share>() != nullptr);
    check_store_contract(any, 10000);
    CHECK(side.in_flight() == 1);
    std::set<std::uint64_t> mine{put.value};
    Polled seen;
    CHECK(poll_until(side, put, mine, seen) == std::vector<PageResult>(3, PageResult::hit));
    CHECK(seen.answers == 1);
    CHECK(shared.store().verify().empty());
}

}  // namespace shared_storage_test
