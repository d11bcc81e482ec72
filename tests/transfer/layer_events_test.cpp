// Per-layer load events (reference §4.3, §9.3 test 36): a load is submitted layer by layer with one event per
// layer, an allocation after it adds no wait, and reading layers 0..L-1 adds exactly L stream waits, each
// releasing compute work only once its own layer (and no later one) has landed.

#include "transfer_support.hpp"

using namespace transfer_test;

namespace {

constexpr std::int32_t layers = 4;

struct LoadedRig : Rig<SwaFullLayout> {
    std::vector<VirtualPage> original;
    std::vector<VirtualPage> fresh;
    std::vector<HostPage> full_host, swa_host;

    explicit LoadedRig(TransferOptions options) : Rig<SwaFullLayout>(layered_config(envelopes * 512, layers), options) {
        original = alloc_kv(2);
        full_host = host_pages(Component::full, 2);
        swa_host = host_pages(Component::swa, 2);
        ctl.queue_write(alloc, {.full = original, .full_host = full_host, .swa = original, .swa_host = swa_host}, 1);
        REQUIRE(ctl.start_writing(alloc, host) == 1);
        REQUIRE(ctl.drain_writes().size() == 1);
        alloc.free(original);
        fresh.resize(2);
        REQUIRE(alloc.alloc_full(fresh));
        ReserveResult swa = alloc.alloc_physical(Component::swa, 2);
        REQUIRE(swa);
        alloc.bind_swa(fresh, swa.reservation);
        REQUIRE(drain());
        write_kv(fresh, 9);  // the fresh rows may be the freed ones: overwrite what they held
        ctl.queue_load(alloc, {.full = fresh, .full_host = full_host, .swa = fresh, .swa_host = swa_host}, 2);
        REQUIRE(ctl.start_loading(alloc, host) == 1);
        REQUIRE(swa.reservation.submitted());
        REQUIRE(drain());
    }

    /// True when layer `layer` of every loaded row (FULL and SWA) holds the original marker.
    bool layer_loaded(std::int32_t layer) const {
        for (std::size_t i = 0; i < fresh.size(); ++i) {
            for (std::int32_t r = 0; r < page_size(); ++r) {
                const std::int32_t t = fresh[i].value() * page_size() + r;
                for (Component c : {Component::full, Component::swa}) {
                    if (device_layer_word(c, physical_row(c, t), layer) != marker(c, original[i].value(), r)) return false;
                }
            }
        }
        return true;
    }
};

}  // namespace

TEST_CASE("each layer read waits on its own load event, in order, and an allocation adds no wait") {
    LoadedRig f({.load_events = LoadEvents::per_layer});
    REQUIRE(f.ctl.layers() == layers);
    CHECK_FALSE(f.layer_loaded(0));

    BackendCounters before = f.backend.counters();
    std::vector<VirtualPage> other(1);
    REQUIRE(f.alloc.alloc(other));
    CHECK(f.backend.counters().stream_waits == before.stream_waits);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);
    REQUIRE(f.drain());
    f.write_kv(other, 4);

    // The compute stream: before reading layer l, wait its event, then "compute" (a fill of scratch page l).
    HostBackend::Stream compute = f.backend.make_stream();
    HostBackend::PinnedBuffer scratch = f.backend.allocate_pinned(layers * 64);
    before = f.backend.counters();
    for (std::int32_t l = 0; l < layers; ++l) {
        f.ctl.wait_layer(compute, l);
        const std::int32_t page = l;
        f.backend.fill_pages_async(scratch.region(), std::span(&page, 1), 64, std::byte{1}, compute);
    }
    CHECK(f.backend.counters().stream_waits == before.stream_waits + layers);
    CHECK(f.backend.counters().host_synchronizations == before.host_synchronizations);

    // Step the transfer stream one operation at a time; compute runs as far as it may after each step.
    const auto computed = [&] {
        std::int32_t n = 0;
        while (n < layers && scratch.data()[static_cast<std::size_t>(n) * 64] == std::byte{1}) ++n;
        return n;
    };
    std::vector<std::int32_t> seen{0};
    bool stepped = true;
    while (stepped) {
        stepped = f.backend.run_next(f.ctl.stream());
        while (f.backend.run_next(compute)) {
        }
        const std::int32_t done = computed();
        for (std::int32_t l = 0; l < done; ++l) CHECK(f.layer_loaded(l));  // compute never ran ahead of its layer
        if (done != seen.back()) seen.push_back(done);
    }
    // Layer by layer: compute on layer l was released while later layers were still loading.
    CHECK(seen == std::vector<std::int32_t>{0, 1, 2, 3, 4});
    const auto acks = f.ctl.loading_check();
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].tag == 2);
    CHECK(f.kv_holds(other, 4));  // the allocation made during the load took other rows
    CHECK(f.device_holds(Component::full, f.fresh, ids_of(f.original)));
    CHECK(f.device_holds(Component::swa, f.fresh, ids_of(f.original)));
    CHECK_FALSE(f.alloc.moves_blocked());
    CHECK_THROWS_AS(f.ctl.wait_layer(compute, layers), logic_error);
}

TEST_CASE("a whole-envelope load releases every layer read at once, when the whole batch landed") {
    LoadedRig f({.load_events = LoadEvents::whole});
    HostBackend::Stream compute = f.backend.make_stream();
    HostBackend::PinnedBuffer scratch = f.backend.allocate_pinned(64);
    const BackendCounters before = f.backend.counters();
    for (std::int32_t l = 0; l < layers; ++l) f.ctl.wait_layer(compute, l);
    const std::int32_t page = 0;
    f.backend.fill_pages_async(scratch.region(), std::span(&page, 1), 64, std::byte{1}, compute);
    CHECK(f.backend.counters().stream_waits == before.stream_waits + layers);
    while (f.backend.run_next(f.ctl.stream())) {
        while (f.backend.run_next(compute)) {
        }
        if (scratch.data()[0] == std::byte{1}) {
            for (std::int32_t l = 0; l < layers; ++l) CHECK(f.layer_loaded(l));
        }
    }
    while (f.backend.run_next(compute)) {
    }
    CHECK(scratch.data()[0] == std::byte{1});
    CHECK(f.ctl.loading_check().size() == 1);
}
