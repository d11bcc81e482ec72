// The transfer controller on the CUDA backend: backup (D2H) and load-back (H2D, whole envelopes and per
// layer) of the same total bytes per envelope size, against one cudaMemcpyAsync of those bytes between pinned
// host memory and the device (the floor), timed on the controller's transfer stream with CUDA events behind a
// spin (cuda_timing.cuh). Counters: GB/s, x_floor (our device throughput / the floor's), host_us (host time
// to queue and submit one batch), late. Runs only on a GPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/transfer/transfer_controller.hpp>

#include "cuda_timing.cuh"

namespace {

using namespace unikv;
using bench_cuda::envelope_sizes;
using unikv::detail::cuda::check;
using Alloc = UnifiedAllocator<FullLayout, CudaBackend>;
using Host = SeparateHostPools::impl<CudaBackend, FullLayout>;
using Controller = TransferController<CudaBackend, Host, std::size_t>;

constexpr std::size_t total_bytes = std::size_t{64} << 20;
constexpr std::int32_t layers = 4;
constexpr std::size_t entry_bytes = layers * 2 * 256;  // 4 layers of K and V rows of 256 bytes

ArenaConfig config_for(std::size_t envelope_bytes) {
    return ArenaConfig{.model = {.full = {.layers = layers, .kv_heads = 2, .head_dim = 64, .dtype_bytes = 2}},
                       .page_sizes = {.full = {static_cast<std::int32_t>(envelope_bytes / entry_bytes)}},
                       .arena_bytes = 2 * total_bytes + 4 * envelope_bytes};
}

void BM_cuda_transfer(benchmark::State& state, TransferDirection direction, LoadEvents events) {
    const auto envelope = static_cast<std::size_t>(state.range(0));
    CudaBackend backend;
    auto stream = backend.make_stream();
    Alloc alloc(backend, config_for(envelope), stream);
    HostConfig host_config;
    host_config.pages[Component::full] = static_cast<std::int32_t>(total_bytes / envelope);
    Host host(backend, alloc.spec(), host_config, stream);
    Controller ctl(backend, {.load_events = events});
    std::vector<VirtualPage> pages(total_bytes / envelope);
    std::vector<HostPage> host_pages(pages.size());
    if (!alloc.alloc(pages)) throw std::runtime_error("bench: the arena is too small");
    const HostRequest request{.component = Component::full, .out = host_pages};
    if (!host.alloc(std::span(&request, 1))) throw std::runtime_error("bench: the host pool is too small");
    stream.ref().synchronize();
    auto floor_device = backend.allocate_device(total_bytes);
    auto floor_host = backend.allocate_pinned(total_bytes);
    // A node carries 64 KiB (one page from 64 KiB envelopes up).
    const std::size_t per_node = std::max<std::size_t>(1, (std::size_t{64} << 10) / envelope);

    bench_cuda::EventTimer timer(1000);
    for (auto _ : state) {
        const bench_cuda::Timing t = timer.measure(
            ctl.stream().native(),
            [&] {
                for (std::size_t first = 0; first < pages.size(); first += per_node) {
                    const std::size_t n = std::min(per_node, pages.size() - first);
                    const TransferRequest r{.full = std::span(pages).subspan(first, n),
                                            .full_host = std::span(host_pages).subspan(first, n)};
                    if (direction == TransferDirection::write) ctl.queue_write(alloc, r, first);
                    else ctl.queue_load(alloc, r, first);
                }
                if (direction == TransferDirection::write) (void)ctl.start_writing(alloc, host);
                else (void)ctl.start_loading(alloc, host);
            },
            [&] {
                const bool write = direction == TransferDirection::write;
                check(cudaMemcpyAsync(write ? static_cast<void*>(floor_host.data()) : floor_device.data(),
                                      write ? static_cast<const void*>(floor_device.data()) : floor_host.data(),
                                      total_bytes, write ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                      ctl.stream().native()),
                      "cudaMemcpyAsync");
            });
        state.SetIterationTime(t.ours_ms / 1e3);
        const std::size_t acked = direction == TransferDirection::write ? ctl.writing_check().size()
                                                                        : ctl.loading_check().size();
        if (acked == 0) throw std::runtime_error("bench: the batch was not acknowledged after its timing");
    }
    timer.report(state, "GB/s", static_cast<double>(total_bytes) * static_cast<double>(state.iterations()));
}

}  // namespace

BENCHMARK_CAPTURE(BM_cuda_transfer, backup_vs_d2h_cudaMemcpy, TransferDirection::write, LoadEvents::whole)
    ->Apply(envelope_sizes);
BENCHMARK_CAPTURE(BM_cuda_transfer, load_back_vs_h2d_cudaMemcpy, TransferDirection::load, LoadEvents::whole)
    ->Apply(envelope_sizes);
BENCHMARK_CAPTURE(BM_cuda_transfer, layered_load_back_vs_h2d_cudaMemcpy, TransferDirection::load,
                  LoadEvents::per_layer)
    ->Apply(envelope_sizes);

BENCHMARK_MAIN();
