// Forward hazards: compaction never moves a page a running forward writes, and never hands out a moved page a
// running forward may still read. The forward is a copy queued on its own stream of the manual backend, so a
// move that does not wait for it shows up as lost or wrong rows.

#include "alloc_support.hpp"

using namespace alloc_test;

namespace {

using F = Fixture<SwaFullLayout>;

// A forward pass on its own stream: it reads pages into a host buffer and writes new row versions into pages,
// through the physical ids translated when it was queued.
struct Forward {
    explicit Forward(HostBackend& b) : backend(b), stream(b.make_stream()), host(b.allocate_pinned(16 * 128)), done(b.make_event()) {}
    HostBackend& backend;
    HostBackend::Stream stream;
    HostBackend::PinnedBuffer host;
    HostBackend::Event done;

    void read(device_region_ref arena, PhysicalPage page, std::int32_t host_page) {
        const std::int32_t src = page.value();
        backend.copy_pages_async(arena, std::span(&src, 1), host.region(), std::span(&host_page, 1), 128, stream);
    }
    void write(device_region_ref arena, PhysicalPage page, std::int32_t host_page, const std::vector<std::uint32_t>& rows) {
        for (std::size_t r = 0; r < 4; ++r) {
            for (std::size_t w = 0; w < 8; ++w) {
                std::memcpy(host.data() + static_cast<std::size_t>(host_page) * 128 + r * 32 + w * 4, &rows[r], 4);
            }
        }
        const std::int32_t dst = page.value();
        backend.copy_pages_async(host.region(), std::span(&host_page, 1), arena, std::span(&dst, 1), 128, stream);
    }
    void finish() { done.ref().record(stream); }
    void run() {
        while (backend.run_next(stream)) {
        }
    }
};

// Two resident pages whose SWA envelopes lie below two more (the tail): a flush moves the tail down.
struct TailAboveHoles {
    F f{small_config(64 * 128)};
    std::vector<VirtualPage> head = f.alloc_kv(2);
    std::vector<VirtualPage> tail = f.alloc_kv(2);
    TailAboveHoles() { f.alloc.free_swa(head); }
};

std::vector<std::uint32_t> rows_of(Component c, VirtualPage v, std::uint32_t version) {
    std::vector<std::uint32_t> rows;
    for (std::int32_t r = 0; r < 4; ++r) rows.push_back(marker(c, v.value(), r, version));
    return rows;
}

}  // namespace

TEST_CASE("an opportunistic flush stops before a page the running forward writes; an urgent one waits for it") {
    F f(small_config(64 * 128));
    auto head = f.alloc_kv(2);
    auto tail = f.alloc_kv(2);
    f.alloc.free(head);
    Forward fwd(f.backend);
    const VirtualPage written = tail[1];
    fwd.write(f.alloc.region(), f.physical_pages(Component::full, std::span(&written, 1))[0], 0,
              rows_of(Component::full, written, 5));
    fwd.write(f.alloc.region(), f.physical_pages(Component::swa, std::span(&written, 1))[0], 1,
              rows_of(Component::swa, written, 5));
    fwd.finish();
    f.alloc.set_inflight_forward(fwd.done, std::span(&written, 1));
    const auto full_before = f.physical_pages(Component::full, std::span(&written, 1));
    const auto swa_before = f.physical_pages(Component::swa, std::span(&written, 1));

    const FlushResult lazy = f.alloc.flush_opportunistic();
    CHECK(lazy.stopped_by_forward);
    CHECK(f.physical_pages(Component::full, std::span(&written, 1)) == full_before);
    CHECK(f.physical_pages(Component::swa, std::span(&written, 1)) == swa_before);
    CHECK(f.broken().empty());

    const BackendCounters before = f.backend.counters();
    const FlushResult urgent = f.alloc.flush(FlushMode::urgent);
    CHECK(urgent.pages_moved > 0);
    CHECK_FALSE(urgent.stopped_by_forward);
    CHECK(f.backend.counters().stream_waits > before.stream_waits);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);
    CHECK_FALSE(f.drain());  // the moves wait for the forward
    fwd.run();
    REQUIRE(f.drain());
    CHECK(f.kv_holds(std::span(&written, 1), 5));  // the forward's writes moved with the page
    CHECK(f.kv_holds(std::span(tail).first(1)));
    CHECK(f.broken().empty());
}

TEST_CASE("a moved page the running forward may read is reused only after the forward ends") {
    TailAboveHoles s;
    F& f = s.f;
    const auto& tail = s.tail;
    Forward fwd(f.backend);
    const auto tail_swa = f.physical_pages(Component::swa, tail);
    fwd.read(f.alloc.region(), tail_swa[0], 0);
    fwd.read(f.alloc.region(), tail_swa[1], 1);
    fwd.finish();
    f.alloc.set_inflight_forward(fwd.done);

    const FlushResult moved = f.alloc.flush_opportunistic();
    CHECK(moved.pages_moved == 2);
    CHECK(f.alloc.pending_reuse_pages(Component::swa) == 2);
    CHECK(f.broken().empty());
    REQUIRE(f.drain());
    // New pages never land on the sources while the forward may still read them.
    auto fresh = f.alloc_kv(3, 2);
    for (PhysicalPage p : f.physical_pages(Component::swa, fresh)) {
        CHECK(p != tail_swa[0]);
        CHECK(p != tail_swa[1]);
    }
    fwd.run();
    CHECK(host_rows_hold(fwd.host, Component::swa, tail));  // the forward read the rows as they were
    CHECK(f.kv_holds(tail));
    CHECK(f.kv_holds(fresh, 2));
    // Once the forward's event fired, a flush releases the sources to the holes.
    (void)f.alloc.flush_opportunistic();
    CHECK(f.alloc.pending_reuse_pages(Component::swa) == 0);
    CHECK(f.broken().empty());
}

TEST_CASE("an urgent flush makes the stream wait an unfired pending-reuse reader and releases its pages") {
    TailAboveHoles s;
    F& f = s.f;
    const auto& tail = s.tail;
    Forward fwd(f.backend);
    fwd.read(f.alloc.region(), f.physical_pages(Component::swa, tail)[1], 0);
    fwd.finish();
    f.alloc.set_inflight_forward(fwd.done);
    (void)f.alloc.flush_opportunistic();
    REQUIRE(f.alloc.pending_reuse_pages(Component::swa) == 2);
    f.alloc.clear_inflight_forward();
    const BackendCounters before = f.backend.counters();
    (void)f.alloc.flush(FlushMode::urgent);
    CHECK(f.alloc.pending_reuse_pages(Component::swa) == 0);
    CHECK(f.backend.counters().stream_waits == before.stream_waits + 1);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);
    fwd.run();
    REQUIRE(f.drain());
    CHECK(f.kv_holds(tail));
    CHECK(f.broken().empty());
}
