// Page-envelope copy throughput of the CUDA backend, against floors measured in this binary over the same
// bytes: a device-to-device cudaMemcpyAsync (for arena moves) and a pinned host-to-device cudaMemcpyAsync
// (for load-backs). Timed with CUDA events; counters: GB/s and x_floor (our throughput / the floor's).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>

namespace {

using unikv::CudaBackend;
using unikv::detail::cuda::check;
constexpr std::size_t total_bytes = std::size_t{256} << 20;

enum class Direction { device_to_device, host_to_device };

float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms;
}

void BM_cuda_copy_pages(benchmark::State& state, Direction direction) {
    const auto page_bytes = static_cast<std::size_t>(state.range(0));
    CudaBackend backend;
    auto stream = backend.make_stream();
    auto src = direction == Direction::host_to_device ? backend.allocate_pinned(total_bytes)
                                                      : backend.allocate_device(total_bytes);
    auto dst = backend.allocate_device(total_bytes);
    auto floor_dst = backend.allocate_device(total_bytes);
    std::vector<std::int32_t> sp(total_bytes / page_bytes), dp(sp.size());
    std::iota(sp.begin(), sp.end(), 0);
    dp = sp;
    std::mt19937 rng(3);
    std::shuffle(sp.begin(), sp.end(), rng);
    std::shuffle(dp.begin(), dp.end(), rng);
    cudaEvent_t t0, t1, t2;
    check(cudaEventCreate(&t0), "cudaEventCreate");
    check(cudaEventCreate(&t1), "cudaEventCreate");
    check(cudaEventCreate(&t2), "cudaEventCreate");
    double ours = 0, floor = 0;
    for (auto _ : state) {
        check(cudaEventRecord(t0, stream.ref().native()), "cudaEventRecord");
        backend.copy_pages_async(src.region(), sp, dst.region(), dp, page_bytes, stream);
        check(cudaEventRecord(t1, stream.ref().native()), "cudaEventRecord");
        check(cudaMemcpyAsync(floor_dst.data(), src.data(), total_bytes, cudaMemcpyDefault, stream.ref().native()),
              "cudaMemcpyAsync");
        check(cudaEventRecord(t2, stream.ref().native()), "cudaEventRecord");
        check(cudaEventSynchronize(t2), "cudaEventSynchronize");
        const double ms = elapsed_ms(t0, t1);
        state.SetIterationTime(ms / 1e3);
        ours += ms;
        floor += elapsed_ms(t1, t2);
    }
    state.counters["GB/s"] = static_cast<double>(total_bytes) * static_cast<double>(state.iterations()) / (ours / 1e3) / 1e9;
    state.counters["x_floor"] = floor / ours;
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaEventDestroy(t2);
}

void envelope_sizes(benchmark::internal::Benchmark* b) {
    b->ArgName("envelope_bytes");
    for (std::int64_t bytes : {4096, 16384, 65536, 262144, 1048576}) b->Arg(bytes);
    b->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseManualTime();
}

}  // namespace

BENCHMARK_CAPTURE(BM_cuda_copy_pages, d2d_vs_cudaMemcpy, Direction::device_to_device)->Apply(envelope_sizes);
BENCHMARK_CAPTURE(BM_cuda_copy_pages, h2d_vs_pinned_cudaMemcpy, Direction::host_to_device)->Apply(envelope_sizes);

BENCHMARK_MAIN();
