// Device translation (`translate_tokens_async`) of request rows of virtual tokens through a mirrored page
// table, against a floor measured in this binary over the same ids: a device-to-device cudaMemcpyAsync of
// the id array (translation reads the ids and writes as many, plus one table read per id). Device time from
// CUDA events with the launch hidden behind a spin (cuda_timing.cuh); counters: Gtok/s and x_floor (our device
// throughput / the floor's), late (samples whose launch outlasted the spin), host_us (host time per launch).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/pools/device_translate.cuh>

#include "cuda_timing.cuh"

namespace {

using namespace unikv;
using detail::cuda::check;

// range(0): tokens translated per call; range(1): page size. Pages are mapped in a random permutation and
// the tokens are whole requests' rows (consecutive ids), as a forward's index arrays are.
void BM_cuda_translate_tokens(benchmark::State& state) {
    const auto tokens = static_cast<std::size_t>(state.range(0));
    const auto page_size = static_cast<std::int32_t>(state.range(1));
    const auto pages = static_cast<std::int32_t>(tokens / static_cast<std::size_t>(page_size)) + 1;
    CudaBackend backend;
    auto stream = backend.make_stream();
    std::vector<std::int32_t> v2p(static_cast<std::size_t>(pages) + 1);
    std::iota(v2p.begin(), v2p.end() - 1, 0);
    std::mt19937 rng(5);
    std::shuffle(v2p.begin() + 1, v2p.end() - 1, rng);
    v2p.back() = -1;
    std::vector<VirtualToken> ids(tokens);
    for (std::size_t i = 0; i < tokens; ++i) ids[i] = VirtualToken{static_cast<std::int32_t>(page_size + i)};
    auto table = backend.allocate_device(v2p.size() * 4);
    auto in = backend.allocate_device(tokens * 4);
    auto out = backend.allocate_device(tokens * 4);
    auto floor_out = backend.allocate_device(tokens * 4);
    check(cudaMemcpy(table.data(), v2p.data(), v2p.size() * 4, cudaMemcpyDefault), "cudaMemcpy");
    check(cudaMemcpy(in.data(), ids.data(), tokens * 4, cudaMemcpyDefault), "cudaMemcpy");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // pageable uploads may still be in flight
    const TranslationTable t_table{reinterpret_cast<const std::int32_t*>(table.data()), static_cast<std::uint32_t>(pages),
                             static_cast<std::uint32_t>(page_size), page_shift_of(page_size)};
    const std::span<const VirtualToken> din(reinterpret_cast<const VirtualToken*>(in.data()), tokens);
    const std::span<PhysicalToken> dout(reinterpret_cast<PhysicalToken*>(out.data()), tokens);
    bench_cuda::EventTimer timer(50);
    for (auto _ : state) {
        const bench_cuda::Timing t = timer.measure(
            stream.ref().native(), [&] { translate_tokens_async(t_table, din, dout, stream); },
            [&] {
                check(cudaMemcpyAsync(floor_out.data(), in.data(), tokens * 4, cudaMemcpyDefault, stream.ref().native()),
                      "cudaMemcpyAsync");
            });
        state.SetIterationTime(t.ours_ms / 1e3);
    }
    // One spot check that the timed kernel translated: the last token's physical id.
    PhysicalToken last;
    check(cudaMemcpy(&last, dout.data() + tokens - 1, 4, cudaMemcpyDefault), "cudaMemcpy");
    const std::int32_t v = ids.back().value();
    const std::int32_t want = v2p[static_cast<std::size_t>(v / page_size)] * page_size + v % page_size;
    if (last.value() != want) state.SkipWithError("device translation returned a wrong id");
    timer.report(state, "Gtok/s", static_cast<double>(tokens) * static_cast<double>(state.iterations()));
}

}  // namespace

BENCHMARK(BM_cuda_translate_tokens)
    ->ArgNames({"tokens", "page"})
    ->ArgsProduct({{1 << 10, 1 << 14, 1 << 18, 1 << 22}, {1, 16, 64}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.01)
    ->UseManualTime();

BENCHMARK_MAIN();
