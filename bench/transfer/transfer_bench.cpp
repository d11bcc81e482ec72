// The transfer controller on the CPU backend (asynchronous mode), with floors measured in this binary over the
// same iterations (the house pattern of bench/backend/copy_bench.cpp):
// * backup (D2H) and load-back (H2D, whole envelopes and per layer) throughput per envelope size, against one
//   memcpy of the same total bytes: counters GB/s and x_memcpy (goal >= 0.8 from 16 KiB);
// * the controller's own cost per queued node: the host time of queue + start for N one-page nodes, minus the
//   host time of the bare backend calls that queue the same copies (one copy and one event record per node),
//   against the time of those bare copies themselves: counters ctl_ns_per_node, copy_ns_per_node and
//   x_copy = ctl / copy (goal <= 0.10 at 16 KiB envelopes). In manual mode: no worker copies while either
//   side submits, so the difference is host work only (in asynchronous mode both submissions contend with a
//   running worker for the lock and, on a small loaded machine, for the cores, and the difference drowns).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/host/separate_host_pools.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/pools/unified_allocator.hpp>
#include <unikv/transfer/transfer_controller.hpp>

namespace {

using namespace unikv;
using Alloc = UnifiedAllocator<FullLayout, HostBackend>;
using Host = SeparateHostPools::impl<HostBackend, FullLayout>;
using Controller = TransferController<HostBackend, Host, std::size_t>;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t total_bytes = std::size_t{16} << 20;
constexpr std::int32_t layers = 4;
constexpr std::size_t entry_bytes = layers * 2 * 256;  // 4 layers of K and V rows of 256 bytes (2 heads x 64 bf16)

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

ArenaConfig config_for(std::size_t envelope_bytes) {
    return ArenaConfig{.model = {.full = {.layers = layers, .kv_heads = 2, .head_dim = 64, .dtype_bytes = 2}},
                       .page_sizes = {.full = {static_cast<std::int32_t>(envelope_bytes / entry_bytes)}},
                       .arena_bytes = 2 * total_bytes + 4 * envelope_bytes};
}

// An allocator holding `total_bytes` of FULL pages, host pools with as many pages, and a controller (declared
// last: destroyed first, its stream finishing the copies into the others' memory).
struct Rig {
    HostBackend backend;
    HostBackend::Stream stream = backend.make_stream();
    Alloc alloc;
    Host host;
    Controller ctl;
    std::size_t envelope;
    std::vector<VirtualPage> pages;
    std::vector<HostPage> host_pages;

    Rig(std::size_t envelope_bytes, LoadEvents events, ExecutionMode mode = ExecutionMode::asynchronous)
        : backend({.mode = mode}),
          alloc(backend, config_for(envelope_bytes), stream),
          host(backend, alloc.spec(), host_config(envelope_bytes), stream),
          ctl(backend, {.load_events = events}),
          envelope(envelope_bytes),
          pages(total_bytes / envelope_bytes),
          host_pages(pages.size()) {
        if (!alloc.alloc(pages)) throw std::runtime_error("bench: the arena is too small");
        const HostRequest request{.component = Component::full, .out = host_pages};
        if (!host.alloc(std::span(&request, 1))) throw std::runtime_error("bench: the host pool is too small");
        stream.ref().synchronize();
        std::memset(alloc.region().data, 0x3c, alloc.region().size);
    }
    static HostConfig host_config(std::size_t envelope_bytes) {
        HostConfig c;
        c.pages[Component::full] = static_cast<std::int32_t>(total_bytes / envelope_bytes);
        return c;
    }
    // Nodes of `per_node` pages each, queued in one direction.
    void queue(TransferDirection d, std::size_t per_node) {
        for (std::size_t first = 0; first < pages.size(); first += per_node) {
            const std::size_t n = std::min(per_node, pages.size() - first);
            const TransferRequest r{.full = std::span(pages).subspan(first, n),
                                    .full_host = std::span(host_pages).subspan(first, n)};
            if (d == TransferDirection::write) ctl.queue_write(alloc, r, first); else ctl.queue_load(alloc, r, first);
        }
    }
};

// One memcpy of `total_bytes` between two buffers allocated like the measured ones.
struct MemcpyFloor {
    HostBackend backend;
    HostBackend::DeviceBuffer a = backend.allocate_device(total_bytes);
    HostBackend::PinnedBuffer b = backend.allocate_pinned(total_bytes);
    double seconds() {
        const auto t0 = clock_type::now();
        std::memcpy(b.data(), a.data(), total_bytes);
        benchmark::ClobberMemory();
        return seconds_since(t0);
    }
};

template <class Body>
void against_memcpy(benchmark::State& state, Body body) {
    MemcpyFloor floor;
    double ours = 0, reference = 0;
    for (auto _ : state) {
        const auto t0 = clock_type::now();
        body();
        const double t = seconds_since(t0);
        state.SetIterationTime(t);
        ours += t;
        reference += floor.seconds();
    }
    state.counters["GB/s"] = static_cast<double>(total_bytes) * static_cast<double>(state.iterations()) / ours / 1e9;
    state.counters["x_memcpy"] = reference / ours;
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total_bytes));
}

// A node carries 64 KiB (one page from 64 KiB envelopes up), as a tree node of a few pages would.
std::size_t pages_per_node(std::size_t envelope) { return std::max<std::size_t>(1, (std::size_t{64} << 10) / envelope); }

// Backup: queue every node, submit, drain (the write-back drain blocks until all ran, then acks).
void BM_backup(benchmark::State& state) {
    Rig rig(static_cast<std::size_t>(state.range(0)), LoadEvents::whole);
    against_memcpy(state, [&] {
        rig.queue(TransferDirection::write, pages_per_node(rig.envelope));
        (void)rig.ctl.start_writing(rig.alloc, rig.host);
        benchmark::DoNotOptimize(rig.ctl.drain_writes().size());
    });
}

template <LoadEvents Events>
void BM_load_back(benchmark::State& state) {
    Rig rig(static_cast<std::size_t>(state.range(0)), Events);
    against_memcpy(state, [&] {
        rig.queue(TransferDirection::load, pages_per_node(rig.envelope));
        (void)rig.ctl.start_loading(rig.alloc, rig.host);
        rig.ctl.stream().synchronize();
        benchmark::DoNotOptimize(rig.ctl.loading_check().size());
    });
}

// The controller's own cost per one-page node, against the bare backend calls queueing the same copies.
void BM_controller_cost(benchmark::State& state) {
    Rig rig(static_cast<std::size_t>(state.range(0)), LoadEvents::whole, ExecutionMode::manual);
    auto bare_stream = rig.backend.make_stream();
    std::vector<HostBackend::Event> bare_events;
    std::vector<PhysicalPage> physical(rig.pages.size());
    rig.alloc.translate_full(rig.pages, physical);
    std::vector<std::int32_t> device(physical.size()), host(physical.size());
    {
        auto lease = rig.host.lease();
        lease.physical(Component::full, rig.host_pages, host);
    }
    for (std::size_t i = 0; i < physical.size(); ++i) {
        device[i] = physical[i].value();
        bare_events.push_back(rig.backend.make_event());
    }
    const auto pinned = [&] {
        auto lease = rig.host.lease();
        return lease.region(Component::full);
    }();
    double ctl_submit = 0, bare_submit = 0, bare_total = 0;
    for (auto _ : state) {
        auto t0 = clock_type::now();
        rig.queue(TransferDirection::write, 1);
        (void)rig.ctl.start_writing(rig.alloc, rig.host);
        const double t = seconds_since(t0);
        state.SetIterationTime(t);
        ctl_submit += t;
        benchmark::DoNotOptimize(rig.ctl.drain_writes().size());

        t0 = clock_type::now();
        for (std::size_t i = 0; i < device.size(); ++i) {
            rig.backend.copy_pages_async(rig.alloc.region(), std::span(&device[i], 1), pinned, std::span(&host[i], 1),
                                         rig.envelope, bare_stream.ref());
            bare_events[i].ref().record(bare_stream.ref());
        }
        bare_submit += seconds_since(t0);
        bare_stream.ref().synchronize();
        bare_total += seconds_since(t0);
    }
    const double nodes = static_cast<double>(rig.pages.size()) * static_cast<double>(state.iterations());
    const double own = (ctl_submit - bare_submit) / nodes;
    const double copy = bare_total / nodes;
    state.counters["ctl_ns_per_node"] = own * 1e9;
    state.counters["copy_ns_per_node"] = copy * 1e9;
    state.counters["x_copy"] = own / copy;
}

void envelope_sizes(benchmark::internal::Benchmark* b) {
    b->ArgName("envelope_bytes");
    for (std::int64_t bytes : {4096, 16384, 65536, 262144, 1048576}) b->Arg(bytes);
    b->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseManualTime();
}

}  // namespace

BENCHMARK(BM_backup)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE(BM_load_back, LoadEvents::whole)->Apply(envelope_sizes);
BENCHMARK_TEMPLATE(BM_load_back, LoadEvents::per_layer)->Apply(envelope_sizes);
BENCHMARK(BM_controller_cost)->Arg(16384)->ArgName("envelope_bytes")->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseManualTime();

BENCHMARK_MAIN();
