// The engine loop (sim/unikv_sim/engine.hpp) over every preset: a generated workload in memory tight enough to
// force eviction, host load-backs, chunked prefill and preemption, with every row read back through translation
// (the engine throws on a wrong one) and the byte accounting verified at every step. Longer runs:
// UNIKV_SIM_ENGINE_STEPS=N replays about N steps per preset.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/presets.hpp>
#include <unikv/tree/reference_tree.hpp>
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
    std::int32_t max_running = 8;  // the engine's max_running: more running requests press the decode harder
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
        .engine = {.max_running = s.max_running, .chunk_tokens = 512, .check_rows = true, .verify_every = 1}};
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
    CHECK(t.preempted > 0);
    if constexpr (unikv::Cache<policies<P, Write>>::can_retract) CHECK(t.restored > 0);
    return t;
}

// ---- the golden test -------------------------------------------------------------------------------------------

// The device-hit tokens the engine should have found for each request, from an independent replay of the same
// trace through `ReferenceTree<Full>` (memory large enough that nothing is evicted, no chunking, no preemption).
// The engine's rule, from `detail/engine.inl`:
// * admission (`try_admit`) matches the prompt but its last token (always computed) and serves the match's
//   device length, which the tree keeps page aligned;
// * a finished request inserts the whole pages of its rows (prompt + output - 1 tokens). Its output tokens are
//   its own (never in another prompt), so of those pages only the prompt's whole pages can ever match:
//   the reference inserts `prompt[0, floor(prompt / page) * page)`;
// * a chunked prefill also inserts its whole pages at each chunk boundary; the records do not say when a chunk
//   ran, so the golden replay runs without chunking (a chunk budget above any step's prompts);
// * within a step admissions come before the forward and finishes after it, so a request admitted in the step
//   another finishes does not see it. Without chunking a request is admitted in the step that gives its first
//   token, so request B sees A's insert exactly when `A.finish_ms < B.first_token_ms` (steps cost > 0).
// The order of events comes from the engine's records; which tokens hit comes from the reference tree only.
std::vector<std::int32_t> reference_device_hits(const unikv::sim::Trace& trace, const ReplayResult& r,
                                                std::int32_t page) {
    struct event {
        double at;
        bool insert;  // false: the admission (before any insert at the same time)
        std::int32_t index;
    };
    std::vector<event> events;
    for (const unikv::sim::RequestRecord& q : r.requests) {
        events.push_back({q.first_token_ms, false, q.index});
        events.push_back({q.finish_ms, true, q.index});
    }
    std::sort(events.begin(), events.end(), [](const event& a, const event& b) {
        return a.at != b.at ? a.at < b.at : a.insert < b.insert;
    });
    unikv::ReferenceTree<unikv::Full> tree({.page_size = {page}});
    std::vector<std::int32_t> hits(trace.requests().size(), -1);
    std::vector<unikv::TokenId> tokens;
    std::vector<unikv::VirtualPage> pages;
    for (const event& e : events) {
        const unikv::sim::Request& q = trace.requests()[static_cast<std::size_t>(e.index)];
        tokens.resize(static_cast<std::size_t>(q.prompt_tokens));
        trace.prompt_tokens(q, tokens);
        if (!e.insert) {
            const unikv::MatchResult m = tree.match_prefix({std::span<const unikv::TokenId>(tokens).first(tokens.size() - 1)});
            hits[static_cast<std::size_t>(e.index)] = m.device_length;
            continue;
        }
        const std::size_t whole = tokens.size() / static_cast<std::size_t>(page);
        pages.clear();
        for (std::size_t p = 0; p < whole; ++p) pages.push_back(unikv::VirtualPage{e.index * 4096 + static_cast<std::int32_t>(p)});
        tree.insert({std::span<const unikv::TokenId>(tokens).first(whole * static_cast<std::size_t>(page))}, {.pages = pages})
            .actions.mark_drained();  // its duplicate pages are the engine's business, not the reference's
    }
    return hits;
}

}  // namespace engine_test

TEST_CASE("engine: golden device hits per request against a ReferenceTree replay of the same trace") {
    using P = unikv::presets::Llama31_8B;
    const unikv::sim::Trace trace = unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 11, .requests = 24});
    // Nothing is evicted: the device holds every row of the trace at once, the host as much again.
    std::uint64_t rows = 0;
    for (const unikv::sim::Request& q : trace.requests()) rows += static_cast<std::uint64_t>(q.prompt_tokens + q.output_tokens + 16);
    const std::uint64_t device = rows * unikv::make_arena_spec(unikv::arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = {16}}),
                                                               unikv::layout_components_v<typename P::layout>)[unikv::Component::full].entry_bytes;
    const std::uint64_t host = device;
    const unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, host),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 6, .chunk_tokens = 1 << 24, .check_rows = true, .verify_every = 1}};
    const engine_test::ReplayResult r = unikv::sim::replay<engine_test::policies<P>>(trace, setup, engine_test::cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    std::int64_t preempted = 0, chunked = 0, host_hits = 0;
    for (const engine_test::StepRecord& st : r.steps) {
        preempted += st.preempted;
        chunked += st.chunked;
        host_hits += st.host_hit_tokens;
    }
    REQUIRE(preempted == 0);
    REQUIRE(chunked == 0);
    REQUIRE(host_hits == 0);
    const std::vector<std::int32_t> expected = engine_test::reference_device_hits(trace, r, 16);
    std::int64_t total = 0, hit_requests = 0;
    for (const unikv::sim::RequestRecord& q : r.requests) {
        INFO("request ", q.index, " (prompt ", q.prompt_tokens, ")");
        CHECK(q.device_hit_tokens == expected[static_cast<std::size_t>(q.index)]);
        total += q.device_hit_tokens;
        hit_requests += q.device_hit_tokens > 0 ? 1 : 0;
    }
    MESSAGE("golden: ", r.requests.size(), " requests, ", hit_requests, " with device hits, ", total, " hit tokens, ",
            r.steps.size(), " steps");
    CHECK(hit_requests >= 10);  // the trace shares enough for the comparison to mean something
}

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
// The admission charges a request its whole decode (max_new), so only the running requests' remaining decode can
// outgrow the memory: a slice preempts when several long replies run at once. gpt-oss: SWA (window 128) is
// cheap, so FULL gets nearly the whole arena and a slice needs about 1,500 tokens over 40 chat requests.
// qwen3-next: one Mamba state holds the bytes of thousands of FULL tokens, so states, not tokens, size the
// memory; 5 states (3 is the floor) with 2,048 tokens make the FULL decode fall short.
TEST_CASE("engine: gpt-oss-120b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::GptOss120B>({W::chat, 40, 1500, 0, 1.0, 16}).steps >= 2500);
}
TEST_CASE("engine: gpt-oss-20b replays a tight chat workload over twice the host memory, rows and accounting checked") {
    CHECK(engine_test::replay_slice<up::GptOss20B>({W::chat, 40, 1500, 0, 2.0, 16}).steps >= 2000);
}
TEST_CASE("engine: qwen3-next-80b replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::Qwen3Next80B>({W::chat, 32, 2048, 5, 1.0, 16}).steps >= 2000);
}
TEST_CASE("engine: jamba-v0.1 replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::JambaV01>({W::chat, 48, 2500, 8, 1.0, 32}).steps >= 4000);
}
TEST_CASE("engine: synthetic-tri-hybrid replays a tight chat workload, rows and accounting checked every step") {
    CHECK(engine_test::replay_slice<up::SyntheticTriHybrid>({W::chat, 48, 2500, 8, 1.0, 32}).steps >= 4000);
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

