// Page-envelope copy throughput of every copy engine of the CUDA backend (the warp kernel, cudaMemcpyBatchAsync,
// cub::DeviceMemcpy::Batched), device-to-device (arena moves), host-to-device (load-backs) and device-to-host
// (backups), 4 KiB to 1 MiB envelopes in shuffled order, each against a floor measured in this binary over the
// same bytes in the same direction: one contiguous cudaMemcpyAsync. DefaultCopyEngine should name, per
// direction, the engine with the best x_floor here. Device time from CUDA events with the host's queueing hidden
// behind a spin (cuda_timing.cuh); counters: GB/s and x_floor (our device throughput / the floor's), host_us
// (host time to queue one copy), late (samples whose queueing outlasted the spin).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <unikv/backend/cub_copy_engine.cuh>
#include <unikv/backend/cuda_backend.cuh>

#include "cuda_timing.cuh"

namespace {

using unikv::BasicCudaBackend;
using unikv::CopyDirection;
using unikv::MemorySpace;
using bench_cuda::envelope_sizes;
using unikv::detail::cuda::check;
constexpr std::size_t total_bytes = std::size_t{256} << 20;

template <MemorySpace Space, class Backend>
auto allocate(Backend& backend, std::size_t bytes) {
    if constexpr (Space == MemorySpace::device) {
        return backend.allocate_device(bytes);
    } else {
        return backend.allocate_pinned(bytes);
    }
}

template <class Engine, CopyDirection Direction>
void BM_cuda_copy_pages(benchmark::State& state) {
    constexpr bool from_host = Direction == CopyDirection::host_to_device;
    constexpr bool to_host = Direction == CopyDirection::device_to_host;
    constexpr MemorySpace from = from_host ? MemorySpace::pinned_host : MemorySpace::device;
    constexpr MemorySpace to = to_host ? MemorySpace::pinned_host : MemorySpace::device;
    const auto page_bytes = static_cast<std::size_t>(state.range(0));
    BasicCudaBackend<Engine> backend;
    auto stream = backend.make_stream();
    auto src = allocate<from>(backend, total_bytes);
    auto dst = allocate<to>(backend, total_bytes);
    auto floor_dst = allocate<to>(backend, total_bytes);
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

}  // namespace

BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::KernelCopyEngine, CopyDirection::device_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::KernelCopyEngine, CopyDirection::host_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::KernelCopyEngine, CopyDirection::device_to_host)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::MemcpyBatchCopyEngine, CopyDirection::device_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::MemcpyBatchCopyEngine, CopyDirection::host_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::MemcpyBatchCopyEngine, CopyDirection::device_to_host)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::CubBatchedCopyEngine, CopyDirection::device_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::CubBatchedCopyEngine, CopyDirection::host_to_device)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE2(BM_cuda_copy_pages, unikv::CubBatchedCopyEngine, CopyDirection::device_to_host)->Apply(envelope_sizes);

BENCHMARK_MAIN();
