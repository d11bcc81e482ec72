#pragma once
/// \file
/// The execution engine behind `HostBackend`: per-stream FIFO queues of copies, event records and event
/// waits, executed either by one worker thread per stream (asynchronous mode) or only when a test says so
/// (manual mode). A copy reads its source bytes when it executes, never when it is queued.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <unikv/backend/counters.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/error.hpp>

namespace unikv {

/// How a `HostBackend` executes queued work.
enum class ExecutionMode {
    /// A worker thread per stream executes its queue in order, like a GPU would.
    asynchronous,
    /// Nothing executes until the test calls `run_next`, `run_all`, or a host synchronization needs it.
    manual,
};

namespace detail::host {

/// An event's records: generation `g` is "done" once no queued record of it remains.
/// Guarded by the engine mutex. Shared by the owner and by queued operations that name it.
struct event_state {
    std::uint64_t recorded = 0;
    std::set<std::uint64_t> pending;  // generations recorded but not yet executed

    [[nodiscard]] bool done(std::uint64_t generation) const { return pending.empty() || *pending.begin() > generation; }
};

enum class op_kind { copy, fill, record, wait };

struct operation {
    op_kind kind = op_kind::copy;
    region_ref src{};
    region_ref dst{};
    std::vector<std::int32_t> src_pages{};
    std::vector<std::int32_t> dst_pages{};
    std::size_t page_bytes = 0;
    EnvelopeSlice slice{};
    std::byte fill_value{};
    std::shared_ptr<event_state> event{};
    std::uint64_t generation = 0;
};

struct stream_state {
    std::deque<operation> queue;
    bool busy = false;  // the worker popped an operation and is executing it
    bool stopping = false;
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

    /// Finishes everything queued on the stream, stops its worker and forgets it.
    void destroy_stream(stream_state* s) noexcept {
        if (mode_ == ExecutionMode::manual) {
            [[maybe_unused]] const bool finished = run_until([s] { return s->queue.empty(); });
            UNIKV_ASSERT(finished);
        }
        {
            std::lock_guard lk(m_);
            s->stopping = true;
        }
        cv_.notify_all();
        if (s->worker.joinable()) s->worker.join();
        std::lock_guard lk(m_);
        streams_.remove_if([s](const stream_state& x) { return &x == s; });
    }

    void enqueue(stream_state* s, operation op) {
        {
            std::lock_guard lk(m_);
            switch (op.kind) {
                case op_kind::record:
                    op.generation = ++op.event->recorded;
                    op.event->pending.insert(op.generation);
                    break;
                case op_kind::wait:
                    op.generation = op.event->recorded;
                    counters_.stream_waits.fetch_add(1, std::memory_order_relaxed);
                    break;
                default:
                    counters_.copies_queued.fetch_add(1, std::memory_order_relaxed);
            }
            s->queue.push_back(std::move(op));
        }
        cv_.notify_all();
    }

    [[nodiscard]] bool query(const event_state& e) {
        std::lock_guard lk(m_);
        return e.done(e.recorded);
    }

    /// Host block until the event's latest record executed. Manual mode runs queued work to get there.
    void synchronize(const event_state& e) {
        counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
        const std::uint64_t generation = [&] {
            std::lock_guard lk(m_);
            return e.recorded;
        }();
        wait_or_run([&e, generation] { return e.done(generation); });
    }

    /// Host block until everything queued on the stream so far executed.
    void synchronize(stream_state* s) {
        counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
        wait_or_run([s] { return s->queue.empty() && !s->busy; });
    }

    /// Manual mode: executes the stream's next operation if it can run now; false when empty or blocked.
    bool run_next(stream_state* s) {
        UNIKV_EXPECTS(mode_ == ExecutionMode::manual, "run_next: the backend is not in manual mode");
        std::unique_lock lk(m_);
        if (s->queue.empty() || !runnable(s->queue.front())) return false;
        execute_front(*s, lk);
        return true;
    }

    /// Manual mode: executes operations round-robin over all streams until none can run; returns how many ran.
    std::size_t run_all() {
        UNIKV_EXPECTS(mode_ == ExecutionMode::manual, "run_all: the backend is not in manual mode");
        std::size_t ran = 0;
        (void)run_until([] { return false; }, &ran);
        return ran;
    }

    [[nodiscard]] std::size_t queued(const stream_state* s) {
        std::lock_guard lk(m_);
        return s->queue.size() + (s->busy ? 1 : 0);
    }

    [[nodiscard]] BackendCounters counters() const noexcept {
        return {counters_.host_synchronizations.load(), counters_.stream_waits.load(),
                counters_.copies_queued.load(), counters_.bytes_copied.load()};
    }

private:
    struct atomic_counters {
        std::atomic<std::uint64_t> host_synchronizations{0};
        std::atomic<std::uint64_t> stream_waits{0};
        std::atomic<std::uint64_t> copies_queued{0};
        std::atomic<std::uint64_t> bytes_copied{0};
    };

    [[nodiscard]] static bool runnable(const operation& op) {
        return op.kind != op_kind::wait || op.event->done(op.generation);
    }

    // Pops and executes the front operation of `s`; `lk` is held on entry and on exit but not during the copy.
    void execute_front(stream_state& s, std::unique_lock<std::mutex>& lk) {
        operation op = std::move(s.queue.front());
        s.queue.pop_front();
        s.busy = true;
        lk.unlock();
        std::size_t bytes = 0;
        if (op.kind == op_kind::copy) {
            copy_pages_host(op.src, op.src_pages, op.dst, op.dst_pages, op.page_bytes, op.slice);
            bytes = op.src_pages.size() * (op.slice.is_whole() ? op.page_bytes : op.slice.bytes * op.slice.count);
        } else if (op.kind == op_kind::fill) {
            fill_pages_host(op.dst, op.dst_pages, op.page_bytes, op.fill_value);
            bytes = op.dst_pages.size() * op.page_bytes;
        }
        counters_.bytes_copied.fetch_add(bytes, std::memory_order_relaxed);
        lk.lock();
        if (op.kind == op_kind::record) op.event->pending.erase(op.generation);
        s.busy = false;
        cv_.notify_all();
    }

    void worker_loop(stream_state& s) {
        std::unique_lock lk(m_);
        for (;;) {
            cv_.wait(lk, [&s] { return (!s.queue.empty() && runnable(s.queue.front())) || (s.stopping && s.queue.empty()); });
            if (s.queue.empty()) return;  // stopping, and everything queued has executed
            execute_front(s, lk);
        }
    }

    // Manual mode: runs queued work round-robin until `done()` holds; false when nothing can run any more.
    template <class Done>
    bool run_until(Done done, std::size_t* ran = nullptr) noexcept {
        std::unique_lock lk(m_);
        while (!done()) {
            bool progressed = false;
            for (stream_state& s : streams_) {
                if (!s.queue.empty() && runnable(s.queue.front())) {
                    execute_front(s, lk);
                    progressed = true;
                    if (ran) ++*ran;
                }
            }
            if (!progressed) return false;
        }
        return true;
    }

    template <class Done>
    void wait_or_run(Done done) {
        if (mode_ == ExecutionMode::manual) {
            // Waits bind to records queued before them, so the queues form a DAG and everything can run.
            [[maybe_unused]] const bool finished = run_until(done);
            UNIKV_ASSERT(finished);
            return;
        }
        std::unique_lock lk(m_);
        cv_.wait(lk, done);
    }

    ExecutionMode mode_;
    std::mutex m_;
    std::condition_variable cv_;
    std::list<stream_state> streams_;
    atomic_counters counters_;
};

}  // namespace detail::host
}  // namespace unikv
