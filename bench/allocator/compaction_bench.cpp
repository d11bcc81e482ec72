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
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

namespace {

using namespace unikv;

// One FULL/SWA token of an 8-layer model with 8 KV heads of 128 dims in bf16: 32 KiB; 16-token pages: 512 KiB.
ArenaConfig big_pages(std::size_t arena_bytes) {
    const AttentionShape layer{.layers = 8, .kv_heads = 8, .head_dim = 128, .dtype_bytes = 2};
    return {.model = {.full = layer, .swa = layer, .swa_window_tokens = 128,
                      .mamba = {.layers = 8, .conv_state_bytes = 16384, .temporal_state_bytes = 16384}},
            .page_sizes = {.full = {16}, .swa = {16}, .mamba = {1}},
            .arena_bytes = arena_bytes};
}

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
    HostBackend::Buffer a;
    HostBackend::Buffer b;
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

// SWA lazy end: fill `pages` pages, free every other one, then an urgent flush packs the survivors.
void flush_urgent(benchmark::State& state) {
    const auto pages = static_cast<std::size_t>(state.range(0));
    constexpr std::size_t envelope = 16 * 32768;
    HostBackend backend;
    auto stream = backend.make_stream();
    UnifiedAllocator<SwaFullLayout, HostBackend> alloc(backend, big_pages((2 * pages + 8) * envelope), stream);
    std::memset(alloc.region().data, 7, alloc.region().size);
    MemcpyFloor floor(pages * envelope);
    std::vector<VirtualPage> live(pages);
    std::vector<VirtualPage> odd;
    std::vector<VirtualPage> rest;
    measure(
        state, backend, stream, floor,
        [&] {
            if (!alloc.alloc(live)) state.SkipWithError("setup allocation failed");
            odd.clear();
            rest.clear();
            for (std::size_t i = 0; i < live.size(); ++i) (i % 2 == 0 ? odd : rest).push_back(live[i]);
            alloc.free_swa(odd);
        },
        [&] { (void)alloc.flush(FlushMode::urgent); },
        [&] {
            alloc.free_full(odd);
            alloc.free(rest);
            (void)alloc.flush(FlushMode::urgent);
        });
}

// Tri-pool float: `pages` SWA pages, then make_room on the low side asks for more than the float's low gap
// plus half its span, so half of the live pages move (boundary relocation) each time.
void make_room_low(benchmark::State& state) {
    const auto pages = static_cast<std::size_t>(state.range(0));
    constexpr std::size_t envelope = 16 * 32768;
    HostBackend backend;
    auto stream = backend.make_stream();
    UnifiedAllocator<TriPoolLayout, HostBackend> alloc(backend, big_pages((4 * pages + 16) * envelope), stream);
    std::memset(alloc.region().data, 7, alloc.region().size);
    MemcpyFloor floor(pages * envelope);
    std::vector<VirtualPage> live(pages);
    std::size_t want = 0;
    measure(
        state, backend, stream, floor,
        [&] {
            if (!alloc.alloc(live)) state.SkipWithError("setup allocation failed");
            const auto [lo, hi] = alloc.byte_span(Component::swa);
            want = lo - alloc.byte_span(Component::mamba).second + (hi - lo) / 2;
        },
        [&] {
            if (alloc.make_room(Side::low, want) < want) state.SkipWithError("make_room did not open the room");
        },
        [&] {
            alloc.free(live);
            (void)alloc.flush(FlushMode::urgent);
        });
}

}  // namespace

BENCHMARK(flush_urgent)->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.1);
BENCHMARK(make_room_low)->Arg(64)->Arg(256)->ArgName("pages")->UseManualTime()->MinTime(0.1);

BENCHMARK_MAIN();
