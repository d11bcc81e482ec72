// Cache-management time per scheduler step at steady state: GPT-OSS-20B's layout (`SwaFullLayout`, window
// 128, page 16) under `SharedSWABudget`, with 64, 256 or 1024 running requests. Each step
//   1. finishes the requests that have all their rows (whole pages into the tree, the tail page freed, the
//      prefix lock dropped),
//   2. admits as many arrivals (match, budget, lock, the cached prefix's rows, the prompt's own rows),
//   3. allocates one decode row for every other request, drops the SWA pages that slid out of the window,
//   4. translates the step's new rows (FULL and SWA), as the forward's write locations.
// Once warm the arena is full of cached outputs: each step first evicts from the tree up to a watermark of
// free pages (about four steps' allocations; an allocation that falls short runs the allocator's compaction
// ladder before it evicts and retries, which costs more), so every step pays its evictions. Arrivals reuse
// one of 8 cached 1024-token system prompts and generate 64-192 tokens. `mode:0` (decode) arrivals bring 16
// new prompt tokens: the step is the decode batch plus a page of prefill per arrival. `mode:1` (mixed)
// arrivals bring 512: a mixed batch of about N/128 prefills of 512 tokens beside the decodes.
//
// Two rows per shape, the same workload, the same order of calls:
//   BM_step<CacheStep>  the composed `Cache<Policies>`: try_admit, prefix_rows, alloc_rows, alloc_decode,
//                       free_swa, translate_full / translate_swa, finish;
//   BM_step<BareStep>   the parts without the composition: `UnifiedAllocator` + `RadixTree<Full, Swa>` +
//                       `ActionExecutor` + the same budget, called as an engine would by hand (one lock per
//                       admission, the prefix's rows from the admission's own match, eviction on a shortfall).
// How to read: `us/step` is the step's cache-management time (goal: <= 20 at 256 requests), `cpu_us/step` the
// scheduler thread's CPU time in it (on a loaded machine the wall time also counts waits for a core); the
// composition's overhead is the CacheStep row's `us/step` over the BareStep row's of the same shape (goal:
// <= 1.2x). Repeat and take the minimum on a shared machine (`--benchmark_repetitions=5`). The other
// counters describe the workload: finished (= admitted) requests, refused admissions, prefill tokens per step.
//
// The cache is device-only (`NoHostTier`): host copies would time memcpy, not management. Its rows are one
// layer of one KV head of GPT-OSS-20B's shape per pool (256 bytes per token): no management call depends on
// the row bytes (a compaction's copies would, and they run on the stream), and the model's 24 layers of 8
// heads would need 96x the host memory (64 GiB at 1024 mixed requests).
//
// The 8 system prompts are cached (with their SWA rows) before the loop starts. A request whose system
// prompt was not served from the device (its SWA window there was evicted) recomputes it and keeps the SWA
// rows from one window before the prompt's end live until it finishes, so its insert recovers that window
// for the requests after it (`MatchResult::swa_branching_length`).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <ctime>
#include <span>
#include <utility>
#include <vector>

#include <unikv/backend/host_backend.hpp>
#include <unikv/budget/shared_swa_budget.hpp>
#include <unikv/cache.hpp>
#include <unikv/cache/action_executor.hpp>
#include <unikv/presets.hpp>

namespace {

using namespace unikv;

using Model = presets::GptOss20B;
constexpr std::int32_t page = 16;
constexpr std::int32_t system_prompts = 8;
constexpr std::int32_t system_tokens = 1024;
constexpr std::int32_t min_new = 64;
constexpr std::int32_t max_new = 192;
constexpr int warm_steps = 2 * max_new + 128;  // every first-generation request has finished and the arena is full

struct Policies : DefaultCachePolicies {
    using backend = HostBackend;
    using layout = Model::layout;
    using budget = SharedSWABudget;
    using host_pools = NoHostTier;  // with `WritePolicy::none` (`CacheStep`)
};

// Own rows of a request at its peak (its prompt's own tokens and all it generates, FULL; the SWA of its prefill
// chunk), twice over for the cached outputs, plus the system prompts.
ArenaConfig arena(std::int32_t requests, std::int32_t own_prompt) {
    ArenaConfig config = arena_config<Model>({.page_size = {page}});
    for (AttentionShape* shape : {&config.model.full, &config.model.swa}) shape->layers = shape->kv_heads = 1;
    const std::int64_t full_pages = (own_prompt + max_new) / page + 2;
    const std::int64_t swa_pages = std::max(own_prompt, Model::model.swa_window_tokens) / page + 2;
    const std::int64_t pages = 2 * requests * (full_pages + swa_pages) + system_prompts * (system_tokens / page) * 2;
    const std::size_t page_bytes = static_cast<std::size_t>(page) * 2 * Model::model.full.head_dim * 2;
    config.arena_bytes = static_cast<std::size_t>(pages) * page_bytes;
    return config;
}

// A running request as the engine holds it.
struct Request {
    std::vector<TokenId> tokens;     // its prompt, then what it generates (the workload knows it up front)
    std::vector<VirtualToken> rows;  // one per token computed so far
    std::int32_t prompt = 0;
    std::int32_t own_from = 0;  // rows before it are the tree's (its cached prefix)
    std::int32_t swa_from = 0;  // rows before it had their SWA dropped (page aligned, >= own_from)
    std::int32_t swa_keep = 0;  // its SWA rows from here on stay until it finishes (0: none held)
    LockReceipt lock;
    bool running = false;
    bool fresh = false;  // admitted this step: prefills, decodes from the next one

    [[nodiscard]] TokenKey prompt_key() const { return {std::span(tokens).first(static_cast<std::size_t>(prompt))}; }
    [[nodiscard]] TokenKey key() const { return {std::span(tokens).first(rows.size())}; }
    [[nodiscard]] std::int32_t generates() const { return static_cast<std::int32_t>(tokens.size()) - prompt; }
};

// The composed cache.
class CacheStep {
public:
    CacheStep(const ArenaConfig& config)
        : cache_(backend_, {.arena = config, .host = {.write = {.policy = WritePolicy::none}}}, stream_) {}

    void begin_step(std::int32_t decoding) { cache_.begin_step({.decode_tokens = decoding}); }
    bool admit(Request& r) {
        Admission a = cache_.try_admit({.prompt = r.prompt_key(), .max_new_tokens = r.generates()});
        if (!a) return false;
        r.rows.resize(static_cast<std::size_t>(a.prefix_length + a.extend_length));
        cache_.prefix_rows(a.node, r.rows);
        if (!cache_.alloc_rows(r.rows, a.prefix_length)) {
            cache_.unlock(std::move(a.lock));
            return false;
        }
        r.lock = std::move(a.lock);
        r.own_from = r.swa_from = a.prefix_length;
        return true;
    }
    AllocResult decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
        return cache_.alloc_decode(batch, out);
    }
    void free_swa(std::span<const VirtualPage> pages) { cache_.free_swa(pages); }
    void translate(std::span<const VirtualToken> in, std::span<PhysicalToken> full, std::span<PhysicalToken> swa) {
        cache_.translate_full(in, full);
        cache_.translate_swa(in, swa);
    }
    void finish(Request& r) { (void)cache_.finish(r.key(), r.rows, std::move(r.lock), {.swa_evicted = r.swa_from}); }
    void keep_free(std::int64_t pages) {
        if (const std::int64_t free = cache_.allocator().available_size(); free < pages) {
            (void)cache_.evict({Component::full, pages - free});
        }
    }
    void drop(Request& r) { cache_.unlock(std::move(r.lock)); }
    [[nodiscard]] bool healthy() const { return cache_.verify().empty(); }

private:
    HostBackend backend_;
    HostBackend::Stream stream_ = backend_.make_stream();
    Cache<Policies> cache_;
};

// The same calls on the bare parts, as an engine would make them without `Cache`.
class BareStep {
    using Alloc = UnifiedAllocator<Model::layout, HostBackend>;
    using Tree = RadixTree<Full, Swa>;

public:
    BareStep(const ArenaConfig& config)
        : alloc_(backend_, config, stream_),
          tree_(TreeConfig{.page_size = {page}, .swa_window = config.model.swa_window_tokens}) {}

    void begin_step(std::int32_t decoding) { budget_.begin_step({.decode_tokens = decoding}); }
    bool admit(Request& r) {
        const auto input = static_cast<std::size_t>(r.prompt);
        const MatchResult m = tree_.match_prefix({std::span(r.tokens).first(input - 1)});
        r.rows.resize(input);
        VirtualToken* to = r.rows.data();
        for (const std::span<const VirtualPage> run : m.device_pages.runs()) {
            for (const VirtualPage p : run) {
                for (std::int32_t i = 0; i < page; ++i) *to++ = token_of(p, {page}, i);
            }
        }
        LockReceipt lock = tree_.lock(m.device_node);
        const CapacityView view = CapacityView::of(alloc_, tree_);
        const Selection s = budget_.check_prefill(
            view, {.prefix_length = m.device_length,
                   .extend = r.prompt - m.device_length,
                   .max_new = r.generates()});
        if (!s) {
            tree_.unlock(std::move(lock));
            return false;
        }
        budget_.reserve(view, s.ask);
        const std::int32_t prefix_lens[] = {m.device_length};
        const std::int32_t seq_lens[] = {r.prompt};
        const VirtualToken last_locs[] = {m.device_length > 0 ? r.rows[static_cast<std::size_t>(m.device_length) - 1]
                                                              : VirtualToken{}};
        const ExtendBatch batch{.prefix_lens = prefix_lens, .seq_lens = seq_lens, .last_locs = last_locs};
        const auto own = std::span(r.rows).subspan(static_cast<std::size_t>(m.device_length));
        if (!relieved([&] { return alloc_.alloc_extend(batch, own); })) {
            tree_.unlock(std::move(lock));
            return false;
        }
        r.lock = std::move(lock);
        r.own_from = r.swa_from = m.device_length;
        return true;
    }
    AllocResult decode(const DecodeBatch& batch, std::span<VirtualToken> out) {
        return relieved([&] { return alloc_.alloc_decode(batch, out); });
    }
    void free_swa(std::span<const VirtualPage> pages) { alloc_.free_swa(pages); }
    void translate(std::span<const VirtualToken> in, std::span<PhysicalToken> full, std::span<PhysicalToken> swa) {
        alloc_.translate_full(in, full);
        alloc_.translate_swa(in, swa);
    }
    void finish(Request& r) {
        pages_.clear();
        for (std::size_t t = 0; t < r.rows.size(); t += page) pages_.push_back(page_of(r.rows[t], {page}));
        const std::size_t whole = r.rows.size() / page;
        InsertResult ins = tree_.insert(
            {std::span(r.tokens).first(whole * page)},
            {.pages = std::span(pages_).first(whole),
             .swa_evicted = std::min(r.swa_from, static_cast<std::int32_t>(whole * page))});
        execute(ins);
        if (whole < pages_.size()) alloc_.free(std::span(pages_).subspan(whole));
        tree_.unlock(std::move(r.lock));
    }
    void keep_free(std::int64_t pages) {
        if (const std::int64_t free = alloc_.available_size(); free < pages) {
            EvictResult freed = tree_.evict(Component::full, (pages - free) * page);
            execute(freed);
        }
    }
    void drop(Request& r) { tree_.unlock(std::move(r.lock)); }
    [[nodiscard]] bool healthy() const {
        return alloc_.verify().empty() && tree_.verify().empty();
    }

private:
    template <class Result>
    void execute(Result& result) {
        exec_.complete(alloc_, exec_.execute(alloc_, result));
    }
    // `call`, and after each shortfall an eviction of it and a retry, until it fits or nothing was freed.
    template <class Call>
    AllocResult relieved(Call&& call) {
        AllocResult r = call();
        while (!r) {
            EvictResult freed = tree_.evict(r.missing.component, r.missing.count * page);
            const bool any = freed.freed(r.missing.component) > 0;
            execute(freed);
            if (!any) break;
            r = call();
        }
        return r;
    }

    HostBackend backend_;
    HostBackend::Stream stream_ = backend_.make_stream();
    Alloc alloc_;
    Tree tree_;
    ActionExecutor exec_;
    budget_t<SharedSWABudget, Model::layout> budget_{BudgetConfig{}};
    std::vector<VirtualPage> pages_;
};

// The serving loop over a driver: `requests` slots, each running one request at a time.
template <class Driver>
class Loop {
public:
    Loop(std::int32_t requests, std::int32_t own_prompt)
        : driver_(arena(requests, own_prompt)),
          own_prompt_(own_prompt),
          watermark_(4 * (requests / page + (requests / 128 + 1) * (own_prompt / page + 1))),
          slots_(static_cast<std::size_t>(requests)) {
        const auto n = static_cast<std::size_t>(requests);
        decoders_.reserve(n);
        seq_lens_.reserve(n);
        slid_.reserve(n * static_cast<std::size_t>(own_prompt / page + 1));
        last_.reserve(n);
        decoded_.resize(n);
        step_rows_.reserve(n * static_cast<std::size_t>(own_prompt + 1));
        for (Request& r : slots_) {
            r.tokens.reserve(static_cast<std::size_t>(system_tokens + own_prompt + max_new));
            r.rows.reserve(r.tokens.capacity());
        }
    }

    Loop(const Loop&) = delete;
    Loop& operator=(const Loop&) = delete;
    // The running requests' locks go before the tree does.
    ~Loop() {
        for (Request& r : slots_) {
            if (r.running) driver_.drop(r);
        }
    }

    // Caches the system prompts, SWA included: a request of each, prefilled and finished. False when one
    // was not admitted.
    bool seed() {
        Request r;
        for (TokenId k = 0; k < system_prompts; ++k) {
            r.tokens.clear();
            for (TokenId t = 0; t < system_tokens; ++t) r.tokens.push_back(k * system_tokens + t);
            r.prompt = system_tokens;
            driver_.begin_step(0);
            if (!driver_.admit(r)) return false;
            driver_.finish(r);
        }
        return true;
    }

    // One scheduler step; false when the cache could not serve the running requests.
    bool step() {
        for (Request& r : slots_) {
            if (r.running && r.rows.size() == r.tokens.size()) {
                driver_.finish(r);
                r.running = false;
                ++finished_;
            }
        }
        driver_.keep_free(watermark_);
        std::int32_t decoding = 0;
        for (const Request& r : slots_) decoding += r.running;
        driver_.begin_step(decoding);
        step_rows_.clear();
        for (Request& r : slots_) {
            if (r.running) continue;
            arrive(r);
            if (!driver_.admit(r)) {
                ++refused_;
                continue;
            }
            r.running = r.fresh = true;
            r.swa_keep = r.own_from < system_tokens ? system_tokens - Model::model.swa_window_tokens : 0;
            step_rows_.insert(step_rows_.end(), r.rows.begin() + r.own_from, r.rows.end());
            prefilled_ += r.prompt - r.own_from;
        }
        decoders_.clear();
        seq_lens_.clear();
        last_.clear();
        for (Request& r : slots_) {
            if (!r.running || std::exchange(r.fresh, false)) continue;
            decoders_.push_back(&r);
            seq_lens_.push_back(static_cast<std::int32_t>(r.rows.size()) + 1);
            last_.push_back(r.rows.back());
        }
        const auto out = std::span(decoded_).first(seq_lens_.size());
        if (!driver_.decode({.seq_lens = seq_lens_, .last_locs = last_}, out)) return false;
        for (std::size_t k = 0; k < decoders_.size(); ++k) decoders_[k]->rows.push_back(out[k]);
        step_rows_.insert(step_rows_.end(), out.begin(), out.end());
        // After the forward: the SWA rows that slid out of the window (a long prefill's, beyond one window, too).
        slid_.clear();
        for (Request& r : slots_) {
            if (r.running) slide(r);
        }
        driver_.free_swa(slid_);
        const std::size_t n = step_rows_.size();
        if (full_.size() < n) {  // only while warming up: the first arrivals prefill their system prompts
            full_.resize(n);
            swa_.resize(n);
        }
        driver_.translate(step_rows_, std::span(full_).first(n), std::span(swa_).first(n));
        benchmark::DoNotOptimize(full_.data());
        benchmark::DoNotOptimize(swa_.data());
        return true;
    }

    Driver& driver() { return driver_; }
    std::int64_t finished() const { return finished_; }
    std::int64_t refused() const { return refused_; }
    std::int64_t prefilled() const { return prefilled_; }

private:
    // A new request in slot `r`: a system prompt, its own prompt tokens and what it will generate.
    void arrive(Request& r) {
        const auto seq = static_cast<std::uint32_t>(arrivals_++);
        const std::uint32_t h = seq * 2654435761u;
        const auto system = static_cast<TokenId>(h % system_prompts);
        const auto generate = static_cast<std::int32_t>(min_new + (h >> 8) % (max_new - min_new + 1));
        r.prompt = system_tokens + own_prompt_;
        r.tokens.resize(static_cast<std::size_t>(r.prompt + generate));
        std::iota(r.tokens.begin(), r.tokens.begin() + system_tokens, system * system_tokens);
        if (next_ > (TokenId{1} << 30)) next_ = system_prompts * system_tokens;  // wraps long before it overflows
        std::iota(r.tokens.begin() + system_tokens, r.tokens.end(), next_);
        next_ += static_cast<TokenId>(r.tokens.size()) - system_tokens;
        r.rows.clear();
    }
    // Collects the request's own pages whose SWA rows all lie before its last window (and before the rows it
    // keeps for the tree).
    void slide(Request& r) {
        std::int32_t until = static_cast<std::int32_t>(r.rows.size()) - Model::model.swa_window_tokens;
        if (r.swa_keep > 0) until = std::min(until, r.swa_keep);
        for (; r.swa_from + page <= until; r.swa_from += page) {
            slid_.push_back(page_of(r.rows[static_cast<std::size_t>(r.swa_from)], {page}));
        }
    }

    Driver driver_;
    std::int32_t own_prompt_;
    std::int64_t watermark_;  // free pages each step starts with: about four steps' allocations
    std::vector<Request> slots_;
    std::vector<Request*> decoders_;
    std::vector<std::int32_t> seq_lens_;
    std::vector<VirtualToken> last_;
    std::vector<VirtualToken> decoded_;
    std::vector<VirtualToken> step_rows_;
    std::vector<VirtualPage> slid_;
    std::vector<PhysicalToken> full_;
    std::vector<PhysicalToken> swa_;
    std::int64_t arrivals_ = 0;
    TokenId next_ = system_prompts * system_tokens;  // the next fresh token id, above the system prompts'
    std::int64_t finished_ = 0;
    std::int64_t refused_ = 0;
    std::int64_t prefilled_ = 0;
};

enum Mode : std::int64_t { decode = 0, mixed = 1 };

// CPU seconds of this thread: on a loaded machine the wall time also counts the waits for a core.
double thread_seconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

template <class Driver>
void BM_step(benchmark::State& state) {
    const auto requests = static_cast<std::int32_t>(state.range(0));
    const std::int32_t own_prompt = state.range(1) == mixed ? 512 : 16;
    Loop<Driver> loop(requests, own_prompt);
    if (!loop.seed()) {
        state.SkipWithError("a system prompt was not admitted");
        return;
    }
    for (int i = 0; i < warm_steps; ++i) {
        if (!loop.step()) {
            state.SkipWithError("the cache ran out of rows while warming up");
            return;
        }
    }
    const std::int64_t finished = loop.finished(), refused = loop.refused(), prefilled = loop.prefilled();
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_seconds();
    for (auto _ : state) {
        if (!loop.step()) {
            state.SkipWithError("the cache ran out of rows");
            break;
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_seconds() - cpu0;
    if (!loop.driver().healthy()) state.SkipWithError("the accounting broke");
    const auto steps = static_cast<double>(state.iterations());
    state.counters["us/step"] = seconds / steps * 1e6;
    state.counters["cpu_us/step"] = cpu / steps * 1e6;
    state.counters["finished/step"] = static_cast<double>(loop.finished() - finished) / steps;
    state.counters["refused/step"] = static_cast<double>(loop.refused() - refused) / steps;
    state.counters["prefill/step"] = static_cast<double>(loop.prefilled() - prefilled) / steps;
}

void shapes(benchmark::internal::Benchmark* b) {
    b->ArgsProduct({{64, 256, 1024}, {decode, mixed}})->ArgNames({"requests", "mode"})->MinTime(0.2);
    b->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_step, CacheStep)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_step, BareStep)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
