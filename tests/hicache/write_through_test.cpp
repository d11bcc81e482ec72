// Write-through through the cache: insert -> host room (evict host, else skip) -> queue -> `set_host` -> device lock
// until the ack. Copies run by hand on the manual backend, so each test decides when a write is in flight; every
// host copy is read back row by row (through a lease, or a load-back after device eviction).

#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "hicache_support.hpp"

using namespace hicache_test;

namespace {

// The components a node ending at the key's end writes through: FULL, the SWA window, the Mamba state.
template <class P>
std::vector<Component> written() {
    std::vector<Component> out{Component::full};
    if (Rig<P>::has_swa) out.push_back(Component::swa);
    if (Rig<P>::has_mamba) out.push_back(Component::mamba);
    return out;
}

// Submits the queued writes, runs them, and returns how many acks committed (all acks must come).
template <class P>
std::int32_t complete_writes(Rig<P>& r, std::size_t expected) {
    (void)r.cache.start_writing();
    (void)r.run_transfers();
    const std::span<const WriteDone> done = r.cache.writing_check();
    CHECK(done.size() == expected);
    std::int32_t committed = 0;
    for (const WriteDone& d : done) committed += d.committed ? 1 : 0;
    return committed;
}


// A request without a state over the tri-pool rig: its pages marked, inserted with none.
CacheInsert insert_stateless(Rig<TriSeparate>& r, const std::vector<TokenId>& tokens) {
    std::vector<VirtualPage> pages(tokens.size() / page_size);
    REQUIRE(r.cache.allocator().alloc(pages));
    REQUIRE(drain(r.backend, r.stream));
    for (std::size_t k = 0; k < pages.size(); ++k) {
        r.rows().write_page(Component::full, pages[k], tokens, static_cast<std::int32_t>(k) * page_size);
        r.rows().write_page(Component::swa, pages[k], tokens, static_cast<std::int32_t>(k) * page_size);
    }
    return r.cache.insert(TokenKey{tokens}, {.pages = pages});
}

// `upper` inserted without a state, its copies failing and acknowledged only after `key` (which extends it) is
// inserted below it with a state and written through (committed at queue time, the upper node is not written
// again meanwhile): the upper node ends with device rows and no host copy. Returns the two nodes.
std::pair<NodeRef, NodeRef> unwritten_parent(Rig<TriSeparate>& r, const std::vector<TokenId>& upper,
                                             const std::vector<TokenId>& key) {
    const NodeRef parent = insert_stateless(r, upper).node;
    r.backend.inject_copy_failure(r.cache.controller().stream());
    CHECK(r.cache.start_writing() == 2);
    (void)r.run_transfers();
    r.backend.clear_copy_failure(r.cache.controller().stream());
    const NodeRef lower = r.insert(key);
    REQUIRE(r.inserted.writes == 3);
    REQUIRE(r.cache.tree().node_info(lower).parent == parent);
    CHECK(complete_writes(r, 5) == 3);
    return {parent, lower};
}
}  // namespace

TEST_CASE_TEMPLATE("a write-through copies every row to host, holds the device lock until its ack, and loads back", P,
                   SwaSeparate, FullEnvelope, TriSeparate, SwaReference) {
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(100, 3);
    const NodeRef node = r.insert(key);
    const std::vector<Component> cs = written<P>();
    CHECK(r.inserted.writes == static_cast<std::int32_t>(cs.size()));
    CHECK(r.inserted.skipped == 0);
    CHECK(r.cache.writes_in_flight() == cs.size());
    NodeInfo info = r.cache.tree().node_info(node);
    for (Component c : cs) {
        CHECK_FALSE(info.write_through_pending[c]);
        CHECK_FALSE(info.host[c].empty());  // committed at queue time
        CHECK_FALSE(r.host_holds(node, c, key));  // but not copied yet
    }
    CHECK(info.device_locks[Component::full] > 0);
    CHECK(r.cache.writing_check().empty());  // nothing ran: no ack

    CHECK(r.cache.start_writing() == cs.size());
    CHECK(r.run_transfers() > 0);
    const std::span<const WriteDone> done = r.cache.writing_check();
    REQUIRE(done.size() == cs.size());
    for (std::size_t i = 0; i < done.size(); ++i) {
        CHECK(done[i].id == r.inserted.first_write + i);
        CHECK(done[i].node == node);
        CHECK(done[i].committed);
    }
    info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 0);
    for (Component c : cs) CHECK(r.host_holds(node, c, key));
    CHECK(r.cache.writes_in_flight() == 0);
    CHECK(r.broken().empty());

    // The device rows go with no copy (already hosted); the load brings the markers back.
    const std::uint64_t bytes = r.backend.counters().bytes_copied;
    const Eviction ev = r.cache.evict({Component::full, 3});
    CHECK(ev.pages_freed[Component::full] == 3);
    CHECK(ev.backed_up + ev.dropped == 0);
    CHECK(r.backend.counters().bytes_copied == bytes);
    CHECK(r.live(Component::full) == 0);
    const MatchResult m = r.cache.match(TokenKey{key});
    CHECK(m.device_length == 0);
    REQUIRE(m.best_length == 12);
    CHECK(r.load(m.best_node));
    CHECK(r.device_holds(node, key));
    CHECK(r.broken().empty());
}

TEST_CASE("WritePolicy::selective (threshold 2) backs up nothing on the first insert and the node on the second") {
    Rig<SwaSeparate> r(64, 16, write_selective);
    const auto key = Rig<SwaSeparate>::key(200, 2);
    const NodeRef node = r.insert(key);
    CHECK(r.inserted.writes + r.inserted.skipped == 0);
    CHECK(r.cache.writes_in_flight() == 0);
    CHECK(r.cache.tree().node_info(node).host[Component::full].empty());
    CHECK(r.cache.host_pools().used(Component::full) == 0);
    CHECK_FALSE(r.cache.controller().has_inflight());
    (void)r.cache.match(TokenKey{key});  // a match is no hit
    CHECK(r.cache.writes_in_flight() == 0);

    CHECK(r.insert(key) == node);  // the second request's duplicate pages are freed, the node is backed up
    CHECK(r.inserted.writes == 2);
    CHECK(complete_writes(r, 2) == 2);
    CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.host_holds(node, Component::swa, key));
    CHECK(r.live(Component::full) == 2);
    CHECK(r.broken().empty());
}

TEST_CASE("the cache takes the write-through threshold from its policy") {
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    const auto threshold = [&](const HostWrites& writes) {
        Cache<SwaSeparate> cache(
            backend, {.arena = config(16), .host = Rig<SwaSeparate>::host_config({.values = {4, 4, 0}}, writes)},
            stream);
        return cache.tree().config().write_through_threshold;
    };
    CHECK(threshold(write_through) == 1);
    CHECK(threshold(write_selective) == 2);
    CHECK(threshold(write_back) == 0);
}

TEST_CASE("a host shortfall evicts host data and retries; when nothing can go, the write is skipped") {
    Rig<SwaSeparate> r(64, 4, write_through);  // four host pages per component
    const auto a = Rig<SwaSeparate>::key(300, 2);
    const NodeRef na = r.insert(a);
    CHECK(complete_writes(r, 2) == 2);
    const Eviction ev = r.cache.evict({Component::full, 2});
    CHECK(ev.pages_freed[Component::full] == 2);
    REQUIRE_FALSE(r.cache.tree().node_info(na).device[Component::full]);  // host-only: evictable from host

    // B needs three host pages, one more than is left: A's host copy goes, B's writes are made.
    const auto b = Rig<SwaSeparate>::key(400, 3);
    const NodeRef nb = r.insert(b);
    CHECK(r.inserted.writes == 2);
    CHECK(r.inserted.skipped == 0);
    CHECK_FALSE(r.cache.tree().contains(na));
    CHECK(r.cache.host_pools().used(Component::full) == 3);

    // C finds one page left while B's writes are in flight: B holds its device data (locked), so host eviction
    // cannot take B's copies, and both of C's writes are skipped.
    const auto c = Rig<SwaSeparate>::key(500, 2);
    const NodeRef nc = r.insert(c);
    CHECK(r.inserted.writes == 0);
    CHECK(r.inserted.skipped == 2);
    const NodeInfo info = r.cache.tree().node_info(nc);
    CHECK_FALSE(info.write_through_pending[Component::full]);
    CHECK_FALSE(info.write_through_pending[Component::swa]);
    CHECK(info.host[Component::full].empty());
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(r.cache.host_pools().used(Component::full) == 3);
    CHECK(r.cache.host_pools().used(Component::swa) == 3);

    CHECK(complete_writes(r, 2) == 2);
    CHECK(r.host_holds(nb, Component::full, b));
    CHECK(r.host_holds(nb, Component::swa, b));
    CHECK(r.device_holds(nc, c));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a failed write-through is dropped before its unlock: host pages back, device rows intact", P,
                   SwaSeparate, TriSeparate, SwaReference) {
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(600, 3);
    const NodeRef node = r.insert(key);
    const std::vector<Component> cs = written<P>();
    r.backend.inject_copy_failure(r.cache.controller().stream());
    CHECK(complete_writes(r, cs.size()) == 0);  // the failure is sticky: every write behind it fails too
    const NodeInfo info = r.cache.tree().node_info(node);
    for (Component c : cs) {
        CHECK(info.host[c].empty());
        CHECK(r.cache.host_pools().used(c) == 0);
    }
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(r.device_holds(node, key));
    CHECK(r.cache.match(TokenKey{key}).device_length == 12);
    CHECK(r.broken().empty());

    // The next insert over the node writes it through again, and this time the copy stands.
    r.backend.clear_copy_failure(r.cache.controller().stream());
    CHECK(r.insert(key) == node);
    CHECK(r.inserted.writes == static_cast<std::int32_t>(cs.size()));
    CHECK(complete_writes(r, cs.size()) == static_cast<std::int32_t>(cs.size()));
    for (Component c : cs) CHECK(r.host_holds(node, c, key));
    (void)r.cache.evict({Component::full, 3});
    CHECK(r.load(r.cache.match(TokenKey{key}).best_node));
    CHECK(r.device_holds(node, key));
    CHECK(r.broken().empty());
}

TEST_CASE("tri-pool: a host eviction of the SWA copy leaves the Mamba copy whose write is in flight") {
    Rig<TriSeparate> r(64, 16, write_through);
    const auto key = Rig<TriSeparate>::key(600, 2);
    const NodeRef node = r.insert(key);
    REQUIRE(r.inserted.writes == 3);
    CHECK(r.cache.start_writing() == 3);
    std::vector<Component> acked;
    bool raced = false;
    (void)r.run_transfers([&] {
        if (raced) return;
        for (const WriteDone& d : r.cache.writing_check()) acked.push_back(d.component);
        if (acked.size() < 2) return;
        // FULL and SWA acknowledged, the Mamba copy next: its lock keeps FULL and the state on device, not SWA.
        raced = true;
        CHECK(r.cache.evict({Component::swa, 2}).pages_freed[Component::swa] == 2);
        CHECK(r.cache.evict_host({Component::swa, 2}).count == 2);
        CHECK_FALSE(r.cache.tree().node_info(node).host[Component::mamba].empty());
        CHECK(r.cache.host_pools().used(Component::mamba) == 1);
    });
    REQUIRE(raced);
    CHECK(acked == std::vector<Component>{Component::full, Component::swa});
    const std::span<const WriteDone> done = r.cache.writing_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].component == Component::mamba);
    CHECK(done[0].committed);
    CHECK(r.host_holds(node, Component::mamba, key));  // the copy landed in pages the tree still holds
    CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.cache.host_pools().used(Component::swa) == 0);
    CHECK(r.cache.tree().node_info(node).device_locks[Component::full] == 0);
    CHECK(r.device_holds(node, key));
    CHECK(r.broken().empty());
}

// An insert ending at a node with no Mamba state (a request without one) writes the node through; host room for
// its FULL copy evicts its only child, host-only, and the eviction's garbage collection must not take the node as
// a childless node that cannot end a match: its write is pending and its device rows are the request's.
TEST_CASE("tri-pool: the host eviction that makes room for a write-through leaves the stateless node it writes") {
    Rig<TriSeparate> r(64, {.values = {2, 4, 4}}, write_through);  // two host FULL pages
    const auto key = Rig<TriSeparate>::key(1200, 2);
    const std::vector<TokenId> prefix(key.begin(), key.begin() + page_size);

    const auto [upper, lower] = unwritten_parent(r, prefix, key);
    CHECK(r.cache.evict({Component::full, 1}).pages_freed[Component::full] == 1);  // the lower goes to host
    REQUIRE_FALSE(r.cache.tree().node_info(lower).device[Component::full]);
    REQUIRE(r.host_holds(lower, Component::full, key));
    const NodeInfo info = r.cache.tree().node_info(upper);
    REQUIRE(info.host[Component::full].empty());
    REQUIRE_FALSE(info.device[Component::mamba]);

    // A filler on device takes the last host FULL page: it cannot leave the host tier, the lower node can.
    const auto filler = Rig<TriSeparate>::key(1300, 1);
    const NodeRef f = r.insert(filler);
    CHECK(complete_writes(r, 3) == 3);
    REQUIRE(r.cache.host_pools().available(Component::full) == 0);

    // The prefix again, without a state: the upper node is written through; its FULL copy evicts the lower one.
    // An insert that throws unwinds through its action list: count the drop instead of aborting.
    struct QuietDrops {
        DroppedHandler previous = set_dropped_handler([](Dropped) noexcept {});
        ~QuietDrops() { (void)set_dropped_handler(previous); }
    } quiet;
    const std::uint64_t drops = dropped_count();
    CacheInsert again{};
    CHECK_NOTHROW(again = insert_stateless(r, prefix));
    CHECK(dropped_count() == drops);
    REQUIRE(again.node == upper);
    CHECK(again.writes == 2);
    CHECK(again.skipped == 0);
    CHECK_FALSE(r.cache.tree().contains(lower));
    REQUIRE(r.cache.tree().contains(upper));
    CHECK(r.device_holds(upper, key));
    CHECK(complete_writes(r, 2) == 2);
    CHECK(r.host_holds(upper, Component::full, key));
    CHECK(r.host_holds(upper, Component::swa, key));
    CHECK(r.cache.tree().node_info(upper).device_locks[Component::full] == 0);
    CHECK(r.device_holds(f, filler));
    CHECK(r.host_holds(f, Component::full, filler));
    CHECK(r.broken().empty());
}

TEST_CASE("tri-pool: the node an insert returns outlives the host eviction its ancestor's write-through makes") {
    // The returned node needs no write of its own (its host copy came from the split of a host-only node), its
    // only child is the host-only rest of that node, and its ancestor's FULL write-through needs that child's
    // host page: the eviction removes the child, and then nothing but the insert's pin keeps the stateless node
    // (over Mamba it cannot end a match) from being collected under the caller, device rows and all.
    Rig<TriSeparate> r(64, {.values = {3, 4, 4}}, write_through);  // three host FULL pages
    const auto key = Rig<TriSeparate>::key(1400, 3);
    const std::vector<TokenId> first(key.begin(), key.begin() + page_size);
    const std::vector<TokenId> two(key.begin(), key.begin() + 2 * page_size);
    const auto [ancestor, child] = unwritten_parent(r, first, key);  // the child's two host FULL pages
    REQUIRE(r.cache.evict({Component::full, 1}).pages_freed[Component::full] == 2);  // the child goes to host
    REQUIRE(r.host_holds(child, Component::full, key));
    // A filler on device takes the last host FULL page: it cannot leave the host tier, the child can.
    const auto filler = Rig<TriSeparate>::key(1500, 1);
    const NodeRef f = r.insert(filler);
    CHECK(complete_writes(r, 3) == 3);
    REQUIRE(r.cache.host_pools().available(Component::full) == 0);

    // Two pages again, stateless: the child splits; its upper part takes the new device page and is returned.
    CacheInsert again{};
    CHECK_NOTHROW(again = insert_stateless(r, two));
    CHECK(again.skipped == 0);
    REQUIRE(r.cache.tree().contains(again.node));
    CHECK(r.cache.tree().node_info(again.node).parent == ancestor);
    CHECK(r.device_holds(again.node, key));
    LockReceipt lock = r.cache.lock(again.node);  // what an engine does with it
    (void)complete_writes(r, static_cast<std::size_t>(again.writes));
    CHECK(r.host_holds(ancestor, Component::full, key));
    CHECK(r.device_holds(again.node, key));
    CHECK(r.device_holds(f, filler));
    r.cache.unlock(std::move(lock));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a node split while its write is in flight gets its host value on both parts", P, SwaSeparate,
                   SwaReference) {
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(700, 4);
    const NodeRef lower = r.insert(key);
    CHECK(r.cache.start_writing() == 2);
    // A match ending inside the node splits it at two pages, under the write.
    const std::vector<TokenId> half(key.begin(), key.begin() + 2 * page_size);
    CHECK(r.cache.match(TokenKey{half}).device_length == 2 * page_size);
    const NodeRef upper = r.cache.tree().node_info(lower).parent;
    REQUIRE(r.cache.tree().node_info(lower).start == 2 * page_size);
    REQUIRE(r.cache.tree().node_info(upper).start == 0);

    (void)r.run_transfers();
    const std::span<const WriteDone> done = r.cache.writing_check();
    REQUIRE(done.size() == 2);
    CHECK(done[0].node == lower);  // the action's node keeps its slot: the lower part
    for (NodeRef n : {upper, lower}) {
        CHECK(r.host_holds(n, Component::full, key));
        CHECK(r.host_holds(n, Component::swa, key));
        CHECK(r.cache.tree().node_info(n).device_locks[Component::full] == 0);
    }
    CHECK(r.cache.evict({Component::full, 4}).pages_freed[Component::full] == 4);
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(m.best_length == 16);
    CHECK(m.device_length == 0);
    CHECK(r.load(m.best_node));
    CHECK(r.device_holds(upper, key));
    CHECK(r.device_holds(lower, key));
    CHECK(r.broken().empty());
}

TEST_CASE("a write failing after a split of its node drops the host pages of both parts") {
    Rig<SwaSeparate> r(64, 16, write_through);
    const auto key = Rig<SwaSeparate>::key(800, 4);
    r.backend.inject_copy_failure(r.cache.controller().stream());
    const NodeRef lower = r.insert(key);
    CHECK(r.cache.start_writing() == 2);
    const std::vector<TokenId> half(key.begin(), key.begin() + 2 * page_size);
    (void)r.cache.match(TokenKey{half});
    const NodeRef upper = r.cache.tree().node_info(lower).parent;
    REQUIRE(r.cache.tree().node_info(upper).start == 0);
    CHECK_FALSE(r.cache.tree().node_info(upper).host[Component::full].empty());  // split: the value on both parts
    (void)r.run_transfers();
    const std::span<const WriteDone> done = r.cache.writing_check();
    REQUIRE(done.size() == 2);
    CHECK_FALSE(done[0].committed);
    CHECK_FALSE(done[1].committed);
    for (NodeRef n : {upper, lower}) {
        const NodeInfo info = r.cache.tree().node_info(n);
        CHECK(info.host[Component::full].empty());
        CHECK(info.host[Component::swa].empty());
        CHECK(info.device_locks[Component::full] == 0);
        CHECK(r.device_holds(n, key));
    }
    CHECK(r.cache.host_pools().used(Component::full) == 0);
    CHECK(r.cache.host_pools().used(Component::swa) == 0);
    CHECK(r.cache.match(TokenKey{key}).device_length == 16);
    CHECK(r.broken().empty());
}

TEST_CASE("neither device nor host eviction can take a node whose write is queued or in flight, and load-back leaves "
          "it alone") {
    Rig<SwaSeparate> r(64, 16, write_through);
    const auto key = Rig<SwaSeparate>::key(900, 3);
    const NodeRef node = r.insert(key);
    const std::int32_t owned = r.live(Component::full);
    const auto nothing_goes = [&] {
        CHECK(r.cache.evict({Component::full, 16}).pages_freed[Component::full] == 0);
        CHECK(r.cache.evict({Component::swa, 16}).pages_freed[Component::swa] == 0);
        CHECK(r.cache.evict_host({Component::full, 16}).count == 0);  // it keeps its device data: the host copy stays
        CHECK(r.cache.evict_host({Component::swa, 16}).count == 0);
        CHECK_FALSE(r.cache.tree().node_info(node).host[Component::full].empty());
        CHECK(r.live(Component::full) == owned);
        CHECK(r.device_holds(node, key));
    };
    nothing_goes();  // queued
    CHECK(r.cache.load_back(r.cache.match(TokenKey{key}).best_node).status == LoadBackStart::Status::device_hit);
    CHECK(r.cache.start_writing() == 2);
    // In flight: before each copy step, eviction frees nothing and fresh pages never land on the node's rows.
    (void)r.run_transfers([&] {
        nothing_goes();
        std::vector<VirtualPage> fresh(2);
        REQUIRE(r.cache.allocator().alloc(fresh));
        REQUIRE(drain(r.backend, r.stream));
        for (VirtualPage v : fresh) {
            for (std::int32_t row = 0; row < page_size; ++row) {
                r.rows().write(Component::full, v.value() * page_size + row, 0xdeadbeefu);
                r.rows().write(Component::swa, v.value() * page_size + row, 0xdeadbeefu);
            }
        }
        r.cache.allocator().free(fresh);
    });
    nothing_goes();  // ran, not acknowledged: the lock still holds
    REQUIRE(r.cache.writing_check().size() == 2);
    CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.host_holds(node, Component::swa, key));
    CHECK(r.cache.evict({Component::full, 16}).pages_freed[Component::full] == 3);  // acked: it goes, hosted
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a cache moved with writes in flight acknowledges them through the moved-to object", P, SwaSeparate,
                   TriSeparate) {
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(1000, 3);
    const NodeRef node = r.insert(key);
    const std::vector<Component> cs = written<P>();
    CHECK(r.cache.start_writing() == cs.size());
    std::optional<typename Rig<P>::Cache> moved(std::move(r.cache));
    CHECK(r.backend.queued(moved->controller().stream()) > 0);  // nothing ran before the move
    while (r.backend.run_all() > 0) {
    }
    const std::span<const WriteDone> done = moved->writing_check();
    REQUIRE(done.size() == cs.size());
    for (const WriteDone& d : done) CHECK(d.committed);
    for (Component c : cs) CHECK(Rig<P>::host_holds(*moved, node, c, key));
    CHECK(moved->tree().node_info(node).device_locks[Component::full] == 0);
    CHECK(moved->verify().empty());

    // Destroyed with a write queued: its lock is released, not reported as dropped.
    const std::uint64_t drops = dropped_count();
    const auto other = Rig<P>::key(1100, 1);
    std::vector<VirtualPage> pages(1);
    REQUIRE(moved->allocator().alloc(pages));
    StateId state{};
    if constexpr (Rig<P>::has_mamba) REQUIRE(moved->allocator().alloc_state(std::span(&state, 1)));
    CHECK(moved->insert(TokenKey{other}, {.pages = pages, .state = state}).writes > 0);
    CHECK(moved->writes_in_flight() > 0);
    moved.reset();
    CHECK(dropped_count() == drops);
}

TEST_CASE("a load short of SWA pages is relieved by evicting its shortfall and retries: one hosted filler goes, the load lands") {
    Rig<SwaSeparate> r(24, 16, write_through);  // 23 usable envelopes
    const auto key = Rig<SwaSeparate>::key(100, 2);
    const NodeRef node = r.insert(key);
    CHECK(complete_writes(r, 2) == 2);
    REQUIRE(r.cache.evict({Component::full, 2}).pages_freed[Component::full] == 2);  // host-only: FULL and SWA to load
    // Tree-owned fillers, backed up and acked (evictable with no copy), then a request's own FULL pages up to
    // two envelopes short of full: the FULL ids fit, the SWA reservation does not.
    std::vector<std::vector<TokenId>> keys;
    std::vector<NodeRef> fillers;
    for (TokenId first = 1000; fillers.size() < 3; first += 1000) {
        keys.push_back(Rig<SwaSeparate>::key(first, 2));
        fillers.push_back(r.insert(keys.back()));
        CHECK(complete_writes(r, 2) == 2);
    }
    auto& alloc = r.cache.allocator();
    std::vector<VirtualPage> own;
    for (VirtualPage v; alloc.alloc_full(std::span(&v, 1));) own.push_back(v);
    REQUIRE(own.size() >= 2);
    alloc.free(std::span<const VirtualPage>(own).last(2));
    own.resize(own.size() - 2);

    const LoadBackStart start = r.cache.load_back(r.cache.match(TokenKey{key}).best_node);
    REQUIRE(start);
    CHECK(alloc.pending_load_pages(Component::swa) == 2);
    // The eviction asked for the two missing pages only: the least recently used filler went, to host.
    CHECK_FALSE(r.cache.tree().node_info(fillers[0]).device[Component::full]);
    CHECK(r.host_holds(fillers[0], Component::full, keys[0]));
    CHECK(r.host_holds(fillers[0], Component::swa, keys[0]));
    for (std::size_t i = 1; i < fillers.size(); ++i) CHECK(r.device_holds(fillers[i], keys[i]));
    CHECK(r.cache.start_loading() == 1);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    CHECK(r.device_holds(node, key));
    alloc.free(own);
    CHECK(r.broken().empty());
}

// `set_host` throws once the FULL copy is queued: the insert propagates it, skips the SWA write it had not
// reached, and the queued copy keeps its device lock until its ack, which returns the host pages the tree never
// took and reports no host copy. The device rows stay and are served.
TEST_CASE("a set_host that throws in insert keeps the queued copy's lock until its ack, which frees its pages") {
    using P = FaultyPolicies<SwaFullLayout>;
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(100, 3);
    const std::int32_t host_full = r.cache.host_pools().available(Component::full);
    const std::int32_t host_swa = r.cache.host_pools().available(Component::swa);
    const std::uint64_t dropped = dropped_count();
    TreeFaults::next = TreeFault::set_host;
    CHECK_THROWS_AS((void)r.insert(key), std::runtime_error);
    CHECK(TreeFaults::next == TreeFault::none);
    const NodeRef node = r.cache.match(TokenKey{key}).device_node;
    NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.length == 12);
    CHECK(info.device_locks[Component::full] == 1);  // the queued copy reads the rows
    CHECK_FALSE(info.write_through_pending[Component::full]);
    CHECK_FALSE(info.write_through_pending[Component::swa]);
    CHECK(info.host[Component::full].empty());
    CHECK(info.host[Component::swa].empty());
    CHECK(r.cache.writes_in_flight() == 1);
    CHECK(r.cache.host_pools().available(Component::full) == host_full - 3);  // the copy still writes them

    const std::int32_t committed = complete_writes(r, 1);
    CHECK(committed == 0);
    info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(r.cache.host_pools().available(Component::full) == host_full);
    CHECK(r.cache.host_pools().available(Component::swa) == host_swa);
    CHECK(r.device_holds(node, key));
    CHECK(r.cache.match(TokenKey{key}).device_length == 12);
    CHECK(dropped_count() == dropped);
    CHECK(r.broken().empty());
}

// Both copies fail; dropping the first's host value throws. Neither write loses its lock while its host copy
// stands (a device eviction could otherwise serve those rows from it); the next check drops both and unlocks.
TEST_CASE("a drop_host that throws in writing_check keeps the failed write locked, and the next check finishes it") {
    using P = FaultyPolicies<SwaFullLayout>;
    Rig<P> r(64, 16, write_through);
    const auto key = Rig<P>::key(100, 3);
    const std::int32_t host_full = r.cache.host_pools().available(Component::full);
    const std::int32_t host_swa = r.cache.host_pools().available(Component::swa);
    const NodeRef node = r.insert(key);
    REQUIRE(r.inserted.writes == 2);
    r.backend.inject_copy_failure(r.cache.controller().stream());
    CHECK(r.cache.start_writing() == 2);
    (void)r.run_transfers();
    r.backend.clear_copy_failure(r.cache.controller().stream());
    TreeFaults::next = TreeFault::drop_host;
    CHECK_THROWS_AS((void)r.cache.writing_check(), std::runtime_error);
    CHECK(TreeFaults::next == TreeFault::none);
    NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 2);
    CHECK(r.cache.tree().evictable_size(Component::full) == 0);  // no eviction can reach the bad host copy
    CHECK(r.cache.writes_in_flight() == 2);

    const std::span<const WriteDone> done = r.cache.writing_check();
    REQUIRE(done.size() == 2);
    CHECK_FALSE(done[0].committed);
    CHECK_FALSE(done[1].committed);
    info = r.cache.tree().node_info(node);
    CHECK(info.device_locks[Component::full] == 0);
    CHECK(info.host[Component::full].empty());
    CHECK(info.host[Component::swa].empty());
    CHECK(r.cache.host_pools().available(Component::full) == host_full);
    CHECK(r.cache.host_pools().available(Component::swa) == host_swa);
    CHECK(r.device_holds(node, key));
    CHECK(r.broken().empty());
}
