#pragma once
// Definitions of `replay` (engine.hpp): the engine loop, one object over one cache for the length of a replay.

namespace unikv::sim {

namespace detail {

/// Generated tokens live in [2^30, 2^31); the trace's prompt tokens must stay below.
inline constexpr TokenId output_token_base = TokenId{1} << 30;

// The id of request `request`'s generated token at position `pos`: at any one position distinct for every
// request (the multiplier is odd), so two requests never share an output prefix.
[[nodiscard]] constexpr TokenId output_token(std::int32_t request, std::int32_t pos) noexcept {
    const std::uint32_t mixed = static_cast<std::uint32_t>(request) * 0x9E3779B1u + static_cast<std::uint32_t>(pos);
    return output_token_base | static_cast<TokenId>(mixed & 0x3FFFFFFFu);
}

// Where a live request stands.
enum class phase : std::uint8_t {
    waiting,  // arrived (or preempted), not admitted
    chunked,  // its prefill so far is in the tree, locked, waiting for its next chunk
    prefill,  // admitted this step: its extension computes in this step's forward
    decode,   // decoding one token per step
};

// One request of the trace while it lives: the scheduler's fields, and its handle in the cache (its tokens,
// rows, lock, state, SWA cursor and retraction backup).
struct live_request {
    std::int32_t index = 0;
    phase at = phase::waiting;
    std::int32_t output = 0;      // tokens it generates (the last one is never fed back, so it decodes one fewer)
    std::vector<TokenId> prompt;  // until its first admission; the handle keeps its tokens from then on
    Sequence seq;
    bool check_all = false;  // read every attended row in this step's forward (after a restore)
    bool admitted_once = false;
    bool first_token = false;       // its first output token came out
    std::uint64_t admit_order = 0;  // the later the admission, the larger; preemption takes the largest
    std::int32_t fetched = 0;          // prompt tokens its prefetch grafted from the storage tier
    std::uint64_t fetched_bytes = 0;   // the bytes (the model's) of its fetches, priced in the step that admits it
    RequestRecord record{};
};

// Per request, what an infinite cache serves it: the summary's replay, with the outputs the replay decodes.
[[nodiscard]] inline std::vector<std::int32_t> limits_of(const Trace& trace,
                                                         const std::vector<std::int32_t>& continued) {
    std::vector<std::int32_t> out;
    (void)summarize(trace, continued, &out);
    return out;
}

// What the instances of one replay share: the trace's per-request facts, the requests while they live (each on
// the one instance it was routed to), an infinite cache of every instance's finished requests (the limit the
// attribution measures against), and the records.
struct replay_context {
    replay_context(const Trace& t, const ReplaySetup& s)
        : trace(t),
          setup(s),
          continued(s.engine.continue_outputs ? continuations(t) : std::vector<std::int32_t>{}),
          limits(limits_of(t, continued)),
          finished_blocks(t),
          requests(t.requests().size()) {}

    const Trace& trace;
    const ReplaySetup& setup;
    const std::vector<std::int32_t> continued;  // per request, the later one that continues it (or none)
    const std::vector<std::int32_t> limits;     // per request, what an infinite cache serves it
    BlockTree finished_blocks;                  // an infinite cache of the requests finished so far, cluster-wide
    std::vector<live_request> requests;         // by trace index; reset when finished or dropped
    ReplayResult result;
    // With several instances: the longest prefix of a prompt any instance but the one named holds (device or host).
    std::function<std::int32_t(std::int32_t, std::span<const TokenId>)> held_elsewhere;
};

template <class Policies, class Cost>
class engine {
public:
    using cache_type = Cache<Policies>;
    using backend_type = typename cache_type::backend_type;
    static constexpr bool has_swa = cache_type::has_swa;
    static constexpr bool has_mamba = cache_type::has_mamba;
    // The simulator's bundles name `AnyStorage`; a run with `ReplaySetup::storage` attaches it.
    static constexpr bool has_storage = std::is_same_v<typename cache_type::storage_type, AnyStorage>;

    engine(replay_context& ctx, const Cost& cost, std::int32_t instance)
        : ctx_(ctx),
          config_(ctx.setup.engine),
          cost_(cost),
          instance_(instance),
          backend_(make_backend()),
          compute_(backend_.make_stream()),
          store_(ctx.setup.storage != nullptr ? AnyStorage(ctx.setup.storage->share()) : AnyStorage()),
          cache_(backend_, ctx.setup.cache, compute_),
          page_(cache_.allocator().spec()[Component::full].page_size),
          window_(cache_.window_tokens()) {
        UNIKV_EXPECTS(config_.max_running >= 1 && config_.chunk_tokens >= page_, "the engine needs max_running >= 1 "
                      "and chunk_tokens >= one page (", page_, " tokens); got ", config_.max_running, " and ",
                      config_.chunk_tokens);
        const Trace& trace = ctx.trace;
        UNIKV_EXPECTS(static_cast<std::int64_t>(trace.distinct_blocks()) * trace.block_tokens() <= output_token_base,
                      "the trace numbers ", static_cast<std::int64_t>(trace.distinct_blocks()) * trace.block_tokens(),
                      " prompt tokens; the replay keeps ids from 2^30 on for generated tokens");
        if constexpr (has_storage) {
            // The clock is simulated: a prefetch is waited for in full (`settle_storage`), never timed out.
            if (ctx.setup.storage != nullptr)
                cache_.attach_storage(store_, {.model = ctx.setup.storage_model,
                                       .layout = "unikv-sim",
                                       .prefetch_timeout = std::chrono::hours(24)});
        } else {
            UNIKV_EXPECTS(ctx.setup.storage == nullptr,
                          "a replay with a storage tier needs a bundle with storage = AnyStorage");
        }
    }

    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;
    // A replay that throws leaves requests holding rows, locks and backups: give them back before the cache goes.
    ~engine() {
        for (const auto* queue : {&waiting_, &chunked_}) {
            for (const std::int32_t i : *queue) release_quietly(i);
        }
        for (const auto* list : {&running_, &admitted_}) {
            for (const std::int32_t i : *list) release_quietly(i);
        }
    }

    /// True while requests wait, run or sit between chunks here.
    [[nodiscard]] bool busy() const noexcept { return !running_.empty() || !waiting_.empty() || !chunked_.empty(); }
    /// This instance's simulated clock (ms).
    [[nodiscard]] double clock() const noexcept { return clock_; }
    /// What the router asks at an arrival of `prompt`: the queue, and with `ask_prefix` the tokens of the prompt
    /// (but its last, which an admission always computes) this cache holds on device or host (`Cache::peek`).
    [[nodiscard]] InstanceView view(std::span<const TokenId> prompt, bool ask_prefix) const {
        InstanceView v{.queued_tokens = queued_tokens_,
                       .running = static_cast<std::int32_t>(running_.size() + chunked_.size())};
        if (ask_prefix && prompt.size() > 1)
            v.cached_prefix = cache_.peek({prompt.first(prompt.size() - 1)}).best_length;
        return v;
    }

    /// Queues request `index` of the trace, arriving at `arrival_ms` with `prompt` (its tokens): an idle
    /// instance's clock jumps to the arrival.
    void submit(std::int32_t index, double arrival_ms, std::vector<TokenId> prompt) {
        const Request& q = ctx_.trace.requests()[static_cast<std::size_t>(index)];
        live_request& r = ctx_.requests[static_cast<std::size_t>(index)];
        if (!busy()) clock_ = std::max(clock_, arrival_ms);
        r.index = index;
        r.output = q.output_tokens;
        r.prompt = std::move(prompt);
        r.record = {.index = index,
                    .arrival_ms = arrival_ms,
                    .prompt_tokens = q.prompt_tokens,
                    .output_tokens = q.output_tokens,
                    .instance = instance_};
        queued_tokens_ += q.prompt_tokens;
        waiting_.push_back(index);
    }

    /// Runs one step (see the file comment of engine.hpp). Precondition: `busy()`.
    void step() { run_step(); }

private:
    void release_quietly(std::int32_t i) noexcept {
        live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
        try {
            if (r.seq.status() != Sequence::Status::idle) cache_.release(r.seq);
        } catch (...) {  // the replay is already failing with its own exception
        }
    }

    // ---- the backend ---------------------------------------------------------------------------------------------

    // A backend with a manual execution mode (`HostBackend`) runs in it, so copies finish where `run_queued`
    // says and not at the workers' wall-clock pace: a replay is repeatable. Any other backend runs as it is.
    [[nodiscard]] static backend_type make_backend() {
        if constexpr (std::is_constructible_v<backend_type, HostBackendOptions>) {
            return backend_type(HostBackendOptions{.mode = ExecutionMode::manual});
        } else {
            return backend_type{};
        }
    }

    // Executes everything queued: the step's write-throughs (and any copy still queued) complete within the
    // step, whose cost already prices their bytes over the link; the next step's `writing_check` acknowledges
    // them.
    void run_queued() {
        if constexpr (requires(backend_type& b) { b.run_all(); }) timed([&] { (void)backend_.run_all(); });
    }

    // ---- timing and bookkeeping ------------------------------------------------------------------------------

    // Runs `f` (cache calls) and adds its steady-clock time to the step's `cache_ns`.
    template <class F>
    decltype(auto) timed(F&& f) {
        const auto start = std::chrono::steady_clock::now();
        struct add_on_exit {
            engine* e;
            std::chrono::steady_clock::time_point start;
            ~add_on_exit() {
                e->rec_.cache_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - start)
                                        .count();
            }
        } guard{this, start};
        return f();
    }

    // ---- the storage tier ----------------------------------------------------------------------------------

    // Asks the store for what the cache lacks of `r`'s prompt each time `r` is asked to be admitted (a prefetch at
    // arrival would graft into a host tier that turns over while `r` queues; one whose pages are still held finds
    // them cached and fetches nothing), and waits for the answer (wall time; the simulated cost of every fetch is
    // charged when `r` is admitted).
    void prefetch(live_request& r) {
        if constexpr (has_storage) {
            if (!cache_.storage_attached()) return;
            const std::uint64_t read0 = cache_.storage_counters().bytes_read;
            const PrefetchStart s = timed([&] { return cache_.prefetch({r.prompt}); });
            if (s.status != PrefetchStart::Status::started) return;
            for (const PrefetchDone& d : settle_storage()) {
                if (d.id != s.id || d.status != PrefetchDone::Status::grafted) continue;
                r.fetched = d.fetched;  // the last graft's: what the admission's host hit can hold of the store's
                r.fetched_bytes += (cache_.storage_counters().bytes_read - read0) * ctx_.setup.byte_scale;
            }
        } else {
            (void)r;
        }
    }
    // Finishes every storage task in flight (puts and prefetches), returning the prefetches reported.
    std::vector<PrefetchDone> settle_storage() {
        std::vector<PrefetchDone> out;
        if constexpr (has_storage) {
            for (;;) {
                // Waits in the store for its next answer (the replay's clock is simulated).
                const auto done = timed([&] { return cache_.storage_check(std::chrono::milliseconds(100)); });
                for (const PrefetchDone& d : done) out.push_back(d);
                if (cache_.storage_in_flight() == 0) break;
            }
        }
        return out;
    }

    // The token `r` decodes at position `pos`: its content stream's, while a later prompt that continues it
    // reaches there; else a fresh id.
    [[nodiscard]] TokenId output_of(const live_request& r, std::int32_t pos) const noexcept {
        if (!ctx_.continued.empty()) {
            if (const std::int32_t c = ctx_.continued[static_cast<std::size_t>(r.index)]; c != no_continuation) {
                const Request& later = ctx_.trace.requests()[static_cast<std::size_t>(c)];
                if (pos < later.prompt_tokens) return prompt_token(ctx_.trace, later, pos);
            }
        }
        return output_token(r.index, pos);
    }
    [[nodiscard]] static std::uint32_t marker(const live_request& r, std::int32_t pos, Component c) noexcept {
        return row_marker(r.seq.tokens()[static_cast<std::size_t>(pos)], pos, c);
    }
    [[nodiscard]] static std::uint32_t state_of(const live_request& r, std::int32_t len) noexcept {
        return state_marker(r.seq.tokens()[static_cast<std::size_t>(len - 1)], len);
    }

    // ---- one step ------------------------------------------------------------------------------------------

    void run_step() {
        rec_ = StepRecord{.instance = instance_, .step = step_, .start_ms = clock_};
        work_ = StepWork{};
        const std::uint64_t moved0 = cache_.allocator().bytes_moved();
        const std::uint64_t loaded0 = cache_.controller().bytes_submitted(TransferDirection::load);
        const std::uint64_t written0 = cache_.controller().bytes_submitted(TransferDirection::write);
        timed([&] {
            (void)cache_.loading_check();  // every load is acknowledged in its own step; kept for safety
            (void)cache_.writing_check();
        });

        decoding_.clear();
        for (const std::int32_t i : running_) {
            if (ctx_.requests[static_cast<std::size_t>(i)].at == phase::decode) decoding_.push_back(i);
        }
        timed([&] {
            cache_.begin_step({.decode_tokens = static_cast<std::int32_t>(decoding_.size()),
                               .chunk_tokens = config_.chunk_tokens});
        });
        admitted_.clear();
        admit();
        decode_alloc();
        forward(cache_.allocator().bytes_moved() != moved0);
        after_forward();
        timed([&] { (void)cache_.start_writing(); });
        run_queued();
        if constexpr (has_storage) {
            const std::uint64_t stored0 = cache_.storage_counters().bytes_written;
            (void)settle_storage();  // the step's puts (its write-through acks, its write-backs' backups)
            work_.bytes_stored = (cache_.storage_counters().bytes_written - stored0) * ctx_.setup.byte_scale;
        }

        if (config_.verify_every > 0 && step_ % config_.verify_every == 0) verify();
        const std::uint64_t k = ctx_.setup.byte_scale;
        work_.bytes_loaded = (cache_.controller().bytes_submitted(TransferDirection::load) - loaded0) * k;
        work_.bytes_written = (cache_.controller().bytes_submitted(TransferDirection::write) - written0) * k;
        rec_.bytes_compacted = (cache_.allocator().bytes_moved() - moved0) * k;
        rec_.work = work_;
        rec_.duration_ms = std::max(0.0, static_cast<double>(cost_(work_)));
        rec_.running = static_cast<std::int32_t>(running_.size() + chunked_.size());
        rec_.waiting = static_cast<std::int32_t>(waiting_.size());
        occupancy();
        clock_ += rec_.duration_ms;
        for (const std::int32_t i : first_tokens_)
            ctx_.requests[static_cast<std::size_t>(i)].record.first_token_ms = clock_;
        for (const std::int32_t i : finished_) {
            live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
            r.record.finish_ms = clock_;
            ctx_.result.requests.push_back(r.record);
            r = live_request{};
        }
        first_tokens_.clear();
        finished_.clear();
        ctx_.result.steps.push_back(rec_);
        ++step_;
    }

    void occupancy() {
        const auto& alloc = cache_.allocator();
        auto& host = cache_.host_pools();
        for (const Component c : all_components) {
            const SubPoolSpec& p = alloc.spec()[c];
            if (!p.present) continue;
            rec_.device_occupancy[index_of(c)] = static_cast<double>(alloc.live_pages(c)) *
                                                 static_cast<double>(p.page_bytes) /
                                                 static_cast<double>(alloc.spec().arena_bytes);
            if (host.capacity(c) > 0)
                rec_.host_occupancy[index_of(c)] = static_cast<double>(host.used(c)) / host.capacity(c);
        }
        const auto& tree = cache_.tree();
        const auto held = [&](Component c) { return tree.evictable_size(c) + tree.protected_size(c); };
        rec_.cached_tokens = held(Component::full);
        rec_.window_state_bytes = 0;
        for (const Component c : {Component::swa, Component::mamba}) {  // tree units: tokens, states for Mamba
            if (alloc.spec()[c].present)
                rec_.window_state_bytes +=
                    static_cast<std::uint64_t>(held(c)) * alloc.spec()[c].entry_bytes * ctx_.setup.byte_scale;
        }
    }

    void verify() {
        std::int64_t queued = 0;  // the router's queue figure, recounted
        for (const std::int32_t i : waiting_) {
            const live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
            if (!r.admitted_once) queued += r.record.prompt_tokens;
        }
        if (queued != queued_tokens_)
            throw std::runtime_error(message("unikv-sim: step ", step_, " of instance ", instance_, ": ",
                                             queued_tokens_, " prompt tokens counted queued, ", queued, " waiting"));
        const std::vector<std::string> broken = timed([&] { return cache_.verify(); });
        if (broken.empty()) return;
        throw std::runtime_error("unikv-sim: step " + std::to_string(step_) + ": the cache is broken (" +
                                 std::to_string(broken.size()) + " lines), first: " + broken.front());
    }

    // ---- admission ---------------------------------------------------------------------------------------------

    [[nodiscard]] std::size_t occupied() const noexcept {
        return running_.size() + admitted_.size() + chunked_.size();
    }

    void admit() {
        for (;;) {
            const bool from_chunk = !chunked_.empty();  // chunked requests are already counted as running
            if (!from_chunk && (waiting_.empty() || occupied() >= static_cast<std::size_t>(config_.max_running))) {
                return;
            }
            const std::int32_t i = from_chunk ? chunked_.front() : waiting_.front();
            live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
            // A restore drains the load lane, so it waits until no load of this step is in flight.
            if (r.seq.backed_up() && cache_.loads_in_flight() > 0) return;
            if (r.seq.status() == Sequence::Status::idle) prefetch(r);
            const Admission a = timed([&] { return ask(r); });
            if (a) {
                if (!r.admitted_once) attribute(r, a);
                started(r, a);
                if (from_chunk) {
                    chunked_.pop_front();
                } else {
                    waiting_.pop_front();
                }
                admitted_.push_back(i);
                ++rec_.admitted;
                continue;
            }
            ++rec_.refused;
            if (!cannot_ever_fit(from_chunk)) return;
            drop(r);
            if (from_chunk) {
                chunked_.pop_front();
            } else {
                waiting_.pop_front();
            }
        }
    }

    // True when a refused request would be refused on any later step too: nothing runs, was admitted, loads
    // or writes (a write-through holds its node until its ack), and no other request holds device memory.
    [[nodiscard]] bool cannot_ever_fit(bool from_chunk) const {
        return running_.empty() && admitted_.empty() && cache_.loads_in_flight() == 0 &&
               cache_.writes_in_flight() == 0 && chunked_.size() == (from_chunk ? 1U : 0U);
    }

    void drop(live_request& r) {
        if (!r.admitted_once) queued_tokens_ -= r.record.prompt_tokens;
        timed([&] {
            if (r.seq.status() != Sequence::Status::idle) cache_.release(r.seq);
        });
        ctx_.result.dropped.push_back(r.index);
        ctx_.result.dropped_on.push_back(instance_);
        r = live_request{};
    }

    // The admission `r` asks for: its first (the prompt), its next chunk, or its return after a preemption.
    Admission ask(live_request& r) {
        switch (r.seq.status()) {
            case Sequence::Status::idle:
                return cache_.admit(r.seq, {.prompt = {r.prompt}, .max_new_tokens = r.output - 1});
            case Sequence::Status::retracted: return cache_.restore(r.seq);
            case Sequence::Status::running: break;
        }
        return cache_.extend(r.seq);
    }

    // Bookkeeping of an admitted `r`: it computes its rows from `compute_from()` (a restore that copied its rows
    // back: the last one, not known computed when it was retracted) and decodes once its prompt is computed.
    void started(live_request& r, const Admission& a) {
        const Sequence& s = r.seq;
        const bool restored = s.restored_rows() > 0;
        r.at = phase::prefill;
        r.check_all = restored;
        rec_.restored += restored ? 1 : 0;
        rec_.chunked += a.chunked ? 1 : 0;
        r.admit_order = ++admissions_;
        work_.prefill_tokens += s.length() - s.compute_from();
        if (!r.admitted_once) {
            r.admitted_once = true;
            queued_tokens_ -= r.record.prompt_tokens;
            r.record.admitted_ms = clock_;
            // Its host hit includes what its prefetch grafted: that part came from the store.
            const std::int32_t stored = std::min(r.fetched, a.host_length);
            r.record.device_hit_tokens = a.prefix_length - a.host_length;
            r.record.host_hit_tokens = a.host_length - stored;
            r.record.storage_hit_tokens = stored;
            rec_.admitted_prompt_tokens += r.record.prompt_tokens;
            rec_.device_hit_tokens += a.prefix_length - a.host_length;
            rec_.host_hit_tokens += a.host_length - stored;
            rec_.storage_hit_tokens += stored;
            work_.bytes_fetched += r.fetched_bytes;
            std::vector<TokenId>().swap(r.prompt);  // the handle has them
        }
    }

    // What `r`'s first admission `a` missed of its limit, by cause: the cache says which tokens its FULL pages
    // held where an SWA window or a Mamba state was missing; of the rest, what no request had finished caching
    // when it came (an infinite cache fed in finishing order) ran concurrently; of the rest, what another
    // instance's cache held (device or host) was lost to routing; the remainder is FULL pages missing.
    void attribute(live_request& r, const Admission& a) {
        RequestRecord& q = r.record;
        q.limit_tokens = ctx_.limits[static_cast<std::size_t>(r.index)];
        const std::int32_t gap = std::max(0, q.limit_tokens - a.prefix_length);
        q.lost_to_swa = std::min(a.missing_window, gap);
        q.lost_to_mamba = std::min(a.missing_state, gap - q.lost_to_swa);
        const std::int32_t rest = gap - q.lost_to_swa - q.lost_to_mamba;
        const std::int32_t available = ctx_.finished_blocks.served(static_cast<std::size_t>(r.index));
        q.lost_to_concurrency = std::clamp(q.limit_tokens - std::max(available, a.prefix_length), 0, rest);
        const std::int32_t elsewhere =
            ctx_.held_elsewhere ? std::min(ctx_.held_elsewhere(instance_, r.prompt), q.limit_tokens) : 0;
        q.lost_to_routing = std::clamp(elsewhere - a.prefix_length, 0, rest - q.lost_to_concurrency);
        q.lost_to_full = rest - q.lost_to_concurrency - q.lost_to_routing;
    }

    // ---- decode and preemption ---------------------------------------------------------------------------

    void decode_alloc() {
        while (!decoding_.empty()) {
            batch_.clear();
            next_.clear();
            for (const std::int32_t i : decoding_) {
                live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
                batch_.push_back(&r.seq);
                next_.push_back(output_of(r, r.seq.length()));
            }
            if (timed([&] { return cache_.decode(batch_, next_); })) break;
            preempt_newest();
        }
        work_.decode_tokens = static_cast<std::int64_t>(decoding_.size());
    }

    // Preempts the decode request admitted last: retraction (its rows backed up where the cache can, else
    // dropped and recomputed at its return).
    void preempt_newest() {
        const auto newest = std::max_element(decoding_.begin(), decoding_.end(), [&](std::int32_t x, std::int32_t y) {
            return ctx_.requests[static_cast<std::size_t>(x)].admit_order <
                   ctx_.requests[static_cast<std::size_t>(y)].admit_order;
        });
        const std::int32_t i = *newest;
        decoding_.erase(newest);
        running_.erase(std::find(running_.begin(), running_.end(), i));
        live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
        (void)timed([&] { return cache_.retract(r.seq); });
        r.at = phase::waiting;
        ++r.record.preemptions;
        ++rec_.preempted;
        waiting_.push_front(i);
    }

    // ---- the forward --------------------------------------------------------------------------------------------

    void forward(bool pages_moved) {
        const bool loads = timed([&] { return cache_.start_loading() > 0; });
        timed([&] {
            if (loads) {
                for (std::int32_t l = 0; l < cache_.layers(); ++l) cache_.wait_layer(compute_, l);
            }
            cache_.sync_for_host();  // the host forward runs after the moves, and the loads it waited for
            if (loads) cache_.controller().stream().synchronize();  // and for the loads' done events
        });
        if (loads) {
            const std::span<const LoadDone> done = timed([&] { return cache_.loading_check(); });
            for (const LoadDone& d : done) {
                if (!d.committed) throw std::runtime_error("unikv-sim: load-back " + std::to_string(d.id) + " failed");
            }
            timed([&] {  // the loaded prefixes' rows are read, and their states copied, before the host reads them
                for (const std::int32_t i : admitted_) {
                    Sequence& s = ctx_.requests[static_cast<std::size_t>(i)].seq;
                    if (s.load_id() != 0) (void)cache_.rows(s);
                }
                cache_.sync_for_host();
            });
        }
        const RowMarkers<typename cache_type::allocator_type> rows(cache_.allocator());
        for (const std::int32_t i : admitted_) compute(ctx_.requests[static_cast<std::size_t>(i)], rows);
        for (const std::int32_t i : decoding_) compute(ctx_.requests[static_cast<std::size_t>(i)], rows);
        if (config_.check_rows && pages_moved) {
            for (const std::int32_t i : running_) check_all(ctx_.requests[static_cast<std::size_t>(i)], rows);
        }
    }

    // The forward of one request: reads what it attends to, writes the rows (and state) it computes.
    template <class Rows>
    void compute(live_request& r, const Rows& rows) {
        const std::int32_t from = r.seq.compute_from();
        const std::int32_t len = r.seq.length();
        work_.context_tokens += len;
        if (!config_.check_rows) return;
        if (r.check_all || r.at == phase::prefill) {
            check_range(r, rows, 0, from);
            if constexpr (has_mamba) {  // its state starts as the cache's copy of the prefix's checkpoint
                if (from > 0 && r.at == phase::prefill) check_own_state(r, rows, from);
            }
            r.check_all = false;
        } else if (from > 0) {
            check_range(r, rows, from - 1, from);
            const std::int32_t rotating = static_cast<std::int32_t>(step_ % from);
            check_range(r, rows, rotating, rotating + 1);
            if constexpr (has_mamba) check_own_state(r, rows, from);
        }
        write_range(r, rows, from, len);
        if constexpr (has_mamba) write_own_state(r, rows, len);
    }

    template <class Rows>
    void check_all(live_request& r, const Rows& rows) {
        check_range(r, rows, 0, r.seq.length());
        if constexpr (has_mamba) check_own_state(r, rows, r.seq.length());
    }

    // Reads FULL rows [from, to) and the SWA rows of them within the window of the sequence's end.
    template <class Rows>
    void check_range(live_request& r, const Rows& rows, std::int32_t from, std::int32_t to) {
        if (from >= to) return;
        translate(r, from, to);
        for (std::int32_t p = from; p < to; ++p)
            rows.check_token(Component::full, physical_[static_cast<std::size_t>(p - from)],
                             marker(r, p, Component::full), r.index, p);
        if constexpr (has_swa) {
            const std::int32_t swa_from = std::max(from, r.seq.compute_from() - window_);
            if (swa_from >= to) return;
            translate_swa(r, swa_from, to);
            for (std::int32_t p = swa_from; p < to; ++p)
                rows.check_token(Component::swa, physical_[static_cast<std::size_t>(p - swa_from)],
                                 marker(r, p, Component::swa), r.index, p);
        }
    }

    template <class Rows>
    void write_range(live_request& r, const Rows& rows, std::int32_t from, std::int32_t to) {
        if (from >= to) return;
        translate(r, from, to);
        for (std::int32_t p = from; p < to; ++p)
            rows.write_token(Component::full, physical_[static_cast<std::size_t>(p - from)],
                             marker(r, p, Component::full));
        if constexpr (has_swa) {
            translate_swa(r, from, to);
            for (std::int32_t p = from; p < to; ++p)
                rows.write_token(Component::swa, physical_[static_cast<std::size_t>(p - from)],
                                 marker(r, p, Component::swa));
        }
    }

    // The handle's rows [from, to) (a loaded prefix is read from the tree at the first call after its ack).
    [[nodiscard]] std::span<const VirtualToken> virtual_rows(live_request& r, std::int32_t from, std::int32_t to) {
        physical_.resize(static_cast<std::size_t>(to - from));
        return timed([&] { return cache_.rows(r.seq); })
            .subspan(static_cast<std::size_t>(from), static_cast<std::size_t>(to - from));
    }
    void translate(live_request& r, std::int32_t from, std::int32_t to) {
        const std::span<const VirtualToken> rows = virtual_rows(r, from, to);
        timed([&] { cache_.translate_full(rows, physical_); });
    }
    void translate_swa(live_request& r, std::int32_t from, std::int32_t to) {
        if constexpr (has_swa) {
            const std::span<const VirtualToken> rows = virtual_rows(r, from, to);
            timed([&] { cache_.translate_swa(rows, physical_); });
        }
    }
    template <class Rows>
    void check_own_state(const live_request& r, const Rows& rows, std::int32_t len) {
        if constexpr (has_mamba) {
            const StateId s[] = {r.seq.state()};
            PhysicalPage slot[1];
            timed([&] { cache_.translate_state(s, slot); });
            rows.check_state(slot[0], state_of(r, len), r.index, len);
        }
    }
    template <class Rows>
    void write_own_state(const live_request& r, const Rows& rows, std::int32_t len) {
        if constexpr (has_mamba) {
            const StateId s[] = {r.seq.state()};
            PhysicalPage slot[1];
            timed([&] { cache_.translate_state(s, slot); });
            rows.write_state(slot[0], state_of(r, len));
        }
    }

    // ---- after the forward --------------------------------------------------------------------------------------

    void after_forward() {
        for (const std::int32_t i : admitted_) {
            live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
            if (r.at == phase::prefill && !r.seq.prefilling()) {
                r.at = phase::decode;
                if constexpr (has_mamba) checkpoint(r);
                if (!r.first_token) {
                    r.first_token = true;
                    first_tokens_.push_back(i);
                }
            }
            running_.push_back(i);
        }
        for (std::size_t k = 0; k < running_.size();) {
            const std::int32_t i = running_[k];
            live_request& r = ctx_.requests[static_cast<std::size_t>(i)];
            if (r.at == phase::prefill) {  // a chunk: into the tree, still locked, and wait for the next one
                (void)timed([&] { return cache_.checkpoint(r.seq); });
                r.at = phase::chunked;
                chunked_.push_back(i);
            } else if (r.seq.decoded() == r.seq.max_new_tokens()) {
                if constexpr (has_mamba) {
                    if (r.seq.length() % page_ != 0) checkpoint(r);  // the state at its last whole page too
                }
                (void)timed([&] { return cache_.finish(r.seq); });
                (void)ctx_.finished_blocks.hold(static_cast<std::size_t>(r.index), ctx_.continued);
                finished_.push_back(i);
                ++rec_.finished;
            } else {
                ++k;
                continue;
            }
            running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(k));
        }
    }

    // Mamba: caches the request's whole pages with a state at their end, so later requests sharing its prompt
    // find a state to start from (at a prompt's end, and at a finish off a page boundary). On a page boundary
    // the cache copies the running state; otherwise the forward is taken to have saved its state at the last
    // whole page into a slot of its own. Skipped when no slot is free.
    void checkpoint(live_request& r) {
        if constexpr (has_mamba) {
            const std::int32_t whole = r.seq.length() / page_ * page_;
            if (whole <= r.seq.prefix_length()) return;
            StateId slot[1] = {StateId{}};
            if (whole < r.seq.length()) {
                if (!timed([&] { return cache_.alloc_state(slot); })) return;
                if (config_.check_rows) {
                    cache_.sync_for_host();  // the slot may have moved: write after the queued moves
                    PhysicalPage physical[1];
                    timed([&] { cache_.translate_state(slot, physical); });
                    RowMarkers<typename cache_type::allocator_type>(cache_.allocator())
                        .write_state(physical[0], state_of(r, whole));
                }
            }
            (void)timed([&] { return cache_.checkpoint(r.seq, slot[0]); });
        }
    }

    replay_context& ctx_;
    const EngineConfig config_;
    const Cost& cost_;
    const std::int32_t instance_;
    backend_type backend_;
    decltype(std::declval<backend_type&>().make_stream()) compute_;
    AnyStorage store_;  // this instance's share of the replay's store (outlives the cache that attaches it)
    cache_type cache_;
    const std::int32_t page_;
    const std::int32_t window_;

    std::int64_t queued_tokens_ = 0;  // prompt tokens of the requests waiting for their first admission
    std::deque<std::int32_t> waiting_;     // FIFO; preempted requests go to the front
    std::deque<std::int32_t> chunked_;  // requests between two chunks, in order (admitted first)
    std::vector<std::int32_t> running_;    // prefilled or decoding
    std::vector<std::int32_t> admitted_;   // admitted this step
    std::vector<std::int32_t> decoding_;   // decoding this step
    std::vector<std::int32_t> first_tokens_, finished_;
    std::uint64_t admissions_ = 0;
    std::int64_t step_ = 0;
    double clock_ = 0;
    StepRecord rec_{};
    StepWork work_{};
    // Scratch, reused every step.
    std::vector<Sequence*> batch_;
    std::vector<TokenId> next_;
    std::vector<PhysicalToken> physical_;
};

}  // namespace detail

template <class Policies, class Cost>
ReplayResult replay(const Trace& trace, const ReplaySetup& setup, const Cost& cost,
                    const std::function<void(const ReplayProgress&)>& progress) {
    using instance = detail::engine<Policies, Cost>;
    const ClusterConfig& cluster = setup.cluster;
    UNIKV_EXPECTS(cluster.instances >= 1, "a replay needs at least one instance; got ", cluster.instances);
    UNIKV_EXPECTS(setup.arrival_scale > 0, "the arrival scale must be positive; got ", setup.arrival_scale);
    const auto wall_start = std::chrono::steady_clock::now();
    detail::replay_context ctx(trace, setup);
    std::vector<std::unique_ptr<instance>> instances;
    for (std::int32_t i = 0; i < cluster.instances; ++i) instances.push_back(std::make_unique<instance>(ctx, cost, i));
    if (cluster.instances > 1) {
        ctx.held_elsewhere = [&](std::int32_t self, std::span<const TokenId> prompt) {
            std::int32_t most = 0;
            for (std::size_t i = 0; i < instances.size(); ++i)
                if (static_cast<std::int32_t>(i) != self)
                    most = std::max(most, instances[i]->view(prompt, true).cached_prefix);
            return most;
        };
    }

    const auto all = trace.requests();
    const EngineConfig& config = setup.engine;
    std::int64_t steps = 0;
    const auto report = [&](double clock) {
        if (progress)
            progress({.finished = static_cast<std::int64_t>(ctx.result.requests.size() + ctx.result.dropped.size()),
                      .total = static_cast<std::int64_t>(all.size()),
                      .steps = steps,
                      .simulated_ms = clock});
    };
    // Steps every instance with work whose clock is before `until`, the one furthest behind first; false when the
    // step limit stops the replay.
    const auto advance = [&](double until) {
        for (;;) {
            instance* behind = nullptr;
            for (const auto& e : instances)
                if (e->busy() && e->clock() < until && (behind == nullptr || e->clock() < behind->clock()))
                    behind = e.get();
            if (behind == nullptr) return true;
            if (config.max_steps > 0 && steps >= config.max_steps) return false;
            behind->step();
            ++steps;
            if (config.progress_every > 0 && steps % config.progress_every == 0) report(behind->clock());
        }
    };
    std::vector<InstanceView> views(static_cast<std::size_t>(cluster.instances));
    double last_arrival = 0;
    for (std::size_t next = 0; next < all.size(); ++next) {
        const double at = all[next].arrival_ms * setup.arrival_scale;
        if (!advance(at)) break;
        std::vector<TokenId> prompt(static_cast<std::size_t>(all[next].prompt_tokens));
        trace.prompt_tokens(all[next], prompt);
        const bool ask_prefix = cluster.router == RouterChoice::prefix;
        for (std::size_t i = 0; i < instances.size(); ++i) views[i] = instances[i]->view(prompt, ask_prefix);
        const std::int32_t to = route(cluster, views, static_cast<std::int64_t>(next));
        instances[static_cast<std::size_t>(to)]->submit(static_cast<std::int32_t>(next), at, std::move(prompt));
        last_arrival = at;
    }
    (void)advance(std::numeric_limits<double>::infinity());
    double end = last_arrival;
    for (const auto& e : instances) end = std::max(end, e->clock());
    report(end);
    instances.clear();  // each gives back what a stopped replay still holds
    ReplayResult out = std::move(ctx.result);
    out.instances = cluster.instances;
    out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    out.unfinished = static_cast<std::int64_t>(all.size() - out.requests.size() - out.dropped.size());
    return out;
}

}  // namespace unikv::sim
