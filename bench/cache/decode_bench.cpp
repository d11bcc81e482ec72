// Batched decode of N running requests, GPT-OSS-20B's layout (`SwaFullLayout`, window 128, page 16), device
// only, one layer of one KV head per pool (no management call depends on the row bytes):
//   BM_decode<Handles>  `Cache::decode` over the requests' `Sequence` handles: one call for the batch adds a
//                       row to each handle and slides each one's SWA window over its own pages;
//   BM_decode<ByHand>   the same work as an engine does it without handles, the floor: its own arrays of
//                       sequence lengths and last rows, `Cache::alloc_decode`, its own SWA cursor per request and
//                       one `free_swa` of the pages that left the windows.
// How to read: the time is one decode step of the whole batch (`items_per_second`: requests advanced); the
// handle's cost over the floor is the Handles row over the ByHand row of the same batch (measured 1.4-1.5x on
// the 2-core VM: the handle's checks of each request's status, cache, batch and decode limit, a pass more over
// the handles, and a pointer per request). Every `steps` decode steps the requests
// finish and new ones are admitted, outside the timing. Repeat and take the minimum on a shared machine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>
#include <unikv/presets.hpp>

namespace {

using namespace unikv;

using Model = presets::GptOss20B;
constexpr std::int32_t page = 16;
constexpr std::int32_t prompt = 64;
constexpr std::int32_t steps = 256;  // decode steps of a request generation

struct Policies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = Model::layout;
    using budget = SharedSWABudget;
    using host_pools = NoHostTier;
};
using BenchCache = Cache<Policies>;

CacheConfig config(std::int32_t requests) {
    ArenaConfig arena = arena_config<Model>({.page_size = {page}});
    for (AttentionShape* shape : {&arena.model.full, &arena.model.swa}) shape->layers = shape->kv_heads = 1;
    const std::int64_t pages = 2 * requests * ((prompt + steps) / page + 2 + Model::model.swa_window_tokens / page + 2);
    arena.arena_bytes = static_cast<std::size_t>(pages) * page * 2 * Model::model.full.head_dim * 2;
    return {.arena = arena, .host = {.write = {.policy = WritePolicy::none}}};
}

std::vector<TokenId> prompt_of(std::int32_t request, std::int64_t generation) {
    std::vector<TokenId> out;
    for (std::int32_t t = 0; t < prompt; ++t)
        out.push_back(static_cast<TokenId>((generation * 4096 + request) * prompt + t) & 0x3FFFFFFF);
    return out;
}

// The requests as handles.
class Handles {
public:
    Handles(BenchCache& cache, std::int32_t requests) : cache_(cache), seqs_(static_cast<std::size_t>(requests)) {
        for (Sequence& s : seqs_) batch_.push_back(&s);
        next_.resize(seqs_.size());
    }
    bool admit(std::int64_t generation) {
        cache_.begin_step({});
        for (std::size_t i = 0; i < seqs_.size(); ++i) {
            if (!cache_.admit(seqs_[i], {.prompt = {prompt_of(static_cast<std::int32_t>(i), generation)},
                                         .max_new_tokens = steps})) {
                return false;
            }
        }
        return true;
    }
    bool decode(std::int32_t step) {
        for (TokenId& t : next_) t = static_cast<TokenId>(1 << 29) + step;
        return static_cast<bool>(cache_.decode(batch_, next_));
    }
    void finish() {
        for (Sequence& s : seqs_) (void)cache_.finish(s);
    }

private:
    BenchCache& cache_;
    std::vector<Sequence> seqs_;
    std::vector<Sequence*> batch_;
    std::vector<TokenId> next_;
};

// The same requests by hand: what an engine keeps without handles.
class ByHand {
public:
    ByHand(BenchCache& cache, std::int32_t requests) : cache_(cache), reqs_(static_cast<std::size_t>(requests)) {
        lens_.resize(reqs_.size());
        last_.resize(reqs_.size());
        out_.resize(reqs_.size());
    }
    bool admit(std::int64_t generation) {
        cache_.begin_step({});
        for (std::size_t i = 0; i < reqs_.size(); ++i) {
            Request& r = reqs_[i];
            r.tokens = prompt_of(static_cast<std::int32_t>(i), generation);
            r.tokens.reserve(prompt + steps);
            Admission a = cache_.try_admit({.prompt = {r.tokens}, .max_new_tokens = steps});
            if (!a) return false;
            r.rows.reserve(prompt + steps);
            r.rows.resize(static_cast<std::size_t>(a.prefix_length + a.extend_length));
            cache_.prefix_rows(a.node, r.rows);
            if (!cache_.alloc_rows(r.rows, a.prefix_length)) return false;
            r.lock = std::move(a.lock);
            r.swa_from = a.prefix_length;
        }
        return true;
    }
    bool decode(std::int32_t step) {
        for (std::size_t i = 0; i < reqs_.size(); ++i) {
            lens_[i] = static_cast<std::int32_t>(reqs_[i].rows.size()) + 1;
            last_[i] = reqs_[i].rows.back();
        }
        slid_.clear();
        for (Request& r : reqs_) {
            while (r.swa_from + page <= static_cast<std::int32_t>(r.rows.size()) - cache_.window_tokens()) {
                slid_.push_back(page_of(r.rows[static_cast<std::size_t>(r.swa_from)], {page}));
                r.swa_from += page;
            }
        }
        if (!slid_.empty()) cache_.free_swa(slid_);
        if (!cache_.alloc_decode({lens_, last_}, out_)) return false;
        for (std::size_t i = 0; i < reqs_.size(); ++i) {
            reqs_[i].rows.push_back(out_[i]);
            reqs_[i].tokens.push_back(static_cast<TokenId>(1 << 29) + step);
        }
        return true;
    }
    void finish() {
        for (Request& r : reqs_) {
            (void)cache_.finish({r.tokens}, r.rows, std::move(r.lock), {.swa_evicted = r.swa_from});
        }
    }

private:
    struct Request {
        std::vector<TokenId> tokens;
        std::vector<VirtualToken> rows;
        std::int32_t swa_from = 0;
        LockReceipt lock;
    };
    BenchCache& cache_;
    std::vector<Request> reqs_;
    std::vector<std::int32_t> lens_;
    std::vector<VirtualToken> last_, out_;
    std::vector<VirtualPage> slid_;
};

template <class Driver>
void BM_decode(benchmark::State& state) {
    const auto requests = static_cast<std::int32_t>(state.range(0));
    HostBackend backend;
    auto stream = backend.make_stream();
    BenchCache cache(backend, config(requests), stream);
    Driver driver(cache, requests);
    std::int64_t generation = 0;
    std::int32_t step = 0;
    if (!driver.admit(generation)) state.SkipWithError("admission refused");
    for (auto _ : state) {
        if (step == steps) {
            state.PauseTiming();
            driver.finish();
            (void)cache.evict({Component::full, 1 << 30});  // the next generation starts from an empty tree
            step = 0;
            const bool admitted = driver.admit(++generation);
            state.ResumeTiming();
            if (!admitted) {
                state.SkipWithError("admission refused");
                break;
            }
        }
        if (!driver.decode(step++)) {
            state.SkipWithError("a decode fell short");
            break;
        }
    }
    if (!cache.verify().empty()) state.SkipWithError("the accounting broke");
    driver.finish();
    state.SetItemsProcessed(state.iterations() * requests);
}

BENCHMARK_TEMPLATE(BM_decode, Handles)->ArgName("requests")->Arg(64)->Arg(256)->Arg(1024)->MinTime(0.2)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_decode, ByHand)->ArgName("requests")->Arg(64)->Arg(256)->Arg(1024)->MinTime(0.2)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
