#pragma once
/// \file
/// Which later prompt carries a request's output: a replay decodes the tokens that follow a request's prompt in
/// its content stream, so that the next turn of a conversation (or the next step of an agent) finds the previous
/// turn's output cached, as it would in a real engine.
///
/// A later request L continues request R when L's prompt starts with R's whole prompt: R's block ids at the same
/// positions, and L longer (`Trace`'s tokens are a function of block and offset, so a partial last block of R holds
/// the first tokens of L's full one). R's output token at position p is then L's prompt token at p while p is inside
/// L's prompt, and a fresh id after it. The generators write each session as one content stream, so a turn's
/// next turn continues it token for token; in a Mooncake trace, a request whose prompt a later request extends is
/// continued by the earliest such request. A request nothing continues decodes fresh ids only.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include <unikv/ids.hpp>

#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// No later request continues this one.
inline constexpr std::int32_t no_continuation = -1;

/// For every request of `trace` (by index), the earliest later request that continues it (see the file comment),
/// or `no_continuation`. O(total blocks) expected time: each request's block prefixes are hashed once, and a
/// candidate's blocks are compared once.
[[nodiscard]] inline std::vector<std::int32_t> continuations(const Trace& trace) {
    const auto reqs = trace.requests();
    std::vector<std::int32_t> out(reqs.size(), no_continuation);
    // Walking back in arrival order, the latest entry for a prefix is the earliest later request with it.
    std::unordered_map<std::uint64_t, std::int32_t> longer;  // hash of k blocks -> a request with more than k
    std::unordered_map<std::uint64_t, std::int32_t> same;    // hash of all its blocks -> a request
    std::vector<std::uint64_t> hashes;
    const auto extends = [&](std::int32_t later, const Request& r) {
        const Request& l = reqs[static_cast<std::size_t>(later)];
        if (l.prompt_tokens <= r.prompt_tokens) return false;
        const auto a = trace.blocks(r), b = trace.blocks(l);
        for (std::size_t i = 0; i < a.size(); ++i)
            if (a[i] != b[i]) return false;  // a hash collision
        return true;
    };
    for (std::size_t i = reqs.size(); i-- > 0;) {
        const Request& r = reqs[i];
        const auto ids = trace.blocks(r);
        hashes.clear();
        std::uint64_t h = 0x9E3779B97F4A7C15ull;
        for (const BlockId b : ids) {
            h = (h ^ b) * 0x100000001B3ull;  // FNV-style chaining: the hash of a block prefix
            h ^= h >> 29;
            hashes.push_back(h);
        }
        if (const auto it = longer.find(hashes.back()); it != longer.end() && extends(it->second, r)) {
            out[i] = it->second;
        } else if (const auto s = same.find(hashes.back()); s != same.end() && extends(s->second, r)) {
            out[i] = s->second;
        }
        for (std::size_t k = 0; k + 1 < hashes.size(); ++k) longer[hashes[k]] = static_cast<std::int32_t>(i);
        same[hashes.back()] = static_cast<std::int32_t>(i);
    }
    return out;
}

/// The token request `later` holds at position `pos` of its prompt. Precondition: `pos < later.prompt_tokens`.
[[nodiscard]] inline TokenId prompt_token(const Trace& trace, const Request& later, std::int32_t pos) noexcept {
    const std::int32_t bt = trace.block_tokens();
    return trace.token(trace.blocks(later)[static_cast<std::size_t>(pos / bt)], pos % bt);
}

}  // namespace unikv::sim
