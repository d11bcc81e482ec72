// The tri-pool [Mamba lazy up | Swa float | Full lazy down]: the float's placement and moves, its move gates
// (reference §9.4), the state-allocation scenarios 2 and 15, and the §12.1 sentinel regression.

#include "alloc_support.hpp"

using namespace alloc_test;

namespace {

using Tri = Fixture<TriPoolLayout>;

struct Tables {
    explicit Tables(const Tri& f) : epoch(f.alloc.epoch()) {
        for (Component c : {Component::full, Component::swa, Component::mamba}) {
            const PageTable& t = f.alloc.page_table(c);
            v2p.emplace_back(t.v2p().begin(), t.v2p().end());
            p2v.emplace_back(t.p2v().begin(), t.p2v().end());
        }
    }
    bool operator==(const Tables&) const = default;
    std::uint64_t epoch;
    std::vector<std::vector<std::int32_t>> v2p;
    std::vector<std::vector<std::int32_t>> p2v;
};

// 24 FULL/SWA envelopes of 128 bytes, 48 Mamba slots of 64 bytes; the sink is one FULL envelope.
// Four resident pages put FULL at [20, 24) and centre the SWA float at [8, 12); Mamba can then grow to page 16.
struct Crowded {
    Tri f{small_config(24 * 128)};
    std::vector<VirtualPage> resident = f.alloc_kv(4);
    std::vector<StateId> states = f.alloc_states(14);  // the Mamba end now touches the float's low edge
};

}  // namespace

TEST_CASE("an empty float parks, centres its span when it grows, and absorbs boundary holes without copying") {
    Tri f(small_config(24 * 128));
    CHECK(f.alloc.byte_span(Component::swa).first == f.alloc.byte_span(Component::swa).second);
    auto pages = f.alloc_kv(4);
    CHECK(f.alloc.byte_span(Component::swa) == std::pair<std::size_t, std::size_t>{8 * 128, 12 * 128});
    CHECK(f.alloc.byte_span(Component::full) == std::pair<std::size_t, std::size_t>{20 * 128, 24 * 128});
    // Holes first, then the roomier side.
    f.alloc.free_swa(std::span(pages).subspan(1, 1));
    auto more = f.alloc_kv(3);
    CHECK(f.alloc.hole_pages(Component::swa) == 0);
    // FULL grew first to [17, 24): 7 free envelopes below the float, 5 above, so the float grew low.
    CHECK(f.alloc.byte_span(Component::swa) == std::pair<std::size_t, std::size_t>{6 * 128, 12 * 128});
    // Freeing the edge page leaves a hole that a flush absorbs with no copy.
    std::vector<VirtualPage> edge{more[2]};
    f.alloc.free_swa(edge);
    const BackendCounters before = f.backend.counters();
    (void)f.alloc.flush_opportunistic();
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.alloc.byte_span(Component::swa).first == 7 * 128);
    // A float that empties parks and owns no bytes.
    f.alloc.free(pages);
    f.alloc.free(more);
    const auto span = f.alloc.byte_span(Component::swa);
    CHECK(span.first == span.second);
    CHECK(f.alloc.available_size(Component::mamba) > 14);
    CHECK(f.broken().empty());
}

TEST_CASE("make_room relocates the boundary pages or leapfrogs the whole span, and the data follows") {
    Tri f(small_config(64 * 128));
    auto pages = f.alloc_kv(6);
    auto states = f.alloc_states(4);
    std::vector<VirtualPage> hole{pages[4]};
    f.alloc.free_swa(hole);
    const auto [lo, hi] = f.alloc.byte_span(Component::swa);
    const std::size_t mamba_top = f.alloc.byte_span(Component::mamba).second;
    const std::size_t gap = lo - mamba_top;
    // Boundary relocation: open two more envelopes on the low side; the lowest pages move into the hole and
    // above the span.
    const std::size_t open = f.alloc.make_room(Side::low, gap + 2 * 128);
    CHECK(open >= gap + 2 * 128);
    CHECK(f.alloc.byte_span(Component::swa).first >= lo + 2 * 128);
    REQUIRE(f.drain());
    std::vector<VirtualPage> kept(pages);
    kept.erase(kept.begin() + 4);
    CHECK(f.pages_hold(Component::swa, kept));
    CHECK(f.pages_hold(Component::full, pages));
    CHECK(f.states_hold(states));
    CHECK(f.broken().empty());
    // Leapfrog: ask for more than the span's own bytes on the high side, so every live page moves low.
    const std::size_t high_gap = f.alloc.byte_span(Component::full).first - f.alloc.byte_span(Component::swa).second;
    const std::size_t want = high_gap + (hi - lo) + 128;
    CHECK(f.alloc.make_room(Side::high, want) >= want);
    REQUIRE(f.drain());
    CHECK(f.pages_hold(Component::swa, kept));
    CHECK(f.states_hold(states));
    CHECK(f.broken().empty());
    // Impossible asks change nothing.
    const Tables before(f);
    CHECK(f.alloc.make_room(Side::low, 64 * 128) < 64 * 128);
    CHECK(Tables(f) == before);
}

TEST_CASE("compact_holes packs the float away from the retreating side") {
    Tri f(small_config(64 * 128));
    auto pages = f.alloc_kv(8);
    std::vector<VirtualPage> odd{pages[1], pages[3], pages[5]};
    f.alloc.free_swa(odd);
    const auto [lo, hi] = f.alloc.byte_span(Component::swa);
    const std::size_t moved = f.alloc.compact_holes(Side::low);
    CHECK(moved > 0);
    CHECK(f.alloc.hole_pages(Component::swa) == 0);
    CHECK(f.alloc.byte_span(Component::swa) == std::pair<std::size_t, std::size_t>{hi - 5 * 128, hi});
    REQUIRE(f.drain());
    std::vector<VirtualPage> kept{pages[0], pages[2], pages[4], pages[6], pages[7]};
    CHECK(f.pages_hold(Component::swa, kept));
    CHECK(f.alloc.compact_holes(Side::high) == 0);
    CHECK(f.broken().empty());
    (void)lo;
}

TEST_CASE("float movement owners respect every move gate") {
    for (Side side : {Side::low, Side::high}) {
        for (int op = 0; op < 2; ++op) {
            for (int closed = 1; closed < 4; ++closed) {
                CAPTURE(static_cast<int>(side));
                CAPTURE(op);
                CAPTURE(closed);
                Tri f(small_config(64 * 128));
                MoveGateHold host_hold, disagg_hold;
                if (closed & 1) host_hold = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
                if (closed & 2) disagg_hold = f.alloc.install_move_gate(MoveGateSlot::disagg);
                auto pages = f.alloc_kv(6);
                std::vector<VirtualPage> holes{pages[1], pages[4]};
                f.alloc.free_swa(holes);
                HostBackend::Event fwd = f.backend.make_event();
                auto other = f.backend.make_stream();
                fwd.ref().record(other);  // a running forward: a move would have to wait it
                f.alloc.set_inflight_forward(fwd);
                const Tables before(f);
                const BackendCounters counters = f.backend.counters();
                const std::size_t gap = side == Side::low
                                            ? f.alloc.byte_span(Component::swa).first - f.alloc.byte_span(Component::mamba).second
                                            : f.alloc.byte_span(Component::full).first - f.alloc.byte_span(Component::swa).second;
                if (op == 0) {
                    CHECK(f.alloc.make_room(side, gap + 3 * 128) == gap);
                } else {
                    CHECK(f.alloc.compact_holes(side) == 0);
                }
                CHECK(same_counters(counters, f.backend.counters()));  // no settle, no copy
                CHECK(Tables(f) == before);
                host_hold.release();
                disagg_hold.release();
                if (op == 0) {
                    CHECK(f.alloc.make_room(side, gap + 3 * 128) >= gap + 3 * 128);
                } else {
                    CHECK(f.alloc.compact_holes(side) > 0);
                }
                CHECK(f.backend.counters().stream_waits == counters.stream_waits + 1);  // settled the forward
                f.backend.run_all();
                std::vector<VirtualPage> kept{pages[0], pages[2], pages[3], pages[5]};
                CHECK(f.pages_hold(Component::swa, kept));
                CHECK(f.pages_hold(Component::full, pages));
                CHECK(f.broken().empty());
            }
        }
    }
}

TEST_CASE("gated token recovery reuses holes without copying, and succeeds once the gate lifts") {
    Crowded c;
    Tri& f = c.f;
    MoveGateHold closed = f.alloc.install_move_gate(MoveGateSlot::disagg);
    std::vector<VirtualPage> inner{c.resident[1]};
    f.alloc.free_swa(inner);
    const BackendCounters before = f.backend.counters();
    CHECK(f.alloc.ensure_capacity({.full = 1, .swa = 1}));
    std::vector<VirtualPage> one(1);
    REQUIRE(f.alloc.alloc(one));  // the hole is reused in place
    CHECK(same_counters(before, f.backend.counters()));
    // Eight more FULL+SWA pages need the float to move toward Mamba... which is full: only FULL's own room.
    const std::int64_t room = f.alloc.available_size();
    std::vector<VirtualPage> many(static_cast<std::size_t>(room + 1));
    const AllocResult r = f.alloc.alloc(many);
    CHECK_FALSE(r);
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.pages_hold(Component::full, c.resident));
    CHECK(f.states_hold(c.states));
    f.alloc.free_state(std::span(c.states).first(6));
    CHECK_FALSE(f.alloc.alloc(many));  // Mamba holes exist, but compaction is gated
    closed.release();
    REQUIRE(f.alloc.alloc(many));
    REQUIRE(f.drain());
    CHECK(f.pages_hold(Component::full, c.resident));
    CHECK(f.states_hold(std::span(c.states).subspan(6)));
    CHECK(f.broken().empty());
}

TEST_CASE("state recovery obeys the float gate") {
    Crowded c;
    Tri& f = c.f;
    MoveGateHold closed = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    const BackendCounters before = f.backend.counters();
    std::vector<StateId> more(2);
    const AllocResult r = f.alloc.alloc_state(more);
    CHECK_FALSE(r);
    CHECK(r.shortfall == Shortfall::moves_blocked);
    CHECK(r.missing.component == Component::mamba);
    CHECK(same_counters(before, f.backend.counters()));
    closed.release();
    REQUIRE(f.alloc.alloc_state(more));
    CHECK(f.backend.counters().copies_queued > before.copies_queued);
    REQUIRE(f.drain());
    CHECK(f.kv_holds(c.resident));
    CHECK(f.states_hold(c.states));
    CHECK(f.broken().empty());
}

TEST_CASE("a state allocation cannot move a reservation before its load is queued (the sentinel bug)") {
    Crowded c;
    Tri& f = c.f;
    // The SWA page at the float's low edge is freed; the reservation takes exactly that page.
    const std::int32_t low_page = static_cast<std::int32_t>(f.alloc.byte_span(Component::swa).first / 128);
    VirtualPage edge{};
    for (VirtualPage v : c.resident) {
        if (f.physical_pages(Component::swa, std::span(&v, 1))[0].value() == low_page) edge = v;
    }
    REQUIRE(edge.is_valid());
    f.alloc.free_swa(std::span(&edge, 1));
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 1);
    REQUIRE(r);
    REQUIRE(r.reservation.pages()[0].value() == low_page);
    f.alloc.bind_swa(std::span(&edge, 1), r.reservation);
    const std::vector<std::byte> bytes = snapshot(f.alloc.region());
    const BackendCounters before = f.backend.counters();

    std::vector<StateId> one(1);
    const AllocResult s = f.alloc.alloc_state(one);
    CHECK_FALSE(s);
    CHECK(s.shortfall == Shortfall::moves_blocked);
    CHECK(same_counters(before, f.backend.counters()));  // no move was even queued
    CHECK(f.alloc.page_table(Component::swa).v2p().back() == -1);
    CHECK(f.alloc.page_table(Component::swa).p2v().back() == -1);
    CHECK(f.alloc.page_table(Component::swa).physical_of(edge.value()) == low_page);
    CHECK(same_bytes(f.alloc.region(), bytes));  // the state bytes (and every other byte) are untouched
    CHECK(f.broken().empty());

    // Roll the load back: the reservation is cancelled, and four slots (two envelopes) need the float to
    // absorb the freed edge page and move one more.
    f.alloc.cancel(std::move(r.reservation));
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    std::vector<StateId> two(4);
    REQUIRE(f.alloc.alloc_state(two));
    CHECK(f.backend.counters().copies_queued > before.copies_queued);  // an SWA move
    REQUIRE(f.drain());
    std::vector<VirtualPage> others;
    for (VirtualPage v : c.resident) {
        if (v != edge) others.push_back(v);
    }
    CHECK(f.pages_hold(Component::swa, others));
    CHECK(f.pages_hold(Component::full, c.resident));
    CHECK(f.states_hold(c.states));
    CHECK(f.broken().empty());
}

TEST_CASE("a reservation stays put until its load is acked; then a state allocation moves it with its data") {
    Crowded c;
    Tri& f = c.f;
    Transfers t(f.backend, 8 * 128);
    MoveGateHold in_flight;
    std::vector<VirtualPage> target{c.resident[0]};
    f.alloc.free_swa(target);
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 1);  // takes the target's old page (a hole)
    REQUIRE(r);
    // The load's Mamba checkpoint comes from evicting one: a slot reused in place, no move.
    f.alloc.free_state(std::span(c.states).first(1));
    std::vector<StateId> checkpoint(1);
    REQUIRE(f.alloc.alloc_state(checkpoint));
    f.write_page(Component::mamba, checkpoint[0].value());
    f.alloc.bind_swa(target, r.reservation);
    CHECK(f.alloc.pending_load_pages(Component::swa) == 1);
    const BackendCounters before = f.backend.counters();
    std::vector<StateId> one(1);
    CHECK_FALSE(f.alloc.alloc_state(one));
    CHECK(same_counters(before, f.backend.counters()));

    HostBackend::Event loaded = t.load(f.alloc.region(), r.reservation.pages(), 128, 32, f.loaded_rows(target));
    in_flight = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    f.alloc.set_transfer_done_event(load_key, loaded);
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    const BackendCounters submitted = f.backend.counters();
    const AllocResult gated = f.alloc.alloc_state(one);
    CHECK_FALSE(gated);
    CHECK(gated.shortfall == Shortfall::moves_blocked);
    CHECK(same_counters(submitted, f.backend.counters()));

    t.run();  // the ack
    in_flight.release();
    REQUIRE(f.alloc.alloc_state(one));
    CHECK(f.backend.counters().copies_queued > before.copies_queued);
    REQUIRE(f.drain());
    CHECK(f.page_holds(Component::swa, target[0].value(), 7));
    CHECK(f.states_hold(std::span(c.states).subspan(1)));
    CHECK(f.states_hold(checkpoint));
    CHECK(f.broken().empty());
}
