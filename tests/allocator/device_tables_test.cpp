// The device mirrors of the v2p tables: dirty-chunk tracking in PageTable, PageTableMirror's staging slabs,
// and UnifiedAllocator::device_tables(). On a manual HostBackend the "device" tables are host memory, so rows
// are read back THROUGH the mirror: a table update that runs before the data moves it describes, a slab
// rewritten before the copy that reads it ran, or a move left unpublished shows up as a wrong row or table.

#include "alloc_support.hpp"

#include <utility>

using namespace alloc_test;

namespace {

// A live page (FULL, SWA) or state slot (Mamba) whose rows hold the markers of version 0.
struct Live {
    Component c;
    std::int32_t id;
};

template <class L>
std::vector<Live> live_of(const Fixture<L>& f, std::span<const VirtualPage> kv, std::span<const StateId> states = {}) {
    std::vector<Live> out;
    for (VirtualPage v : kv) {
        out.push_back({Component::full, v.value()});
        if constexpr (Fixture<L>::Alloc::has_swa) {
            if (f.alloc.page_table(Component::swa).physical_of(v.value()) > 0) out.push_back({Component::swa, v.value()});
        }
    }
    for (StateId s : states) out.push_back({Component::mamba, s.value()});
    return out;
}

// True when every row of every live page reads back its marker through the mirrors `d`.
template <class L>
bool rows_hold_through(const Fixture<L>& f, const DeviceTables& d, const std::vector<Live>& live) {
    for (const Live& l : live) {
        const TranslationTable& t = table_of(d, l.c);
        const std::int32_t rows = l.c == Component::mamba ? 1 : f.page_size();
        for (std::int32_t r = 0; r < rows; ++r) {
            const std::int32_t row = l.c == Component::mamba ? t.physical_page(l.id) : t.physical_token(l.id * f.page_size() + r);
            if (f.read_physical_row(l.c, row) != marker(l.c, l.id, r)) return false;
        }
    }
    return true;
}

// Every component's host v2p, sink and sentinel included.
template <class L>
std::vector<std::vector<std::int32_t>> host_tables(const Fixture<L>& f) {
    std::vector<std::vector<std::int32_t>> out;
    for (Component c : {Component::full, Component::swa, Component::mamba}) {
        if (!layout_components_v<L>.has(c)) continue;
        const auto v2p = f.alloc.page_table(c).v2p();
        out.emplace_back(v2p.begin(), v2p.end());
    }
    return out;
}
template <class L>
std::vector<std::vector<std::int32_t>> mirror_tables(const DeviceTables& d) {
    std::vector<std::vector<std::int32_t>> out;
    for (Component c : {Component::full, Component::swa, Component::mamba}) {
        if (layout_components_v<L>.has(c)) out.push_back(mirror_entries(table_of(d, c)));
    }
    return out;
}

// `move` moves pages of `live` (and publishes on its own). Before anything it queued runs, the mirrors still
// give the old mapping and every row; then the stream runs one operation at a time and after EVERY step
// every live row reads back through the mirrors (the table update runs after the data it describes); in the
// end the mirrors equal the host tables. A `device_tables()` right after the move has nothing left to queue,
// unless the call also binds pages after its moves (`binds_after_moves`: an allocation that compacts first).
template <class L, class Move>
void moves_follow_through_mirror(Fixture<L>& f, const std::vector<Live>& live, Move move, bool binds_after_moves = false) {
    const DeviceTables d = f.alloc.device_tables();
    REQUIRE(f.drain());
    REQUIRE(mirror_tables<L>(d) == host_tables(f));
    REQUIRE(rows_hold_through(f, d, live));
    const auto before = host_tables(f);
    move();
    REQUIRE(host_tables(f) != before);  // something moved
    const BackendCounters moved = f.backend.counters();
    const DeviceTables again = f.alloc.device_tables();
    CHECK(f.backend.counters().copies_queued == moved.copies_queued + (binds_after_moves ? 1 : 0));
    CHECK(again.full.v2p == d.full.v2p);
    CHECK(mirror_tables<L>(d) == before);  // queued, not run: the old mapping
    CHECK(rows_hold_through(f, d, live));
    std::size_t steps = 0;
    while (f.backend.run_next(f.stream)) {
        ++steps;
        INFO("after stream step ", steps);
        CHECK(rows_hold_through(f, d, live));
    }
    CHECK(f.backend.queued(f.stream) == 0);
    CHECK(steps >= 2);  // the data copies, then the table updates
    CHECK(mirror_tables<L>(d) == host_tables(f));
    CHECK(f.backend.counters().host_synchronizations == 0);
    CHECK(f.broken().empty());
}

}  // namespace

TEST_CASE("a v2p write marks its 64-entry chunk dirty once; a refused write marks nothing") {
    PageTable t(300, 300, PageSize{4});
    CHECK(t.mirror_chunks() == 5);  // 301 entries
    CHECK(t.dirty_chunks().empty());
    t.bind(130, 7);
    t.bind(3, 8);
    t.bind(131, 9);
    CHECK(std::vector<std::int32_t>(t.dirty_chunks().begin(), t.dirty_chunks().end()) == std::vector<std::int32_t>{2, 0});
    CHECK_THROWS_AS(t.bind(299, 7), unikv::logic_error);   // page 7 is bound
    CHECK_THROWS_AS(t.move_binding(20, 21), unikv::logic_error);  // page 20 has no virtual page
    CHECK(t.dirty_chunks().size() == 2);
    t.clear_dirty();
    CHECK(t.dirty_chunks().empty());
    t.move_binding(7, 250);  // rewrites v2p[130]
    (void)t.unbind(3);
    CHECK(std::vector<std::int32_t>(t.dirty_chunks().begin(), t.dirty_chunks().end()) == std::vector<std::int32_t>{2, 0});
}

TEST_CASE("a mirror copies only dirty chunks, recycles a staging slab only after its copy ran, and never syncs") {
    HostBackend backend({.mode = ExecutionMode::manual});
    auto stream = backend.make_stream();
    PageTable table(200, 200, PageSize{4});
    PageTableMirror<HostBackend> mirror(backend, table, stream);
    CHECK(mirror.staging_slabs() == PageTableMirror<HostBackend>::initial_slabs);  // one holds the upload
    CHECK_FALSE(mirror_matches(mirror.device_table(), table));  // queued, not run
    backend.run_all();
    CHECK(mirror_matches(mirror.device_table(), table));
    const BackendCounters clean = backend.counters();
    CHECK_FALSE(mirror.publish(table, stream));  // nothing dirty: O(1), nothing queued
    CHECK(same_counters(clean, backend.counters()));

    table.bind(1, 5);
    const std::vector<std::int32_t> first(table.v2p().begin(), table.v2p().end());
    CHECK(mirror.publish(table, stream));
    table.bind(150, 6);
    (void)table.unbind(1);
    CHECK(mirror.publish(table, stream));
    CHECK(backend.counters().copies_queued == clean.copies_queued + 2);
    CHECK(mirror.staging_slabs() == 2);  // the upload's slab is free again (it ran): no new slab yet
    table.bind(2, 9);
    CHECK(mirror.publish(table, stream));
    CHECK(mirror.staging_slabs() == 3);  // both slabs are still read by queued copies
    CHECK(backend.run_next(stream));     // the first publish's copy
    CHECK(mirror_entries(mirror.device_table()) == first);
    backend.run_all();
    CHECK(mirror_matches(mirror.device_table(), table));
    table.bind(3, 10);
    CHECK(mirror.publish(table, stream));
    CHECK(mirror.staging_slabs() == 3);  // recycled
    backend.run_all();
    CHECK(mirror_matches(mirror.device_table(), table));
    CHECK(backend.counters().host_synchronizations == 0);
}

TEST_CASE_TEMPLATE("an urgent flush publishes its moves behind their copies, and rows read right through the mirror at "
                   "every step", L, FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout) {
    Fixture<L> f(small_config(64 * 128));
    std::vector<std::vector<VirtualPage>> groups;
    for (int i = 0; i < 5; ++i) groups.push_back(f.alloc_kv(2 + i % 3));
    std::vector<StateId> states;
    if constexpr (Fixture<L>::Alloc::has_mamba) {
        states = f.alloc_states(6);
        f.alloc.free_state(std::span(states).first(2));
        states.erase(states.begin(), states.begin() + 2);
    }
    f.alloc.free(groups[0]);
    f.alloc.free(groups[2]);
    if constexpr (Fixture<L>::Alloc::has_swa) f.alloc.free_swa(std::span(groups[3]).first(1));
    std::vector<VirtualPage> kept;
    for (int i : {1, 3, 4}) kept.insert(kept.end(), groups[static_cast<std::size_t>(i)].begin(), groups[static_cast<std::size_t>(i)].end());
    moves_follow_through_mirror(f, live_of(f, kept, states), [&] { CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0); });
}

TEST_CASE("make_room publishes its moves behind their copies, relocation and leapfrog alike") {
    Fixture<TriPoolLayout> f(small_config(64 * 128));
    auto pages = f.alloc_kv(6);
    auto states = f.alloc_states(4);
    f.alloc.free_swa(std::span(pages).subspan(4, 1));
    const auto live = live_of(f, pages, states);
    const auto [lo, hi] = f.alloc.byte_span(Component::swa);
    const std::size_t gap = lo - f.alloc.byte_span(Component::mamba).second;
    moves_follow_through_mirror(f, live, [&] { CHECK(f.alloc.make_room(Side::low, gap + 2 * 128) >= gap + 2 * 128); });
    const std::size_t high_gap = f.alloc.byte_span(Component::full).first - f.alloc.byte_span(Component::swa).second;
    const std::size_t want = high_gap + (hi - lo) + 128;
    moves_follow_through_mirror(f, live, [&] { CHECK(f.alloc.make_room(Side::high, want) >= want); });
}

TEST_CASE("compact_holes, and an allocation whose shortfall ladder flushes a neighbour, publish behind their copies") {
    Fixture<TriPoolLayout> t(small_config(64 * 128));
    auto pages = t.alloc_kv(8);
    t.alloc.free_swa(std::vector<VirtualPage>{pages[1], pages[3], pages[5]});
    moves_follow_through_mirror(t, live_of(t, pages), [&] { CHECK(t.alloc.compact_holes(Side::low) > 0); });

    Fixture<MambaFullLayout> f(small_config(64 * 128));
    auto states = f.alloc_states(12);
    auto kv = f.alloc_kv(6);
    f.alloc.free_state(std::span(states).first(6));  // Mamba holes below its survivors: FULL fits only after a flush
    const std::int64_t room = f.alloc.schedulable_available_size(Component::full);
    REQUIRE(room > f.alloc.available_size(Component::full));
    moves_follow_through_mirror(f, live_of(f, kv, std::span(states).subspan(6)), [&] {
        std::vector<VirtualPage> more(static_cast<std::size_t>(room));
        CHECK(f.alloc.alloc(more));
    }, true);
}

TEST_CASE_TEMPLATE("an eager free publishes its compaction behind the copies", L, EagerFullLayout,
                   EagerSwaFullLayout, EagerMambaFullLayout) {
    Fixture<L> f(small_config(64 * 128));
    auto head = f.alloc_kv(3);
    auto tail = f.alloc_kv(4);
    std::vector<StateId> states;
    if constexpr (Fixture<L>::Alloc::has_mamba) states = f.alloc_states(3);
    moves_follow_through_mirror(f, live_of(f, tail, states), [&] { f.alloc.free(head); });
}

TEST_CASE("publishes queued before any copy runs reach the mirror in order, each from its own staging slab") {
    Fixture<SwaFullLayout> f(small_config(512 * 128));  // 513 v2p entries: 9 chunks per table
    DeviceTables d = f.alloc.device_tables();
    REQUIRE(f.drain());
    std::vector<std::vector<std::vector<std::int32_t>>> published{host_tables(f)};
    std::vector<VirtualPage> live;
    for (int round = 0; round < 6; ++round) {
        // Fresh ids climb through the chunks while frees, tombstones and flushes rewrite older ones, so every
        // publish has its own set and order of dirty chunks.
        std::vector<VirtualPage> fresh(static_cast<std::size_t>(20 + 10 * round));
        REQUIRE(f.alloc.alloc(fresh));
        if (round >= 2) {
            f.alloc.free(std::span(live).first(10));
            live.erase(live.begin(), live.begin() + 10);
            f.alloc.free_swa(std::span(live).first(2));
            live.erase(live.begin(), live.begin() + 2);
        }
        live.insert(live.end(), fresh.begin(), fresh.end());
        if (round % 2 == 1) (void)f.alloc.flush(FlushMode::urgent);
        d = f.alloc.device_tables();
        published.push_back(host_tables(f));
    }
    // Each component's mirror only moves forward through the published states.
    std::vector<std::size_t> at(published[0].size(), 0);
    const auto check_in_order = [&] {
        const auto now = mirror_tables<SwaFullLayout>(d);
        for (std::size_t c = 0; c < now.size(); ++c) {
            std::size_t j = at[c];
            while (j < published.size() && published[j][c] != now[c]) ++j;
            CHECK_MESSAGE(j < published.size(), "component ", c, " holds a table that was never published");
            if (j < published.size()) at[c] = j;
        }
    };
    while (f.backend.run_next(f.stream)) check_in_order();
    CHECK(f.backend.queued(f.stream) == 0);
    CHECK(mirror_matches(d.full, f.alloc.page_table(Component::full)));
    CHECK(mirror_matches(d.swa, f.alloc.page_table(Component::swa)));
    CHECK(at == std::vector<std::size_t>(at.size(), published.size() - 1));
    CHECK(f.backend.counters().host_synchronizations == 0);
}

TEST_CASE_TEMPLATE("hot paths and device_tables never synchronize; hot paths only mark chunks dirty", L, FullLayout,
                   SwaFullLayout, MambaFullLayout, TriPoolLayout) {
    Fixture<L> f(small_config(64 * 128));
    auto a = f.alloc_kv(4);
    auto b = f.alloc_kv(4);
    (void)f.alloc.device_tables();
    REQUIRE(f.drain());
    const BackendCounters before = f.backend.counters();
    run_hot_paths(f, a, b);
    CHECK(same_counters(before, f.backend.counters()));
    const DeviceTables d = f.alloc.device_tables();
    CHECK(f.backend.counters().host_synchronizations == 0);
    CHECK(f.backend.counters().stream_waits == before.stream_waits);
    CHECK(f.backend.counters().copies_queued == before.copies_queued + L::size);  // one per changed pool
    const BackendCounters published = f.backend.counters();
    (void)f.alloc.device_tables();  // nothing dirty: queues nothing
    CHECK(same_counters(published, f.backend.counters()));
    REQUIRE(f.drain());
    CHECK(mirror_tables<L>(d) == host_tables(f));
    CHECK(f.backend.counters().host_synchronizations == 0);
}
