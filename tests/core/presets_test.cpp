// Model presets: each preset's bytes per token (per slot for state) and per page, against the multiplication
// written out with the published config numbers; each preset's arena built at its bs=1 floor, with two pages
// (and a state slot) allocated, written through translation and read back; and the preset rules.
#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>

#include <unikv/presets.hpp>

#include "allocator/alloc_support.hpp"
#include "fuzz_env.hpp"

using namespace unikv;

namespace {

constexpr PageSize page16{16};

/// The geometry of preset `P` at page size 16 (a 1 TiB probe: sizes and the floor do not depend on it).
template <class P>
ArenaSpec spec_of() {
    return make_arena_spec(arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = page16}),
                           layout_components_v<typename P::layout>);
}

/// One page of every attention pool of `spec`: the slack a second request page needs above the floor.
std::size_t attention_page_bytes(const ArenaSpec& spec) {
    return spec[Component::full].page_bytes + (spec[Component::swa].present ? spec[Component::swa].page_bytes : 0);
}

}  // namespace

TEST_CASE("Llama-3.1-8B: a FULL token is 32 layers x K+V x 8 heads x 128 dims x bf16") {
    static_assert(std::is_same_v<presets::Llama31_8B::layout, FullLayout>);
    const ArenaSpec s = spec_of<presets::Llama31_8B>();
    CHECK(s[Component::full].k_row_bytes == 8 * 128 * 2);
    CHECK(s[Component::full].entry_bytes == 32 * 2 * 8 * 128 * 2);  // 131,072
    CHECK(s[Component::full].page_bytes == 16 * 131'072);
    CHECK_FALSE(s[Component::swa].present);
    CHECK_FALSE(s[Component::mamba].present);
}

TEST_CASE("Gemma-3-27B: 10 global and 52 local layers of 16 heads x 128 dims, window 1024") {
    static_assert(std::is_same_v<presets::Gemma3_27B::layout, SwaFullLayout>);
    static_assert(presets::Gemma3_27B::model.swa_window_tokens == 1024);
    const ArenaSpec s = spec_of<presets::Gemma3_27B>();
    CHECK(s[Component::full].layers == 10);  // layers 5, 11, ..., 59 of 62
    CHECK(s[Component::swa].layers == 52);
    CHECK(s[Component::full].k_row_bytes == 16 * 128 * 2);
    CHECK(s[Component::full].entry_bytes == 10 * 2 * 16 * 128 * 2);  // 81,920
    CHECK(s[Component::swa].entry_bytes == 52 * 2 * 16 * 128 * 2);   // 425,984
    CHECK(s[Component::full].page_bytes == 16 * 81'920);
    CHECK(s[Component::swa].page_bytes == 16 * 425'984);
}

TEST_CASE("gpt-oss: alternating layers split evenly, 8 heads x 64 dims, window 128") {
    static_assert(std::is_same_v<presets::GptOss120B::layout, SwaFullLayout>);
    static_assert(presets::GptOss120B::model.swa_window_tokens == 128);
    const ArenaSpec big = spec_of<presets::GptOss120B>();
    CHECK(big[Component::full].entry_bytes == 18 * 2 * 8 * 64 * 2);  // 36,864
    CHECK(big[Component::swa].entry_bytes == 18 * 2 * 8 * 64 * 2);
    CHECK(big[Component::swa].page_bytes == 16 * 36'864);
    const ArenaSpec small = spec_of<presets::GptOss20B>();
    CHECK(small[Component::full].entry_bytes == 12 * 2 * 8 * 64 * 2);  // 24,576
    CHECK(small[Component::swa].entry_bytes == 12 * 2 * 8 * 64 * 2);
    CHECK(small[Component::full].page_bytes == 16 * 24'576);
}

TEST_CASE("Qwen3-Next-80B: 12 full layers of 2 heads x 256 dims; 36 Gated DeltaNet states per slot") {
    static_assert(std::is_same_v<presets::Qwen3Next80B::layout, MambaFullLayout>);
    const ArenaSpec s = spec_of<presets::Qwen3Next80B>();
    CHECK(s[Component::full].entry_bytes == 12 * 2 * 2 * 256 * 2);  // 24,576
    CHECK(s[Component::full].page_bytes == 16 * 24'576);
    const SubPoolSpec& m = s[Component::mamba];
    CHECK(m.layers == 36);
    // conv: kernel 4 - 1 = 3 inputs of (q 16x128 + k 16x128 + v 32x128 = 8192) channels, bf16
    CHECK(m.k_row_bytes == 3 * (16 * 128 + 16 * 128 + 32 * 128) * 2);  // 49,152
    // delta rule: one 128 x 128 fp32 matrix per value head
    CHECK(m.v_row_bytes == 32 * 128 * 128 * 4);  // 2,097,152
    CHECK(m.entry_bytes == 36 * (49'152 + 2'097'152));
    CHECK(m.page_bytes == 77'266'944);
}

TEST_CASE("Jamba-v0.1: 4 attention layers of 8 heads x 128 dims; 28 Mamba-1 states per slot") {
    static_assert(std::is_same_v<presets::JambaV01::layout, MambaFullLayout>);
    const ArenaSpec s = spec_of<presets::JambaV01>();
    CHECK(s[Component::full].entry_bytes == 4 * 2 * 8 * 128 * 2);  // 16,384
    const SubPoolSpec& m = s[Component::mamba];
    CHECK(m.layers == 28);
    // d_inner = expand 2 x hidden 4096 = 8192; conv keeps d_conv 4 - 1 = 3 inputs per channel, bf16
    CHECK(m.k_row_bytes == 3 * 8192 * 2);  // 49,152
    CHECK(m.v_row_bytes == 8192 * 16 * 4);  // d_state 16, fp32: 524,288
    CHECK(m.page_bytes == 28 * (49'152 + 524'288));  // 16,056,320
}

TEST_CASE("the synthetic tri-pool model: 2 full, 6 sliding and 24 Mamba-1 layers") {
    static_assert(std::is_same_v<presets::SyntheticTriHybrid::layout, TriPoolLayout>);
    const ArenaSpec s = spec_of<presets::SyntheticTriHybrid>();
    CHECK(s[Component::full].entry_bytes == 2 * 2 * 8 * 128 * 2);  // 8,192
    CHECK(s[Component::swa].entry_bytes == 6 * 2 * 8 * 128 * 2);   // 24,576
    CHECK(s[Component::swa].page_bytes == 16 * 24'576);
    CHECK(s[Component::mamba].page_bytes == 24 * (3 * 8192 * 2 + 8192 * 16 * 4));  // 13,762,560
}

TEST_CASE_TEMPLATE_DEFINE("a preset's arena at its bs=1 floor serves a page whose rows read back through translation",
                          P, preset_round_trip) {
    using L = typename P::layout;
    const ArenaSpec probe = spec_of<P>();
    // Gemma-3-27B's floor (one 1024-token window of 52 layers) and Qwen3-Next's (five 77 MB state slots, the sink
    // among them) cost about 0.7 CPU-s each to zero under ASan, so they run when asked.
    if (probe.min_arena_bytes > (std::size_t{256} << 20) && test::env_or("UNIKV_PRESET_LARGE_ARENAS", 0) == 0) {
        MESSAGE(P::name, ": floor of ", probe.min_arena_bytes, " bytes; set UNIKV_PRESET_LARGE_ARENAS=1 to build it");
        return;
    }
    // The floor holds one request's first page (and its state slots); one page more for the second allocation.
    const std::size_t bytes = probe.min_arena_bytes + attention_page_bytes(probe);
    alloc_test::Fixture<L> f(arena_config<P>({.arena_bytes = bytes, .page_size = page16}));
    CHECK(f.alloc.spec().min_arena_bytes == probe.min_arena_bytes);
    const std::vector<VirtualPage> a = f.alloc_kv(1);
    const std::vector<VirtualPage> b = f.alloc_kv(1, 1);
    if constexpr (layout_has_v<L, Component::mamba>) {
        // The state slot is written last, so a slot overlapping the attention rows would tear their markers.
        const std::vector<StateId> states = f.alloc_states(1);
        CHECK(f.states_hold(states));
    }
    CHECK(f.kv_holds(a));
    CHECK(f.kv_holds(b, 1));
    CHECK(f.broken().empty());
}
TEST_CASE_TEMPLATE_APPLY(preset_round_trip, presets::All);

TEST_CASE("a budget below a preset's floor is refused with the floor named") {
    const std::size_t floor = spec_of<presets::GptOss20B>().min_arena_bytes;
    const ArenaConfig config = arena_config<presets::GptOss20B>({.arena_bytes = floor - 1, .page_size = page16});
    const std::string expected = "raise arena_bytes to at least " + std::to_string(floor);
    CHECK_THROWS_WITH_AS((void)make_arena_spec(config, layout_components_v<SwaFullLayout>),
                         doctest::Contains(expected.c_str()), logic_error);
}

namespace {

struct Good {
    static constexpr std::string_view name = "good";
    using layout = SwaFullLayout;
    static constexpr ModelDescription model = {
        .full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa_window_tokens = 8,
    };
};
struct NoName {
    using layout = FullLayout;
    static constexpr ModelDescription model = Good::model;
};
struct NoFull : Good {
    static constexpr ModelDescription model = {.swa = Good::model.swa, .swa_window_tokens = 8};
};
struct SwaOnFullLayout : Good {
    using layout = FullLayout;
};
struct NoWindow : Good {
    static constexpr ModelDescription model = {.full = Good::model.full, .swa = Good::model.swa};
};
struct OddRows : Good {  // K row 1 x 4 x 2 = 8 bytes, not a multiple of 16
    static constexpr ModelDescription model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 4, .dtype_bytes = 2},
                                               .swa = Good::model.swa,
                                               .swa_window_tokens = 8};
};

}  // namespace

TEST_CASE("the preset rules accept the shipped presets and name the first broken rule of a bad one") {
    using detail::first_broken_preset_rule;
    using rule = detail::preset_rule;
    static_assert(is_valid_preset_v<Good>);
    static_assert(std::apply([](auto... p) { return (is_valid_preset_v<decltype(p)> && ...); }, presets::All{}));
    static_assert(first_broken_preset_rule<int>() == rule::is_preset);
    static_assert(first_broken_preset_rule<NoName>() == rule::is_preset);
    static_assert(first_broken_preset_rule<NoFull>() == rule::full_described);
    static_assert(first_broken_preset_rule<SwaOnFullLayout>() == rule::components_match_layout);
    static_assert(first_broken_preset_rule<NoWindow>() == rule::components_described);
    static_assert(first_broken_preset_rule<OddRows>() == rule::rows_aligned);
    CHECK(arena_config<Good>({.arena_bytes = 4096, .page_size = {4}}).page_sizes.swa == PageSize{4});
}
