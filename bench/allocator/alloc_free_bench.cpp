// alloc + free per page against a plain vector free-list doing the same id bookkeeping (pop an id, pop a
// physical page per pool, write v2p and p2v; and back), both measured in this binary over the same
// iterations. Counters: ns/page for both, and x_floor = our time / floor time (goal: <= 3 on the fast path).
//
// Modes: recycle = the pool holds 16 resident pages and the batch, so frees leave holes that the next alloc
// takes back (the steady state of a lazy pool: the fast path); fragmented = half of a large pool is live,
// interleaved with holes; frontier = every alloc extends the frontier and each round ends with a zero-copy
// opportunistic flush that absorbs the freed pages (so it also measures that flush).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

namespace {

using namespace unikv;

constexpr std::int32_t pool_pages = 8192;

ArenaConfig bench_config() {
    return {.model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                      .swa = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
                      .swa_window_tokens = 64,
                      .mamba = {.layers = 1, .conv_state_bytes = 32, .temporal_state_bytes = 32}},
            .page_sizes = {.full = {4}, .swa = {4}, .mamba = {1}},
            .arena_bytes = static_cast<std::size_t>(pool_pages) * 4 * 32};
}

// The floor: the id bookkeeping of `pools` page tables with plain vectors, no checks.
struct FreeList {
    FreeList(std::int32_t pages, int pools) : pools_(pools) {
        for (std::int32_t v = pages - 1; v >= 1; --v) ids_.push_back(v);
        for (int k = 0; k < pools; ++k) {
            for (std::int32_t p = pages - 1; p >= 1; --p) free_[k].push_back(p);
            v2p_[k].assign(static_cast<std::size_t>(pages) + 1, -1);
            p2v_[k].assign(static_cast<std::size_t>(pages) + 1, -1);
        }
    }
    void alloc(std::vector<std::int32_t>& out) {
        for (std::int32_t& v : out) {
            v = ids_.back();
            ids_.pop_back();
            for (int k = 0; k < pools_; ++k) {
                const std::int32_t p = free_[k].back();
                free_[k].pop_back();
                v2p_[k][static_cast<std::size_t>(v)] = p;
                p2v_[k][static_cast<std::size_t>(p)] = v;
            }
        }
    }
    void free(const std::vector<std::int32_t>& in) {
        for (std::int32_t v : in) {
            for (int k = 0; k < pools_; ++k) {
                const std::int32_t p = v2p_[k][static_cast<std::size_t>(v)];
                v2p_[k][static_cast<std::size_t>(v)] = -1;
                p2v_[k][static_cast<std::size_t>(p)] = -1;
                free_[k].push_back(p);
            }
            ids_.push_back(v);
        }
    }
    int pools_;
    std::vector<std::int32_t> ids_;
    std::vector<std::int32_t> free_[2];
    std::vector<std::int32_t> v2p_[2];
    std::vector<std::int32_t> p2v_[2];
};

enum Mode : std::int64_t { recycle = 0, fragmented = 1, frontier = 2 };

template <class L>
void alloc_free(benchmark::State& state) {
    using A = UnifiedAllocator<L, HostBackend>;
    const auto batch = static_cast<std::size_t>(state.range(0));
    const auto mode = static_cast<Mode>(state.range(1));
    HostBackend backend;
    auto stream = backend.make_stream();
    A alloc(backend, bench_config(), stream);
    // A few resident pages, as in any serving pool (an empty float would park and re-centre every round).
    std::vector<VirtualPage> resident(16);
    if (!alloc.alloc(resident)) state.SkipWithError("setup allocation failed");
    if (mode == fragmented) {
        // Half the pool live, every other page a hole.
        std::vector<VirtualPage> live(static_cast<std::size_t>(alloc.available_size() * 9 / 10));
        if (!alloc.alloc(live)) state.SkipWithError("setup allocation failed");
        std::vector<VirtualPage> odd;
        for (std::size_t i = 0; i < live.size(); i += 2) odd.push_back(live[i]);
        alloc.free(odd);
    }
    FreeList floor(pool_pages, A::has_swa ? 2 : 1);
    std::vector<VirtualPage> pages(batch);
    std::vector<std::int32_t> floor_ids(batch);
    constexpr int reps = 32;  // rounds per timed sample, to amortize the clock
    double ours = 0;
    double reference = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) {
            if (!alloc.alloc(pages)) {
                state.SkipWithError("allocation failed");
                break;
            }
            benchmark::DoNotOptimize(pages.data());
            alloc.free(pages);
            if (mode == frontier) (void)alloc.flush_opportunistic();
        }
        const auto t1 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) {
            floor.alloc(floor_ids);
            benchmark::DoNotOptimize(floor_ids.data());
            floor.free(floor_ids);
        }
        const auto t2 = std::chrono::steady_clock::now();
        ours += std::chrono::duration<double>(t1 - t0).count();
        reference += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    }
    const double ops = static_cast<double>(state.iterations()) * reps * static_cast<double>(batch);
    state.counters["ns/page"] = ours / ops * 1e9;
    state.counters["floor_ns/page"] = reference / ops * 1e9;
    state.counters["x_floor"] = ours / reference;
    state.SetItemsProcessed(static_cast<std::int64_t>(ops));
}

void batches(benchmark::internal::Benchmark* b, std::initializer_list<std::int64_t> modes) {
    for (std::int64_t mode : modes) {
        for (std::int64_t batch : {1, 4, 16, 64, 256}) b->Args({batch, mode});
    }
    b->ArgNames({"batch", "mode"})->UseManualTime()->MinTime(0.05);
}

}  // namespace

BENCHMARK_TEMPLATE(alloc_free, FullLayout)->Apply([](auto* b) { batches(b, {recycle, fragmented, frontier}); });
BENCHMARK_TEMPLATE(alloc_free, SwaFullLayout)->Apply([](auto* b) { batches(b, {recycle, fragmented, frontier}); });
BENCHMARK_TEMPLATE(alloc_free, MambaFullLayout)->Apply([](auto* b) { batches(b, {recycle, fragmented}); });
BENCHMARK_TEMPLATE(alloc_free, TriPoolLayout)->Apply([](auto* b) { batches(b, {recycle, fragmented}); });
BENCHMARK_TEMPLATE(alloc_free, EagerSwaFullLayout)->Apply([](auto* b) { batches(b, {recycle}); });

BENCHMARK_MAIN();
