// The main job until the simulator lands: one arena and one pinned host pool on the CPU backend, a request's
// KV rows offloaded to host, dropped, loaded back layer by layer while "compute" waits per layer, and then
// compacted to the low end of the arena. Every token row carries a marker that is read back through the
// virtual -> physical page table after each step; the program fails loudly if one row is wrong.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include <unikv/unikv.hpp>

namespace {

constexpr std::size_t layers = 4, row_bytes = 64;              // K+V of one layer of one token
constexpr std::size_t entry_bytes = layers * row_bytes;        // token-major: [L0|L1|L2|L3]
constexpr std::size_t page_tokens = 16, page_bytes = page_tokens * entry_bytes;
constexpr std::int32_t arena_pages = 64, host_pages = 16, request_pages = 8;

std::uint32_t marker(std::int32_t virtual_page, std::size_t token, std::size_t layer) {
    return 0x5000'0000u + static_cast<std::uint32_t>(virtual_page) * 4096u + static_cast<std::uint32_t>(token * 16 + layer);
}

void write_rows(unikv::device_region_ref arena, const std::vector<std::int32_t>& v2p) {
    for (std::int32_t v = 0; v < request_pages; ++v)
        for (std::size_t t = 0; t < page_tokens; ++t)
            for (std::size_t l = 0; l < layers; ++l) {
                const std::uint32_t m = marker(v, t, l);
                std::memcpy(arena.data + v2p[v] * page_bytes + t * entry_bytes + l * row_bytes, &m, sizeof m);
            }
}

std::size_t count_bad_rows(unikv::device_region_ref arena, const std::vector<std::int32_t>& v2p, std::size_t upto_layer) {
    std::size_t bad = 0;
    for (std::int32_t v = 0; v < request_pages; ++v)
        for (std::size_t t = 0; t < page_tokens; ++t)
            for (std::size_t l = 0; l < upto_layer; ++l) {
                std::uint32_t m = 0;
                std::memcpy(&m, arena.data + v2p[v] * page_bytes + t * entry_bytes + l * row_bytes, sizeof m);
                bad += m != marker(v, t, l);
            }
    return bad;
}

void expect(bool ok, const char* step) {
    std::printf("  %-58s %s\n", step, ok ? "ok" : "FAILED");
    if (!ok) std::exit(1);
}

}  // namespace

int main() {
    unikv::HostBackend backend;  // asynchronous: copies run on worker threads, after they are queued
    auto compute = backend.make_stream();
    auto transfer = backend.make_stream();
    auto arena = backend.allocate_device(arena_pages * page_bytes);
    auto host = backend.allocate_pinned(host_pages * page_bytes);
    std::printf("unikv %d.%d.%d walkthrough: arena %d pages x %zu B, host pool %d pages, %zu layers\n",
                UNIKV_VERSION_MAJOR, UNIKV_VERSION_MINOR, UNIKV_VERSION_PATCH, arena_pages, page_bytes,
                host_pages, layers);

    // A request holds virtual pages 0..7, physically at the top of the arena (a grow-down pool).
    std::vector<std::int32_t> v2p(request_pages);
    std::iota(v2p.begin(), v2p.end(), arena_pages - request_pages);
    write_rows(arena.region(), v2p);
    expect(count_bad_rows(arena.region(), v2p, layers) == 0, "markers written through the page table");

    // Offload (device -> host); the source stays owned until the copy's event is synchronized.
    std::vector<std::int32_t> host_ids(request_pages);
    std::iota(host_ids.begin(), host_ids.end(), 4);
    auto written = backend.make_event();
    backend.copy_pages_async(arena.region(), v2p, host.region(), host_ids, page_bytes, transfer);
    written.ref().record(transfer);
    written.ref().synchronize();  // the write ack
    backend.fill_pages_async(arena.region(), v2p, page_bytes, std::byte{0}, compute);  // drop the device copy
    compute.ref().synchronize();
    expect(count_bad_rows(arena.region(), v2p, 1) == request_pages * page_tokens, "device rows dropped after the write ack");

    // Load back layer by layer into fresh pages; compute waits on each layer's event only.
    std::vector<std::int32_t> loaded(request_pages);
    std::iota(loaded.begin(), loaded.end(), 30);
    std::vector<unikv::HostBackend::Event> layer_done;
    for (std::size_t l = 0; l < layers; ++l) {
        layer_done.push_back(backend.make_event());
        backend.copy_page_slices_async(host.region(), host_ids, arena.region(), loaded, page_bytes,
                                       {.offset = l * row_bytes, .bytes = row_bytes, .stride = entry_bytes,
                                        .count = page_tokens},
                                       transfer);
        layer_done.back().ref().record(transfer);
    }
    v2p = loaded;
    // "Attention" reads layer l as soon as layer l has landed, while later layers may still be loading:
    // each read waits on its own layer's event (a stream dependency; the host never blocks here).
    auto layer_reads = backend.allocate_device(request_pages * page_bytes);
    std::vector<std::int32_t> read_slots(request_pages);
    std::iota(read_slots.begin(), read_slots.end(), 0);
    for (std::size_t l = 0; l < layers; ++l) {
        compute.ref().wait(layer_done[l]);
        backend.copy_page_slices_async(arena.region(), loaded, layer_reads.region(), read_slots, page_bytes,
                                       {.offset = l * row_bytes, .bytes = row_bytes, .stride = entry_bytes,
                                        .count = page_tokens},
                                       compute);
    }

    // Compact: move the loaded pages to the low end, ordered after the load by the waits above.
    std::vector<std::int32_t> packed(request_pages);
    std::iota(packed.begin(), packed.end(), 1);  // page 0 is the sink
    backend.copy_pages_async(arena.region(), loaded, arena.region(), packed, page_bytes, compute);
    v2p = packed;
    compute.ref().synchronize();
    expect(count_bad_rows(layer_reads.region(), read_slots, layers) == 0, "every layer read saw its loaded rows");
    expect(count_bad_rows(arena.region(), v2p, layers) == 0, "rows intact after per-layer load-back and compaction");

    const auto c = backend.counters();
    std::printf("bytes moved %llu, copies %llu, stream waits %llu, host synchronizations %llu\n",
                static_cast<unsigned long long>(c.bytes_copied), static_cast<unsigned long long>(c.copies_queued),
                static_cast<unsigned long long>(c.stream_waits),
                static_cast<unsigned long long>(c.host_synchronizations));
    return 0;
}
