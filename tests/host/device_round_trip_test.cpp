// A device <-> host round trip through a real UnifiedAllocator: arena pages with a marker per row are copied
// into host pages through a lease, the device pages are freed and others reused, the host side compacts (the
// envelope), and the host pages are copied back into fresh device pages, which must match byte for byte.

#include <cstring>
#include <type_traits>
#include <vector>

#include <unikv/host/page_envelope_host.hpp>
#include <unikv/host/separate_host_pools.hpp>

#include "allocator/alloc_support.hpp"

// A named namespace keeps the allocator tests' names (`marker`, `Fixture`) out of the host tests' scope when
// the folder builds as one unity unit.
namespace round_trip_test {

using namespace alloc_test;

namespace {

template <class P, class L>
struct Case {
    using policy = P;
    using layout = L;
};

template <class L>
using Fix = Fixture<L>;

// The envelope bytes of each listed physical page of `c`.
template <class L>
std::vector<std::byte> envelopes(const Fix<L>& f, Component c, std::span<const std::int32_t> physical) {
    const std::size_t pb = f.alloc.spec()[c].page_bytes;
    std::vector<std::byte> out(physical.size() * pb);
    for (std::size_t i = 0; i < physical.size(); ++i) {
        std::memcpy(out.data() + i * pb, f.alloc.region().data + static_cast<std::size_t>(physical[i]) * pb, pb);
    }
    return out;
}

template <class L>
std::vector<std::int32_t> device_pages(const Fix<L>& f, Component c, std::span<const VirtualPage> pages,
                                       std::span<const StateId> states) {
    std::vector<std::int32_t> out;
    if (c == Component::mamba) {
        if constexpr (Fix<L>::Alloc::has_mamba) {
            std::vector<PhysicalPage> p(states.size());
            f.alloc.translate_state(states, p);
            for (PhysicalPage x : p) out.push_back(x.value());
        }
        return out;
    }
    for (PhysicalPage x : f.physical_pages(c, pages)) out.push_back(x.value());
    return out;
}

}  // namespace

TEST_CASE_TEMPLATE("device pages copied to host pages through a lease and back into fresh pages are byte-exact", C,
                   Case<PageEnvelopeHost<>, SwaFullLayout>, Case<PageEnvelopeHost<>, MambaFullLayout>,
                   Case<SeparateHostPools, TriPoolLayout>) {
    using L = typename C::layout;
    using Host = typename C::policy::template impl<HostBackend, L>;
    constexpr bool envelope = !std::is_same_v<typename C::policy, SeparateHostPools>;
    constexpr ComponentMask comps = layout_components_v<L>;
    Fix<L> f(small_config(96 * 128));
    HostBackend::Stream host_stream = f.backend.make_stream();
    HostBackend::Stream transfer = f.backend.make_stream();
    // A state per page: the same page count for every pool.
    Host host(f.backend, f.alloc.spec(), {.total_bytes = 64 * 128, .tokens_per_state = page_size}, host_stream);

    std::vector<VirtualPage> pages = f.alloc_kv(3);
    std::vector<StateId> states;
    if constexpr (Fix<L>::Alloc::has_mamba) states = f.alloc_states(2);
    const auto count = [&](Component c) { return c == Component::mamba ? states.size() : pages.size(); };

    per_component<std::vector<std::byte>> saved{};
    per_component<std::vector<HostPage>> hosted{};
    std::vector<HostPage> filler(5);
    std::vector<HostRequest> batch;
    for (Component c : all_components) {
        if (!comps.has(c)) continue;
        saved[c] = envelopes(f, c, device_pages(f, c, pages, states));
        hosted[c].resize(count(c));
        batch.push_back({.component = c, .out = hosted[c]});
    }
    if constexpr (envelope) {  // host pages that go away after the backup, so the arena has holes to pack
        const HostRequest r{.component = Component::full, .out = filler};
        REQUIRE(static_cast<bool>(host.alloc(std::span(&r, 1))));
    }
    REQUIRE(static_cast<bool>(host.alloc(batch)));

    // Device -> host, through one lease released to the copies' event.
    const auto copy = [&](bool to_host) {
        HostLease<HostBackend> lease = host.lease();
        for (Component c : all_components) {
            if (!comps.has(c)) continue;
            std::vector<std::int32_t> h(hosted[c].size());
            lease.physical(c, hosted[c], h);
            const std::vector<std::int32_t> d = device_pages(f, c, pages, states);
            const std::size_t pb = lease.page_bytes(c);
            REQUIRE(pb == f.alloc.spec()[c].page_bytes);
            if (to_host) {
                f.backend.copy_pages_async(f.alloc.region(), d, lease.region(c), h, pb, transfer);
            } else {
                f.backend.copy_pages_async(lease.region(c), h, f.alloc.region(), d, pb, transfer);
            }
        }
        HostBackend::Event done = f.backend.make_event();
        done.ref().record(transfer);
        std::move(lease).release_after(done);
        return done;
    };
    const HostBackend::Event written = copy(true);
    f.backend.run_all();
    REQUIRE(written.ref().query());

    // The device rows go away, other data takes their pages, and the host arena packs.
    f.alloc.free(pages);
    if constexpr (Fix<L>::Alloc::has_mamba) f.alloc.free_state(states);
    REQUIRE(f.drain());
    const std::vector<VirtualPage> others = f.alloc_kv(3, 9);
    if constexpr (envelope) {
        std::vector<std::int32_t> before(hosted[Component::full].size());
        host.lease().physical(Component::full, hosted[Component::full], before);
        host.free(Component::full, filler);
        REQUIRE(host.compact());
        std::vector<std::int32_t> after(before.size());
        host.lease().physical(Component::full, hosted[Component::full], after);
        CHECK(after != before);  // the backed-up FULL pages really moved
    }

    // Host -> fresh device pages.
    std::vector<VirtualPage> fresh(3);
    REQUIRE(static_cast<bool>(f.alloc.alloc(fresh)));
    std::vector<StateId> fresh_states(states.size());
    if constexpr (Fix<L>::Alloc::has_mamba) REQUIRE(static_cast<bool>(f.alloc.alloc_state(fresh_states)));
    REQUIRE(f.drain());
    f.write_kv(fresh, 3);  // whatever the fresh pages held before, the load must replace it
    for (StateId s : fresh_states) f.write_page(Component::mamba, s.value(), 3);
    pages = fresh;
    states = fresh_states;
    const HostBackend::Event loaded = copy(false);
    f.backend.run_all();
    REQUIRE(loaded.ref().query());
    for (Component c : all_components) {
        if (comps.has(c)) CHECK(envelopes(f, c, device_pages(f, c, pages, states)) == saved[c]);
    }
    CHECK(f.kv_holds(others, 9));
    CHECK(host.verify().empty());
    CHECK(f.alloc.verify().empty());
}

}  // namespace round_trip_test
