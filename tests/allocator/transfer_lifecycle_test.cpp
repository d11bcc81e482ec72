// The allocator-level host-tier transfer lifecycle scenarios of reference §9 (1, 3, 8, 9, 12, 13, 14, 17, 18) on
// the [Swa lazy up | Full lazy down] layout, with a manual backend: a move that runs before the transfer it
// must follow, or a page reused too early, shows up as wrong row contents.

#include "alloc_support.hpp"

using namespace alloc_test;

namespace {

using F = Fixture<SwaFullLayout>;
constexpr TransferKey write_key{.owner = 1, .direction = TransferDirection::write};

}  // namespace

TEST_CASE("a pending reservation blocks moves until its load is queued") {
    F f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    auto head = f.alloc_kv(2);
    auto gap = f.alloc_kv(2);
    auto tail = f.alloc_kv(2);
    auto target = f.alloc_kv(2);
    f.alloc.free_swa(target);  // the target's SWA is tombstoned, its FULL stays
    f.alloc.free_swa(gap);     // only SWA holes: FULL has nothing to compact
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
    REQUIRE(r);
    f.alloc.bind_swa(target, r.reservation);
    f.alloc.free_swa(head);  // SWA holes below the survivors: a flush would move SWA pages
    CHECK(f.alloc.moves_blocked());

    const BackendCounters before = f.backend.counters();
    const FlushResult urgent = f.alloc.flush(FlushMode::urgent);
    const FlushResult lazy = f.alloc.flush_opportunistic();
    CHECK(urgent.pages_moved == 0);
    CHECK(urgent.blocked);
    CHECK(lazy.pages_moved == 0);
    CHECK(same_counters(before, f.backend.counters()));

    // Submit: queue the load into the reserved pages and register its event.
    HostBackend::Event loaded = t.load(f.alloc.region(), r.reservation.pages(), 128, 32, f.loaded_rows(target));
    f.alloc.set_transfer_done_event(load_key, loaded);
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(r.reservation.submitted());

    const FlushResult moved = f.alloc.flush(FlushMode::urgent);
    CHECK(moved.pages_moved > 0);
    CHECK(f.backend.counters().stream_waits == before.stream_waits + 1);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);
    // The move waits on the load: the allocator stream cannot run before the transfer stream.
    CHECK_FALSE(f.drain());
    t.run();
    CHECK(f.drain());
    CHECK(f.pages_hold(Component::swa, target, 7));
    CHECK(f.pages_hold(Component::full, target));
    CHECK(f.kv_holds(tail));
    CHECK(f.broken().empty());
}

TEST_CASE("hole reuse does not wait for unrelated copies") {
    F f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    auto source = f.alloc_kv(2);
    auto gap = f.alloc_kv(2);
    auto target = f.alloc_kv(2);
    f.alloc.free(gap);
    HostBackend::Event written = t.write(f.alloc.region(), f.physical_pages(Component::swa, source), 128);
    f.alloc.set_transfer_done_event(write_key, written);
    f.alloc.free_swa(target);
    ReserveResult pending = f.alloc.alloc_physical(Component::swa, 1);
    REQUIRE(pending);
    f.alloc.bind_swa(std::span(target).first(1), pending.reservation);
    HostBackend::Event loaded = t.load(f.alloc.region(), pending.reservation.pages(), 128, 32,
                                   f.loaded_rows(std::span(target).first(1)), 4);
    f.alloc.set_transfer_done_event(load_key, loaded);

    const BackendCounters before = f.backend.counters();
    std::vector<VirtualPage> fresh(2);
    REQUIRE(f.alloc.alloc(fresh));
    ReserveResult more = f.alloc.alloc_physical(Component::swa, 1);
    REQUIRE(more);
    CHECK(same_counters(before, f.backend.counters()));  // no wait, no copy, no sync

    f.write_kv(fresh, 3);
    t.run();
    CHECK(f.kv_holds(source));
    CHECK(f.pages_hold(Component::full, target));
    CHECK(f.page_holds(Component::swa, target[0].value(), 7));
    CHECK(f.kv_holds(fresh, 3));
    CHECK(host_rows_hold(t.host, Component::swa, source));  // the backup read rows untouched by new allocations
    f.alloc.cancel(std::move(more.reservation));
    CHECK(f.broken().empty());
}

TEST_CASE("a reservation is counted, unbound, and released by cancel") {
    F f(small_config(arena_bytes));
    auto live = f.alloc_kv(3);
    const std::int64_t available = f.alloc.available_size(Component::swa);
    const std::int32_t swa_live = f.alloc.live_pages(Component::swa);
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
    REQUIRE(r);
    CHECK(f.alloc.pending_load_pages(Component::swa) == 2);
    CHECK(f.alloc.reserved_pages(Component::swa) == 2);
    CHECK(f.alloc.moves_blocked());
    CHECK(f.alloc.moves_blocked(Component::swa));
    CHECK_FALSE(f.alloc.moves_blocked(Component::full));
    CHECK(f.alloc.available_size(Component::swa) == available - 2);
    CHECK(f.alloc.live_pages(Component::swa) == swa_live);
    const PageTable& swa = f.alloc.page_table(Component::swa);
    for (PhysicalPage p : r.reservation.pages()) {
        CHECK(swa.virtual_of(p.value()) == -1);
        CHECK(std::find(swa.v2p().begin(), swa.v2p().end(), p.value()) == swa.v2p().end());
    }
    auto later = f.alloc_kv(4);
    for (PhysicalPage p : f.physical_pages(Component::swa, later)) {
        for (PhysicalPage q : r.reservation.pages()) CHECK(p != q);
    }
    const std::vector<PhysicalPage> reserved(r.reservation.pages().begin(), r.reservation.pages().end());
    CHECK(f.broken().empty());
    f.alloc.cancel(std::move(r.reservation));
    CHECK(r.reservation.empty());
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    CHECK(f.alloc.reserved_pages(Component::swa) == 0);
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.alloc.hole_pages(Component::swa) == 2);
    CHECK(f.alloc.available_size(Component::swa) == available - 8);  // `later` took 4 SWA and 4 FULL envelopes
    CHECK(f.kv_holds(live));
    CHECK(f.kv_holds(later));
    CHECK(f.broken().empty());
}

TEST_CASE("moves and frees wait for every copy first") {
    F f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    auto head = f.alloc_kv(2);
    auto tail = f.alloc_kv(2);
    HostBackend::Event written = t.write(f.alloc.region(), f.physical_pages(Component::full, tail), 128);
    HostBackend::Event loaded = t.load(f.alloc.region(), f.physical_pages(Component::swa, std::span(tail).first(1)), 128, 32,
                                   f.loaded_rows(std::span(tail).first(1)), 4);
    f.alloc.set_transfer_done_event(write_key, written);
    f.alloc.set_transfer_done_event(load_key, loaded);
    CHECK(f.alloc.registered_transfer_events() == 2);
    f.alloc.free(head);
    const BackendCounters before = f.backend.counters();
    const FlushResult r = f.alloc.flush(FlushMode::urgent);
    CHECK(r.pages_moved == 4);  // the tail's SWA and FULL pages move into the head's holes
    CHECK(f.backend.counters().stream_waits == before.stream_waits + 2);
    CHECK(f.alloc.registered_transfer_events() == 0);
    CHECK_FALSE(f.drain());  // both waits precede the move
    t.run();
    CHECK(f.drain());
    CHECK(f.pages_hold(Component::swa, std::span(tail).first(1), 7));
    CHECK(f.page_holds(Component::swa, tail[1].value()));
    CHECK(f.pages_hold(Component::full, tail));

    ReserveResult res = f.alloc.alloc_physical(Component::swa, 1);
    REQUIRE(res);
    HostBackend::Event again = t.load(f.alloc.region(), res.reservation.pages(), 128, 32, std::vector<std::uint32_t>(4, 9), 8);
    f.alloc.set_transfer_done_event(load_key, again);
    const BackendCounters mid = f.backend.counters();
    f.alloc.free_physical(Component::swa, res.reservation.pages());
    CHECK(f.backend.counters().stream_waits == mid.stream_waits + 1);
    CHECK(f.backend.counters().copies_queued == mid.copies_queued);
    t.run();
    CHECK(f.drain());
    CHECK(f.broken().empty());
}

TEST_CASE("a failed reservation leaves no reservation") {
    F f(small_config(arena_bytes));
    auto live = f.alloc_kv(5);
    const std::int64_t available = f.alloc.available_size(Component::swa);
    const std::uint64_t epoch = f.alloc.epoch();
    ReserveResult r = f.alloc.alloc_physical(Component::swa, static_cast<std::int32_t>(available + 1));
    CHECK_FALSE(r);
    CHECK(r.shortfall == Shortfall::room);
    CHECK(r.reservation.empty());
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.alloc.available_size(Component::swa) == available);
    CHECK(f.alloc.epoch() == epoch);
    CHECK(f.kv_holds(live));
    CHECK(f.broken().empty());
}

TEST_CASE("cancel after a partial bind releases every reserved page and restores the tombstone") {
    F f(small_config(arena_bytes));
    auto target = f.alloc_kv(2);
    f.alloc.free_swa(target);
    const std::int32_t live_before = f.alloc.live_pages(Component::swa);
    const std::int64_t available = f.alloc.available_size(Component::swa);
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
    REQUIRE(r);
    f.alloc.bind_swa(std::span(target).first(1), r.reservation);
    CHECK(f.physical_row(Component::swa, target[0].value() * 4) == r.reservation.pages()[0].value() * 4);
    f.alloc.cancel(std::move(r.reservation));
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    CHECK(f.alloc.live_pages(Component::swa) == live_before);
    CHECK(f.alloc.available_size(Component::swa) == available);
    for (std::int32_t row = 0; row < 4; ++row) CHECK(f.physical_row(Component::swa, target[0].value() * 4 + row) == 0);
    CHECK(f.pages_hold(Component::full, target));
    CHECK(f.broken().empty());
}

TEST_CASE("a redundant destination is freed after its ack") {
    F f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    MoveGateHold in_flight;
    auto resident = f.alloc_kv(2);
    auto target = f.alloc_kv(1);
    f.alloc.free_swa(target);
    ReserveResult r = f.alloc.alloc_physical(Component::swa, 2);
    REQUIRE(r);
    f.alloc.bind_swa(target, r.reservation, 1);  // only the missing page; page 0 is redundant
    const std::vector<PhysicalPage> reserved(r.reservation.pages().begin(), r.reservation.pages().end());
    std::vector<std::uint32_t> rows(4, 0xABCDu);
    for (std::uint32_t x : f.loaded_rows(target)) rows.push_back(x);
    HostBackend::Event loaded = t.load(f.alloc.region(), reserved, 128, 32, rows);
    in_flight = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    f.alloc.set_transfer_done_event(load_key, loaded);
    CHECK(f.alloc.moves_blocked());  // the gate holds from queueing to the ack
    f.alloc.free(resident);
    const BackendCounters before = f.backend.counters();
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);
    std::vector<VirtualPage> fresh(3);
    REQUIRE(f.alloc.alloc(fresh));
    for (PhysicalPage p : f.physical_pages(Component::swa, fresh)) {
        CHECK(p != reserved[0]);
        CHECK(p != reserved[1]);
    }
    CHECK(same_counters(before, f.backend.counters()));

    t.run();  // the ack: the copy completed
    in_flight.release();
    const std::int32_t live = f.alloc.live_pages(Component::swa);
    f.alloc.free_physical(Component::swa, std::span(reserved).first(1));
    CHECK(f.backend.counters().stream_waits == before.stream_waits + 1);
    CHECK(f.alloc.live_pages(Component::swa) == live);
    CHECK(f.alloc.reserved_pages(Component::swa) == 0);
    CHECK(f.drain());
    CHECK(f.page_holds(Component::swa, target[0].value(), 7));
    CHECK(f.broken().empty());
}

TEST_CASE("a closed transfer gate keeps rows in place") {
    F f(small_config(arena_bytes));
    MoveGateHold closed = f.alloc.install_move_gate(MoveGateSlot::host_transfer);
    auto head = f.alloc_kv(3);
    auto tail = f.alloc_kv(3);
    f.alloc.free(head);
    const auto full_before = f.physical_pages(Component::full, tail);
    const auto swa_before = f.physical_pages(Component::swa, tail);
    const BackendCounters before = f.backend.counters();
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);
    CHECK(f.alloc.flush_opportunistic().pages_moved == 0);
    std::vector<VirtualPage> one(1);
    REQUIRE(f.alloc.alloc(one));
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.physical_pages(Component::full, tail) == full_before);
    CHECK(f.physical_pages(Component::swa, tail) == swa_before);
    closed.release();
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    CHECK(f.drain());
    CHECK(f.kv_holds(tail));
    CHECK(f.broken().empty());
}

TEST_CASE("an allocation that needs compaction stays behind the gate") {
    F f(small_config(16 * 128));  // 15 usable envelopes shared by FULL and SWA
    MoveGateHold closed = f.alloc.install_move_gate(MoveGateSlot::disagg);
    auto pages = f.alloc_kv(7);
    std::vector<VirtualPage> odd;
    for (std::size_t i = 0; i < pages.size(); i += 2) odd.push_back(pages[i]);
    f.alloc.free_swa(odd);  // fragmented SWA holes
    const std::int64_t available = f.alloc.available_size();
    CHECK(available == 1);
    CHECK(f.alloc.can_reserve({.full = available + 1, .swa = available + 1}) == false);
    const BackendCounters before = f.backend.counters();
    std::vector<VirtualPage> more(static_cast<std::size_t>(available + 1));
    const AllocResult r = f.alloc.alloc(more);
    CHECK_FALSE(r);
    CHECK(r.shortfall == Shortfall::moves_blocked);
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.alloc.hole_pages(Component::swa) == 4);
    CHECK(f.pages_hold(Component::full, pages));
    CHECK(f.broken().empty());
    closed.release();
    CHECK(f.alloc.can_reserve({.full = available + 1, .swa = available + 1}));
    REQUIRE(f.alloc.alloc(more));
    CHECK(f.drain());
    CHECK(f.pages_hold(Component::full, pages));
    for (std::size_t i = 1; i < pages.size(); i += 2) CHECK(f.page_holds(Component::swa, pages[i].value()));
    CHECK(f.broken().empty());
}

TEST_CASE("an eager free waits for every copy before it compacts") {
    Fixture<EagerSwaFullLayout> f(small_config(arena_bytes));
    Transfers t(f.backend, 16 * 128);
    auto head = f.alloc_kv(2);
    auto tail = f.alloc_kv(2, 4);
    HostBackend::Event written = t.write(f.alloc.region(), f.physical_pages(Component::full, tail), 128);
    f.alloc.set_transfer_done_event(write_key, written);
    const BackendCounters before = f.backend.counters();
    f.alloc.free(head);  // the tail's pages move down into the head's envelopes
    CHECK(f.backend.counters().stream_waits == before.stream_waits + 1);
    CHECK(f.backend.counters().copies_queued > before.copies_queued);
    CHECK(f.alloc.hole_pages(Component::full) == 0);
    CHECK_FALSE(f.drain());  // the wait comes first: nothing moves before the backup ran
    t.run();
    REQUIRE(f.drain());
    CHECK(f.kv_holds(tail, 4));
    CHECK(host_rows_hold(t.host, Component::full, tail, 4));  // the backup read the rows before they moved
    CHECK(f.broken().empty());
}
