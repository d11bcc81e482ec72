// Page-envelope copy throughput of the host backend against memcpy of the same total bytes (the floor),
// both measured in this binary, between buffers allocated the same way. Also measures Thrust's CPP system
// doing the same gather (when CCCL is found), which is why the backend uses its own loop.
// Counters: GB/s, and x_memcpy = our throughput / memcpy throughput over the same iterations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#if __has_include(<thrust/copy.h>)
#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#define UNIKV_BENCH_HAS_THRUST 1
#endif

#include <unikv/backend/host_backend.hpp>

#include <chrono>

namespace {

using unikv::HostBackend;
constexpr std::size_t total_bytes = std::size_t{64} << 20;

struct Fixture {
    HostBackend backend;
    HostBackend::DeviceBuffer src = backend.allocate_device(total_bytes);
    HostBackend::PinnedBuffer dst = backend.allocate_pinned(total_bytes);
    std::vector<std::int32_t> src_pages, dst_pages;

    explicit Fixture(std::size_t page_bytes) {
        const auto pages = static_cast<std::int32_t>(total_bytes / page_bytes);
        src_pages.resize(static_cast<std::size_t>(pages));
        std::iota(src_pages.begin(), src_pages.end(), 0);
        dst_pages = src_pages;
        std::mt19937 rng(1);
        std::shuffle(src_pages.begin(), src_pages.end(), rng);
        std::shuffle(dst_pages.begin(), dst_pages.end(), rng);
        std::memset(src.data(), 0x3c, total_bytes);
        std::memset(dst.data(), 0, total_bytes);
    }
};

// Each iteration times the measured copy and, right after it, one memcpy of the same total bytes between two
// other buffers: the ratio is taken over the same period, so load from other processes cancels out.
// Its buffers come from the backend like the measured ones (same alignment, same huge-page advice).
struct MemcpyFloor {
    HostBackend backend;
    HostBackend::DeviceBuffer a = backend.allocate_device(total_bytes);
    HostBackend::PinnedBuffer b = backend.allocate_pinned(total_bytes);
    double seconds() {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(b.data(), a.data(), total_bytes);
        benchmark::ClobberMemory();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
};

template <class Body>
void timed_loop(benchmark::State& state, Body body) {
    MemcpyFloor floor;
    double ours = 0, reference = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.SetIterationTime(t);
        ours += t;
        state.PauseTiming();
        reference += floor.seconds();
        state.ResumeTiming();
    }
    state.counters["GB/s"] = static_cast<double>(total_bytes) * static_cast<double>(state.iterations()) / ours / 1e9;
    state.counters["x_memcpy"] = reference / ours;
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total_bytes));
}

// The backend path: queue on an asynchronous stream, then wait for it (includes the worker hand-off).
void BM_backend_copy_pages(benchmark::State& state) {
    const auto page_bytes = static_cast<std::size_t>(state.range(0));
    Fixture f(page_bytes);
    auto stream = f.backend.make_stream();
    timed_loop(state, [&] {
        f.backend.copy_pages_async(f.src.region(), f.src_pages, f.dst.region(), f.dst_pages, page_bytes, stream);
        stream.ref().synchronize();
    });
}

#ifdef UNIKV_BENCH_HAS_THRUST
// The same gather through Thrust's CPP system: one thrust::copy of bytes per page pair.
void BM_thrust_cpp_copy_pages(benchmark::State& state) {
    const auto page_bytes = static_cast<std::size_t>(state.range(0));
    Fixture f(page_bytes);
    std::byte* src = f.src.data();
    std::byte* dst = f.dst.data();
    const std::int32_t* sp = f.src_pages.data();
    const std::int32_t* dp = f.dst_pages.data();
    timed_loop(state, [&] {
        thrust::for_each(thrust::cpp::par, thrust::counting_iterator<std::size_t>(0),
                         thrust::counting_iterator<std::size_t>(f.src_pages.size()), [=](std::size_t i) {
                             const std::byte* s = src + static_cast<std::size_t>(sp[i]) * page_bytes;
                             thrust::copy(thrust::cpp::par, s, s + page_bytes,
                                          dst + static_cast<std::size_t>(dp[i]) * page_bytes);
                         });
        benchmark::ClobberMemory();
    });
}

#endif

// The floor against itself (two buffer pairs), showing the noise level of the ratio: about 1.0.
void BM_memcpy_floor(benchmark::State& state) {
    MemcpyFloor own;
    timed_loop(state, [&] { (void)own.seconds(); });
}

void envelope_sizes(benchmark::internal::Benchmark* b) {
    b->ArgName("envelope_bytes");
    for (std::int64_t bytes : {4096, 16384, 65536, 262144, 1048576}) b->Arg(bytes);
    b->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseManualTime();
}

}  // namespace

BENCHMARK(BM_memcpy_floor)->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseManualTime();
BENCHMARK(BM_backend_copy_pages)->Apply(envelope_sizes);
#ifdef UNIKV_BENCH_HAS_THRUST
BENCHMARK(BM_thrust_cpp_copy_pages)->Apply(envelope_sizes);
#endif

BENCHMARK_MAIN();
