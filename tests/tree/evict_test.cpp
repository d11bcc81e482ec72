// Eviction, on both tree cores: FULL by LRU leaf (delete or demote), removal of ancestors that can no longer end a
// match, SWA / Mamba tombstoning and the cascade, retention classes, write-back backups (the SGLang hosted /
// unbacked / host-pressure window scenarios), host eviction.

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

TEST_CASE_TEMPLATE("FULL eviction takes the least recently used unlocked leaf", Core, FastCore, RefCore) {
    typename Core::template tree<Full> tree({.page_size = {2}});
    const auto shared = run(1, 4);
    auto x = tree.insert({cat(shared, run(10, 2))}, {.pages = cat_pages(vpages(1, 2), vpages(10, 1))});
    auto y = tree.insert({cat(shared, run(20, 2))}, {.pages = cat_pages(vpages(1, 2), vpages(20, 1))});
    CHECK(tree.node_count() == 3);

    auto first = tree.evict(F, 1);
    CHECK(drain(first.actions) == std::vector<Act>{free_pages({10})});
    CHECK(first.freed(F) == 2);
    CHECK_FALSE(tree.contains(x.node));

    // Evicting the other leaf makes the shared node a leaf, which is evicted next.
    auto rest = tree.evict(F, 100);
    CHECK(drain(rest.actions) == std::vector<Act>{free_pages({20, 1, 2})});
    CHECK(rest.freed(F) == 6);
    CHECK(tree.node_count() == 0);
    CHECK(tree.evictable_size(F) == 0);
    (void)y;
}

TEST_CASE_TEMPLATE("a leaf with a host copy is demoted to host-only", Core, FastCore, RefCore) {
    typename Core::template tree<Full> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 3)}, {.pages = vpages(1, 3)});
    tree.set_host(ins.node, F, hpages(60, 3));
    CHECK(tree.host_size(F) == 3);
    auto ev = tree.evict(F, 3);
    CHECK(drain(ev.actions) == std::vector<Act>{free_pages({1, 2, 3})});
    CHECK(tree.contains(ins.node));
    const NodeInfo n = tree.node_info(ins.node);
    CHECK_FALSE(n.device[0]);
    CHECK(ints(n.host[0]) == std::vector<int>{60, 61, 62});
    CHECK(tree.evictable_size(F) == 0);
    CHECK(tree.host_size(F) == 3);
    // A host-only node is no longer a device candidate.
    auto again = tree.evict(F, 3);
    CHECK(again.actions.empty());
}

TEST_CASE_TEMPLATE("ancestors that can no longer end a match are removed with the leaf", Core, FastCore, RefCore) {
    SUBCASE("an SWA tombstone parent") {
        typename Core::template tree<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
        auto ins = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .swa_evicted = 4});
        CHECK(tree.node_count() == 2);
        auto ev = tree.evict(F, 4);
        CHECK(drain(ev.actions) == std::vector<Act>{free_pages({5, 6, 7, 8, 1, 2, 3, 4})});
        CHECK(ev.freed(F) == 8);
        CHECK(ev.freed(S) == 4);
        CHECK(tree.node_count() == 0);
        (void)ins;
    }
    SUBCASE("a parent without a Mamba state") {
        typename Core::template tree<Full, Mamba> tree({.page_size = {1}});
        auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
        auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{3}});
        auto ev = tree.evict(M, 1);
        CHECK(drain(ev.actions) == std::vector<Act>{free_pages({5, 6, 7, 8}), free_states({3}), free_pages({1, 2, 3, 4})});
        CHECK(ev.freed(M) == 1);
        CHECK(ev.freed(F) == 8);
        CHECK(tree.node_count() == 0);
        (void)a;
        (void)b;
    }
}

TEST_CASE_TEMPLATE("SWA eviction tombstones internal nodes and cascades to Mamba", Core, FastCore, RefCore) {
    typename Core::template tree<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
    auto ev = tree.evict(S, 4);
    CHECK(drain(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4}), free_states({1})});
    CHECK(ev.freed(S) == 4);
    CHECK(ev.freed(M) == 1);
    CHECK(ev.freed(F) == 0);
    const NodeInfo n = tree.node_info(a.node);
    CHECK(n.device == std::array<bool, 3>{true, false, false});
    CHECK(sizes(tree) == Sizes{{8, 4, 1}, {0, 0, 0}});

    // The leaf is an unlocked device leaf: SWA eviction takes it whole, and its tombstone parent goes too.
    auto rest = tree.evict(S, 1);
    CHECK(drain(rest.actions) == std::vector<Act>{free_pages({5, 6, 7, 8}), free_states({2}), free_pages({1, 2, 3, 4})});
    CHECK(rest.freed(F) == 8);
    CHECK(tree.node_count() == 0);
    (void)b;
}

TEST_CASE_TEMPLATE("lower retention classes are evicted first, LRU within a class", Core, FastCore, RefCore) {
    typename Core::template tree<Full> tree({.page_size = {1}});
    auto pinned = tree.insert({run(10, 2)}, {.pages = vpages(10, 2), .retention = 1});
    auto old = tree.insert({run(20, 2)}, {.pages = vpages(20, 2)});
    auto young = tree.insert({run(30, 2)}, {.pages = vpages(30, 2)});
    std::vector<int> order;
    for (int i = 0; i < 3; ++i) {
        auto ev = tree.evict(F, 1);
        for (const Act& a : drain(ev.actions)) order.insert(order.end(), a.ids.begin(), a.ids.end());
    }
    CHECK(order == std::vector<int>{20, 21, 30, 31, 10, 11});

    auto again = tree.insert({run(10, 2)}, {.pages = vpages(10, 2), .retention = 1});
    auto other = tree.insert({run(40, 2)}, {.pages = vpages(40, 2)});
    tree.set_retention(again.node, 0);  // unpinned: now the older of the two
    auto ev = tree.evict(F, 1);
    CHECK(drain(ev.actions) == std::vector<Act>{free_pages({10, 11})});
    (void)pinned;
    (void)old;
    (void)young;
    (void)other;
}

// The SGLang write-back window scenarios: a parent P (8 tokens) with a child C (16 tokens); SWA eviction of 8
// tokens must drop P's SWA window (P is the older SWA segment) and keep every FULL row.
TEST_CASE_TEMPLATE("write-back eviction backs up an SWA window only when it has no host copy", Core, FastCore, RefCore) {
    typename Core::template tree<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
    const auto key = run(1, 24);
    auto p = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8)});
    auto c = tree.insert({key}, {.pages = vpages(1, 24)});
    CHECK(c.prefix_length == 8);

    SUBCASE("a hosted window is dropped with no copy and no FULL write-back") {
        tree.set_host(p.node, S, hpages(100, 8));
        auto ev = tree.evict(S, 8, {.write_back = WriteBack::on});
        CHECK(drain(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
        CHECK(ev.freed(S) == 8);
        CHECK(ev.freed(F) == 0);
        CHECK(tree.node_info(p.node).host[0].empty());  // no FULL host copy was made
        CHECK(tree.evictable_size(F) == 24);
        CHECK(tree.host_size(S) == 8);
    }
    SUBCASE("an unbacked window is backed up once, before it is dropped") {
        auto ev = tree.evict(S, 8, {.write_back = WriteBack::on});
        CHECK(drain(ev.actions) ==
              std::vector<Act>{backup(S, {1, 2, 3, 4, 5, 6, 7, 8}), free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
        REQUIRE(ev.actions.list()[0].node == p.node);
        CHECK(tree.node_info(p.node).backup_pending[1]);
        CHECK_THROWS_AS((void)tree.match_prefix({key}), unikv::logic_error);  // backups first
        tree.finish_backup(p.node, S, hpages(200, 8));
        CHECK(ints(tree.node_info(p.node).host[1]) == ints(hpages(200, 8)));
        CHECK(tree.host_size(S) == 8);
        CHECK(tree.evictable_size(F) == 24);
        CHECK(tree.match_prefix({key}).device_length == 24);
    }
    SUBCASE("under host pressure only the window is dropped") {
        auto ev = tree.evict(S, 8, {.write_back = WriteBack::on});
        ev.actions.mark_drained();
        tree.finish_backup(p.node, S, {});  // no host room: the copy was not made
        const NodeInfo n = tree.node_info(p.node);
        CHECK_FALSE(n.device[1]);
        CHECK(n.host[1].empty());
        CHECK(n.host[0].empty());
        CHECK(ints(n.pages) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
        CHECK(tree.host_size(S) == 0);
        CHECK_THROWS_AS(tree.finish_backup(p.node, S, {}), unikv::logic_error);  // nothing pending any more
    }
}

TEST_CASE_TEMPLATE("write-back eviction backs up a Mamba state it drops from a node that stays", Core, FastCore, RefCore) {
    typename Core::template tree<Full, Mamba> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{7}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{8}});
    auto ev = tree.evict(M, 1, {.write_back = WriteBack::on});
    CHECK(drain(ev.actions) == std::vector<Act>{backup(M, {7}), free_states({7})});
    tree.finish_backup(a.node, M, hpages(300, 1));
    CHECK(ints(tree.node_info(a.node).host[2]) == std::vector<int>{300});
    CHECK(tree.host_size(M) == 1);
    // The host copy counts for a host hit at that node.
    const MatchResult m = tree.match_prefix({run(1, 4)}, {.host_hits = HostHits::include});
    CHECK(m.device_length == 0);
    CHECK(m.best_length == 4);
    CHECK(m.host_hit_length == 4);
    (void)b;
}

TEST_CASE_TEMPLATE("host eviction deletes host-only leaves by LRU and tombstones internal copies", Core, FastCore, RefCore) {
    SUBCASE("FULL host leaves") {
        typename Core::template tree<Full> tree({.page_size = {1}});
        auto x = tree.insert({run(10, 2)}, {.pages = vpages(10, 2)});
        auto y = tree.insert({run(20, 2)}, {.pages = vpages(20, 2)});
        tree.set_host(x.node, F, hpages(110, 2));
        tree.set_host(y.node, F, hpages(120, 2));
        // A host copy of data that is still on device is not a host candidate.
        auto none = tree.evict_host(F, 100);
        CHECK(none.actions.empty());
        auto dev = tree.evict(F, 4);
        dev.actions.mark_drained();
        auto ev = tree.evict_host(F, 2);
        CHECK(drain(ev.actions) == std::vector<Act>{free_host(F, {110, 111})});
        CHECK(ev.host_freed_of(F) == 2);
        CHECK_FALSE(tree.contains(x.node));
        CHECK(tree.contains(y.node));
        CHECK(tree.host_size(F) == 2);
    }
    SUBCASE("an internal SWA copy becomes a host tombstone, its Mamba copy goes with it") {
        typename Core::template tree<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
        auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
        auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
        auto ev = tree.evict(S, 4, {.write_back = WriteBack::on});
        CHECK(drain(ev.actions) == std::vector<Act>{backup(S, {1, 2, 3, 4}), free_swa({1, 2, 3, 4}), backup(M, {1}),
                                                    free_states({1})});
        tree.finish_backup(a.node, S, hpages(50, 4));
        tree.finish_backup(a.node, M, hpages(60, 1));
        CHECK(tree.host_size(S) == 4);
        CHECK(tree.host_size(M) == 1);
        auto host = tree.evict_host(S, 1);
        CHECK(drain(host.actions) == std::vector<Act>{free_host(S, {50, 51, 52, 53}), free_host(M, {60})});
        CHECK(host.host_freed_of(S) == 4);
        CHECK(host.host_freed_of(M) == 1);
        CHECK(tree.contains(a.node));  // internal: FULL stays
        CHECK(tree.host_size(S) == 0);
        (void)b;
    }
}
