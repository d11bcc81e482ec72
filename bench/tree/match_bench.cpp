// match_prefix on long shared prefixes (system prompts + multi-turn histories), 1K to 128K tokens, page sizes
// 1, 16 and 64, against two baselines measured in the same run (see workload.hpp):
//   x_memcmp       = match time / memcmp of the same tokens         (goal: <= 2 for long shared prefixes)
//   hashchain_over = block-hash-chain lookup time / match time       (goal: >= 5)
// plus ns per token and ns per node of the matched path. The match returns its pages as one run per node (no
// per-page work); `copy_x_memcmp` is a match plus copying every page out of the runs, as a cache filling a
// request's page table does, so the per-page cost stays visible (page size 1 especially). `peek_ns` is
// peek_prefix on the same keys (the read-only query a cache-aware router asks: no refresh, no page runs), measured
// in the same interleaving, and `peek_x_match` its time over the match's; BM_peek times peek_prefix in its loop.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "shapes.hpp"
#include "workload.hpp"

namespace {

using namespace unikv;
using namespace unikv::bench_tree;

// Which call the benchmark's own loop times (the counters are the same either way).
enum class Timed : std::uint8_t { match, peek };

template <class Tree>
void measure_match(benchmark::State& state, int conversations, Timed timed = Timed::match) {
    const auto prefix = static_cast<std::int32_t>(state.range(0));
    const auto page = static_cast<std::int32_t>(state.range(1));
    const Conversations conv = make_conversations(prefix, page, 2, conversations);
    Tree tree(config_for<Tree>(page));
    std::int32_t next_page = 1;
    populate(tree, conv, next_page);

    HashChain chain(page);
    std::vector<std::vector<VirtualPage>> expected;
    for (const auto& key : conv.keys) {
        const MatchResult m = tree.match_prefix({key});
        expected.emplace_back(m.device_pages.begin(), m.device_pages.end());
        chain.insert(key, expected.back());
    }
    // Both must find the whole key, with the same pages.
    std::vector<VirtualPage> found;
    for (std::size_t i = 0; i < conv.keys.size(); ++i) {
        if (chain.lookup(conv.keys[i], found) != static_cast<std::int32_t>(conv.keys[i].size()) || found != expected[i]) {
            state.SkipWithError("baseline disagrees with the tree");
            return;
        }
        const PrefixPeek p = tree.peek_prefix({conv.keys[i]});
        if (p.device_length != static_cast<std::int32_t>(conv.keys[i].size()) || p.best_length != p.device_length) {
            state.SkipWithError("peek_prefix disagrees with match_prefix");
            return;
        }
    }
    std::int64_t path_nodes = 0;
    for (NodeRef n = tree.match_prefix({conv.keys[0]}).device_node; !n.is_root(); n = tree.node_info(n).parent) ++path_nodes;

    // The ratios come from one interleaved measurement of the tree and both baselines (see seconds_per_call);
    // Google Benchmark's own time column is the plain loop mean.
    MemcmpFloor memcmp_floor(conv.keys);
    std::size_t q = 0;
    std::size_t qc = 0;
    auto floor = [&] { benchmark::DoNotOptimize(memcmp_floor()); };
    // The next key, wrapping without a division (which would pad every timed call alike).
    const auto next_key = [&](std::size_t& i) -> const std::vector<TokenId>& {
        const std::size_t k = i;
        if (++i == conv.keys.size()) i = 0;
        return conv.keys[k];
    };
    auto baseline = [&] { benchmark::DoNotOptimize(chain.lookup(next_key(qc), found)); };
    auto match = [&] { benchmark::DoNotOptimize(tree.match_prefix({next_key(q)}).device_length); };
    std::size_t qp = 0;
    auto peek = [&] { benchmark::DoNotOptimize(tree.peek_prefix({next_key(qp)}).device_length); };
    std::vector<VirtualPage> table(static_cast<std::size_t>(prefix));
    auto match_copy = [&] {
        const MatchResult m = tree.match_prefix({next_key(q)});
        VirtualPage* to = table.data();
        for (auto run : m.device_pages.runs()) {
            std::memcpy(static_cast<void*>(to), run.data(), run.size_bytes());
            to += run.size();
        }
        benchmark::DoNotOptimize(table.data());
    };
    const auto [t_memcmp, t_chain, t_match, t_copy, t_peek] =
        seconds_per_call(floor, baseline, match, match_copy, peek);

    q = 0;
    if (timed == Timed::match) {
        for (auto _ : state) {
            const MatchResult m = tree.match_prefix({conv.keys[q]});
            benchmark::DoNotOptimize(m.device_length);
            if (++q == conv.keys.size()) q = 0;
        }
    } else {
        for (auto _ : state) {
            const PrefixPeek p = tree.peek_prefix({conv.keys[q]});
            benchmark::DoNotOptimize(p.device_length);
            if (++q == conv.keys.size()) q = 0;
        }
    }
    report(state, t_match, t_memcmp, "x_memcmp", t_chain, prefix, path_nodes);
    state.counters["copy_x_memcmp"] = t_copy / t_memcmp;
    state.counters["peek_ns"] = t_peek * 1e9;
    state.counters["peek_x_match"] = t_peek / t_match;
}

// 8 conversations over 2 system prompts: each prompt node has 4 children in use, which its walk hints cover.
template <class Tree>
void BM_match(benchmark::State& state) {
    measure_match<Tree>(state, 8);
}

// 64 conversations: each prompt node has 32 children in use, more than a node keeps hints for, so every walk
// hashes the key's page and probes the child table there.
template <class Tree>
void BM_match_wide(benchmark::State& state) {
    measure_match<Tree>(state, 64);
}

// peek_prefix on BM_match's trees and keys: the benchmark's time column is the peek (the counters as BM_match's).
// The hybrid tree only, whose validators do the most per node; BM_match's `peek_ns` covers the others.
template <class Tree>
void BM_peek(benchmark::State& state) {
    measure_match<Tree>(state, 8, Timed::peek);
}

void wide_shapes(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({{1 << 10, 1 << 13}, {16}})->ArgNames({"prefix", "page"})->MinTime(0.1)->Unit(benchmark::kNanosecond);
}

BENCHMARK_TEMPLATE(BM_match, RadixTree<Full>)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_match, RadixTree<Full, Swa, Mamba>)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_peek, RadixTree<Full, Swa, Mamba>)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_match_wide, RadixTree<Full>)->Apply(wide_shapes);
BENCHMARK_TEMPLATE(BM_match_wide, RadixTree<Full, Swa, Mamba>)->Apply(wide_shapes);

}  // namespace

BENCHMARK_MAIN();
