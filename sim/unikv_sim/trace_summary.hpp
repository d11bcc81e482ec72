#pragma once
/// \file
/// What a trace holds before any cache sees it: sizes, duration, and the prefix-hit rate an infinite cache would
/// reach, the ceiling every replay's hit rate sits under.

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// Figures of one trace (`summarize`).
struct TraceSummary {
    std::size_t requests = 0;            ///< requests in the trace
    std::int64_t prompt_tokens = 0;      ///< summed over requests
    std::int64_t output_tokens = 0;      ///< summed over requests
    std::int32_t longest_prompt = 0;     ///< the most prompt tokens of one request
    std::int32_t longest_output = 0;     ///< the most output tokens of one request
    std::int64_t longest_request = 0;    ///< the most prompt + output tokens of one request: the least a cache
                                         ///< must hold to serve the trace at all
    std::uint32_t distinct_blocks = 0;   ///< distinct block ids (Mooncake: distinct hash ids)
    std::int64_t reusable_tokens = 0;    ///< prompt tokens an infinite cache serves from earlier prompts
    double duration_ms = 0;              ///< last arrival minus first

    /// Prompt tokens per request (0 for no requests).
    [[nodiscard]] double mean_prompt() const noexcept { return per_request(prompt_tokens); }
    /// Output tokens per request (0 for no requests).
    [[nodiscard]] double mean_output() const noexcept { return per_request(output_tokens); }
    /// `reusable_tokens / prompt_tokens`: the prefix-hit rate no cache can beat on this trace.
    [[nodiscard]] double max_prefix_hit_rate() const noexcept {
        return prompt_tokens ? double(reusable_tokens) / double(prompt_tokens) : 0;
    }

private:
    [[nodiscard]] double per_request(std::int64_t v) const noexcept {
        return requests ? double(v) / double(requests) : 0;
    }
};

/// Summarizes `trace`. The reusable tokens come from a replay, in arrival order, through a prefix tree of
/// blocks that never evicts: a request reuses its longest prefix that an earlier prompt held, token-exact
/// (a block that an earlier prompt held only partially gives the tokens it held), and at most
/// `prompt_tokens - 1`, since an engine computes the last prompt token to sample the first output token.
/// O(total blocks) expected time; allocates the tree (one entry per distinct prefix block).
[[nodiscard]] inline TraceSummary summarize(const Trace& trace) {
    TraceSummary s;
    const auto reqs = trace.requests();
    s.requests = reqs.size();
    s.distinct_blocks = trace.distinct_blocks();
    if (!reqs.empty()) s.duration_ms = reqs.back().arrival_ms - reqs.front().arrival_ms;

    // A tree node is a (parent node, block) pair; it records the most tokens of its block any prompt held.
    constexpr std::uint64_t root = 0xFFFFFFFFu;
    std::unordered_map<std::uint64_t, std::uint32_t> children;  // (parent << 32 | block) -> node
    std::vector<std::int32_t> held;                             // node -> most tokens held
    children.reserve(trace.distinct_blocks());
    for (const Request& r : reqs) {
        s.prompt_tokens += r.prompt_tokens;
        s.output_tokens += r.output_tokens;
        s.longest_prompt = std::max(s.longest_prompt, r.prompt_tokens);
        s.longest_output = std::max(s.longest_output, r.output_tokens);
        s.longest_request = std::max(s.longest_request, std::int64_t{r.prompt_tokens} + r.output_tokens);

        const auto ids = trace.blocks(r);
        std::int64_t reused = 0;
        bool matching = true;
        std::uint64_t parent = root;
        for (std::uint32_t i = 0; i < r.block_count; ++i) {
            const std::int32_t len = trace.block_length(r, i);
            const auto next = static_cast<std::uint32_t>(held.size());
            const auto [it, fresh] = children.try_emplace(parent << 32 | ids[i], next);
            if (fresh) {
                held.push_back(len);
                matching = false;
            } else {
                std::int32_t& h = held[it->second];
                if (matching) reused += std::min(len, h);
                matching = matching && h >= len;
                h = std::max(h, len);
            }
            parent = it->second;
        }
        s.reusable_tokens += std::min<std::int64_t>(reused, r.prompt_tokens - 1);
    }
    return s;
}

}  // namespace unikv::sim
