#pragma once
// The shapes every tree benchmark runs and the counters it reports. Shapes: prefixes of 1K, 8K, 32K and 128K
// tokens at page sizes 1, 16 and 64, with a short minimum time so a whole binary stays near half a minute on a
// shared 2-core machine.

#include <benchmark/benchmark.h>

#include <cstdint>

namespace unikv::bench_tree {

// The counters every tree benchmark reports, from one interleaved measurement (seconds per operation):
// ns per token and per path node, the ratio to the floor under `floor_name`, and the hash chain's time over ours.
inline void report(benchmark::State& state, double tree, double floor, const char* floor_name, double chain,
                   std::int64_t tokens, std::int64_t path_nodes) {
    state.SetItemsProcessed(state.iterations() * tokens);
    state.counters["ns_per_token"] = tree * 1e9 / static_cast<double>(tokens);
    state.counters["ns_per_node"] = tree * 1e9 / static_cast<double>(path_nodes);
    state.counters["nodes"] = static_cast<double>(path_nodes);
    state.counters[floor_name] = tree / floor;
    state.counters["hashchain_over"] = chain / tree;
}

inline void shapes(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({{1 << 10, 1 << 13, 1 << 15, 1 << 17}, {1, 16, 64}})
        ->ArgNames({"prefix", "page"})
        ->MinTime(0.1)
        ->Unit(benchmark::kNanosecond);
}

}  // namespace unikv::bench_tree
