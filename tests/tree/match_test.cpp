// match_prefix behaviour, on both tree cores: page granularity, namespaces, splits (with locks held), the three
// validators (SWA window smaller than, equal to and larger than a node), host hits, branching lengths, LRU; and
// peek_prefix, the read-only query that reports match_prefix's lengths without changing the tree.

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <utility>

#include "tree_test_support.hpp"

using namespace unikv;
using namespace unikv::test;

TEST_CASE_TEMPLATE("a miss returns the root and zero lengths", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {2}, .swa_window = 4});
    const auto key = run(1, 8);
    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_node.is_root());
    CHECK(m.best_node.is_root());
    CHECK(m.device_length == 0);
    CHECK(m.best_length == 0);
    CHECK(m.full_length == 0);
    CHECK(m.device_pages.empty());
    CHECK(tree.node_count() == 0);
}

TEST_CASE_TEMPLATE("a match returns whole pages and splits the node it ends in", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {4}});
    const auto key = run(100, 12);
    auto ins = tree.insert({key}, {.pages = vpages(10, 3)});
    CHECK(ins.actions.empty());
    CHECK(tree.node_count() == 1);

    // 10 tokens match, but only 2 whole pages: the node splits at 8.
    const MatchResult m = tree.match_prefix({std::span(key).first(10)});
    CHECK(m.device_length == 8);
    CHECK(ints(m.device_pages) == std::vector<int>{10, 11});
    CHECK(tree.node_count() == 2);
    const NodeInfo upper = tree.node_info(m.device_node);
    CHECK(upper.start == 0);
    CHECK(upper.length == 8);
    CHECK(ints(upper.pages) == std::vector<int>{10, 11});
    CHECK(upper.children == 1);
    CHECK(tree.evictable_size(F) == 12);

    // A key that diverges inside the second page matches the first page only.
    auto other = key;
    other[6] = -1;
    const MatchResult d = tree.match_prefix({other});
    CHECK(d.device_length == 4);
    CHECK(ints(d.device_pages) == std::vector<int>{10});
    CHECK(tree.node_count() == 3);
}

TEST_CASE_TEMPLATE("equal tokens under different namespaces never share nodes", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto key = run(7, 6);
    auto a = tree.insert({key, KeyNamespace{1}}, {.pages = vpages(1, 3)});
    auto b = tree.insert({key, KeyNamespace{2}}, {.pages = vpages(11, 3)});
    CHECK(a.actions.empty());
    CHECK(b.actions.empty());  // nothing shared, so nothing duplicate
    CHECK(b.prefix_length == 0);
    CHECK(tree.node_count() == 2);
    CHECK(ints(tree.match_prefix({key, KeyNamespace{2}}).device_pages) == std::vector<int>{11, 12, 13});
    CHECK(ints(tree.match_prefix({key, KeyNamespace{1}}).device_pages) == std::vector<int>{1, 2, 3});
    CHECK(tree.match_prefix({key, KeyNamespace{3}}).device_length == 0);
    CHECK(tree.evictable_size(F) == 12);
}

// RadixTree files the children recent walks took in their parent, under the first and last token of their first
// page; a hint must never decide a match. Here six children of one prompt, two of them sharing those two tokens,
// are walked in orders that defeat any four-entry cache, and a child is evicted and replaced by a sibling with the
// same two tokens (likely in the freed slot), so stale hints point at a live child that is not the key's.
TEST_CASE_TEMPLATE("walks alternating among many children, with look-alike first pages, take the right child", Core,
                   RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {4}});
    const auto prompt = run(1, 8);
    // First pages: children 0 and 1 share their first and last token, so do 2 and 3; 4 and 5 differ.
    const std::vector<std::vector<TokenId>> first_pages{toks({50, 60, 61, 51}), toks({50, 70, 71, 51}),
                                                        toks({52, 1, 1, 53}),   toks({52, 2, 2, 53}),
                                                        toks({54, 3, 4, 55}),   toks({56, 5, 6, 57})};
    std::vector<std::vector<TokenId>> keys;
    for (std::size_t c = 0; c < first_pages.size(); ++c) {
        keys.push_back(cat(cat(prompt, first_pages[c]), run(1000 + 10 * static_cast<int>(c), 4)));
        const auto pages = cat_pages(vpages(1, 2), vpages(100 * static_cast<int>(c + 1), 2));
        auto r = tree.insert({keys.back()}, {.pages = pages});
        executed(r.actions);
    }
    const auto expected = [](std::size_t c) {
        return std::vector<int>{1, 2, 100 * static_cast<int>(c + 1), 100 * static_cast<int>(c + 1) + 1};
    };
    const std::vector<std::size_t> order{0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0, 1, 0, 3, 2, 0, 2, 4, 1, 5, 3};
    for (int round = 0; round < 3; ++round) {
        for (std::size_t c : order) {
            const MatchResult m = tree.match_prefix({keys[c]});
            REQUIRE(m.device_length == 16);
            CHECK(ints(m.device_pages) == expected(c));
        }
    }

    // Child 0 walked last but one, child 1 last; every other child is older, so evict them first, then child 0.
    for (std::size_t c : {2, 3, 4, 5, 0, 1}) (void)tree.match_prefix({keys[c]});
    auto ev = tree.evict(F, 5 * 8);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({300, 301, 400, 401, 500, 501, 600, 601, 100, 101})});
    // A new sibling of child 1 with the same first and last token as children 0 and 1.
    const auto twin = cat(cat(prompt, toks({50, 80, 81, 51})), run(2000, 4));
    auto r = tree.insert({twin}, {.pages = cat_pages(vpages(1, 2), vpages(900, 2))});
    CHECK(executed(r.actions).empty());
    CHECK(ints(tree.match_prefix({keys[0]}).device_pages) == std::vector<int>{1, 2});  // gone: the prompt only
    CHECK(ints(tree.match_prefix({twin}).device_pages) == std::vector<int>{1, 2, 900, 901});
    CHECK(ints(tree.match_prefix({keys[1]}).device_pages) == expected(1));
    CHECK(ints(tree.match_prefix({keys[0]}).device_pages) == std::vector<int>{1, 2});
    CHECK(tree.node_count() == 3);
}

TEST_CASE_TEMPLATE("a split during match keeps locks and exact sizes", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Swa, Mamba> tree({.page_size = {1}, .swa_window = 2});
    const auto key = run(1, 6);
    auto ins = tree.insert({key}, {.pages = vpages(1, 6), .state = StateId{9}});
    LockReceipt held = tree.lock(ins.node);
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {6, 6, 1}});  // the window lock covers whole nodes

    const MatchResult m = tree.match_prefix({std::span(key).first(4)});
    CHECK(tree.node_count() == 2);
    // The upper part has no Mamba state, so it cannot end a device match; it is where a checkpoint would go.
    CHECK(m.device_length == 0);
    CHECK(m.full_length == 4);
    CHECK(m.mamba_branching_length == 4);
    CHECK(m.swa_branching_length == 0);

    const NodeInfo lower = tree.node_info(ins.node);
    const NodeInfo upper = tree.node_info(lower.parent);
    CHECK(upper.start == 0);
    CHECK(upper.length == 4);
    CHECK(lower.start == 4);
    CHECK(lower.length == 2);
    CHECK(upper.device_locks == per_component<std::uint32_t>{{1, 1, 0}});
    CHECK(lower.device_locks == per_component<std::uint32_t>{{1, 1, 1}});
    CHECK(upper.state == StateId{});
    CHECK(lower.state == StateId{9});
    CHECK(sizes(tree) == Sizes{{0, 0, 0}, {6, 6, 1}});

    tree.unlock(std::move(held));
    CHECK(sizes(tree) == Sizes{{6, 6, 1}, {0, 0, 0}});
}

// An SWA tombstone [0, 4) followed by a live node [4, 8): the window decides how deep a device match can end.
template <class Tree>
Tree tombstone_then_live(std::int32_t window) {
    Tree tree({.page_size = {1}, .swa_window = window});
    auto ins = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .swa_evicted = 4});
    CHECK(tree.node_count() == 2);
    CHECK(tree.evictable_size(S) == 4);
    return tree;
}

TEST_CASE_TEMPLATE("SWA accepts a boundary once W contiguous SWA tokens precede it", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full, Swa>;
    const auto key = run(1, 8);

    SUBCASE("window smaller than the node") {
        Tree tree = tombstone_then_live<Tree>(2);
        CHECK(tree.match_prefix({key}).device_length == 8);
        CHECK(tree.match_prefix({std::span(key).first(6)}).device_length == 6);  // [4, 6) has 2 SWA tokens
        const MatchResult m = tree.match_prefix({std::span(key).first(5)});      // [4, 5) has only 1
        CHECK(m.device_length == 0);
        CHECK(m.full_length == 5);
        CHECK(m.swa_branching_length == 5);
    }
    SUBCASE("window equal to the node") {
        Tree tree = tombstone_then_live<Tree>(4);
        CHECK(tree.match_prefix({key}).device_length == 8);
        const MatchResult m = tree.match_prefix({std::span(key).first(7)});
        CHECK(m.device_length == 0);
        CHECK(m.swa_branching_length == 7);
    }
    SUBCASE("window larger than the node") {
        Tree tree = tombstone_then_live<Tree>(6);
        const MatchResult m = tree.match_prefix({key});
        CHECK(m.device_length == 0);
        CHECK(m.full_length == 8);
        CHECK(m.swa_branching_length == 8);
        CHECK(m.device_pages.empty());
    }
    SUBCASE("a path without tombstones from the root needs no full window") {
        Tree tree({.page_size = {1}, .swa_window = 6});
        auto ins = tree.insert({run(1, 3)}, {.pages = vpages(1, 3)});
        const MatchResult m = tree.match_prefix({run(1, 3)});
        CHECK(m.device_length == 3);
        CHECK(m.swa_branching_length == 0);
    }
}

TEST_CASE_TEMPLATE("Mamba needs a state on the boundary node", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    const auto key = run(1, 10);
    auto a = tree.insert({std::span(key).first(6)}, {.pages = vpages(1, 6), .state = StateId{1}});
    auto b = tree.insert({key}, {.pages = vpages(1, 10), .state = StateId{2}});
    CHECK(b.actions.empty());
    CHECK(b.prefix_length == 6);
    CHECK(tree.evictable_size(M) == 2);

    const MatchResult m = tree.match_prefix({std::span(key).first(8)});
    CHECK(m.device_length == 6);
    CHECK(m.mamba_branching_length == 8);
    CHECK(ints(m.device_pages) == std::vector<int>{1, 2, 3, 4, 5, 6});
    const MatchResult whole = tree.match_prefix({key});
    CHECK(whole.device_length == 10);
    // The pages come as one run per node on the path, top-down (the match at 8 split [6,10)).
    REQUIRE(whole.device_pages.runs().size() == 3);
    CHECK(ints(whole.device_pages.runs()[0]) == std::vector<int>{1, 2, 3, 4, 5, 6});
    CHECK(ints(whole.device_pages.runs()[1]) == std::vector<int>{7, 8});
    CHECK(ints(whole.device_pages.runs()[2]) == std::vector<int>{9, 10});
    CHECK(whole.device_pages.size() == 10);
}

TEST_CASE_TEMPLATE("host-only data counts only when host hits are included", Core, RadixTreeCore, ReferenceTreeCore) {
    SUBCASE("FULL") {
        typename Core::template impl<Full> tree({.page_size = {2}});
        const auto key = run(1, 8);
        auto ins = tree.insert({key}, {.pages = vpages(1, 4)});
        tree.set_host(ins.node, F, hpages(50, 4));
        auto ev = tree.evict(F, 8);
        CHECK(executed(ev.actions) == std::vector<Act>{free_pages({1, 2, 3, 4})});
        CHECK(tree.node_count() == 1);  // demoted, not deleted

        const MatchResult device_only = tree.match_prefix({key});
        CHECK(device_only.device_length == 0);
        CHECK(device_only.best_length == 0);
        const MatchResult with_host = tree.match_prefix({key}, {.host_hits = HostHits::include});
        CHECK(with_host.device_length == 0);
        CHECK(with_host.best_length == 8);
        CHECK(with_host.host_hit_length == 8);
        CHECK(with_host.best_node == ins.node);
    }
    SUBCASE("FULL and SWA: the SWA host copies within one window are reported") {
        typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
        const auto key = run(1, 8);
        auto ins = tree.insert({key}, {.pages = vpages(1, 8)});
        tree.set_host(ins.node, F, hpages(50, 8));
        tree.set_host(ins.node, S, hpages(80, 8));
        auto ev = tree.evict(F, 8);
        CHECK(executed(ev.actions) == std::vector<Act>{free_pages({1, 2, 3, 4, 5, 6, 7, 8})});
        CHECK(ev.freed(S) == 8);
        const MatchResult m = tree.match_prefix({key}, {.host_hits = HostHits::include});
        CHECK(m.best_length == 8);
        CHECK(m.host_hit_length == 8);
        CHECK(m.swa_host_hit_length == 8);
        CHECK(tree.match_prefix({key}).best_length == 0);
    }
}

TEST_CASE_TEMPLATE("a match refreshes SWA only within one window plus one page", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    // Four 2-token nodes A B C D, inserted turn by turn; W = 2, so a refresh reaches W + 1 = 3 tokens: D and C.
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
    const auto key = run(1, 8);
    for (int n = 2; n <= 8; n += 2) {
        auto ins = tree.insert({std::span(key).first(static_cast<std::size_t>(n))}, {.pages = vpages(1, n)});
        CHECK(ins.actions.empty());
    }
    CHECK(tree.node_count() == 4);
    CHECK(tree.match_prefix({key}).device_length == 8);

    // SWA eviction takes the out-of-window nodes A then B, leaving tombstones that still carry FULL.
    auto ev = tree.evict(S, 4);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4})});
    CHECK(ev.freed(S) == 4);
    CHECK(ev.freed(F) == 0);
    CHECK(tree.evictable_size(S) == 4);
    CHECK(tree.evictable_size(F) == 8);
    // The window before the end is intact, so the full key still matches on device.
    const MatchResult m = tree.match_prefix({key});
    CHECK(m.device_length == 8);
    CHECK(ints(m.device_pages) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
    // A boundary inside the tombstones does not.
    CHECK(tree.match_prefix({std::span(key).first(4)}).device_length == 0);
}

TEST_CASE_TEMPLATE("a match refreshes FULL along the whole path", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    auto x = tree.insert({run(10, 4)}, {.pages = vpages(10, 4)});
    auto y = tree.insert({run(20, 4)}, {.pages = vpages(20, 4)});
    CHECK(tree.match_prefix({run(10, 4)}).device_length == 4);  // x is now the most recent
    auto ev = tree.evict(F, 1);
    CHECK(executed(ev.actions) == std::vector<Act>{free_pages({20, 21, 22, 23})});
    CHECK(tree.contains(x.node));
    CHECK_FALSE(tree.contains(y.node));
}

// X [0,4) with child Y [4,8), W = 2 (a refresh reaches W + 1 = 3 tokens: Y alone); Z is inserted after both. A
// match of X+Y refreshes FULL on X and Y but SWA on Y only, so X stays the oldest SWA segment.
TEST_CASE_TEMPLATE("an SWA refresh leaves ancestors beyond one window plus one page old", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 2});
    auto x = tree.insert({run(1, 4)}, {.pages = vpages(1, 4)});
    auto y = tree.insert({cat(run(1, 4), run(10, 4))}, {.pages = vpages(1, 8)});
    auto z = tree.insert({run(50, 4)}, {.pages = vpages(50, 4)});
    CHECK(tree.match_prefix({cat(run(1, 4), run(10, 4))}).device_length == 8);
    auto ev = tree.evict(S, 1);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4})});  // X tombstoned, not Z deleted
    CHECK(tree.contains(z.node));
    // FULL was refreshed on the whole path: Z is now the oldest FULL leaf.
    auto full = tree.evict(F, 1);
    CHECK(executed(full.actions) == std::vector<Act>{free_pages({50, 51, 52, 53})});
    (void)x;
    (void)y;
}

TEST_CASE_TEMPLATE("a Mamba refresh touches only the matched node", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
    auto a = tree.insert({run(1, 4)}, {.pages = vpages(1, 4), .state = StateId{1}});
    auto b = tree.insert({run(1, 8)}, {.pages = vpages(1, 8), .state = StateId{2}});
    auto z = tree.insert({run(50, 4)}, {.pages = vpages(50, 4), .state = StateId{3}});
    CHECK(tree.match_prefix({run(1, 8)}).device_length == 8);  // refreshes Mamba on B only
    auto ev = tree.evict(M, 1);
    CHECK(executed(ev.actions) == std::vector<Act>{free_states({1})});  // A's state, not Z whole
    CHECK(tree.contains(z.node));
    CHECK(tree.node_info(b.node).state == StateId{2});
    (void)a;
}

// A [0,4), B [4,6), C [6,8), W = 4: every SWA segment is host-only, and C is the best node. The host-only SWA that
// a load-back needs is one window before C's end: C and B (4 tokens), not A.
TEST_CASE_TEMPLATE("swa_host_hit_length counts host-only SWA within one window only", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full, Swa> tree({.page_size = {1}, .swa_window = 4});
    const auto key = run(1, 8);
    auto a = tree.insert({std::span(key).first(4)}, {.pages = vpages(1, 4)});
    auto b = tree.insert({std::span(key).first(6)}, {.pages = vpages(1, 6)});
    auto c = tree.insert({key}, {.pages = vpages(1, 8)});
    tree.set_host(a.node, S, hpages(100, 4));
    tree.set_host(b.node, S, hpages(200, 2));
    tree.set_host(c.node, S, hpages(300, 2));
    LockReceipt keep = tree.lock(c.node, {.components = ComponentMask::of(F)});  // C stays, as a tombstone
    auto ev = tree.evict(S, 8);
    CHECK(executed(ev.actions) == std::vector<Act>{free_swa({1, 2, 3, 4, 5, 6, 7, 8})});
    const MatchResult m = tree.match_prefix({key}, {.host_hits = HostHits::include});
    CHECK(m.device_length == 0);
    CHECK(m.full_length == 8);
    CHECK(m.swa_branching_length == 8);
    CHECK(m.best_length == 8);
    CHECK(m.best_node == c.node);
    CHECK(m.host_hit_length == 8);
    CHECK(m.swa_host_hit_length == 4);
    // A boundary at B's end needs B and A: 2 + 4 tokens reach W = 4 only with A's.
    CHECK(tree.match_prefix({std::span(key).first(6)}, {.host_hits = HostHits::include}).swa_host_hit_length == 6);
    tree.unlock(std::move(keep));
}

// ---------------------------------------------------------------------------------------------------------
// peek_prefix

namespace unikv {
inline std::ostream& operator<<(std::ostream& os, const PrefixPeek& p) {
    return os << "{device " << p.device_length << ", best " << p.best_length << '}';
}
}  // namespace unikv

namespace {

// Everything the contract shows of every node, in node order: equal dumps mean peek changed no node.
template <class Tree>
std::string dump(const Tree& t) {
    std::ostringstream s;
    s << t.node_count() << " nodes;";
    for (NodeRef n : t.nodes()) {
        const NodeInfo i = t.node_info(n);
        s << ' ' << n.index() << '/' << n.generation() << " <" << i.parent.index() << ' ' << i.ns.value << ' '
          << i.start << '+' << i.length << " ch" << i.children << " r" << int(i.retention) << " w"
          << int(i.window_class) << " st" << i.state.value() << " hits" << i.hits << " p";
        for (int p : ints(i.pages)) s << p << ',';
        for (Component c : all_components) {
            s << " c" << index_of(c) << i.device[c] << i.backup_pending[c] << i.write_through_pending[c] << i.joined[c]
              << i.stored[c] << " l" << i.device_locks[c] << '/' << i.host_locks[c] << " h";
            for (int h : ints(i.host[c])) s << h << ',';
        }
    }
    return s.str();
}

// Peeks `key` (through a const reference), checks that nothing changed, then matches it with host hits and checks
// the peek gave the match's lengths. Returns the peek.
template <class Tree>
PrefixPeek peek_then_match(Tree& tree, TokenKey key) {
    const std::string before = dump(tree);
    const Tree& view = tree;
    const PrefixPeek p = view.peek_prefix(key);
    CHECK(dump(tree) == before);
    CHECK(broken(tree).empty());
    const MatchResult m = tree.match_prefix(key, {.host_hits = HostHits::include});
    CHECK(p.device_length == m.device_length);
    CHECK(p.best_length == m.best_length);
    CHECK(p.best_length >= p.device_length);
    return p;
}

// A tree (page 2, W = 4 where Swa is a component) with: A = [0, 12) inserted with its SWA gone before token 4 (a
// tombstone node [0, 4), a live one [4, 12)) and state 1; B = A's first 8 tokens then 8 of its own, state 2 (A's
// live node splits at 8); C = [200, 210) with host copies of every component, then evicted from device (host-only).
// A and B stay device-locked. Returns the tree and the locks.
template <class Tree>
std::pair<Tree, std::vector<LockReceipt>> peek_fixture() {
    using Set = typename Tree::components;
    Tree tree({.page_size = {2}, .swa_window = Set::has_swa ? 4 : 0});
    std::vector<LockReceipt> locks;
    const auto a = run(1, 12);
    const auto b = cat(run(1, 8), run(100, 8));
    const auto c = run(200, 10);
    auto ia = tree.insert({a}, {.pages = vpages(1, 6), .swa_evicted = Set::has_swa ? 4 : 0, .state = StateId{1}});
    CHECK(executed(ia.actions).empty());
    locks.push_back(tree.lock(ia.node));
    auto ib = tree.insert({b}, {.pages = cat_pages(vpages(1, 4), vpages(20, 4)), .state = StateId{2}});
    CHECK(executed(ib.actions).empty());
    locks.push_back(tree.lock(ib.node));
    auto ic = tree.insert({c}, {.pages = vpages(40, 5), .state = StateId{3}});
    CHECK(executed(ic.actions).empty());
    tree.set_host(ic.node, F, hpages(50, 5));
    if constexpr (Set::has_swa) tree.set_host(ic.node, S, hpages(60, 5));
    if constexpr (Set::has_mamba) tree.set_host(ic.node, M, hpages(70, 1));
    auto ev = tree.evict(F, 10);
    executed(ev.actions);
    CHECK(ev.freed(F) == 10);
    CHECK_FALSE(tree.node_info(ic.node).device[F]);
    return {std::move(tree), std::move(locks)};
}

template <class Tree>
void peek_agrees_on_every_key() {
    auto [tree, locks] = peek_fixture<Tree>();
    const auto a = run(1, 12);
    const auto b = cat(run(1, 8), run(100, 8));
    auto b_diverged = b;
    b_diverged[11] = -1;  // inside B's second page of its own
    const std::vector<std::pair<std::vector<TokenId>, KeyNamespace>> keys{
        {a, {}},
        {run(1, 11), {}},                  // a partial page at the end
        {run(1, 6), {}},                   // ends inside the live node [4, 8)
        {run(1, 3), {}},                   // ends inside the tombstone
        {run(1, 7), {}},                   // inside, on a partial page
        {b, {}},                           // shares A's prefix
        {cat(run(1, 8), run(100, 3)), {}}, // inside B's own node, partial page
        {b_diverged, {}},                  // diverges inside a page
        {run(200, 10), {}},                // host-only
        {run(200, 5), {}},                 // inside the host-only node
        {cat(run(200, 10), run(7, 4)), {}},
        {run(200, 10), KeyNamespace{1}},   // another namespace: a miss
        {{}, {}},
        {run(1, 1), {}},                   // less than a page
    };
    int device_hits = 0;
    int host_hits = 0;
    for (int round = 0; round < 2; ++round) {  // the second round walks the nodes the first round's matches split
        for (const auto& [key, ns] : keys) {
            CAPTURE(round);
            CAPTURE(key.size());
            const PrefixPeek p = peek_then_match(tree, TokenKey{key, ns});
            device_hits += p.device_length > 0 ? 1 : 0;
            host_hits += p.best_length > p.device_length ? 1 : 0;
        }
    }
    CHECK(device_hits > 0);
    CHECK(host_hits > 0);
    for (auto& l : locks) tree.unlock(std::move(l));
}

}  // namespace

TEST_CASE_TEMPLATE("peek_prefix gives match_prefix's lengths and changes no node", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    SUBCASE("Full") { peek_agrees_on_every_key<typename Core::template impl<Full>>(); }
    SUBCASE("Full, Swa") { peek_agrees_on_every_key<typename Core::template impl<Full, Swa>>(); }
    SUBCASE("Full, Mamba") { peek_agrees_on_every_key<typename Core::template impl<Full, Mamba>>(); }
    SUBCASE("Full, Swa, Mamba") { peek_agrees_on_every_key<typename Core::template impl<Full, Swa, Mamba>>(); }
}

TEST_CASE_TEMPLATE("peek_prefix counts a node it ends inside as the split's upper part", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    SUBCASE("FULL: the matched whole pages") {
        typename Core::template impl<Full> tree({.page_size = {4}});
        const auto key = run(100, 12);
        auto ins = tree.insert({key}, {.pages = vpages(10, 3)});
        CHECK(tree.peek_prefix({std::span(key).first(10)}) == PrefixPeek{8, 8});
        CHECK(tree.node_count() == 1);
        auto other = key;
        other[6] = -1;
        CHECK(tree.peek_prefix({other}) == PrefixPeek{4, 4});
        CHECK(tree.node_count() == 1);
    }
    SUBCASE("SWA: the run counts the matched tokens only") {
        // Tombstone [0, 4), live [4, 8), W = 2: a boundary at 5 has one SWA token, at 6 two.
        using Tree = typename Core::template impl<Full, Swa>;
        Tree tree = tombstone_then_live<Tree>(2);
        const auto key = run(1, 8);
        CHECK(tree.peek_prefix({std::span(key).first(5)}) == PrefixPeek{0, 0});
        CHECK(tree.peek_prefix({std::span(key).first(6)}) == PrefixPeek{6, 6});
        CHECK(tree.peek_prefix({key}) == PrefixPeek{8, 8});
        CHECK(tree.node_count() == 2);
    }
    SUBCASE("Mamba: the state stays on the lower part") {
        typename Core::template impl<Full, Mamba> tree({.page_size = {1}});
        const auto key = run(1, 10);
        auto a = tree.insert({std::span(key).first(6)}, {.pages = vpages(1, 6), .state = StateId{1}});
        auto b = tree.insert({key}, {.pages = vpages(1, 10), .state = StateId{2}});
        CHECK(tree.peek_prefix({std::span(key).first(8)}) == PrefixPeek{6, 6});
        CHECK(tree.peek_prefix({key}) == PrefixPeek{10, 10});
        CHECK(tree.node_count() == 2);
    }
    SUBCASE("host-only FULL counts in best_length only") {
        typename Core::template impl<Full> tree({.page_size = {2}});
        const auto key = run(1, 8);
        auto ins = tree.insert({key}, {.pages = vpages(1, 4)});
        tree.set_host(ins.node, F, hpages(50, 4));
        auto ev = tree.evict(F, 8);
        executed(ev.actions);
        CHECK(tree.peek_prefix({key}) == PrefixPeek{0, 8});
        CHECK(tree.peek_prefix({std::span(key).first(5)}) == PrefixPeek{0, 4});
        CHECK(tree.node_count() == 1);
    }
}

// X then Y inserted, so X is the older in every component; a match of X would make Y the first victim. A peek of
// X must leave the order as it was: evicting one node's worth of each component takes X, as on a tree never peeked.
template <class Tree>
void peek_keeps_eviction_order() {
    using Set = typename Tree::components;
    const auto build = [] {
        Tree tree({.page_size = {2}, .swa_window = Set::has_swa ? 2 : 0});
        auto x = tree.insert({run(10, 4)}, {.pages = vpages(10, 2), .state = StateId{1}});
        auto y = tree.insert({run(20, 4)}, {.pages = vpages(20, 2), .state = StateId{2}});
        CHECK(executed(x.actions).empty());
        CHECK(executed(y.actions).empty());
        return tree;
    };
    for (Component c : {F, S, M}) {
        if (!Set::mask.has(c)) continue;
        CAPTURE(c);
        Tree peeked = build();
        Tree plain = build();
        Tree matched = build();
        CHECK(peeked.peek_prefix({run(10, 4)}).device_length == 4);
        CHECK(peeked.peek_prefix({run(10, 3)}).device_length == (Set::has_mamba ? 0 : 2));  // inside X: no state
        CHECK(matched.match_prefix({run(10, 4)}).device_length == 4);
        CHECK(dump(peeked) == dump(plain));
        auto a = peeked.evict(c, c == M ? 1 : 4);
        auto b = plain.evict(c, c == M ? 1 : 4);
        auto m = matched.evict(c, c == M ? 1 : 4);
        const auto victim = executed(a.actions);
        CHECK(victim == executed(b.actions));
        CHECK(victim != executed(m.actions));  // the control: a match does reorder
        CHECK(dump(peeked) == dump(plain));
    }
}

TEST_CASE_TEMPLATE("peek_prefix refreshes no LRU stamp", Core, RadixTreeCore, ReferenceTreeCore) {
    SUBCASE("Full") { peek_keeps_eviction_order<typename Core::template impl<Full>>(); }
    SUBCASE("Full, Swa") { peek_keeps_eviction_order<typename Core::template impl<Full, Swa>>(); }
    SUBCASE("Full, Mamba") { peek_keeps_eviction_order<typename Core::template impl<Full, Mamba>>(); }
    SUBCASE("Full, Swa, Mamba") { peek_keeps_eviction_order<typename Core::template impl<Full, Swa, Mamba>>(); }
}

TEST_CASE_TEMPLATE("peek_prefix is allowed while a backup is pending, where match_prefix is not", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {2}});
    const auto key = run(1, 8);
    auto ins = tree.insert({key}, {.pages = vpages(1, 4)});
    auto ev = tree.evict(F, 8, {.write_back = EvictBackups::on});
    CHECK(executed(ev.actions) == std::vector<Act>{backup(F, {1, 2, 3, 4}), free_pages({1, 2, 3, 4})});
    const std::string before = dump(tree);
    // The eviction took the rows from the tree and the copy is not recorded yet: neither tier serves the key.
    CHECK(tree.peek_prefix({key}) == PrefixPeek{0, 0});
    CHECK(tree.peek_prefix({std::span(key).first(5)}) == PrefixPeek{0, 0});
    CHECK(dump(tree) == before);
    CHECK_THROWS_AS((void)tree.match_prefix({key}), logic_error);
    CHECK(finish(tree, ins.node, F, hpages(30, 4)).empty());
    CHECK(tree.peek_prefix({key}) == PrefixPeek{0, 8});  // recorded: a host hit
    CHECK(tree.peek_prefix({std::span(key).first(5)}) == PrefixPeek{0, 4});
    CHECK(tree.match_prefix({key}, {.host_hits = HostHits::include}).best_length == 8);
}

TEST_CASE_TEMPLATE("peek_prefix on a moved-from tree throws", Core, RadixTreeCore, ReferenceTreeCore) {
    using Tree = typename Core::template impl<Full>;
    Tree tree({.page_size = {2}});
    Tree other = std::move(tree);
    CHECK(other.peek_prefix({run(1, 4)}) == PrefixPeek{});
    CHECK_THROWS_AS((void)tree.peek_prefix({run(1, 4)}), logic_error);  // NOLINT(bugprone-use-after-move)
}
