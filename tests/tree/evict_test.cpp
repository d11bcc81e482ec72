// Eviction, on both tree cores: FULL by LRU leaf (delete or demote), removal of ancestors that can no longer end a
// match, SWA / Mamba tombstoning and the cascade, retention classes, write-back backups (the SGLang hosted /
// unbacked / host-pressure window scenarios), host eviction.

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

TEST_CASE_TEMPLATE("FULL eviction takes the least recently used unlocked leaf", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto shared = run(1, 4);
    auto x = tree.insert({cat(shared, run(10, 2))}, {.pages = cat_pages(vpages(1, 2), vpages(10, 1))});
    auto y = tree.insert({cat(shared, run(20, 2))}, {.pages = cat_pages(vpages(1, 2), vpages(20, 1))});
    CHECK(tree.node_count() == 3);

    auto first = tree.evict(F, 1);
    CHECK(executed(first.actions) == std::vector<Act>{free_pages({10})});
    CHECK(first.freed(F) == 2);
    CHECK_FALSE(tree.contains(x.node));

    // Evicting the other leaf makes the shared node a leaf, which is evicted next.
    auto rest = tree.evict(F, 100);
    CHECK(executed(rest.actions) == std::vector<Act>{free_pages({20, 1, 2})});
    CHECK(rest.freed(F) == 6);
    CHECK(tree.node_count() == 0);
    CHECK(tree.evictable_size(F) == 0);
    (void)y;
}

TEST_CASE_TEMPLATE("a leaf with a host copy is demoted to host-only", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 3)}, {.pages = vpages(1, 3)});
    tree.set_host(ins.node, F, hpages(60, 3));
    CHECK(tree.host_size(F) == 3);
    auto ev = tree.evict(F, 3);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({1, 2, 3})});
    CHECK(tree.contains(ins.node));
    const NodeInfo n = tree.node_info(ins.node);
    CHECK_FALSE(n.device[F]);
    CHECK(ints(n.host[F]) == std::vector<int>{60, 61, 62});
    CHECK(tree.evictable_size(F) == 0);
    CHECK(tree.host_size(F) == 3);
    // A host-only node is no longer a device candidate.
    auto again = tree.evict(F, 3);
    CHECK(again.actions.empty());
}

TEST_CASE_TEMPLATE("ancestors that can no longer end a match are removed with the leaf", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    SUBCASE("an SWA tombstone parent") {
        typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
        auto ins = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .swa_evicted = 4});
        CHECK(tree.node_count() == 2);
        auto ev = tree.evict(F, 4);
        CHECK(executed(ev.actions) == std::vector<Act>{free_pages({5, 6, 7, 8, 1, 2, 3, 4})});
        CHECK(ev.freed(F) == 8);
        CHECK(ev.freed(S) == 4);
        CHECK(tree.node_count() == 0);
        (void)ins;
    }
    SUBCASE("a parent without a Mamba state") {
        typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
        auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
        auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{3}});
        auto ev = tree.evict(M, 1);
        CHECK(executed(ev.actions) == std::vector<Act>{free_pages({5, 6, 7, 8}), free_states({3}), free_pages({1, 2, 3, 4})});
        CHECK(ev.freed(M) == 1);
        CHECK(ev.freed(F) == 8);
        CHECK(tree.node_count() == 0);
        (void)a;
        (void)b;
    }
}

TEST_CASE_TEMPLATE("SWA eviction tombstones internal nodes and cascades to Mamba", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
    auto ev = tree.evict(S, 4);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4}), free_states({1})});
    CHECK(ev.freed(S) == 4);
    CHECK(ev.freed(M) == 1);
    CHECK(ev.freed(F) == 0);
    const NodeInfo n = tree.node_info(a.node);
    CHECK(n.device == per_component<bool>{{true, false, false}});
    CHECK(sizes(tree) == Sizes{{8, 4, 1}, {0, 0, 0}});

    // The leaf is an unlocked device leaf: SWA eviction takes it whole, and its tombstone parent goes too.
    auto rest = tree.evict(S, 1);
    CHECK(executed(rest.actions) == std::vector<Act>{free_pages({5, 6, 7, 8}), free_states({2}), free_pages({1, 2, 3, 4})});
    CHECK(rest.freed(F) == 8);
    CHECK(tree.node_count() == 0);
    (void)b;
}

TEST_CASE_TEMPLATE("lower retention classes are evicted first, LRU within a class", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto pinned = tree.insert({run(10, 2)}, {.pages = vpages(10, 2), .retention = 1});
    auto old = tree.insert({run(20, 2)}, {.pages = vpages(20, 2)});
    auto young = tree.insert({run(30, 2)}, {.pages = vpages(30, 2)});
    std::vector<int> order;
    for (int i = 0; i < 3; ++i) {
        auto ev = tree.evict(F, 1);
        for (const Act& a : executed(ev.actions)) order.insert(order.end(), a.ids.begin(), a.ids.end());
    }
    CHECK(order == std::vector<int>{20, 21, 30, 31, 10, 11});

    auto again = tree.insert({run(10, 2)}, {.pages = vpages(10, 2), .retention = 1});
    auto other = tree.insert({run(40, 2)}, {.pages = vpages(40, 2)});
    tree.set_retention(again.node, 0);  // unpinned: now the older of the two
    auto ev = tree.evict(F, 1);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({10, 11})});
    (void)pinned;
    (void)old;
    (void)young;
    (void)other;
}

// The SGLang write-back window scenarios: a parent P (8 tokens) with a child C (16 tokens); SWA eviction of 8
// tokens must drop P's SWA window (P is the older SWA segment) and keep every FULL row. W = 4, so a backup copies
// only the last 4 tokens of P: P splits into a plain tombstone [0,4) and the backed-up window [4,8).
TEST_CASE_TEMPLATE("write-back eviction backs up an SWA window only when it has no host copy", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
    const auto key = run(1, 24);
    auto p = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8)});
    auto c = tree.insert({key}, {.pages = vpages(1, 24)});
    CHECK(c.prefix_length == 8);

    SUBCASE("a hosted window is dropped with no copy and no FULL write-back") {
        tree.set_host(p.node, S, hpages(100, 8));
        auto ev = tree.evict(S, 8, {.write_back = EvictBackups::on});
        CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
        CHECK(ev.freed(S) == 8);
        CHECK(ev.freed(F) == 0);
        CHECK(tree.node_count() == 2);                   // no split: nothing was copied
        CHECK(tree.node_info(p.node).host[F].empty());  // no FULL host copy was made
        CHECK(tree.evictable_size(F) == 24);
        CHECK(tree.host_size(S) == 8);
    }
    SUBCASE("an unbacked window is backed up once, before it is dropped") {
        auto ev = tree.evict(S, 8, {.write_back = EvictBackups::on});
        CHECK(executed(ev.actions) == std::vector<Act>{backup(S, {5, 6, 7, 8}), free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
        CHECK(ev.freed(S) == 8);
        CHECK(ev.freed(F) == 0);
        REQUIRE(ev.actions.list()[0].node == p.node);  // the lower part keeps the handle
        CHECK(tree.node_count() == 3);
        const NodeInfo lower = tree.node_info(p.node);
        CHECK(lower.start == 4);
        CHECK(lower.backup_pending[S]);
        CHECK_FALSE(tree.node_info(lower.parent).backup_pending[S]);
        CHECK_THROWS_AS((void)tree.match_prefix({key}), unikv::logic_error);  // backups first
        CHECK(finish(tree, p.node, S, hpages(200, 4)).empty());
        CHECK(ints(tree.node_info(p.node).host[S]) == ints(hpages(200, 4)));
        CHECK(tree.node_info(lower.parent).host[S].empty());
        CHECK(tree.host_size(S) == 4);
        CHECK(tree.evictable_size(F) == 24);
        CHECK(tree.match_prefix({key}).device_length == 24);
    }
    SUBCASE("under host pressure only the window is dropped") {
        auto ev = tree.evict(S, 8, {.write_back = EvictBackups::on});
        ev.actions.mark_executed();
        CHECK(finish(tree, p.node, S).empty());  // no host room: the copy was not made
        const NodeInfo n = tree.node_info(p.node);
        CHECK_FALSE(n.device[S]);
        CHECK(n.host[S].empty());
        CHECK(n.host[F].empty());
        CHECK(ints(n.pages) == std::vector<int>{5, 6, 7, 8});
        CHECK(ints(tree.node_info(n.parent).pages) == std::vector<int>{1, 2, 3, 4});
        CHECK(tree.host_size(S) == 0);
        CHECK(tree.evictable_size(F) == 24);
        CHECK_THROWS_AS((void)tree.finish_backup(p.node, S, {}), unikv::logic_error);  // nothing pending any more
    }
}

// A 32-token node with W = 6 and 4-token pages: the window rounds up to 8 tokens, so only the last two pages of
// the node are copied, not all eight.
TEST_CASE_TEMPLATE("a write-back SWA backup covers one window before the segment's end, not the whole node", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {4}, .swa_window = 6});
    const auto key = run(1, 40);
    auto p = tree.insert({std::span(key).first(32)}, {.pages = vpages(1, 8)});
    auto c = tree.insert({key}, {.pages = vpages(1, 10)});
    auto ev = tree.evict(S, 1, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(S, {7, 8}), free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
    CHECK(ev.freed(S) == 32);
    CHECK(tree.node_info(p.node).start == 24);
    CHECK(tree.node_info(p.node).length == 8);
    CHECK(sizes(tree) == Sizes{{40, 8, 0}, {0, 0, 0}});
    CHECK(finish(tree, p.node, S, hpages(70, 2)).empty());
    CHECK(tree.host_size(S) == 8);

    // The copied window is enough for a host hit at the old boundary: 8 SWA tokens >= W before token 32.
    const MatchResult m = tree.match_prefix({std::span(key).first(32)}, {.host_hits = HostHits::include});
    CHECK(m.device_length == 0);
    CHECK(m.best_length == 32);
    CHECK(m.host_hit_length == 32);
    CHECK(m.swa_host_hit_length == 8);
    CHECK(m.best_node == p.node);
    (void)c;
}

TEST_CASE_TEMPLATE("write-back eviction backs up a Mamba state it drops from a node that stays", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{7}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{8}});
    auto ev = tree.evict(M, 1, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(M, {7}), free_states({7})});
    CHECK(finish(tree, a.node, M, hpages(300, 1)).empty());
    CHECK(ints(tree.node_info(a.node).host[M]) == std::vector<int>{300});
    CHECK(tree.host_size(M) == 1);
    // The host copy counts for a host hit at that node.
    const MatchResult m = tree.match_prefix({run(1, 4)}, {.host_hits = HostHits::include});
    CHECK(m.device_length == 0);
    CHECK(m.best_length == 4);
    CHECK(m.host_hit_length == 4);
    (void)b;
}

// Reference §4.2 / §5.6: under write-back an unbacked FULL device leaf is copied before its rows are freed, and
// the copy decides its fate: host-only, or gone when the host had no room.
TEST_CASE_TEMPLATE("write-back FULL eviction backs a leaf up and demotes it to host-only", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto ev = tree.evict(F, 4, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4})});
    CHECK(ev.freed(F) == 4);
    REQUIRE(ev.actions.list()[0].node == ins.node);
    CHECK(tree.contains(ins.node));
    CHECK(tree.node_info(ins.node).backup_pending[F]);
    CHECK_FALSE(tree.node_info(ins.node).device[F]);
    CHECK(tree.evictable_size(F) == 0);
    CHECK_THROWS_AS((void)tree.match_prefix({run(1, 4)}), unikv::logic_error);  // backups first

    SUBCASE("the copy landed: host-only") {
        CHECK(finish(tree, ins.node, F, hpages(100, 4)).empty());
        CHECK(tree.host_size(F) == 4);
        CHECK(ints(tree.node_info(ins.node).host[F]) == std::vector<int>{100, 101, 102, 103});
        const MatchResult m = tree.match_prefix({run(1, 4)}, {.host_hits = HostHits::include});
        CHECK(m.device_length == 0);
        CHECK(m.best_length == 4);
        CHECK(m.best_node == ins.node);
        auto again = tree.evict(F, 4, {.write_back = EvictBackups::on});  // a host-only node is no candidate
        CHECK(again.actions.empty());
    }
    SUBCASE("no host room: the node is deleted") {
        CHECK(finish(tree, ins.node, F).empty());
        CHECK_FALSE(tree.contains(ins.node));
        CHECK(tree.node_count() == 0);
        CHECK(tree.host_size(F) == 0);
    }
}

TEST_CASE_TEMPLATE("a write-back FULL eviction continues up the path in one call", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8)});
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(F, {5, 6, 7, 8}), free_pages({5, 6, 7, 8}),
                                                   backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4})});
    CHECK(ev.freed(F) == 8);
    CHECK(ev.actions.list()[0].node == b.node);
    CHECK(ev.actions.list()[2].node == a.node);
    // A pending node is never chosen twice: nothing evictable is left.
    CHECK(finish(tree, b.node, F, hpages(20, 4)).empty());
    CHECK(finish(tree, a.node, F, hpages(10, 4)).empty());
    CHECK(tree.host_size(F) == 8);
    const MatchResult m = tree.match_prefix({run(1, 8)}, {.host_hits = HostHits::include});
    CHECK(m.best_length == 8);
    CHECK(m.host_hit_length == 8);
}

TEST_CASE_TEMPLATE("a FULL leaf backup also copies its SWA window and Mamba state", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    // Page 2, W = 3: the window rounds up to 4 tokens. The 10-token leaf splits at 6.
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {2}, .swa_window = 3});
    const auto key = run(1, 10);
    auto ins = tree.insert({key}, {.pages = vpages(1, 5), .state = StateId{9}});
    auto ev = tree.evict(F, 1, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(S, {4, 5}), backup(M, {9}), backup(F, {1, 2, 3}),
                                                   backup(F, {4, 5}), free_pages({1, 2, 3, 4, 5}), free_states({9})});
    CHECK(ev.freed(F) == 10);
    CHECK(ev.freed(S) == 10);
    CHECK(ev.freed(M) == 1);
    const NodeRef upper = tree.node_info(ins.node).parent;
    CHECK(ev.actions.list()[0].node == ins.node);
    CHECK(ev.actions.list()[2].node == upper);
    CHECK(tree.node_info(upper).length == 6);
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {0, 0, 0}});

    SUBCASE("every copy landed: a host hit at the old boundary") {
        CHECK(finish(tree, ins.node, S, hpages(20, 2)).empty());
        CHECK(finish(tree, ins.node, M, hpages(30, 1)).empty());
        CHECK(finish(tree, upper, F, hpages(40, 3)).empty());
        CHECK(finish(tree, ins.node, F, hpages(50, 2)).empty());
        CHECK(tree.host_size(F) == 10);
        CHECK(tree.host_size(S) == 4);
        CHECK(tree.host_size(M) == 1);
        const MatchResult m = tree.match_prefix({key}, {.host_hits = HostHits::include});
        CHECK(m.device_length == 0);
        CHECK(m.best_length == 10);
        CHECK(m.host_hit_length == 10);
        CHECK(m.swa_host_hit_length == 4);
    }
    SUBCASE("the SWA copy failed: the leaf can no longer end a match and goes when its last backup finishes") {
        CHECK(finish(tree, ins.node, S).empty());
        CHECK(finish(tree, ins.node, M, hpages(30, 1)).empty());
        CHECK(finish(tree, upper, F, hpages(40, 3)).empty());  // the leaf below still has a backup pending
        auto last = tree.finish_backup(ins.node, F, hpages(50, 2));
        CHECK(executed(last.actions) ==
              std::vector<Act>{free_host(F, {50, 51}), free_host(M, {30}), free_host(F, {40, 41, 42})});
        CHECK(last.host_freed_of(F) == 10);
        CHECK(last.host_freed_of(M) == 1);
        CHECK(tree.node_count() == 0);
        CHECK(tree.host_size(F) == 0);
    }
}

TEST_CASE_TEMPLATE("a write-back leaf whose copy fails gives back its other host copies", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{5}});
    tree.set_host(ins.node, M, hpages(300, 1));
    auto ev = tree.evict(F, 4, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) ==
          std::vector<Act>{backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4}), free_states({5})});
    auto done = tree.finish_backup(ins.node, F, {});
    CHECK(executed(done.actions) == std::vector<Act>{free_host(M, {300})});
    CHECK(done.host_freed_of(M) == 1);
    CHECK_FALSE(tree.contains(ins.node));
    CHECK(tree.host_size(M) == 0);
}

TEST_CASE_TEMPLATE("SWA eviction keeps a locked Mamba state on the node it tombstones", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
    LockReceipt r = tree.lock(a.node, {.components = ComponentMask::of(F).with(M)});
    auto ev = tree.evict(S, 4);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4})});
    CHECK(ev.freed(M) == 0);
    CHECK(tree.node_info(a.node).state == StateId{1});
    CHECK(sizes(tree) == Sizes{{4, 4, 1}, {4, 0, 1}});
    tree.unlock(std::move(r));
    CHECK(sizes(tree) == Sizes{{8, 4, 2}, {0, 0, 0}});
    (void)b;
}

TEST_CASE_TEMPLATE("retention classes order SWA and Mamba eviction too", Core, RadixTreeCore, ReferenceTreeCore) {
    // X -> X2 pinned (class 1), Y -> Y2 not; X is the least recently used SWA and Mamba segment overall.
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    const auto x = run(10, 4);
    const auto y = run(20, 4);
    auto ix = tree.insert({x}, {.pages = vpages(1, 4), .state = StateId{1}, .retention = 1});
    auto ix2 = tree.insert({cat(x, run(30, 4))}, {.pages = vpages(1, 8), .state = StateId{2}, .retention = 1});
    auto iy = tree.insert({y}, {.pages = vpages(11, 4), .state = StateId{3}});
    auto iy2 = tree.insert({cat(y, run(40, 4))}, {.pages = vpages(11, 8), .state = StateId{4}});

    auto swa = tree.evict(S, 4);  // Y, class 0, not X
    CHECK(executed(swa.actions) == std::vector<Act>{free_swa({11, 12, 13, 14}), free_states({3})});
    auto mamba = tree.evict(M, 1);  // Y2, the only class-0 state; a leaf, so it goes whole, and Y with it
    CHECK(executed(mamba.actions) ==
          std::vector<Act>{free_pages({15, 16, 17, 18}), free_states({4}), free_pages({11, 12, 13, 14})});
    CHECK(mamba.freed(F) == 8);
    auto pinned = tree.evict(M, 1);  // then class 1 by LRU: X's state (X2's insert refreshed only X2's)
    CHECK(executed(pinned.actions) == std::vector<Act>{free_states({1})});
    CHECK(tree.node_count() == 2);
    (void)ix;
    (void)ix2;
    (void)iy;
    (void)iy2;
}

TEST_CASE_TEMPLATE("window classes order SWA eviction: chunk windows first, branch-tail windows last", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    // Three prompts' windows, oldest first: B's ends on a branch point (class 2), P's on a prompt end (class 1),
    // C's on a chunk boundary (class 0). A window covers the nodes within W = 2 tokens before its key's end. Each
    // prompt has a continuation (class 2: a device leaf's SWA goes whole with its FULL, not the order tested).
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
    const auto b = run(10, 4);
    const auto p = run(20, 4);
    const auto c = run(30, 4);
    auto ib = tree.insert({b}, {.pages = vpages(1, 4), .window_class = 2});
    auto ip = tree.insert({p}, {.pages = vpages(11, 4), .window_class = 1});
    auto ic = tree.insert({c}, {.pages = vpages(21, 4)});
    for (int i = 0; i < 3; ++i) {
        const auto prompt = run(10 * (i + 1), 4);
        auto leaf = tree.insert({cat(prompt, run(50 + 10 * i, 2))},
                                {.pages = cat_pages(vpages(1 + 10 * i, 4), vpages(41 + 2 * i, 2)), .window_class = 2});
        CHECK(tree.node_info(leaf.node).window_class == 2);
    }
    CHECK(tree.node_info(ib.node).window_class == 2);  // the leaves' windows (2 tokens) end below the prompts
    CHECK(tree.node_info(ip.node).window_class == 1);
    CHECK(tree.node_info(ic.node).window_class == 0);
    auto first = tree.evict(S, 4);  // C: the newest prompt, but class 0
    CHECK(executed(first.actions) == std::vector<Act>{free_swa({21, 22, 23, 24})});
    auto second = tree.evict(S, 4);  // then P
    CHECK(executed(second.actions) == std::vector<Act>{free_swa({11, 12, 13, 14})});
    // A class-0 insert within B's window never lowers its class; a split keeps it on both parts.
    auto again = tree.insert({cat(run(10, 3), run(40, 2))}, {.pages = cat_pages(vpages(1, 3), vpages(31, 2))});
    const NodeRef upper = tree.node_info(again.node).parent;
    CHECK(tree.node_info(upper).window_class == 2);
    CHECK(tree.node_info(again.node).window_class == 0);
    auto third = tree.evict(S, 2);  // the new class-0 leaf goes whole before any branch-tail window
    CHECK(executed(third.actions) == std::vector<Act>{free_pages({31, 32})});
    CHECK(tree.node_info(upper).device[S]);
}

TEST_CASE_TEMPLATE("set_retention never lowers a shared ancestor", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    const auto prompt = run(1, 4);
    auto p = tree.insert({prompt}, {.pages = vpages(1, 4), .retention = 2});  // a pinned system prompt
    auto s1 = tree.insert({cat(prompt, run(10, 2))}, {.pages = cat_pages(vpages(1, 4), vpages(5, 2))});
    auto s2 = tree.insert({cat(prompt, run(20, 2))}, {.pages = cat_pages(vpages(1, 4), vpages(7, 2))});
    CHECK(tree.node_info(s1.node).retention == 0);
    tree.set_retention(s1.node, 0);  // one session lets go of its history: the prompt it shares stays pinned
    CHECK(tree.node_info(s1.node).retention == 0);
    CHECK(tree.node_info(p.node).retention == 2);
    tree.set_retention(s1.node, 3);  // raising reaches the ancestors
    CHECK(tree.node_info(p.node).retention == 3);
    tree.set_retention(s1.node, 1);
    CHECK(tree.node_info(s1.node).retention == 1);
    CHECK(tree.node_info(p.node).retention == 3);
    std::vector<int> order;
    for (int i = 0; i < 3; ++i) {
        auto ev = tree.evict(F, 1);
        for (const Act& a : executed(ev.actions)) order.insert(order.end(), a.ids.begin(), a.ids.end());
    }
    CHECK(order == std::vector<int>{7, 8, 5, 6, 1, 2, 3, 4});
    (void)s2;
}

TEST_CASE_TEMPLATE("host eviction deletes host-only leaves by LRU and tombstones internal copies", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    SUBCASE("FULL host leaves") {
        typename Core::template impl<Full> tree({.page_size = {1}});
        auto x = tree.insert({run(10, 2)}, {.pages = vpages(10, 2)});
        auto y = tree.insert({run(20, 2)}, {.pages = vpages(20, 2)});
        tree.set_host(x.node, F, hpages(110, 2));
        tree.set_host(y.node, F, hpages(120, 2));
        // A host copy of data that is still on device is not a host candidate.
        auto none = tree.evict_host(F, 100);
        CHECK(none.actions.empty());
        auto dev = tree.evict(F, 4);
        dev.actions.mark_executed();
        auto ev = tree.evict_host(F, 2);
        CHECK(executed(ev.actions) == std::vector<Act>{free_host(F, {110, 111})});
        CHECK(ev.host_freed_of(F) == 2);
        CHECK_FALSE(tree.contains(x.node));
        CHECK(tree.contains(y.node));
        CHECK(tree.host_size(F) == 2);
    }
    SUBCASE("an internal SWA copy becomes a host tombstone, its Mamba copy goes with it") {
        // W = 2: A [0,4) splits at 2 for its window copy; A keeps [2,4) with the state.
        typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
        auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
        auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
        auto ev = tree.evict(S, 4, {.write_back = EvictBackups::on});
        CHECK(executed(ev.actions) ==
              std::vector<Act>{backup(S, {3, 4}), free_swa({1, 2, 3, 4}), backup(M, {1}), free_states({1})});
        CHECK(finish(tree, a.node, S, hpages(50, 2)).empty());
        CHECK(finish(tree, a.node, M, hpages(60, 1)).empty());
        CHECK(tree.host_size(S) == 2);
        CHECK(tree.host_size(M) == 1);
        auto host = tree.evict_host(S, 1);
        CHECK(executed(host.actions) == std::vector<Act>{free_host(S, {50, 51}), free_host(M, {60})});
        CHECK(host.host_freed_of(S) == 2);
        CHECK(host.host_freed_of(M) == 1);
        CHECK(tree.contains(a.node));  // internal: FULL stays
        CHECK(tree.host_size(S) == 0);
        (void)b;
    }
    SUBCASE("Mamba host copies: an internal copy goes alone, a host-only leaf goes whole") {
        typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
        auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
        auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
        tree.set_host(a.node, M, hpages(300, 1));
        tree.set_host(b.node, M, hpages(301, 1));
        tree.set_host(b.node, F, hpages(400, 4));
        auto states = tree.evict(M, 1);  // A's state (hosted: no backup)
        CHECK(executed(states.actions) == std::vector<Act>{free_states({1})});
        auto leaf = tree.evict(F, 4);  // B is demoted: it keeps its FULL and Mamba host copies
        CHECK(executed(leaf.actions) == std::vector<Act>{free_pages({5, 6, 7, 8}), free_states({2})});
        CHECK(tree.host_size(M) == 2);

        auto first = tree.evict_host(M, 1);  // A's copy is the older one; A keeps its FULL rows
        CHECK(executed(first.actions) == std::vector<Act>{free_host(M, {300})});
        CHECK(first.host_freed_of(M) == 1);
        CHECK(tree.contains(a.node));
        auto second = tree.evict_host(M, 1);  // B is a FULL host leaf: it goes whole, then A can end no match
        CHECK(executed(second.actions) ==
              std::vector<Act>{free_host(F, {400, 401, 402, 403}), free_host(M, {301}), free_pages({1, 2, 3, 4})});
        CHECK(second.host_freed_of(F) == 4);
        CHECK(second.host_freed_of(M) == 1);
        CHECK(second.freed(F) == 4);
        CHECK(tree.node_count() == 0);
    }
}

// X [0,4) with child C [4,8), page 1: one write-back FULL eviction backs up C, then X (a device leaf once C is
// gone). X's copy fails: a match needs FULL on every node of its path, so C's host copy can never be matched
// and goes with X, whichever backup finishes first.
TEST_CASE_TEMPLATE("a failed FULL copy of an internal node drops the host-only nodes below it", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    const auto key = run(1, 8);
    auto x = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4)});
    auto c = tree.insert({key}, {.pages = vpages(1, 8)});
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(F, {5, 6, 7, 8}), free_pages({5, 6, 7, 8}),
                                                   backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4})});
    SUBCASE("in action order") {
        CHECK(finish(tree, c.node, F, hpages(100, 4)).empty());
        auto last = tree.finish_backup(x.node, F, {});
        CHECK(executed(last.actions) == std::vector<Act>{free_host(F, {100, 101, 102, 103})});
        CHECK(last.host_freed_of(F) == 4);
    }
    SUBCASE("out of order: the child's copy lands after its parent's failed") {
        CHECK(finish(tree, x.node, F).empty());  // C's backup is still in flight: C stays, so X stays
        CHECK(tree.node_count() == 2);
        auto last = tree.finish_backup(c.node, F, hpages(100, 4));
        CHECK(executed(last.actions) == std::vector<Act>{free_host(F, {100, 101, 102, 103})});
        CHECK(last.host_freed_of(F) == 4);
    }
    CHECK(tree.node_count() == 0);
    CHECK(tree.host_size(F) == 0);
    CHECK(tree.match_prefix({key}, {.host_hits = HostHits::include}).best_length == 0);
}

// The same, with a host lock on C: a locked host copy is never freed, so C (and X above it) stay; unlocking does
// not drop them (nothing revisits the subtree), host eviction does.
TEST_CASE_TEMPLATE("a host-locked node below a failed FULL copy stays", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    const auto key = run(1, 8);
    auto x = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4)});
    auto c = tree.insert({key}, {.pages = vpages(1, 8)});
    tree.set_host(c.node, F, hpages(100, 4));
    LockReceipt keep = tree.lock(c.node, {.tier = Tier::host});
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) ==
          std::vector<Act>{free_pages({5, 6, 7, 8}), backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4})});
    CHECK(finish(tree, x.node, F).empty());
    CHECK(tree.node_count() == 2);
    CHECK(tree.host_size(F) == 4);
    tree.unlock(std::move(keep));
    CHECK(tree.node_count() == 2);
    auto gone = tree.evict_host(F, 4);
    CHECK(executed(gone.actions) == std::vector<Act>{free_host(F, {100, 101, 102, 103})});
    CHECK(tree.node_count() == 0);
    CHECK(tree.host_size(F) == 0);
}

// One 8-token leaf, page 2, W = 3: backups of the tail's SWA window and Mamba state and of both parts' FULL rows,
// completed in reverse order. A completion on a node with other backups in flight changes nothing structural;
// the end state equals the in-order one.
TEST_CASE_TEMPLATE("finish_backup completes in any order", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {2}, .swa_window = 3});
    const auto key = run(1, 8);
    auto ins = tree.insert({key}, {.pages = vpages(1, 4), .state = StateId{5}});
    const NodeRef upper = write_back_leaf(tree, ins.node);
    SUBCASE("every copy made") {
        CHECK(finish(tree, ins.node, F, hpages(40, 2)).empty());
        CHECK(finish(tree, upper, F, hpages(30, 2)).empty());
        CHECK(finish(tree, ins.node, M, hpages(20, 1)).empty());
        CHECK(finish(tree, ins.node, S, hpages(10, 2)).empty());
        CHECK(tree.node_count() == 2);
        CHECK(tree.host_size(F) == 8);
        CHECK(tree.host_size(S) == 4);
        CHECK(tree.host_size(M) == 1);
        const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
        CHECK(h.best_node == ins.node);
        CHECK(h.best_length == 8);
    }
    SUBCASE("the tail's FULL copy failed first: the tail goes with its last backup, then the upper part") {
        CHECK(finish(tree, ins.node, F).empty());  // SWA and Mamba copies still in flight
        CHECK(finish(tree, upper, F, hpages(30, 2)).empty());
        CHECK(finish(tree, ins.node, M, hpages(20, 1)).empty());
        auto last = tree.finish_backup(ins.node, S, hpages(10, 2));
        CHECK(executed(last.actions) ==
              std::vector<Act>{free_host(S, {10, 11}), free_host(M, {20}), free_host(F, {30, 31})});
        CHECK(tree.node_count() == 0);
        CHECK(tree.host_size(F) == 0);
        CHECK(tree.host_size(S) == 0);
        CHECK(tree.host_size(M) == 0);
    }
}
