// Compaction on a GPU: an urgent flush (a lazy end pool packing every other page) and make_room (the tri-pool's
// float relocating half its pages), with 512 KiB page envelopes, against a device-to-device cudaMemcpyAsync of
// the same number of bytes in one piece, both timed with CUDA events in the same iterations (the host's
// queueing hidden behind a spin, cuda_timing.cuh). Counters: GB/s and x_floor (our device throughput / the
// floor's), host_us (host time of the call: bookkeeping, queueing the copies and publishing the page tables),
// late (samples whose queueing outlasted the spin).
#include <benchmark/benchmark.h>

#include <algorithm>

#include <unikv/backend/cuda_backend.cuh>

#include "compaction_scenarios.hpp"
#include "cuda_timing.cuh"

namespace {

using namespace unikv;
using detail::cuda::check;

template <class Scenario>
void compaction(benchmark::State& state) {
    CudaBackend backend;
    auto stream = backend.make_stream();
    Scenario s(backend, stream, static_cast<std::size_t>(state.range(0)));
    auto floor_src = backend.allocate_device(2 * s.live.size() * bench_compaction::envelope_bytes);
    auto floor_dst = backend.allocate_device(floor_src.size());
    bench_cuda::EventTimer timer(2000);
    double moved = 0;
    for (auto _ : state) {
        if (!s.setup()) {
            state.SkipWithError("setup allocation failed");
            return;
        }
        const std::uint64_t before = backend.counters().bytes_copied;
        bool acted = false;
        const bench_cuda::Timing t = timer.measure(
            stream.ref().native(), [&] { acted = s.act(); },
            [&] {
                const std::size_t bytes = std::min<std::size_t>(backend.counters().bytes_copied - before, floor_src.size());
                check(cudaMemcpyAsync(floor_dst.data(), floor_src.data(), bytes, cudaMemcpyDeviceToDevice,
                                      stream.ref().native()),
                      "cudaMemcpyAsync");
            });
        if (!acted) {
            state.SkipWithError("the call moved nothing");
            return;
        }
        state.SetIterationTime(t.ours_ms / 1e3);
        moved += static_cast<double>(backend.counters().bytes_copied - before);
        s.cleanup();
    }
    timer.report(state, "GB/s", moved);
}

}  // namespace

BENCHMARK_TEMPLATE(compaction, bench_compaction::UrgentFlush<CudaBackend>)
    ->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(compaction, bench_compaction::MakeRoomLow<CudaBackend>)
    ->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.05)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
