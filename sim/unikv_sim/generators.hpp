#pragma once
/// \file
/// Seeded workload generators: multi-turn chat, agentic tool loops behind a long shared system prompt, and
/// long-document QA. They produce the same `Trace` as the Mooncake reader.
///
/// Each session (a conversation, an agent task, a document's readers) writes one content stream: its blocks get
/// ids as the stream grows, and a prompt is the stream's first N tokens. So turn k+1's prompt repeats turn k's
/// prompt token for token, including the partial last block (its id stands for the whole block; the earlier
/// prompt held its first tokens), and the outputs of earlier turns are in the later prompts, as in a real chat.
/// A session that starts from a shared prefix (a system prompt, a document) shares that prefix's full blocks;
/// its own text starts in a fresh block, because the block that straddles the end of the prefix differs per
/// session. The shapes below are this file's assumptions, documented where they are set (`docs/simulator.md`
/// has the table).
///
/// Deterministic: one seed gives the same trace on every platform and standard library (the generators use
/// their own SplitMix64 stream and their own distributions, never `<random>`'s, whose algorithms the standard
/// leaves to each library).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <unikv_sim/input_error.hpp>
#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// The built-in workloads.
enum class Workload : std::uint8_t { chat, agent, docqa };

/// Every workload, in `--generate` order.
inline constexpr Workload all_workloads[] = {Workload::chat, Workload::agent, Workload::docqa};

/// The command-line name of `w`.
[[nodiscard]] constexpr std::string_view workload_name(Workload w) noexcept {
    switch (w) {
        case Workload::chat: return "chat";
        case Workload::agent: return "agent";
        case Workload::docqa: return "docqa";
    }
    return "?";
}

/// The workload called `name`, or nothing.
[[nodiscard]] constexpr std::optional<Workload> workload_from_name(std::string_view name) noexcept {
    for (const Workload w : all_workloads)
        if (workload_name(w) == name) return w;
    return std::nullopt;
}

/// What to generate.
struct GeneratorConfig {
    Workload workload = Workload::chat;
    std::uint64_t seed = 1;
    std::int32_t requests = 1000;    ///< requests in the trace, >= 1
    std::int32_t block_tokens = 64;  ///< block size of the generated trace: small, so a session that forks a
                                     ///< shared prefix loses little sharing in the straddling block
};

namespace detail {

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator that passes BigCrush, fixed across platforms.
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) noexcept : state_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, 1), 53 bits.
    double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    /// Uniform integer in [lo, hi] (a multiply-shift; its bias below 2^-32 does not matter here).
    std::int64_t between(std::int64_t lo, std::int64_t hi) noexcept {
        const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
        return lo + static_cast<std::int64_t>((next() >> 32) * span >> 32);
    }
    /// Log-uniform integer in [lo, hi]: lengths of text spread over orders of magnitude. Precondition: lo >= 1.
    std::int64_t log_between(std::int64_t lo, std::int64_t hi) noexcept {
        const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi) + 1);
        return std::clamp(static_cast<std::int64_t>(std::exp(l + unit() * (h - l))), lo, hi);
    }
    /// Exponential with mean `mean`: Poisson arrivals and think times.
    double exponential(double mean) noexcept { return -mean * std::log1p(-unit()); }

private:
    std::uint64_t state_;
};

/// A content stream: the block ids of a session's text so far.
struct Stream {
    std::vector<std::uint64_t> blocks;
    std::int64_t tokens = 0;
};

/// One generated request before the trace is ordered.
struct Pending {
    double arrival_ms;
    std::int64_t prompt_tokens;
    std::int64_t output_tokens;
    std::vector<std::uint64_t> blocks;
};

/// Builds sessions' streams and requests; the workloads below drive it.
class SessionWriter {
public:
    SessionWriter(std::int32_t block_tokens, std::vector<Pending>& out) : block_tokens_(block_tokens), out_(out) {}

    /// A new stream of `tokens` tokens of fresh content.
    Stream fresh(std::int64_t tokens) {
        Stream s;
        append(s, tokens);
        return s;
    }
    /// A new stream that starts with `prefix`: its full blocks are shared, the straddling block is fresh.
    Stream fork(const Stream& prefix) {
        Stream s;
        s.tokens = prefix.tokens;
        s.blocks.assign(prefix.blocks.begin(),
                        prefix.blocks.begin() + static_cast<std::ptrdiff_t>(prefix.tokens / block_tokens_));
        if (prefix.tokens % block_tokens_ != 0) s.blocks.push_back(next_id_++);
        return s;
    }
    /// Appends `tokens` tokens of fresh content to `s`.
    void append(Stream& s, std::int64_t tokens) {
        s.tokens += tokens;
        while (static_cast<std::int64_t>(s.blocks.size()) * block_tokens_ < s.tokens) s.blocks.push_back(next_id_++);
    }
    /// A request whose prompt is all of `s` so far.
    void request(double arrival_ms, const Stream& s, std::int64_t output_tokens) {
        out_.push_back({arrival_ms, s.tokens, output_tokens, s.blocks});
    }

private:
    std::int32_t block_tokens_;
    std::vector<Pending>& out_;
    std::uint64_t next_id_ = 0;
};

/// Decode pace the generators assume when they place a session's next request after an output: the
/// inter-token latency of a busy serving engine.
inline constexpr double decode_ms_per_token = 30;

/// Multi-turn chat: conversations arrive as a Poisson process (mean gap 2 s), each under one of 4 shared system
/// prompts (200-1,500 tokens); 1-8 turns of a user message (20-500 tokens) and a reply (20-800 tokens); the
/// user writes the next turn after the reply and an exponential think time (mean 15 s).
inline void chat_session(SplitMix64& rng, SessionWriter& w, const std::vector<Stream>& systems, double start) {
    Stream s = w.fork(systems[static_cast<std::size_t>(rng.between(0, std::ssize(systems) - 1))]);
    double t = start;
    for (std::int64_t turn = 0, turns = rng.between(1, 8); turn < turns; ++turn) {
        w.append(s, rng.log_between(20, 500));
        const std::int64_t reply = rng.log_between(20, 800);
        w.request(t, s, reply);
        w.append(s, reply);
        t += static_cast<double>(reply) * decode_ms_per_token + rng.exponential(15'000);
    }
}

/// Agentic tool loops: 3 agents, each with a long system prompt of tool definitions (6K-16K tokens); tasks
/// arrive as a Poisson process (mean gap 3 s), most for the first agent (weights 3:2:1). A task (100-1,000
/// tokens) runs 3-20 steps: the model emits a tool call (30-300 tokens), the tool answers (50-4,000 tokens)
/// after an exponential latency (mean 1.5 s), and the next step's prompt holds everything so far.
inline void agent_session(SplitMix64& rng, SessionWriter& w, const std::vector<Stream>& systems, double start) {
    const std::int64_t pick = rng.between(0, 5);
    Stream s = w.fork(systems[pick < 3 ? 0 : pick < 5 ? 1 : 2]);
    w.append(s, rng.log_between(100, 1'000));
    double t = start;
    for (std::int64_t step = 0, steps = rng.between(3, 20); step < steps; ++step) {
        const std::int64_t call = rng.log_between(30, 300);
        w.request(t, s, call);
        w.append(s, call);
        w.append(s, rng.log_between(50, 4'000));
        t += static_cast<double>(call) * decode_ms_per_token + rng.exponential(1'500);
    }
}

/// Long-document QA: 50 documents (8K-64K tokens) with Zipf(1) popularity; each question (15-150 tokens) is a
/// request with an answer of 30-500 tokens; questions arrive as a Poisson process (mean gap 1 s).
inline void docqa_question(SplitMix64& rng, SessionWriter& w, const std::vector<Stream>& docs,
                           const std::vector<double>& cumulative, double t) {
    const double u = rng.unit() * cumulative.back();
    const auto doc = static_cast<std::size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) -
                                              cumulative.begin());
    Stream s = w.fork(docs[std::min(doc, docs.size() - 1)]);
    w.append(s, rng.log_between(15, 150));
    w.request(t, s, rng.log_between(30, 500));
}

}  // namespace detail

/// Generates `config.requests` requests of `config.workload` from `config.seed`. Sessions start until the trace
/// is full and no session still to start could place a request among the first `requests` arrivals, so the
/// trace's tail is as dense as its head. Throws `InputError` for `requests < 1` or `block_tokens < 1`.
[[nodiscard]] inline Trace generate(const GeneratorConfig& config) {
    if (config.requests < 1)
        throw InputError(message("generator requests is ", config.requests, "; it must be at least 1"));
    if (config.block_tokens < 1)
        throw InputError(message("generator block_tokens is ", config.block_tokens, "; it must be at least 1"));
    detail::SplitMix64 rng(config.seed);
    std::vector<detail::Pending> pending;
    detail::SessionWriter w(config.block_tokens, pending);

    std::vector<detail::Stream> shared;  // system prompts or documents
    std::vector<double> cumulative;      // docqa: Zipf(1) weights, summed
    double mean_gap_ms = 0;
    switch (config.workload) {
        case Workload::chat:
            for (int i = 0; i < 4; ++i) shared.push_back(w.fresh(rng.log_between(200, 1'500)));
            mean_gap_ms = 2'000;
            break;
        case Workload::agent:
            for (int i = 0; i < 3; ++i) shared.push_back(w.fresh(rng.log_between(6'000, 16'000)));
            mean_gap_ms = 3'000;
            break;
        case Workload::docqa:
            for (int i = 0; i < 50; ++i) {
                shared.push_back(w.fresh(rng.log_between(8'000, 64'000)));
                cumulative.push_back((cumulative.empty() ? 0 : cumulative.back()) + 1.0 / (i + 1));
            }
            mean_gap_ms = 1'000;
            break;
    }

    const auto wanted = static_cast<std::size_t>(config.requests);
    const auto by_arrival = [](const detail::Pending& a, const detail::Pending& b) {
        return a.arrival_ms < b.arrival_ms;
    };
    double start = 0;
    for (;;) {
        if (pending.size() >= wanted) {
            // Sessions start in order, so none after `start` can arrive before the wanted-th arrival so far.
            std::stable_sort(pending.begin(), pending.end(), by_arrival);
            pending.resize(wanted);
            if (start > pending.back().arrival_ms) break;
        }
        switch (config.workload) {
            case Workload::chat: detail::chat_session(rng, w, shared, start); break;
            case Workload::agent: detail::agent_session(rng, w, shared, start); break;
            case Workload::docqa: detail::docqa_question(rng, w, shared, cumulative, start); break;
        }
        start += rng.exponential(mean_gap_ms);
    }

    TraceBuilder builder(config.block_tokens);
    for (const detail::Pending& p : pending) builder.add(p.arrival_ms, p.prompt_tokens, p.output_tokens, p.blocks);
    return std::move(builder).finish();
}

}  // namespace unikv::sim
