// Load-back through the cache: the targets stay owned from `load_back` to the ack (pending reservation, then
// the host-transfer gate; fresh allocations and evictions leave them alone), only the missing window rows
// are reserved, a pool that stays short rolls the whole load back, a failed copy commits nothing, and a cache
// moved with a load in flight acknowledges it through the moved-to object.

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "hicache_support.hpp"

using namespace hicache_test;

namespace {

// `key` cached and written back: a host-only node (every component on host).
template <class P>
NodeRef hosted(Rig<P>& r, const std::vector<TokenId>& key) {
    const NodeRef node = r.insert(key);
    const Eviction ev = r.cache.evict({Component::full, static_cast<std::int64_t>(key.size()) / page_size});
    REQUIRE(ev.dropped == 0);
    REQUIRE_FALSE(r.cache.tree().node_info(node).device[Component::full]);
    return node;
}

struct Counts {
    std::int32_t full = 0, swa = 0, mamba = 0;
    template <class A>
    static Counts of(const A& a) {
        Counts c{a.live_pages(Component::full), 0, 0};
        if constexpr (A::has_swa) c.swa = a.live_pages(Component::swa) + a.reserved_pages(Component::swa);
        if constexpr (A::has_mamba) c.mamba = a.live_pages(Component::mamba);
        return c;
    }
    friend bool operator==(const Counts&, const Counts&) = default;
};

}  // namespace

TEST_CASE_TEMPLATE("load-back targets stay owned until the ack, and the locks return to the request's own", P,
                   SwaSeparate, SwaEnvelope, TriSeparate) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 2);
    const NodeRef node = hosted(r, key);
    const MatchResult m = r.cache.match(TokenKey{key});
    LockReceipt own = r.cache.lock(m.best_node);  // the request's own lock
    const LoadBackStart start = r.cache.load_back(m.best_node);
    REQUIRE(start);
    CHECK(r.cache.allocator().moves_blocked(Component::swa));  // the pending reservation
    CHECK(r.cache.tree().node_info(node).device_locks[Component::full] == 2);
    CHECK(r.cache.tree().node_info(node).host_locks[Component::full] == 1);
    CHECK(r.cache.start_loading() == 1);
    CHECK(r.cache.allocator().moves_blocked());  // the host-transfer gate, until the ack
    // Eviction frees nothing of the targets: the node is locked and its FULL pages not committed yet.
    CHECK(r.cache.evict({Component::full, 16}).pages_freed[Component::full] == 0);
    (void)r.run_transfers();
    // A fresh allocation after the copies ran avoids the targets: scribbling on it leaves the loaded rows.
    std::vector<VirtualPage> fresh(4);
    REQUIRE(r.cache.allocator().alloc(fresh));
    REQUIRE(drain(r.backend, r.stream));
    for (VirtualPage v : fresh) {
        for (std::int32_t row = 0; row < page_size; ++row) {
            r.rows().write(Component::full, v.value() * page_size + row, 0xdeadbeefu);
            r.rows().write(Component::swa, v.value() * page_size + row, 0xdeadbeefu);
        }
    }
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    CHECK(r.device_holds(node, key));
    CHECK_FALSE(r.cache.allocator().moves_blocked());
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 1);  // the request's own
    CHECK(info.host_locks[Component::full] == 0);
    r.cache.allocator().free(fresh);
    r.cache.unlock(std::move(own));
    CHECK(r.broken().empty());
}

TEST_CASE("only the missing window rows are reserved and bound: a resident parent, an evicted child") {
    Rig<SwaSeparate> r(64, 16);
    const auto parent = Rig<SwaSeparate>::key(100, 2);
    auto child = parent;
    for (TokenId t : Rig<SwaSeparate>::key(900, 1)) child.push_back(t);
    const NodeRef top = r.insert(parent);
    const NodeRef leaf = r.insert(child);
    LockReceipt keep = r.cache.lock(top);  // the parent stays resident
    REQUIRE(r.cache.evict({Component::full, 1}).backed_up >= 1);
    REQUIRE_FALSE(r.cache.tree().node_info(leaf).device[Component::full]);
    REQUIRE(r.cache.tree().node_info(top).device[Component::swa]);

    const MatchResult m = r.cache.match(TokenKey{child});
    REQUIRE(m.best_length == 12);
    const LoadBackStart start = r.cache.load_back(m.best_node);
    REQUIRE(start);
    // The window (two pages) covers the parent's last page and the child's: only the child's is missing.
    CHECK(r.cache.allocator().pending_load_pages(Component::swa) == 1);
    CHECK(r.cache.start_loading() == 1);
    (void)r.run_transfers();
    REQUIRE(r.cache.loading_check().size() == 1);
    CHECK(r.device_holds(top, child));
    CHECK(r.device_holds(leaf, child));
    CHECK(r.cache.match(TokenKey{child}).device_length == 12);
    r.cache.unlock(std::move(keep));
    CHECK(r.broken().empty());
}

TEST_CASE("a failed SWA reservation rolls the whole load back: counts, queue, match and host copy unchanged") {
    Rig<SwaSeparate> r(16, 16);
    const auto key = Rig<SwaSeparate>::key(100, 2);
    const NodeRef node = hosted(r, key);
    // Leave room for the two FULL pages only: the SWA reservation falls short and nothing can be evicted.
    std::vector<VirtualPage> filler;
    for (VirtualPage v; r.cache.allocator().alloc_full(std::span(&v, 1));) filler.push_back(v);
    REQUIRE(filler.size() >= 2);
    r.cache.allocator().free(std::span<const VirtualPage>(filler).last(2));
    filler.resize(filler.size() - 2);
    const Counts before = Counts::of(r.cache.allocator());
    const MatchResult m = r.cache.match(TokenKey{key});

    const LoadBackStart start = r.cache.load_back(m.best_node);
    REQUIRE_FALSE(start);
    CHECK(start.status == LoadBackStart::Status::short_of_pages);
    CHECK(start.failure.missing.component == Component::swa);
    CHECK(Counts::of(r.cache.allocator()) == before);
    CHECK_FALSE(r.cache.controller().has_inflight());
    CHECK_FALSE(r.cache.allocator().moves_blocked());
    const MatchResult after = r.cache.match(TokenKey{key});
    CHECK(after.best_length == m.best_length);
    CHECK(after.device_length == 0);
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(info.host_locks[Component::full] == 0);
    CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.host_holds(node, Component::swa, key));
    r.cache.allocator().free(filler);
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a failed load copy commits nothing and frees its targets; a retry loads byte-exact", P, SwaSeparate,
                   TriSeparate) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 2);
    const NodeRef node = hosted(r, key);
    const Counts before = Counts::of(r.cache.allocator());
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(r.cache.load_back(m.best_node));
    r.backend.inject_copy_failure(r.cache.controller().stream());
    CHECK(r.cache.start_loading() == 1);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK_FALSE(done[0].committed);
    CHECK(Counts::of(r.cache.allocator()) == before);
    CHECK(r.cache.match(TokenKey{key}).device_length == 0);  // no poisoned row is served
    CHECK_FALSE(r.cache.tree().node_info(node).device[Component::full]);
    CHECK(r.cache.tree().node_info(node).host_locks[Component::full] == 0);
    CHECK(r.broken().empty());

    r.backend.clear_copy_failure(r.cache.controller().stream());
    CHECK(r.load(r.cache.match(TokenKey{key}).best_node));
    CHECK(r.device_holds(node, key));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a cache moved with a load in flight acknowledges it through the moved-to object", P, SwaSeparate,
                   TriSeparate) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 3);
    const NodeRef node = hosted(r, key);
    REQUIRE(r.cache.load_back(r.cache.match(TokenKey{key}).best_node));
    CHECK(r.cache.start_loading() == 1);
    std::optional<typename Rig<P>::Cache> moved(std::move(r.cache));
    CHECK(r.backend.queued(moved->controller().stream()) > 0);  // nothing ran before the move
    while (r.backend.run_all() > 0) {
    }
    const std::span<const LoadDone> done = moved->loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    Rows<typename Rig<P>::Alloc> rows{&moved->allocator()};
    const NodeInfo info = moved->tree().node_info(node);
    for (std::size_t k = 0; k < info.pages.size(); ++k) {
        CHECK(rows.page_holds(Component::full, info.pages[k], key,
                              info.start + static_cast<std::int32_t>(k) * page_size));
    }
    CHECK(moved->match(TokenKey{key}).device_length == 12);
    CHECK(moved->verify().empty());
}

TEST_CASE("a cache destroyed with a load queued and not submitted cancels its reservation: nothing is dropped") {
    const std::uint64_t drops = dropped_count();
    {
        Rig<SwaSeparate> r(64, 16);
        const auto key = Rig<SwaSeparate>::key(100, 3);
        (void)hosted(r, key);
        REQUIRE(r.cache.load_back(r.cache.match(TokenKey{key}).best_node));
        CHECK(r.cache.allocator().pending_load_pages(Component::swa) > 0);  // queued, not submitted
    }
    CHECK(dropped_count() == drops);
}

TEST_CASE(
    "tri-pool: a Mamba slot that would move the float under the pending reservation fails the whole load, or "
    "succeeds after evicting a checkpoint") {
    Rig<TriSeparate> r(96, 16);
    auto& alloc = r.cache.allocator();
    const auto key = Rig<TriSeparate>::key(100, 2);
    const NodeRef node = hosted(r, key);
    // A live request's SWA rows sit in the float, with markers: a move would show in their pages.
    const auto other = Rig<TriSeparate>::key(700, 2);
    std::vector<VirtualPage> live(2);
    REQUIRE(alloc.alloc(live));
    REQUIRE(drain(r.backend, r.stream));
    for (std::size_t k = 0; k < live.size(); ++k)
        r.rows().write_page(Component::swa, live[k], other, static_cast<std::int32_t>(k) * page_size);
    const auto swa_pages = [&] {
        std::vector<PhysicalPage> out(live.size());
        alloc.translate_swa(std::span<const VirtualPage>(live), std::span(out));
        return out;
    };
    // Fill the Mamba end with the request's own states: a new slot needs the float to move.
    std::vector<StateId> states;
    while (alloc.available_size(Component::mamba) > 0) {
        REQUIRE(alloc.alloc_state(std::span(&states.emplace_back(), 1)));
    }
    const std::vector<PhysicalPage> swa_before = swa_pages();
    const Counts before = Counts::of(alloc);
    const std::uint64_t copies = r.backend.counters().copies_queued;

    const LoadBackStart failed = r.cache.load_back(r.cache.match(TokenKey{key}).best_node);
    REQUIRE_FALSE(failed);
    CHECK(failed.failure.missing.component == Component::mamba);
    CHECK(r.backend.counters().copies_queued == copies);  // nothing moved, nothing queued
    CHECK(swa_pages() == swa_before);
    CHECK(Counts::of(alloc) == before);
    CHECK(alloc.pending_load_pages(Component::swa) == 0);  // the reservation was cancelled, not left counted
    CHECK_FALSE(alloc.moves_blocked());
    CHECK_FALSE(r.cache.controller().has_inflight());
    CHECK(r.cache.match(TokenKey{key}).device_length == 0);
    CHECK(r.host_holds(node, Component::mamba, key));
    CHECK(r.broken().empty());

    // One slot goes to a cached checkpoint instead: the retry evicts it (written back) and takes its slot.
    alloc.free_state(std::span<const StateId>(&states.back(), 1));
    states.pop_back();
    const auto cached = Rig<TriSeparate>::key(800, 1);
    (void)r.insert(cached);
    REQUIRE(alloc.available_size(Component::mamba) == 0);
    CHECK(r.load(r.cache.match(TokenKey{key}).best_node));
    CHECK(r.device_holds(node, key));
    CHECK(swa_pages() == swa_before);
    for (std::size_t k = 0; k < live.size(); ++k) {
        CHECK(r.rows().page_holds(Component::swa, live[k], other, static_cast<std::int32_t>(k) * page_size));
    }
    alloc.free_state(states);
    alloc.free(live);
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("host eviction racing a load leaves the host copy it reads until the ack; other host data goes", P,
                   SwaSeparate, SwaEnvelope) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 2);
    const NodeRef node = hosted(r, key);
    const NodeRef other = hosted(r, Rig<P>::key(600, 2));
    REQUIRE(r.cache.load_back(r.cache.match(TokenKey{key}).best_node));
    const auto evict_all_host = [&] {
        (void)r.cache.evict_host({Component::swa, 16});
        (void)r.cache.evict_host({Component::full, 16});
        CHECK(r.host_holds(node, Component::full, key));
        CHECK(r.host_holds(node, Component::swa, key));
    };
    evict_all_host();  // queued
    CHECK_FALSE(r.cache.tree().contains(other));
    CHECK(r.cache.host_pools().used(Component::full) == 2);
    CHECK(r.cache.start_loading() == 1);
    CHECK(r.run_transfers(evict_all_host) > 0);  // before every copy step
    evict_all_host();  // ran, not acknowledged
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    CHECK(r.device_holds(node, key));
    CHECK(r.cache.tree().node_info(node).host_locks[Component::full] == 0);
    CHECK(r.broken().empty());
}

TEST_CASE("a load into pages a queued compaction just vacated waits for the move, whichever stream runs first") {
    for (const std::size_t pick : {0u, 1u}) {  // the allocator's stream first, or the transfer stream when it can
        CAPTURE(pick);
        Rig<SwaSeparate> r(64, 16);
        auto& alloc = r.cache.allocator();
        const auto key = Rig<SwaSeparate>::key(100, 2);
        const NodeRef node = hosted(r, key);
        // A live request's pages below a gap, with markers; the urgent flush moves them up into the gap.
        std::vector<VirtualPage> gap(2);
        REQUIRE(alloc.alloc(gap));
        const auto mine = Rig<SwaSeparate>::key(700, 2);
        std::vector<VirtualPage> live(2);
        REQUIRE(alloc.alloc(live));
        REQUIRE(drain(r.backend, r.stream));
        for (std::size_t k = 0; k < live.size(); ++k) {
            r.rows().write_page(Component::full, live[k], mine, static_cast<std::int32_t>(k) * page_size);
            r.rows().write_page(Component::swa, live[k], mine, static_cast<std::int32_t>(k) * page_size);
        }
        std::vector<PhysicalPage> vacated(live.size());
        alloc.translate_full(std::span<const VirtualPage>(live), std::span(vacated));
        alloc.free(gap);
        REQUIRE(alloc.flush(FlushMode::urgent).pages_moved > 0);  // queued on the allocator's stream, not run

        REQUIRE(r.cache.load_back(r.cache.match(TokenKey{key}).best_node));
        CHECK(r.cache.start_loading() == 1);
        while (r.backend.run_one(pick)) {
        }
        const std::span<const LoadDone> done = r.cache.loading_check();
        REQUIRE(done.size() == 1);
        CHECK(done[0].committed);
        const NodeInfo info = r.cache.tree().node_info(node);
        std::vector<PhysicalPage> landed(info.pages.size());
        alloc.translate_full(std::span<const VirtualPage>(info.pages), std::span(landed));
        bool reused = false;
        for (PhysicalPage p : landed) reused = reused || std::find(vacated.begin(), vacated.end(), p) != vacated.end();
        CHECK(reused);  // the load wrote where the moved rows were read from
        CHECK(r.device_holds(node, key));
        for (std::size_t k = 0; k < live.size(); ++k) {
            CHECK(r.rows().page_holds(Component::full, live[k], mine, static_cast<std::int32_t>(k) * page_size));
            CHECK(r.rows().page_holds(Component::swa, live[k], mine, static_cast<std::int32_t>(k) * page_size));
        }
        alloc.free(live);
        CHECK(r.broken().empty());
    }
}

// A throw inside `load_back` itself, from the tree's plan or from the eviction that makes room for the FULL
// pages, releases both locks and rolls everything back; the node is then loaded byte-exact.
TEST_CASE("a throw inside load_back (its plan, or the eviction that makes room) releases both locks") {
    TreeFault fault = TreeFault::none;
    SUBCASE("the plan") { fault = TreeFault::load_back_plan; }
    SUBCASE("the eviction") { fault = TreeFault::evict; }
    using P = FaultyPolicies<SwaFullLayout>;
    Rig<P> r(16, 16);
    auto& alloc = r.cache.allocator();
    const auto key = Rig<P>::key(100, 2);
    const NodeRef node = hosted(r, key);
    const auto cached = Rig<P>::key(500, 2);
    const NodeRef victim = r.insert(cached);  // what the eviction would take
    std::vector<VirtualPage> filler;           // no room left: the FULL allocation evicts first
    for (VirtualPage v; alloc.alloc_full(std::span(&v, 1));) filler.push_back(v);
    const Counts before = Counts::of(alloc);
    const std::uint64_t dropped = dropped_count();

    TreeFaults::next = fault;
    CHECK_THROWS_AS((void)r.cache.load_back(r.cache.match(TokenKey{key}).best_node), std::runtime_error);
    CHECK(TreeFaults::next == TreeFault::none);  // the fault was reached
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(info.host_locks[Component::full] == 0);
    CHECK(info.host_locks[Component::swa] == 0);
    CHECK(dropped_count() == dropped);  // no receipt was lost either
    CHECK(Counts::of(alloc) == before);
    CHECK(r.cache.loads_in_flight() == 0);
    CHECK_FALSE(r.cache.controller().has_inflight());
    CHECK_FALSE(alloc.moves_blocked());
    CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.host_holds(node, Component::swa, key));
    CHECK(r.device_holds(victim, cached));
    CHECK(r.broken().empty());

    alloc.free(filler);
    CHECK(r.load(r.cache.match(TokenKey{key}).best_node));
    CHECK(r.device_holds(node, key));
    CHECK(r.cache.tree().node_info(node).host_locks[Component::full] == 0);
    CHECK(r.broken().empty());
}

// Two loads acknowledged together; finishing the first throws. It stays, locks and all, with the one after it;
// the next check finishes both, byte-exact, and nothing is dropped or freed twice.
TEST_CASE("a finish that throws keeps its load, and the next check finishes it and the loads after it") {
    using P = FaultyPolicies<SwaFullLayout>;
    Rig<P> r(64, 16);
    const auto first = Rig<P>::key(100, 2);
    const auto second = Rig<P>::key(500, 3);
    const NodeRef a = hosted(r, first);
    const NodeRef b = hosted(r, second);
    const LoadBackStart la = r.cache.load_back(r.cache.match(TokenKey{first}).best_node);
    const LoadBackStart lb = r.cache.load_back(r.cache.match(TokenKey{second}).best_node);
    REQUIRE(la);
    REQUIRE(lb);
    CHECK(r.cache.start_loading() == 2);
    (void)r.run_transfers();
    const std::uint64_t dropped = dropped_count();
    const std::int32_t live = r.live(Component::full);

    TreeFaults::next = TreeFault::finish_load;
    CHECK_THROWS_AS((void)r.cache.loading_check(), std::runtime_error);
    CHECK(TreeFaults::next == TreeFault::none);
    CHECK(r.cache.loads_in_flight() == 2);
    CHECK(r.cache.tree().loads_in_flight() == 2);
    CHECK(r.cache.tree().node_info(a).device_locks[Component::full] == 1);  // kept for the next check
    CHECK(r.cache.tree().node_info(a).host_locks[Component::full] == 1);
    CHECK(r.cache.match(TokenKey{first}).device_length == 0);  // not installed
    CHECK(r.live(Component::full) == live);                    // nothing freed
    CHECK(dropped_count() == dropped);
    CHECK(r.broken().empty());

    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 2);
    CHECK(done[0].id == la.id);
    CHECK(done[1].id == lb.id);
    CHECK(done[0].committed);
    CHECK(done[1].committed);
    CHECK(r.cache.tree().loads_in_flight() == 0);
    for (const NodeRef n : {a, b}) {
        CHECK(r.cache.tree().node_info(n).device_locks[Component::full] == 0);
        CHECK(r.cache.tree().node_info(n).host_locks[Component::full] == 0);
    }
    CHECK(r.device_holds(a, first));
    CHECK(r.device_holds(b, second));
    CHECK(r.live(Component::full) == live);
    CHECK(r.broken().empty());
}

TEST_CASE("a split of a node under load cuts the load's record: each part lands on the node it now names") {
    // A [0,16) and B [16,20) written back: A splits at one window before its end, A1 [0,8) keeps FULL only on host,
    // A2 [8,16) FULL and SWA. B's window is B and A2, so the load binds A2's SWA rows under its FULL destinations.
    Rig<SwaSeparate> r(64, 16);
    auto& alloc = r.cache.allocator();
    const auto key = Rig<SwaSeparate>::key(100, 5);
    const auto prefix = std::vector<TokenId>(key.begin(), key.begin() + 4 * page_size);
    (void)r.insert(prefix);
    const NodeRef b = r.insert(key);
    REQUIRE(r.cache.evict({Component::full, 5}).dropped == 0);
    const NodeInfo a2 = r.cache.tree().node_info(r.cache.tree().node_info(b).parent);
    REQUIRE(a2.start == 2 * page_size);
    REQUIRE(a2.length == 2 * page_size);
    REQUIRE(a2.host[Component::swa].size() == 2);
    const LoadBackStart start = r.cache.load_back(b);
    REQUIRE(start);
    CHECK(r.cache.start_loading() == 1);
    // A match ending inside A2 splits it at 12 while the copy runs: the load's record is cut the same way, so the
    // rows copied for [8,12), FULL and SWA, land on the new upper node and those for [12,16) on A2.
    const auto three = std::vector<TokenId>(key.begin(), key.begin() + 3 * page_size);
    (void)r.cache.match(TokenKey{three});  // no hit (no SWA rows for [4,8)), but the walk splits A2
    REQUIRE(r.cache.tree().node_info(r.cache.tree().node_info(b).parent).start == 3 * page_size);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(m.device_length == 5 * page_size);
    const std::vector<VirtualPage> pages(m.device_pages.begin(), m.device_pages.end());
    for (std::size_t k = 0; k < pages.size(); ++k) {
        const auto first = static_cast<std::int32_t>(k) * page_size;
        CHECK(r.rows().page_holds(Component::full, pages[k], key, first));
        if (k >= 2) CHECK(r.rows().page_holds(Component::swa, pages[k], key, first));
    }
    CHECK(r.device_holds(b, key));
    // Nothing but the tree holds pages: its device units are every live page, SWA included.
    const auto tree_pages = [&](Component c) {
        return (r.cache.tree().evictable_size(c) + r.cache.tree().protected_size(c)) / page_size;
    };
    CHECK(alloc.live_pages(Component::full) == tree_pages(Component::full));
    CHECK(alloc.live_pages(Component::swa) == tree_pages(Component::swa));
    CHECK(alloc.live_pages(Component::swa) == 3);
    CHECK(r.broken().empty());
    // The whole cache goes: a leaked SWA row would stay live.
    (void)r.cache.evict({Component::full, 5});
    CHECK(alloc.live_pages(Component::full) == 0);
    CHECK(alloc.live_pages(Component::swa) == 0);
    CHECK(r.broken().empty());
}

TEST_CASE("an insert over a node whose SWA rows are loading leaves them to the load: its own pages go as duplicates") {
    // A [0,8) keeps FULL on device and its SWA rows only on host (B, its child, locked meanwhile: A is no leaf).
    Rig<SwaSeparate> r(64, 16);
    auto& alloc = r.cache.allocator();
    const auto key = Rig<SwaSeparate>::key(100, 4);
    const auto a_key = std::vector<TokenId>(key.begin(), key.begin() + 2 * page_size);
    const NodeRef a = r.insert(a_key);
    const NodeRef b = r.insert(key);
    LockReceipt b_lock = r.cache.lock(b);
    REQUIRE(r.cache.evict({Component::swa, 2}).backed_up == 1);
    REQUIRE_FALSE(r.cache.tree().node_info(a).device[Component::swa]);
    REQUIRE(r.cache.tree().node_info(a).device[Component::full]);
    const std::span<const LoadBackStep> plan = r.cache.load_back_plan(a);
    REQUIRE(plan.size() == 1);
    REQUIRE(plan[0].component == Component::swa);
    REQUIRE(plan[0].full_pages.size() == 2);  // bound under A's resident pages
    const LoadBackStart start = r.cache.load_back(a);
    REQUIRE(start);
    CHECK(r.cache.start_loading() == 1);
    // A request that computed A's tokens into its own pages finishes while the load binds A's SWA rows.
    std::vector<VirtualPage> own(2);
    REQUIRE(alloc.alloc(own));
    REQUIRE(drain(r.backend, r.stream));
    for (std::size_t k = 0; k < own.size(); ++k) {
        r.rows().write_page(Component::full, own[k], a_key, static_cast<std::int32_t>(k) * page_size);
        r.rows().write_page(Component::swa, own[k], a_key, static_cast<std::int32_t>(k) * page_size);
    }
    CHECK(r.cache.insert(TokenKey{a_key}, {.pages = own}).node == a);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    CHECK(r.device_holds(a, a_key));
    CHECK(r.cache.tree().node_info(a).device[Component::swa]);
    r.cache.unlock(std::move(b_lock));
    CHECK(r.device_holds(b, key));
    const auto tree_pages = [&](Component c) {
        return (r.cache.tree().evictable_size(c) + r.cache.tree().protected_size(c)) / page_size;
    };
    CHECK(alloc.live_pages(Component::full) == tree_pages(Component::full));
    CHECK(alloc.live_pages(Component::swa) == tree_pages(Component::swa));
    CHECK(alloc.live_pages(Component::full) == 4);
    CHECK(r.broken().empty());
}
