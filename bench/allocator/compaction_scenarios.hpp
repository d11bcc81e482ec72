#pragma once
// The compaction scenarios of the host and CUDA compaction benchmarks, on any backend: each has an untimed
// `setup()`, the timed `act()` (its copies queued on the allocator's stream; false when it did not do its job),
// and an untimed `cleanup()` that returns the allocator to its starting state.

#include <cstddef>
#include <vector>

#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>

namespace unikv::bench_compaction {

// One FULL/SWA token of an 8-layer model with 8 KV heads of 128 dims in bf16: 32 KiB; 16-token pages: 512 KiB.
inline constexpr std::size_t envelope_bytes = 16 * 32768;

inline ArenaConfig big_pages(std::size_t arena_bytes) {
    const AttentionShape layer{.layers = 8, .kv_heads = 8, .head_dim = 128, .dtype_bytes = 2};
    return {.model = {.full = layer, .swa = layer, .swa_window_tokens = 128,
                      .mamba = {.layers = 8, .conv_state_bytes = 16384, .temporal_state_bytes = 16384}},
            .page_sizes = {.full = {16}, .swa = {16}, .mamba = {1}},
            .arena_bytes = arena_bytes};
}

// SWA lazy end: fill `pages` pages, tombstone every other one, then an urgent flush packs the survivors.
template <class B>
struct UrgentFlush {
    UrgentFlush(B& backend, typename B::Stream& stream, std::size_t pages)
        : alloc(backend, big_pages((2 * pages + 8) * envelope_bytes), stream), live(pages) {}

    bool setup() {
        if (!alloc.alloc(live)) return false;
        odd.clear();
        rest.clear();
        for (std::size_t i = 0; i < live.size(); ++i) (i % 2 == 0 ? odd : rest).push_back(live[i]);
        alloc.free_swa(odd);
        return true;
    }
    bool act() { return alloc.flush(FlushMode::urgent).pages_moved > 0; }
    void cleanup() {
        alloc.free_full(odd);
        alloc.free(rest);
        (void)alloc.flush(FlushMode::urgent);
    }

    UnifiedAllocator<SwaFullLayout, B> alloc;
    std::vector<VirtualPage> live;
    std::vector<VirtualPage> odd;
    std::vector<VirtualPage> rest;
};

// Tri-pool float: `pages` SWA pages, then make_room on the low side asks for more than the float's low gap plus
// half its span, so half of the live pages move (boundary relocation) each time.
template <class B>
struct MakeRoomLow {
    MakeRoomLow(B& backend, typename B::Stream& stream, std::size_t pages)
        : alloc(backend, big_pages((4 * pages + 16) * envelope_bytes), stream), live(pages) {}

    bool setup() {
        if (!alloc.alloc(live)) return false;
        const auto [lo, hi] = alloc.byte_span(Component::swa);
        want = lo - alloc.byte_span(Component::mamba).second + (hi - lo) / 2;
        return true;
    }
    bool act() { return alloc.make_room(Side::low, want) >= want; }
    void cleanup() {
        alloc.free(live);
        (void)alloc.flush(FlushMode::urgent);
    }

    UnifiedAllocator<TriPoolLayout, B> alloc;
    std::vector<VirtualPage> live;
    std::size_t want = 0;
};

}  // namespace unikv::bench_compaction
