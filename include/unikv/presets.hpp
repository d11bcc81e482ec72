#pragma once
/// \file
/// Model presets: for real model families, the layout to compose and the `ModelDescription` the arena takes,
/// computed from the fields of the model's published `config.json`.
///
/// A preset is a type, so the layout is chosen at compile time and the description is a constant:
///
/// ```cpp
/// using P = unikv::presets::Gemma3_27B;
/// unikv::UnifiedAllocator<P::layout, unikv::DefaultBackend> alloc(
///     backend, unikv::arena_config<P>({.arena_bytes = 40ull << 30, .page_size = {16}}), stream);
/// ```
///
/// Any type with `name`, `layout` and `model` members is a preset (`ModelPreset`); `check_preset<P>()` refuses,
/// at compile time, a description its layout's arena would refuse at run time.
///
/// Sizes are per tensor-parallel rank at TP = 1 (one rank holds every KV head and every state head). Per token,
/// an attention component holds `layers * 2 (K and V) * num_key_value_heads * head_dim * dtype_bytes`; per slot,
/// a state component holds `layers * (conv_state_bytes + temporal_state_bytes)` (formulas at `mamba1_state` and
/// `gated_delta_net_state`). The published numbers, in one place (config.json field names):
///
/// | preset | published config (config.json fields) |
/// |---|---|
/// | `Llama31_8B` | meta-llama/Llama-3.1-8B: num_hidden_layers 32, all full; num_key_value_heads 8; head_dim 128 |
/// | | (hidden_size 4096 / num_attention_heads 32); torch_dtype bfloat16 |
/// | `Gemma3_27B` | google/gemma-3-27b-it, text_config: num_hidden_layers 62, sliding_window_pattern 6 (10 full, |
/// | | 52 sliding); num_key_value_heads 16; head_dim 128; sliding_window 1024; torch_dtype bfloat16 |
/// | `GptOss120B` | openai/gpt-oss-120b: num_hidden_layers 36, layer_types alternate sliding/full (18 + 18); |
/// | | num_key_value_heads 8; head_dim 64; sliding_window 128; torch_dtype bfloat16 |
/// | `GptOss20B` | openai/gpt-oss-20b: as gpt-oss-120b with num_hidden_layers 24 (12 + 12) |
/// | `Qwen3Next80B` | Qwen/Qwen3-Next-80B-A3B-Instruct: num_hidden_layers 48, full_attention_interval 4 (12 full, |
/// | | 36 Gated DeltaNet); num_key_value_heads 2; head_dim 256; linear_num_key_heads 16, |
/// | | linear_num_value_heads 32, linear_key_head_dim 128, linear_value_head_dim 128, |
/// | | linear_conv_kernel_dim 4; torch_dtype bfloat16 |
/// | `JambaV01` | ai21labs/Jamba-v0.1: num_hidden_layers 32, attn_layer_period 8, attn_layer_offset 4 (4 full, |
/// | | 28 Mamba-1); num_key_value_heads 8; head_dim 128 (hidden_size 4096 / num_attention_heads 32); |
/// | | mamba_expand 2, mamba_d_state 16, mamba_d_conv 4; torch_dtype bfloat16 |
/// | `SyntheticTriHybrid` | synthetic (no published source; see its doc): 2 full, 6 sliding (window 1024), 24 |
/// | | Mamba-1 layers, attention and Mamba shaped as Jamba-v0.1 |
///
/// Recurrent (temporal) states are sized in fp32 (`ssm_dtype_bytes = 4`, the larger of the two precisions engines
/// store them in), conv states in the model dtype. An engine that stores its state in bf16 describes its own
/// preset with `ssm_dtype_bytes = 2`.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>

#include <unikv/arena/model.hpp>
#include <unikv/component.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/layout.hpp>
#include <unikv/pools/layouts.hpp>

namespace unikv {

/// The number of layers `i` in `[0, num_layers)` with `i % period == offset`: how configs place a repeating layer
/// kind (Gemma-3's global layer is offset 5 of period 6, Qwen3-Next's full layer offset 3 of 4, Jamba's
/// attention offset 4 of 8). Precondition: `0 <= offset < period`.
[[nodiscard]] constexpr std::int32_t periodic_layers(std::int32_t num_layers, std::int32_t period,
                                                     std::int32_t offset) noexcept {
    return num_layers > offset ? (num_layers - offset - 1) / period + 1 : 0;
}

/// The published fields of Mamba-1 (selective-scan) layers, as in Jamba's config.json.
struct Mamba1Config {
    std::int32_t layers = 0;            ///< Mamba layers
    std::int32_t hidden_size = 0;       ///< `hidden_size`
    std::int32_t expand = 0;            ///< `mamba_expand`: inner width is `expand * hidden_size`
    std::int32_t d_state = 0;           ///< `mamba_d_state`
    std::int32_t d_conv = 0;            ///< `mamba_d_conv`: the causal conv's kernel width
    std::int32_t conv_dtype_bytes = 0;  ///< bytes per conv state element (the model dtype)
    std::int32_t ssm_dtype_bytes = 0;   ///< bytes per temporal state element
};

/// The per-slot state of Mamba-1 layers. With `d_inner = expand * hidden_size`: the conv state keeps the last
/// `d_conv - 1` inputs of every inner channel, `(d_conv - 1) * d_inner * conv_dtype_bytes`; the temporal state is
/// `d_inner * d_state * ssm_dtype_bytes`.
[[nodiscard]] constexpr MambaShape mamba1_state(const Mamba1Config& c) noexcept {
    const auto z = [](std::int32_t v) { return static_cast<std::size_t>(v); };
    const std::size_t d_inner = z(c.expand) * z(c.hidden_size);
    return {.layers = c.layers,
            .conv_state_bytes = z(c.d_conv - 1) * d_inner * z(c.conv_dtype_bytes),
            .temporal_state_bytes = d_inner * z(c.d_state) * z(c.ssm_dtype_bytes)};
}

/// The published fields of Gated DeltaNet linear-attention layers, as in Qwen3-Next's config.json.
struct GatedDeltaNetConfig {
    std::int32_t layers = 0;            ///< linear-attention layers
    std::int32_t key_heads = 0;         ///< `linear_num_key_heads`
    std::int32_t value_heads = 0;       ///< `linear_num_value_heads`
    std::int32_t key_head_dim = 0;      ///< `linear_key_head_dim`
    std::int32_t value_head_dim = 0;    ///< `linear_value_head_dim`
    std::int32_t conv_kernel = 0;       ///< `linear_conv_kernel_dim`
    std::int32_t conv_dtype_bytes = 0;  ///< bytes per conv state element (the model dtype)
    std::int32_t ssm_dtype_bytes = 0;   ///< bytes per temporal state element
};

/// The per-slot state of Gated DeltaNet layers. The causal conv runs over q, k and v together, so it has
/// `2 * key_heads * key_head_dim + value_heads * value_head_dim` channels and keeps `conv_kernel - 1` inputs of
/// each: conv state = `(conv_kernel - 1) * channels * conv_dtype_bytes`. The delta-rule state is one
/// `key_head_dim x value_head_dim` matrix per value head: `value_heads * key_head_dim * value_head_dim *
/// ssm_dtype_bytes`.
[[nodiscard]] constexpr MambaShape gated_delta_net_state(const GatedDeltaNetConfig& c) noexcept {
    const auto z = [](std::int32_t v) { return static_cast<std::size_t>(v); };
    const std::size_t channels = 2 * z(c.key_heads) * z(c.key_head_dim) + z(c.value_heads) * z(c.value_head_dim);
    return {.layers = c.layers,
            .conv_state_bytes = z(c.conv_kernel - 1) * channels * z(c.conv_dtype_bytes),
            .temporal_state_bytes = z(c.value_heads) * z(c.key_head_dim) * z(c.value_head_dim) * z(c.ssm_dtype_bytes)};
}

/// Detection trait: `P` names a layout (`P::layout`), a name and a `ModelDescription` constant (`P::model`).
template <class P>
inline constexpr bool is_model_preset_v = requires {
    typename P::layout;
    requires is_layout_v<typename P::layout>;
    { P::name } -> std::convertible_to<std::string_view>;
    { P::model } -> std::convertible_to<ModelDescription>;
};

/// A model preset: `name` (lower-case, as a command line would spell it), `using layout = ...;` (the layout to
/// compose) and `static constexpr ModelDescription model` (what the arena sizes its pools from).
template <class P>
concept ModelPreset = is_model_preset_v<P>;

namespace detail {

[[nodiscard]] constexpr bool attention_described(const AttentionShape& s) noexcept {
    return s.layers > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.dtype_bytes > 0 && s.v_head_dim >= 0;
}

[[nodiscard]] constexpr bool attention_rows_aligned(const AttentionShape& s, std::size_t align) noexcept {
    const auto heads_bytes = static_cast<std::size_t>(s.kv_heads) * static_cast<std::size_t>(s.dtype_bytes);
    const auto v_dim = static_cast<std::size_t>(s.v_head_dim == 0 ? s.head_dim : s.v_head_dim);
    return heads_bytes * static_cast<std::size_t>(s.head_dim) % align == 0 && heads_bytes * v_dim % align == 0;
}

enum class preset_rule : std::uint8_t {
    none,
    is_preset,
    full_described,
    components_match_layout,
    components_described,
    rows_aligned,
};

/// The first rule preset `P` breaks (`preset_rule::none` for a valid one); each rule is asked only when the
/// rules before it hold, so it never reads a member that is not there.
template <class P>
consteval preset_rule first_broken_preset_rule() {
    if constexpr (!is_model_preset_v<P>) {
        return preset_rule::is_preset;
    } else {
        using L = typename P::layout;
        constexpr ModelDescription m = P::model;
        constexpr bool swa = layout_has_v<L, Component::swa>;
        constexpr bool mamba = layout_has_v<L, Component::mamba>;
        constexpr std::size_t align = ArenaConfig{}.row_align_bytes;
        if constexpr (!attention_described(m.full)) {
            return preset_rule::full_described;
        } else if constexpr ((m.swa.layers > 0) != swa || (m.mamba.layers > 0) != mamba) {
            return preset_rule::components_match_layout;
        } else if constexpr ((swa && !(attention_described(m.swa) && m.swa_window_tokens > 0)) ||
                             (mamba && !(m.mamba.conv_state_bytes > 0 && m.mamba.temporal_state_bytes > 0))) {
            return preset_rule::components_described;
        } else if constexpr (!attention_rows_aligned(m.full, align) || (swa && !attention_rows_aligned(m.swa, align)) ||
                             (mamba && (m.mamba.conv_state_bytes % align != 0 ||
                                        m.mamba.temporal_state_bytes % align != 0))) {
            return preset_rule::rows_aligned;
        } else {
            return preset_rule::none;
        }
    }
}

}  // namespace detail

/// True when `P` is a preset whose description fits its layout (any type may be asked).
template <class P>
inline constexpr bool is_valid_preset_v = detail::first_broken_preset_rule<P>() == detail::preset_rule::none;

/// Checks every preset rule, one `static_assert` per rule, so a bad preset gets exactly one message. Returns
/// true, so a user writes `static_assert(check_preset<P>())`; `arena_config<P>` does.
template <class P>
consteval bool check_preset() {
    using rule = detail::preset_rule;
    constexpr rule broken = detail::first_broken_preset_rule<P>();
    static_assert(broken != rule::is_preset,
                  "unikv: a model preset needs `using layout = <a unikv layout>;`, `static constexpr std::string_view "
                  "name` and `static constexpr ModelDescription model`; see unikv/presets.hpp");
    static_assert(broken != rule::full_described,
                  "unikv: the preset's model.full describes no FULL attention layers (layers, kv_heads, head_dim and "
                  "dtype_bytes must be > 0), but every layout has a FULL pool; describe the model's full-attention "
                  "layers");
    static_assert(broken != rule::components_match_layout,
                  "unikv: the preset's model and layout disagree on SWA or Mamba: a described component needs a "
                  "pool and a pool needs layers; use FullLayout, SwaFullLayout, MambaFullLayout or TriPoolLayout "
                  "to match the components with layers > 0");
    static_assert(broken != rule::components_described,
                  "unikv: the preset's SWA or Mamba description is incomplete: SWA needs kv_heads, head_dim, "
                  "dtype_bytes and swa_window_tokens > 0, Mamba needs conv_state_bytes and temporal_state_bytes > 0");
    static_assert(broken != rule::rows_aligned,
                  "unikv: a K/V row or Mamba state row of the preset is not a multiple of ArenaConfig's "
                  "row_align_bytes (16), so the arena would refuse it; check kv_heads, head_dim, dtype_bytes and "
                  "the state sizes");
    return true;
}

/// The device budget of a preset's arena.
struct ArenaBudget {
    std::size_t arena_bytes = 0;  ///< device bytes of the one arena; 0 is refused when the arena is built
    PageSize page_size{};         ///< tokens per FULL and SWA page (Mamba slots are always one page)
};

/// The `ArenaConfig` of preset `P` over `budget`, with the default row and entry alignment. Whether the budget
/// holds one worst-case request is checked where the arena is built (`make_arena_spec`, which names the floor).
template <class P>
[[nodiscard]] constexpr ArenaConfig arena_config(const ArenaBudget& budget) noexcept {
    static_assert(check_preset<P>());
    return {.model = P::model,
            .page_sizes = {.full = budget.page_size, .swa = budget.page_size, .mamba = PageSize{1}},
            .arena_bytes = budget.arena_bytes};
}

namespace presets {

/// Llama-3.1-8B: dense, every layer full attention.
struct Llama31_8B {
    static constexpr std::string_view name = "llama-3.1-8b";
    using layout = FullLayout;
    static constexpr ModelDescription model = {
        .full = {.layers = 32, .kv_heads = 8, .head_dim = 4096 / 32, .dtype_bytes = 2},
    };
};

/// Gemma-3-27B: 5 sliding-window layers to 1 global, window 1024.
struct Gemma3_27B {
    static constexpr std::string_view name = "gemma-3-27b";
    using layout = SwaFullLayout;
    static constexpr std::int32_t full_layers = periodic_layers(62, 6, 5);  ///< every 6th layer is global
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 16, .head_dim = 128, .dtype_bytes = 2},
        .swa = {.layers = 62 - full_layers, .kv_heads = 16, .head_dim = 128, .dtype_bytes = 2},
        .swa_window_tokens = 1024,
    };
};

/// gpt-oss-120b: sliding (window 128) and full layers alternate, sliding first.
struct GptOss120B {
    static constexpr std::string_view name = "gpt-oss-120b";
    using layout = SwaFullLayout;
    static constexpr std::int32_t full_layers = periodic_layers(36, 2, 1);  ///< the odd layers
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 8, .head_dim = 64, .dtype_bytes = 2},
        .swa = {.layers = 36 - full_layers, .kv_heads = 8, .head_dim = 64, .dtype_bytes = 2},
        .swa_window_tokens = 128,
    };
};

/// gpt-oss-20b: the attention of gpt-oss-120b over 24 layers.
struct GptOss20B {
    static constexpr std::string_view name = "gpt-oss-20b";
    using layout = SwaFullLayout;
    static constexpr std::int32_t full_layers = periodic_layers(24, 2, 1);  ///< the odd layers
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 8, .head_dim = 64, .dtype_bytes = 2},
        .swa = {.layers = 24 - full_layers, .kv_heads = 8, .head_dim = 64, .dtype_bytes = 2},
        .swa_window_tokens = 128,
    };
};

/// Qwen3-Next-80B-A3B: 3 Gated DeltaNet layers to 1 full (gated) attention layer. The linear-attention state
/// lives in the Mamba pool: one slot per request, like a Mamba state.
struct Qwen3Next80B {
    static constexpr std::string_view name = "qwen3-next-80b-a3b";
    using layout = MambaFullLayout;
    static constexpr std::int32_t full_layers = periodic_layers(48, 4, 3);  ///< every 4th layer
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 2, .head_dim = 256, .dtype_bytes = 2},
        .mamba = gated_delta_net_state({.layers = 48 - full_layers,
                                        .key_heads = 16,
                                        .value_heads = 32,
                                        .key_head_dim = 128,
                                        .value_head_dim = 128,
                                        .conv_kernel = 4,
                                        .conv_dtype_bytes = 2,
                                        .ssm_dtype_bytes = 4}),
    };
};

/// Jamba-v0.1: one attention layer in every 8, the rest Mamba-1.
struct JambaV01 {
    static constexpr std::string_view name = "jamba-v0.1";
    using layout = MambaFullLayout;
    static constexpr std::int32_t full_layers = periodic_layers(32, 8, 4);  ///< layers 4, 12, 20, 28
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 8, .head_dim = 4096 / 32, .dtype_bytes = 2},
        .mamba = mamba1_state({.layers = 32 - full_layers,
                               .hidden_size = 4096,
                               .expand = 2,
                               .d_state = 16,
                               .d_conv = 4,
                               .conv_dtype_bytes = 2,
                               .ssm_dtype_bytes = 4}),
    };
};

/// A synthetic FULL + SWA + Mamba model for the tri-pool: no published config we size from has all three
/// kinds. Jamba-v0.1's block (attention 8 x 128 in bf16, Mamba-1 as in `JambaV01`) with attention in every
/// 4th layer (8 of 32), and of those 3 sliding (Gemma-3's window 1024) to 1 full.
struct SyntheticTriHybrid {
    static constexpr std::string_view name = "synthetic-tri-hybrid";
    using layout = TriPoolLayout;
    static constexpr std::int32_t attention_layers = periodic_layers(32, 4, 3);      ///< every 4th layer
    static constexpr std::int32_t full_layers = periodic_layers(attention_layers, 4, 3);  ///< every 4th of those
    static constexpr ModelDescription model = {
        .full = {.layers = full_layers, .kv_heads = 8, .head_dim = 128, .dtype_bytes = 2},
        .swa = {.layers = attention_layers - full_layers, .kv_heads = 8, .head_dim = 128, .dtype_bytes = 2},
        .swa_window_tokens = 1024,
        .mamba = mamba1_state({.layers = 32 - attention_layers,
                               .hidden_size = 4096,
                               .expand = 2,
                               .d_state = 16,
                               .d_conv = 4,
                               .conv_dtype_bytes = 2,
                               .ssm_dtype_bytes = 4}),
    };
};

/// Every shipped preset, for code that walks them all (a simulator's `--model` lookup, a test over each).
using All = std::tuple<Llama31_8B, Gemma3_27B, GptOss120B, GptOss20B, Qwen3Next80B, JambaV01, SyntheticTriHybrid>;

}  // namespace presets

static_assert(check_preset<presets::Llama31_8B>() && check_preset<presets::Gemma3_27B>() &&
              check_preset<presets::GptOss120B>() && check_preset<presets::GptOss20B>() &&
              check_preset<presets::Qwen3Next80B>() && check_preset<presets::JambaV01>() &&
              check_preset<presets::SyntheticTriHybrid>());

}  // namespace unikv
