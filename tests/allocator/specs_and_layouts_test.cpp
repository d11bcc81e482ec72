// Sub-pool specs from a model description, the refusal of bad configurations, layout traits, and the page
// table's sentinel guarantees.

#include "alloc_support.hpp"

#include <limits>
#include <string>

using namespace alloc_test;

namespace {

// Expects `f` to throw unikv::logic_error whose message contains every fragment.
template <class F>
void expect_refusal(F f, std::initializer_list<const char*> fragments) {
    try {
        f();
        FAIL("expected a logic_error");
    } catch (const unikv::logic_error& e) {
        const std::string what = e.what();
        for (const char* fragment : fragments) {
            INFO(what);
            CHECK(what.find(fragment) != std::string::npos);
        }
    }
}

constexpr ComponentMask all = ComponentMask::all();

}  // namespace

TEST_CASE("specs lay K and V of every layer of a token back to back and size pages and the sink") {
    ArenaConfig cfg = small_config(1 << 16);
    cfg.model.full = {.layers = 3, .kv_heads = 2, .head_dim = 8, .v_head_dim = 4, .dtype_bytes = 2};
    cfg.entry_align_bytes = 64;
    const ArenaSpec spec = make_arena_spec(cfg, all);
    const SubPoolSpec& full = spec[Component::full];
    CHECK(full.k_row_bytes == 32);
    CHECK(full.v_row_bytes == 16);
    CHECK(full.entry_bytes == 192);  // 3 layers * 48, aligned up to 64
    CHECK(full.page_bytes == 4 * 192);
    CHECK(full.num_pages == (1 << 16) / (4 * 192));
    CHECK(full.layer_slice(1).offset == 48);
    CHECK(full.layer_slice(1).stride == 192);
    CHECK(full.layer_slice(1).count == 4);
    const SubPoolSpec& mamba = spec[Component::mamba];
    CHECK(mamba.entry_bytes == 64);
    CHECK(mamba.page_size == 1);
    // The sink floor is the largest envelope; every pool's first usable page lies above it.
    CHECK(spec.sink_floor_bytes == full.page_bytes);
    for (const SubPoolSpec& p : spec.pools) {
        CHECK(static_cast<std::size_t>(p.min_page) * p.page_bytes >= spec.sink_floor_bytes);
        CHECK(static_cast<std::size_t>(p.min_page - 1) * p.page_bytes < spec.sink_floor_bytes);
    }
    CHECK(spec.min_arena_bytes <= cfg.arena_bytes);
}

TEST_CASE("bad specs are refused with a message that says what to change") {
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.model.full.kv_heads = 0;
        (void)make_arena_spec(cfg, all);
    }, {"make_arena_spec", "kv_heads 0", "describe the full"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.model.swa.head_dim = 3;  // 1 head * 3 * 2 bytes = 6-byte rows
        (void)make_arena_spec(cfg, all);
    }, {"not a multiple of row_align_bytes", "lower row_align_bytes"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.page_sizes.mamba = PageSize{4};
        (void)make_arena_spec(cfg, all);
    }, {"Mamba page size is 4", "set page_sizes.mamba to 1"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.model.mamba.conv_state_bytes = 0;
        (void)make_arena_spec(cfg, all);
    }, {"model.mamba needs"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.page_sizes.swa = PageSize{8};
        (void)make_arena_spec(cfg, all);
    }, {"same page size"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(std::size_t{1} << 40, 1);  // 2^35 one-token pages of 32 bytes
        (void)make_arena_spec(cfg, all);
    }, {"more than int32 ids can name", "smaller arena_bytes"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(600);
        (void)make_arena_spec(cfg, all);
    }, {"bs=1 floor", "raise arena_bytes to at least"});
    expect_refusal([] {
        ArenaConfig cfg = small_config(1 << 16);
        cfg.model.swa_window_tokens = 0;
        (void)make_arena_spec(cfg, all);
    }, {"swa_window_tokens is 0"});
    // The allocator refuses at construction, before touching the backend.
    expect_refusal([] {
        HostBackend backend({.mode = ExecutionMode::manual});
        auto stream = backend.make_stream();
        UnifiedAllocator<SwaFullLayout, HostBackend> a(backend, small_config(300), stream);
    }, {"bs=1 floor"});
}

TEST_CASE("the bs=1 floor charges only the terms a layout's pools have") {
    const ArenaConfig cfg = small_config(1 << 16, 4, 8);
    const ArenaSpec two = make_arena_spec(cfg, ComponentMask::of(Component::full).with(Component::mamba));
    const ArenaSpec swa = make_arena_spec(cfg, ComponentMask::of(Component::full).with(Component::swa));
    // [Mamba | Full]: sink 128 + slack 128 + one FULL page 128 + 3 slots of 64.
    CHECK(two.min_arena_bytes == 128 + 128 + 128 + 3 * 64);
    // [Swa | Full]: sink + slack + (2 + 1) SWA pages + 3 FULL pages (window + one page of tokens).
    CHECK(swa.min_arena_bytes == 128 + 128 + 3 * 128 + 3 * 128);
}

TEST_CASE("a FULL-only spec has one pool over the arena and a floor of the sink plus one page") {
    ArenaConfig cfg = small_config(1 << 12);
    // Only the components present are read: a dense model leaves the SWA and Mamba shapes unset.
    cfg.model.swa = {};
    cfg.model.swa_window_tokens = 0;
    cfg.model.mamba = {};
    cfg.page_sizes.mamba = PageSize{4};
    const ArenaSpec spec = make_arena_spec(cfg, layout_components_v<FullLayout>);
    const SubPoolSpec& full = spec[Component::full];
    CHECK(full.present);
    CHECK_FALSE(spec[Component::swa].present);
    CHECK_FALSE(spec[Component::mamba].present);
    CHECK(full.page_bytes == 4 * 32);
    CHECK(full.num_pages == (1 << 12) / 128);
    CHECK(spec.sink_floor_bytes == full.page_bytes);
    CHECK(full.min_page == 1);
    CHECK(full.usable_pages() == 31);
    // bs=1 floor: the sink and one FULL page; one pool has no boundary to charge rounding slack for.
    CHECK(spec.min_arena_bytes == 128 + 128);
    cfg.arena_bytes = 256;
    CHECK(make_arena_spec(cfg, ComponentMask::of(Component::full)).min_arena_bytes == cfg.arena_bytes);
    expect_refusal([&] {
        cfg.arena_bytes = 255;
        (void)make_arena_spec(cfg, ComponentMask::of(Component::full));
    }, {"the bs=1 floor is 256", "raise arena_bytes to at least 256"});
}

// Layout traits: every shipped layout passes the whole check; each rule has its own trait. (Each rule's
// rejection, with its one message, is a compile-fail test: tests/compile_fail/layout_*.cpp.)
using BadFloatAtEnd = TwoEnd<Pool<Component::swa, FloatPool>, Pool<Component::full, LazyEndPool<Grow::down>>>;
using BadSameWay = TwoEnd<Pool<Component::swa, LazyEndPool<Grow::up>>, Pool<Component::full, LazyEndPool<Grow::up>>>;
using BadLazyMiddle = TriPool<Pool<Component::mamba, LazyEndPool<Grow::up>>, Pool<Component::swa, LazyEndPool<Grow::up>>,
                              Pool<Component::full, LazyEndPool<Grow::down>>>;
using LoneFullGrowsUp = FullOnly<Pool<Component::full, LazyEndPool<Grow::up>>>;
using LoneFloat = FullOnly<Pool<Component::full, FloatPool>>;
using LoneSwa = FullOnly<Pool<Component::swa, LazyEndPool<Grow::down>>>;
static_assert(check_layout<FullLayout, HostBackend>() && is_valid_layout_v<FullLayout, HostBackend>);
static_assert(check_layout<SwaFullLayout, HostBackend>() && is_valid_layout_v<SwaFullLayout, HostBackend>);
static_assert(check_layout<MambaFullLayout, HostBackend>() && is_valid_layout_v<MambaFullLayout, HostBackend>);
static_assert(check_layout<TriPoolLayout, HostBackend>() && is_valid_layout_v<TriPoolLayout, HostBackend>);
static_assert(check_layout<EagerSwaFullLayout, HostBackend>() && is_valid_layout_v<EagerSwaFullLayout, HostBackend>);
static_assert(check_layout<EagerMambaFullLayout, HostBackend>() &&
              is_valid_layout_v<EagerMambaFullLayout, HostBackend>);
static_assert(is_valid_layout_v<FullOnly<Pool<Component::full, EagerEndPool<Grow::down>>>, HostBackend>);
static_assert(layout_components_v<FullLayout> == ComponentMask::of(Component::full));
static_assert(layout_index_of_v<FullLayout, Component::full> == 0 && !layout_has_v<FullLayout, Component::swa>);
static_assert(!layout_ends_face_each_other_v<LoneFullGrowsUp> && !is_valid_layout_v<LoneFullGrowsUp, HostBackend>);
static_assert(!layout_no_float_at_an_end_v<LoneFloat> && !is_valid_layout_v<LoneFloat, HostBackend>);
static_assert(!layout_has_full_v<LoneSwa> && !is_valid_layout_v<LoneSwa, HostBackend>);
static_assert(!layout_size_supported_v<Layout<>> && !is_valid_layout_v<Layout<>, HostBackend>);
static_assert(!is_valid_layout_v<int, HostBackend>);  // any type may be asked
static_assert(!layout_no_float_at_an_end_v<BadFloatAtEnd>);
static_assert(!layout_ends_grow_differently_v<BadSameWay>);
static_assert(!layout_middle_floats_v<BadLazyMiddle>);
static_assert(layout_allows_move_gates_v<TriPoolLayout> && !layout_allows_move_gates_v<EagerSwaFullLayout>);
static_assert(layout_index_of_v<TriPoolLayout, Component::swa> == 1);
static_assert(PoolLayout<TriPoolLayout> && !PoolLayout<int>);
static_assert(PoolPolicy<FloatPool, HostBackend> && ReservationPolicy<PhysicalReservations>);

TEST_CASE("page tables start with the sink and a -1 sentinel and translate every bad id to the sink") {
    PageTable t(10, 8, PageSize{4});
    CHECK(t.v2p().front() == 0);
    CHECK(t.v2p().back() == -1);
    CHECK(t.p2v().back() == -1);
    t.bind(3, 5);
    const std::vector<VirtualToken> in{VirtualToken{12}, VirtualToken{15}, VirtualToken{16}, VirtualToken{-1},
                                       VirtualToken{1000}, VirtualToken{std::numeric_limits<std::int32_t>::min()},
                                       VirtualToken{2}};
    std::vector<PhysicalToken> out(in.size());
    t.translate(in, out);
    CHECK(out[0].value() == 20);
    CHECK(out[1].value() == 23);
    CHECK(out[2].value() == 0);  // page 4 is unbound
    CHECK(out[3].value() == 0);
    CHECK(out[4].value() == 0);
    CHECK(out[5].value() == 0);
    CHECK(out[6].value() == 2);  // page 0 is the sink, bound to itself
    PageTable odd(10, 8, PageSize{3});  // the division path
    odd.bind(2, 7);
    const std::vector<VirtualToken> in3{VirtualToken{7}, VirtualToken{-5}};
    std::vector<PhysicalToken> out3(2);
    odd.translate(in3, out3);
    CHECK(out3[0].value() == 22);
    CHECK(out3[1].value() == 0);
}

TEST_CASE("moving or rebinding an unbound page is a hard error that never writes through index -1") {
    PageTable t(10, 8, PageSize{1});
    t.bind(3, 5);
    const std::vector<std::int32_t> v2p(t.v2p().begin(), t.v2p().end());
    const std::vector<std::int32_t> p2v(t.p2v().begin(), t.p2v().end());
    CHECK_THROWS_AS(t.move_binding(4, 6), unikv::logic_error);  // p2v[4] == -1
    CHECK_THROWS_AS(t.move_binding(5, 5), unikv::logic_error);  // destination bound
    CHECK_THROWS_AS(t.move_binding(-1, 6), unikv::logic_error);
    CHECK_THROWS_AS(t.unbind(4), unikv::logic_error);
    CHECK_THROWS_AS(t.bind(3, 6), unikv::logic_error);
    CHECK(std::equal(v2p.begin(), v2p.end(), t.v2p().begin()));
    CHECK(std::equal(p2v.begin(), p2v.end(), t.p2v().begin()));
    t.move_binding(5, 6);
    CHECK(t.physical_of(3) == 6);
    CHECK(t.virtual_of(5) == -1);
    CHECK(t.v2p().back() == -1);
}
