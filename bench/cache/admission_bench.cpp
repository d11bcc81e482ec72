// One admission of a request whose prompt prefix is cached (`Cache::try_admit`), on a host hit and on a device
// hit, beside the bare parts it is built from. GPT-OSS-20B's layout (`SwaFullLayout`, window 128) under
// `SharedSWABudget`, with a host tier (`SeparateHostPools`, write-back) and the CPU backend in manual mode, so
// nothing runs behind the measured calls. A prompt is a cached prefix of `prompt` tokens (1024 or 8192, pages
// of `page` = 16 or 64 tokens) and 16 new tokens; it may decode 64.
//
// Setup: `batch` (8) different prefixes are computed and finished into the tree (their SWA rows before the last
// window dropped, as an engine drops them), then, for the host rows, evicted to host (write-back: the FULL
// rows and the SWA window are backed up). Each iteration is one admission: `begin_step` and `try_admit` of the
// next prefix's prompt. On a host hit that is the match, the budget's selection, the pins, the load-back plan,
// the budget's `prepare_load_back`, the load-back's destinations (FULL pages, the SWA window's reservation
// bound under them) and its queued load, the budget's charge and the request's lock. After `batch` admissions
// the timer is paused and the cache is put back as it was: the loads are submitted and run (the manual
// backend's queued copies), acknowledged (`loading_check`), the locks dropped, and the loaded prefixes evicted
// again (their host copies stay, so nothing is copied). The copies and the eviction are not measured: the
// model is cut to 2 layers of one 8-wide KV head per pool (64 bytes a token) only to keep that restore short.
// No admission call depends on the row bytes.
//
// Rows, all with the same `batch` and the same pause every `batch` iterations:
//   BM_admit<HostHit>    the admission of a host hit (it queues a load-back);
//   BM_admit<DeviceHit>  the admission of the same prefix cached on device (match, budget, lock);
//   BM_match<HostHit>    floor: the bare `match` of the same prompt on the same tree (the tree's `match_prefix`
//                        with host hits), nothing else;
//   BM_match<DeviceHit>  floor: the same on the device-cached tree;
//   BM_load_alloc        floor: the allocator calls a load-back makes, on the same cache's allocator in the
//                        same state: `alloc_full` of the prefix's FULL pages, `alloc_physical` of the window's
//                        SWA pages and `bind_swa` under the last of them (rolled back in the pause).
// How to read: each row's time is per admission (or per floor call); `items_per_second` counts them. The
// composition's cost on a host hit is BM_admit<HostHit> over BM_match<HostHit> + BM_load_alloc of the same
// shape; on a device hit, BM_admit<DeviceHit> over BM_match<DeviceHit>. Repeat on a shared machine
// (`--benchmark_repetitions=5`) and compare medians; the CPU time is the thread's own.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>
#include <unikv/presets.hpp>

namespace {

using namespace unikv;

using Model = presets::GptOss20B;
constexpr std::int32_t batch = 8;       // prefixes, admitted one after another between two restores
constexpr std::int32_t new_tokens = 16;  // the prompt's own tokens after the cached prefix
constexpr std::int32_t max_new = 64;

struct Policies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = Model::layout;
    using budget = SharedSWABudget;
    using host_pools = SeparateHostPools;  // with `WritePolicy::back`
};
using BenchCache = Cache<Policies>;

// Where the cached prefixes live when they are admitted.
struct HostHit {
    static constexpr bool on_host = true;
};
struct DeviceHit {
    static constexpr bool on_host = false;
};

// Room for every prefix on device at once (twice over) and on host.
CacheConfig config(std::int32_t prompt, std::int32_t page) {
    ArenaConfig arena = arena_config<Model>({.page_size = {page}});
    for (AttentionShape* shape : {&arena.model.full, &arena.model.swa}) {
        shape->layers = 2;
        shape->kv_heads = 1;
        shape->head_dim = 8;
    }
    const std::int32_t prefix_pages = (prompt + new_tokens + max_new) / page + 2;
    const std::int64_t pages = 2 * batch * (prefix_pages + Model::model.swa_window_tokens / page + 2);
    const std::size_t page_bytes = static_cast<std::size_t>(page) * 2 * 2 * 8 * 2;  // layers, K and V, dim, bf16
    arena.arena_bytes = static_cast<std::size_t>(pages) * page_bytes;
    const std::int32_t host_pages = 2 * batch * prefix_pages;
    return {.arena = arena,
            .host = {.pages = {.values = {host_pages, host_pages, 0}}, .write = {.policy = WritePolicy::back}}};
}

// A cache holding `batch` prefixes of `prompt` tokens, on device or evicted to host.
class Prefixes {
public:
    Prefixes(std::int32_t prompt, std::int32_t page, bool on_host)
        : cache_(backend_, config(prompt, page), stream_), prompt_(prompt), page_(page), on_host_(on_host) {
        locks_.resize(batch);
        for (std::int32_t k = 0; k < batch; ++k) {
            std::vector<TokenId>& t = prompts_.emplace_back(static_cast<std::size_t>(prompt + new_tokens));
            std::iota(t.begin(), t.end(), static_cast<TokenId>(k) * (prompt + new_tokens));
        }
    }
    Prefixes(const Prefixes&) = delete;
    Prefixes& operator=(const Prefixes&) = delete;
    ~Prefixes() {
        for (LockReceipt& lock : locks_) {
            if (!lock.empty()) cache_.unlock(std::move(lock));
        }
    }

    // Computes and finishes every prefix (SWA rows before the last window dropped), then evicts them to host
    // when they should live there. False when the cache did not end up so.
    bool seed() {
        std::vector<VirtualToken> rows(static_cast<std::size_t>(prompt_));
        std::vector<VirtualPage> slid;
        const std::int32_t swa_from = prompt_ - Model::model.swa_window_tokens;  // page aligned for 16 and 64
        for (const std::vector<TokenId>& t : prompts_) {
            cache_.begin_step({.decode_tokens = 0});
            if (!cache_.alloc_rows(rows, 0)) return false;
            slid.clear();
            for (std::int32_t pos = 0; pos < swa_from; pos += page_) {
                slid.push_back(page_of(rows[static_cast<std::size_t>(pos)], {page_}));
            }
            cache_.free_swa(slid);
            (void)cache_.finish({t}, rows, LockReceipt{}, {.swa_evicted = swa_from});
        }
        if (on_host_) (void)cache_.evict({Component::full, std::int64_t{1} << 40});
        backend_.run_all();
        return cached();
    }

    // One admission of prompt `k`; false when refused or not the hit it should be.
    bool admit(std::int32_t k) {
        cache_.begin_step({.decode_tokens = 0});
        Admission a = cache_.try_admit({.prompt = key(k), .max_new_tokens = max_new});
        if (!a || a.prefix_length != prompt_ || (a.load_id != 0) != on_host_) return false;
        locks_[static_cast<std::size_t>(k)] = std::move(a.lock);
        return true;
    }
    // Puts the cache back after the admissions of prompts [0, n): loads run and acknowledged, locks dropped,
    // the loaded prefixes evicted again. False when that did not restore it.
    bool restore(std::int32_t n) {
        if (on_host_) {
            (void)cache_.start_loading();
            backend_.run_all();
            if (cache_.loading_check().size() != static_cast<std::size_t>(n)) return false;
        }
        for (std::int32_t k = 0; k < n; ++k) cache_.unlock(std::move(locks_[static_cast<std::size_t>(k)]));
        if (on_host_) (void)cache_.evict({Component::full, std::int64_t{1} << 40});
        backend_.run_all();
        return true;
    }

    // The prompt of request `k` (its match stops one token short, as `try_admit`'s does).
    [[nodiscard]] TokenKey key(std::int32_t k) const { return {std::span(prompts_[static_cast<std::size_t>(k)])}; }
    [[nodiscard]] TokenKey match_key(std::int32_t k) const {
        return {std::span(prompts_[static_cast<std::size_t>(k)]).first(static_cast<std::size_t>(prompt_ + new_tokens - 1))};
    }
    // Every prefix is cached where it should be and the accounting holds.
    [[nodiscard]] bool cached() {
        for (std::int32_t k = 0; k < batch; ++k) {
            const MatchResult m = cache_.match(match_key(k));
            if ((on_host_ ? m.host_hit_length : m.device_length) != prompt_) return false;
        }
        return cache_.verify().empty();
    }
    // FULL and SWA host pages of a host-cached prefix (what its load-back allocates).
    [[nodiscard]] std::pair<std::int32_t, std::int32_t> host_pages() {
        std::size_t full = 0, swa = 0;
        for (NodeRef n = cache_.match(match_key(0)).best_node; !n.is_root();) {
            const NodeInfo info = cache_.tree().node_info(n);
            full += info.host[Component::full].size();
            swa += info.host[Component::swa].size();
            n = info.parent;
        }
        return {static_cast<std::int32_t>(full), static_cast<std::int32_t>(swa)};
    }

    BenchCache& cache() { return cache_; }
    HostBackend& backend() { return backend_; }

private:
    HostBackend backend_{{.mode = ExecutionMode::manual}};
    HostBackend::Stream stream_ = backend_.make_stream();
    BenchCache cache_;
    std::int32_t prompt_;
    std::int32_t page_;
    bool on_host_;
    std::vector<std::vector<TokenId>> prompts_;
    std::vector<LockReceipt> locks_;
};

// Runs `one(k)` for k = 0, 1, ... as the timed iterations, and `restore(n)` with the timer paused after every
// `batch` of them (and after the last, partial one).
template <class One, class Restore>
void batched(benchmark::State& state, One&& one, Restore&& restore) {
    std::int32_t k = 0;
    for (auto _ : state) {
        if (!one(k)) {
            state.SkipWithError("an admission was refused or missed its hit");
            break;
        }
        if (++k == batch) {
            state.PauseTiming();
            const bool ok = restore(k);
            k = 0;
            state.ResumeTiming();
            if (!ok) {
                state.SkipWithError("the cache was not restored");
                break;
            }
        }
    }
    if (!restore(k)) state.SkipWithError("the cache was not restored");
    state.SetItemsProcessed(state.iterations());
}

template <class Hit>
void BM_admit(benchmark::State& state) {
    Prefixes p(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)), Hit::on_host);
    if (!p.seed()) {
        state.SkipWithError("the prefixes were not cached");
        return;
    }
    batched(state, [&](std::int32_t k) { return p.admit(k); }, [&](std::int32_t n) { return p.restore(n); });
    if (!p.cached()) state.SkipWithError("the prefixes did not stay cached");
}

template <class Hit>
void BM_match(benchmark::State& state) {
    Prefixes p(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)), Hit::on_host);
    if (!p.seed()) {
        state.SkipWithError("the prefixes were not cached");
        return;
    }
    batched(
        state,
        [&](std::int32_t k) {
            const MatchResult m = p.cache().match(p.match_key(k));
            benchmark::DoNotOptimize(m.best_length);
            return true;
        },
        [](std::int32_t) { return true; });
}

void BM_load_alloc(benchmark::State& state) {
    Prefixes p(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)), true);
    if (!p.seed()) {
        state.SkipWithError("the prefixes were not cached");
        return;
    }
    const auto [full_pages, swa_pages] = p.host_pages();
    auto& alloc = p.cache().allocator();
    std::vector<std::vector<VirtualPage>> full(batch, std::vector<VirtualPage>(static_cast<std::size_t>(full_pages)));
    std::vector<Reservation> swa;
    swa.reserve(batch);
    batched(
        state,
        [&](std::int32_t k) {
            const std::span<VirtualPage> pages(full[static_cast<std::size_t>(k)]);
            if (!alloc.alloc_full(pages)) return false;
            ReserveResult r = alloc.alloc_physical(Component::swa, swa_pages);
            if (!r) return false;
            alloc.bind_swa(pages.last(static_cast<std::size_t>(swa_pages)), r.reservation);
            swa.push_back(std::move(r.reservation));
            return true;
        },
        [&](std::int32_t n) {
            for (Reservation& r : swa) alloc.cancel(std::move(r));
            swa.clear();
            for (std::int32_t k = 0; k < n; ++k) alloc.free(full[static_cast<std::size_t>(k)]);
            p.backend().run_all();
            return true;
        });
    if (!p.cached()) state.SkipWithError("the allocator's accounting broke");
    state.counters["full_pages"] = full_pages;
    state.counters["swa_pages"] = swa_pages;
}

void shapes(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({{1024, 8192}, {16, 64}})->ArgNames({"prompt", "page"})->MinTime(0.2);
    b->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_admit, HostHit)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_admit, DeviceHit)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_match, HostHit)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_match, DeviceHit)->Apply(shapes);
BENCHMARK(BM_load_alloc)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
