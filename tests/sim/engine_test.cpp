// The engine loop (sim/unikv_sim/engine.hpp) over every preset: a generated workload in memory tight enough to
// force eviction, host load-backs, chunked prefill and preemption, with every row read back through translation
// (the engine throws on a wrong one) and the byte accounting verified at every step. Longer runs:
// UNIKV_SIM_ENGINE_STEPS=N replays about N steps per preset.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <unikv/budget/shared_hybrid_budget.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/presets.hpp>
#include <unikv/storage/file_storage.hpp>
#include <unikv/tree/reference_tree.hpp>
#include <unikv_sim/engine.hpp>
#include <unikv_sim/generators.hpp>
#include <unikv_sim/metrics.hpp>
#include <unikv_sim/replay_scale.hpp>

namespace engine_test {

using unikv::sim::ReplayResult;
using unikv::sim::StepRecord;
using unikv::sim::StepWork;

template <class P>
struct policies : unikv::DefaultCachePolicies {
    using layout = typename P::layout;
    using budget = std::conditional_t<
        unikv::layout_has_v<layout, unikv::Component::swa>,
        std::conditional_t<unikv::layout_has_v<layout, unikv::Component::mamba>, unikv::SharedHybridBudget,
                           unikv::SharedSWABudget>,
        unikv::BaseBudget>;
};

// `config` with the host tier's write policy `writes` (the replay's default is write-back).
unikv::CacheConfig with_writes(unikv::CacheConfig config, const unikv::HostWrites& writes) {
    config.host.write = writes;
    return config;
}

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

template <class P>
totals replay_slice(const slice& s, const unikv::HostWrites& writes = {.policy = unikv::WritePolicy::back}) {
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = s.workload, .seed = 7, .requests = scaled(s.requests)});
    const unikv::ArenaSpec real = unikv::make_arena_spec(
        unikv::arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = {16}}),
        unikv::layout_components_v<typename P::layout>);
    std::uint64_t device = s.device_states * real[unikv::Component::mamba].entry_bytes;
    for (const auto c : {unikv::Component::full, unikv::Component::swa})
        if (real[c].present) device += s.device_tokens * real[c].entry_bytes;
    const auto host = static_cast<std::uint64_t>(static_cast<double>(device) * s.host_ratio);
    const unikv::sim::ReplaySetup setup{
        .cache = with_writes(unikv::sim::replay_cache_config<P>(device, host), writes),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = s.max_running, .chunk_tokens = 512, .check_rows = true, .verify_every = 1}};
    ReplayResult r;
    try {
        r = unikv::sim::replay<policies<P>>(trace, setup, cost);
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
    MESSAGE(P::name, ": ", t.steps, " steps, ", r.dropped.size(), " dropped, host hit tokens ", t.host_hits,
            ", preempted ", t.preempted, ", restored ", t.restored, ", chunked ", t.chunked);
    CHECK(t.host_hits > 0);
    CHECK(t.chunked > 0);
    CHECK(t.preempted > 0);
    // With host memory only the device's size, a retracted request's cached prompt (its first decode cached it)
    // is often written back before its restore, which then recomputes: copies back are asked of roomier hosts.
    if constexpr (unikv::Cache<policies<P>>::can_retract) {
        if (s.host_ratio >= 2.0) CHECK(t.restored > 0);
    }
    return t;
}

// Device bytes of preset `P` that hold every row of `trace` at once (each request's prompt, output and `slack`
// tokens in every token pool, half as much again, and 256 Mamba states): nothing is ever evicted.
template <class P>
std::uint64_t room_for_every_row(const unikv::sim::Trace& trace, std::int32_t slack) {
    std::uint64_t rows = 0;
    for (const unikv::sim::Request& q : trace.requests())
        rows += static_cast<std::uint64_t>(q.prompt_tokens + q.output_tokens + slack);
    const unikv::ArenaSpec spec = unikv::make_arena_spec(
        unikv::arena_config<P>({.arena_bytes = std::size_t{1} << 40, .page_size = {16}}),
        unikv::layout_components_v<typename P::layout>);
    std::uint64_t per_token = 0;  // a row of each token pool (a Mamba state is per request, not per token)
    for (const unikv::Component c : {unikv::Component::full, unikv::Component::swa})
        if (spec[c].present) per_token += spec[c].entry_bytes;
    const std::uint64_t states = spec[unikv::Component::mamba].present ? spec[unikv::Component::mamba].entry_bytes : 0;
    return rows * per_token * 3 / 2 + 256 * states;
}

// ---- the golden test -------------------------------------------------------------------------------------------

// What the reference replay expects: each request's device-hit tokens (by trace index), and how many first
// admissions hit pages that a chunk of a still unfinished request inserted (what only the chunk inserts serve).
struct reference_hits {
    std::vector<std::int32_t> hits;
    std::int32_t chunk_served = 0;
};

// The device-hit tokens the engine should have found for each request, from an independent replay of the same
// trace through `ReferenceTree<Full>` (memory large enough that nothing is evicted nor preempted). The engine's
// rule, from `detail/engine.inl`:
// * admission (`try_admit`) matches the prompt but its last token (always computed), serves the match's device
//   length (page aligned) and extends the rest; the step's chunk budget (`chunk_tokens` prefill tokens) cuts an
//   extension longer than what is left to whole pages of it. A step admits the request between two chunks
//   first, then arrivals in trace order;
// * a cut (chunked) prefill inserts its rows' whole pages after the step's forward and goes on in the next step
//   from a fresh match (which may reach past its own chunk);
// * a finished request inserts the whole pages of its rows (prompt + output - 1 tokens). Its output tokens are
//   the prompt tokens of the later request that continues it (`continuations`) as far as that prompt reaches,
//   and ids no prompt holds after it, so of those pages only the ones within its prompt and that continuation
//   can ever match: the reference inserts those whole pages;
// * the inserts after a step's forward are seen from the next step's admissions on.
// The records give each request's steps (first admission, first token, finish): it is chunked from its
// admission to the step before its first token. Which tokens hit and what each step prefills come from the
// reference tree and the rule above only; each step's prefill tokens and chunk count are checked against the
// step records, so a schedule the rule does not describe fails here rather than matching by luck.
// The step of `r` that starts (`start`) or ends at `ms`.
std::size_t step_at(const ReplayResult& r, double ms, bool start) {
    const auto s = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepRecord& st) {
        return (start ? st.start_ms : st.start_ms + st.duration_ms) == ms;
    });
    REQUIRE(s != r.steps.end());
    return static_cast<std::size_t>(s - r.steps.begin());
}

// What a finished request `q` of `trace` leaves matchable in the tree: its prompt, then its output as far as the
// later prompt that continues it (`continued`) holds the same tokens.
std::vector<unikv::TokenId> cached_tokens(const unikv::sim::Trace& trace, const unikv::sim::RequestRecord& q,
                                          const std::vector<std::int32_t>& continued) {
    const auto i = static_cast<std::size_t>(q.index);
    std::vector<unikv::TokenId> out(static_cast<std::size_t>(q.prompt_tokens));
    trace.prompt_tokens(trace.requests()[i], out);
    if (continued[i] == unikv::sim::no_continuation) return out;
    const unikv::sim::Request& later = trace.requests()[static_cast<std::size_t>(continued[i])];
    const std::int32_t end = std::min(later.prompt_tokens, q.prompt_tokens + q.output_tokens - 1);
    for (std::int32_t pos = q.prompt_tokens; pos < end; ++pos) out.push_back(unikv::sim::prompt_token(trace, later, pos));
    return out;
}

reference_hits reference_device_hits(const unikv::sim::Trace& trace, const ReplayResult& r, std::int32_t page,
                                     std::int32_t chunk_tokens) {
    struct steps_of {
        std::size_t admitted, first_token, finish;
    };
    const std::size_t n = trace.requests().size();
    std::vector<steps_of> at(n);
    std::vector<std::vector<std::int32_t>> admitted_in(r.steps.size());  // first admissions of each step
    std::vector<std::vector<unikv::TokenId>> prompts(n), cached(n);  // cached: its prompt and continued output
    const std::vector<std::int32_t> continued = unikv::sim::continuations(trace);
    for (const unikv::sim::RequestRecord& q : r.requests) {
        const auto i = static_cast<std::size_t>(q.index);
        at[i] = {step_at(r, q.admitted_ms, true), step_at(r, q.first_token_ms, false), step_at(r, q.finish_ms, false)};
        admitted_in[at[i].admitted].push_back(q.index);
        cached[i] = cached_tokens(trace, q, continued);
        prompts[i].assign(cached[i].begin(), cached[i].begin() + q.prompt_tokens);
    }
    for (std::vector<std::int32_t>& a : admitted_in) std::sort(a.begin(), a.end());

    unikv::ReferenceTree<unikv::Full> tree({.page_size = {page}});
    std::vector<std::int32_t> chunk_owner;  // by reference page id: the request whose chunk inserted it, or -1
    std::vector<bool> finished(n, false);
    const auto insert = [&](std::int32_t index, std::int32_t tokens, bool chunk) {
        std::vector<unikv::VirtualPage> pages;
        for (std::int32_t p = 0; p < tokens / page; ++p) {
            pages.push_back(unikv::VirtualPage{static_cast<std::int32_t>(chunk_owner.size())});
            chunk_owner.push_back(chunk ? index : -1);
        }
        const std::span<const unikv::TokenId> key(cached[static_cast<std::size_t>(index)]);
        tree.insert({key.first(static_cast<std::size_t>(tokens / page * page))}, {.pages = pages})
            .actions.mark_executed();  // its duplicate pages are the engine's business, not the reference's
    };

    reference_hits out{.hits = std::vector<std::int32_t>(n, -1)};
    std::optional<std::int32_t> between_chunks;  // chunked in the previous step
    for (std::size_t t = 0; t < r.steps.size(); ++t) {
        INFO("step ", t);
        std::vector<std::int32_t> order;
        if (between_chunks) order.push_back(*between_chunks);
        order.insert(order.end(), admitted_in[t].begin(), admitted_in[t].end());
        between_chunks.reset();
        std::int32_t left = chunk_tokens, chunked = 0, chunk_end = 0;
        std::int64_t prefill = 0;
        for (const std::int32_t i : order) {
            const std::vector<unikv::TokenId>& prompt = prompts[static_cast<std::size_t>(i)];
            const unikv::MatchResult m =
                tree.match_prefix({std::span<const unikv::TokenId>(prompt).first(prompt.size() - 1)});
            if (at[static_cast<std::size_t>(i)].admitted == t) {
                out.hits[static_cast<std::size_t>(i)] = m.device_length;
                const auto unfinished_chunk = [&](unikv::VirtualPage v) {
                    const std::int32_t owner = chunk_owner[static_cast<std::size_t>(v.value())];
                    return owner >= 0 && owner != i && !finished[static_cast<std::size_t>(owner)];
                };
                const bool served = std::any_of(m.device_pages.begin(), m.device_pages.end(), unfinished_chunk);
                out.chunk_served += served ? 1 : 0;
            }
            const std::int32_t extend = static_cast<std::int32_t>(prompt.size()) - m.device_length;
            const bool cut = t < at[static_cast<std::size_t>(i)].first_token;
            INFO("request ", i, " extends ", extend, " of a chunk budget's ", left, " left");
            REQUIRE(cut == (extend > left));
            const std::int32_t take = cut ? left / page * page : extend;
            REQUIRE(take > 0);
            if (cut) {
                between_chunks = i;
                chunk_end = m.device_length + take;
                ++chunked;
            }
            left -= take;
            prefill += take;
        }
        CHECK(r.steps[t].work.prefill_tokens == prefill);
        CHECK(r.steps[t].chunked == chunked);
        if (between_chunks) insert(*between_chunks, chunk_end, true);
        for (const unikv::sim::RequestRecord& q : r.requests) {
            if (at[static_cast<std::size_t>(q.index)].finish != t) continue;
            insert(q.index, static_cast<std::int32_t>(cached[static_cast<std::size_t>(q.index)].size()), false);
            finished[static_cast<std::size_t>(q.index)] = true;
        }
    }
    return out;
}

struct golden_totals {
    std::int64_t chunked = 0, hit_requests = 0, hit_tokens = 0, chunk_served = 0;
};

// Replays a chat trace on llama-3.1-8b with room for every row, compares each request's device hits with the
// reference's and returns the totals.
golden_totals golden_replay(std::int32_t chunk_tokens) {
    using P = unikv::presets::Llama31_8B;
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 11, .requests = 24});
    // Nothing is evicted: the device holds every row of the trace at once, the host as much again.
    const std::uint64_t device = room_for_every_row<P>(trace, 16);
    const std::uint64_t host = device;
    const unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, host),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 6, .chunk_tokens = chunk_tokens, .check_rows = true, .verify_every = 1}};
    const ReplayResult r = unikv::sim::replay<policies<P>>(trace, setup, cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    golden_totals t;
    std::int64_t preempted = 0, host_hits = 0;
    for (const StepRecord& st : r.steps) {
        preempted += st.preempted;
        t.chunked += st.chunked;
        host_hits += st.host_hit_tokens;
    }
    REQUIRE(preempted == 0);
    REQUIRE(host_hits == 0);
    const reference_hits expected = reference_device_hits(trace, r, 16, chunk_tokens);
    for (const unikv::sim::RequestRecord& q : r.requests) {
        INFO("request ", q.index, " (prompt ", q.prompt_tokens, ")");
        CHECK(q.device_hit_tokens == expected.hits[static_cast<std::size_t>(q.index)]);
        t.hit_tokens += q.device_hit_tokens;
        t.hit_requests += q.device_hit_tokens > 0 ? 1 : 0;
    }
    t.chunk_served = expected.chunk_served;
    MESSAGE("golden, chunk budget ", chunk_tokens, ": ", r.requests.size(), " requests, ", t.hit_requests,
            " with device hits (", t.chunk_served, " served by an unfinished request's chunk), ", t.hit_tokens,
            " hit tokens, ", t.chunked, " chunked admissions, ", r.steps.size(), " steps");
    return t;
}

// The golden test of the retention policies on an SWA model (gpt-oss-20b, window W), without chunking and with
// room for every row: a `ReferenceTree<Full, Swa>` replay of the rule the cache follows (docs/cache.md,
// "Retention"), from each request's steps in the records:
// * admission matches the prompt but its last token and serves the device length; where the FULL pages reach
//   further (`full_length`), that is its branch point;
// * its first decode (the step after its first token, after that step's admissions) caches its prefix at the
//   branch point, then at its prompt's last whole page, each with the window before it: a handle tombstones its
//   own SWA rows only, a whole page at a time, those before `point - W`;
// * its finish (after the step's decodes) caches its prompt and continued output the same way.
std::vector<std::int32_t> reference_swa_hits(const unikv::sim::Trace& trace, const ReplayResult& r, std::int32_t page,
                                             std::int32_t window) {
    struct request_state {
        std::size_t admitted = 0, first_decode = 0, finish = 0;
        std::int32_t prompt = 0, rows = 0, prefix = 0, swa_start = 0, branch = 0;
        std::vector<unikv::TokenId> cached;  // its prompt and continued output
    };
    const std::size_t n = trace.requests().size();
    std::vector<request_state> q(n);
    std::vector<std::int32_t> order;  // by first admission, then index: the engine's running order
    const std::vector<std::int32_t> continued = unikv::sim::continuations(trace);
    for (const unikv::sim::RequestRecord& rec : r.requests) {
        request_state& x = q[static_cast<std::size_t>(rec.index)];
        x.admitted = step_at(r, rec.admitted_ms, true);
        x.first_decode = rec.output_tokens > 1 ? step_at(r, rec.first_token_ms, false) + 1 : r.steps.size();
        x.finish = step_at(r, rec.finish_ms, false);
        x.prompt = rec.prompt_tokens;
        x.rows = rec.prompt_tokens + rec.output_tokens - 1;
        x.cached = cached_tokens(trace, rec, continued);
        order.push_back(rec.index);
    }
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        return std::pair(q[static_cast<std::size_t>(a)].admitted, a) < std::pair(q[static_cast<std::size_t>(b)].admitted, b);
    });

    unikv::ReferenceTree<unikv::Full, unikv::Swa> tree({.page_size = {page}, .swa_window = window});
    std::int32_t next_page = 0;
    // Caches `x`'s rows [0, at) after sliding its window to `at` (its own pages only, from its prefix on).
    const auto cache_prefix = [&](request_state& x, std::int32_t at, std::int32_t key_tokens) {
        if (const std::int32_t slid = at - window - x.swa_start; slid >= page) x.swa_start += slid / page * page;
        const std::int32_t len = std::min(at, key_tokens) / page * page;
        std::vector<unikv::VirtualPage> pages;
        for (std::int32_t p = 0; p < len / page; ++p) pages.push_back(unikv::VirtualPage{next_page++});
        tree.insert({std::span<const unikv::TokenId>(x.cached).first(static_cast<std::size_t>(len))},
                    {.pages = pages, .swa_evicted = std::min(x.swa_start, len)})
            .actions.mark_executed();
        x.prefix = at;
        x.swa_start = std::max(x.swa_start, at);
    };
    std::vector<std::int32_t> hits(n, -1);
    for (std::size_t t = 0; t < r.steps.size(); ++t) {
        for (const std::int32_t i : order) {  // admissions
            request_state& x = q[static_cast<std::size_t>(i)];
            if (x.admitted != t) continue;
            const unikv::MatchResult m = tree.match_prefix(
                {std::span<const unikv::TokenId>(x.cached).first(static_cast<std::size_t>(x.prompt - 1))});
            hits[static_cast<std::size_t>(i)] = m.device_length;
            x.prefix = x.swa_start = m.device_length;
            x.branch = m.full_length > m.device_length ? m.full_length : 0;
        }
        // First decodes (or, without any, the finish) keep the branch point's window, then the prompt end's.
        const auto keep = [&](request_state& x, bool prompt_end) {
            const std::int32_t whole = (prompt_end ? x.prompt : x.rows) / page * page;
            if (x.branch > x.prefix && x.branch < whole && x.swa_start <= std::max(x.prefix, x.branch - window))
                cache_prefix(x, x.branch, x.rows);
            if (prompt_end && whole > x.prefix) cache_prefix(x, whole, x.rows);
        };
        for (const std::int32_t i : order) {
            request_state& x = q[static_cast<std::size_t>(i)];
            if (x.first_decode == t) keep(x, true);
        }
        for (const std::int32_t i : order) {
            request_state& x = q[static_cast<std::size_t>(i)];
            if (x.finish != t) continue;
            if (x.first_decode == r.steps.size()) keep(x, false);
            cache_prefix(x, x.rows, static_cast<std::int32_t>(x.cached.size()));
        }
    }
    return hits;
}

TEST_CASE("engine: golden device hits on gpt-oss-20b with the retention policies, against a ReferenceTree<Full, Swa>") {
    using P = unikv::presets::GptOss20B;
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 11, .requests = 24});
    const std::uint64_t device = room_for_every_row<P>(trace, 16);
    const unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, device),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 6, .chunk_tokens = 1 << 24, .check_rows = true, .verify_every = 1}};
    const ReplayResult r = unikv::sim::replay<policies<P>>(trace, setup, cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    std::int64_t preempted = 0, chunked = 0;
    for (const StepRecord& st : r.steps) {
        preempted += st.preempted;
        chunked += st.chunked;
    }
    REQUIRE(preempted == 0);
    REQUIRE(chunked == 0);
    const std::vector<std::int32_t> expected = reference_swa_hits(trace, r, 16, 128);
    std::int64_t hit_tokens = 0, hit_requests = 0;
    for (const unikv::sim::RequestRecord& rec : r.requests) {
        INFO("request ", rec.index, " (prompt ", rec.prompt_tokens, ")");
        CHECK(rec.device_hit_tokens == expected[static_cast<std::size_t>(rec.index)]);
        hit_tokens += rec.device_hit_tokens;
        hit_requests += rec.device_hit_tokens > 0 ? 1 : 0;
    }
    MESSAGE("golden gpt-oss-20b: ", r.requests.size(), " requests, ", hit_requests, " with device hits, ", hit_tokens,
            " hit tokens");
    CHECK(hit_requests >= 10);  // a reference without the branch points' windows differs on 7 requests, a replay
                                // without the policies on 9
}

}  // namespace engine_test

TEST_CASE("engine: golden device hits per request against a ReferenceTree replay of the same trace") {
    const engine_test::golden_totals t = engine_test::golden_replay(1 << 24);
    CHECK(t.chunked == 0);
    CHECK(t.hit_requests >= 10);  // the trace shares enough for the comparison to mean something
}

TEST_CASE("engine: golden device hits with chunked prefill, the chunks' inserts serving later admissions") {
    const engine_test::golden_totals t = engine_test::golden_replay(256);
    CHECK(t.chunked >= 10);
    CHECK(t.chunk_served >= 5);  // requests admitted between a chunk's insert and its request's finish
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
    CHECK(engine_test::replay_slice<up::Gemma3_27B>({W::chat, 24, 2048, 0, 1.0},
                                                    {.policy = unikv::WritePolicy::through})
              .steps >= 2000);
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
    const unikv::HostWrites through{.policy = unikv::WritePolicy::through};
    const unikv::sim::ReplaySetup setup{.cache = engine_test::with_writes(
                                            unikv::sim::replay_cache_config<P>(device, device), through),
                                        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
                                        .engine = {.max_running = 8, .chunk_tokens = 512, .check_rows = true}};
    unikv::sim::ReplayResult r =
        unikv::sim::replay<engine_test::policies<P>>(trace, setup, engine_test::cost);
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


// ---- where missed reuse goes -----------------------------------------------------------------------------------

namespace engine_test {

// A chat replay of preset `P` with room for every row (as the golden replay), outputs continued or fresh.
template <class P>
ReplayResult roomy_chat(bool continue_outputs, unikv::RetentionConfig retention = {}) {
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 5, .requests = 60});
    const std::uint64_t device = room_for_every_row<P>(trace, 64);
    unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, device / 2),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 8, .check_rows = true, .continue_outputs = continue_outputs, .verify_every = 16}};
    setup.cache.retention = retention;
    ReplayResult r = unikv::sim::replay<policies<P>>(trace, setup, cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    // The causes add up to what each first admission missed of its limit.
    for (const unikv::sim::RequestRecord& q : r.requests) {
        INFO("request ", q.index);
        const std::int32_t gap = std::max(0, q.limit_tokens - q.device_hit_tokens - q.host_hit_tokens);
        CHECK(q.lost_to_full + q.lost_to_swa + q.lost_to_mamba + q.lost_to_concurrency == gap);
        CHECK(q.lost_to_routing == 0);  // one instance
        CHECK(q.limit_tokens <= q.prompt_tokens - 1);
    }
    return r;
}

struct lost_totals {
    std::int64_t hits = 0, limit = 0, full = 0, swa = 0, mamba = 0, concurrent = 0;
    double kept_bytes = 0;  // SWA rows and states the tree held per cached FULL token
};
inline lost_totals lost_of(const ReplayResult& r) {
    lost_totals t;
    for (const unikv::sim::RequestRecord& q : r.requests) {
        t.hits += q.device_hit_tokens + q.host_hit_tokens;
        t.limit += q.limit_tokens;
        t.full += q.lost_to_full;
        t.swa += q.lost_to_swa;
        t.mamba += q.lost_to_mamba;
        t.concurrent += q.lost_to_concurrency;
    }
    t.kept_bytes = unikv::sim::compute_figures(r).window_state_bytes_per_token;
    return t;
}

}  // namespace engine_test

TEST_CASE("engine: missed reuse by cause, and outputs that feed the next turn (gpt-oss-20b, qwen3-next, llama)") {
    using namespace engine_test;
    // FULL-only: with memory to spare nothing is missed for a window or a state, and the continued outputs are
    // reused by the next turns.
    const lost_totals llama_fresh = lost_of(roomy_chat<up::Llama31_8B>(false));
    const lost_totals llama = lost_of(roomy_chat<up::Llama31_8B>(true));
    CHECK(llama.swa + llama.mamba + llama_fresh.swa + llama_fresh.mamba == 0);
    CHECK(llama.kept_bytes == 0);  // no SWA rows nor states to keep
    CHECK(llama.concurrent > 0);  // a request can come while the one that would cache its prefix still runs
    CHECK(llama.limit > llama_fresh.limit);
    CHECK(llama.hits > llama_fresh.hits);
    // GPT-OSS (a 128-token window): without retention, fresh outputs lose the prompt's window (decode slid past
    // it) and the misses are windows, not FULL pages; continued outputs match through the output. With the
    // default retention (prompt ends, branch points) both reach 0.95x the FULL-only model.
    const unikv::RetentionConfig off{.prompt_ends = false, .branch_points = false};
    const lost_totals oss_off = lost_of(roomy_chat<up::GptOss20B>(false, off));
    CHECK(oss_off.swa > oss_off.full);
    const lost_totals oss_fresh = lost_of(roomy_chat<up::GptOss20B>(false));
    const lost_totals oss = lost_of(roomy_chat<up::GptOss20B>(true));
    CHECK(oss_fresh.hits > 2 * oss_off.hits);
    CHECK(oss_fresh.hits * 100 >= 95 * llama_fresh.hits);
    CHECK(oss.hits * 100 >= 95 * llama.hits);
    CHECK(oss.mamba == 0);
    CHECK(oss_fresh.kept_bytes > oss_off.kept_bytes);  // what the kept windows cost
    // Qwen3-Next: without retention the misses are Mamba states (no checkpoint at the shared prompts' branch
    // points); with it, 0.95x the FULL-only model.
    const lost_totals qwen_off = lost_of(roomy_chat<up::Qwen3Next80B>(true, off));
    CHECK(qwen_off.swa == 0);
    CHECK(qwen_off.mamba > qwen_off.full);
    const lost_totals qwen = lost_of(roomy_chat<up::Qwen3Next80B>(true));
    CHECK(qwen.hits * 100 >= 95 * llama.hits);
    CHECK(qwen.kept_bytes > qwen_off.kept_bytes);
    MESSAGE("hits / limit, lost to FULL, SWA, Mamba: llama ", llama.hits, "/", llama.limit, " (fresh outputs ",
            llama_fresh.hits, "/", llama_fresh.limit, "); gpt-oss ", oss.hits, "/", oss.limit, ", ", oss.full, ", ",
            oss.swa, " (fresh ", oss_fresh.hits, "/", oss_fresh.limit, ", ", oss_fresh.full, ", ", oss_fresh.swa,
            "; no retention ", oss_off.hits, ", ", oss_off.full, ", ", oss_off.swa, "); qwen ", qwen.hits, "/",
            qwen.limit, ", ", qwen.full, ", ", qwen.mamba, " (no retention ", qwen_off.hits, ", ", qwen_off.full,
            ", ", qwen_off.mamba, "); still being computed: llama ", llama.concurrent, ", gpt-oss ", oss.concurrent,
            ", qwen ", qwen.concurrent);
}

// ---- a cluster of instances behind a router --------------------------------------------------------------------

TEST_CASE("router: round-robin rotates, least-loaded takes the shortest queue, prefix the holder within a threshold") {
    using unikv::sim::ClusterConfig;
    using unikv::sim::InstanceView;
    using unikv::sim::RouterChoice;
    using unikv::sim::route;
    const std::vector<InstanceView> views{{.queued_tokens = 500, .running = 1, .cached_prefix = 0},
                                          {.queued_tokens = 100, .running = 3, .cached_prefix = 64},
                                          {.queued_tokens = 100, .running = 2, .cached_prefix = 0},
                                          {.queued_tokens = 900, .running = 0, .cached_prefix = 256}};
    CHECK(route({.instances = 4, .router = RouterChoice::round_robin}, views, 0) == 0);
    CHECK(route({.instances = 4, .router = RouterChoice::round_robin}, views, 7) == 3);
    // Equal queues: the fewer running requests; equal loads: the first from `arrival mod N` on.
    CHECK(route({.instances = 4, .router = RouterChoice::least_loaded}, views, 0) == 2);
    const std::vector<InstanceView> idle(3);
    CHECK(route({.instances = 3, .router = RouterChoice::least_loaded}, idle, 0) == 0);
    CHECK(route({.instances = 3, .router = RouterChoice::least_loaded}, idle, 4) == 1);
    CHECK(route({.instances = 3, .router = RouterChoice::prefix}, idle, 5) == 2);
    // The longest prefix (instance 3, 800 queued tokens beyond the least loaded) within a threshold of 800; with
    // 799 the longest among the instances within it (instance 1's 64 tokens); with 0 only the equally loaded.
    CHECK(route({.instances = 4, .router = RouterChoice::prefix, .balance_tokens = 800}, views, 0) == 3);
    CHECK(route({.instances = 4, .router = RouterChoice::prefix, .balance_tokens = 799}, views, 0) == 1);
    CHECK(route({.instances = 4, .router = RouterChoice::prefix, .balance_tokens = 399}, views, 0) == 1);
    std::vector<InstanceView> behind = views;
    behind[1].queued_tokens = 101;
    CHECK(route({.instances = 4, .router = RouterChoice::prefix, .balance_tokens = 0}, behind, 0) == 2);
    // Nothing cached anywhere: the least loaded.
    std::vector<InstanceView> cold = views;
    for (InstanceView& v : cold) v.cached_prefix = 0;
    CHECK(route({.instances = 4, .router = RouterChoice::prefix}, cold, 0) == 2);
    // Holders of the same prefix: the less loaded one.
    cold[0].cached_prefix = cold[2].cached_prefix = 32;
    CHECK(route({.instances = 4, .router = RouterChoice::prefix}, cold, 0) == 2);
}

namespace engine_cluster_test {

using engine_test::cost;
using engine_test::policies;
using unikv::sim::ReplayResult;
using unikv::sim::RouterChoice;
using unikv::sim::StepRecord;

// `trace` on llama-3.1-8b over `instances` instances that each hold every row of it (nothing evicted, preempted
// or loaded back), rows checked and the caches verified every step.
ReplayResult roomy_cluster(const unikv::sim::Trace& trace, RouterChoice router, std::int32_t instances,
                           std::int32_t chunk_tokens, std::int64_t balance_tokens = 1 << 30, double arrival_scale = 1) {
    using P = unikv::presets::Llama31_8B;
    const std::uint64_t device = engine_test::room_for_every_row<P>(trace, 16);
    const unikv::sim::ReplaySetup setup{
        .cache = unikv::sim::replay_cache_config<P>(device, device),
        .byte_scale = unikv::sim::replay_byte_scale<P>(device),
        .engine = {.max_running = 6, .chunk_tokens = chunk_tokens, .check_rows = true, .verify_every = 1},
        .cluster = {.instances = instances, .router = router, .balance_tokens = balance_tokens},
        .arrival_scale = arrival_scale};
    ReplayResult r = unikv::sim::replay<policies<P>>(trace, setup, cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    REQUIRE(r.instances == instances);
    // One time line: steps start in order across instances; a request arrives at its scaled time, is admitted
    // after it and finishes after its first token.
    for (std::size_t i = 1; i < r.steps.size(); ++i) CHECK(r.steps[i - 1].start_ms <= r.steps[i].start_ms);
    for (const unikv::sim::RequestRecord& q : r.requests) {
        CHECK(q.arrival_ms == trace.requests()[static_cast<std::size_t>(q.index)].arrival_ms * arrival_scale);
        CHECK(q.admitted_ms >= q.arrival_ms);
        CHECK(q.finish_ms >= q.first_token_ms);
    }
    return r;
}

// llama-3.1-8b's bundle with a storage tier chosen at run time.
struct stored_llama : engine_test::policies<unikv::presets::Llama31_8B> {
    using storage = unikv::AnyStorage;
};

}  // namespace engine_cluster_test

TEST_CASE("engine: a cluster's device hits, instance by instance, against a ReferenceTree replay of each instance") {
    using namespace engine_cluster_test;
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 11, .requests = 48});
    for (const RouterChoice router : {RouterChoice::round_robin, RouterChoice::prefix}) {
        for (const std::int32_t chunk : {1 << 24, 256}) {
            CAPTURE(unikv::sim::router_name(router));
            CAPTURE(chunk);
            const double scale = chunk == 256 ? 0.5 : 2.0;  // arrivals twice as dense, or half
            const ReplayResult r = roomy_cluster(trace, router, 3, chunk, 1 << 30, scale);
            const std::vector<ReplayResult> split = unikv::sim::split_by_instance(r);
            REQUIRE(split.size() == 3);
            std::int64_t hit_requests = 0;
            std::vector<std::int32_t> routed(3, 0);
            for (std::int32_t i = 0; i < 3; ++i) {
                const ReplayResult& mine = split[static_cast<std::size_t>(i)];
                for (const StepRecord& s : mine.steps) {
                    REQUIRE(s.preempted == 0);
                    REQUIRE(s.host_hit_tokens == 0);
                }
                // The reference replays only this instance's requests, in its own steps: what the router sent it.
                const engine_test::reference_hits expected = engine_test::reference_device_hits(trace, mine, 16, chunk);
                for (const unikv::sim::RequestRecord& q : mine.requests) {
                    INFO("instance ", i, ", request ", q.index);
                    CHECK(q.device_hit_tokens == expected.hits[static_cast<std::size_t>(q.index)]);
                    hit_requests += q.device_hit_tokens > 0 ? 1 : 0;
                }
                routed[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(mine.requests.size());
            }
            for (const unikv::sim::RequestRecord& q : r.requests)
                if (router == RouterChoice::round_robin) CHECK(q.instance == q.index % 3);
            CHECK(std::count(routed.begin(), routed.end(), 0) == 0);
            CHECK(hit_requests >= 5);
            MESSAGE(unikv::sim::router_name(router), ", chunk budget ", chunk, ": routed ", routed[0], "/", routed[1],
                    "/", routed[2], ", ", hit_requests, " requests with device hits");
            // The same cluster twice gives the same records (wall time in cache calls aside).
            ReplayResult again = roomy_cluster(trace, router, 3, chunk, 1 << 30, scale);
            REQUIRE(again.steps.size() == r.steps.size());
            for (std::size_t s = 0; s < r.steps.size(); ++s) {
                again.steps[s].cache_ns = r.steps[s].cache_ns;
                CHECK(again.steps[s] == r.steps[s]);
            }
            CHECK(again.requests == r.requests);
        }
    }
}

TEST_CASE("engine: the prefix router sends a conversation's next turn to the instance that holds it; round-robin not") {
    using namespace engine_cluster_test;
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 5, .requests = 60});
    const std::vector<std::int32_t> continued = unikv::sim::continuations(trace);
    struct outcome {
        std::int32_t turns = 0, same = 0;  // next turns that came after the earlier turn finished; on its instance
        double hit_rate = 0;
    };
    const auto run = [&](RouterChoice router) {
        const ReplayResult r = roomy_cluster(trace, router, 4, 1 << 24);
        std::vector<const unikv::sim::RequestRecord*> by_index(trace.requests().size());
        for (const unikv::sim::RequestRecord& q : r.requests) by_index[static_cast<std::size_t>(q.index)] = &q;
        outcome o{.hit_rate = unikv::sim::compute_figures(r).hit_rate()};
        for (std::size_t a = 0; a < continued.size(); ++a) {
            if (continued[a] == unikv::sim::no_continuation) continue;
            const auto* earlier = by_index[a];
            const auto* later = by_index[static_cast<std::size_t>(continued[a])];
            if (earlier->finish_ms > later->arrival_ms) continue;  // nothing cached anywhere yet
            ++o.turns;
            o.same += earlier->instance == later->instance ? 1 : 0;
        }
        MESSAGE(unikv::sim::router_name(router), ": ", o.same, " of ", o.turns, " next turns on the earlier turn's "
                "instance, hit rate ", o.hit_rate);
        return o;
    };
    const outcome prefix = run(RouterChoice::prefix);
    const outcome rr = run(RouterChoice::round_robin);
    const outcome least = run(RouterChoice::least_loaded);
    REQUIRE(prefix.turns >= 20);
    CHECK(prefix.same == prefix.turns);  // no queue passes the threshold: every turn goes to its holder
    CHECK(rr.same * 2 < rr.turns);       // about one in four
    CHECK(prefix.hit_rate > rr.hit_rate);
    CHECK(prefix.hit_rate > least.hit_rate);
}

TEST_CASE("engine: instances share one file store: a turn routed away from its prefix fetches it and reads its rows") {
    using namespace engine_cluster_test;
    using P = unikv::presets::Llama31_8B;
    const unikv::sim::Trace trace =
        unikv::sim::generate({.workload = unikv::sim::Workload::chat, .seed = 5, .requests = 40});
    const std::vector<std::int32_t> continued = unikv::sim::continuations(trace);
    const auto dir = std::filesystem::temp_directory_path() / "unikv_engine_test_shared_store";
    std::filesystem::remove_all(dir);
    const std::uint64_t device = engine_test::room_for_every_row<P>(trace, 16);
    const std::uint64_t k = unikv::sim::replay_byte_scale<P>(device);
    unikv::SharedStorage<unikv::AnyStorage> store(
        unikv::AnyStorage(unikv::FileStorage({.directory = dir.string(), .capacity_bytes = 4 * device / k})));
    unikv::sim::ReplaySetup setup{
        .cache = engine_test::with_writes(unikv::sim::replay_cache_config<P>(device, device),
                                          {.policy = unikv::WritePolicy::through}),
        .byte_scale = k,
        .engine = {.max_running = 6, .check_rows = true, .verify_every = 1},
        .cluster = {.instances = 2, .router = RouterChoice::round_robin}};
    setup.storage = &store;
    setup.storage_model = P::name;
    const ReplayResult r = unikv::sim::replay<stored_llama>(trace, setup, engine_test::cost);
    REQUIRE(r.requests.size() == trace.requests().size());
    std::vector<const unikv::sim::RequestRecord*> by_index(trace.requests().size());
    for (const unikv::sim::RequestRecord& q : r.requests) by_index[static_cast<std::size_t>(q.index)] = &q;
    // Every row the forward reads is checked (`check_rows`), so a fetched prefix holds the markers the other
    // instance's forward wrote. Room for every row: a storage hit is a prefix only the other instance computed.
    std::int32_t crossed = 0, fetched = 0;
    for (std::size_t a = 0; a < continued.size(); ++a) {
        if (continued[a] == unikv::sim::no_continuation) continue;
        const auto* earlier = by_index[a];
        const auto* later = by_index[static_cast<std::size_t>(continued[a])];
        if (earlier->instance == later->instance || earlier->finish_ms > later->arrival_ms) continue;
        ++crossed;
        fetched += later->storage_hit_tokens > 0 ? 1 : 0;
    }
    std::int64_t storage_hits = 0;
    for (const unikv::sim::RequestRecord& q : r.requests) storage_hits += q.storage_hit_tokens;
    MESSAGE(crossed, " next turns on the other instance after the earlier one finished, ", fetched,
            " of them fetched it; ", storage_hits, " storage hit tokens");
    REQUIRE(crossed >= 5);
    CHECK(fetched * 10 >= crossed * 9);
    std::filesystem::remove_all(dir);
}
