#pragma once
/// \file
/// One replay of the simulator: preset `P`, the write policy and budget the options and the run ask for, the
/// memory at the replay's scale, the cost model (`run_preset<P>`). This header only declares it: every preset's
/// instantiation is compiled once, in `sim/replays.cpp` (which includes `detail/replay_run.inl`), so `main.cpp`
/// stays light and compiles beside it. Each instantiation holds one `Cache` type per budget it dispatches to:
/// 13 in all (`static_split_built`). The write policy is a runtime value (`HostConfig::write`), so every
/// preset runs every policy on the same `Cache` type.

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include <unikv/presets.hpp>

#include <unikv_sim/options.hpp>
#include <unikv_sim/replay_records.hpp>
#include <unikv_sim/static_split.hpp>
#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// The budget of one run.
enum class BudgetChoice : std::uint8_t {
    /// The preset's unified budget: SharedSWABudget (FULL+SWA), SharedHybridBudget (tri-pool), else BaseBudget.
    unified,
    static_split,  ///< PartitionedSWABudget at `RunSpec::swa_full_ratio` (SWA presets only)
};

/// What one run replays with.
struct RunSpec {
    BudgetChoice budget = BudgetChoice::unified;
    double swa_full_ratio = 0;  ///< SGLang's swa_full_tokens_ratio of the static split
    std::string label;          ///< for the progress line
    bool host_tier = true;      ///< false: no host memory (and so no storage tier below it)
    bool storage_tier = true;   ///< false: no storage tier even when `--storage` names one
};

/// A run's result and its budget in words (`SharedSWABudget`, `PartitionedSWABudget: FULL 1,234 pages, SWA 567
/// pages (ratio 0.8)`).
struct RunOutput {
    ReplayResult result;
    std::string budget;
};

/// Replays `trace` for preset `P` with the options `o` (memory, write policy, host link, progress) and the
/// budget of `spec`. Throws `InputError` for a combination that is not built (`check_built`), naming
/// `--device-memory` for a memory below one request, and what `replay` throws for a broken run.
template <class P>
RunOutput run_preset(const Trace& trace, const SimOptions& o, const RunSpec& spec);

/// True when `run_preset<P>` has a static split: the preset has SWA (`PartitionedSWABudget`) or Mamba
/// (`PartitionedMambaBudget`), a second pool to split the memory with.
template <class P>
inline constexpr bool static_split_built = P::model.swa.layers > 0 || P::model.mamba.layers > 0;

/// The SWA/FULL ratios `--compare-static` sweeps for `P`: `static_ratio_sweep` with SWA; without, only
/// SGLang's default, which then splits nothing (the FULL+Mamba split is its state pool). O(1).
template <class P>
[[nodiscard]] constexpr std::span<const double> static_ratios() noexcept {
    if constexpr (P::model.swa.layers > 0) return static_ratio_sweep;
    else return std::span(static_ratio_sweep).last(1);
}

/// Throws `InputError` naming the flag when `run_preset<P>` is not built for `o`: with `--compare-static`, a
/// preset without a static split (`static_split_built`). Every write policy runs on every preset. O(1).
template <class P>
void check_built(const SimOptions& o) {
    if (o.compare_static && !static_split_built<P>)
        throw InputError(message("--compare-static: ", P::name,
                                 " has no SWA or Mamba layers, so there is no static split to compare; it is built "
                                 "for the presets with SWA or Mamba (see --help)"));
}

extern template RunOutput run_preset<presets::Llama31_8B>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::Gemma3_27B>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::GptOss120B>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::GptOss20B>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::Qwen3Next80B>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::JambaV01>(const Trace&, const SimOptions&, const RunSpec&);
extern template RunOutput run_preset<presets::SyntheticTriHybrid>(const Trace&, const SimOptions&, const RunSpec&);

}  // namespace unikv::sim
