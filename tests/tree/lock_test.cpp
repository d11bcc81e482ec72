// Locks and receipts, on both tree cores: what each component's lock covers, exact evictable / protected sizes,
// early SWA release, host locks, receipt checks (consumed, foreign, stale).

#include <doctest/doctest.h>

#include <type_traits>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

namespace {

// Three 2-token nodes A [0,2), B [2,4), C [4,6), each with a Mamba state (1, 2, 3); W = 3.
template <class Tree>
struct Chain {
    Tree tree{TreeConfig{.page_size = {1}, .swa_window = 3}};
    NodeRef a, b, c;
    Chain() {
        const auto key = run(1, 6);
        NodeRef* out[] = {&a, &b, &c};
        for (int i = 1; i <= 3; ++i) {
            auto r = tree.insert({std::span(key).first(static_cast<std::size_t>(2 * i))},
                                 {.pages = vpages(1, 2 * i), .state = StateId{i}});
            CHECK(r.actions.empty());
            *out[i - 1] = r.node;
        }
    }
};
}  // namespace

static_assert(!std::is_copy_constructible_v<LockReceipt> && std::is_nothrow_move_constructible_v<LockReceipt>);

TEST_CASE_TEMPLATE("a device lock covers the FULL path, one SWA window and one Mamba node", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    Chain<typename Core::template impl<Full, Swa, Mamba>> ch;
    auto& tree = ch.tree;
    LockReceipt r = tree.lock(ch.c);
    CHECK(r.swa_segment_start() == 2);  // C (2 tokens) then B reaches W = 3
    CHECK(sizes(tree) == Sizes{{0, 2, 2}, {6, 4, 1}});

    auto none = tree.evict(F, 100);
    CHECK(none.actions.empty());
    CHECK(none.freed(F) == 0);

    // Only A's SWA is unlocked: it becomes a tombstone, and its unlocked Mamba state goes with it.
    auto swa = tree.evict(S, 100);
    CHECK(executed(swa.actions) == std::vector<Act>{free_swa({1, 2}), free_states({1})});
    CHECK(swa.freed(S) == 2);
    CHECK(swa.freed(M) == 1);
    CHECK(swa.freed(F) == 0);

    auto mamba = tree.evict(M, 100);
    CHECK(executed(mamba.actions) == std::vector<Act>{free_states({2})});
    CHECK(tree.node_count() == 3);

    tree.unlock(std::move(r));
    CHECK(r.empty());
    CHECK(sizes(tree) == Sizes{{6, 4, 1}, {0, 0, 0}});
}

TEST_CASE_TEMPLATE("early SWA release keeps the FULL path lock", Core, RadixTreeCore, ReferenceTreeCore) {
    Chain<typename Core::template impl<Full, Swa, Mamba>> ch;
    auto& tree = ch.tree;
    LockReceipt r = tree.lock(ch.c);
    tree.release_swa(r);
    CHECK(r.holds(F));
    CHECK_FALSE(r.holds(S));
    CHECK_FALSE(r.holds(M));  // Mamba ranks below SWA and is released with it
    CHECK(sizes(tree) == Sizes{{0, 6, 3}, {6, 0, 0}});

    // Every SWA segment can now go, C's too; C stays because its FULL is locked.
    auto ev = tree.evict(S, 100);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2}), free_states({1}), free_swa({3, 4}),
                                                free_states({2}), free_swa({5, 6}), free_states({3})});
    CHECK(tree.node_count() == 3);
    CHECK_THROWS_AS(tree.release_swa(r), unikv::logic_error);
    tree.unlock(std::move(r));
    CHECK(tree.evictable_size(F) == 6);
}

TEST_CASE_TEMPLATE("the SWA window counts tombstones toward W", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
    auto ins = tree.insert({run(1, 6)}, {.pages = vpages(1, 6), .swa_evicted = 4});  // A [0,4) tombstone, B [4,6)
    LockReceipt r = tree.lock(ins.node);
    CHECK(r.swa_segment_start() == 0);
    CHECK(tree.protected_size(S) == 2);  // only B has SWA rows to protect
    CHECK(tree.node_info(tree.node_info(ins.node).parent).device_locks[S] == 1);
    tree.unlock(std::move(r));
    CHECK(tree.node_info(tree.node_info(ins.node).parent).device_locks[S] == 0);
}

TEST_CASE_TEMPLATE("a lock can skip components", Core, RadixTreeCore, ReferenceTreeCore) {
    Chain<typename Core::template impl<Full, Swa, Mamba>> ch;
    LockReceipt r = ch.tree.lock(ch.c, {.components = ComponentMask::all().without(M)});
    CHECK_FALSE(r.holds(M));
    CHECK(ch.tree.protected_size(M) == 0);
    CHECK(ch.tree.evictable_size(M) == 3);
    ch.tree.unlock(std::move(r));
}

TEST_CASE_TEMPLATE("host locks keep host values from host eviction", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 2)});
    tree.set_host(ins.node, F, hpages(40, 2));
    auto ev = tree.evict(F, 4);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({1, 2})});
    LockReceipt pin = tree.lock(ins.node, {.tier = Tier::host});
    CHECK(pin.tier() == Tier::host);
    auto blocked = tree.evict_host(F, 100);
    CHECK(blocked.actions.empty());
    CHECK(tree.host_size(F) == 4);
    tree.unlock(std::move(pin));
    auto freed = tree.evict_host(F, 100);
    CHECK(executed(freed.actions) == std::vector<Act>{free_host(F, {40, 41})});
    CHECK(freed.host_freed_of(F) == 4);
    CHECK(tree.host_size(F) == 0);
    CHECK(tree.node_count() == 0);
}

TEST_CASE_TEMPLATE("a receipt that does not match is rejected and changes nothing", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full, Swa>;
    Tree one({.page_size = {1}, .swa_window = 2});
    Tree two({.page_size = {1}, .swa_window = 2});
    auto a = one.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto b = two.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    LockReceipt r = one.lock(a.node);

    SUBCASE("a receipt from another tree") {
        CHECK_THROWS_AS(two.unlock(std::move(r)), unikv::logic_error);
        CHECK_FALSE(r.empty());
        CHECK(two.protected_size(F) == 0);
        CHECK(one.protected_size(F) == 4);
        one.unlock(std::move(r));
    }
    SUBCASE("a consumed receipt") {
        one.unlock(std::move(r));
        CHECK(r.empty());
        CHECK_THROWS_AS(one.unlock(std::move(r)), unikv::logic_error);
        CHECK(one.evictable_size(F) == 4);
    }
    SUBCASE("an empty receipt") {
        LockReceipt empty;
        CHECK_THROWS_AS(one.unlock(std::move(empty)), unikv::logic_error);
        CHECK_THROWS_AS(one.release_swa(empty), unikv::logic_error);
        one.unlock(std::move(r));
    }
}

TEST_CASE_TEMPLATE("handles to deleted nodes are rejected", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto ev = tree.evict(F, 4);
    ev.actions.mark_executed();
    CHECK_FALSE(tree.contains(ins.node));
    CHECK_THROWS_AS((void)tree.lock(ins.node), unikv::logic_error);
    CHECK_THROWS_AS(tree.set_host(ins.node, F, hpages(1, 4)), unikv::logic_error);
    // The slot may be reused; the old handle still does not name the new node.
    auto again = tree.insert({run(9, 4)}, {.pages = vpages(9, 4)});
    CHECK(tree.contains(again.node));
    CHECK_FALSE(tree.contains(ins.node));
}

TEST_CASE_TEMPLATE("locking the root protects nothing and releases cleanly", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    LockReceipt r = tree.lock(NodeRef{});
    CHECK(tree.protected_size(F) == 0);
    tree.unlock(std::move(r));
    CHECK(tree.evictable_size(F) == 4);
}

TEST_CASE_TEMPLATE("a device lock must include Full", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    for (ComponentMask without_full : {ComponentMask::of(S), ComponentMask::of(M), ComponentMask::of(S).with(M),
                                       ComponentMask{}}) {
        CHECK_THROWS_AS((void)tree.lock(ins.node, {.components = without_full}), unikv::logic_error);
    }
    CHECK(tree.node_info(ins.node).device_locks == per_component<std::uint32_t>{{0, 0, 0}});
    CHECK(sizes(tree) == Sizes{{4, 4, 1}, {0, 0, 0}});
    // With Full, evictable FULL is exactly what evict(Full) can free.
    LockReceipt r = tree.lock(ins.node, {.components = ComponentMask::of(F).with(S)});
    CHECK(sizes(tree) == Sizes{{0, 0, 1}, {4, 4, 0}});
    auto none = tree.evict(F, 4);
    CHECK(none.freed(F) == 0);
    CHECK(none.actions.empty());
    tree.unlock(std::move(r));
    const std::int64_t evictable = tree.evictable_size(F);
    auto all = tree.evict(F, 100);
    CHECK(all.freed(F) == evictable);
    CHECK(executed(all.actions) == std::vector<Act>{free_pages({1, 2, 3, 4}), free_states({1})});
    auto again = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    // A host lock may name any subset.
    LockReceipt host = tree.lock(again.node, {.tier = Tier::host, .components = ComponentMask::of(S)});
    CHECK(tree.node_info(again.node).host_locks == per_component<std::uint32_t>{{0, 1, 0}});
    tree.unlock(std::move(host));
}

// A [0,4), B [4,8), W = 2: both SWA segments are host-only; a host lock anchored at B covers B alone (B's 4 tokens
// reach W), so host eviction takes A's copy and keeps B's.
TEST_CASE_TEMPLATE("an SWA host lock covers one window", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
    const auto key = run(1, 8);
    auto a = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4)});
    auto b = tree.insert({key}, {.pages = vpages(1, 8)});
    tree.set_host(a.node, S, hpages(100, 4));
    tree.set_host(b.node, S, hpages(200, 4));
    LockReceipt keep = tree.lock(b.node, {.components = ComponentMask::of(F)});  // B stays, as a tombstone
    auto dev = tree.evict(S, 8);
    CHECK(executed(dev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
    LockReceipt pin = tree.lock(b.node, {.tier = Tier::host});
    CHECK(pin.swa_segment_start() == 4);
    CHECK(tree.node_info(a.node).host_locks == per_component<std::uint32_t>{{1, 0, 0}});  // FULL: the whole path
    CHECK(tree.node_info(b.node).host_locks == per_component<std::uint32_t>{{1, 1, 0}});
    auto host = tree.evict_host(S, 100);
    CHECK(executed(host.actions) == std::vector<Act>{free_host(S, {100, 101, 102, 103})});  // A's copy, not B's
    CHECK(host.host_freed_of(S) == 4);
    CHECK(tree.host_size(S) == 4);
    tree.unlock(std::move(pin));
    auto rest = tree.evict_host(S, 100);
    CHECK(executed(rest.actions) == std::vector<Act>{free_host(S, {200, 201, 202, 203})});
    tree.unlock(std::move(keep));
}

TEST_CASE_TEMPLATE("a Mamba host lock keeps the node's host state", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
    tree.set_host(a.node, M, hpages(300, 1));
    auto ev = tree.evict(M, 1);  // A's state: hosted, so no backup
    CHECK(executed(ev.actions) == std::vector<Act>{free_states({1})});
    LockReceipt pin = tree.lock(a.node, {.tier = Tier::host, .components = ComponentMask::of(M)});
    CHECK(tree.node_info(a.node).host_locks == per_component<std::uint32_t>{{0, 0, 1}});
    auto blocked = tree.evict_host(M, 10);
    CHECK(blocked.actions.empty());
    CHECK(tree.host_size(M) == 1);
    tree.unlock(std::move(pin));
    auto freed = tree.evict_host(M, 10);
    CHECK(executed(freed.actions) == std::vector<Act>{free_host(M, {300})});
    CHECK(tree.host_size(M) == 0);
    (void)b;
}

TEST_CASE_TEMPLATE("a moved-from tree holds nothing and rejects every call", Core, RadixTreeCore, ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full, Swa>;
    const TreeConfig config{.page_size = {1}, .swa_window = 2};
    Tree a(config);
    auto ins = a.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    LockReceipt r = a.lock(ins.node);
    Tree b(std::move(a));
    CHECK(a.node_count() == 0);
    CHECK(a.evictable_size(F) == 0);
    CHECK(a.protected_size(F) == 0);
    CHECK(a.host_size(F) == 0);
    CHECK_FALSE(a.contains(ins.node));
    CHECK(a.take_events().empty());
    const auto key = run(1, 4);
    const auto pages = vpages(1, 4);
    const auto host = hpages(1, 4);
    CHECK_THROWS_AS((void)a.match_prefix({key}), unikv::logic_error);
    CHECK_THROWS_AS((void)a.insert({key}, {.pages = pages}), unikv::logic_error);
    CHECK_THROWS_AS((void)a.lock(NodeRef{}), unikv::logic_error);
    CHECK_THROWS_AS(a.unlock(std::move(r)), unikv::logic_error);
    CHECK_FALSE(r.empty());
    CHECK_THROWS_AS(a.release_swa(r), unikv::logic_error);
    CHECK_THROWS_AS((void)a.evict(F, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)a.evict_host(F, 1), unikv::logic_error);
    CHECK_THROWS_AS(a.set_host(ins.node, F, host), unikv::logic_error);
    CHECK_THROWS_AS((void)a.finish_backup(ins.node, F, host), unikv::logic_error);
    CHECK_THROWS_AS(a.commit_load_back(ins.node, S), unikv::logic_error);
    CHECK_THROWS_AS(a.set_retention(NodeRef{}, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)a.node_info(NodeRef{}), unikv::logic_error);
    CHECK_THROWS_AS((void)a.nodes(), unikv::logic_error);

    // The moved-to tree took the nodes and the receipt's tree id.
    CHECK(b.protected_size(F) == 4);
    b.unlock(std::move(r));
    CHECK(b.evictable_size(F) == 4);
    // Assigning a tree makes the moved-from one usable again.
    a = Tree(config);
    CHECK(a.match_prefix({key}).device_length == 0);
    auto again = a.insert({key}, {.pages = pages});
    CHECK(a.evictable_size(F) == 4);
    (void)again;
}
