#pragma once
/// \file
/// The simulated clock: a roofline model of one engine step on one accelerator (`CostModel`), and the
/// parameter counts it needs per preset (`model_parameters`).
///
/// One step is one forward over a mixed batch (the prefill chunks and one decode token per running request),
/// priced as the slowest of three resources that work at the same time:
/// * **compute**: `(prefill_tokens + decode_tokens) * 2 * active_parameters` FLOPs at the dense bf16 peak. The
///   attention's own FLOPs (quadratic in the context) are left out: for these presets the projections and the
///   MLP dominate up to contexts of tens of thousands of tokens (SWA layers stop at their window), and the
///   model stays one line;
/// * **HBM**: the weights the batch touches, `min(total, tokens * active) * bytes_per_parameter` (a dense model
///   reads all of them; a small MoE batch reads its experts only), plus the KV the attention reads:
///   `context_tokens` FULL rows, at most one window of SWA rows per request (`min(context_tokens,
///   requests * window)`, an upper bound that is exact once every context passes a window), and for Mamba each
///   request's state read and written once;
/// * **the host link**: bytes loaded (host to device) and bytes written (device to host). They overlap the
///   forward rather than add to it: a load-back is waited for per layer (layer `l`'s attention waits only on
///   layer `l`'s copy), and write-through, write-back and retraction copies run on the transfer stream without
///   blocking compute. The link is full duplex, so loads and writes do not share it; whichever direction
///   carries more bounds the step;
/// * **the storage link** (with a storage tier): the bytes the step's admitted requests prefetched from the store
///   (one latency plus the bytes at the read rate: the prefetch runs before the admission, which waits for it).
///   The bytes the step put do not bound it: a put copies host memory to the store, off the accelerator and its
///   link, while the forward runs (the report gives the busiest instance's writes at `storage_write_bytes_per_s`
///   as a share of the span, `store_write_busy`: above 1 the store could not keep up, and the replay flatters it).
///   Defaults: a datacenter NVMe SSD for `file:` (7 GB/s read, 4 GB/s write, 0.1 ms), a 25 Gb/s network for
///   `redis://` (3 GB/s each way, 0.5 ms).
///
/// Step time is the largest of the four. Peaks, not achieved rates: the model is a lower bound on a real
/// engine's step time (no kernel-launch or scheduler overhead), so compare runs with each other, not with a
/// measured server. Every constant sits in `Accelerator` (H200-class defaults) and `model_parameter_table`.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>

#include <unikv/arena/model.hpp>
#include <unikv/presets.hpp>

#include <unikv_sim/replay_records.hpp>

namespace unikv::sim {

/// The accelerator a step runs on. Defaults: one NVIDIA H200 SXM (datasheet: 4.8 TB/s HBM3e, 989 TFLOP/s dense
/// bf16, i.e. the 1,979 quoted with sparsity halved) on PCIe 5.0 x16 (64 GB/s per direction raw; 55 GB/s
/// assumed for pinned copies after protocol overhead). `--host-link-gbps` overrides the link.
struct Accelerator {
    double hbm_bytes_per_s = 4.8e12;        ///< HBM bandwidth
    double flops_per_s = 989e12;            ///< dense bf16 tensor FLOP/s
    double host_link_bytes_per_s = 55e9;    ///< host <-> device, per direction
    double storage_read_bytes_per_s = 7e9;  ///< storage to host (`storage_link_for` sets it per store kind)
    double storage_write_bytes_per_s = 4e9; ///< host to storage
    double storage_latency_s = 100e-6;      ///< one storage round trip
};

/// The storage link of a store kind: a local NVMe SSD (`file:`) or a network store (`redis://`); see the file
/// comment.
enum class StorageKind : std::uint8_t { file, network };
[[nodiscard]] constexpr Accelerator storage_link_for(Accelerator hw, StorageKind kind) noexcept {
    if (kind == StorageKind::network) {
        hw.storage_read_bytes_per_s = 3e9;
        hw.storage_write_bytes_per_s = 3e9;
        hw.storage_latency_s = 500e-6;
    }
    return hw;
}

/// The parameters of one model, from its published card.
struct ModelParameters {
    std::string_view preset;      ///< a preset's `name`
    double total = 0;             ///< every parameter (the language model; vision towers excluded)
    double active = 0;            ///< parameters one token runs through (= total for a dense model)
    double weight_bytes = 0;      ///< bytes of the weights as served (bf16 unless the card says otherwise)
};

/// Parameter counts per preset. Sources (model cards and reports as published):
/// | preset | total / active | weights | source |
/// |---|---|---|---|
/// | llama-3.1-8b | 8.03B dense | bf16 | meta-llama/Llama-3.1-8B card (8B; 8.03B in the safetensors index) |
/// | gemma-3-27b | 27.0B dense | bf16 | Gemma 3 technical report, table 1: 1,416M embedding + 25,600M non-embedding (the 417M vision encoder left out) |
/// | gpt-oss-120b | 116.83B / 5.13B | 60.8 GiB (MXFP4 experts) | gpt-oss model card, table 1 |
/// | gpt-oss-20b | 20.91B / 3.61B | 12.8 GiB (MXFP4 experts) | gpt-oss model card, table 1 |
/// | qwen3-next-80b-a3b | 80B / 3B | bf16 | Qwen/Qwen3-Next-80B-A3B-Instruct card ("80B in total and 3B activated") |
/// | jamba-v0.1 | 52B / 12B | bf16 | ai21labs/Jamba-v0.1 card ("12B active parameters and a total of 52B") |
/// | synthetic-tri-hybrid | 52B / 12B | bf16 | synthetic: Jamba-v0.1's block shape, so Jamba's counts |
inline constexpr std::array<ModelParameters, 7> model_parameter_table{{
    {"llama-3.1-8b", 8.03e9, 8.03e9, 2 * 8.03e9},
    {"gemma-3-27b", 27.016e9, 27.016e9, 2 * 27.016e9},
    {"gpt-oss-120b", 116.83e9, 5.13e9, 60.8 * (1u << 30)},
    {"gpt-oss-20b", 20.91e9, 3.61e9, 12.8 * (1u << 30)},
    {"qwen3-next-80b-a3b", 80e9, 3e9, 2 * 80e9},
    {"jamba-v0.1", 52e9, 12e9, 2 * 52e9},
    {"synthetic-tri-hybrid", 52e9, 12e9, 2 * 52e9},
}};

/// The parameters of the preset called `name`, or nullptr. O(presets).
[[nodiscard]] constexpr const ModelParameters* find_model_parameters(std::string_view name) noexcept {
    for (const ModelParameters& m : model_parameter_table)
        if (m.preset == name) return &m;
    return nullptr;
}

/// True when `model_parameter_table` has a row for the preset called `name`.
[[nodiscard]] constexpr bool has_model_parameters(std::string_view name) noexcept {
    for (const ModelParameters& m : model_parameter_table)
        if (m.preset == name) return true;
    return false;
}

static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
    return (has_model_parameters(std::tuple_element_t<I, presets::All>::name) && ...);
}(std::make_index_sequence<std::tuple_size_v<presets::All>>{}),
              "unikv: every preset of presets::All needs a row in model_parameter_table (cost_model.hpp)");

/// KV bytes per token of one attention kind over all its layers: `layers * kv_heads * (head_dim + v_head_dim)
/// * dtype_bytes` (the model's bytes, without the arena's alignment).
[[nodiscard]] constexpr double attention_bytes_per_token(const AttentionShape& s) noexcept {
    const std::int32_t v = s.v_head_dim == 0 ? s.head_dim : s.v_head_dim;
    return double(s.layers) * s.kv_heads * (s.head_dim + v) * s.dtype_bytes;
}

/// The step price of one model on one accelerator (see the file comment). A plain value: copy it freely.
class CostModel {
public:
    /// The model `m` with parameters `p` on `hw`.
    constexpr CostModel(const ModelDescription& m, const ModelParameters& p, const Accelerator& hw = {}) noexcept
        : hw_(hw),
          params_(p),
          full_bytes_per_token_(attention_bytes_per_token(m.full)),
          swa_bytes_per_token_(attention_bytes_per_token(m.swa)),
          window_(m.swa_window_tokens),
          state_bytes_(double(m.mamba.layers) * double(m.mamba.conv_state_bytes + m.mamba.temporal_state_bytes)) {}

    /// The cost model of preset `P` on `hw`.
    template <class P>
    [[nodiscard]] static constexpr CostModel of(const Accelerator& hw = {}) noexcept {
        return CostModel(P::model, *find_model_parameters(P::name), hw);
    }

    /// Simulated milliseconds of a step doing `w`; 0 for a step with no work. O(1).
    [[nodiscard]] constexpr double operator()(const StepWork& w) const noexcept {
        return 1e3 * std::max({compute_seconds(w), memory_seconds(w), link_seconds(w), storage_seconds(w)});
    }

    /// The compute bound: `2 * active` FLOPs per token at `flops_per_s`.
    [[nodiscard]] constexpr double compute_seconds(const StepWork& w) const noexcept {
        return double(w.prefill_tokens + w.decode_tokens) * 2 * params_.active / hw_.flops_per_s;
    }
    /// The HBM bound: weights touched plus KV and state read, over `hbm_bytes_per_s`.
    [[nodiscard]] constexpr double memory_seconds(const StepWork& w) const noexcept {
        const double tokens = double(w.prefill_tokens + w.decode_tokens);
        const double bytes_per_parameter = params_.weight_bytes / params_.total;
        const double weights = std::min(params_.total, tokens * params_.active) * bytes_per_parameter;
        // Requests in the batch: each decoding one, plus at least one whose prefill runs.
        const double requests = double(w.decode_tokens) + (w.prefill_tokens > 0 ? 1 : 0);
        const double context = double(w.context_tokens);
        const double kv = context * full_bytes_per_token_ +
                          std::min(context, requests * window_) * swa_bytes_per_token_ + requests * 2 * state_bytes_;
        return (weights + kv) / hw_.hbm_bytes_per_s;
    }
    /// The host-link bound: the busier direction over `host_link_bytes_per_s`.
    [[nodiscard]] constexpr double link_seconds(const StepWork& w) const noexcept {
        return double(std::max(w.bytes_loaded, w.bytes_written)) / hw_.host_link_bytes_per_s;
    }

    /// The storage bound: a prefetch's latency and bytes over the store's read side.
    [[nodiscard]] constexpr double storage_seconds(const StepWork& w) const noexcept {
        return (w.bytes_fetched > 0 ? hw_.storage_latency_s : 0) +
               double(w.bytes_fetched) / hw_.storage_read_bytes_per_s;
    }

    /// The accelerator priced against.
    [[nodiscard]] constexpr const Accelerator& accelerator() const noexcept { return hw_; }
    /// The model's parameters.
    [[nodiscard]] constexpr const ModelParameters& parameters() const noexcept { return params_; }
    /// FULL KV bytes per token, all FULL layers.
    [[nodiscard]] constexpr double full_bytes_per_token() const noexcept { return full_bytes_per_token_; }
    /// SWA KV bytes per token, all SWA layers (0 without SWA).
    [[nodiscard]] constexpr double swa_bytes_per_token() const noexcept { return swa_bytes_per_token_; }

private:
    Accelerator hw_;
    ModelParameters params_;
    double full_bytes_per_token_;
    double swa_bytes_per_token_;
    double window_;       ///< SWA window in tokens (0 without SWA)
    double state_bytes_;  ///< one request's Mamba state, all layers (0 without Mamba)
};

/// The offered prefill load of a trace: the share of `instances` accelerators' compute peak that prefilling its
/// `prompt_tokens` cold (no prefix reused) takes when they arrive over `span_s` seconds. A cache lowers the load it
/// really puts on them by what it serves; decode, which is bound by memory rather than compute, is left out. O(1).
[[nodiscard]] constexpr double offered_prefill_load(const CostModel& m, std::int64_t prompt_tokens, double span_s,
                                                    std::int32_t instances) noexcept {
    if (span_s <= 0 || instances <= 0) return 0;
    return m.compute_seconds({.prefill_tokens = prompt_tokens}) / (span_s * instances);
}

}  // namespace unikv::sim
