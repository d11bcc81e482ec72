// Compaction throughput: bytes moved per second by an urgent flush (a lazy end pool packing every other page)
// and by make_room (the tri-pool's float relocating its pages), from the call until the moves have run on
// the stream, against memcpy of the same bytes, both measured in this binary over the same iterations.
// Counters: GB/s, and x_memcpy = our throughput / memcpy throughput (goal: >= 0.7).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include <unikv/backend/host_backend.hpp>

#include "compaction_scenarios.hpp"

namespace {

using namespace unikv;

struct MemcpyFloor {
    explicit MemcpyFloor(std::size_t bytes) : a(backend.allocate_device(bytes)), b(backend.allocate_device(bytes)) {
        std::memset(a.data(), 1, bytes);
        std::memset(b.data(), 2, bytes);
    }
    double seconds(std::size_t bytes) {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(b.data(), a.data(), bytes);
        benchmark::ClobberMemory();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    HostBackend backend;
    HostBackend::DeviceBuffer a;
    HostBackend::DeviceBuffer b;
};

// Per iteration: `setup()` (untimed), then `act()` timed until the stream ran its moves, then the memcpy of
// the bytes the backend copied, then `cleanup()` (untimed).
template <class Setup, class Act, class Cleanup>
void measure(benchmark::State& state, HostBackend& backend, HostBackend::Stream& stream, MemcpyFloor& floor, Setup setup,
             Act act, Cleanup cleanup) {
    double ours = 0;
    double reference = 0;
    double moved = 0;
    for (auto _ : state) {
        state.PauseTiming();
        setup();
        const std::uint64_t before = backend.counters().bytes_copied;
        state.ResumeTiming();
        const auto t0 = std::chrono::steady_clock::now();
        act();
        stream.ref().synchronize();
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.SetIterationTime(t);
        state.PauseTiming();
        const auto bytes = static_cast<std::size_t>(backend.counters().bytes_copied - before);
        ours += t;
        moved += static_cast<double>(bytes);
        reference += floor.seconds(bytes);
        cleanup();
        state.ResumeTiming();
    }
    state.counters["GB/s"] = moved / ours / 1e9;
    state.counters["x_memcpy"] = reference / ours;
    state.SetBytesProcessed(static_cast<std::int64_t>(moved));
}

void flush_urgent(benchmark::State& state) {
    HostBackend backend;
    auto stream = backend.make_stream();
    bench_compaction::UrgentFlush<HostBackend> s(backend, stream, static_cast<std::size_t>(state.range(0)));
    std::memset(s.alloc.region().data, 7, s.alloc.region().size);
    MemcpyFloor floor(s.live.size() * bench_compaction::envelope_bytes);
    measure(
        state, backend, stream, floor, [&] { if (!s.setup()) state.SkipWithError("setup allocation failed"); },
        [&] { if (!s.act()) state.SkipWithError("the flush moved nothing"); }, [&] { s.cleanup(); });
}

void make_room_low(benchmark::State& state) {
    HostBackend backend;
    auto stream = backend.make_stream();
    bench_compaction::MakeRoomLow<HostBackend> s(backend, stream, static_cast<std::size_t>(state.range(0)));
    std::memset(s.alloc.region().data, 7, s.alloc.region().size);
    MemcpyFloor floor(s.live.size() * bench_compaction::envelope_bytes);
    measure(
        state, backend, stream, floor, [&] { if (!s.setup()) state.SkipWithError("setup allocation failed"); },
        [&] { if (!s.act()) state.SkipWithError("make_room did not open the room"); }, [&] { s.cleanup(); });
}

}  // namespace

BENCHMARK(flush_urgent)->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.1);
BENCHMARK(make_room_low)->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.1);

BENCHMARK_MAIN();
