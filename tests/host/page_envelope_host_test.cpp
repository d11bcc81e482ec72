// PageEnvelopeHost: one pinned arena, FULL growing down from its end and the other side up from byte 0, each
// in its own envelope; logical host pages stay put while physical pages are private: holes first, then the
// watermark, which retreats when its edge page is freed; an all-or-nothing batch; and a compaction that keeps
// every logical page's bytes, is refused while a lease is held, and moves nothing before a released lease's
// copy has run.

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include <unikv/host/page_envelope_host.hpp>

#include "host_support.hpp"

using namespace host_test;

namespace {

template <class L>
using Envelope = PageEnvelopeHost<>::impl<HostBackend, L>;

struct Manual {
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    HostBackend::Stream transfer = backend.make_stream();
};

std::vector<std::int32_t> physical(auto& pool, Component c, std::span<const HostPage> pages) {
    std::vector<std::int32_t> out(pages.size());
    pool.lease().physical(c, pages, out);
    return out;
}

}  // namespace

TEST_CASE_TEMPLATE("the envelope host holds both sides' rows in one arena on every layout it accepts", L, FullLayout,
                   SwaFullLayout, MambaFullLayout, EagerSwaFullLayout, EagerMambaFullLayout) {
    Manual m;
    const ArenaSpec spec = spec_for<L>();
    Envelope<L> pool(m.backend, spec, {.total_bytes = 4096}, m.stream);
    const ComponentMask comps = layout_components_v<L>;
    // Fill the arena from both ends, alternating, until neither side gets another page.
    per_component<std::vector<HostPage>> held{};
    for (bool progressed = true; progressed;) {
        progressed = false;
        for (Component c : all_components) {
            if (!comps.has(c) || pool.available(c) == 0) continue;
            held[c].push_back(take(pool, c, 1)[0]);
            progressed = true;
        }
    }
    std::size_t bytes = 0;
    for (Component c : all_components) {
        CHECK(pool.page_bytes(c) == (comps.has(c) ? spec[c].page_bytes : 0));
        bytes += held[c].size() * pool.page_bytes(c);
    }
    CHECK(bytes <= pool.arena_bytes());
    CHECK(bytes + spec[Component::full].page_bytes > pool.arena_bytes());  // less than one envelope is left
    {
        HostLease<HostBackend> lease = pool.lease();
        for (Component c : all_components) {
            if (comps.has(c)) write_host(lease, spec, c, held[c]);
        }
        // No two sides' rows overlap: every marker reads back after all were written.
        for (Component c : all_components) {
            if (comps.has(c)) CHECK(host_holds(lease, spec, c, held[c]));
        }
    }
    CHECK(broken(pool).empty());
    for (Component c : all_components) {
        if (!comps.has(c)) continue;
        pool.free(c, held[c]);
        CHECK(pool.used(c) == 0);
        CHECK(pool.holes(c) == 0);  // every page freed: the watermark retreated to the end
    }
    // The split follows the workload: with the other side empty, either side may take the whole arena.
    for (Component c : all_components) {
        if (!comps.has(c)) continue;
        CHECK(pool.capacity(c) == static_cast<std::int32_t>(pool.arena_bytes() / spec[c].page_bytes));
        const std::vector<HostPage> all = take(pool, c, static_cast<std::size_t>(pool.capacity(c)));
        for (Component o : all_components) {
            if (o != c) CHECK(pool.available(o) == 0);
        }
        pool.free(c, all);
    }
    CHECK(broken(pool).empty());
}

TEST_CASE("envelope pages come from the arena's ends, holes first, and a freed edge page retreats the watermark") {
    Manual m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();  // FULL pages 128 bytes, SWA 256
    Envelope<SwaFullLayout> pool(m.backend, spec, {.total_bytes = 2048}, m.stream);
    const std::vector<HostPage> full = take(pool, Component::full, 3);
    const std::vector<HostPage> swa = take(pool, Component::swa, 2);
    // FULL pages of 128 bytes count down from the last (2048 / 128 - 1 = 15); SWA counts up from 0.
    CHECK(physical(pool, Component::full, full) == std::vector<std::int32_t>{15, 14, 13});
    CHECK(physical(pool, Component::swa, swa) == std::vector<std::int32_t>{0, 1});
    // Room: SWA ends at byte 512, FULL starts at 13 * 128 = 1664: 1152 bytes, 4 SWA or 9 FULL pages.
    CHECK(pool.capacity(Component::swa) == 2 + 4);
    CHECK(pool.capacity(Component::full) == 3 + 9);

    pool.free(Component::full, std::span(full).first(1));  // page 15: not the edge, a hole
    CHECK(pool.holes(Component::full) == 1);
    const std::vector<HostPage> again = take(pool, Component::full, 1);
    CHECK(physical(pool, Component::full, again) == std::vector<std::int32_t>{15});  // the hole first
    CHECK(pool.holes(Component::full) == 0);

    // Free 14 (a hole), then 13 (the edge): the watermark retreats over both, to 15.
    pool.free(Component::full, std::span(full).subspan(1, 1));
    pool.free(Component::full, std::span(full).subspan(2, 1));
    CHECK(pool.holes(Component::full) == 0);
    const std::vector<HostPage> next = take(pool, Component::full, 1);
    CHECK(physical(pool, Component::full, next) == std::vector<std::int32_t>{14});
    CHECK(broken(pool).empty());
}

TEST_CASE("an envelope batch that does not fit even packed changes nothing and names the side short") {
    Manual m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    Envelope<SwaFullLayout> pool(m.backend, spec, {.total_bytes = 2048}, m.stream);
    const std::vector<HostPage> full = take(pool, Component::full, 4);  // bytes [1536, 2048)
    const std::vector<HostPage> swa = take(pool, Component::swa, 2);    // bytes [0, 512)
    pool.free(Component::full, std::span(full).first(2));                // two FULL holes
    const std::vector<std::int32_t> before = physical(pool, Component::full, std::span(full).last(2));

    std::vector<HostPage> out_swa(5);
    std::vector<HostPage> out_full(2);
    const HostRequest batch[] = {{.component = Component::full, .out = out_full},
                                 {.component = Component::swa, .out = out_swa}};
    // Packed, FULL (placed first) takes 2 live + 2 asked = [1536, 2048); SWA 2 live + 5 asked = 1792 bytes,
    // one 256-byte page more than the 1536 below FULL.
    const HostAllocResult r = pool.alloc(batch);
    CHECK_FALSE(static_cast<bool>(r));
    CHECK(r.shortfall == HostShortfall::capacity);
    CHECK(r.missing.component == Component::swa);
    CHECK(r.missing.count == 1);
    CHECK(pool.used(Component::full) == 2);
    CHECK(pool.used(Component::swa) == 2);
    CHECK(pool.holes(Component::full) == 2);
    CHECK(physical(pool, Component::full, std::span(full).last(2)) == before);
    for (HostPage h : out_swa) CHECK_FALSE(h.is_valid());
    CHECK(broken(pool).empty());

    // A side that is not in the arena is short by its whole request.
    std::vector<HostPage> mamba(2);
    const HostRequest no_side{.component = Component::mamba, .out = mamba};
    const HostAllocResult m2 = pool.alloc(std::span(&no_side, 1));
    CHECK(m2.missing.component == Component::mamba);
    CHECK(m2.missing.count == 2);
}

TEST_CASE("a batch that fits only packed compacts the envelope first and every logical page keeps its bytes") {
    Manual m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    Envelope<SwaFullLayout> pool(m.backend, spec, {.total_bytes = 2048}, m.stream);
    const std::vector<HostPage> full = take(pool, Component::full, 8);  // [1024, 2048)
    const std::vector<HostPage> swa = take(pool, Component::swa, 4);    // [0, 1024): the arena is full
    {
        HostLease<HostBackend> lease = pool.lease();
        write_host(lease, spec, Component::full, full);
        write_host(lease, spec, Component::swa, swa);
    }
    // Free every other FULL page and the two low SWA pages: holes on both sides, no gap.
    std::vector<HostPage> full_kept;
    std::vector<HostPage> full_freed;
    for (std::size_t i = 0; i < full.size(); ++i) (i % 2 == 0 ? full_freed : full_kept).push_back(full[i]);
    pool.free(Component::full, full_freed);
    pool.free(Component::swa, std::span(swa).first(2));
    CHECK(pool.holes(Component::full) == 4);
    CHECK(pool.holes(Component::swa) == 2);
    const auto before = physical(pool, Component::full, full_kept);

    // Four SWA pages fit only packed: FULL into [1536, 2048), SWA's 2 live + 4 new into [0, 1536).
    std::vector<HostPage> new_swa(4);
    const HostRequest r{.component = Component::swa, .out = new_swa};
    const auto copies_before = m.backend.counters().copies_queued;
    REQUIRE(static_cast<bool>(pool.alloc(std::span(&r, 1))));
    CHECK(m.backend.counters().copies_queued == copies_before + 2);  // one move per side
    CHECK(m.backend.queued(m.stream) == 0);                          // synchronized
    CHECK(pool.holes(Component::full) == 0);
    CHECK(pool.holes(Component::swa) == 0);
    CHECK(physical(pool, Component::full, full_kept) != before);
    HostLease<HostBackend> lease = pool.lease();
    CHECK(host_holds(lease, spec, Component::full, full_kept));
    CHECK(host_holds(lease, spec, Component::swa, std::span(swa).last(2)));
    write_host(lease, spec, Component::swa, new_swa, 3);
    CHECK(host_holds(lease, spec, Component::swa, new_swa, 3));
    CHECK(host_holds(lease, spec, Component::full, full_kept));
    CHECK(broken(pool).empty());
}

TEST_CASE("a held lease refuses the compaction: the batch fails as leased and nothing moves") {
    Manual m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    Envelope<SwaFullLayout> pool(m.backend, spec, {.total_bytes = 2048}, m.stream);
    const std::vector<HostPage> full = take(pool, Component::full, 8);
    const std::vector<HostPage> swa = take(pool, Component::swa, 4);
    pool.free(Component::full, std::vector<HostPage>{full[1], full[3], full[5]});  // 384 bytes of FULL holes
    std::vector<HostPage> survivors{full[0], full[2], full[4], full[6], full[7]};
    HostLease<HostBackend> lease = pool.lease();
    write_host(lease, spec, Component::full, survivors);
    const auto before = physical(pool, Component::full, survivors);

    std::vector<HostPage> one_swa(1);
    const HostRequest r{.component = Component::swa, .out = one_swa};
    const HostAllocResult refused = pool.alloc(std::span(&r, 1));
    CHECK(refused.shortfall == HostShortfall::leased);
    CHECK(refused.missing.component == Component::swa);
    CHECK(refused.missing.count == 1);
    CHECK_FALSE(pool.compact());
    CHECK(physical(pool, Component::full, survivors) == before);
    CHECK(pool.holes(Component::full) == 3);
    CHECK(host_holds(lease, spec, Component::full, survivors));
    CHECK(broken(pool).empty());

    lease = HostLease<HostBackend>{};  // dropped unused: released at once
    REQUIRE(static_cast<bool>(pool.alloc(std::span(&r, 1))));
    HostLease<HostBackend> after = pool.lease();
    CHECK(host_holds(after, spec, Component::full, survivors));
    CHECK(broken(pool).empty());
}

TEST_CASE("a compaction moves no byte before the copies of released leases have run") {
    Manual m;
    const ArenaSpec spec = spec_for<FullLayout>();  // FULL alone, 128-byte pages
    const std::size_t pb = spec[Component::full].page_bytes;
    Envelope<FullLayout> pool(m.backend, spec, {.pages = {{8, 0, 0}}}, m.stream);
    HostBackend::DeviceBuffer device = m.backend.allocate_device(4 * pb);
    const std::vector<HostPage> pages = take(pool, Component::full, 8);  // physical 7..0
    {
        HostLease<HostBackend> lease = pool.lease();
        write_host(lease, spec, Component::full, pages);
    }
    // Device page 1 holds version-5 markers of host page 7 (the lowest, which a compaction will move).
    const std::size_t entry = spec[Component::full].entry_bytes;
    for (std::int32_t r = 0; r < page_size; ++r) {
        const std::uint32_t v = marker(Component::full, pages[7].value(), r, 5);
        for (std::size_t w = 0; w < entry / 4; ++w) std::memcpy(device.data() + pb + static_cast<std::size_t>(r) * entry + 4 * w, &v, 4);
    }
    pool.free(Component::full, std::vector<HostPage>{pages[1], pages[3]});  // holes at physical 6 and 4

    // Two copies use a lease and are released to their event, neither has run: a D2H that rewrites host page
    // 7 (version 5) and an H2D that reads host page 6 into device page 2.
    HostLease<HostBackend> lease = pool.lease();
    std::int32_t p7 = -1;
    std::int32_t p6 = -1;
    lease.physical(Component::full, std::span(&pages[7], 1), std::span(&p7, 1));
    lease.physical(Component::full, std::span(&pages[6], 1), std::span(&p6, 1));
    const std::int32_t dev1 = 1;
    const std::int32_t dev2 = 2;
    m.backend.copy_pages_async(device.region(), std::span(&dev1, 1), lease.region(Component::full), std::span(&p7, 1), pb,
                               m.transfer);
    m.backend.copy_pages_async(lease.region(Component::full), std::span(&p6, 1), device.region(), std::span(&dev2, 1), pb,
                               m.transfer);
    const HostBackend::Event done = m.backend.make_event();
    done.ref().record(m.transfer);
    std::move(lease).release_after(done);
    CHECK(pool.pending_lease_events() == 1);
    CHECK(m.backend.queued(m.transfer) == 3);

    // Both moved pages are the lease's: packing 6 live pages into [2, 8) moves physical 1 and 0 (host pages 6
    // and 7) into the holes. Had the moves run first, page 7 would keep version 0 and device page 2 would read
    // whatever the move left at physical 1.
    REQUIRE(pool.compact());
    CHECK(m.backend.queued(m.transfer) == 0);
    CHECK(pool.pending_lease_events() == 0);
    CHECK(pool.holes(Component::full) == 0);
    HostLease<HostBackend> check = pool.lease();
    CHECK(host_holds(check, spec, Component::full, std::span(&pages[7], 1), 5));
    CHECK(host_holds(check, spec, Component::full, std::span(&pages[6], 1), 0));
    for (std::int32_t r = 0; r < page_size; ++r) {
        const std::byte* row = device.data() + 2 * pb + static_cast<std::size_t>(r) * entry;
        CHECK(uniform_word(row, entry) == marker(Component::full, pages[6].value(), r, 0));
    }
    const std::vector<HostPage> rest{pages[0], pages[2], pages[4], pages[5]};
    CHECK(host_holds(check, spec, Component::full, rest));
    CHECK(broken(pool).empty());
}

TEST_CASE("a moved envelope host keeps its leases, and its destruction waits for released leases' copies") {
    Manual m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    std::optional<Envelope<SwaFullLayout>> moved;
    HostLease<HostBackend> lease;
    std::vector<HostPage> swa;
    {
        Envelope<SwaFullLayout> pool(m.backend, spec, {.total_bytes = 2048}, m.stream);
        swa = take(pool, Component::swa, 2);
        lease = pool.lease();
        write_host(lease, spec, Component::swa, swa);
        moved.emplace(std::move(pool));
    }
    CHECK(moved->leased());
    CHECK(host_holds(lease, spec, Component::swa, swa));
    std::vector<HostPage> full(1);
    const HostRequest r{.component = Component::full, .out = full};
    REQUIRE(static_cast<bool>(moved->alloc(std::span(&r, 1))));
    HostBackend::DeviceBuffer device = m.backend.allocate_device(4 * spec[Component::swa].page_bytes);
    std::vector<std::int32_t> phys(2);
    lease.physical(Component::swa, swa, phys);
    const std::int32_t dev[] = {0, 1};
    m.backend.copy_pages_async(device.region(), dev, lease.region(Component::swa), phys, lease.page_bytes(Component::swa),
                               m.transfer);
    const HostBackend::Event done = m.backend.make_event();
    done.ref().record(m.transfer);
    std::move(lease).release_after(done);
    moved.reset();
    CHECK(m.backend.queued(m.transfer) == 0);
}
