// Translation (virtual token ids to physical ones through v2p) against memcpy of the same number of id
// bytes, both measured in this binary over the same iterations. Token ids come as requests do: rows of `row`
// consecutive virtual pages (a request's pages, allocated together: the allocator hands a freed row back in
// its order) in a random row order, tokens in order within a page; `row` 1 is a random page order, the worst
// case (at page size 1, a plain gather). Counters: Gtokens/s, and x_memcpy = our speed / memcpy speed (goal:
// >= 0.5).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

namespace {

using namespace unikv;

template <class L>
void translate(benchmark::State& state) {
    const auto tokens = static_cast<std::size_t>(state.range(0));
    const std::int32_t page_size = static_cast<std::int32_t>(state.range(1));
    const auto row = static_cast<std::size_t>(state.range(2));
    HostBackend backend;
    auto stream = backend.make_stream();
    const std::int32_t pages = 16384;
    UnifiedAllocator<L, HostBackend> alloc(
        backend,
        {.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                   .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                   .swa_window_tokens = 64,
                   .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
         .page_sizes = {.full = {page_size}, .swa = {page_size}, .mamba = {1}},
         .arena_bytes = static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size) * 32 * 2 + (1 << 20)},
        stream);
    std::vector<VirtualPage> live(static_cast<std::size_t>(pages / 2));
    if (!alloc.alloc(live)) state.SkipWithError("setup allocation failed");
    std::mt19937 rng(7);
    std::vector<std::size_t> rows(live.size() / row);  // row r is live[r * row, (r + 1) * row)
    for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = r;
    std::shuffle(rows.begin(), rows.end(), rng);
    std::vector<VirtualToken> in;
    for (std::size_t i = 0; in.size() < tokens; ++i) {
        const VirtualPage v = live[rows[(i / row) % rows.size()] * row + i % row];
        for (std::int32_t o = 0; o < page_size && in.size() < tokens; ++o) in.emplace_back(v.value() * page_size + o);
    }
    std::vector<PhysicalToken> out(tokens);
    std::vector<std::int32_t> raw(tokens);
    std::vector<std::int32_t> copy(tokens);
    for (std::size_t i = 0; i < tokens; ++i) raw[i] = in[i].value();
    constexpr int reps = 16;
    double ours = 0;
    double reference = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) {
            alloc.translate_full(in, out);
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
        }
        const auto t1 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) {
            std::memcpy(copy.data(), raw.data(), tokens * sizeof(std::int32_t));
            benchmark::DoNotOptimize(copy.data());
            benchmark::ClobberMemory();
        }
        const auto t2 = std::chrono::steady_clock::now();
        ours += std::chrono::duration<double>(t1 - t0).count();
        reference += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    }
    const double n = static_cast<double>(state.iterations()) * reps * static_cast<double>(tokens);
    state.counters["Gtokens/s"] = n / ours / 1e9;
    state.counters["x_memcpy"] = reference / ours;
    state.SetItemsProcessed(static_cast<std::int64_t>(n));
}

}  // namespace

BENCHMARK_TEMPLATE(translate, FullLayout)
    ->ArgsProduct({{1024, 16384, 262144}, {16}, {1}})
    ->ArgNames({"tokens", "page_size", "row"})
    ->UseManualTime()
    ->MinTime(0.05);
BENCHMARK_TEMPLATE(translate, SwaFullLayout)
    ->ArgsProduct({{1024, 16384, 262144}, {16, 1, 3}, {1}})
    ->ArgsProduct({{1024, 16384, 262144}, {1}, {256}})
    ->ArgNames({"tokens", "page_size", "row"})
    ->UseManualTime()
    ->MinTime(0.05);

BENCHMARK_MAIN();
