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

// A simple cost model: a fixed step cost, prefill and decode per token, host bytes over a 25 GB/s link. Slow
// steps bring many arrivals per step: the concurrency that presses the memory.
constexpr auto cost = [](const StepWork& w) {
    return 40.0 + 0.02 * static_cast<double>(w.prefill_tokens) + 0.1 * static_cast<double>(w.decode_tokens) +
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
    std::uint64_t device_tokens;  // device memory: this many tokens of FULL and SWA rows...
    std::uint64_t device_states;  // ...plus this many Mamba states
    double host_ratio;            // host memory over device memory
    bool preempts = true;         // the slice is tight enough to preempt (not yet tuned for every preset)
};

struct totals {
    std::int64_t steps = 0, host_hits = 0, preempted = 0, chunked = 0, restored = 0;
};

template <class P, class Write = unikv::WriteBack>
totals replay_slice(const slice& s) {
    const unikv::sim::Trace trace = unikv::sim::generate({.workload = s.workload, .seed = 7, .requests = scaled(s.requests)});
    const unikv::ArenaSpec real = unikv::make_arena_spec(
        unikv::arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = {16}}),
        unikv::layout_components_v<typename P::layout>);
    std::uint64_t device = s.device_states * real[unikv::Component::mamba].entry_bytes;
    for (const auto c : {unikv::Component::full, unikv::Component::swa})
        if (real[c].present) device += s.device_tokens * real[c].entry_bytes;
    const auto host = static_cast<std::uint64_t>(static_cast<double>(device) * s.host_ratio);
    const unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, host),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 8, .chunk_tokens = 512, .check_rows = true, .verify_every = 1}};
    ReplayResult r;
    try {
        r = unikv::sim::replay<policies<P, Write>>(trace, setup, cost);
    } catch (const std::exception& e) {
        const std::string what = e.what();
        FAIL(what);
    }
    INFO(P::name);
    CHECK(r.unfinished == 0);
    CHECK(r.requests.size() + r.dropped.size() == trace.requests().size());
    for (const std::int32_t d : r.dropped) {  // only a request the memory can never hold is dropped
        const unikv::sim::Request& q = trace.requests()[static_cast<std::size_t>(d)];
        CHECK(static_cast<std::uint64_t>(q.prompt_tokens + q.output_tokens) > s.device_tokens);
    }
    totals t;
    t.steps = static_cast<std::int64_t>(r.steps.size());
    for (const StepRecord& st : r.steps) {
        t.host_hits += st.host_hit_tokens;
        t.preempted += st.preempted;
        t.chunked += st.chunked;
        t.restored += st.restored;
    }
    MESSAGE(P::name, ": ", t.steps, " steps, ", r.dropped.size(), " dropped, host hit tokens ", t.host_hits, ", preempted ", t.preempted,
            ", restored ", t.restored, ", chunked ", t.chunked);
    CHECK(t.host_hits > 0);
    CHECK(t.chunked > 0);
    if (s.preempts) {
        CHECK(t.preempted > 0);
        if constexpr (unikv::Cache<policies<P, Write>>::can_retract) CHECK(t.restored > 0);
    }
    return t;
}

}  // namespace engine_test

// One case per preset (each a `Cache` instantiation); at least 20k steps in all in the CI size.
using W = unikv::sim::Workload;
namespace up = unikv::presets;

TEST_CASE("engine: llama-3.1-8b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::Llama31_8B>({W::chat, 32, 2048, 0, 1.0}).steps >= 2500);
}
TEST_CASE("engine: gemma-3-27b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::Gemma3_27B>({W::chat, 32, 2048, 0, 1.0}).steps >= 2500);
}
TEST_CASE("engine: gemma-3-27b under write-through") {
    CHECK(engine_test::replay_slice<up::Gemma3_27B, unikv::WriteThrough>({W::chat, 24, 2048, 0, 1.0}).steps >= 2000);
}
TEST_CASE("engine: gpt-oss-120b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::GptOss120B>({W::chat, 32, 1024, 0, 1.0, false}).steps >= 2500);
}
TEST_CASE("engine: gpt-oss-20b replays a tight agent workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::GptOss20B>({W::agent, 24, 9000, 0, 1.0, false}).steps >= 2000);
}
TEST_CASE("engine: qwen3-next-80b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::Qwen3Next80B>({W::chat, 32, 1024, 12, 1.0, false}).steps >= 2000);
}
TEST_CASE("engine: jamba-v0.1 replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::JambaV01>({W::chat, 32, 1024, 12, 1.0, false}).steps >= 2000);
}
TEST_CASE("engine: synthetic-tri-hybrid replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::SyntheticTriHybrid>({W::chat, 32, 1024, 12, 1.0, false}).steps >= 2000);
}

namespace engine_repeat_test {

// The records of a small write-through replay (loads and write-throughs in flight across steps), wall time zeroed.
unikv::sim::ReplayResult replay_once() {
    using P = up::Gemma3_27B;
    const unikv::sim::Trace trace = unikv::sim::generate({.workload = W::chat, .seed = 11, .requests = 16});
    const std::uint64_t device = std::uint64_t{1536} * 1024 * 1024;
    const unikv::sim::ReplaySetup setup{.cache = unikv::sim::replay_cache_config<P>(device, device),
                                        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
                                        .engine = {.max_running = 8, .chunk_tokens = 512, .check_rows = true}};
    unikv::sim::ReplayResult r =
        unikv::sim::replay<engine_test::policies<P, unikv::WriteThrough>>(trace, setup, engine_test::cost);
    for (unikv::sim::StepRecord& s : r.steps) s.cache_ns = 0;
    r.wall_seconds = 0;
    return r;
}

}  // namespace engine_repeat_test

TEST_CASE("engine: the same replay twice gives the same records, step by step") {
    const unikv::sim::ReplayResult a = engine_repeat_test::replay_once();
    const unikv::sim::ReplayResult b = engine_repeat_test::replay_once();
    std::int64_t written = 0;
    for (const unikv::sim::StepRecord& s : a.steps) written += static_cast<std::int64_t>(s.work.bytes_written);
    CHECK(written > 0);  // write-throughs ran: their acks are what used to follow the wall clock
    REQUIRE(a.steps.size() == b.steps.size());
    for (std::size_t i = 0; i < a.steps.size(); ++i) {
        INFO("step ", i);
        CHECK(a.steps[i] == b.steps[i]);
    }
    CHECK(a.requests == b.requests);
    CHECK(a.dropped == b.dropped);
}
