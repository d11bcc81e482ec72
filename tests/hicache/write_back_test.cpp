// Eviction-driven write-back through the cache: a backup's rows stay owned until its copy ran (copies run by
// hand on the manual backend), then go; what is hosted is dropped without a copy; when the host cannot take a
// backup only the unbacked data goes (the SWA window alone, or a FULL leaf's subtree), never a locked node.
// Also the backend-neutral round trip (round_trip_scenario.hpp) on the manual host backend, the same code
// tests/cuda runs on a GPU.

#include <optional>

#include "hicache_support.hpp"
#include "round_trip_scenario.hpp"

using namespace hicache_test;

TEST_CASE_TEMPLATE("write-back frees a leaf's rows only after its copies ran, and a load restores them byte-exact", P,
                   SwaSeparate, SwaEnvelope, FullEnvelope, TriSeparate, SwaReference) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 3);
    const NodeRef node = r.insert(key);
    const std::int32_t owned = r.live(Component::full);
    REQUIRE(owned == 3);

    const std::vector<VirtualPage> pages = r.cache.tree().node_info(node).pages;
    // The rows the copies read: every FULL page, the SWA rows of the last window (the tree backs up one window).
    const auto sources_hold = [&] {
        bool ok = true;
        for (std::size_t k = 0; k < pages.size(); ++k) {
            const auto first = static_cast<std::int32_t>(k) * page_size;
            ok = ok && r.rows().page_holds(Component::full, pages[k], key, first);
            if constexpr (Rig<P>::has_swa) {
                if (k > 0) ok = ok && r.rows().page_holds(Component::swa, pages[k], key, first);
            }
        }
        return ok;
    };

    auto run = r.cache.start_evict({Component::full, 3});
    const std::size_t components = 1 + (Rig<P>::has_swa ? 1 : 0) + (Rig<P>::has_mamba ? 1 : 0);
    CHECK(run.copies() >= components);  // FULL (per node, if the window split it), the SWA window, the state
    // Before each copy runs, its source rows are still owned: a fresh allocation cannot take them, and
    // they still hold the request's markers.
    const std::size_t ran = r.run_transfers([&] {
        CHECK(r.live(Component::full) == owned);
        CHECK(sources_hold());
        std::vector<VirtualPage> fresh(2);
        REQUIRE(r.cache.allocator().alloc(fresh));
        REQUIRE(drain(r.backend, r.stream));
        for (VirtualPage v : fresh) {
            for (std::int32_t row = 0; row < page_size; ++row)
                r.rows().write(Component::full, v.value() * page_size + row, 0xdeadbeefu);
        }
        r.cache.allocator().free(fresh);
    });
    CHECK(ran > 0);
    CHECK(sources_hold());
    const auto copies = static_cast<std::int32_t>(run.copies());
    const Eviction ev = r.cache.finish_evict(std::move(run));
    CHECK(ev.backed_up == copies);
    CHECK(ev.dropped == 0);
    CHECK(ev.pages_freed[Component::full] == 3);
    CHECK(r.live(Component::full) == 0);  // freed only now
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK_FALSE(info.device[Component::full]);
    CHECK(r.host_holds(node, Component::full, key));
    if constexpr (Rig<P>::has_swa) CHECK(r.host_holds(node, Component::swa, key));
    if constexpr (Rig<P>::has_mamba) CHECK(r.host_holds(node, Component::mamba, key));
    CHECK(r.broken().empty());

    const MatchResult m = r.cache.match(TokenKey{key});
    CHECK(m.device_length == 0);
    REQUIRE(m.best_length == 12);
    CHECK(r.load(m.best_node));
    CHECK(r.device_holds(m.best_node, key));
    const MatchResult again = r.cache.match(TokenKey{key});
    CHECK(again.device_length == 12);
    CHECK(r.broken().empty());
}

TEST_CASE(
    "an unbacked SWA window is copied once before it goes; a hosted one goes with no copy and no FULL write-back") {
    Rig<SwaSeparate> r(64, 16);
    const auto key = Rig<SwaSeparate>::key(200, 2);  // one window
    const NodeRef node = r.insert(key);
    LockReceipt past_window = r.cache.lock(node, {.components = ComponentMask::of(Component::full)});  // SWA unlocked
    const std::uint64_t bytes_before = r.backend.counters().bytes_copied;

    auto run = r.cache.start_evict({Component::swa, 2});
    CHECK(run.copies() == 1);          // the SWA window only: FULL stays on device, so it is not written back
    CHECK(r.device_holds(node, key));  // the SWA rows are still live until the copy ran
    const Eviction ev = r.cache.finish_evict(std::move(run));
    CHECK(ev.backed_up == 1);
    // exactly one D2H: the window's two pages
    CHECK(r.backend.counters().bytes_copied - bytes_before ==
          2 * r.cache.allocator().spec()[Component::swa].page_bytes);
    NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device[Component::full]);
    CHECK_FALSE(info.device[Component::swa]);
    CHECK(info.host[Component::full].empty());  // no FULL write-back
    CHECK(r.host_holds(node, Component::swa, key));
    CHECK(r.device_holds(node, key));  // FULL rows untouched

    // Load the window back: now it is hosted, and dropping it again costs no copy.
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(m.swa_host_hit_length == 8);
    CHECK(r.load(m.best_node));
    CHECK(r.cache.tree().node_info(node).device[Component::swa]);
    CHECK(r.device_holds(node, key));
    const std::uint64_t bytes_loaded = r.backend.counters().bytes_copied;
    const Eviction hosted = r.cache.evict({Component::swa, 2});
    CHECK(hosted.pages_freed[Component::swa] == 2);
    CHECK(hosted.backed_up + hosted.dropped == 0);
    CHECK(r.backend.counters().bytes_copied == bytes_loaded);
    CHECK(r.host_holds(node, Component::swa, key));
    r.cache.unlock(std::move(past_window));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("an internal node's unbacked SWA window is copied once; hosted, it goes with no copy, and FULL is "
                   "never written back", P, SwaSeparate, SwaReference) {  // §9.3-32..34, both tree cores
    Rig<P> r(64, 16);
    const auto parent = Rig<P>::key(200, 2);  // one window
    auto child = parent;
    for (TokenId t : Rig<P>::key(900, 4)) child.push_back(t);
    const NodeRef top = r.insert(parent);
    const NodeRef leaf = r.insert(child);
    LockReceipt request = r.cache.lock(leaf);  // FULL path and the child's window: only the parent's SWA can go
    const std::uint64_t bytes_before = r.backend.counters().bytes_copied;

    const Eviction backed = r.cache.evict({Component::swa, 2});
    CHECK(backed.backed_up == 1);
    CHECK(backed.pages_freed[Component::swa] == 2);
    CHECK(backed.pages_freed[Component::full] == 0);
    const std::size_t window_bytes = 2 * r.cache.allocator().spec()[Component::swa].page_bytes;
    CHECK(r.backend.counters().bytes_copied - bytes_before == window_bytes);
    NodeInfo info = r.cache.tree().node_info(top);
    CHECK_FALSE(info.device[Component::swa]);
    CHECK(info.host[Component::full].empty());
    CHECK(r.host_holds(top, Component::swa, parent));
    CHECK(r.device_holds(top, parent));
    CHECK(r.device_holds(leaf, child));

    // The window comes back from host; dropping it again copies nothing and leaves the host as it is.
    const MatchResult m = r.cache.match(TokenKey{parent});
    REQUIRE(m.best_node == top);
    CHECK(r.load(top));
    CHECK(r.cache.tree().node_info(top).device[Component::swa]);
    const std::uint64_t bytes_hosted = r.backend.counters().bytes_copied;
    const std::int32_t host_full = r.cache.host_pools().used(Component::full);
    const std::int32_t host_swa = r.cache.host_pools().used(Component::swa);
    const Eviction hosted = r.cache.evict({Component::swa, 2});
    CHECK(hosted.pages_freed[Component::swa] >= 2);
    CHECK(hosted.pages_freed[Component::full] == 0);
    CHECK(hosted.backed_up + hosted.dropped == 0);
    CHECK(r.backend.counters().bytes_copied == bytes_hosted);  // no D2H at all
    CHECK(r.cache.host_pools().used(Component::full) == host_full);
    CHECK(r.cache.host_pools().used(Component::swa) == host_swa);
    info = r.cache.tree().node_info(top);
    CHECK_FALSE(info.device[Component::swa]);
    CHECK(info.host[Component::full].empty());
    CHECK(r.host_holds(top, Component::swa, parent));
    CHECK(r.device_holds(top, parent));
    CHECK(r.device_holds(leaf, child));
    r.cache.unlock(std::move(request));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("under host pressure only the SWA window goes, with no copy: FULL survives and the host's own data "
                   "stays", P, SwaSeparate, SwaReference) {  // §9.3-35, pinned and unpinned host data
    Rig<P> r(64, {.values = {16, 2, 0}});  // two SWA host pages: one window
    const auto cold = Rig<P>::key(100, 2);
    const NodeRef filler = r.insert(cold);
    REQUIRE(r.cache.evict({Component::full, 2}).backed_up == 2);  // host-only now; it fills the SWA host pool
    REQUIRE(r.cache.host_pools().used(Component::swa) == 2);
    std::optional<LockReceipt> pin;
    SUBCASE("the host data is unpinned") {}
    SUBCASE("the host data is pinned") { pin.emplace(r.cache.lock(filler, {.tier = Tier::host})); }

    const auto key = Rig<P>::key(300, 2);
    const NodeRef node = r.insert(key);
    LockReceipt past_window = r.cache.lock(node, {.components = ComponentMask::of(Component::full)});  // SWA unlocked
    const std::uint64_t bytes = r.backend.counters().bytes_copied;
    const Eviction ev = r.cache.evict({Component::swa, 2});
    CHECK(ev.dropped == 1);
    CHECK(ev.backed_up == 0);
    CHECK(ev.pages_freed[Component::swa] == 2);  // the eviction goes on to free what was asked
    CHECK(ev.pages_freed[Component::full] == 0);
    CHECK(r.backend.counters().bytes_copied == bytes);
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device[Component::full]);
    CHECK_FALSE(info.device[Component::swa]);
    CHECK(info.host[Component::swa].empty());
    CHECK(info.host[Component::full].empty());
    CHECK(r.device_holds(node, key));
    // The host data is not evicted for a backup: the filler keeps its copies, row for row.
    CHECK(r.host_holds(filler, Component::full, cold));
    CHECK(r.host_holds(filler, Component::swa, cold));
    CHECK(r.cache.host_pools().used(Component::swa) == 2);
    CHECK(r.cache.match(TokenKey{key}).best_length == 0);  // no window anywhere: nothing is served
    r.cache.unlock(std::move(past_window));
    if (pin) r.cache.unlock(std::move(*pin));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("when the host cannot take a FULL write-back the unbacked subtree is dropped, never a locked one", P,
                   SwaSeparate, FullEnvelope) {
    Rig<P> r(64, {.values = {2, 16, 16}});  // two FULL host pages: a three-page leaf does not fit
    const auto a = Rig<P>::key(400, 1);
    auto a_long = a;
    for (TokenId t : Rig<P>::key(500, 3)) a_long.push_back(t);
    const auto b = Rig<P>::key(600, 3);
    (void)r.insert(a);
    const NodeRef leaf = r.insert(a_long);
    const NodeRef locked = r.insert(b);
    LockReceipt hold = r.cache.lock(locked);

    const Eviction ev = r.cache.evict({Component::full, 16});
    CHECK(ev.dropped >= 1);
    CHECK_FALSE(r.cache.tree().contains(leaf));  // no host copy: the leaf is gone, not kept half-hosted
    CHECK(r.cache.match(TokenKey{a_long}).best_length <= static_cast<std::int32_t>(a.size()));
    CHECK(r.device_holds(locked, b));  // the locked branch is untouched
    CHECK(r.cache.tree().node_info(locked).host[Component::full].empty());
    r.cache.unlock(std::move(hold));
    CHECK(r.broken().empty());
}

TEST_CASE("under write-through policies eviction asks for no backup: the leaf goes with no copy") {
    HostWrites writes{};
    SUBCASE("WritePolicy::through") { writes = write_through; }
    SUBCASE("WritePolicy::selective") { writes = write_selective; }
    Rig<SwaSeparate> r(64, 16, writes);
    const auto key = Rig<SwaSeparate>::key(700, 2);
    const NodeRef node = r.insert(key);
    const bool hosted = write_through_threshold(writes) == 1;  // the selective policy waits for a second hit
    CHECK(r.cache.writes_in_flight() == (hosted ? 2u : 0u));    // FULL and the SWA window
    if (hosted) {
        CHECK(r.cache.start_writing() == 2);
        (void)r.run_transfers();
        CHECK(r.cache.writing_check().size() == 2);
    }
    const std::uint64_t bytes = r.backend.counters().bytes_copied;
    auto run = r.cache.start_evict({Component::full, 2});
    CHECK(run.copies() == 0);
    const Eviction ev = r.cache.finish_evict(std::move(run));
    CHECK(ev.pages_freed[Component::full] == 2);
    CHECK(ev.backed_up + ev.dropped == 0);
    CHECK(r.backend.counters().bytes_copied == bytes);
    CHECK(r.live(Component::full) == 0);
    // Hosted by the write-through, the leaf stays host-only; unhosted, it is gone.
    CHECK(r.cache.tree().contains(node) == hosted);
    if (hosted) CHECK(r.host_holds(node, Component::full, key));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("a failed write-back copy is recorded as none: its data goes, its host pages come back, nothing is "
                   "served from it", P, SwaSeparate, FullEnvelope, TriSeparate) {
    Rig<P> r(64, 16);
    const auto key = Rig<P>::key(100, 3);
    const NodeRef node = r.insert(key);
    const auto host_used = [&] {
        std::int32_t n = r.cache.host_pools().used(Component::full);
        if constexpr (Rig<P>::has_swa) n += r.cache.host_pools().used(Component::swa);
        if constexpr (Rig<P>::has_mamba) n += r.cache.host_pools().used(Component::mamba);
        return n;
    };
    r.backend.inject_copy_failure(r.cache.controller().stream());
    const Eviction ev = r.cache.evict({Component::full, 3});
    CHECK(ev.backed_up == 0);  // the failure is sticky: every copy of the run fails
    CHECK(ev.dropped >= 1);
    CHECK(ev.pages_freed[Component::full] == 3);
    CHECK_FALSE(r.cache.tree().contains(node));
    CHECK(host_used() == 0);
    CHECK(r.live(Component::full) == 0);
    CHECK(r.cache.match(TokenKey{key}).best_length == 0);
    CHECK(r.broken().empty());

    // The next write-back of the same rows stands, and a load brings them back byte-exact.
    r.backend.clear_copy_failure(r.cache.controller().stream());
    (void)r.insert(key);
    const Eviction again = r.cache.evict({Component::full, 3});
    CHECK(again.dropped == 0);
    CHECK(again.backed_up >= 1);
    const MatchResult m = r.cache.match(TokenKey{key});
    REQUIRE(m.best_length == 12);
    CHECK(r.load(m.best_node));
    CHECK(r.device_holds(m.best_node, key));
    CHECK(r.broken().empty());
}

TEST_CASE("a failed SWA window backup drops the window only: the FULL rows stay served, the host keeps nothing") {
    Rig<SwaSeparate> r(64, 16);
    const auto key = Rig<SwaSeparate>::key(200, 2);
    const NodeRef node = r.insert(key);
    LockReceipt past_window = r.cache.lock(node, {.components = ComponentMask::of(Component::full)});
    r.backend.inject_copy_failure(r.cache.controller().stream());
    const Eviction ev = r.cache.evict({Component::swa, 2});
    CHECK(ev.dropped == 1);
    CHECK(ev.backed_up == 0);
    CHECK(ev.pages_freed[Component::swa] == 2);
    const NodeInfo info = r.cache.tree().node_info(node);
    CHECK(info.device[Component::full]);
    CHECK_FALSE(info.device[Component::swa]);
    CHECK(info.host[Component::swa].empty());
    CHECK(r.cache.host_pools().used(Component::swa) == 0);
    CHECK(r.device_holds(node, key));
    CHECK(r.cache.match(TokenKey{key}).best_length == 0);
    r.cache.unlock(std::move(past_window));
    CHECK(r.broken().empty());
}

TEST_CASE_TEMPLATE("an eviction or a load racing an open write-back run is refused, leaks no lock, and the run lands",
                   P, SwaSeparate, SwaReference) {
    Rig<P> r(64, 16);
    const auto a = Rig<P>::key(100, 2);
    const NodeRef hosted = r.insert(a);
    REQUIRE(r.cache.evict({Component::full, 2}).backed_up >= 1);
    const auto b = Rig<P>::key(500, 3);
    const NodeRef node = r.insert(b);
    const std::int32_t host_full = r.cache.host_pools().used(Component::full);
    const std::uint64_t drops = dropped_count();
    const std::vector<VirtualPage> pages = r.cache.tree().node_info(node).pages;

    auto run = r.cache.start_evict({Component::full, 3});
    REQUIRE(run.copies() > 0);
    CHECK_THROWS_AS((void)r.cache.evict_host({Component::full, 16}), logic_error);
    CHECK_THROWS_AS((void)r.cache.evict({Component::full, 16}), logic_error);
    CHECK_THROWS_AS((void)r.cache.load_back(hosted), logic_error);
    CHECK_THROWS_AS((void)r.cache.writing_check(), logic_error);
    CHECK(r.cache.host_pools().used(Component::full) == host_full + 3);  // the run's own pages only
    for (std::size_t k = 0; k < pages.size(); ++k) {  // still owned by the run
        CHECK(r.rows().page_holds(Component::full, pages[k], b, static_cast<std::int32_t>(k) * page_size));
    }
    const Eviction ev = r.cache.finish_evict(std::move(run));
    CHECK(ev.dropped == 0);
    CHECK(ev.pages_freed[Component::full] == 3);
    CHECK(dropped_count() == drops);  // no receipt was lost on the way out
    for (NodeRef n : {hosted, node}) {
        const NodeInfo info = r.cache.tree().node_info(n);
        CHECK(info.device_locks[Component::full] == 0);
        CHECK(info.host_locks[Component::full] == 0);
    }
    CHECK(r.host_holds(node, Component::full, b));
    CHECK(r.host_holds(hosted, Component::full, a));
    CHECK(r.load(r.cache.match(TokenKey{a}).best_node));
    CHECK(r.load(r.cache.match(TokenKey{b}).best_node));
    CHECK(r.device_holds(hosted, a));
    CHECK(r.device_holds(node, b));
    CHECK(r.broken().empty());
}

TEST_CASE("a backup queued behind an unfinished compaction reads the moved rows, whichever stream runs first") {
    for (const std::size_t pick : {0u, 1u}) {  // the allocator's stream first, or the transfer stream when it can
        CAPTURE(pick);
        Rig<SwaSeparate> r(64, 16);
        auto& alloc = r.cache.allocator();
        std::vector<VirtualPage> gap(3);
        REQUIRE(alloc.alloc(gap));
        const auto key = Rig<SwaSeparate>::key(100, 3);
        const NodeRef node = r.insert(key);  // below the gap's pages
        alloc.free(gap);
        const std::vector<VirtualPage> pages = r.cache.tree().node_info(node).pages;
        std::vector<PhysicalPage> before(pages.size());
        alloc.translate_full(std::span<const VirtualPage>(pages), std::span(before));
        REQUIRE(alloc.flush(FlushMode::urgent).pages_moved > 0);  // the moves are queued, not run
        std::vector<PhysicalPage> after(pages.size());
        alloc.translate_full(std::span<const VirtualPage>(pages), std::span(after));
        REQUIRE(after != before);

        auto run = r.cache.start_evict({Component::full, 3});
        REQUIRE(run.copies() > 0);
        while (r.backend.run_one(pick)) {
        }
        const Eviction ev = r.cache.finish_evict(std::move(run));
        CHECK(ev.dropped == 0);
        CHECK(r.host_holds(node, Component::full, key));
        CHECK(r.host_holds(node, Component::swa, key));
        CHECK(r.load(r.cache.match(TokenKey{key}).best_node));
        CHECK(r.device_holds(node, key));
        CHECK(r.broken().empty());
    }
}

namespace {

// The round trip's backend adapter on the manual HostBackend: the arena is host memory, reached after the
// stream's queued work ran; `progress` runs one queued operation of any stream.
struct ManualHost {
    using backend_type = HostBackend;
    HostBackend backend{{.mode = ExecutionMode::manual}};

    void write(HostBackend::stream_ref s, std::byte* to, std::span<const std::byte> bytes) {
        s.synchronize();
        std::memcpy(to, bytes.data(), bytes.size());
    }
    void read(HostBackend::stream_ref s, const std::byte* from, std::span<std::byte> out) {
        s.synchronize();
        std::memcpy(out.data(), from, out.size());
    }
    void progress() { (void)backend.run_one(0); }
};

}  // namespace

TEST_CASE_TEMPLATE("round trip by rows: write-back drained, host hit loaded per layer, decode retracted and restored",
                   H, SeparateHostPools, PageEnvelopeHost<>) {
    ManualHost device;
    round_trip::run<H>(device);
}

TEST_CASE("a load that needs a part an earlier load is copying waits for its ack, then copies only what is missing") {
    Rig<SwaSeparate> r(64, 16);
    const auto top_key = Rig<SwaSeparate>::key(100, 2);  // one window
    auto leaf_key = top_key;
    for (TokenId t : Rig<SwaSeparate>::key(900, 3)) leaf_key.push_back(t);
    const NodeRef top = r.insert(top_key);
    const NodeRef leaf = r.insert(leaf_key);
    (void)r.cache.evict({Component::full, 5});
    REQUIRE(r.host_holds(top, Component::full, leaf_key));
    REQUIRE(r.host_holds(top, Component::swa, leaf_key));
    REQUIRE(r.host_holds(leaf, Component::full, leaf_key));
    REQUIRE_FALSE(r.cache.tree().node_info(top).device[Component::full]);

    // The leaf's load copies the top's FULL rows (its window is the leaf's). The top's own load needs those rows
    // too: it waits, and changes nothing (no allocation, no lock, no record).
    const LoadBackStart by_leaf = r.cache.load_back(leaf);
    REQUIRE(by_leaf);
    REQUIRE(r.cache.start_loading() == 1);
    const std::int32_t live_full = r.live(Component::full);
    const std::int32_t live_swa = r.live(Component::swa);
    const LoadBackStart by_top = r.cache.load_back(top);
    CHECK(by_top.status == LoadBackStart::Status::loading);
    CHECK(r.cache.loads_in_flight() == 1);
    CHECK(r.cache.tree().loads_in_flight() == 1);
    CHECK(r.live(Component::full) == live_full);
    CHECK(r.live(Component::swa) == live_swa);
    CHECK(r.cache.tree().node_info(top).device_locks[Component::full] == 1);  // the leaf's load only
    CHECK(r.broken().empty());
    (void)r.run_transfers();
    REQUIRE(r.cache.loading_check().size() == 1);
    REQUIRE(r.cache.tree().node_info(top).device[Component::full]);
    REQUIRE_FALSE(r.cache.tree().node_info(top).device[Component::swa]);
    // Now the top's load copies only its window, bound under its resident FULL pages.
    const LoadBackStart window = r.cache.load_back(top);
    REQUIRE(window);
    const std::span<const LoadBackStep> queued = r.cache.load_back_plan(top);
    REQUIRE(queued.size() == 1);
    CHECK(queued[0].component == Component::swa);
    CHECK(queued[0].loading);
    CHECK(r.cache.start_loading() == 1);
    (void)r.run_transfers();
    const std::span<const LoadDone> done = r.cache.loading_check();
    REQUIRE(done.size() == 1);
    CHECK(done[0].committed);
    CHECK(r.cache.tree().node_info(top).device[Component::swa]);
    CHECK(r.device_holds(top, leaf_key));
    CHECK(r.device_holds(leaf, leaf_key));
    // Nothing leaked: the live pages are the tree's.
    CHECK(r.live(Component::full) == 5);
    CHECK(r.live(Component::swa) == 4);
    CHECK(r.broken().empty());
}
