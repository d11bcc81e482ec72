#pragma once
// One cache round trip written once for any backend: run on the manual HostBackend in tests/hicache (so its
// logic executes in every CI run) and on CudaBackend in tests/cuda (arena on the device, pinned host pools).
// Over SWA+FULL with two layers per row: a request's rows are written through translation, inserted, evicted
// under write-back (the D2H drained before the rows go), matched as a host hit, loaded back layer by layer
// (`wait_layer` on a compute stream) and read back through translation; then a decode request on that prefix
// is retracted into the host pools and restored into fresh rows. Every check compares whole page images: each
// layer of each row holds its own word, so a row or a layer slice that lands in the wrong place reads wrong.
//
// `Device` is the backend adapter: `backend_type`, a `backend` member, and
// * `write(stream, device_bytes, host_bytes)`: copies host bytes to arena memory behind the stream's queued
//   work and returns once they landed;
// * `read(stream, device_bytes, host_out)`: copies arena memory to the host behind the stream's queued work
//   and returns once it is there;
// * `progress()`: lets queued copies advance (one operation on the manual backend; nothing on a GPU).

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include <unikv/cache.hpp>
#include <unikv/pools/layouts.hpp>
#include <unikv/transfer/retraction.hpp>

namespace round_trip {

using namespace unikv;

inline constexpr std::int32_t page_size = 4;
inline constexpr std::int32_t window = 2 * page_size;
inline constexpr std::int32_t layers = 2;

/// The word every 4-byte word of layer `layer` of the `c` row holding `token` at position `pos` holds.
constexpr std::uint32_t layer_word(Component c, TokenId token, std::int32_t pos, std::int32_t layer) {
    return (static_cast<std::uint32_t>(c) + 1) << 29 ^ static_cast<std::uint32_t>(token) * 2654435761u ^
           static_cast<std::uint32_t>(pos) * 40503u ^ static_cast<std::uint32_t>(layer) * 0x01000193u;
}

/// The cache over SWA+FULL on `Device`'s backend, host pools `H` (write-back: `HostConfig`'s default).
template <class Device, class H>
struct Policies : DefaultCachePolicies {
    using layout = SwaFullLayout;
    using backend = typename Device::backend_type;
    using host_pools = H;
};

template <class Device, class H>
class Scenario {
public:
    using B = typename Device::backend_type;
    using Cache = unikv::Cache<Policies<Device, H>>;

    explicit Scenario(Device& device)
        : dev_(device),
          cache_(device.backend, {.arena = arena(), .host = host()}, stream_.ref()) {}

    void run() {
        const std::vector<TokenId> prefix = tokens(100, 3 * page_size);
        prefill_and_write_back(prefix);
        load_back(prefix);
        retract_and_restore(prefix);
        CHECK(cache_.verify().empty());
    }

private:
    static ArenaConfig arena() {
        const AttentionShape shape{.layers = layers, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2};
        return ArenaConfig{.model = {.full = shape, .swa = shape, .swa_window_tokens = window},
                           .page_sizes = {.full = {page_size}, .swa = {page_size}},
                           .arena_bytes = 64 * 256};  // 64 envelopes: 4 rows of two 32-byte layers
    }
    static HostConfig host() {
        HostConfig c;
        c.pages[Component::full] = 16;
        c.pages[Component::swa] = 16;
        return c;
    }
    static std::vector<TokenId> tokens(TokenId first, std::int32_t n) {
        std::vector<TokenId> out;
        for (std::int32_t i = 0; i < n; ++i) out.push_back(first + i);
        return out;
    }

    // ---- page images -----------------------------------------------------------------------------------
    // The bytes of the `c` page holding `seq[first, first + page_size)` at positions from `first`.
    std::vector<std::byte> image(Component c, const std::vector<TokenId>& seq, std::int32_t first) const {
        const SubPoolSpec& spec = cache_.allocator().spec()[c];
        std::vector<std::byte> out(spec.page_bytes);
        for (std::int32_t r = 0; r < page_size; ++r) {
            const std::int32_t pos = first + r;
            for (std::int32_t l = 0; l < layers; ++l) {
                const EnvelopeSlice s = spec.layer_slice(l);
                const std::uint32_t w = layer_word(c, seq[static_cast<std::size_t>(pos)], pos, l);
                std::byte* at = out.data() + s.offset + static_cast<std::size_t>(r) * s.stride;
                for (std::size_t b = 0; b < s.bytes; b += 4) std::memcpy(at + b, &w, 4);
            }
        }
        return out;
    }
    // The arena bytes of `c`'s rows of FULL page `v`, through translation.
    std::byte* device_page(Component c, VirtualPage v) const {
        PhysicalPage p;
        if (c == Component::full) cache_.allocator().translate_full(std::span(&v, 1), std::span(&p, 1));
        else cache_.allocator().translate_swa(std::span(&v, 1), std::span(&p, 1));
        REQUIRE(p.value() > 0);  // mapped, not the sink
        return cache_.allocator().region().data + static_cast<std::size_t>(p.value()) * page_bytes(c);
    }
    std::size_t page_bytes(Component c) const { return cache_.allocator().spec()[c].page_bytes; }
    // Writes the FULL and SWA rows of `pages[k]` (positions from `first + k * page_size`).
    void write(std::span<const VirtualPage> pages, const std::vector<TokenId>& seq, std::int32_t first) {
        for (std::size_t k = 0; k < pages.size(); ++k) {
            for (Component c : {Component::full, Component::swa}) {
                dev_.write(stream_.ref(), device_page(c, pages[k]),
                           image(c, seq, first + static_cast<std::int32_t>(k) * page_size));
            }
        }
    }
    // True when `c`'s rows of `pages[k]` hold `seq` at positions from `first + k * page_size`, read on `s`.
    bool device_holds(typename B::stream_ref s, Component c, std::span<const VirtualPage> pages,
                      const std::vector<TokenId>& seq, std::int32_t first) const {
        bool ok = true;
        std::vector<std::byte> got(page_bytes(c));
        for (std::size_t k = 0; k < pages.size(); ++k) {
            dev_.read(s, device_page(c, pages[k]), got);
            ok = ok && got == image(c, seq, first + static_cast<std::int32_t>(k) * page_size);
        }
        return ok;
    }
    // True when host pages `hp` of `c` hold `seq` at positions from `first`, page by page (read through a lease:
    // pinned host memory on both backends).
    bool host_holds(Component c, std::span<const HostPage> hp, const std::vector<TokenId>& seq, std::int32_t first) {
        auto lease = cache_.host_pools().lease();
        bool ok = !hp.empty();
        for (std::size_t k = 0; k < hp.size(); ++k) {
            std::int32_t physical = -1;
            lease.physical(c, hp.subspan(k, 1), std::span(&physical, 1));
            const std::byte* at = lease.region(c).data + static_cast<std::size_t>(physical) * lease.page_bytes(c);
            const std::vector<std::byte> want = image(c, seq, first + static_cast<std::int32_t>(k) * page_size);
            ok = ok && std::memcmp(at, want.data(), want.size()) == 0;
        }
        return ok;
    }
    // The nodes from the root's child down to `node`.
    std::vector<NodeInfo> path(NodeRef node) const {
        std::vector<NodeInfo> out;
        for (NodeInfo info = cache_.tree().node_info(node); info.length > 0;) {
            const NodeRef parent = info.parent;
            out.insert(out.begin(), std::move(info));
            info = cache_.tree().node_info(parent);
        }
        return out;
    }
    // Takes every free page, overwrites its FULL and SWA rows with other tokens' words and frees it again, as
    // other requests would: a copy that did not happen cannot hide behind rows left over in freed memory.
    void scribble_free_rows() {
        const std::vector<TokenId> other = tokens(900, page_size);
        std::vector<VirtualPage> taken;
        for (VirtualPage v; cache_.allocator().alloc(std::span(&v, 1));) {
            write(std::span(&v, 1), other, 0);
            taken.push_back(v);
        }
        CHECK(taken.size() >= 8);
        cache_.allocator().free(taken);
    }
    std::int32_t host_used() {
        return cache_.host_pools().used(Component::full) + cache_.host_pools().used(Component::swa);
    }

    // ---- the steps -------------------------------------------------------------------------------------
    // Prefill of `seq`: rows written, inserted, then evicted under write-back. Until the drain the rows stay
    // owned and intact; after it the host copies hold them and the device rows are free.
    void prefill_and_write_back(const std::vector<TokenId>& seq) {
        std::vector<VirtualPage> pages(seq.size() / page_size);
        REQUIRE(cache_.allocator().alloc(pages));
        write(pages, seq, 0);
        const NodeRef node = cache_.insert(TokenKey{seq}, {.pages = pages}).node;

        auto run = cache_.start_evict({Component::full, static_cast<std::int64_t>(seq.size()) / page_size});
        CHECK(run.copies() >= 2);  // FULL (per node) and the SWA window
        CHECK(cache_.allocator().live_pages(Component::full) == static_cast<std::int32_t>(pages.size()));
        CHECK(device_holds(stream_.ref(), Component::full, pages, seq, 0));
        CHECK(device_holds(stream_.ref(), Component::swa, std::span(pages).last(window / page_size), seq,
                           static_cast<std::int32_t>(seq.size()) - window));
        const auto copies = static_cast<std::int32_t>(run.copies());
        const Eviction ev = cache_.finish_evict(std::move(run));
        CHECK(ev.backed_up == copies);
        CHECK(ev.dropped == 0);
        CHECK(ev.pages_freed[Component::full] == static_cast<std::int64_t>(seq.size()) / page_size);
        CHECK(cache_.allocator().live_pages(Component::full) == 0);
        scribble_free_rows();
        // Host copies: FULL for every page, SWA for the last window.
        std::int32_t swa_hosted = 0;
        for (const NodeInfo& info : path(node)) {
            CHECK_FALSE(info.device[Component::full]);
            CHECK(host_holds(Component::full, info.host[Component::full], seq, info.start));
            if (!info.host[Component::swa].empty()) {
                CHECK(host_holds(Component::swa, info.host[Component::swa], seq, info.start));
                swa_hosted += static_cast<std::int32_t>(info.host[Component::swa].size()) * page_size;
            }
        }
        CHECK(swa_hosted >= window);
        CHECK(cache_.verify().empty());
    }

    // Loads `seq` back from its host hit: one load, submitted layer by layer; a compute stream waits on each
    // layer (stream waits, no host block), the ack is polled, and the rows read back on the compute stream.
    void load_back(const std::vector<TokenId>& seq) {
        const auto n = static_cast<std::int32_t>(seq.size());
        const MatchResult m = cache_.match(TokenKey{seq});
        CHECK(m.device_length == 0);
        REQUIRE(m.best_length == n);
        const LoadBackStart start = cache_.load_back(m.best_node);
        REQUIRE(start);
        const BackendCounters before = dev_.backend.counters();
        CHECK(cache_.start_loading() == 1);
        CHECK(cache_.controller().layers() == layers);
        const BackendCounters submitted = dev_.backend.counters();
        for (std::int32_t l = 0; l < layers; ++l) cache_.wait_layer(compute_.ref(), l);
        const BackendCounters waited = dev_.backend.counters();
        CHECK(waited.stream_waits - submitted.stream_waits == layers);  // one per layer
        CHECK(waited.host_synchronizations == before.host_synchronizations);

        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        std::span<const LoadDone> done = cache_.loading_check();
        while (done.empty() && std::chrono::steady_clock::now() < deadline) {
            dev_.progress();
            done = cache_.loading_check();
        }
        REQUIRE(done.size() == 1);
        CHECK(done[0].id == start.id);
        CHECK(done[0].committed);
        CHECK(cache_.loads_in_flight() == 0);

        const MatchResult again = cache_.match(TokenKey{seq});
        CHECK(again.device_length == n);
        const std::vector<VirtualPage> pages(again.device_pages.begin(), again.device_pages.end());
        REQUIRE(pages.size() == seq.size() / page_size);
        CHECK(device_holds(compute_.ref(), Component::full, pages, seq, 0));
        const std::size_t in_window = window / page_size;  // the last window's SWA rows came back
        CHECK(device_holds(compute_.ref(), Component::swa, std::span(pages).last(in_window), seq,
                           n - static_cast<std::int32_t>(in_window) * page_size));
        CHECK(cache_.verify().empty());
    }

    // A decode request on `prefix_seq` (device-resident) with 14 own tokens: its own FULL rows and SWA window
    // go to host, its rows are freed and reused, and a restore into fresh rows brings them back byte-exact; the
    // prefix never moves; locks, protected sizes and host usage return to their start.
    void retract_and_restore(const std::vector<TokenId>& prefix_seq) {
        const auto prefix_tokens = static_cast<std::int32_t>(prefix_seq.size());
        const std::int32_t seq_len = prefix_tokens + 14;  // own pages cover [12, 28); the window [18, 26)
        std::vector<TokenId> seq = prefix_seq;
        for (TokenId t : tokens(500, 4 * page_size)) seq.push_back(t);
        const MatchResult m = cache_.match(TokenKey{prefix_seq});
        REQUIRE(m.device_length == prefix_tokens);
        const NodeRef prefix = m.device_node;
        const std::vector<VirtualPage> prefix_pages(m.device_pages.begin(), m.device_pages.end());
        const auto prefix_rows = [&] {
            std::vector<PhysicalPage> out(prefix_pages.size());
            cache_.allocator().translate_full(std::span<const VirtualPage>(prefix_pages), std::span(out));
            return out;
        };
        const std::vector<PhysicalPage> prefix_before = prefix_rows();

        LockReceipt lock = cache_.lock(prefix);
        std::vector<VirtualPage> own(4);
        REQUIRE(cache_.allocator().alloc(own));
        write(own, seq, prefix_tokens);
        cache_.allocator().free_swa(std::span(own).first(1));  // slid out of the window
        const NodeInfo locked = cache_.tree().node_info(prefix);
        const std::int64_t protected_full = cache_.tree().protected_size(Component::full);
        const std::int64_t protected_swa = cache_.tree().protected_size(Component::swa);
        const std::int32_t host_start = host_used();

        TransferController<B, typename Cache::host_pools_type, std::uint64_t> lane(dev_.backend);
        int host_evictions = 0;
        const auto evict_host = [&](const HostAllocResult& r) {
            ++host_evictions;
            return cache_.relieve_host(r);
        };
        const RetractionRequest request{
            .own = own, .prefix_tokens = prefix_tokens, .seq_len = seq_len, .window_tokens = window};
        RetractionBackup backup = retract(cache_.allocator(), cache_.host_pools(), lane, request, evict_host);
        REQUIRE(backup);
        CHECK(host_evictions == 0);
        CHECK(backup.full_pages() == 4);
        CHECK(backup.window_first() == 1);
        CHECK(backup.window_pages() == 3);
        CHECK(host_used() == host_start + 7);
        CHECK(host_holds(Component::full, backup.host(Component::full), seq, prefix_tokens));
        CHECK(host_holds(Component::swa, backup.host(Component::swa), seq, prefix_tokens + page_size));

        // Preempted: its rows go, other requests take and overwrite them.
        cache_.allocator().free(own);
        cache_.unlock(std::move(lock));
        scribble_free_rows();

        // Re-admitted: the prefix locked again, fresh rows (stale words in them), the window restored.
        lock = cache_.lock(prefix);
        std::vector<VirtualPage> fresh(4);
        REQUIRE(cache_.allocator().alloc(fresh));
        write(fresh, tokens(900, 4 * page_size), 0);
        cache_.allocator().free_swa(std::span(fresh).first(1));
        const RetractionRequest again{
            .own = fresh, .prefix_tokens = prefix_tokens, .seq_len = seq_len, .window_tokens = window};
        REQUIRE(restore(cache_.allocator(), cache_.host_pools(), lane, backup, again));
        CHECK_FALSE(backup);
        CHECK(device_holds(stream_.ref(), Component::full, fresh, seq, prefix_tokens));
        CHECK(device_holds(stream_.ref(), Component::swa, std::span(fresh).subspan(1), seq,
                           prefix_tokens + page_size));
        CHECK(host_used() == host_start);
        CHECK(prefix_rows() == prefix_before);
        CHECK(device_holds(stream_.ref(), Component::full, prefix_pages, prefix_seq, 0));
        CHECK(device_holds(stream_.ref(), Component::swa, std::span(prefix_pages).last(window / page_size), prefix_seq,
                           prefix_tokens - window));
        const NodeInfo relocked = cache_.tree().node_info(prefix);
        CHECK(relocked.device_locks[Component::full] == locked.device_locks[Component::full]);
        CHECK(relocked.device_locks[Component::swa] == locked.device_locks[Component::swa]);
        CHECK(cache_.tree().protected_size(Component::full) == protected_full);
        CHECK(cache_.tree().protected_size(Component::swa) == protected_swa);

        cache_.allocator().free(fresh);
        cache_.unlock(std::move(lock));
    }

    Device& dev_;
    typename B::Stream stream_ = dev_.backend.make_stream();   // the allocator's
    typename B::Stream compute_ = dev_.backend.make_stream();  // the forward's
    Cache cache_;
};

/// Runs the round trip on `device` with host pools `H`.
template <class H, class Device>
void run(Device& device) {
    Scenario<Device, H>(device).run();
}

}  // namespace round_trip
