// The transfer controller on a manual HostBackend: rows go to the host and come back byte-exact, copies read
// their rows when they run and the host-transfer gate keeps those rows in place until the ack, acks come back
// in completion order with their tags, the write-back drain blocks and acks everything, and a controller and
// an allocator moved with transfers in flight ack through the moved-to objects.

#include "transfer_support.hpp"

using namespace transfer_test;

namespace {

// The tri-pool: every component, a float SWA pool, reservations.
TransferRequest kv_request(std::span<const VirtualPage> pages, std::span<const HostPage> full_host,
                           std::span<const HostPage> swa_host) {
    return {.full = pages, .full_host = full_host, .swa = pages, .swa_host = swa_host};
}

}  // namespace

TEST_CASE("device rows go to the host and come back byte-exact into fresh rows and a reservation") {
    Rig<TriPoolLayout> f(layered_config(envelopes * 512, 4));
    auto pages = f.alloc_kv(3);
    auto states = f.alloc_states(2);
    const auto full_host = f.host_pages(Component::full, 3);
    const auto swa_host = f.host_pages(Component::swa, 3);
    const auto state_host = f.host_pages(Component::mamba, 2);

    TransferRequest write = kv_request(pages, full_host, swa_host);
    write.mamba = states;
    write.mamba_host = state_host;
    f.ctl.queue_write(f.alloc, write, 11);
    CHECK(f.ctl.has_inflight());
    CHECK(f.alloc.moves_blocked());
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    CHECK(f.ctl.writing_check().empty());  // nothing ran yet
    CHECK_FALSE(f.host_holds(Component::full, full_host, ids_of(pages)));
    REQUIRE(f.drain());  // the order event on the allocator's stream
    f.run_transfers();
    const auto acks = f.ctl.writing_check();
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].tag == 11);
    CHECK(acks[0].succeeded);
    CHECK(acks[0].direction == TransferDirection::write);
    CHECK(acks[0].components == ComponentMask::of(Component::full).with(Component::swa).with(Component::mamba));
    CHECK(std::ranges::equal(acks[0].host[Component::swa], swa_host));
    CHECK(f.host_holds(Component::full, full_host, ids_of(pages)));
    CHECK(f.host_holds(Component::swa, swa_host, ids_of(pages)));
    CHECK(f.host_holds(Component::mamba, state_host, ids_of(states)));
    CHECK_FALSE(f.ctl.has_inflight());
    CHECK_FALSE(f.alloc.moves_blocked());

    // Drop the device copy, then load into fresh FULL ids, an SWA reservation and fresh state slots.
    f.alloc.free(pages);
    f.alloc.free_state(states);
    std::vector<VirtualPage> fresh(3);
    REQUIRE(f.alloc.alloc_full(fresh));
    ReserveResult swa = f.alloc.alloc_physical(Component::swa, 3);
    REQUIRE(swa);
    f.alloc.bind_swa(fresh, swa.reservation);
    std::vector<StateId> fresh_states(2);
    REQUIRE(f.alloc.alloc_state(fresh_states));
    REQUIRE(f.drain());
    f.ctl.queue_load(f.alloc, {.full = fresh,
                               .full_host = full_host,
                               .swa_reserved = swa.reservation.pages(),
                               .swa_host = swa_host,
                               .mamba = fresh_states,
                               .mamba_host = state_host},
                     12);
    CHECK(f.alloc.pending_load_pages(Component::swa) == 3);
    CHECK(f.ctl.start_loading(f.alloc, f.host) == 1);
    CHECK(swa.reservation.submitted());  // the load registration submitted it
    CHECK(f.alloc.pending_load_pages(Component::swa) == 0);
    CHECK(f.alloc.moves_blocked());  // the gate, until the ack
    CHECK(f.ctl.loading_check().empty());
    REQUIRE(f.drain());
    f.run_transfers();
    const auto loads = f.ctl.loading_check();
    REQUIRE(loads.size() == 1);
    CHECK(loads[0].tag == 12);
    CHECK(loads[0].succeeded);
    CHECK(f.device_holds(Component::full, fresh, ids_of(pages)));
    CHECK(f.device_holds(Component::swa, fresh, ids_of(pages)));
    for (std::size_t i = 0; i < states.size(); ++i) {
        CHECK(f.read_physical_row(Component::mamba, f.physical_row(Component::mamba, fresh_states[i].value())) ==
              marker(Component::mamba, states[i].value(), 0));
    }
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK(f.broken().empty());
}

TEST_CASE("a queued write reads its rows when it runs, and the gate keeps them in place until the last ack") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    auto head = f.alloc_kv(2);
    auto first = f.alloc_kv(2);
    auto second = f.alloc_kv(2);
    const auto host_a = f.host_pages(Component::full, 2);
    const auto host_b = f.host_pages(Component::full, 2);
    f.ctl.queue_write(f.alloc, {.full = first, .full_host = host_a}, 1);
    f.ctl.queue_write(f.alloc, {.full = second, .full_host = host_b}, 2);
    f.alloc.free(head);  // holes below the sources: an urgent flush would move them down

    // Queued, not submitted: the gate holds; a flush moves nothing and a fresh allocation takes the holes.
    const BackendCounters before = f.backend.counters();
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);
    std::vector<VirtualPage> fresh(1);
    REQUIRE(f.alloc.alloc(fresh));
    CHECK(same_counters(before, f.backend.counters()));  // no move, no wait, no copy
    const auto sources = f.physical_pages(Component::full, first);
    const auto fresh_physical = f.physical_pages(Component::full, fresh);
    CHECK(std::ranges::find(sources, fresh_physical[0]) == sources.end());
    f.write_kv(fresh, 5);

    // Rows rewritten after queueing are what the copy takes: it reads its source when it runs.
    f.write_pages(Component::full, first, 3);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 2);
    REQUIRE(f.drain());
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved == 0);  // submitted, unacked: still gated

    // Run the first transfer only: one ack, the gate stays closed for the second.
    while (f.ctl.in_flight(TransferDirection::write) == 2 && f.backend.run_next(f.ctl.stream())) {
        if (f.ctl.writing_check().size() == 1) break;
    }
    CHECK(f.ctl.in_flight(TransferDirection::write) == 1);
    CHECK(f.alloc.moves_blocked());
    CHECK(f.host_holds(Component::full, host_a, ids_of(first), 3));
    f.run_transfers();
    const auto acks = f.ctl.writing_check();
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].tag == 2);
    CHECK_FALSE(f.alloc.moves_blocked());  // exactly at the last ack
    CHECK(f.host_holds(Component::full, host_b, ids_of(second)));

    // The flush after the ack waits on the registered write event before it moves anything.
    CHECK(f.alloc.registered_transfer_events() == 1);
    std::vector<VirtualPage> survivors = first;
    survivors.insert(survivors.end(), second.begin(), second.end());
    survivors.insert(survivors.end(), fresh.begin(), fresh.end());
    const auto before_flush = f.physical_pages(Component::full, survivors);
    const BackendCounters pre_flush = f.backend.counters();
    CHECK(f.alloc.flush(FlushMode::urgent).pages_moved > 0);
    CHECK(f.backend.counters().stream_waits == pre_flush.stream_waits + 1);
    CHECK(f.alloc.registered_transfer_events() == 0);

    // A write queued behind those moves reads the moved rows: its copies wait for the allocator's stream.
    CHECK(f.backend.queued(f.alloc.stream()) > 0);
    std::vector<VirtualPage> all = first;
    all.insert(all.end(), second.begin(), second.end());
    all.insert(all.end(), fresh.begin(), fresh.end());
    CHECK(f.physical_pages(Component::full, all) != before_flush);  // some of them moved
    const auto host_c = f.host_pages(Component::full, all.size());
    f.ctl.queue_write(f.alloc, {.full = all, .full_host = host_c}, 3);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    CHECK_FALSE(f.backend.run_next(f.ctl.stream()));  // blocked on the allocator's stream
    f.run_transfers();
    REQUIRE(f.drain());
    f.run_transfers();
    REQUIRE(f.ctl.writing_check().size() == 1);
    CHECK(f.host_holds(Component::full, std::span(host_c).first(2), ids_of(first), 3));
    CHECK(f.host_holds(Component::full, std::span(host_c).subspan(2, 2), ids_of(second)));
    CHECK(f.host_holds(Component::full, std::span(host_c).last(1), ids_of(fresh), 5));
    CHECK(f.pages_hold(Component::full, first, 3));
    CHECK(f.kv_holds(second));
    CHECK(f.kv_holds(fresh, 5));
    CHECK(f.broken().empty());
}

TEST_CASE("acks come back in completion order with their tags and never block") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    std::vector<std::vector<VirtualPage>> pages;
    std::vector<std::vector<HostPage>> host;
    for (std::uint64_t i = 0; i < 4; ++i) {
        pages.push_back(f.alloc_kv(1, static_cast<std::uint32_t>(i)));
        host.push_back(f.host_pages(Component::swa, 1));
        f.ctl.queue_write(f.alloc, {.swa = pages.back(), .swa_host = host.back()}, 100 + i);
        if (i == 1) CHECK(f.ctl.start_writing(f.alloc, f.host) == 2);  // two batches
    }
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 2);
    REQUIRE(f.drain());
    const std::uint64_t syncs = f.backend.counters().host_synchronizations;
    std::vector<std::uint64_t> tags;
    while (true) {
        for (const auto& ack : f.ctl.writing_check()) {
            const std::size_t i = ack.tag - 100;
            CHECK(f.host_holds(Component::swa, ack.host[Component::swa], ids_of(pages[i]), static_cast<std::uint32_t>(i)));
            tags.push_back(ack.tag);
        }
        if (!f.backend.run_next(f.ctl.stream())) break;
    }
    CHECK(tags == std::vector<std::uint64_t>{100, 101, 102, 103});
    CHECK(f.backend.counters().host_synchronizations == syncs);
    CHECK_FALSE(f.ctl.has_inflight());
}

TEST_CASE("the write-back drain blocks until every write ran and acks them all") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    auto a = f.alloc_kv(2);
    auto b = f.alloc_kv(1);
    const auto host_a = f.host_pages(Component::full, 2);
    const auto host_b = f.host_pages(Component::full, 1);
    f.ctl.queue_write(f.alloc, {.full = a, .full_host = host_a}, 1);
    CHECK_THROWS_AS((void)f.ctl.drain_writes(), logic_error);  // queued, not submitted
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    f.ctl.queue_write(f.alloc, {.full = b, .full_host = host_b}, 2);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);

    const std::uint64_t syncs = f.backend.counters().host_synchronizations;
    const auto acks = f.ctl.drain_writes();  // runs the allocator's order events too (the manual backend)
    CHECK(f.backend.counters().host_synchronizations == syncs + 1);
    REQUIRE(acks.size() == 2);
    CHECK(acks[0].tag == 1);
    CHECK(acks[1].tag == 2);
    CHECK(f.host_holds(Component::full, host_a, ids_of(a)));
    CHECK(f.host_holds(Component::full, host_b, ids_of(b)));
    CHECK_FALSE(f.ctl.has_inflight());
    CHECK_FALSE(f.alloc.moves_blocked());
    // Now the rows may go: the host has them.
    f.alloc.free(a);
    f.alloc.free(b);
    CHECK(f.broken().empty());
}

TEST_CASE("a controller and an allocator moved with transfers in flight ack through the moved-to objects") {
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    using Alloc = UnifiedAllocator<SwaFullLayout, HostBackend>;
    std::optional<Alloc> alloc;
    alloc.emplace(backend, layered_config(envelopes * 512, 2), stream);
    std::optional<Host<SwaFullLayout>> host;
    host.emplace(backend, alloc->spec(), Rig<SwaFullLayout>::host_config(alloc->spec()), stream);
    std::optional<Controller<SwaFullLayout>> ctl;
    ctl.emplace(backend);

    std::vector<VirtualPage> pages(2);
    REQUIRE(alloc->alloc(pages));
    const std::size_t entry = alloc->spec()[Component::full].entry_bytes;
    const std::int32_t page_size = alloc->spec()[Component::full].page_size;
    std::vector<PhysicalPage> physical(2);
    alloc->translate_full(pages, physical);
    for (std::size_t i = 0; i < 2; ++i) {
        for (std::int32_t r = 0; r < page_size; ++r) {
            const std::uint32_t m = marker(Component::full, pages[i].value(), r);
            std::byte* row = alloc->region().data + (static_cast<std::size_t>(physical[i].value() * page_size + r)) * entry;
            test_rows::fill_row(row, entry, m);
        }
    }
    std::vector<HostPage> hp(2);
    const HostRequest request{.component = Component::full, .out = hp};
    REQUIRE(host->alloc(std::span(&request, 1)));
    ctl->queue_write(*alloc, {.full = pages, .full_host = hp}, 7);
    CHECK(ctl->start_writing(*alloc, *host) == 1);

    Alloc moved_alloc(std::move(*alloc));
    alloc.reset();
    Host<SwaFullLayout> moved_host(std::move(*host));
    host.reset();
    Controller<SwaFullLayout> moved(std::move(*ctl));
    ctl.reset();
    CHECK(moved.has_inflight());
    CHECK(moved_alloc.moves_blocked());
    CHECK(moved.writing_check().empty());
    backend.run_all();
    const auto acks = moved.writing_check();
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].tag == 7);
    CHECK_FALSE(moved_alloc.moves_blocked());
    auto lease = moved_host.lease();
    std::vector<std::int32_t> hphys(2);
    lease.physical(Component::full, hp, hphys);
    for (std::size_t i = 0; i < 2; ++i) {
        for (std::int32_t r = 0; r < page_size; ++r) {
            const std::byte* row = lease.region(Component::full).data +
                                   static_cast<std::size_t>(hphys[i]) * moved_host.page_bytes(Component::full) +
                                   static_cast<std::size_t>(r) * entry;
            CHECK(uniform_word(row, entry) == marker(Component::full, pages[i].value(), r));
        }
    }
    CHECK(moved_alloc.verify().empty());
}

TEST_CASE("a transfer naming an unmapped row is refused with nothing queued and the gate open") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    auto pages = f.alloc_kv(2);
    f.alloc.free_swa(std::span(pages).first(1));  // a tombstone
    const auto hp = f.host_pages(Component::swa, 2);
    CHECK_THROWS_WITH_AS(f.ctl.queue_write(f.alloc, {.swa = pages, .swa_host = hp}, 1),
                         doctest::Contains("tombstone"), logic_error);
    CHECK_THROWS_AS(f.ctl.queue_write(f.alloc, {.full = pages, .full_host = std::span(hp).first(1)}, 1), logic_error);
    CHECK_THROWS_AS(f.ctl.queue_write(f.alloc, {.mamba = {}, .mamba_host = std::span(hp).first(1)}, 1), logic_error);
    CHECK(f.ctl.queued(TransferDirection::write) == 0);
    CHECK_FALSE(f.ctl.has_inflight());
    CHECK_FALSE(f.alloc.moves_blocked());
    // Host pages of another component: the start throws, drops the queue unsubmitted and reopens the gate.
    f.ctl.queue_write(f.alloc, {.full = pages, .full_host = hp}, 2);
    const BackendCounters before = f.backend.counters();
    CHECK_THROWS_AS(f.ctl.start_writing(f.alloc, f.host), logic_error);
    CHECK(same_counters(before, f.backend.counters()));
    CHECK(f.ctl.queued(TransferDirection::write) == 0);
    CHECK_FALSE(f.alloc.moves_blocked());
    // A later good transfer reuses the records the refused ones took.
    const auto full_hp = f.host_pages(Component::full, 2);
    f.ctl.queue_write(f.alloc, {.full = pages, .full_host = full_hp}, 3);
    CHECK(f.ctl.start_writing(f.alloc, f.host) == 1);
    const auto acks = f.ctl.drain_writes();
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].tag == 3);
    CHECK(f.host_holds(Component::full, full_hp, ids_of(pages)));

    // Two loads into one device page, and a write naming one host page twice: refused before any copy.
    f.ctl.queue_load(f.alloc, {.full = std::span(pages).first(1), .full_host = std::span(full_hp).first(1)}, 4);
    f.ctl.queue_load(f.alloc, {.full = std::span(pages).first(1), .full_host = std::span(full_hp).last(1)}, 5);
    const std::vector<HostPage> twice{full_hp[0], full_hp[0]};
    f.ctl.queue_write(f.alloc, {.full = pages, .full_host = twice}, 6);
    const BackendCounters pre = f.backend.counters();
    CHECK_THROWS_WITH_AS(f.ctl.start_loading(f.alloc, f.host), doctest::Contains("device page twice"), logic_error);
    CHECK_THROWS_WITH_AS(f.ctl.start_writing(f.alloc, f.host), doctest::Contains("host page twice"), logic_error);
    CHECK(same_counters(pre, f.backend.counters()));
    CHECK_FALSE(f.ctl.has_inflight());
    CHECK_FALSE(f.alloc.moves_blocked());
}

TEST_CASE("a write lane that never empties keeps acking in order") {
    Rig<SwaFullLayout> f(layered_config(envelopes * 512, 2));
    auto pages = f.alloc_kv(1);
    const auto hp = f.host_pages(Component::full, 1);
    std::uint64_t next_ack = 0;
    for (std::uint64_t i = 0; i < 300; ++i) {
        f.ctl.queue_write(f.alloc, {.full = pages, .full_host = hp}, i);
        REQUIRE(f.ctl.start_writing(f.alloc, f.host) == 1);
        // Run until only the newest write is in flight: there is always one.
        while (f.ctl.in_flight(TransferDirection::write) > 1) {
            while (f.backend.run_next(f.stream)) {
            }
            REQUIRE(f.backend.run_next(f.ctl.stream()));
            for (const auto& ack : f.ctl.writing_check()) CHECK(ack.tag == next_ack++);
        }
        CHECK(f.ctl.has_inflight());
    }
    CHECK(next_ack == 299);
    CHECK(f.ctl.drain_writes().size() == 1);
    CHECK(f.host_holds(Component::full, hp, ids_of(pages)));
    CHECK_FALSE(f.alloc.moves_blocked());
}

TEST_CASE("on an asynchronous backend a drained write and a synchronized load come back byte-exact") {
    HostBackend backend;  // worker threads run the copies
    HostBackend::Stream stream = backend.make_stream();
    UnifiedAllocator<SwaFullLayout, HostBackend> alloc(backend, layered_config(envelopes * 512, 2), stream);
    Host<SwaFullLayout> host(backend, alloc.spec(), Rig<SwaFullLayout>::host_config(alloc.spec()), stream);
    Controller<SwaFullLayout> ctl(backend);
    std::vector<VirtualPage> pages(3);
    REQUIRE(alloc.alloc(pages));
    stream.ref().synchronize();
    const std::size_t page_bytes = alloc.spec()[Component::full].page_bytes;
    std::vector<PhysicalPage> physical(3);
    alloc.translate_full(pages, physical);
    for (std::size_t i = 0; i < 3; ++i) {
        std::memset(alloc.region().data + static_cast<std::size_t>(physical[i].value()) * page_bytes,
                    static_cast<int>(0x10 + i), page_bytes);
    }
    std::vector<HostPage> hp(3);
    const HostRequest request{.component = Component::full, .out = hp};
    REQUIRE(host.alloc(std::span(&request, 1)));
    ctl.queue_write(alloc, {.full = pages, .full_host = hp}, 1);
    CHECK(ctl.start_writing(alloc, host) == 1);
    const auto written = ctl.drain_writes();
    REQUIRE(written.size() == 1);
    CHECK(written[0].succeeded);

    alloc.free(pages);
    std::vector<VirtualPage> fresh(3);
    REQUIRE(alloc.alloc(fresh));
    stream.ref().synchronize();
    alloc.translate_full(fresh, physical);
    for (PhysicalPage p : physical) {
        std::memset(alloc.region().data + static_cast<std::size_t>(p.value()) * page_bytes, 0, page_bytes);
    }
    ctl.queue_load(alloc, {.full = fresh, .full_host = hp}, 2);
    CHECK(ctl.start_loading(alloc, host) == 1);
    ctl.stream().synchronize();
    const auto loaded = ctl.loading_check();
    REQUIRE(loaded.size() == 1);
    CHECK(loaded[0].tag == 2);
    for (std::size_t i = 0; i < 3; ++i) {
        const std::byte* p = alloc.region().data + static_cast<std::size_t>(physical[i].value()) * page_bytes;
        CHECK(std::all_of(p, p + page_bytes, [i](std::byte b) { return b == static_cast<std::byte>(0x10 + i); }));
    }
    CHECK_FALSE(alloc.moves_blocked());
}
