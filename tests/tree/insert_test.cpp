// insert behaviour, on both tree cores: duplicates, new leaves, host-only adoption, SWA tombstone recovery (whole,
// split, under a locked FULL), SWA tombstones on new leaves, Mamba states, retention, preconditions.

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

TEST_CASE_TEMPLATE("incoming pages that duplicate cached ones come back to be freed", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto key = run(1, 8);
    auto first = tree.insert({key}, {.pages = vpages(1, 4)});
    CHECK(first.prefix_length == 0);
    // A request that reused pages 1 and 2 from a match, and computed the rest again into pages 9 and 10.
    const std::vector<VirtualPage> pages{VirtualPage{1}, VirtualPage{2}, VirtualPage{9}, VirtualPage{10}};
    auto second = tree.insert({key}, {.pages = pages});
    CHECK(second.prefix_length == 8);
    CHECK(second.node == first.node);
    CHECK(executed(second.actions) == std::vector<Act>{free_pages({9, 10})});
    CHECK(ints(tree.node_info(first.node).pages) == std::vector<int>{1, 2, 3, 4});
    CHECK(tree.node_count() == 1);
    CHECK(tree.evictable_size(F) == 8);
}

TEST_CASE_TEMPLATE("insert extends a prefix with a leaf and splits where keys diverge", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto base = run(1, 8);
    auto a = tree.insert({base}, {.pages = vpages(1, 4)});
    auto b = tree.insert({cat(base, run(50, 4))}, {.pages = cat_pages(vpages(1, 4), vpages(5, 2))});
    CHECK(b.actions.empty());
    CHECK(b.prefix_length == 8);
    CHECK(tree.node_info(b.node).start == 8);
    CHECK(tree.node_info(b.node).length == 4);
    CHECK(tree.node_info(b.node).parent == a.node);

    auto other = base;
    other[5] = -7;  // diverges inside the third page
    auto c = tree.insert({other}, {.pages = cat_pages(vpages(1, 2), vpages(20, 2))});
    CHECK(c.actions.empty());
    CHECK(c.prefix_length == 4);
    CHECK(tree.node_count() == 4);
    const NodeInfo shared = tree.node_info(tree.node_info(c.node).parent);
    CHECK(shared.start == 0);
    CHECK(shared.length == 4);
    CHECK(shared.children == 2);
    CHECK(tree.evictable_size(F) == 16);
}

TEST_CASE_TEMPLATE("an empty key inserts nothing", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    auto r = tree.insert({}, {});
    CHECK(r.node.is_root());
    CHECK(r.actions.empty());
    CHECK(tree.node_count() == 0);
}

TEST_CASE_TEMPLATE("a host-only node adopts the incoming pages", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}, .events = EventMode::record});
    const auto key = run(1, 4);
    auto a = tree.insert({key}, {.pages = vpages(1, 4)});
    tree.set_host(a.node, F, hpages(70, 4));
    auto ev = tree.evict(F, 4);
    ev.actions.mark_executed();
    (void)tree.take_events();
    auto b = tree.insert({key}, {.pages = vpages(30, 4)});
    CHECK(b.actions.empty());
    CHECK(b.node == a.node);
    const NodeInfo n = tree.node_info(a.node);
    CHECK(ints(n.pages) == std::vector<int>{30, 31, 32, 33});
    CHECK(ints(n.host[F]) == std::vector<int>{70, 71, 72, 73});
    CHECK(tree.evictable_size(F) == 4);
    CHECK(tree.host_size(F) == 4);
    const auto events = tree.take_events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == EventKind::stored);
    CHECK(events[0].tier == Tier::device);
}

TEST_CASE_TEMPLATE("SWA tombstones are recovered inside the request's live SWA range", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full, Swa>;
    const auto key = run(1, 8);

    SUBCASE("a tombstone wholly inside the range takes the incoming pages and frees its old ones") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 4});  // [0,4) tombstone, [4,8) live
        CHECK(tree.node_count() == 2);
        CHECK(tree.evictable_size(S) == 4);
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 0});
        // [0,4): old pages 1,2 freed, 11,12 adopted; [4,8): 13,14 are duplicates.
        CHECK(executed(again.actions) == std::vector<Act>{free_pages({1, 2, 13, 14})});
        const NodeInfo upper = tree.node_info(tree.node_info(first.node).parent);
        CHECK(ints(upper.pages) == std::vector<int>{11, 12});
        CHECK(upper.device[S]);
        CHECK(tree.evictable_size(S) == 8);
        CHECK(tree.evictable_size(F) == 8);
    }
    SUBCASE("a tombstone straddling the request's SWA position is split there") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 8});  // one node, all tombstone
        CHECK(tree.node_count() == 1);
        CHECK(tree.evictable_size(S) == 0);
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 4});
        CHECK(executed(again.actions) == std::vector<Act>{free_pages({11, 12, 3, 4})});
        CHECK(tree.node_count() == 2);
        const NodeInfo lower = tree.node_info(first.node);
        const NodeInfo upper = tree.node_info(lower.parent);
        CHECK(ints(upper.pages) == std::vector<int>{1, 2});
        CHECK_FALSE(upper.device[S]);
        CHECK(ints(lower.pages) == std::vector<int>{13, 14});
        CHECK(lower.device[S]);
        CHECK(tree.evictable_size(S) == 4);
    }
    SUBCASE("a host lock that reaches the tombstone from a descendant's window does not keep the request's rows out") {
        // A store reading the lower node's SWA copy host-locks its window, the tombstone above included; no load
        // binds rows under the tombstone, so the request's rows must land there (they are the only ones).
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 6});  // [0,6) tombstone, [6,8) live
        tree.set_host(first.node, S, hpages(100, 1));
        LockReceipt reading = tree.lock(first.node, {.tier = Tier::host, .components = ComponentMask::of(S)});
        const NodeRef upper = tree.node_info(first.node).parent;
        CHECK(tree.node_info(upper).host_locks[S] == 1);
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 0});
        CHECK(executed(again.actions) == std::vector<Act>{free_pages({1, 2, 3, 14})});
        CHECK(ints(tree.node_info(upper).pages) == std::vector<int>{11, 12, 13});
        CHECK(tree.node_info(upper).device[S]);
        tree.unlock(std::move(reading));
        CHECK(broken(tree).empty());
    }
    SUBCASE("under a locked FULL the node keeps its pages and the SWA binding moves to them") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 4});
        LockReceipt held = tree.lock(first.node);  // FULL on [0,8); SWA window: [4,8) alone covers W
        CHECK(tree.protected_size(F) == 8);
        CHECK(tree.protected_size(S) == 4);
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 0});
        CHECK(executed(again.actions) ==
              std::vector<Act>{recover_locked({1, 2}, {11, 12}), free_pages({11, 12, 13, 14})});
        const NodeInfo upper = tree.node_info(tree.node_info(first.node).parent);
        CHECK(ints(upper.pages) == std::vector<int>{1, 2});
        CHECK(upper.device[S]);
        CHECK(tree.evictable_size(S) == 4);  // the recovered rows are outside the lock's window
        CHECK(tree.protected_size(S) == 4);
        tree.unlock(std::move(held));
        CHECK(tree.evictable_size(S) == 8);
    }
    SUBCASE("a locked FULL tombstone straddling the request's SWA position is split, then recovered in place") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 8});  // one node, all tombstone
        LockReceipt held = tree.lock(first.node);  // FULL on [0,8); SWA window: the node alone covers W
        CHECK(sizes(tree) == Sizes{{0, 0, 0}, {8, 0, 0}});
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 4});
        // [0,4) lies before the live range: its incoming pages are duplicates. [4,8) keeps pages 3, 4 (FULL is
        // locked) and takes the SWA rows of 13, 14, which are then freed.
        CHECK(executed(again.actions) ==
              std::vector<Act>{free_pages({11, 12}), recover_locked({3, 4}, {13, 14}), free_pages({13, 14})});
        CHECK(tree.node_count() == 2);
        const NodeInfo lower = tree.node_info(first.node);
        const NodeInfo upper = tree.node_info(lower.parent);
        CHECK(ints(upper.pages) == std::vector<int>{1, 2});
        CHECK_FALSE(upper.device[S]);
        CHECK(ints(lower.pages) == std::vector<int>{3, 4});
        CHECK(lower.device[S]);
        CHECK(upper.device_locks == per_component<std::uint32_t>{{1, 1, 0}});  // the split copied the locks
        CHECK(sizes(tree) == Sizes{{0, 0, 0}, {8, 4, 0}});
        tree.unlock(std::move(held));
        CHECK(sizes(tree) == Sizes{{8, 4, 0}, {0, 0, 0}});
    }
    SUBCASE("a tombstone before the range stays a tombstone") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 4});
        auto again = tree.insert({key}, {.pages = vpages(11, 4), .swa_evicted = 4});
        CHECK(executed(again.actions) == std::vector<Act>{free_pages({11, 12, 13, 14})});
        CHECK_FALSE(tree.node_info(tree.node_info(first.node).parent).device[S]);
        CHECK(tree.evictable_size(S) == 4);
    }
    SUBCASE("pages the request shares with the node are never recovered") {
        Tree tree({.page_size = {2}, .swa_window = 4});
        auto first = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 4});
        auto again = tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 0});
        CHECK(again.actions.empty());
        CHECK(tree.evictable_size(S) == 4);
    }
}

TEST_CASE_TEMPLATE("new nodes hold SWA only inside the request's live range", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {2}, .swa_window = 4});
    SUBCASE("a leaf wholly outside the range holds a tombstone") {
        auto r = tree.insert({run(1, 8)}, {.pages = vpages(1, 4), .swa_evicted = 8});
        CHECK(tree.node_count() == 1);
        CHECK_FALSE(tree.node_info(r.node).device[S]);
        CHECK(tree.evictable_size(F) == 8);
        CHECK(tree.evictable_size(S) == 0);
    }
    SUBCASE("a leaf straddling the range becomes a tombstone parent and a live child") {
        auto r = tree.insert({run(1, 8)}, {.pages = vpages(1, 4), .swa_evicted = 6});
        CHECK(tree.node_count() == 2);
        const NodeInfo leaf = tree.node_info(r.node);
        CHECK(leaf.start == 6);
        CHECK(leaf.device[S]);
        CHECK_FALSE(tree.node_info(leaf.parent).device[S]);
        CHECK(tree.evictable_size(S) == 2);
    }
    SUBCASE("a leaf inside the range is live") {
        auto r = tree.insert({run(1, 8)}, {.pages = vpages(1, 4), .swa_evicted = 0});
        CHECK(tree.node_count() == 1);
        CHECK(tree.evictable_size(S) == 8);
    }
}

TEST_CASE_TEMPLATE("a Mamba state lands on the end node and a second one is returned", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    const auto key = run(1, 6);
    auto a = tree.insert({key}, {.pages = vpages(1, 6), .state = StateId{5}});
    CHECK(tree.node_info(a.node).state == StateId{5});
    auto b = tree.insert({key}, {.pages = vpages(1, 6), .state = StateId{6}});
    CHECK(executed(b.actions) == std::vector<Act>{free_states({6})});
    CHECK(tree.evictable_size(M) == 1);
    // A shorter key with a state splits the node; the state goes to the new upper part.
    auto c = tree.insert({std::span(key).first(3)}, {.pages = vpages(1, 3), .state = StateId{7}});
    CHECK(c.actions.empty());
    CHECK(tree.node_info(c.node).state == StateId{7});
    CHECK(tree.node_info(c.node).length == 3);
    CHECK(tree.node_info(a.node).state == StateId{5});
    CHECK(tree.evictable_size(M) == 2);
}

TEST_CASE_TEMPLATE("insert raises the retention class along the path", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .retention = 2});
    auto b = tree.insert({run(1, 6)}, {.pages = vpages(1, 6), .retention = 1});
    CHECK(tree.node_info(a.node).retention == 2);  // raised, never lowered by insert
    CHECK(tree.node_info(b.node).retention == 1);
    tree.set_retention(b.node, 0);  // explicit: the node itself; its shared ancestors are never lowered
    CHECK(tree.node_info(b.node).retention == 0);
    CHECK(tree.node_info(a.node).retention == 2);
    tree.set_retention(a.node, 0);  // a prefix's own node can be lowered through its own handle
    CHECK(tree.node_info(a.node).retention == 0);
}

TEST_CASE_TEMPLATE("a bad insert throws logic_error and changes nothing", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {2}, .swa_window = 4});
    auto ok = tree.insert({run(1, 4)}, {.pages = vpages(1, 2)});
    const auto key = run(1, 8);
    CHECK_THROWS_AS((void)tree.insert({std::span(key).first(7)}, {.pages = vpages(1, 3)}), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.insert({key}, {.pages = vpages(1, 3)}), unikv::logic_error);
    std::vector<VirtualPage> bad = vpages(1, 4);
    bad[3] = VirtualPage{};
    CHECK_THROWS_AS((void)tree.insert({key}, {.pages = bad}), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 3}), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.insert({key}, {.pages = vpages(1, 4), .swa_evicted = 10}), unikv::logic_error);
    CHECK(tree.node_count() == 1);
    CHECK(tree.evictable_size(F) == 4);
}
