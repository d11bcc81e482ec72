// SeparateHostPools: one pinned buffer per component with its own envelope; atomic batches; frees checked
// before anything changes; leases that translate, survive a move of the pool, and outlive it harmlessly; and
// a pool that waits for released leases' copies before it frees its buffers.

#include <optional>
#include <utility>
#include <vector>

#include <unikv/host/separate_host_pools.hpp>

#include "host_support.hpp"

using namespace host_test;

namespace {

template <class L>
using Pools = SeparateHostPools::impl<HostBackend, L>;

struct ManualBackend {
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
};

}  // namespace

TEST_CASE_TEMPLATE("separate host pools hold each component's rows in its own envelope on every shipped layout", L,
                   FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout, EagerSwaFullLayout, EagerMambaFullLayout) {
    ManualBackend m;
    const ArenaSpec spec = spec_for<L>();
    const ComponentMask comps = layout_components_v<L>;
    Pools<L> pool(m.backend, spec, {.pages = {{comps.has(Component::full) ? 6 : 0, comps.has(Component::swa) ? 5 : 0,
                                               comps.has(Component::mamba) ? 4 : 0}}},
                  m.stream);
    per_component<std::vector<HostPage>> held{};
    for (Component c : all_components) {
        if (!comps.has(c)) {
            CHECK(pool.capacity(c) == 0);
            CHECK(pool.page_bytes(c) == 0);
            continue;
        }
        CHECK(pool.page_bytes(c) == spec[c].page_bytes);
        CHECK(pool.capacity(c) == pool.available(c));
        held[c] = take(pool, c, static_cast<std::size_t>(pool.capacity(c)));
        CHECK(pool.available(c) == 0);
    }
    {
        HostLease<HostBackend> lease = pool.lease();
        for (Component c : all_components) {
            if (comps.has(c)) write_host(lease, spec, c, held[c]);
        }
    }
    // Free every other page of each component and take them back: they return with new markers, the rest keep
    // theirs, and no component's rows landed in another's buffer.
    for (Component c : all_components) {
        if (!comps.has(c)) continue;
        std::vector<HostPage> odd;
        for (std::size_t i = 1; i < held[c].size(); i += 2) odd.push_back(held[c][i]);
        pool.free(c, odd);
        CHECK(pool.available(c) == static_cast<std::int32_t>(odd.size()));
        const std::vector<HostPage> again = take(pool, c, odd.size());
        HostLease<HostBackend> lease = pool.lease();
        write_host(lease, spec, c, again, 1);
        CHECK(host_holds(lease, spec, c, again, 1));
        std::vector<HostPage> even;
        for (std::size_t i = 0; i < held[c].size(); i += 2) even.push_back(held[c][i]);
        CHECK(host_holds(lease, spec, c, even, 0));
        // Logical is physical here.
        std::vector<std::int32_t> phys(held[c].size());
        lease.physical(c, held[c], phys);
        for (std::size_t i = 0; i < phys.size(); ++i) CHECK(phys[i] == held[c][i].value());
        CHECK(lease.region(c).size == static_cast<std::size_t>(pool.capacity(c)) * spec[c].page_bytes);
    }
    CHECK(broken(pool).empty());
}

TEST_CASE("a host batch that does not fit allocates nothing and names the component and the pages short") {
    ManualBackend m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    Pools<SwaFullLayout> pool(m.backend, spec, {.pages = {{4, 3, 0}}}, m.stream);
    const std::vector<HostPage> first = take(pool, Component::swa, 1);
    std::vector<HostPage> full(3);
    std::vector<HostPage> swa(3);
    const HostRequest batch[] = {{.component = Component::full, .out = full}, {.component = Component::swa, .out = swa}};
    const HostAllocResult r = pool.alloc(batch);
    CHECK_FALSE(static_cast<bool>(r));
    CHECK(r.missing.component == Component::swa);
    CHECK(r.missing.count == 1);
    CHECK(r.shortfall == HostShortfall::capacity);
    CHECK(pool.used(Component::full) == 0);
    CHECK(pool.used(Component::swa) == 1);
    for (HostPage h : full) CHECK_FALSE(h.is_valid());
    CHECK(broken(pool).empty());
    // The same batch one SWA page smaller fits whole.
    const HostRequest fits[] = {{.component = Component::full, .out = full},
                                {.component = Component::swa, .out = std::span(swa).first(2)}};
    CHECK(static_cast<bool>(pool.alloc(fits)));
    CHECK(pool.available(Component::full) == 1);
    CHECK(pool.available(Component::swa) == 0);
    CHECK(broken(pool).empty());
}

TEST_CASE("a bad host free or translation throws and changes nothing") {
    ManualBackend m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    Pools<SwaFullLayout> pool(m.backend, spec, {.pages = {{4, 4, 0}}}, m.stream);
    const std::vector<HostPage> full = take(pool, Component::full, 3);
    const std::vector<HostPage> twice{full[0], full[1], full[0]};
    CHECK_THROWS_AS(pool.free(Component::full, twice), unikv::logic_error);
    const std::vector<HostPage> unallocated{full[2], HostPage{3}};
    CHECK_THROWS_AS(pool.free(Component::full, unallocated), unikv::logic_error);
    CHECK_THROWS_AS(pool.free(Component::swa, std::span(full).first(1)), unikv::logic_error);
    CHECK(pool.used(Component::full) == 3);
    CHECK(broken(pool).empty());
    HostLease<HostBackend> lease = pool.lease();
    std::vector<std::int32_t> out(2);
    CHECK_THROWS_AS(lease.physical(Component::full, unallocated, out), unikv::logic_error);
    CHECK_THROWS_AS(static_cast<void>(lease.region(Component::mamba)), unikv::logic_error);
    pool.free(Component::full, full);
    CHECK_THROWS_AS(lease.physical(Component::full, std::span(full).first(2), out), unikv::logic_error);
    CHECK(pool.used(Component::full) == 0);
    CHECK(broken(pool).empty());
}

TEST_CASE("a lease survives a move of its pool and outlives the pool harmlessly") {
    ManualBackend m;
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    std::optional<Pools<SwaFullLayout>> moved;
    HostLease<HostBackend> lease;
    std::vector<HostPage> full;
    {
        Pools<SwaFullLayout> pool(m.backend, spec, {.pages = {{4, 4, 0}}}, m.stream);
        full = take(pool, Component::full, 2);
        lease = pool.lease();
        write_host(lease, spec, Component::full, full);
        CHECK(pool.leased());
        moved.emplace(std::move(pool));
    }
    CHECK(moved->leased());
    CHECK(host_holds(lease, spec, Component::full, full));
    moved.reset();
    CHECK(lease.holding());
    std::vector<std::int32_t> out(2);
    CHECK_THROWS_AS(lease.physical(Component::full, full, out), unikv::logic_error);
    const HostBackend::Event done = m.backend.make_event();
    std::move(lease).release_after(done);
    CHECK_FALSE(lease.holding());
}

TEST_CASE("a host pool waits for the copies of released leases before it frees its buffers") {
    ManualBackend m;
    const ArenaSpec spec = spec_for<FullLayout>();
    HostBackend::Stream transfer = m.backend.make_stream();
    HostBackend::DeviceBuffer device = m.backend.allocate_device(4 * spec[Component::full].page_bytes);
    const auto syncs_before = m.backend.counters().host_synchronizations;
    {
        Pools<FullLayout> pool(m.backend, spec, {.pages = {{4, 0, 0}}}, m.stream);
        const std::vector<HostPage> pages = take(pool, Component::full, 2);
        HostLease<HostBackend> lease = pool.lease();
        std::vector<std::int32_t> phys(2);
        lease.physical(Component::full, pages, phys);
        const std::int32_t dev[] = {1, 2};
        m.backend.copy_pages_async(device.region(), dev, lease.region(Component::full), phys,
                                   lease.page_bytes(Component::full), transfer);
        const HostBackend::Event done = m.backend.make_event();
        done.ref().record(transfer);
        std::move(lease).release_after(done);
        CHECK(m.backend.queued(transfer) == 2);  // the copy and its record have not run
    }
    // Destroying the pool ran the copy (manual mode: a synchronize runs what it waits for) before the free.
    CHECK(m.backend.queued(transfer) == 0);
    CHECK(m.backend.counters().host_synchronizations == syncs_before + 1);
}
