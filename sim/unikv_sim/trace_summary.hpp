#pragma once
/// \file
/// What a trace holds before any cache sees it: sizes, duration, and the prefix-hit rate an infinite cache would
/// reach, the ceiling every replay's hit rate sits under.

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
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
    std::int64_t reusable_tokens = 0;    ///< prompt tokens an infinite cache serves from earlier prompts (and
                                         ///< outputs, when the replay continues them)
    std::int64_t continued = 0;          ///< requests whose output a later prompt continues (0: not asked)
    bool outputs_continued = false;      ///< the limit counts the continued outputs
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

/// A prefix tree of a trace's blocks that never evicts: what an infinite cache holds once the requests given to
/// `hold` were cached (their prompts, and their outputs as far as the later prompt that continues them reaches).
/// `summarize` feeds it in arrival order; a replay in finishing order (what had been cached when a request came).
class BlockTree {
public:
    explicit BlockTree(const Trace& trace) : trace_(trace) { children_.reserve(trace.distinct_blocks()); }

    /// The tokens of request `index`'s prompt the tree serves: its longest held prefix, token-exact (a block held
    /// only partially gives the tokens it held), at most `prompt_tokens - 1` (the engine computes the last prompt
    /// token to sample the first output token). O(blocks).
    [[nodiscard]] std::int32_t served(std::size_t index) const {
        const Request& r = trace_.requests()[index];
        const auto ids = trace_.blocks(r);
        std::int64_t reused = 0;
        std::uint64_t parent = root;
        for (std::uint32_t i = 0; i < r.block_count; ++i) {
            const auto it = children_.find(parent << 32 | ids[i]);
            if (it == children_.end()) break;
            const std::int32_t len = trace_.block_length(r, i);
            reused += std::min(len, held_[it->second]);
            if (held_[it->second] < len) break;
            parent = it->second;
        }
        return static_cast<std::int32_t>(std::min<std::int64_t>(reused, r.prompt_tokens - 1));
    }
    /// Holds request `index`'s prompt and, when a later prompt continues it (`continued`, see `continuations`), its
    /// output as far as that prompt reaches (the last output token is never fed back). Returns what the tree
    /// served of the prompt before (`served`). O(blocks).
    std::int32_t hold(std::size_t index, std::span<const std::int32_t> continued = {}) {
        const Request& r = trace_.requests()[index];
        const auto ids = trace_.blocks(r);
        std::int64_t reused = 0;
        bool matching = true;
        std::uint64_t parent = root;
        for (std::uint32_t i = 0; i < r.block_count; ++i) {
            const std::int32_t len = trace_.block_length(r, i);
            const auto [node, before] = hold_block(parent, ids[i], len);
            if (matching && before > 0) reused += std::min(len, before);
            matching = matching && before >= len;
            parent = node;
        }
        if (!continued.empty() && continued[index] >= 0) {
            const Request& later = trace_.requests()[static_cast<std::size_t>(continued[index])];
            const std::int64_t bt = trace_.block_tokens();
            const std::int64_t end =
                std::min<std::int64_t>(later.prompt_tokens, std::int64_t{r.prompt_tokens} + r.output_tokens - 1);
            const auto later_ids = trace_.blocks(later);
            parent = root;
            for (std::uint32_t i = 0; i * bt < end; ++i)
                parent = hold_block(parent, later_ids[i], static_cast<std::int32_t>(std::min(bt, end - i * bt))).first;
        }
        return static_cast<std::int32_t>(std::min<std::int64_t>(reused, r.prompt_tokens - 1));
    }

private:
    // A node is a (parent node, block) pair; it records the most tokens of its block any prompt held.
    static constexpr std::uint64_t root = 0xFFFFFFFFu;
    // Holds `len` tokens of `block` under `parent`; returns the node and the tokens it held before (-1: new).
    std::pair<std::uint32_t, std::int32_t> hold_block(std::uint64_t parent, BlockId block, std::int32_t len) {
        const auto [it, fresh] = children_.try_emplace(parent << 32 | block, static_cast<std::uint32_t>(held_.size()));
        if (fresh) {
            held_.push_back(len);
            return {it->second, -1};
        }
        const std::int32_t before = held_[it->second];
        held_[it->second] = std::max(before, len);
        return {it->second, before};
    }

    const Trace& trace_;
    std::unordered_map<std::uint64_t, std::uint32_t> children_;  // (parent << 32 | block) -> node
    std::vector<std::int32_t> held_;                             // node -> most tokens held
};

/// Summarizes `trace`. The reusable tokens come from a replay, in arrival order, through a `BlockTree`: a request
/// reuses its longest prefix that an earlier prompt held (`BlockTree::served`). With `continued`
/// (`continuations(trace)`, as a replay that continues outputs decodes them), a request's output enters the tree
/// with its prompt too, as far as the later prompt that continues it reaches: the limit of that replay. O(total
/// blocks) expected time; allocates the tree (one entry per distinct prefix block). With `per_request` non-null,
/// it also receives each request's reusable tokens (by trace index).
[[nodiscard]] inline TraceSummary summarize(const Trace& trace, std::span<const std::int32_t> continued = {},
                                           std::vector<std::int32_t>* per_request = nullptr) {
    TraceSummary s;
    s.outputs_continued = !continued.empty();
    if (per_request != nullptr) per_request->assign(trace.requests().size(), 0);
    const auto reqs = trace.requests();
    s.requests = reqs.size();
    s.distinct_blocks = trace.distinct_blocks();
    if (!reqs.empty()) s.duration_ms = reqs.back().arrival_ms - reqs.front().arrival_ms;
    BlockTree tree(trace);
    for (std::size_t index = 0; index < reqs.size(); ++index) {
        const Request& r = reqs[index];
        s.prompt_tokens += r.prompt_tokens;
        s.output_tokens += r.output_tokens;
        s.longest_prompt = std::max(s.longest_prompt, r.prompt_tokens);
        s.longest_output = std::max(s.longest_output, r.output_tokens);
        s.longest_request = std::max(s.longest_request, std::int64_t{r.prompt_tokens} + r.output_tokens);
        const std::int32_t served = tree.hold(index, continued);
        s.reusable_tokens += served;
        if (per_request != nullptr) (*per_request)[index] = served;
        if (!continued.empty() && continued[index] >= 0) ++s.continued;
    }
    return s;
}

}  // namespace unikv::sim
