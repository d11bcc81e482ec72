// Committing load-backs, on both tree cores (reference §3.4, §12.13): an SWA window loaded back onto resident FULL
// pages, and FULL + SWA + Mamba loaded back onto a host-only node. The tree only flips state, sizes and events;
// the allocator binds the rows.

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

// P [0,8) with child C [8,24), W = 4. A write-back SWA eviction leaves P as a plain tombstone [0,4) and a tombstone
// [4,8) with a host copy of its window, all FULL rows resident.
TEST_CASE_TEMPLATE("an SWA window loaded back onto resident FULL pages is committed", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4, .events = EventMode::record});
    const auto key = run(1, 24);
    const auto k8 = std::span(key).first(8);
    auto p = tree.insert({k8}, {.pages = vpages(1, 8)});
    auto c = tree.insert({key}, {.pages = vpages(1, 24)});
    auto ev = tree.evict(S, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(S, {5, 6, 7, 8}), free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
    CHECK(finish(tree, p.node, S, hpages(200, 4)).empty());

    const MatchResult h = tree.match_prefix({k8}, {.host_hits = HostHits::include});
    CHECK(h.device_length == 0);
    CHECK(h.best_length == 8);
    CHECK(h.best_node == p.node);
    CHECK(h.host_hit_length == 8);      // the boundary needs a load...
    CHECK(h.swa_host_hit_length == 4);  // ...of 4 SWA rows only: FULL pages 1..8 are resident
    CHECK(ints(h.device_pages).empty());

    // The load holds a device lock; the window lock covers P alone (4 tokens reach W).
    LockReceipt load = tree.lock(h.best_node);
    CHECK(sizes(tree) == Sizes{{16, 16, 0}, {8, 0, 0}});
    (void)tree.take_events();
    tree.commit_load_back(p.node, S);
    const auto events = tree.take_events();
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == EventKind::stored);
    CHECK(events[0].component == S);
    CHECK(events[0].tier == Tier::device);
    CHECK(events[0].start == 4);
    CHECK(events[0].length == 4);
    CHECK(sizes(tree) == Sizes{{16, 16, 0}, {8, 4, 0}});
    CHECK(tree.node_info(p.node).device[S]);
    CHECK(ints(tree.node_info(p.node).host[S]) == ints(hpages(200, 4)));  // the host copy stays

    const MatchResult m = tree.match_prefix({k8});
    CHECK(m.device_length == 8);
    CHECK(ints(m.device_pages) == ints(vpages(1, 8)));
    tree.unlock(std::move(load));
    CHECK(sizes(tree) == Sizes{{24, 20, 0}, {0, 0, 0}});

    // Committing twice, or SWA the node never had on host, is a caller error that changes nothing.
    CHECK_THROWS_AS(tree.commit_load_back(p.node, S), unikv::logic_error);
    CHECK_THROWS_AS(tree.commit_load_back(tree.node_info(p.node).parent, S), unikv::logic_error);
    CHECK_THROWS_AS(tree.commit_load_back(p.node, S, {.pages = vpages(1, 4)}), unikv::logic_error);
    CHECK_THROWS_AS(tree.commit_load_back(p.node, M), unikv::logic_error);  // not in this tree
    CHECK(sizes(tree) == Sizes{{24, 20, 0}, {0, 0, 0}});
    (void)c;
}

// One 8-token leaf, page 2, W = 3 (window 4 tokens): a write-back FULL eviction leaves a host-only upper part
// [0,4) (FULL copy) and a host-only tail [4,8) (FULL, SWA window and Mamba copies).
TEST_CASE_TEMPLATE("a host-only node's FULL, SWA and Mamba load-back is committed top-down", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {2}, .swa_window = 3});
    const auto key = run(1, 8);
    auto ins = tree.insert({key}, {.pages = vpages(1, 4), .state = StateId{5}});
    const NodeRef upper = write_back_leaf(tree, ins.node);
    finish_leaf_backups(tree, ins.node, upper);

    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.device_length == 0);
    CHECK(h.best_length == 8);
    CHECK(h.best_node == ins.node);
    CHECK(h.host_hit_length == 8);
    CHECK(h.swa_host_hit_length == 4);

    LockReceipt load = tree.lock(h.best_node);
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {0, 0, 0}});
    // Out of order: the tail before its parent, SWA or Mamba before the node's FULL rows.
    CHECK_THROWS_AS(tree.commit_load_back(ins.node, F, {.pages = vpages(13, 2)}), unikv::logic_error);
    CHECK_THROWS_AS(tree.commit_load_back(upper, S), unikv::logic_error);  // no SWA copy there
    CHECK_THROWS_AS(tree.commit_load_back(upper, F, {.pages = vpages(11, 1)}), unikv::logic_error);  // page count
    CHECK_THROWS_AS(tree.commit_load_back(ins.node, M, {.state = StateId{6}}), unikv::logic_error);
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {0, 0, 0}});

    const auto upper_pages = vpages(11, 2);
    const auto tail_pages = vpages(13, 2);
    tree.commit_load_back(upper, F, {.pages = upper_pages});
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {4, 0, 0}});  // under the load's FULL path lock
    tree.commit_load_back(ins.node, F, {.pages = tail_pages});
    CHECK_THROWS_AS(tree.commit_load_back(ins.node, M), unikv::logic_error);  // a Mamba load-back needs its state
    tree.commit_load_back(ins.node, S);
    tree.commit_load_back(ins.node, M, {.state = StateId{6}});
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {8, 4, 1}});
    const NodeInfo n = tree.node_info(ins.node);
    CHECK(n.device == per_component<bool>{{true, true, true}});
    CHECK(n.state == StateId{6});
    CHECK(ints(n.host[F]) == std::vector<int>{40, 41});  // host copies stay: device+host

    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_length == 8);
    CHECK(ints(m.device_pages) == std::vector<int>{11, 12, 13, 14});
    tree.unlock(std::move(load));
    CHECK(sizes(tree) == Sizes{{8, 4, 1}, {0, 0, 0}});
    // Back on device, the node is an eviction candidate again, and its host copies spare it a backup.
    auto again = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(again.actions) == std::vector<Act>{free_pages({13, 14}), free_states({6}), free_pages({11, 12})});
}

namespace {
// A load-back step as (component, start, length, host pages, FULL pages), node checked separately.
struct Step {
    Component component;
    std::int32_t start;
    std::int32_t length;
    std::vector<int> host;
    std::vector<int> full;
    friend bool operator==(const Step&, const Step&) = default;
};
std::vector<Step> steps(std::span<const LoadBackStep> plan) {
    std::vector<Step> out;
    for (const LoadBackStep& s : plan)
        out.push_back({s.component, s.start, s.length, ints(s.host), ints(s.full_pages)});
    return out;
}
}  // namespace

// The same 8-token leaf as above: the plan names every host copy the host hit needs, top-down, and shrinks as
// commits land; a device hit needs none. An SWA step names the node's FULL pages to bind its rows under once
// they are resident; while the plan still loads them (a FULL step of the same node before it), it names none.
TEST_CASE_TEMPLATE("the load-back plan lists the host copies a host hit needs, top-down", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {2}, .swa_window = 3});
    const auto key = run(1, 8);
    auto ins = tree.insert({key}, {.pages = vpages(1, 4), .state = StateId{5}});
    CHECK(tree.load_back_plan(ins.node).empty());  // all on device
    const NodeRef upper = write_back_leaf(tree, ins.node);
    finish_leaf_backups(tree, ins.node, upper);

    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    REQUIRE(h.best_node == ins.node);
    const auto plan = tree.load_back_plan(h.best_node);
    CHECK(steps(plan) == std::vector<Step>{{F, 0, 4, {30, 31}, {}}, {F, 4, 4, {40, 41}, {}},
                                           {S, 4, 4, {10, 11}, {}}, {M, 4, 4, {20}, {}}});
    REQUIRE(plan.size() == 4);
    CHECK(plan[0].node == upper);
    CHECK(plan[1].node == ins.node);
    CHECK(plan[3].node == ins.node);
    // The upper node alone cannot end a request: it has no SWA rows and no Mamba state in any tier.
    CHECK_THROWS_AS((void)tree.load_back_plan(upper), unikv::logic_error);

    LockReceipt load = tree.lock(h.best_node);
    tree.commit_load_back(upper, F, {.pages = vpages(11, 2)});
    tree.commit_load_back(ins.node, F, {.pages = vpages(13, 2)});
    CHECK(steps(tree.load_back_plan(ins.node)) ==
          std::vector<Step>{{S, 4, 4, {10, 11}, {13, 14}}, {M, 4, 4, {20}, {}}});
    tree.commit_load_back(ins.node, S);
    tree.commit_load_back(ins.node, M, {.state = StateId{6}});
    CHECK(tree.load_back_plan(ins.node).empty());
    CHECK(tree.load_back_plan(tree.node_info(upper).parent).empty());  // the root
    tree.unlock(std::move(load));
}

// W = 4 over P [0,8) and C [8,24): only P's last window [4,8) was copied. A host hit at P loads SWA there only
// (FULL is resident: the step names P's FULL pages 5..8 to bind the rows under), as `swa_host_hit_length` says;
// C's own window is on device.
TEST_CASE_TEMPLATE("the load-back plan loads only the SWA window before the boundary", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
    const auto key = run(1, 24);
    auto p = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8)});
    auto c = tree.insert({key}, {.pages = vpages(1, 24)});
    auto ev = tree.evict(S, 8, {.write_back = EvictBackups::on});
    ev.actions.mark_executed();
    CHECK(finish(tree, p.node, S, hpages(200, 4)).empty());

    const MatchResult h = tree.match_prefix({std::span(key).first(8)}, {.host_hits = HostHits::include});
    REQUIRE(h.best_node == p.node);
    CHECK(h.swa_host_hit_length == 4);
    const auto plan = tree.load_back_plan(h.best_node);
    CHECK(steps(plan) == std::vector<Step>{{S, 4, 4, {200, 201, 202, 203}, {5, 6, 7, 8}}});
    CHECK(tree.load_back_plan(c.node).empty());  // C's 16 tokens cover its window on device
}

// A `move_swa` for loads whose nodes get no FULL rows another way: it must not be called.
const auto no_swa_moves = [](std::span<const VirtualPage>, std::span<const VirtualPage>) { FAIL("an SWA move"); };

// The host-only leaf above, locked in both tiers as a cache locks the node it loads.
template <class Core>
struct HostOnlyLeaf {
    typename Core::template impl<Full, Swa, Mamba> tree{{.page_size = {2}, .swa_window = 3}};
    std::vector<TokenId> key = run(1, 8);
    InsertResult ins = tree.insert({key}, {.pages = vpages(1, 4), .state = StateId{5}});
    NodeRef upper = [this] {
        const NodeRef u = write_back_leaf(tree, ins.node);
        finish_leaf_backups(tree, ins.node, u);
        return u;
    }();
    LockReceipt device = tree.lock(ins.node);
    LockReceipt host = tree.lock(ins.node, {.tier = Tier::host});
};

// The same host-only leaf, loaded the way a cache does: recorded when queued (`begin_load`), finished at the ack.
// Meanwhile the record is invisible to match, a split cuts it like the node's values, an insert that brings its
// own pages for the upper part wins, and a second load of the same parts waits.
TEST_CASE_TEMPLATE("a load recorded when queued is cut by splits and installed at its ack where still missing", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    HostOnlyLeaf<Core> leaf;
    auto& [tree, key, ins, upper, device, host] = leaf;

    const auto dest = vpages(11, 4);  // upper [0,4): 11, 12; tail [4,8): 13, 14
    // A destination that does not fit the plan is refused with nothing recorded.
    CHECK_THROWS_AS(tree.begin_load(ins.node, 7, {.pages = vpages(11, 3), .state = StateId{6}}), unikv::logic_error);
    CHECK_THROWS_AS(tree.begin_load(ins.node, 7, {.pages = dest}), unikv::logic_error);  // the state is missing
    CHECK(tree.loads_in_flight() == 0);
    tree.begin_load(ins.node, 7, {.pages = dest, .state = StateId{6}});
    CHECK(tree.loads_in_flight() == 1);
    CHECK(tree.verify().empty());
    CHECK(tree.match_prefix({key}).device_length == 0);  // invisible until the ack
    const auto again = tree.load_back_plan(ins.node);
    REQUIRE(again.size() == 4);
    for (const LoadBackStep& s : again) CHECK(s.loading);
    CHECK_THROWS_AS(tree.begin_load(ins.node, 8, {.pages = dest, .state = StateId{6}}), unikv::logic_error);
    CHECK(tree.loads_in_flight() == 1);

    // A walk ending at 6 splits the tail into [4,6) and [6,8); an insert brings its own pages for [0,4).
    (void)tree.match_prefix({std::span(key).first(6)});
    const NodeRef middle = tree.node_info(ins.node).parent;
    REQUIRE(tree.node_info(middle).start == 4);
    REQUIRE(tree.node_info(ins.node).start == 6);
    CHECK(tree.verify().empty());
    (void)tree.insert({std::span(key).first(4)}, {.pages = vpages(21, 2)});
    CHECK(ints(tree.node_info(upper).pages) == ints(vpages(21, 2)));

    const LoadLeftovers left = tree.finish_load(7, true, no_swa_moves);
    CHECK(ints(left.full) == ints(vpages(11, 2)));  // the upper part's destinations: the insert's pages won
    CHECK(left.swa.empty());
    CHECK_FALSE(left.state.is_valid());
    CHECK(tree.loads_in_flight() == 0);
    CHECK(ints(tree.node_info(middle).pages) == ints(vpages(13, 1)));
    CHECK(ints(tree.node_info(ins.node).pages) == ints(vpages(14, 1)));
    CHECK(tree.node_info(middle).device[S]);
    CHECK(tree.node_info(ins.node).device[S]);
    CHECK(tree.node_info(ins.node).state == StateId{6});
    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_length == 8);
    CHECK(ints(m.device_pages) == std::vector<int>{21, 22, 13, 14});
    CHECK_THROWS_AS((void)tree.finish_load(7, true, no_swa_moves), unikv::logic_error);  // finished once
    tree.unlock(std::move(device));
    tree.unlock(std::move(host));
    CHECK(tree.verify().empty());
}

// A failed copy installs nothing and hands every destination back.
TEST_CASE_TEMPLATE("a load whose copy failed hands back every destination and leaves the tree as it was", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    HostOnlyLeaf<Core> leaf;
    auto& [tree, key, ins, upper, device, host] = leaf;
    const Sizes before = sizes(tree);
    tree.begin_load(ins.node, 3, {.pages = vpages(11, 4), .state = StateId{6}});
    const LoadLeftovers left = tree.finish_load(3, false, no_swa_moves);
    CHECK(ints(left.full) == ints(vpages(11, 4)));
    CHECK(left.swa.empty());
    CHECK(left.state == StateId{6});
    CHECK(sizes(tree) == before);
    CHECK(tree.match_prefix({key}).device_length == 0);
    CHECK(tree.load_back_plan(ins.node).size() == 4);
    for (const LoadBackStep& s : tree.load_back_plan(ins.node)) CHECK_FALSE(s.loading);
    tree.unlock(std::move(device));
    tree.unlock(std::move(host));
    CHECK(tree.verify().empty());
}
