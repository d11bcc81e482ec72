// Page-envelope copy throughput of the CUDA backend, against floors measured in this binary over the same
// bytes: a device-to-device cudaMemcpyAsync (for arena moves) and a pinned host-to-device cudaMemcpyAsync
// (for load-backs). Device time from CUDA events with the host's queueing hidden behind a spin (cuda_timing.cuh);
// counters: GB/s and x_floor (our device throughput / the floor's), host_us (host time to queue one copy),
// late (samples whose queueing outlasted the spin).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>

#include "cuda_timing.cuh"

namespace {

using unikv::CudaBackend;
using unikv::detail::cuda::check;
constexpr std::size_t total_bytes = std::size_t{256} << 20;

enum class Direction { device_to_device, host_to_device };

// The source's memory space is part of its buffer type, so each direction instantiates the loop.
template <class Source>
void copy_pages_from(benchmark::State& state, CudaBackend& backend, const Source& src) {
    const auto page_bytes = static_cast<std::size_t>(state.range(0));
    auto stream = backend.make_stream();
    auto dst = backend.allocate_device(total_bytes);
    auto floor_dst = backend.allocate_device(total_bytes);
    std::vector<std::int32_t> sp(total_bytes / page_bytes), dp(sp.size());
    std::iota(sp.begin(), sp.end(), 0);
    dp = sp;
    std::mt19937 rng(3);
    std::shuffle(sp.begin(), sp.end(), rng);
    std::shuffle(dp.begin(), dp.end(), rng);
    bench_cuda::EventTimer timer(1000);
    for (auto _ : state) {
        const bench_cuda::Timing t = timer.measure(
            stream.ref().native(),
            [&] { backend.copy_pages_async(src.region(), sp, dst.region(), dp, page_bytes, stream); },
            [&] {
                check(cudaMemcpyAsync(floor_dst.data(), src.data(), total_bytes, cudaMemcpyDefault,
                                      stream.ref().native()),
                      "cudaMemcpyAsync");
            });
        state.SetIterationTime(t.ours_ms / 1e3);
    }
    timer.report(state, "GB/s", static_cast<double>(total_bytes) * static_cast<double>(state.iterations()));
}

void BM_cuda_copy_pages(benchmark::State& state, Direction direction) {
    CudaBackend backend;
    if (direction == Direction::host_to_device) {
        copy_pages_from(state, backend, backend.allocate_pinned(total_bytes));
    } else {
        copy_pages_from(state, backend, backend.allocate_device(total_bytes));
    }
}

void envelope_sizes(benchmark::internal::Benchmark* b) {
    b->ArgName("envelope_bytes");
    for (std::int64_t bytes : {4096, 16384, 65536, 262144, 1048576}) b->Arg(bytes);
    b->Unit(benchmark::kMillisecond)->MinTime(0.05)->UseManualTime();
}

}  // namespace

BENCHMARK_CAPTURE(BM_cuda_copy_pages, d2d_vs_cudaMemcpy, Direction::device_to_device)->Apply(envelope_sizes);
BENCHMARK_CAPTURE(BM_cuda_copy_pages, h2d_vs_pinned_cudaMemcpy, Direction::host_to_device)->Apply(envelope_sizes);

BENCHMARK_MAIN();
