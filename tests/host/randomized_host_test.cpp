// Randomized host-pool operations (alloc batches, frees, held leases, asynchronous copies released to their
// events, compactions) against a simple model: which logical pages are live and which marker version each
// holds. After every step `verify()` is empty, the sizes match the model and every settled page reads back its
// markers through a lease; an alloc succeeds exactly when the model says it fits (packed, for the envelope) and
// fails as `leased` only while a lease is held. Length and seed: UNIKV_HOST_FUZZ_OPS (default 5000 per pool),
// UNIKV_HOST_FUZZ_SEED.

#include <cstring>
#include <random>
#include <vector>

#include <unikv/host/page_envelope_host.hpp>
#include <unikv/host/separate_host_pools.hpp>

#include "fuzz_env.hpp"
#include "host_support.hpp"

using namespace host_test;

namespace {

template <class P, class L>
struct Case {
    using layout = L;
    using pool = typename P::template impl<HostBackend, L>;
    static constexpr bool envelope = !std::is_same_v<P, SeparateHostPools>;
};

template <class C>
struct Driver {
    using L = typename C::layout;
    static constexpr ComponentMask comps = layout_components_v<L>;

    HostBackend backend{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream = backend.make_stream();
    HostBackend::Stream transfer = backend.make_stream();
    ArenaSpec spec = spec_for<L>();
    // A state per page: the same page count for every pool.
    typename C::pool pool{backend, spec, {.total_bytes = 6000, .tokens_per_state = page_size}, stream};
    HostBackend::DeviceBuffer device = backend.allocate_device(64 * 256);
    std::mt19937_64 rng;

    struct Page {
        HostPage id;
        std::uint32_t version = 0;
        bool pending = false;  // an unrun copy writes it; frees and checks wait for the transfer stream
    };
    per_component<std::vector<Page>> live{};
    HostLease<HostBackend> held;           // a lease kept across steps (compaction must be refused meanwhile)
    std::vector<HostBackend::Event> events;
    std::size_t device_cursor = 0;  // bytes of `device` staged by unrun copies

    explicit Driver(std::uint64_t seed) : rng(seed) {}

    std::int32_t pick(std::int32_t n) { return static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(n)); }

    // The model's verdict on a batch: whether it fits the host memory once packed.
    [[nodiscard]] bool fits_packed(const per_component<std::int32_t>& need) const {
        const auto after = [&](Component c) { return static_cast<std::int32_t>(live[c].size()) + need[c]; };
        if constexpr (!C::envelope) {
            for (Component c : all_components) {
                if (after(c) > pool.capacity(c)) return false;
            }
            return true;
        } else {
            const std::size_t a = pool.arena_bytes();
            std::size_t top_start = a;  // FULL packs down from the end of the arena onto whole-page boundaries
            const std::size_t f = spec[Component::full].page_bytes;
            if (after(Component::full) > 0) {
                if (static_cast<std::size_t>(after(Component::full)) > a / f) return false;
                top_start = (a / f - static_cast<std::size_t>(after(Component::full))) * f;
            }
            for (Component c : {Component::swa, Component::mamba}) {
                if (comps.has(c) && static_cast<std::size_t>(after(c)) * spec[c].page_bytes > top_start) return false;
            }
            return true;
        }
    }

    void write_versions(Component c, std::span<const Page> pages) {
        HostLease<HostBackend> lease = pool.lease();
        for (const Page& p : pages) write_host(lease, spec, c, std::span(&p.id, 1), p.version);
    }

    void alloc_batch() {
        per_component<std::int32_t> need{};
        per_component<std::vector<HostPage>> out{};
        std::vector<HostRequest> batch;
        for (Component c : all_components) {
            if (!comps.has(c) || pick(3) == 0) continue;
            need[c] = pick(5);
            out[c].resize(static_cast<std::size_t>(need[c]));
        }
        for (Component c : all_components) {
            if (!out[c].empty()) batch.push_back({.component = c, .out = out[c]});
        }
        const bool fits = fits_packed(need);
        const HostAllocResult r = pool.alloc(batch);
        if (!r) {
            CHECK(r.missing.count > 0);
            if (r.shortfall == HostShortfall::leased) {
                CHECK(fits);
                CHECK(held.holding());
            } else {
                CHECK_FALSE(fits);
            }
            for (Component c : all_components) {
                for (HostPage h : out[c]) CHECK_FALSE(h.is_valid());
            }
            return;
        }
        CHECK(fits);
        for (Component c : all_components) {
            std::vector<Page> fresh;
            for (HostPage h : out[c]) fresh.push_back({.id = h, .version = static_cast<std::uint32_t>(pick(16))});
            write_versions(c, fresh);
            live[c].insert(live[c].end(), fresh.begin(), fresh.end());
        }
    }

    void free_some() {
        for (Component c : all_components) {
            std::vector<HostPage> gone;
            std::vector<Page> kept;
            for (const Page& p : live[c]) {
                if (!p.pending && pick(3) == 0) gone.push_back(p.id); else kept.push_back(p);
            }
            pool.free(c, gone);
            live[c] = std::move(kept);
        }
    }

    // Rewrites up to three live pages of one component with a new version through an unrun device-to-host
    // copy that holds a lease until its event.
    void queue_rewrite() {
        const Component c = all_components[static_cast<std::size_t>(pick(3))];
        if (live[c].empty()) return;
        const std::size_t pb = spec[c].page_bytes;
        const std::size_t entry = spec[c].entry_bytes;
        HostLease<HostBackend> lease = pool.lease();
        std::vector<std::int32_t> src;
        std::vector<std::int32_t> dst;
        for (int k = 0; k < 3; ++k) {
            Page& p = live[c][static_cast<std::size_t>(pick(static_cast<std::int32_t>(live[c].size())))];
            if (p.pending) continue;
            if (device_cursor + pb > device.size()) break;
            p.pending = true;
            p.version = (p.version + 1) & 0xFu;
            const auto page = static_cast<std::int32_t>((device_cursor + pb - 1) / pb);  // the next whole page
            device_cursor = static_cast<std::size_t>(page + 1) * pb;
            for (std::int32_t r = 0; r < rows_of(spec, c); ++r) {
                const std::uint32_t v = marker(c, p.id.value(), r, p.version);
                std::byte* row = device.data() + static_cast<std::size_t>(page) * pb + static_cast<std::size_t>(r) * entry;
                test_rows::fill_row(row, entry, v);
            }
            std::int32_t phys = -1;
            lease.physical(c, std::span(&p.id, 1), std::span(&phys, 1));
            src.push_back(page);
            dst.push_back(phys);
        }
        if (src.empty()) return;
        backend.copy_pages_async(device.region(), src, lease.region(c), dst, pb, transfer);
        events.push_back(backend.make_event());
        events.back().ref().record(transfer);
        std::move(lease).release_after(events.back());
    }

    void run_transfers() {
        backend.run_all();
        events.clear();
        device_cursor = 0;
        for (Component c : all_components) {
            for (Page& p : live[c]) p.pending = false;
        }
    }

    void check() {
        const std::vector<std::string> problems = pool.verify();
        REQUIRE_MESSAGE(problems.empty(), broken(pool));
        HostLease<HostBackend> lease = pool.lease();
        for (Component c : all_components) {
            REQUIRE(pool.used(c) == static_cast<std::int32_t>(live[c].size()));
            for (const Page& p : live[c]) {
                if (!p.pending) REQUIRE(host_holds(lease, spec, c, std::span(&p.id, 1), p.version));
            }
        }
    }

    void step() {
        switch (pick(10)) {
            case 0: case 1: case 2: alloc_batch(); break;
            case 3: case 4: free_some(); break;
            case 5: queue_rewrite(); break;
            case 6: run_transfers(); break;
            case 7:
                if (held.holding()) held = HostLease<HostBackend>{}; else held = pool.lease();
                break;
            case 8:
                if constexpr (C::envelope) {
                    const bool was_held = held.holding();
                    CHECK(pool.compact() != was_held);
                    if (!was_held) CHECK(pool.holes(Component::full) + pool.holes(comps.has(Component::swa) ? Component::swa : Component::mamba) == 0);
                }
                break;
            default: queue_rewrite(); alloc_batch(); break;  // an alloc that may compact under unrun copies
        }
        check();
    }
};

}  // namespace

TEST_CASE_TEMPLATE("randomized host-pool operations keep every live page's bytes and match the model", C,
                   Case<PageEnvelopeHost<>, SwaFullLayout>, Case<PageEnvelopeHost<>, MambaFullLayout>,
                   Case<PageEnvelopeHost<>, FullLayout>, Case<SeparateHostPools, TriPoolLayout>) {
    const std::uint64_t ops = unikv::test::env_or("UNIKV_HOST_FUZZ_OPS", 5000);
    const std::uint64_t seed = unikv::test::env_or("UNIKV_HOST_FUZZ_SEED", 1);
    Driver<C> d(seed);
    for (std::uint64_t i = 0; i < ops; ++i) d.step();
    d.held = HostLease<HostBackend>{};
    d.run_transfers();
    d.check();
}
