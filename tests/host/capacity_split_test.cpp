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

    // No weights: bytes per cached token, at 4 tokens per page and 64 tokens per state: FULL 128 * 64 / 4 =
    // 2048, SWA 256 * 64 / 4 = 4096, Mamba 96 (W = 6240). 100000 bytes: FULL 32820 / 128 = 256 pages (1024
    // tokens), SWA 65641 / 256 = 256 pages, Mamba 1538 / 96 = 16 states (one per 64 of those tokens).
    REQUIRE(spec[Component::full].page_size == 4);
    p = split_host_bytes(100000, spec, all, {}, 64);
    CHECK(p[Component::full] == 256);
    CHECK(p[Component::swa] == 256);
    CHECK(p[Component::mamba] == 16);
    // The default, a state per 256 tokens: FULL 8192, SWA 16384, Mamba 96 (W = 24672): FULL 259 pages, Mamba
    // 4 states, where the former default (the same page count everywhere, a state per page) gave 100000 / 480
    // = 208 of each.
    p = split_host_bytes(100000, spec, all, {});
    CHECK(p[Component::full] == 259);
    CHECK(p[Component::mamba] == 4);
    CHECK(split_host_bytes(100000, spec, all, {}, page_size)[Component::mamba] == 208);
    // Too few bytes for one page of each pool: refused, naming the least total that gives each one.
    CHECK_THROWS_WITH_AS(static_cast<void>(split_host_bytes(6000, spec, all, {}, 64)),
                         "unikv: HostConfig: 6000 host bytes give the mamba host pool no page (96 bytes); give at "
                         "least 6241 bytes, or weights (device_bytes) that leave each pool a page",
                         unikv::logic_error);
    CHECK(split_host_bytes(6241, spec, all, {}, 64)[Component::mamba] == 1);
    CHECK(split_host_bytes(0, spec, all, {}, 64) == per_component<std::int32_t>{});  // no host tier: no pages

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
    CHECK_THROWS_WITH_AS(static_cast<void>(host_pages_for(spec, comps, {.pages = {{3, 0, 0}}})),
                         doctest::Contains("gives the swa host pool no page"), unikv::logic_error);
    CHECK_THROWS_WITH_AS(static_cast<void>(host_arena_bytes(spec, comps, {.total_bytes = 300})),
                         doctest::Contains("give at least 384 bytes"), unikv::logic_error);
    // FULL's pages lie on their own grid above the other side: 128-byte FULL pages over a 96-byte state need
    // two FULL slots, 256 bytes, not 224.
    const ArenaSpec mamba = spec_for<MambaFullLayout>();
    REQUIRE(mamba[Component::mamba].page_bytes == 96);
    const ComponentMask mamba_full = layout_components_v<MambaFullLayout>;
    CHECK_THROWS_WITH_AS(static_cast<void>(host_arena_bytes(mamba, mamba_full, {.total_bytes = 224})),
                         doctest::Contains("give at least 256 bytes"), unikv::logic_error);
    CHECK(host_arena_bytes(mamba, mamba_full, {.total_bytes = 256}) == 256);

    // The separate pools take their capacity from the split.
    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    SeparateHostPools::impl<HostBackend, SwaFullLayout> pool(
        backend, spec, {.total_bytes = 1024, .device_bytes = {{3, 1, 0}}}, stream);
    CHECK(pool.capacity(Component::full) == 6);
    CHECK(pool.capacity(Component::swa) == 1);
}
