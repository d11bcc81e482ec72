#pragma once
/// \file
/// The execution engine behind `HostBackend`: per-stream FIFO queues of copies, event records and event
/// waits, executed either by one worker thread per stream (asynchronous mode) or only when a test says so
/// (manual mode). A copy reads its source bytes when it executes, never when it is queued. A test can make a
/// copy fail (`inject_copy_failure`): it then writes the poison byte instead of its source, and the records
/// that execute behind it on its stream report the failure.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <unikv/backend/counters.hpp>
#include <unikv/backend/execution_mode.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/atomic_counters.hpp>
#include <unikv/error.hpp>

namespace unikv::detail::host {

struct stream_state;

/// An event's records, guarded by the engine mutex. Generation `g` (the g-th record) is done once its record
/// executed; like CUDA, a query looks at the latest record only and a wait at the record current when the wait
/// was queued. Held by `shared_ptr` because queued operations on worker threads may outlive the owner.
struct event_state {
    std::uint64_t recorded = 0;
    std::map<std::uint64_t, stream_state*> pending;  // queued records: generation -> the stream it is queued on
    // The newest generation whose record executed behind a failed copy (0: none). A maximum, because records
    // of one event on two streams may execute out of generation order; only the latest generation is reported.
    std::uint64_t failed_generation = 0;
    // Threads blocked until a record of this event executes (host synchronizations, workers whose front is a
    // wait on it): a record notifies only when there is one, so a batch of records costs no wake-ups.
    std::size_t waiters = 0;

    [[nodiscard]] bool done(std::uint64_t generation) const { return !pending.contains(generation); }
    [[nodiscard]] bool failed() const { return recorded != 0 && done(recorded) && failed_generation == recorded; }
};

/// The byte a failed copy writes over every byte it would have copied, so rows committed from it are wrong.
inline constexpr std::byte copy_failure_poison{0xDB};

// clear_failure: ends the stream's failure for the records queued after it.
enum class op_kind { copy, fill, record, wait, clear_failure };

struct operation {
    op_kind kind = op_kind::copy;
    raw_region src{};
    raw_region dst{};
    std::vector<std::int32_t> src_pages{};
    std::vector<std::int32_t> dst_pages{};
    std::size_t page_bytes = 0;
    EnvelopeSlice slice{};
    std::byte fill_value{};
    std::shared_ptr<event_state> event{};
    std::uint64_t generation = 0;  // record: the generation it completes; wait: the generation it waits for
    bool fail = false;             // copy: injected failure, writes `copy_failure_poison` instead of the source

    // copy: the bytes it moves (what a stream's burst counts).
    [[nodiscard]] std::size_t copy_bytes() const noexcept {
        return kind == op_kind::copy ? src_pages.size() * slice.bytes * slice.count : 0;
    }
};

struct stream_state {
    std::deque<operation> queue;
    std::uint64_t enqueued = 0;  // operations ever queued
    std::uint64_t executed = 0;  // operations finished; a synchronize waits for `executed >= enqueued` as of its call
    bool busy = false;           // the worker popped an operation and is executing it
    bool stopping = false;
    std::size_t failures_armed = 0;  // copies queued from now on that will fail (inject_copy_failure)
    bool failed = false;  // a failed copy executed and no clear_failure since: records executing now report it
    // The burst that decides a copy's stores (`streaming_copy_threshold`): bytes of the copies executed since
    // the queue was last empty, and of those queued and not yet executed.
    std::size_t burst_bytes = 0;
    std::size_t queued_copy_bytes = 0;
    std::size_t sync_waiters = 0;  // host threads in synchronize(stream): every executed operation may end their wait
    std::thread worker;
};

class engine {
public:
    explicit engine(ExecutionMode mode) : mode_(mode) {}
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;
    ~engine() {
        while (!streams_.empty()) destroy_stream(&streams_.front());
    }

    [[nodiscard]] ExecutionMode mode() const noexcept { return mode_; }

    stream_state* create_stream() {
        std::lock_guard lk(m_);
        stream_state& s = streams_.emplace_back();
        if (mode_ == ExecutionMode::asynchronous) s.worker = std::thread([this, &s] { worker_loop(s); });
        return &s;
    }

    /// Finishes everything queued on the stream (manual mode: runs it, and what it waits for), stops its
    /// worker and forgets it.
    void destroy_stream(stream_state* s) noexcept {
        {
            std::unique_lock lk(m_);
            if (mode_ == ExecutionMode::manual) drive(s, goal{.stream = s, .executed = s->enqueued}, lk);
            s->stopping = true;
        }
        cv_.notify_all();
        if (s->worker.joinable()) s->worker.join();
        std::lock_guard lk(m_);
        streams_.remove_if([s](const stream_state& x) { return &x == s; });
    }

    void enqueue(stream_state* s, operation op) {
        bool was_empty = false;
        {
            std::lock_guard lk(m_);
            switch (op.kind) {
                case op_kind::record:
                    op.generation = ++op.event->recorded;
                    op.event->pending.emplace(op.generation, s);
                    break;
                case op_kind::wait:
                    op.generation = op.event->recorded;
                    counters_.stream_waits.fetch_add(1, std::memory_order_relaxed);
                    break;
                case op_kind::copy:
                    if (s->failures_armed != 0) {
                        op.fail = true;
                        --s->failures_armed;
                    }
                    counters_.copies_queued.fetch_add(1, std::memory_order_relaxed);
                    s->queued_copy_bytes += op.copy_bytes();
                    break;
                case op_kind::fill:
                    counters_.copies_queued.fetch_add(1, std::memory_order_relaxed);
                    break;
                case op_kind::clear_failure:
                    break;
            }
            was_empty = s->queue.empty();
            s->queue.push_back(std::move(op));
            ++s->enqueued;
        }
        // Only a worker idle on an empty queue waits for new work; one blocked on a wait at its front waits for
        // a record, which notifies when it executes.
        if (was_empty) cv_.notify_all();
    }

    [[nodiscard]] bool query(const event_state& e) {
        std::lock_guard lk(m_);
        return e.done(e.recorded);
    }

    [[nodiscard]] bool failed(const event_state& e) {
        std::lock_guard lk(m_);
        return e.failed();
    }

    /// One more of the copies queued on the stream from now on fails when it executes.
    void arm_copy_failure(stream_state* s) {
        std::lock_guard lk(m_);
        ++s->failures_armed;
    }

    /// Host block until the event's latest record executed. Manual mode runs exactly the work it depends on.
    void synchronize(event_state& e) {
        counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
        std::unique_lock lk(m_);
        const goal g{.event = &e, .generation = e.recorded};
        if (mode_ == ExecutionMode::manual) {
            if (!g.reached()) drive(e.pending.at(g.generation), g, lk);
        } else if (!g.reached()) {
            ++e.waiters;
            cv_.wait(lk, [&g] { return g.reached(); });
            --e.waiters;
        }
    }

    /// Host block until everything queued on the stream before the call executed.
    void synchronize(stream_state* s) {
        counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
        std::unique_lock lk(m_);
        const goal g{.stream = s, .executed = s->enqueued};
        if (mode_ == ExecutionMode::manual) {
            drive(s, g, lk);
        } else if (!g.reached()) {
            ++s->sync_waiters;
            cv_.wait(lk, [&g] { return g.reached(); });
            --s->sync_waiters;
        }
    }

    /// Manual mode: executes the stream's next operation if it can run now; false when empty or blocked.
    bool run_next(stream_state* s) {
        UNIKV_EXPECTS(mode_ == ExecutionMode::manual, "run_next: the backend is not in manual mode");
        std::unique_lock lk(m_);
        if (s->queue.empty() || !runnable(s->queue.front())) return false;
        execute_front(*s, lk);
        return true;
    }

    /// Manual mode: executes the head of the `pick % r`-th of the `r` streams (creation order) whose head can run
    /// now; false when none can. O(streams).
    bool run_one(std::size_t pick) {
        UNIKV_EXPECTS(mode_ == ExecutionMode::manual, "run_one: the backend is not in manual mode");
        std::unique_lock lk(m_);
        const auto can_run = [](const stream_state& s) { return !s.queue.empty() && runnable(s.queue.front()); };
        std::size_t runnable_heads = 0;
        for (const stream_state& s : streams_) runnable_heads += can_run(s) ? 1 : 0;
        if (runnable_heads == 0) return false;
        std::size_t skip = pick % runnable_heads;
        for (stream_state& s : streams_) {
            if (!can_run(s)) continue;
            if (skip-- == 0) {
                execute_front(s, lk);
                break;
            }
        }
        return true;
    }

    /// Manual mode: executes operations round-robin over all streams until none can run; returns how many ran.
    std::size_t run_all() {
        UNIKV_EXPECTS(mode_ == ExecutionMode::manual, "run_all: the backend is not in manual mode");
        std::unique_lock lk(m_);
        std::size_t ran = 0;
        for (bool progressed = true; progressed;) {
            progressed = false;
            for (stream_state& s : streams_) {
                if (!s.queue.empty() && runnable(s.queue.front())) {
                    execute_front(s, lk);
                    progressed = true;
                    ++ran;
                }
            }
        }
        return ran;
    }

    [[nodiscard]] std::size_t queued(const stream_state* s) {
        std::lock_guard lk(m_);
        return s->queue.size() + (s->busy ? 1 : 0);
    }

    [[nodiscard]] BackendCounters counters() const noexcept {
        return counters_.snapshot();
    }

private:
    [[nodiscard]] static bool runnable(const operation& op) {
        return op.kind != op_kind::wait || op.event->done(op.generation);
    }

    // Pops and executes the front operation of `s`; `lk` is held on entry and on exit but not during the copy.
    // A copy streams its stores when the stream's burst, itself included, reaches `streaming_copy_threshold`.
    void execute_front(stream_state& s, std::unique_lock<std::mutex>& lk) {
        operation op = std::move(s.queue.front());
        s.queue.pop_front();
        s.busy = true;
        const std::size_t own = op.copy_bytes();
        const CopyStores stores =
            s.burst_bytes + s.queued_copy_bytes >= streaming_copy_threshold ? CopyStores::streaming : CopyStores::cached;
        s.queued_copy_bytes -= own;
        s.burst_bytes += own;
        lk.unlock();
        std::size_t bytes = 0;
        if (op.kind == op_kind::copy && op.fail) {
            poison_slices(op.dst, op.dst_pages, op.page_bytes, op.slice);
        } else if (op.kind == op_kind::copy) {
            copy_pages_host(op.src, op.src_pages, op.dst, op.dst_pages, op.page_bytes, op.slice, stores);
            bytes = own;
        } else if (op.kind == op_kind::fill) {
            fill_pages_host(op.dst, op.dst_pages, op.page_bytes, op.fill_value);
            bytes = op.dst_pages.size() * op.page_bytes;
        }
        counters_.bytes_copied.fetch_add(bytes, std::memory_order_relaxed);
        if (stores == CopyStores::streaming) counters_.bytes_streamed.fetch_add(bytes, std::memory_order_relaxed);
        lk.lock();
        if (op.kind == op_kind::record) {
            op.event->pending.erase(op.generation);
            if (s.failed) op.event->failed_generation = std::max(op.event->failed_generation, op.generation);
        }
        if (op.fail) s.failed = true;
        if (op.kind == op_kind::clear_failure) s.failed = false;
        s.busy = false;
        ++s.executed;
        if (s.queue.empty()) s.burst_bytes = 0;
        // Wake only who this operation can release: a waiter on the event it recorded, or a stream synchronizer.
        if ((op.kind == op_kind::record && op.event->waiters != 0) || s.sync_waiters != 0) cv_.notify_all();
    }

    // What an injected failure writes: the poison byte over exactly the bytes the copy would have written.
    static void poison_slices(raw_region dst, const std::vector<std::int32_t>& pages, std::size_t page_bytes,
                              const EnvelopeSlice& slice) noexcept {
        for (std::int32_t p : pages) {
            std::byte* d = dst.data + static_cast<std::size_t>(p) * page_bytes + slice.offset;
            for (std::size_t r = 0; r < slice.count; ++r) std::fill_n(d + r * slice.stride, slice.bytes, copy_failure_poison);
        }
    }

    // What `drive` runs toward: a stream having executed `executed` operations, or an event generation done.
    struct goal {
        const stream_state* stream = nullptr;
        std::uint64_t executed = 0;
        const event_state* event = nullptr;
        std::uint64_t generation = 0;

        [[nodiscard]] bool reached() const {
            return event != nullptr ? event->done(generation) : stream->executed >= executed;
        }
    };

    // Manual mode: executes `s` in order until `g` is reached. A wait at the front first drives the stream that
    // holds the awaited record, and only that far. Waits bind to records queued before them, so the streams
    // form a DAG and the recursion ends.
    void drive(stream_state* s, goal g, std::unique_lock<std::mutex>& lk) {
        while (!g.reached()) {
            UNIKV_ASSERT(!s->queue.empty());
            const operation& front = s->queue.front();
            if (runnable(front)) {
                execute_front(*s, lk);
                continue;
            }
            const std::shared_ptr<event_state> awaited = front.event;  // keeps the state alive while driving
            drive(awaited->pending.at(front.generation),
                  goal{.event = awaited.get(), .generation = front.generation}, lk);
        }
    }

    void worker_loop(stream_state& s) {
        std::unique_lock lk(m_);
        const auto ready = [&s] { return (!s.queue.empty() && runnable(s.queue.front())) || (s.stopping && s.queue.empty()); };
        for (;;) {
            if (ready()) {
                if (s.queue.empty()) return;  // stopping, and everything queued has executed
                execute_front(s, lk);
                continue;
            }
            // Not ready: the queue is empty (an enqueue notifies), or a wait at its front is blocked; that one
            // registers on its event, whose record then notifies. Re-examined after every wake-up, since the
            // front may have become a wait while this thread slept.
            const std::shared_ptr<event_state> awaited = s.queue.empty() ? nullptr : s.queue.front().event;
            if (awaited) ++awaited->waiters;
            cv_.wait(lk);
            if (awaited) --awaited->waiters;
        }
    }

    ExecutionMode mode_;
    std::mutex m_;
    std::condition_variable cv_;
    std::list<stream_state> streams_;
    atomic_counters counters_;
};

}  // namespace unikv::detail::host
