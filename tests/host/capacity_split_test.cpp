// Host capacity as bytes: split over the layout's components in proportion to their device bytes (or to page
// bytes when no device bytes are given), checked against hand arithmetic; explicit page counts win; the
// envelope's sides share one buffer.

#include <unikv/host/host_capacity.hpp>
#include <unikv/host/separate_host_pools.hpp>

#include "host_support.hpp"

using namespace host_test;

TEST_CASE("host bytes split in proportion to device bytes, by hand arithmetic") {
    // FULL pages are 128 bytes, SWA 256, Mamba 96 (see host_support.hpp).
    const ArenaSpec spec = spec_for<TriPoolLayout>();
    REQUIRE(spec[Component::full].page_bytes == 128);
    REQUIRE(spec[Component::swa].page_bytes == 256);
    REQUIRE(spec[Component::mamba].page_bytes == 96);
    const ComponentMask all = layout_components_v<TriPoolLayout>;

    // Weights 6:3:1 of 10000 bytes: 6000 / 128 = 46, 3000 / 256 = 11, 1000 / 96 = 10.
    per_component<std::int32_t> p = split_host_bytes(10000, spec, all, {{600, 300, 100}});
    CHECK(p[Component::full] == 46);
    CHECK(p[Component::swa] == 11);
    CHECK(p[Component::mamba] == 10);

    // No weights: the same page count everywhere, 10000 / (128 + 256 + 96) = 20.
    p = split_host_bytes(10000, spec, all, {});
    CHECK(p[Component::full] == 20);
    CHECK(p[Component::swa] == 20);
    CHECK(p[Component::mamba] == 20);

    // Only the layout's components share the bytes (FULL+SWA: 3:1 of 1024: 768 / 128 = 6, 256 / 256 = 1), and
    // a weight of a component outside the split is ignored.
    const ArenaSpec two = spec_for<SwaFullLayout>();
    p = split_host_bytes(1024, two, layout_components_v<SwaFullLayout>, {{3, 1, 1000}});
    CHECK(p[Component::full] == 6);
    CHECK(p[Component::swa] == 1);
    CHECK(p[Component::mamba] == 0);

    CHECK_THROWS_AS(static_cast<void>(split_host_bytes(1024, two, all, {})), unikv::logic_error);
}

TEST_CASE("explicit host page counts win over total bytes, and the envelope's sides share one buffer") {
    const ArenaSpec spec = spec_for<SwaFullLayout>();
    const ComponentMask comps = layout_components_v<SwaFullLayout>;
    const HostConfig pages{.total_bytes = 1 << 20, .pages = {{3, 2, 0}}};
    CHECK(host_pages_for(spec, comps, pages) == per_component<std::int32_t>{{3, 2, 0}});
    CHECK(host_arena_bytes(spec, comps, pages) == 3 * 128 + 2 * 256);
    CHECK(host_arena_bytes(spec, comps, {.total_bytes = 5000}) == 5000);
    CHECK_THROWS_AS(static_cast<void>(host_pages_for(spec, comps, {.pages = {{1, 1, 1}}})), unikv::logic_error);

    // The separate pools take their capacity from the split.
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    SeparateHostPools::impl<HostBackend, SwaFullLayout> pool(
        backend, spec, {.total_bytes = 1024, .device_bytes = {{3, 1, 0}}}, stream);
    CHECK(pool.capacity(Component::full) == 6);
    CHECK(pool.capacity(Component::swa) == 1);
}
