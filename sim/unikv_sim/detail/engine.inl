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

// One request of the trace while it lives.
struct live_request {
    std::int32_t index = 0;
    phase at = phase::waiting;
    std::int32_t target = 0;      // rows when it finishes: prompt + output - 1 (the last token is never fed back)
    std::int32_t fill = 0;        // rows its prefill reaches before it decodes (the prompt; more after an abort)
    std::int32_t len = 0;         // rows computed
    std::int32_t prefix = 0;      // rows [0, prefix) are the tree's, under `lock`; the rest are its own pages
    std::int32_t swa_cursor = 0;  // its own SWA rows before this were freed (page aligned, >= prefix)
    std::int32_t computed_from = 0;  // this step's forward computes rows [computed_from, len)
    std::vector<TokenId> tokens;     // [0, target)
    std::vector<VirtualPage> pages;  // FULL virtual pages of rows [0, len)
    LockReceipt lock;
    NodeRef node{};  // where its prefix ends (the Mamba checkpoint it starts from)
    StateId state{};
    RetractionBackup backup;
    std::int32_t backup_prefix = 0;  // `prefix` when it was retracted
    std::uint64_t load_id = 0;       // its admission's load-back, until acknowledged
    bool chunked = false;            // this step's admission was cut to the chunk budget
    bool check_all = false;          // read every attended row in this step's forward (after a restore)
    bool admitted_once = false;
    bool first_token = false;  // its first output token came out
    std::uint64_t admit_order = 0;  // the later the admission, the larger; preemption takes the largest
    RequestRecord record{};
};

template <class Policies, class Cost>
class engine {
public:
    using cache_type = Cache<Policies>;
    using backend_type = typename cache_type::backend_type;
    static constexpr bool has_swa = cache_type::has_swa;
    static constexpr bool has_mamba = cache_type::has_mamba;

    engine(const Trace& trace, const ReplaySetup& setup, const Cost& cost,
           const std::function<void(const ReplayProgress&)>& progress)
        : trace_(trace),
          setup_(setup),
          config_(setup.engine),
          cost_(cost),
          progress_(progress),
          backend_(make_backend()),
          compute_(backend_.make_stream()),
          cache_(backend_, setup.cache, compute_),
          page_(cache_.allocator().spec()[Component::full].page_size),
          window_(cache_.window_tokens()),
          requests_(trace.requests().size()) {
        UNIKV_EXPECTS(config_.max_running >= 1 && config_.chunk_tokens >= page_, "the engine needs max_running >= 1 "
                      "and chunk_tokens >= one page (", page_, " tokens); got ", config_.max_running, " and ",
                      config_.chunk_tokens);
        UNIKV_EXPECTS(static_cast<std::int64_t>(trace.distinct_blocks()) * trace.block_tokens() <= output_token_base,
                      "the trace numbers ", static_cast<std::int64_t>(trace.distinct_blocks()) * trace.block_tokens(),
                      " prompt tokens; the replay keeps ids from 2^30 on for generated tokens");
    }

    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;
    // A replay that throws leaves requests holding locks and backups: give them back before the cache goes.
    ~engine() {
        for (live_request& r : requests_) {
            try {
                if (!r.lock.empty()) cache_.unlock(std::move(r.lock));
                if constexpr (cache_type::can_retract) cache_.discard(r.backup);
            } catch (...) {  // the replay is already failing with its own exception
            }
        }
    }

    ReplayResult run() {
        const auto wall_start = std::chrono::steady_clock::now();
        const auto trace_requests = trace_.requests();
        while (config_.max_steps == 0 || step_ < config_.max_steps) {
            arrive();
            if (running_.empty() && waiting_.empty() && !chunked_) {
                if (next_arrival_ == trace_requests.size()) break;
                clock_ = std::max(clock_, trace_requests[next_arrival_].arrival_ms);  // idle: jump to the arrival
                continue;
            }
            run_step();
            if (progress_ && config_.progress_every > 0 && step_ % config_.progress_every == 0) report_progress();
        }
        if (progress_) report_progress();
        result_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
        result_.unfinished =
            static_cast<std::int64_t>(requests_.size() - result_.requests.size() - result_.dropped.size());
        return std::move(result_);
    }

private:
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

    void report_progress() const {
        progress_(
            ReplayProgress{.finished = static_cast<std::int64_t>(result_.requests.size() + result_.dropped.size()),
                           .total = static_cast<std::int64_t>(requests_.size()),
                           .steps = step_,
                           .simulated_ms = clock_});
    }

    void arrive() {
        const auto all = trace_.requests();
        while (next_arrival_ < all.size() && all[next_arrival_].arrival_ms <= clock_) {
            const Request& q = all[next_arrival_];
            live_request& r = requests_[next_arrival_];
            r.index = static_cast<std::int32_t>(next_arrival_);
            r.target = q.prompt_tokens + q.output_tokens - 1;
            r.fill = q.prompt_tokens;
            r.tokens.resize(static_cast<std::size_t>(r.target));
            trace_.prompt_tokens(q, std::span(r.tokens).first(static_cast<std::size_t>(q.prompt_tokens)));
            for (std::int32_t p = q.prompt_tokens; p < r.target; ++p)
                r.tokens[static_cast<std::size_t>(p)] = output_token(r.index, p);
            r.record = {.index = r.index,
                        .arrival_ms = q.arrival_ms,
                        .prompt_tokens = q.prompt_tokens,
                        .output_tokens = q.output_tokens};
            waiting_.push_back(r.index);
            ++next_arrival_;
        }
    }

    [[nodiscard]] VirtualToken token_at(const live_request& r, std::int32_t pos) const noexcept {
        return token_of(r.pages[static_cast<std::size_t>(pos / page_)], {page_}, pos % page_);
    }
    [[nodiscard]] TokenKey key(const live_request& r, std::int32_t tokens) const noexcept {
        return {std::span<const TokenId>(r.tokens).first(static_cast<std::size_t>(tokens))};
    }
    [[nodiscard]] std::uint32_t marker(const live_request& r, std::int32_t pos, Component c) const noexcept {
        return row_marker(r.tokens[static_cast<std::size_t>(pos)], pos, c);
    }
    [[nodiscard]] std::uint32_t state_of(const live_request& r, std::int32_t len) const noexcept {
        return state_marker(r.tokens[static_cast<std::size_t>(len - 1)], len);
    }

    // ---- one step ------------------------------------------------------------------------------------------

    void run_step() {
        rec_ = StepRecord{.step = step_, .start_ms = clock_};
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
            if (requests_[static_cast<std::size_t>(i)].at == phase::decode) decoding_.push_back(i);
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

        if (config_.verify_every > 0 && step_ % config_.verify_every == 0) verify();
        const std::uint64_t k = setup_.byte_scale;
        work_.bytes_loaded = (cache_.controller().bytes_submitted(TransferDirection::load) - loaded0) * k;
        work_.bytes_written = (cache_.controller().bytes_submitted(TransferDirection::write) - written0) * k;
        rec_.bytes_compacted = (cache_.allocator().bytes_moved() - moved0) * k;
        rec_.work = work_;
        rec_.duration_ms = std::max(0.0, static_cast<double>(cost_(work_)));
        rec_.running = static_cast<std::int32_t>(running_.size()) + (chunked_ ? 1 : 0);
        rec_.waiting = static_cast<std::int32_t>(waiting_.size());
        occupancy();
        clock_ += rec_.duration_ms;
        for (const std::int32_t i : first_tokens_)
            requests_[static_cast<std::size_t>(i)].record.first_token_ms = clock_;
        for (const std::int32_t i : finished_) {
            live_request& r = requests_[static_cast<std::size_t>(i)];
            r.record.finish_ms = clock_;
            result_.requests.push_back(r.record);
            r = live_request{};
        }
        first_tokens_.clear();
        finished_.clear();
        result_.steps.push_back(rec_);
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
    }

    void verify() {
        const std::vector<std::string> broken = timed([&] { return cache_.verify(); });
        if (broken.empty()) return;
        throw std::runtime_error("unikv-sim: step " + std::to_string(step_) + ": the cache is broken (" +
                                 std::to_string(broken.size()) + " lines), first: " + broken.front());
    }

    // ---- admission ---------------------------------------------------------------------------------------------

    [[nodiscard]] std::size_t occupied() const noexcept {
        return running_.size() + admitted_.size() + (chunked_ ? 1 : 0);
    }

    void admit() {
        for (;;) {
            const bool from_chunk = chunked_.has_value();  // the chunked request is already counted as running
            if (!from_chunk && (waiting_.empty() || occupied() >= static_cast<std::size_t>(config_.max_running))) {
                return;
            }
            const std::int32_t i = from_chunk ? *chunked_ : waiting_.front();
            live_request& r = requests_[static_cast<std::size_t>(i)];
            // A restore drains the load lane, so it waits until no load of this step is in flight.
            if (r.backup && cache_.loads_in_flight() > 0) return;
            const std::int32_t ask = r.backup ? r.len : r.fill;
            Admission a =
                timed([&] { return cache_.try_admit({.prompt = key(r, ask), .max_new_tokens = r.target - ask}); });
            if (a && start(r, a)) {
                if (from_chunk) {
                    chunked_.reset();
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
                chunked_.reset();
            } else {
                waiting_.pop_front();
            }
        }
    }

    // True when a refused request would be refused on any later step too: nothing runs, was admitted, loads
    // or writes (a write-through holds its node until its ack), and no other request holds device memory.
    [[nodiscard]] bool cannot_ever_fit(bool from_chunk) const {
        return running_.empty() && admitted_.empty() && cache_.loads_in_flight() == 0 &&
               cache_.writes_in_flight() == 0 && (from_chunk || !chunked_);
    }

    void drop(live_request& r) {
        timed([&] {
            if (!r.lock.empty()) cache_.unlock(std::move(r.lock));
            if constexpr (cache_type::can_retract) cache_.discard(r.backup);
        });
        result_.dropped.push_back(r.index);
        r = live_request{};
    }

    // Sets up the admitted `r` (rows, state, or its restore); false when an allocation fell short after the
    // budget admitted it: then nothing is held beyond what it held before.
    bool start(live_request& r, Admission& a) {
        LockReceipt previous = std::move(r.lock);
        const restore_outcome restored = restore(r, a);
        if (restored == restore_outcome::short_of_rows || (restored == restore_outcome::recompute && !extend(r, a))) {
            timed([&] { cache_.unlock(std::move(a.lock)); });
            r.lock = std::move(previous);
            return false;
        }
        if (!previous.empty()) timed([&] { cache_.unlock(std::move(previous)); });
        r.lock = std::move(a.lock);
        r.node = a.node;
        r.admit_order = ++admissions_;
        if (!r.admitted_once) {
            r.admitted_once = true;
            r.record.admitted_ms = clock_;
            const std::int32_t host = a.load_id != 0 ? host_part(r, a.prefix_length) : 0;
            r.record.device_hit_tokens = a.prefix_length - host;
            r.record.host_hit_tokens = host;
            rec_.admitted_prompt_tokens += r.fill;
            rec_.device_hit_tokens += a.prefix_length - host;
            rec_.host_hit_tokens += host;
        }
        return true;
    }

    // Tokens of the admitted prefix that the queued load brings (not yet served from the device).
    [[nodiscard]] std::int32_t host_part(live_request& r, std::int32_t prefix) {
        const MatchResult m = timed([&] { return cache_.match(key(r, prefix)); });
        return prefix - m.device_length;
    }

    // The rows of a prefill admission: its extension and its state. A retracted request that reaches here
    // recomputes: its backup is given back.
    bool extend(live_request& r, Admission& a) {
        if constexpr (cache_type::can_retract) {
            if (r.backup) {
                timed([&] { cache_.discard(r.backup); });
                r.fill = r.len;
            }
        }
        const std::int32_t prefix = a.prefix_length;
        const std::int32_t end = prefix + a.extend_length;
        scratch_tokens_.resize(static_cast<std::size_t>(a.extend_length));
        const std::int32_t prefix_lens[] = {prefix}, seq_lens[] = {end};
        const VirtualToken last[] = {VirtualToken{}};  // the prefix ends on a page boundary: nothing to continue
        if (!timed([&] { return cache_.alloc_extend({prefix_lens, seq_lens, last}, scratch_tokens_); })) return false;
        scratch_pages_.clear();
        for (std::size_t t = 0; t < scratch_tokens_.size(); t += static_cast<std::size_t>(page_))
            scratch_pages_.push_back(page_of(scratch_tokens_[t], {page_}));
        StateId state{};
        if constexpr (has_mamba) {
            StateId out[1];
            if (!timed([&] { return cache_.alloc_state(out); })) {
                timed([&] { cache_.free(scratch_pages_); });
                return false;
            }
            state = out[0];
        }
        r.at = phase::prefill;
        r.prefix = prefix;
        r.swa_cursor = prefix;
        r.computed_from = prefix;
        r.len = end;
        r.state = state;
        r.load_id = a.load_id;
        r.chunked = a.chunked;
        rec_.chunked += a.chunked ? 1 : 0;
        r.pages.assign(static_cast<std::size_t>(prefix / page_), VirtualPage{});
        r.pages.insert(r.pages.end(), scratch_pages_.begin(), scratch_pages_.end());
        if (a.load_id == 0) prefix_pages(r, prefix);
        work_.prefill_tokens += a.extend_length;
        return true;
    }

    // Fills `r.pages` for the tree's prefix from a match of the `locked` tokens its lock holds on device.
    void prefix_pages(live_request& r, std::int32_t locked) {
        if (r.prefix == 0) return;
        const MatchResult m = timed([&] { return cache_.match(key(r, locked)); });
        if (m.device_length < locked)
            throw std::logic_error("unikv-sim: request " + std::to_string(r.index) + ": its locked prefix of " +
                                   std::to_string(locked) + " tokens matches only " +
                                   std::to_string(m.device_length) + " on device");
        std::size_t p = 0;
        for (const VirtualPage v : m.device_pages) {
            if (p == static_cast<std::size_t>(r.prefix / page_)) break;
            r.pages[p++] = v;
        }
    }

    enum class restore_outcome : std::uint8_t { restored, recompute, short_of_rows };

    // A retracted request admitted with at least the prefix it had, on device: fresh rows after that prefix,
    // its backup copied into them (the admission's lock holds the prefix's FULL rows and the SWA window before
    // its end, which covers the part of the request's window before its own rows; tree pages beyond the old
    // prefix go unused and its own copies are freed as duplicates when it finishes). Otherwise, and for a
    // request without a backup, it recomputes (`extend`); `short_of_rows` when the fresh rows fell short
    // (nothing changed).
    restore_outcome restore(live_request& r, Admission& a) {
        if constexpr (cache_type::can_retract) {
            if (!r.backup || a.chunked || a.load_id != 0 || a.prefix_length < r.backup_prefix) {
                return restore_outcome::recompute;
            }
            const std::int32_t prefix = r.backup_prefix;
            scratch_tokens_.resize(static_cast<std::size_t>(r.len - prefix));
            const std::int32_t prefix_lens[] = {prefix}, seq_lens[] = {r.len};
            const VirtualToken last[] = {VirtualToken{}};
            if (!timed([&] { return cache_.alloc_extend({prefix_lens, seq_lens, last}, scratch_tokens_); })) {
                return restore_outcome::short_of_rows;
            }
            scratch_pages_.clear();
            for (std::size_t t = 0; t < scratch_tokens_.size(); t += static_cast<std::size_t>(page_))
                scratch_pages_.push_back(page_of(scratch_tokens_[t], {page_}));
            const bool copied = timed([&] {
                return cache_.restore(r.backup, {.own = scratch_pages_, .prefix_tokens = prefix, .seq_len = r.len});
            });
            if (!copied)
                throw std::runtime_error("unikv-sim: the restore of request " + std::to_string(r.index) + " failed");
            r.at = phase::decode;
            r.prefix = prefix;
            r.swa_cursor = prefix;
            r.computed_from = r.len;
            r.pages.assign(static_cast<std::size_t>(prefix / page_), VirtualPage{});
            r.pages.insert(r.pages.end(), scratch_pages_.begin(), scratch_pages_.end());
            prefix_pages(r, a.prefix_length);
            r.check_all = true;
            ++rec_.restored;
            return restore_outcome::restored;
        } else {
            (void)r;
            (void)a;
            return restore_outcome::recompute;
        }
    }

    // ---- decode and preemption ---------------------------------------------------------------------------

    void decode_alloc() {
        while (!decoding_.empty()) {
            seq_.clear();
            last_.clear();
            for (const std::int32_t i : decoding_) {
                const live_request& r = requests_[static_cast<std::size_t>(i)];
                seq_.push_back(r.len + 1);
                last_.push_back(token_at(r, r.len - 1));
            }
            out_.resize(decoding_.size());
            if (timed([&] { return cache_.alloc_decode({seq_, last_}, out_); })) break;
            preempt_newest();
        }
        for (std::size_t d = 0; d < decoding_.size(); ++d) {
            live_request& r = requests_[static_cast<std::size_t>(decoding_[d])];
            if (r.len % page_ == 0) r.pages.push_back(page_of(out_[d], {page_}));
            r.computed_from = r.len;
            ++r.len;
        }
        work_.decode_tokens = static_cast<std::int64_t>(decoding_.size());
    }

    // Preempts the decode request admitted last: retraction where the cache can, else abort-and-recompute.
    void preempt_newest() {
        const auto newest = std::max_element(decoding_.begin(), decoding_.end(), [&](std::int32_t x, std::int32_t y) {
            return requests_[static_cast<std::size_t>(x)].admit_order <
                   requests_[static_cast<std::size_t>(y)].admit_order;
        });
        const std::int32_t i = *newest;
        decoding_.erase(newest);
        running_.erase(std::find(running_.begin(), running_.end(), i));
        live_request& r = requests_[static_cast<std::size_t>(i)];
        const std::span<const VirtualPage> own =
            std::span<const VirtualPage>(r.pages).subspan(static_cast<std::size_t>(r.prefix / page_));
        bool retracted = false;
        if constexpr (cache_type::can_retract) {
            RetractionBackup b =
                timed([&] { return cache_.backup({.own = own, .prefix_tokens = r.prefix, .seq_len = r.len}); });
            if (b) {
                r.backup = std::move(b);
                r.backup_prefix = r.prefix;
                retracted = true;
            }
        }
        timed([&] {
            cache_.free(own);
            if constexpr (has_mamba) {
                const StateId s[] = {r.state};
                cache_.free_state(s);
            }
            cache_.unlock(std::move(r.lock));
        });
        if (!retracted) r.fill = r.len;  // abort: recompute every row it had
        r.state = StateId{};
        r.pages.clear();
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
            for (const std::int32_t i : admitted_) {
                live_request& r = requests_[static_cast<std::size_t>(i)];
                if (r.load_id == 0) continue;
                prefix_pages(r, r.prefix);
                r.load_id = 0;
            }
        }
        const RowMarkers<typename cache_type::allocator_type> rows(cache_.allocator());
        for (const std::int32_t i : admitted_) compute(requests_[static_cast<std::size_t>(i)], rows);
        for (const std::int32_t i : decoding_) compute(requests_[static_cast<std::size_t>(i)], rows);
        if (config_.check_rows && pages_moved) {
            for (const std::int32_t i : running_) check_all(requests_[static_cast<std::size_t>(i)], rows);
        }
    }

    // The forward of one request: reads what it attends to, writes the rows (and state) it computes.
    template <class Rows>
    void compute(live_request& r, const Rows& rows) {
        const std::int32_t from = r.computed_from;
        work_.context_tokens += r.len;
        if (!config_.check_rows) return;
        if (r.check_all || r.at == phase::prefill) {
            check_range(r, rows, 0, from);
            if constexpr (has_mamba) {
                if (from > 0 && r.at == phase::prefill) check_prefix_state(r, rows);
            }
            r.check_all = false;
        } else if (from > 0) {
            check_range(r, rows, from - 1, from);
            const std::int32_t rotating = static_cast<std::int32_t>(step_ % from);
            check_range(r, rows, rotating, rotating + 1);
            if constexpr (has_mamba) check_own_state(r, rows, from);
        }
        write_range(r, rows, from, r.len);
        if constexpr (has_mamba) write_own_state(r, rows, r.len);
    }

    template <class Rows>
    void check_all(const live_request& r, const Rows& rows) {
        check_range(r, rows, 0, r.len);
        if constexpr (has_mamba) check_own_state(r, rows, r.len);
    }

    // Reads FULL rows [from, to) and the SWA rows of them within the window of the sequence's end.
    template <class Rows>
    void check_range(const live_request& r, const Rows& rows, std::int32_t from, std::int32_t to) {
        if (from >= to) return;
        translate(r, from, to);
        for (std::int32_t p = from; p < to; ++p)
            rows.check_token(Component::full, physical_[static_cast<std::size_t>(p - from)],
                             marker(r, p, Component::full), r.index, p);
        if constexpr (has_swa) {
            const std::int32_t swa_from = std::max(from, r.computed_from - window_);
            if (swa_from >= to) return;
            translate_swa(r, swa_from, to);
            for (std::int32_t p = swa_from; p < to; ++p)
                rows.check_token(Component::swa, physical_[static_cast<std::size_t>(p - swa_from)],
                                 marker(r, p, Component::swa), r.index, p);
        }
    }

    template <class Rows>
    void write_range(const live_request& r, const Rows& rows, std::int32_t from, std::int32_t to) {
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

    void virtual_rows(const live_request& r, std::int32_t from, std::int32_t to) {
        virtual_.clear();
        for (std::int32_t p = from; p < to; ++p) virtual_.push_back(token_at(r, p));
        physical_.resize(virtual_.size());
    }
    void translate(const live_request& r, std::int32_t from, std::int32_t to) {
        virtual_rows(r, from, to);
        timed([&] { cache_.translate_full(virtual_, physical_); });
    }
    void translate_swa(const live_request& r, std::int32_t from, std::int32_t to) {
        if constexpr (has_swa) {
            virtual_rows(r, from, to);
            timed([&] { cache_.translate_swa(virtual_, physical_); });
        }
    }

    template <class Rows>
    void check_prefix_state(const live_request& r, const Rows& rows) {
        if constexpr (has_mamba) {
            const StateId s[] = {cache_.tree().node_info(r.node).state};
            PhysicalPage slot[1];
            timed([&] { cache_.translate_state(s, slot); });
            rows.check_state(slot[0], state_of(r, r.prefix), r.index, r.prefix);
        }
    }
    template <class Rows>
    void check_own_state(const live_request& r, const Rows& rows, std::int32_t len) {
        if constexpr (has_mamba) {
            const StateId s[] = {r.state};
            PhysicalPage slot[1];
            timed([&] { cache_.translate_state(s, slot); });
            rows.check_state(slot[0], state_of(r, len), r.index, len);
        }
    }
    template <class Rows>
    void write_own_state(const live_request& r, const Rows& rows, std::int32_t len) {
        if constexpr (has_mamba) {
            const StateId s[] = {r.state};
            PhysicalPage slot[1];
            timed([&] { cache_.translate_state(s, slot); });
            rows.write_state(slot[0], state_of(r, len));
        }
    }

    // ---- after the forward --------------------------------------------------------------------------------------

    void after_forward() {
        for (const std::int32_t i : admitted_) {
            live_request& r = requests_[static_cast<std::size_t>(i)];
            if (r.at == phase::prefill && !r.chunked) {
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
            live_request& r = requests_[static_cast<std::size_t>(i)];
            slide_window(r);
            if (r.at == phase::prefill) {  // a chunk: into the tree, locked, and wait for the next one
                if (chunked_) throw std::logic_error("unikv-sim: two chunked requests in one step");
                cache_chunk(r);
                chunked_ = i;
            } else if (r.len == r.target) {
                finish(r);
                finished_.push_back(i);
                ++rec_.finished;
            } else {
                ++k;
                continue;
            }
            running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(k));
        }
    }

    // Frees the SWA rows of the request's own pages that slid out of its window.
    void slide_window(live_request& r) {
        if constexpr (has_swa) {
            scratch_pages_.clear();
            while (r.swa_cursor + page_ <= r.len - window_) {
                scratch_pages_.push_back(r.pages[static_cast<std::size_t>(r.swa_cursor / page_)]);
                r.swa_cursor += page_;
            }
            if (!scratch_pages_.empty()) timed([&] { cache_.free_swa(scratch_pages_); });
        }
    }

    // Inserts the request's whole pages (with its state, the checkpoint at their end) and returns the node.
    NodeRef insert_pages(live_request& r) {
        const std::int32_t whole = r.len / page_;
        StateId state{};
        if constexpr (has_mamba) {
            if (config_.check_rows) {
                cache_.sync_for_host();  // frees since the forward may have queued moves of the slot
                const RowMarkers<typename cache_type::allocator_type> rows(cache_.allocator());
                write_own_state(r, rows, whole * page_);  // the forward checkpoints its state at the last page
            }
            state = std::exchange(r.state, StateId{});
        }
        const CacheInsert ins = timed([&] {
            return cache_.insert(key(r, whole * page_),
                                 {.pages = std::span<const VirtualPage>(r.pages).first(static_cast<std::size_t>(whole)),
                                  .swa_evicted = has_swa ? r.swa_cursor : 0,
                                  .state = state});
        });
        return ins.node;
    }

    // Mamba: a finished prefill caches its whole pages with a copy of its state at their end (the forward
    // checkpoints it there), so later requests sharing the prompt find a state to start from; the request
    // goes on from the cached prefix, as after a chunk. Skipped when no state slot is free.
    void checkpoint(live_request& r) {
        if constexpr (has_mamba) {
            const std::int32_t whole = r.len / page_ * page_;
            if (whole <= r.prefix) return;
            StateId slot[1];
            if (!timed([&] { return cache_.alloc_state(slot); })) return;
            if (config_.check_rows) {
                cache_.sync_for_host();  // the slot may have moved: write after the queued moves
                PhysicalPage physical[1];
                timed([&] { cache_.translate_state(slot, physical); });
                RowMarkers<typename cache_type::allocator_type>(cache_.allocator())
                    .write_state(physical[0], state_of(r, whole));
            }
            const CacheInsert ins = timed([&] {
                return cache_.insert(
                    key(r, whole),
                    {.pages = std::span<const VirtualPage>(r.pages).first(static_cast<std::size_t>(whole / page_)),
                     .swa_evicted = has_swa ? r.swa_cursor : 0,
                     .state = slot[0]});
            });
            relock(r, ins.node);
            r.prefix = whole;
            r.swa_cursor = std::max(r.swa_cursor, whole);
            prefix_pages(r, whole);  // the tree keeps its own pages where the request's duplicated them
        }
    }

    // Moves the request's lock to `node` (the end of what it just cached).
    void relock(live_request& r, NodeRef node) {
        LockReceipt held = timed([&] { return cache_.lock(node); });
        timed([&] { cache_.unlock(std::move(r.lock)); });
        r.lock = std::move(held);
        r.node = node;
    }

    void cache_chunk(live_request& r) {
        relock(r, insert_pages(r));
        r.prefix = r.len;
        r.pages.clear();
        r.at = phase::chunked;
    }

    void finish(live_request& r) {
        const std::size_t whole = static_cast<std::size_t>(r.len / page_);
        (void)insert_pages(r);
        timed([&] {
            cache_.free(std::span<const VirtualPage>(r.pages).subspan(whole));
            cache_.unlock(std::move(r.lock));
        });
    }

    const Trace& trace_;
    const ReplaySetup& setup_;
    const EngineConfig config_;
    const Cost& cost_;
    const std::function<void(const ReplayProgress&)>& progress_;
    backend_type backend_;
    decltype(std::declval<backend_type&>().make_stream()) compute_;
    cache_type cache_;
    const std::int32_t page_;
    const std::int32_t window_;

    std::vector<live_request> requests_;  // by trace index; reset when finished or dropped
    std::size_t next_arrival_ = 0;
    std::deque<std::int32_t> waiting_;     // FIFO; preempted requests go to the front
    std::optional<std::int32_t> chunked_;  // the request between two chunks (admitted first)
    std::vector<std::int32_t> running_;    // prefilled or decoding
    std::vector<std::int32_t> admitted_;   // admitted this step
    std::vector<std::int32_t> decoding_;   // decoding this step
    std::vector<std::int32_t> first_tokens_, finished_;
    std::uint64_t admissions_ = 0;
    std::int64_t step_ = 0;
    double clock_ = 0;
    StepRecord rec_{};
    StepWork work_{};
    ReplayResult result_{};
    // Scratch, reused every step.
    std::vector<VirtualToken> scratch_tokens_, last_, out_, virtual_;
    std::vector<VirtualPage> scratch_pages_;
    std::vector<std::int32_t> seq_;
    std::vector<PhysicalToken> physical_;
};

}  // namespace detail

template <class Policies, class Cost>
ReplayResult replay(const Trace& trace, const ReplaySetup& setup, const Cost& cost,
                    const std::function<void(const ReplayProgress&)>& progress) {
    return detail::engine<Policies, Cost>(trace, setup, cost, progress).run();
}

}  // namespace unikv::sim
