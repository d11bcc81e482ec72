// insert of a new turn onto a cached conversation (system prompt + multi-turn history of 1K to 128K tokens, page
// sizes 1, 16 and 64): the walk over the cached prefix plus one new leaf of 256 tokens. Measured against
// baselines in the same run (see workload.hpp):
//   x_floor        = insert time / (memcmp of the cached prefix + memcpy of the new tokens)
//   hashchain_over = block-hash-chain insert time (hash every page, look up the cached ones, add the new) / insert
// plus ns per token of the key and ns per node of the path.

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "shapes.hpp"
#include "workload.hpp"

namespace {

using namespace unikv;
using namespace unikv::bench_tree;

// A measured step and how to undo a batch of them (for seconds_per_step).
template <class Timed, class Untimed>
struct Unit {
    Timed timed;
    Untimed untimed;
};

template <class Tree>
void BM_insert(benchmark::State& state) {
    const auto prefix = static_cast<std::int32_t>(state.range(0));
    const auto page = static_cast<std::int32_t>(state.range(1));
    const std::int32_t turn = std::max(page, 256 / page * page);
    const Conversations conv = make_conversations(prefix, page);
    Tree tree(config_for<Tree>(page));
    std::int32_t next_page = 1;
    populate(tree, conv, next_page, /*retention=*/1);  // the history outranks the new turns

    // Requests: every conversation plus one of several fresh turns; cached pages reused, fresh pages for the turn.
    std::mt19937 rng(11);
    std::uniform_int_distribution<TokenId> token(0, 150'000);
    std::vector<std::vector<TokenId>> keys;
    std::vector<std::vector<VirtualPage>> pages;
    HashChain chain(page);
    for (const auto& base : conv.keys) {
        const MatchResult m = tree.match_prefix({base});
        const std::vector<VirtualPage> cached(m.device_pages.begin(), m.device_pages.end());
        chain.insert(base, cached);
        for (int s = 0; s < 2; ++s) {
            keys.push_back(base);
            for (std::int32_t t = 0; t < turn; ++t) keys.back().push_back(token(rng));
            pages.push_back(cached);
            while (pages.back().size() * static_cast<std::size_t>(page) < keys.back().size())
                pages.back().emplace_back(next_page++);
        }
    }
    const std::size_t n = keys.size();
    const auto fresh_tokens = static_cast<std::int64_t>(n) * turn;
    auto insert = [&](std::size_t i) {
        auto r = tree.insert({keys[i]}, {.pages = pages[i]});
        benchmark::DoNotOptimize(r.node);
    };
    auto undo = [&] {
        auto ev = tree.evict(Component::full, fresh_tokens);  // exactly the new class-0 leaves
        ev.actions.mark_executed();
    };
    for (std::size_t i = 0; i < n; ++i) insert(i);
    // Nodes on an inserted key's path, the new leaf included (inserting it again changes nothing and returns it).
    std::int64_t path_nodes = 0;
    {
        auto again = tree.insert({keys[0]}, {.pages = pages[0]});
        again.actions.mark_executed();
        for (NodeRef x = again.node; !x.is_root(); x = tree.node_info(x).parent) ++path_nodes;
    }
    undo();
    if (tree.evictable_size(Component::full) + tree.protected_size(Component::full) !=
        static_cast<std::int64_t>(conv.keys.size()) * prefix - (static_cast<std::int64_t>(conv.keys.size()) - 2) * (prefix / 4 / page * page)) {
        state.SkipWithError("undo did not restore the cached history");
        return;
    }

    // The floor reads the same bytes as the tree: each request's prefix against its cached conversation, plus a
    // copy of the new tokens.
    std::vector<TokenId> sink(static_cast<std::size_t>(turn));
    const std::size_t per_conversation = n / conv.keys.size();
    Unit floor{[&](std::size_t i) {
                   const auto& cached = conv.keys[i / per_conversation];
                   benchmark::DoNotOptimize(std::memcmp(keys[i].data(), cached.data(), cached.size() * sizeof(TokenId)));
                   std::memcpy(sink.data(), keys[i].data() + prefix, sink.size() * sizeof(TokenId));
                   benchmark::ClobberMemory();
               },
               [] {}};
    std::vector<std::vector<std::uint64_t>> fresh_hashes;
    for (const auto& k : keys) fresh_hashes.push_back(chain.hashes(k, static_cast<std::size_t>(prefix / page)));
    Unit baseline{[&](std::size_t i) { chain.insert(keys[i], pages[i]); },
                  [&] {
                      for (const auto& h : fresh_hashes) chain.erase(h);
                  }};
    Unit tree_unit{insert, undo};
    const auto [t_floor, t_chain, t_insert] = seconds_per_step(n, floor, baseline, tree_unit);

    std::size_t q = 0;
    for (auto _ : state) {
        insert(q);
        if (++q == n) {
            state.PauseTiming();
            undo();
            q = 0;
            state.ResumeTiming();
        }
    }
    undo();
    report(state, t_insert, t_floor, "x_floor", t_chain, prefix + turn, path_nodes);
}

BENCHMARK_TEMPLATE(BM_insert, RadixTree<Full>)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_insert, RadixTree<Full, Swa, Mamba>)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
