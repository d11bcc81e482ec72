// The cache's round trip of tests/hicache (round_trip_scenario.hpp) on the GPU: the arena in device memory,
// the host pools pinned, every copy through the CUDA backend's page-envelope copies; rows written and read
// back with cudaMemcpyAsync through translation. Runs only on a GPU (scripts/gpu-check.sh).
#include <doctest/doctest.h>

#include <span>
#include <thread>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/host/separate_host_pools.hpp>

#include "hicache/round_trip_scenario.hpp"

using namespace unikv;

namespace {

// The round trip's backend adapter on CUDA: arena bytes move with cudaMemcpyAsync on the given stream (so behind
// its queued work), then the stream is synchronized; copies make progress on their own.
struct Gpu {
    using backend_type = CudaBackend;
    CudaBackend backend;

    void write(CudaBackend::stream_ref s, std::byte* to, std::span<const std::byte> bytes) {
        detail::cuda::check(cudaMemcpyAsync(to, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s.native()),
                            "cudaMemcpyAsync");
        s.synchronize();  // the pageable source must outlive the copy
    }
    void read(CudaBackend::stream_ref s, const std::byte* from, std::span<std::byte> out) {
        detail::cuda::check(cudaMemcpyAsync(out.data(), from, out.size(), cudaMemcpyDeviceToHost, s.native()),
                            "cudaMemcpyAsync");
        s.synchronize();
    }
    void progress() { std::this_thread::yield(); }
};

}  // namespace

// Separate host pools only (the default policy): a second instantiation of the whole cache would double this
// TU's nvcc time, and the host suite runs the scenario over both host-pool policies.
TEST_CASE("round trip by rows on the GPU: write-back drained, host hit loaded per layer, decode retracted and "
          "restored") {
    Gpu device;
    round_trip::run<SeparateHostPools>(device);
}
