// unikv-sim: every preset's replays (`run_preset<P>`, unikv_sim/replay_run.hpp), instantiated in this one
// translation unit. One unit costs less than one per preset: most of a unit's compile time is the engine and
// cache code every preset shares (measured: 31 CPU-s for one preset's unit with one Cache, 120 CPU-s for all
// thirteen Caches in one unit; fifteen now), and main.cpp compiles beside it on a second core.
#include <unikv_sim/detail/replay_run.inl>

namespace unikv::sim {

template RunOutput run_preset<presets::Llama31_8B>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::Gemma3_27B>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::GptOss120B>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::GptOss20B>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::Qwen3Next80B>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::JambaV01>(const Trace&, const SimOptions&, const RunSpec&);
template RunOutput run_preset<presets::SyntheticTriHybrid>(const Trace&, const SimOptions&, const RunSpec&);

}  // namespace unikv::sim
