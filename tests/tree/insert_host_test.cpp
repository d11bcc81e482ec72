// insert_host on both tree cores: the storage tier's prefetch graft of host copies read back from storage. FULL
// host pages past the cached prefix become host-only nodes, the SWA window becomes whole nodes that take the
// window's host pages where they hold no SWA, the end node takes the Mamba host state where it holds none; what the
// tree does not take comes back. The grafted values are ordinary host copies: host hits, load-back plans and
// commits, host eviction, events.

#include <doctest/doctest.h>

#include <utility>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

namespace {

// A recorded event as (kind, component, tier, start, length).
struct GraftEvent {
    EventKind kind;
    Component component;
    Tier tier;
    std::int32_t start;
    std::int32_t length;
    friend bool operator==(const GraftEvent&, const GraftEvent&) = default;
};

template <class Tree>
std::vector<GraftEvent> graft_events(Tree& tree) {
    std::vector<GraftEvent> out;
    for (const KvEvent& e : tree.take_events()) out.push_back({e.kind, e.component, e.tier, e.start, e.length});
    return out;
}

// The unused host pages of a result, per component, as ints.
inline std::vector<int> unused_of(const HostInsertResult& r, Component c) { return ints(r.unused[c]); }

// A load-back step as (component, start, length, host pages, FULL pages).
struct GraftStep {
    Component component;
    std::int32_t start;
    std::int32_t length;
    std::vector<int> host;
    std::vector<int> full;
    friend bool operator==(const GraftStep&, const GraftStep&) = default;
};
inline std::vector<GraftStep> graft_steps(std::span<const LoadBackStep> plan) {
    std::vector<GraftStep> out;
    for (const LoadBackStep& s : plan)
        out.push_back({s.component, s.start, s.length, ints(s.host), ints(s.full_pages)});
    return out;
}

// True when `insert_host` throws `logic_error`.
template <class Tree>
bool graft_rejected(Tree& tree, TokenKey key, const HostInsertValues& values) {
    try {
        (void)tree.insert_host(key, values);
    } catch (const unikv::logic_error&) {
        return true;
    }
    return false;
}

// Everything a call that changes nothing must leave as it was.
struct GraftState {
    std::size_t nodes;
    Sizes device;
    std::array<std::int64_t, 3> host;
    friend bool operator==(const GraftState&, const GraftState&) = default;
};
template <class Tree>
GraftState graft_state(const Tree& tree) {
    return {tree.node_count(), sizes(tree), {tree.host_size(F), tree.host_size(S), tree.host_size(M)}};
}

// Caches tokens 1..8 on device with a state at their end and drains the events: the node, and the tree's state.
template <class Tree>
std::pair<NodeRef, GraftState> device_prefix_of_eight(Tree& tree) {
    auto ins = tree.insert({run(1, 8)}, {.pages = vpages(1, 4), .state = StateId{9}});
    CHECK(executed(ins.actions).empty());
    (void)tree.take_events();
    return {ins.node, graft_state(tree)};
}

}  // namespace

// Page 2: a device prefix [0,8), then the storage tier's pages of [4,16) grafted. [4,8) is cached already (its
// pages come back), [8,16) becomes a host-only leaf: a host hit that the load-back plan lists and a commit loads.
TEST_CASE_TEMPLATE("a FULL graft past a device prefix is a host hit that the load-back plan lists", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}, .events = EventMode::record});
    const auto key = run(1, 16);
    auto prefix = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 4)});
    CHECK(executed(prefix.actions).empty());
    (void)tree.take_events();

    const auto host = hpages(100, 6);
    const HostInsertResult r = tree.insert_host({key}, {.from = 4, .full = host});
    CHECK(r.grafted);
    CHECK(unused_of(r, F) == std::vector<int>{100, 101});  // [4,8): the tree holds those tokens
    CHECK(r.unused[S].empty());
    CHECK(r.unused[M].empty());
    CHECK(tree.node_count() == 2);
    const NodeInfo leaf = tree.node_info(r.node);
    CHECK(leaf.parent == prefix.node);
    CHECK(leaf.start == 8);
    CHECK(leaf.length == 8);
    CHECK(leaf.pages.empty());
    CHECK(ints(leaf.host[F]) == std::vector<int>{102, 103, 104, 105});
    CHECK(leaf.retention == 0);
    CHECK(leaf.hits == 0);
    CHECK(tree.host_size(F) == 8);
    CHECK(sizes(tree) == Sizes{{8, 0, 0}, {0, 0, 0}});  // no device data touched
    CHECK(graft_events(tree) == std::vector<GraftEvent>{{EventKind::stored, F, Tier::host, 8, 8}});
    CHECK(broken(tree).empty());

    const MatchResult device = tree.match_prefix({key});
    CHECK(device.device_length == 8);
    CHECK(device.best_length == 8);
    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.device_length == 8);
    CHECK(h.best_length == 16);
    CHECK(h.host_hit_length == 8);
    CHECK(h.best_node == r.node);
    CHECK(graft_steps(tree.load_back_plan(h.best_node)) ==
          std::vector<GraftStep>{{F, 8, 8, {102, 103, 104, 105}, {}}});

    // The same graft again: everything is cached, nothing is taken.
    const HostInsertResult again = tree.insert_host({key}, {.from = 4, .full = hpages(200, 6)});
    CHECK(again.grafted);
    CHECK(again.node == r.node);
    CHECK(unused_of(again, F) == ints(hpages(200, 6)));
    CHECK(graft_events(tree).empty());

    // Loaded back like any host copy: the host copy stays, the node is device+host.
    LockReceipt load = tree.lock(h.best_node);
    tree.commit_load_back(r.node, F, {.pages = vpages(20, 4)});
    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_length == 16);
    CHECK(ints(m.device_pages) == std::vector<int>{1, 2, 3, 4, 20, 21, 22, 23});
    CHECK(ints(tree.node_info(r.node).host[F]) == std::vector<int>{102, 103, 104, 105});
    tree.unlock(std::move(load));
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("an insert that puts the request's pages beside a grafted host copy says so", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {2}, .swa_window = 4});
    const auto key = run(1, 16);
    auto prefix = tree.insert({std::span(key).first(8)}, {.pages = vpages(1, 4)});
    CHECK(executed(prefix.actions).empty());
    CHECK_FALSE(prefix.beside_host);
    // A prefetch lands while a request computes the same tokens: its insert takes them beside the host copies.
    const HostInsertResult r = tree.insert_host({key}, {.from = 8, .full = hpages(100, 4), .swa = hpages(200, 2)});
    REQUIRE(r.grafted);
    auto computed = tree.insert({key}, {.pages = vpages(1, 8)});
    CHECK(executed(computed.actions).empty());
    CHECK(computed.beside_host);
    const NodeInfo leaf = tree.node_info(computed.node);
    CHECK(leaf.device[F]);
    CHECK(leaf.device[S]);
    CHECK_FALSE(leaf.host[F].empty());
    // The same pages again take nothing new.
    auto again = tree.insert({key}, {.pages = vpages(1, 8)});
    CHECK(executed(again.actions).empty());
    CHECK_FALSE(again.beside_host);
    CHECK(broken(tree).empty());
}

// A key that diverges inside a cached node splits it there (as insert does); the new leaf hangs off the upper part.
TEST_CASE_TEMPLATE("a graft splits the node its key diverges in and hangs a host-only leaf there", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    auto a = tree.insert({run(1, 16)}, {.pages = vpages(1, 8)});
    CHECK(executed(a.actions).empty());
    const auto key = cat(run(1, 8), run(100, 8));
    const HostInsertResult r = tree.insert_host({key}, {.from = 8, .full = hpages(50, 4)});
    CHECK(r.grafted);
    CHECK(r.unused[F].empty());
    CHECK(tree.node_count() == 3);
    const NodeInfo lower = tree.node_info(a.node);  // the handle keeps the lower part
    CHECK(lower.start == 8);
    CHECK(ints(lower.pages) == ints(vpages(5, 4)));
    const NodeInfo leaf = tree.node_info(r.node);
    CHECK(leaf.parent == lower.parent);
    CHECK(tree.node_info(leaf.parent).length == 8);
    CHECK(ints(leaf.host[F]) == ints(hpages(50, 4)));
    CHECK(tree.match_prefix({key}, {.host_hits = HostHits::include}).best_length == 16);
    CHECK(broken(tree).empty());

    // A key that ends inside a node splits it at the key's end; from == length grafts nothing new.
    const HostInsertResult inner = tree.insert_host({run(1, 4)}, {.from = 4});
    CHECK(inner.grafted);
    CHECK(tree.node_count() == 4);
    CHECK(tree.node_info(inner.node).start == 0);
    CHECK(tree.node_info(inner.node).length == 4);
    CHECK(broken(tree).empty());
}

// Page 2, W = 6 (a window of 3 pages, tokens [10,16) of a 16-token key). [0,12) is cached with its SWA dropped (a
// tombstone); the graft of [12,16) splits it at the window's start, and only the window part takes SWA host pages.
TEST_CASE_TEMPLATE("the SWA window is grafted as whole nodes, splitting the node that straddles its start", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {2}, .swa_window = 6, .events = EventMode::record});
    const auto key = run(1, 16);
    auto ins = tree.insert({std::span(key).first(12)}, {.pages = vpages(1, 6), .swa_evicted = 12});
    CHECK(executed(ins.actions).empty());
    CHECK_FALSE(tree.node_info(ins.node).device[S]);
    LockReceipt held = tree.lock(ins.node);  // a request still reads [0,12): the split keeps its locks
    const Sizes before = sizes(tree);
    (void)tree.take_events();

    const HostInsertResult r = tree.insert_host({key}, {.from = 12, .full = hpages(100, 2), .swa = hpages(200, 3)});
    CHECK(r.grafted);
    CHECK(r.unused[F].empty());
    CHECK(r.unused[S].empty());
    CHECK(tree.node_count() == 3);
    const NodeInfo tail = tree.node_info(ins.node);  // [10,12): the window part of the old node
    CHECK(tail.start == 10);
    CHECK(tail.length == 2);
    CHECK(ints(tail.pages) == std::vector<int>{6});
    CHECK(ints(tail.host[S]) == std::vector<int>{200});
    CHECK(tail.host[F].empty());
    CHECK(tail.device_locks[F] == 1);
    const NodeInfo head = tree.node_info(tail.parent);  // [0,10): before the window, no SWA host copy
    CHECK(head.start == 0);
    CHECK(head.length == 10);
    CHECK(head.host[S].empty());
    CHECK(head.device_locks[F] == 1);
    const NodeInfo leaf = tree.node_info(r.node);
    CHECK(leaf.parent == ins.node);
    CHECK(ints(leaf.host[F]) == std::vector<int>{100, 101});
    CHECK(ints(leaf.host[S]) == std::vector<int>{201, 202});
    CHECK(tree.host_size(F) == 4);
    CHECK(tree.host_size(S) == 6);
    CHECK(sizes(tree) == before);
    CHECK(graft_events(tree) == std::vector<GraftEvent>{{EventKind::stored, S, Tier::host, 10, 2},
                                                        {EventKind::stored, F, Tier::host, 12, 4},
                                                        {EventKind::stored, S, Tier::host, 12, 4}});
    CHECK(broken(tree).empty());

    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.device_length == 0);  // [0,12) has no SWA rows on device
    CHECK(h.best_length == 16);
    CHECK(h.swa_host_hit_length == 6);
    CHECK(graft_steps(tree.load_back_plan(h.best_node)) ==
          std::vector<GraftStep>{{S, 10, 2, {200}, {6}}, {F, 12, 4, {100, 101}, {}}, {S, 12, 4, {201, 202}, {}}});
    tree.unlock(std::move(held));
    CHECK(sizes(tree) == Sizes{{12, 0, 0}, {0, 0, 0}});

    // Loaded back step by step, as a write-back copy would be.
    LockReceipt load = tree.lock(h.best_node);
    tree.commit_load_back(ins.node, S);
    tree.commit_load_back(r.node, F, {.pages = vpages(7, 2)});
    tree.commit_load_back(r.node, S);
    CHECK(tree.load_back_plan(h.best_node).empty());
    tree.unlock(std::move(load));
    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_length == 16);
    CHECK(broken(tree).empty());
}

// [0,8) tombstone and [8,12) live SWA rows (the request's cursor at 8); the window [10,16) splits [8,12) at 10. Its
// window part keeps its device rows, and its slice of the SWA host pages comes back.
TEST_CASE_TEMPLATE("a window node that holds SWA rows on device keeps them and its SWA host slice comes back", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {2}, .swa_window = 6});
    const auto key = run(1, 16);
    auto ins = tree.insert({std::span(key).first(12)}, {.pages = vpages(1, 6), .swa_evicted = 8});
    CHECK(executed(ins.actions).empty());
    CHECK(tree.node_info(ins.node).device[S]);
    CHECK(tree.node_info(ins.node).start == 8);

    const HostInsertResult r = tree.insert_host({key}, {.from = 12, .full = hpages(100, 2), .swa = hpages(200, 3)});
    CHECK(r.grafted);
    CHECK(unused_of(r, S) == std::vector<int>{200});
    CHECK(r.unused[F].empty());
    const NodeInfo tail = tree.node_info(ins.node);
    CHECK(tail.start == 10);
    CHECK(tail.device[S]);
    CHECK(tail.host[S].empty());
    const NodeInfo mid = tree.node_info(tail.parent);
    CHECK(mid.start == 8);
    CHECK(mid.length == 2);
    CHECK(mid.device[S]);
    CHECK(ints(tree.node_info(r.node).host[S]) == std::vector<int>{201, 202});
    CHECK(tree.host_size(S) == 4);
    CHECK(sizes(tree) == Sizes{{12, 4, 0}, {0, 0, 0}});

    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.best_length == 16);
    CHECK(h.swa_host_hit_length == 4);
    CHECK(broken(tree).empty());

    // A key shorter than the window: its window is the whole key (min(3 pages, 2 pages)).
    const HostInsertResult short_key = tree.insert_host({run(1, 4)}, {.from = 4, .swa = hpages(300, 2)});
    CHECK(short_key.grafted);
    CHECK(ints(tree.node_info(short_key.node).host[S]) == std::vector<int>{300, 301});
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("the Mamba host state lands on the end node, or comes back when the node holds a state", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}, .events = EventMode::record});
    const auto key = run(1, 8);
    auto ins = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4), .state = StateId{7}});
    CHECK(executed(ins.actions).empty());
    (void)tree.take_events();

    const HostInsertResult r = tree.insert_host({key}, {.from = 4, .full = hpages(100, 4), .state = HostPage{50}});
    CHECK(r.grafted);
    CHECK(r.unused[M].empty());
    CHECK(ints(tree.node_info(r.node).host[M]) == std::vector<int>{50});
    CHECK(tree.host_size(M) == 1);
    CHECK(graft_events(tree) == std::vector<GraftEvent>{{EventKind::stored, F, Tier::host, 4, 4},
                                                        {EventKind::stored, M, Tier::host, 4, 4}});
    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.best_length == 8);
    CHECK(graft_steps(tree.load_back_plan(h.best_node)) ==
          std::vector<GraftStep>{{F, 4, 4, {100, 101, 102, 103}, {}}, {M, 4, 4, {50}, {}}});

    // The end node holds a state on device, or already one on host: the state comes back.
    const HostInsertResult on_device = tree.insert_host({std::span(key).first(4)}, {.from = 4, .state = HostPage{51}});
    CHECK(on_device.grafted);
    CHECK(on_device.node == ins.node);
    CHECK(unused_of(on_device, M) == std::vector<int>{51});
    const HostInsertResult on_host =
        tree.insert_host({key}, {.from = 4, .full = hpages(110, 4), .state = HostPage{52}});
    CHECK(unused_of(on_host, M) == std::vector<int>{52});
    CHECK(unused_of(on_host, F) == ints(hpages(110, 4)));
    CHECK(graft_events(tree).empty());
    CHECK(tree.host_size(M) == 1);
    CHECK(broken(tree).empty());

    // A key whose end node is new but whose inner new nodes hold no state: only the end gets one.
    const auto longer = run(1, 12);
    const HostInsertResult more =
        tree.insert_host({longer}, {.from = 8, .full = hpages(120, 4), .state = HostPage{53}});
    CHECK(more.grafted);
    CHECK(ints(tree.node_info(more.node).host[M]) == std::vector<int>{53});
    CHECK(ints(tree.node_info(r.node).host[M]) == std::vector<int>{50});
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("a graft whose from lies past the cached prefix changes nothing and returns every page", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree(
        {.page_size = {2}, .swa_window = 4, .events = EventMode::record});
    const auto [prefix_node, before] = device_prefix_of_eight(tree);

    // The key leaves the tree at a node boundary (8 < 12).
    const auto key = cat(run(1, 8), run(50, 8));
    const HostInsertResult r =
        tree.insert_host({key}, {.from = 12, .full = hpages(100, 2), .swa = hpages(200, 2), .state = HostPage{300}});
    CHECK_FALSE(r.grafted);
    CHECK(r.node == prefix_node);
    CHECK(unused_of(r, F) == std::vector<int>{100, 101});
    CHECK(unused_of(r, S) == std::vector<int>{200, 201});
    CHECK(unused_of(r, M) == std::vector<int>{300});

    // The key diverges inside a node (4 < 8): no split either, and the deepest node covered whole is the root.
    const auto diverging = cat(run(1, 4), run(60, 12));
    const HostInsertResult d = tree.insert_host(
        {diverging}, {.from = 8, .full = hpages(110, 4), .swa = hpages(210, 2), .state = HostPage{310}});
    CHECK_FALSE(d.grafted);
    CHECK(d.node.is_root());
    CHECK(unused_of(d, F) == ints(hpages(110, 4)));

    // Another namespace holds nothing.
    const auto short_key = run(1, 8);
    const HostInsertResult other =
        tree.insert_host({short_key, KeyNamespace{1}},
                         {.from = 2, .full = hpages(120, 3), .swa = hpages(220, 2), .state = HostPage{320}});
    CHECK_FALSE(other.grafted);
    CHECK(other.node.is_root());

    CHECK(graft_state(tree) == before);
    CHECK(tree.node_count() == 1);
    CHECK(graft_events(tree).empty());
    CHECK(broken(tree).empty());
}

// A node whose FULL data is in no tier (evicted without a copy while a host-only child stays) does not hold its
// tokens: a graft from past it changes nothing; a graft from before it gives it its FULL slice (as insert adopts
// it), which reconnects the host copies below.
TEST_CASE_TEMPLATE("a node without FULL data in any tier is not cached: a graft from before it adopts it", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8)});
    CHECK(executed(a.actions).empty());
    CHECK(executed(b.actions) == std::vector<Act>{});
    auto wb = tree.evict(F, 4, {.write_back = EvictBackups::on});
    CHECK(executed(wb.actions) == std::vector<Act>{backup(F, {5, 6, 7, 8}), free_pages({5, 6, 7, 8})});
    CHECK(finish(tree, b.node, F, hpages(40, 4)).empty());
    auto plain = tree.evict(F, 4);
    CHECK(executed(plain.actions) == std::vector<Act>{free_pages({1, 2, 3, 4})});
    REQUIRE(tree.contains(a.node));
    CHECK(tree.node_info(a.node).pages.empty());
    CHECK(tree.node_info(a.node).host[F].empty());
    CHECK(tree.match_prefix({run(1, 8)}, {.host_hits = HostHits::include}).best_length == 0);
    const GraftState before = graft_state(tree);

    const auto key = run(1, 12);
    const HostInsertResult past = tree.insert_host({key}, {.from = 8, .full = hpages(100, 4)});
    CHECK_FALSE(past.grafted);
    CHECK(past.node == b.node);
    CHECK(graft_state(tree) == before);

    const HostInsertResult r = tree.insert_host({key}, {.from = 0, .full = hpages(200, 12)});
    CHECK(r.grafted);
    CHECK(unused_of(r, F) == std::vector<int>{204, 205, 206, 207});  // b's tokens: it holds a host copy
    CHECK(ints(tree.node_info(a.node).host[F]) == std::vector<int>{200, 201, 202, 203});
    CHECK(ints(tree.node_info(r.node).host[F]) == std::vector<int>{208, 209, 210, 211});
    CHECK(tree.host_size(F) == 12);
    const MatchResult h = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(h.best_length == 12);
    CHECK(h.best_node == r.node);
    CHECK(broken(tree).empty());
}

TEST_CASE_TEMPLATE("an insert_host that breaks a precondition throws and changes nothing", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree(
        {.page_size = {2}, .swa_window = 4, .events = EventMode::record});
    const auto [prefix_node, before] = device_prefix_of_eight(tree);
    const auto key = run(1, 12);
    const auto full = hpages(100, 2);  // [8,12)
    const auto swa = hpages(200, 2);   // the window: min(ceil(4 / 2), 6) pages
    const HostPage state{300};
    const HostInsertValues good{.from = 8, .full = full, .swa = swa, .state = state};

    const auto rejected = [&](TokenKey k, const HostInsertValues& v) { return graft_rejected(tree, k, v); };
    const auto odd = run(1, 11);
    CHECK(rejected({odd}, {.from = 8, .full = hpages(100, 1), .swa = swa, .state = state}));  // not whole pages
    CHECK(rejected({std::span<const TokenId>{}}, {.from = 0, .state = state}));             // empty key
    CHECK(rejected({key}, {.from = 7, .full = full, .swa = swa, .state = state}));           // from not aligned
    CHECK(rejected({key}, {.from = 14, .full = {}, .swa = swa, .state = state}));            // from past the end
    CHECK(rejected({key}, {.from = -2, .full = hpages(100, 7), .swa = swa, .state = state}));
    CHECK(rejected({key}, {.from = 8, .full = hpages(100, 3), .swa = swa, .state = state}));  // FULL count
    CHECK(rejected({key}, {.from = 8, .full = full, .swa = hpages(200, 3), .state = state}));  // window count
    CHECK(rejected({key}, {.from = 8, .full = full, .swa = {}, .state = state}));
    CHECK(rejected({key}, {.from = 8, .full = full, .swa = swa}));  // Mamba needs the state
    const std::vector<HostPage> bad{HostPage{100}, HostPage{}};
    CHECK(rejected({key}, {.from = 8, .full = bad, .swa = swa, .state = state}));
    CHECK(rejected({key}, {.from = 8, .full = full, .swa = bad, .state = state}));
    CHECK(graft_state(tree) == before);
    CHECK(graft_events(tree).empty());

    // A backup pending blocks it like insert.
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK_FALSE(ev.actions.empty());
    ev.actions.mark_executed();
    const GraftState evicted = graft_state(tree);
    CHECK(rejected({key}, good));
    CHECK(graft_state(tree) == evicted);
    for (const TreeAction& a : ev.actions.list())
        if (a.kind == ActionKind::backup) (void)finish(tree, a.node, a.component);  // no host room: all dropped
    CHECK(tree.node_count() == 0);
    CHECK(broken(tree).empty());

    // Without Swa or Mamba, their values must be absent.
    typename Core::template impl<Full> plain({.page_size = {2}});
    CHECK(graft_rejected(plain, {key}, {.from = 0, .full = hpages(100, 6), .swa = swa}));
    CHECK(graft_rejected(plain, {key}, {.from = 0, .full = hpages(100, 6), .state = state}));
    CHECK(plain.node_count() == 0);
    CHECK(plain.insert_host({key}, {.from = 0, .full = hpages(100, 6)}).grafted);
}

// Page 1, W = 4: [0,4) on device with its SWA dropped, and [4,8) grafted with its FULL and SWA window copies.
TEST_CASE_TEMPLATE("host eviction takes grafted values back", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4, .events = EventMode::record});
    auto ins = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .swa_evicted = 4});
    CHECK(executed(ins.actions).empty());
    const HostInsertResult r =
        tree.insert_host({run(1, 8)}, {.from = 4, .full = hpages(100, 4), .swa = hpages(200, 4)});
    CHECK(r.grafted);
    CHECK(tree.node_count() == 2);
    CHECK(tree.host_size(F) == 4);
    CHECK(tree.host_size(S) == 4);
    (void)tree.take_events();

    // The leaf goes whole: its FULL and SWA copies. (A device lock keeps [0,4), which without its SWA could no
    // longer end a match once it is a leaf.)
    LockReceipt held = tree.lock(ins.node);
    auto ev = tree.evict_host(F, 4);
    CHECK(ev.host_freed_of(F) == 4);
    CHECK(executed(ev.actions) ==
          std::vector<Act>{free_host(F, {100, 101, 102, 103}), free_host(S, {200, 201, 202, 203})});
    CHECK_FALSE(tree.contains(r.node));
    CHECK(tree.host_size(F) == 0);
    CHECK(tree.host_size(S) == 0);
    CHECK(tree.node_count() == 1);
    CHECK(graft_events(tree) == std::vector<GraftEvent>{{EventKind::removed, F, Tier::host, 4, 4},
                                                        {EventKind::removed, S, Tier::host, 4, 4}});
    CHECK(broken(tree).empty());

    // An SWA window grafted beside device FULL rows (the node's SWA a tombstone) goes alone.
    const HostInsertResult window = tree.insert_host({run(1, 4)}, {.from = 4, .swa = hpages(210, 4)});
    CHECK(window.grafted);
    CHECK(window.node == ins.node);
    CHECK(ints(tree.node_info(ins.node).host[S]) == std::vector<int>{210, 211, 212, 213});
    auto swa = tree.evict_host(S, 4);
    CHECK(executed(swa.actions) == std::vector<Act>{free_host(S, {210, 211, 212, 213})});
    CHECK(tree.host_size(S) == 0);
    CHECK(tree.node_info(ins.node).host[S].empty());
    tree.unlock(std::move(held));
    CHECK(tree.contains(ins.node));
    CHECK(broken(tree).empty());
}
