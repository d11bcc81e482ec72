#pragma once
/// \file
/// A workload trace, the one type the trace reader and the generators produce and the replay consumes: requests
/// in arrival order, each with a prompt described as a run of fixed-size content blocks and an output length.
///
/// Blocks follow the Mooncake convention: a block id stands for the content of one `block_tokens`-token block
/// of a prompt, and equal ids at the same position mean a reusable prefix. The last block of a prompt may be
/// partial; it holds the first tokens of that block's content. A prompt is turned into token ids the prefix tree
/// matches by `Trace::prompt_tokens`: token `o` of block `b` is `b * block_tokens + o`, so equal blocks give equal
/// tokens (shared prefixes share tree nodes) and distinct blocks never collide. The tree's page size need not
/// divide the block size: the tree matches tokens, not blocks.

#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <unikv/error.hpp>
#include <unikv/tree/keys.hpp>

#include <unikv_sim/input_error.hpp>

namespace unikv::sim {

/// A block of prompt content, numbered densely from 0 within one trace.
using BlockId = std::uint32_t;

/// The longest prompt a trace may hold: 16M tokens, over ten times the longest context windows served today,
/// so a larger value is a corrupt trace, not a workload.
inline constexpr std::int64_t max_prompt_tokens = std::int64_t{1} << 24;
/// The longest output a trace may ask for: 1M tokens.
inline constexpr std::int64_t max_output_tokens = std::int64_t{1} << 20;
/// The latest arrival a trace may hold, counted from its first request: 10^12 ms, about 31 years.
inline constexpr double max_arrival_ms = 1e12;

/// One request of a trace.
struct Request {
    double arrival_ms = 0;           ///< arrival, in ms after the trace's start; non-decreasing along a trace
    std::int32_t prompt_tokens = 0;  ///< input length, in [1, max_prompt_tokens]
    std::int32_t output_tokens = 0;  ///< tokens to decode, the prefill's one included; in [1, max_output_tokens]
    std::uint32_t first_block = 0;   ///< where the prompt's blocks start in the trace's block list
    std::uint32_t block_count = 0;   ///< `ceil(prompt_tokens / block_tokens)`
};

/// An immutable trace, built by `TraceBuilder`. Copyable and movable (it is plain data).
class Trace {
public:
    /// Tokens per block.
    [[nodiscard]] std::int32_t block_tokens() const noexcept { return block_tokens_; }
    /// The requests, in arrival order.
    [[nodiscard]] std::span<const Request> requests() const noexcept { return requests_; }
    /// The number of distinct blocks; every id of `blocks(r)` is below it.
    [[nodiscard]] std::uint32_t distinct_blocks() const noexcept { return distinct_blocks_; }

    /// The prompt blocks of `r`, position 0 first. Precondition: `r` is one of `requests()`. O(1).
    [[nodiscard]] std::span<const BlockId> blocks(const Request& r) const noexcept {
        return std::span<const BlockId>(blocks_).subspan(r.first_block, r.block_count);
    }

    /// Tokens of `r`'s prompt that block `i` covers: `block_tokens`, except for a partial last block.
    [[nodiscard]] std::int32_t block_length(const Request& r, std::uint32_t i) const noexcept {
        return i + 1 < r.block_count ? block_tokens_
                                     : r.prompt_tokens - static_cast<std::int32_t>(i) * block_tokens_;
    }

    /// The token id of offset `offset` in block `b`: distinct for every (block, offset) pair of the trace.
    [[nodiscard]] TokenId token(BlockId b, std::int32_t offset) const noexcept {
        return static_cast<TokenId>(b) * block_tokens_ + offset;
    }

    /// Writes the prompt of `r` as token ids into `out`, which must hold exactly `r.prompt_tokens` ids.
    /// Allocates nothing. O(prompt_tokens).
    void prompt_tokens(const Request& r, std::span<TokenId> out) const {
        UNIKV_EXPECTS(out.size() == static_cast<std::size_t>(r.prompt_tokens), "the output holds ", out.size(),
                      " ids but the prompt has ", r.prompt_tokens, " tokens");
        const auto ids = blocks(r);
        std::size_t at = 0;
        for (std::uint32_t i = 0; i < r.block_count; ++i) {
            const std::int32_t n = block_length(r, i);
            const TokenId base = token(ids[i], 0);
            for (std::int32_t o = 0; o < n; ++o) out[at++] = base + o;
        }
    }

private:
    friend class TraceBuilder;
    explicit Trace(std::int32_t block_tokens) noexcept : block_tokens_(block_tokens) {}

    std::int32_t block_tokens_;
    std::vector<Request> requests_;
    std::vector<BlockId> blocks_;  ///< every request's prompt blocks, back to back in request order
    std::uint32_t distinct_blocks_ = 0;
};

/// Builds a `Trace` request by request, numbering the caller's content ids (Mooncake hash ids, a generator's
/// own ids) densely in order of first appearance. Move-only: it owns the id map.
class TraceBuilder {
public:
    /// A builder for blocks of `block_tokens` tokens. Precondition: `block_tokens >= 1`.
    explicit TraceBuilder(std::int32_t block_tokens) : trace_(block_tokens) {
        UNIKV_EXPECTS(block_tokens >= 1, "block_tokens is ", block_tokens);
    }
    TraceBuilder(TraceBuilder&&) = default;
    TraceBuilder& operator=(TraceBuilder&&) = default;

    /// The most distinct blocks a trace of this block size may hold: every token id must fit a `TokenId`.
    [[nodiscard]] std::uint32_t max_distinct_blocks() const noexcept {
        return static_cast<std::uint32_t>(std::numeric_limits<TokenId>::max() / trace_.block_tokens_);
    }

    /// Requests added so far.
    [[nodiscard]] std::size_t size() const noexcept { return trace_.requests_.size(); }

    /// Appends a request. Preconditions (the reader checks them first, with the line, so they are caller bugs
    /// here): lengths within the limits above, `arrival_ms` in [previous arrival, max_arrival_ms],
    /// `content_ids.size() == ceil(prompt_tokens / block_tokens)`. Throws `InputError` when the trace's distinct
    /// blocks would pass `max_distinct_blocks()`; the builder must then be discarded. Amortized O(blocks).
    void add(double arrival_ms, std::int64_t prompt_tokens, std::int64_t output_tokens,
             std::span<const std::uint64_t> content_ids) {
        const std::int64_t bt = trace_.block_tokens_;
        UNIKV_EXPECTS(prompt_tokens >= 1 && prompt_tokens <= max_prompt_tokens, "prompt_tokens is ", prompt_tokens);
        UNIKV_EXPECTS(output_tokens >= 1 && output_tokens <= max_output_tokens, "output_tokens is ", output_tokens);
        UNIKV_EXPECTS(arrival_ms >= last_arrival_ms_ && arrival_ms <= max_arrival_ms,
                      "arrivals must be non-decreasing and within max_arrival_ms");
        UNIKV_EXPECTS(static_cast<std::int64_t>(content_ids.size()) == (prompt_tokens + bt - 1) / bt, "got ",
                      content_ids.size(), " content ids for ", prompt_tokens, " tokens");
        if (trace_.blocks_.size() + content_ids.size() > std::numeric_limits<std::uint32_t>::max())
            throw InputError("more than 2^32 prompt blocks in one trace");
        const std::size_t first = trace_.blocks_.size();
        for (const std::uint64_t c : content_ids) {
            const auto [it, fresh] = ids_.try_emplace(c, trace_.distinct_blocks_);
            if (fresh && ++trace_.distinct_blocks_ > max_distinct_blocks())
                throw InputError(message("more distinct blocks than 31-bit token ids can number (at most ",
                                                max_distinct_blocks(), " blocks of ", bt, " tokens)"));
            trace_.blocks_.push_back(it->second);
        }
        trace_.requests_.push_back({.arrival_ms = arrival_ms,
                                    .prompt_tokens = static_cast<std::int32_t>(prompt_tokens),
                                    .output_tokens = static_cast<std::int32_t>(output_tokens),
                                    .first_block = static_cast<std::uint32_t>(first),
                                    .block_count = static_cast<std::uint32_t>(content_ids.size())});
        last_arrival_ms_ = arrival_ms;
    }

    /// The trace built so far; the builder is left moved-from.
    [[nodiscard]] Trace finish() && { return std::move(trace_); }

private:
    Trace trace_;
    std::unordered_map<std::uint64_t, BlockId> ids_;  ///< content id -> dense block id
    double last_arrival_ms_ = 0;
};

}  // namespace unikv::sim
