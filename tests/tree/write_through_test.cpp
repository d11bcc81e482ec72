// Write-through in the tree, on both cores (reference §4.2, §11 rule 9): hits counted per insert, the threshold,
// the write_through actions insert emits (FULL, SWA within one window of the end, Mamba on the end node), the
// pending mark (no second emission, no eviction), the commit (set_host) and the skip, a split while the write is
// pending or in flight, drop_host after a failed copy, and drop_host of a stored copy (no second write).

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

namespace {

template <class Tree>
per_component<bool> pending_of(const Tree& tree, NodeRef n) {
    return tree.node_info(n).write_through_pending;
}

inline per_component<bool> marks(bool f, bool s, bool m) { return {{f, s, m}}; }

}  // namespace

TEST_CASE_TEMPLATE("at threshold 1 every inserted node is written through: FULL, SWA, then Mamba", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree(
        {.page_size = {1}, .swa_window = 4, .write_through_threshold = 1});
    const auto key = run(1, 8);
    auto a = tree.insert({key}, {.pages = vpages(1, 8), .state = StateId{20}});
    CHECK(executed(a.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4, 5, 6, 7, 8}),
                                                  write_through(S, {1, 2, 3, 4, 5, 6, 7, 8}), write_through(M, {20})});
    CHECK(pending_of(tree, a.node) == marks(true, true, true));
    CHECK(tree.node_info(a.node).hits == 1);

    // Pending: a second insert does not emit again, and eviction passes the node by (set_host needs the rows).
    auto b = tree.insert({key}, {.pages = vpages(1, 8), .state = StateId{21}});
    CHECK(executed(b.actions) == std::vector<Act>{free_states({21})});
    CHECK(tree.node_info(a.node).hits == 2);
    auto held = tree.evict(F, 8);
    CHECK(held.actions.empty());
    CHECK(held.freed(F) == 0);
    CHECK(tree.evictable_size(F) == 8);

    // The commits, at queue time: host copies recorded, marks cleared.
    tree.set_host(a.node, F, hpages(100, 8));
    tree.set_host(a.node, S, hpages(200, 8));
    tree.set_host(a.node, M, hpages(300, 1));
    const NodeInfo info = tree.node_info(a.node);
    CHECK(info.write_through_pending == marks(false, false, false));
    CHECK(ints(info.host[F]) == ints(hpages(100, 8)));
    CHECK(ints(info.host[S]) == ints(hpages(200, 8)));
    CHECK(ints(info.host[M]) == ints(hpages(300, 1)));
    CHECK(tree.host_size(F) == 8);
    CHECK(tree.host_size(M) == 1);
    CHECK(broken(tree).empty());

    // Backed up: nothing to write again, and the node can be evicted without a copy.
    auto c = tree.insert({key}, {.pages = vpages(1, 8), .state = StateId{22}});
    CHECK(executed(c.actions) == std::vector<Act>{free_states({22})});
    auto ev = tree.evict(F, 8);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({1, 2, 3, 4, 5, 6, 7, 8}), free_states({20})});
    CHECK(tree.match_prefix({key}, {.host_hits = HostHits::include}).best_length == 8);
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("SWA is written through only within one window of the inserted end; a skipped write comes again",
                   Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4, .write_through_threshold = 1});
    const auto key = run(1, 12);
    auto a = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4)});
    CHECK(executed(a.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4}), write_through(S, {1, 2, 3, 4})});
    // No host room: both given up, nothing recorded.
    tree.skip_write_through(a.node, F);
    tree.skip_write_through(a.node, S);
    CHECK(pending_of(tree, a.node) == marks(false, false, false));
    CHECK_THROWS_AS(tree.skip_write_through(a.node, S), unikv::logic_error);
    CHECK(tree.host_size(F) == 0);

    // A's FULL comes again; its SWA ends 8 tokens before the new end, out of the window a match there reads.
    auto b = tree.insert({key}, {.pages = vpages(1, 12)});
    CHECK(executed(b.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4}), write_through(F, {5, 6, 7, 8, 9, 10, 11, 12}),
                                                  write_through(S, {5, 6, 7, 8, 9, 10, 11, 12})});
    CHECK(pending_of(tree, a.node) == marks(true, false, false));
    CHECK(pending_of(tree, b.node) == marks(true, true, false));
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("write-through selective emits nothing before the second hit; a match is not a hit", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}, .write_through_threshold = 2});
    const auto key = run(1, 12);
    const auto k8 = std::span(key).first(8);
    auto a = tree.insert({k8}, {.pages = vpages(1, 4)});
    CHECK(a.actions.empty());
    CHECK(tree.match_prefix({k8}).device_length == 8);
    CHECK(tree.match_prefix({k8}).device_length == 8);
    CHECK(tree.node_info(a.node).hits == 1);
    auto b = tree.insert({k8}, {.pages = vpages(1, 4)});
    CHECK(executed(b.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4})});
    // The extension is new (one hit); the prefix is pending (no second emission).
    auto c = tree.insert({key}, {.pages = vpages(1, 6)});
    CHECK(c.actions.empty());
    auto d = tree.insert({key}, {.pages = vpages(1, 6)});
    CHECK(executed(d.actions) == std::vector<Act>{write_through(F, {5, 6})});
    CHECK(tree.node_info(a.node).hits == 4);
    CHECK(tree.node_info(d.node).hits == 2);
}

TEST_CASE_TEMPLATE("a node split while its write-through is pending gets its host value on both parts", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree(
        {.page_size = {1}, .swa_window = 4, .events = EventMode::record, .write_through_threshold = 1});
    const auto key = run(1, 8);
    auto a = tree.insert({key}, {.pages = vpages(1, 8)});
    CHECK(executed(a.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4, 5, 6, 7, 8}),
                                                  write_through(S, {1, 2, 3, 4, 5, 6, 7, 8})});
    CHECK(tree.match_prefix({std::span(key).first(4)}).device_length == 4);  // splits the node at 4
    const NodeRef upper = tree.node_info(a.node).parent;
    REQUIRE_FALSE(upper.is_root());
    CHECK(pending_of(tree, upper) == marks(true, true, false));
    auto held = tree.evict(F, 8);
    CHECK(held.freed(F) == 0);  // neither part is a candidate while pending

    // The commit names the action's node and covers the action's pages: top-down over the parts.
    (void)tree.take_events();
    tree.set_host(a.node, F, hpages(100, 8));
    CHECK(ints(tree.node_info(upper).host[F]) == ints(hpages(100, 4)));
    CHECK(ints(tree.node_info(a.node).host[F]) == ints(hpages(104, 4)));
    const auto events = tree.take_events();
    REQUIRE(events.size() == 2);
    CHECK((events[0].tier == Tier::host && events[0].start == 0 && events[0].length == 4));
    CHECK((events[1].tier == Tier::host && events[1].start == 4 && events[1].length == 4));
    CHECK(pending_of(tree, upper) == marks(false, true, false));
    CHECK(tree.host_size(F) == 8);

    // A commit with the lower part's count only is refused and changes nothing; the skip clears both parts.
    CHECK_THROWS_AS(tree.set_host(a.node, S, hpages(200, 4)), unikv::logic_error);
    CHECK(pending_of(tree, upper) == marks(false, true, false));
    tree.skip_write_through(a.node, S);
    CHECK(pending_of(tree, upper) == marks(false, false, false));
    CHECK(pending_of(tree, a.node) == marks(false, false, false));
    CHECK(broken(tree).empty());

    // Two nodes now: the next insert writes the SWA of the one within the window.
    auto b = tree.insert({key}, {.pages = vpages(1, 8)});
    CHECK(executed(b.actions) == std::vector<Act>{write_through(S, {5, 6, 7, 8})});
    CHECK(tree.node_info(upper).hits == 2);
}

TEST_CASE_TEMPLATE("drop_host after a failed copy frees the host pages of every part split off the node", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}, .write_through_threshold = 1});
    const auto key = run(1, 12);
    auto a = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 4)});
    CHECK(executed(a.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4})});
    tree.set_host(a.node, F, hpages(100, 4));
    auto c = tree.insert({key}, {.pages = vpages(1, 6)});
    CHECK(executed(c.actions) == std::vector<Act>{write_through(F, {5, 6})});
    tree.set_host(c.node, F, hpages(200, 2));
    LockReceipt copy_lock = tree.lock(c.node);  // the cache's device lock, held until the acks

    // While the copies are in flight a match splits the first node; then its copy fails.
    CHECK(tree.match_prefix({std::span(key).first(4)}).device_length == 4);
    const NodeRef upper = tree.node_info(a.node).parent;
    CHECK(ints(tree.node_info(upper).host[F]) == ints(hpages(100, 2)));
    auto undo = tree.drop_host(a.node, F);
    CHECK(executed(undo.actions) == std::vector<Act>{free_host(F, {100, 101, 102, 103})});
    CHECK(undo.host_freed_of(F) == 8);
    CHECK(tree.node_info(upper).host[F].empty());
    CHECK(tree.node_info(a.node).host[F].empty());
    CHECK(ints(tree.node_info(c.node).host[F]) == ints(hpages(200, 2)));  // another write: untouched
    CHECK(tree.host_size(F) == 4);
    CHECK(tree.match_prefix({key}).device_length == 12);  // device data stays
    CHECK_THROWS_AS((void)tree.drop_host(a.node, F), unikv::logic_error);
    CHECK(broken(tree).empty());
    tree.unlock(std::move(copy_lock));

    // Both parts are unbacked nodes now: the next insert writes each through.
    auto d = tree.insert({key}, {.pages = vpages(1, 6)});
    CHECK(executed(d.actions) == std::vector<Act>{write_through(F, {1, 2}), write_through(F, {3, 4})});
    tree.skip_write_through(upper, F);
    tree.skip_write_through(a.node, F);
    auto undo_c = tree.drop_host(c.node, F);
    CHECK(executed(undo_c.actions) == std::vector<Act>{free_host(F, {200, 201})});
    CHECK(tree.host_size(F) == 0);
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("drop_host of a stored copy marks every part stored: no write-through of it is emitted again", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4, .write_through_threshold = 1});
    const auto key = run(1, 10);
    auto a = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8)});
    CHECK(executed(a.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4, 5, 6, 7, 8}),
                                                  write_through(S, {1, 2, 3, 4, 5, 6, 7, 8})});
    tree.set_host(a.node, F, hpages(100, 8));
    tree.set_host(a.node, S, hpages(200, 8));
    CHECK(tree.match_prefix({std::span(key).first(4)}).device_length == 4);  // splits the staged copies at 4
    const NodeRef upper = tree.node_info(a.node).parent;
    REQUIRE_FALSE(upper.is_root());

    // The store acknowledged both copies: a buffer-only host lets go of them.
    auto full = tree.drop_host(a.node, F, HostDrop::stored);
    CHECK(executed(full.actions) == std::vector<Act>{free_host(F, {100, 101, 102, 103, 104, 105, 106, 107})});
    auto swa = tree.drop_host(upper, S, HostDrop::stored);
    CHECK(executed(swa.actions) == std::vector<Act>{free_host(S, {200, 201, 202, 203, 204, 205, 206, 207})});
    for (NodeRef n : {upper, a.node}) {
        CHECK(tree.node_info(n).stored == marks(true, true, false));
        CHECK(tree.node_info(n).host[F].empty());
        CHECK(tree.node_info(n).host[S].empty());
    }
    CHECK(tree.host_size(F) == 0);
    CHECK(tree.host_size(S) == 0);
    CHECK(broken(tree).empty());

    // Inserts over the stored parts write only what is new; a split of a stored node keeps the mark on both parts.
    auto b = tree.insert({key}, {.pages = vpages(1, 10)});
    CHECK(executed(b.actions) == std::vector<Act>{write_through(F, {9, 10}), write_through(S, {9, 10})});
    CHECK(tree.match_prefix({std::span(key).first(2)}).device_length == 2);
    const NodeRef top = tree.node_info(upper).parent;
    REQUIRE_FALSE(top.is_root());
    CHECK(tree.node_info(top).stored == marks(true, true, false));
    auto same = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8)});
    CHECK(same.actions.empty());
    // A failed copy's drop marks nothing: the next insert writes the node again.
    tree.set_host(b.node, F, hpages(300, 2));
    auto undo = tree.drop_host(b.node, F);
    CHECK(executed(undo.actions) == std::vector<Act>{free_host(F, {300, 301})});
    CHECK(tree.node_info(b.node).stored == marks(false, false, false));
    tree.skip_write_through(b.node, S);
    auto again = tree.insert({key}, {.pages = vpages(1, 10)});
    CHECK(executed(again.actions) == std::vector<Act>{write_through(F, {9, 10}), write_through(S, {9, 10})});
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("a stored drop of a split copy takes only the parts beside device data", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto key = run(1, 8);
    // A prefetch grafts [0,8) as one host copy; a request computes [0,4) (splitting it) beside the copy.
    const HostInsertResult g = tree.insert_host({key}, {.from = 0, .full = hpages(100, 4)});
    REQUIRE(g.grafted);
    auto computed = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 2)});
    CHECK(executed(computed.actions).empty());
    CHECK(computed.beside_host);
    const NodeRef upper = computed.node;
    REQUIRE(tree.node_info(g.node).parent == upper);
    CHECK(tree.node_info(g.node).joined[F]);

    // The upper part goes; the lower part, whose only copy it is, stays as a host copy of its own.
    auto let_go = tree.drop_host(upper, F, HostDrop::stored);
    CHECK(executed(let_go.actions) == std::vector<Act>{free_host(F, {100, 101})});
    CHECK(tree.node_info(upper).host[F].empty());
    CHECK(tree.node_info(upper).stored[F]);
    const NodeInfo lower = tree.node_info(g.node);
    CHECK(ints(lower.host[F]) == ints(hpages(102, 2)));
    CHECK_FALSE(lower.joined[F]);
    CHECK_FALSE(lower.stored[F]);
    CHECK(tree.match_prefix({key}, {.host_hits = HostHits::include}).best_length == 8);
    CHECK(broken(tree).empty());

    // Loaded, the lower part goes too.
    LockReceipt load = tree.lock(g.node, {.tier = Tier::host});
    tree.commit_load_back(g.node, F, {.pages = vpages(20, 2)});
    tree.unlock(std::move(load));
    auto gone = tree.drop_host(g.node, F, HostDrop::stored);
    CHECK(executed(gone.actions) == std::vector<Act>{free_host(F, {102, 103})});
    CHECK(tree.host_size(F) == 0);
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("HostDrop::stored refuses a Mamba state, nothing changed", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}, .write_through_threshold = 1});
    const auto key = run(1, 4);
    auto a = tree.insert({key}, {.pages = vpages(1, 4), .state = StateId{20}});
    CHECK(executed(a.actions).size() == 2);  // FULL and the state written through
    tree.set_host(a.node, Component::mamba, hpages(100, 1));
    CHECK_THROWS_WITH_AS((void)tree.drop_host(a.node, Component::mamba, HostDrop::stored),
                         doctest::Contains("Mamba states are not staged"), unikv::logic_error);
    CHECK(ints(tree.node_info(a.node).host[Component::mamba]) == ints(hpages(100, 1)));
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("a Mamba state is written through on the end node only", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}, .write_through_threshold = 2});
    const auto key = run(1, 12);
    auto a = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 8), .state = StateId{20}});
    CHECK(a.actions.empty());
    // The prefix reaches 2 hits but is not the end node: its FULL only.
    auto b = tree.insert({key}, {.pages = vpages(1, 12), .state = StateId{21}});
    CHECK(executed(b.actions) == std::vector<Act>{write_through(F, {1, 2, 3, 4, 5, 6, 7, 8})});
    auto c = tree.insert({key}, {.pages = vpages(1, 12), .state = StateId{22}});
    CHECK(executed(c.actions) ==
          std::vector<Act>{free_states({22}), write_through(F, {9, 10, 11, 12}), write_through(M, {21})});
    CHECK(pending_of(tree, a.node) == marks(true, false, false));
    CHECK(pending_of(tree, c.node) == marks(true, false, true));
    tree.set_host(c.node, M, hpages(300, 1));
    CHECK(ints(tree.node_info(c.node).host[M]) == ints(hpages(300, 1)));
    auto undo = tree.drop_host(c.node, M);
    CHECK(executed(undo.actions) == std::vector<Act>{free_host(M, {300})});
    CHECK(tree.host_size(M) == 0);
    tree.skip_write_through(a.node, F);
    tree.skip_write_through(c.node, F);
    CHECK(broken(tree).empty());
}

// A write-through in flight holds its node: a host eviction that removes a host-only leaf below a stateless
// tri-pool node (which cannot end a match: no Mamba in any tier) must not collect that node while its write is
// pending, or the copy's record names a deleted node (found by the randomized cache test at seed 4242).
TEST_CASE_TEMPLATE("a host eviction does not collect a stateless node whose write-through is pending", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree(
        {.page_size = {1}, .swa_window = 4, .write_through_threshold = 1});
    const auto key = run(1, 8);
    const auto prefix = std::span(key).first(4);
    // The upper node, stateless, its writes given up; the lower node below it written through and backed up.
    auto a = tree.insert({prefix}, {.pages = vpages(1, 4)});
    (void)executed(a.actions);
    tree.skip_write_through(a.node, F);
    tree.skip_write_through(a.node, S);
    auto b = tree.insert({key}, {.pages = vpages(1, 8), .state = StateId{20}});
    (void)executed(b.actions);
    const NodeRef upper = a.node;
    const NodeRef lower = b.node;
    for (const Component k : {F, S}) {
        if (pending_of(tree, upper)[k]) tree.skip_write_through(upper, k);  // FULL; its SWA is out of the window
    }
    tree.set_host(lower, F, hpages(100, 4));
    tree.set_host(lower, S, hpages(200, 4));
    tree.set_host(lower, M, hpages(300, 1));
    auto off = tree.evict(F, 4);  // the lower node leaves the device: host-only below the stateless upper node
    (void)executed(off.actions);
    REQUIRE(tree.node_info(lower).device[F] == false);
    REQUIRE(tree.node_info(upper).device[F]);

    // The prefix again: the upper node's writes are pending when the host makes room by evicting the lower node.
    auto c = tree.insert({prefix}, {.pages = vpages(11, 4)});
    CHECK(executed(c.actions) ==
          std::vector<Act>{free_pages({11, 12, 13, 14}), write_through(F, {1, 2, 3, 4}), write_through(S, {1, 2, 3, 4})});
    CHECK(pending_of(tree, upper) == marks(true, true, false));
    auto room = tree.evict_host(F, 4);
    CHECK(room.host_freed_of(F) == 4);
    (void)executed(room.actions);
    CHECK_FALSE(tree.contains(lower));
    REQUIRE(tree.contains(upper));  // held by its pending writes
    tree.set_host(upper, F, hpages(400, 4));
    tree.set_host(upper, S, hpages(500, 4));
    CHECK(ints(tree.node_info(upper).host[F]) == ints(hpages(400, 4)));
    CHECK(broken(tree).empty());
}
