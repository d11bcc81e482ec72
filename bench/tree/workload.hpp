#pragma once
// Workload and baselines shared by the tree benchmarks.
//
// Workload: a few system prompts (a quarter of the prefix each) and conversations that start with one of them
// and grow turn by turn to `prefix` tokens; every turn is inserted the way an engine caches a finished request
// (match, reuse the matched pages, fresh pages for the rest). Queries are the full conversation keys.
//
// Baselines, measured in the same process:
// * memcmp of the matched tokens against an equal copy: the floor of any exact prefix match;
// * a block-hash chain, the prefix cache other engines use: hash every full page chained to its parent's hash
//   (the same fast hash the tree uses for its edges), look each hash up in a std::unordered_map.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include <unikv/detail/tree/page_hash.hpp>
#include <unikv/tree/radix_tree.hpp>

namespace unikv::bench_tree {

// The tree configuration for a benchmark: page size as given, a 4096-token window when the tree has Swa.
template <class Tree>
TreeConfig config_for(std::int32_t page) {
    TreeConfig c{.page_size = {page}};
    if constexpr (Tree::components::has_swa) c.swa_window = 4096;
    return c;
}

struct Conversations {
    std::int32_t page = 1;
    std::vector<std::vector<TokenId>> keys;           // the final key of each conversation
    std::vector<std::vector<std::int32_t>> turn_ends;  // where each turn ends, per conversation
};

inline Conversations make_conversations(std::int32_t prefix, std::int32_t page, int systems = 2, int conversations = 8,
                                        int turns = 6, std::uint32_t seed = 7) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<TokenId> token(0, 150'000);
    const auto down = [&](std::int32_t n) { return n / page * page; };
    std::vector<std::vector<TokenId>> prompts(static_cast<std::size_t>(systems));
    for (auto& p : prompts) {
        p.resize(static_cast<std::size_t>(down(prefix / 4)));
        for (auto& t : p) t = token(rng);
    }
    Conversations c;
    c.page = page;
    for (int i = 0; i < conversations; ++i) {
        std::vector<TokenId> key = prompts[static_cast<std::size_t>(i % systems)];
        const auto system = static_cast<std::int32_t>(key.size());
        key.resize(static_cast<std::size_t>(down(prefix)));
        for (std::size_t j = static_cast<std::size_t>(system); j < key.size(); ++j) key[j] = token(rng);
        std::vector<std::int32_t> ends;
        for (int t = 1; t <= turns; ++t)
            ends.push_back(down(system + (static_cast<std::int32_t>(key.size()) - system) * t / turns));
        c.keys.push_back(std::move(key));
        c.turn_ends.push_back(std::move(ends));
    }
    return c;
}

// Caches every turn of every conversation (turn-major, as conversations interleave in a server).
template <class Tree>
void populate(Tree& tree, const Conversations& c, std::int32_t& next_page, std::uint8_t retention = 0) {
    std::vector<VirtualPage> pages;
    for (std::size_t turn = 0; turn < c.turn_ends[0].size(); ++turn) {
        for (std::size_t i = 0; i < c.keys.size(); ++i) {
            const auto key = std::span(c.keys[i]).first(static_cast<std::size_t>(c.turn_ends[i][turn]));
            const MatchResult m = tree.match_prefix({key});
            pages.assign(m.device_pages.begin(), m.device_pages.end());
            while (pages.size() * static_cast<std::size_t>(c.page) < key.size()) pages.emplace_back(next_page++);
            InsertValues v{.pages = pages, .retention = retention};
            if constexpr (Tree::components::has_mamba) v.state = StateId{next_page};  // a checkpoint per turn
            auto r = tree.insert({key}, v);
            r.actions.mark_executed();
        }
    }
}

// The block-hash prefix cache baseline.
class HashChain {
public:
    explicit HashChain(std::int32_t page) : page_(page) {}

    void insert(std::span<const TokenId> key, std::span<const VirtualPage> pages) {
        std::uint64_t h = detail::tree::namespace_seed({});
        for (std::size_t b = 0; b < pages.size(); ++b) {
            h = detail::tree::hash_tokens(h, key.data() + b * static_cast<std::size_t>(page_), static_cast<std::size_t>(page_));
            map_.try_emplace(h, pages[b]);
        }
    }
    // The chained hashes of the key's blocks from `from_block` on.
    [[nodiscard]] std::vector<std::uint64_t> hashes(std::span<const TokenId> key, std::size_t from_block) const {
        std::vector<std::uint64_t> out;
        std::uint64_t h = detail::tree::namespace_seed({});
        for (std::size_t b = 0; (b + 1) * static_cast<std::size_t>(page_) <= key.size(); ++b) {
            h = detail::tree::hash_tokens(h, key.data() + b * static_cast<std::size_t>(page_), static_cast<std::size_t>(page_));
            if (b >= from_block) out.push_back(h);
        }
        return out;
    }
    void erase(std::span<const std::uint64_t> hashes) {
        for (std::uint64_t h : hashes) map_.erase(h);
    }
    // Matched tokens; the matched pages go to `out`.
    std::int32_t lookup(std::span<const TokenId> key, std::vector<VirtualPage>& out) const {
        out.clear();
        std::uint64_t h = detail::tree::namespace_seed({});
        for (std::size_t b = 0; (b + 1) * static_cast<std::size_t>(page_) <= key.size(); ++b) {
            h = detail::tree::hash_tokens(h, key.data() + b * static_cast<std::size_t>(page_), static_cast<std::size_t>(page_));
            const auto it = map_.find(h);
            if (it == map_.end()) break;
            out.push_back(it->second);
        }
        return static_cast<std::int32_t>(out.size()) * page_;
    }
    [[nodiscard]] std::size_t size() const noexcept { return map_.size(); }

private:
    std::int32_t page_;
    std::unordered_map<std::uint64_t, VirtualPage> map_;
};

namespace timing {

using clock = std::chrono::steady_clock;

template <class F>
double batch_seconds(F& f, std::int64_t batch) {
    const auto t0 = clock::now();
    for (std::int64_t i = 0; i < batch; ++i) f();
    return std::chrono::duration<double>(clock::now() - t0).count();
}

// Calls per batch so that one batch takes at least 2 ms.
template <class F>
std::int64_t calibrate(F& f) {
    std::int64_t batch = 1;
    while (batch < (std::int64_t{1} << 24) && batch_seconds(f, batch) < 2e-3) batch *= 2;
    return batch;
}

}  // namespace timing

// Seconds per call of each function: batches of each are timed in interleaved rounds and the best round counts,
// so a burst of load from other processes on this shared machine hits every measurement alike.
template <class... F>
std::array<double, sizeof...(F)> seconds_per_call(F&... fs) {
    const std::array<std::int64_t, sizeof...(F)> batch{timing::calibrate(fs)...};
    std::array<double, sizeof...(F)> best;
    best.fill(1e30);
    for (int round = 0; round < 7; ++round) {
        std::size_t i = 0;
        ((best[i] = std::min(best[i], timing::batch_seconds(fs, batch[i]) / static_cast<double>(batch[i])), ++i), ...);
    }
    return best;
}

// Seconds per call of each measured step, for steps that must be undone before they can run again: each unit is
// {timed(i), untimed()}; a round runs timed(0..n-1) under the clock, then untimed() to restore the state, repeated
// until 2 ms of timed work, and units are interleaved round by round (best round counts).
template <class... Units>
std::array<double, sizeof...(Units)> seconds_per_step(std::size_t n, Units&... units) {
    std::array<double, sizeof...(Units)> best;
    best.fill(1e30);
    auto one_round = [n](auto& unit) {
        double timed = 0;
        std::int64_t steps = 0;
        while (timed < 2e-3) {
            const auto t0 = timing::clock::now();
            for (std::size_t i = 0; i < n; ++i) unit.timed(i);
            timed += std::chrono::duration<double>(timing::clock::now() - t0).count();
            steps += static_cast<std::int64_t>(n);
            unit.untimed();
        }
        return timed / static_cast<double>(steps);
    };
    for (int round = 0; round < 5; ++round) {
        std::size_t i = 0;
        ((best[i] = std::min(best[i], one_round(units)), ++i), ...);
    }
    return best;
}

// The memcmp floor: compares each query key with an equal copy held elsewhere (the whole length is read), cycling
// through the same keys as the tree benchmark so both touch the same amount of memory.
class MemcmpFloor {
public:
    explicit MemcmpFloor(const std::vector<std::vector<TokenId>>& keys) : a_(keys), b_(keys) {}
    int operator()() noexcept {
        const std::size_t i = next_;
        if (++next_ == a_.size()) next_ = 0;  // a wrap, not a modulo: a division would pad every floor call
        return std::memcmp(a_[i].data(), b_[i].data(), a_[i].size() * sizeof(TokenId));
    }

private:
    std::vector<std::vector<TokenId>> a_, b_;
    std::size_t next_ = 0;
};

}  // namespace unikv::bench_tree
