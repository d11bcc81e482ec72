#pragma once
/// \file
/// `HostBackend`: the embedded default backend. The "device" arena and host pools are ordinary host memory;
/// page-envelope copies are memcpy loops (measured faster than Thrust's CPP system, see bench/backend) run by
/// per-stream workers, so copies really happen later than they are queued and read their source when they
/// run. `ExecutionMode::manual` lets a test decide exactly when each queued operation executes, and in which
/// order the streams advance (`run_one`); `inject_copy_failure` makes a queued copy fail.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/execution_mode.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/host_engine.hpp>
#include <unikv/detail/backend/owned_buffer.hpp>
#include <unikv/detail/backend/owned_handle.hpp>
#include <unikv/error.hpp>

namespace unikv {

/// Runtime options of a `HostBackend`.
struct HostBackendOptions {
    ExecutionMode mode = ExecutionMode::asynchronous;
};

/// The host (CPU) backend. Move-only owner of its streams' workers; streams, events and buffers it hands out
/// must not outlive it.
class HostBackend : public detail::copy_entry_points<HostBackend> {
public:
    class event_ref;

    /// A non-owning handle to a stream: a FIFO of copies, event records and event waits.
    class stream_ref {
    public:
        stream_ref() = default;
        /// Queues a dependency: work queued on this stream after the call runs only after `e`'s latest record
        /// (at the time of the call) has executed. Never blocks the host. Counted in `stream_waits`.
        /// Throws `logic_error` for a handle of another backend or an empty handle.
        void wait(const event_ref& e) const;
        /// Blocks the host until everything queued before the call has executed. Counted in
        /// `host_synchronizations`. In manual mode it executes exactly that work, and the work it waits on.
        void synchronize() const {
            UNIKV_EXPECTS(engine_ != nullptr, "synchronize on an empty stream handle");
            engine_->synchronize(state_);
        }
        friend bool operator==(stream_ref, stream_ref) = default;

    private:
        friend class HostBackend;
        friend class event_ref;
        stream_ref(detail::host::engine* e, detail::host::stream_state* s) : engine_(e), state_(s) {}
        detail::host::engine* engine_ = nullptr;
        detail::host::stream_state* state_ = nullptr;
    };

    /// A non-owning handle to an event: marks a position in a stream.
    class event_ref {
    public:
        event_ref() = default;
        /// Marks the current end of `s`: the event completes once everything queued on `s` before it executed.
        /// Re-recording moves the mark (like `cudaEventRecord`).
        /// Throws `logic_error` for a stream of another backend or an empty handle.
        void record(stream_ref s) const {
            UNIKV_EXPECTS(engine_ != nullptr && s.engine_ == engine_, "record: the event and the stream must "
                          "come from the same HostBackend");
            engine_->enqueue(s.state_, {.kind = detail::host::op_kind::record, .event = state_});
        }
        /// True when the latest record has executed, or the event was never recorded. Never blocks.
        [[nodiscard]] bool query() const {
            UNIKV_EXPECTS(engine_ != nullptr, "query on an empty event handle");
            return engine_->query(*state_);
        }
        /// True when the latest record has executed behind a failed copy on its stream (see
        /// `inject_copy_failure`): the work it marks did not all happen, so nothing it covers may be committed.
        /// False while the record is pending, when it succeeded, or when never recorded; a new record clears
        /// it. Never blocks.
        [[nodiscard]] bool failed() const {
            UNIKV_EXPECTS(engine_ != nullptr, "failed on an empty event handle");
            return engine_->failed(*state_);
        }
        /// Blocks the host until the latest record executed. Counted in `host_synchronizations`. A failure is
        /// reported by `failed()`, not thrown.
        void synchronize() const {
            UNIKV_EXPECTS(engine_ != nullptr, "synchronize on an empty event handle");
            engine_->synchronize(*state_);
        }
        friend bool operator==(const event_ref&, const event_ref&) = default;

    private:
        friend class HostBackend;
        friend class stream_ref;
        event_ref(detail::host::engine* e, std::shared_ptr<detail::host::event_state> s)
            : engine_(e), state_(std::move(s)) {}
        detail::host::engine* engine_ = nullptr;
        std::shared_ptr<detail::host::event_state> state_;
    };

private:
    static void release_stream(const stream_ref& r) noexcept {
        if (r.state_ != nullptr) r.engine_->destroy_stream(r.state_);
    }

public:
    /// An owned stream; finishes its queued work when destroyed.
    class Stream : public detail::owned_handle<stream_ref, &HostBackend::release_stream> {
        friend class HostBackend;
        explicit Stream(stream_ref r) : owned_handle(r) {}
    };

    /// An owned event (move-only). Queued work that names it keeps its state alive after the owner is gone.
    class Event {
    public:
        Event(Event&&) noexcept = default;
        Event& operator=(Event&&) noexcept = default;
        Event(const Event&) = delete;
        Event& operator=(const Event&) = delete;
        [[nodiscard]] event_ref ref() const noexcept { return ref_; }
        operator event_ref() const noexcept { return ref_; }  // NOLINT: a handle converts to its view

    private:
        friend class HostBackend;
        explicit Event(event_ref r) : ref_(std::move(r)) {}
        event_ref ref_;
    };

private:
    static constexpr std::size_t small_alignment = 4096;
    static constexpr std::size_t huge_page = std::size_t{2} << 20;
    static void free_buffer(std::byte* p) noexcept { std::free(p); }
    // Zero-filled, 4 KiB aligned; 2 MiB aligned with transparent huge pages from 2 MiB up.
    static std::byte* allocate_zeroed(std::size_t bytes) {
        const std::size_t alignment = bytes >= huge_page ? huge_page : small_alignment;
        if (bytes > std::numeric_limits<std::size_t>::max() - alignment) {
            throw out_of_memory(detail::concat("unikv: HostBackend cannot allocate ", bytes, " bytes"));
        }
        const std::size_t rounded = bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
        auto* data = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded));
        if (data == nullptr) {
            throw out_of_memory(detail::concat("unikv: HostBackend could not allocate ", bytes, " bytes"));
        }
#if defined(__linux__)
        if (alignment == huge_page) ::madvise(data, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
        std::memset(data, 0, rounded);
        return data;
    }
    template <MemorySpace Space>
    using buffer_base = detail::owned_buffer<Space, &HostBackend::free_buffer>;

public:
    /// An owned, zero-filled byte buffer in memory space `Space` (both are host memory here), 4 KiB aligned;
    /// buffers of 2 MiB and more are 2 MiB aligned and ask Linux for transparent huge pages, so scattered
    /// page copies do not pay a TLB miss per envelope. Move-only; `region()` is typed by `Space`.
    template <MemorySpace Space>
    class Buffer : public buffer_base<Space> {
    public:
        Buffer() noexcept = default;

    private:
        friend class HostBackend;
        explicit Buffer(std::size_t bytes) : buffer_base<Space>(allocate_zeroed(bytes), bytes) {}
    };
    /// The buffer `allocate_device` returns (the arena).
    using DeviceBuffer = Buffer<MemorySpace::device>;
    /// The buffer `allocate_pinned` returns (host pools, staging).
    using PinnedBuffer = Buffer<MemorySpace::pinned_host>;

    explicit HostBackend(HostBackendOptions options = {})
        : engine_(std::make_unique<detail::host::engine>(options.mode)) {}
    /// Moving keeps every handle valid (they point at the engine, which does not move).
    HostBackend(HostBackend&&) noexcept = default;
    /// Not assignable: the replaced engine would leave its streams' owners dangling.
    HostBackend& operator=(HostBackend&&) = delete;

    /// The execution mode chosen at construction.
    [[nodiscard]] ExecutionMode mode() const noexcept { return engine_->mode(); }

    /// A zero-filled buffer playing the device arena. Throws `out_of_memory` on failure.
    [[nodiscard]] DeviceBuffer allocate_device(std::size_t bytes) { return DeviceBuffer(bytes); }
    /// A zero-filled buffer playing pinned host memory. Throws `out_of_memory` on failure.
    [[nodiscard]] PinnedBuffer allocate_pinned(std::size_t bytes) { return PinnedBuffer(bytes); }
    [[nodiscard]] Stream make_stream() { return Stream(stream_ref(engine_.get(), engine_->create_stream())); }
    [[nodiscard]] Event make_event() {
        return Event(event_ref(engine_.get(), std::make_shared<detail::host::event_state>()));
    }

    /// Queues setting every byte of the listed envelopes to `value` (zeroing pages on hand-out).
    /// Throws `logic_error` for a page outside the region. Asynchronous, no synchronization.
    template <MemorySpace S>
    void fill_pages_async(basic_region_ref<S> region, std::span<const std::int32_t> pages, std::size_t page_bytes,
                          std::byte value, stream_ref s) {
        check_stream("fill_pages_async", s);
        detail::validate_pages_in_region("fill_pages_async", detail::raw(region), pages, page_bytes, "fill");
        if (pages.empty()) return;
        engine_->enqueue(s.state_, {.kind = detail::host::op_kind::fill,
                                    .dst = detail::raw(region),
                                    .dst_pages = {pages.begin(), pages.end()},
                                    .page_bytes = page_bytes,
                                    .fill_value = value});
    }

    /// Synchronization, wait and copy counts since construction.
    [[nodiscard]] BackendCounters counters() const noexcept { return engine_->counters(); }

    /// Manual mode: executes the next queued operation of `s` if it can run now (a wait whose event has not
    /// completed blocks it). Returns false when `s` is empty or blocked. Throws `logic_error` in async mode.
    bool run_next(stream_ref s) {
        check_stream("run_next", s);
        return engine_->run_next(s.state_);
    }
    /// Manual mode: executes one operation chosen by the caller among the streams whose next operation can run
    /// now: the head of the `pick % r`-th of those `r` streams, in stream creation order. Each stream stays
    /// FIFO and waits still order across streams; a randomized test passes random picks to choose the
    /// completion order. Returns false (nothing ran) when no stream can run. Throws `logic_error` in async
    /// mode. O(streams), allocates nothing.
    bool run_one(std::size_t pick) { return engine_->run_one(pick); }
    /// Manual mode: executes everything that can run, round-robin over streams; returns the number executed.
    std::size_t run_all() { return engine_->run_all(); }
    /// Operations queued on `s` and not yet finished.
    [[nodiscard]] std::size_t queued(stream_ref s) const {
        check_stream("queued", s);
        return engine_->queued(s.state_);
    }

    /// The byte a failed copy writes over every byte it would have copied (whole envelopes or only the slice).
    static constexpr std::byte copy_failure_poison = detail::host::copy_failure_poison;

    /// Failure injection (tests, either mode): the next copy (`copy_pages_async` or `copy_page_slices_async`;
    /// fills do not count) queued on `s` after this call fails when it executes. It writes
    /// `copy_failure_poison` over its destination bytes instead of the source, so a caller that commits it
    /// serves wrong rows, and from then on every event record that executes on `s` reports `failed()`, until
    /// a `clear_copy_failure(s)` queued on `s` executes. Each call arms one more copy. Failures are per stream:
    /// a stream waiting on a failed event does not fail (check the event waited on).
    /// Throws `logic_error` for a stream of another backend.
    void inject_copy_failure(stream_ref s) {
        check_stream("inject_copy_failure", s);
        engine_->arm_copy_failure(s.state_);
    }
    /// Queues the end of `s`'s failure: records queued on `s` after this call report no failure (unless another
    /// injected copy fails before them). Asynchronous, like a record. Throws `logic_error` for a stream of
    /// another backend.
    void clear_copy_failure(stream_ref s) {
        check_stream("clear_copy_failure", s);
        engine_->enqueue(s.state_, {.kind = detail::host::op_kind::clear_failure});
    }

private:
    void check_stream(const char* call, stream_ref s) const {
        UNIKV_EXPECTS(s.engine_ == engine_.get(), call, ": the stream is empty or belongs to another HostBackend");
    }

    friend class detail::copy_entry_points<HostBackend>;  // forwards the typed copy calls to queue_copy

    void queue_copy(const detail::page_copy_request& r, stream_ref s) {
        check_stream(r.call, s);
        detail::validate(r);
        if (r.src_pages.empty()) return;
        engine_->enqueue(s.state_, {.kind = detail::host::op_kind::copy,
                                    .src = r.src,
                                    .dst = r.dst,
                                    .src_pages = {r.src_pages.begin(), r.src_pages.end()},
                                    .dst_pages = {r.dst_pages.begin(), r.dst_pages.end()},
                                    .page_bytes = r.page_bytes,
                                    .slice = r.slice});
    }

    std::unique_ptr<detail::host::engine> engine_;
};

inline void HostBackend::stream_ref::wait(const event_ref& e) const {
    UNIKV_EXPECTS(engine_ != nullptr && e.engine_ == engine_, "wait: the stream and the event must come from the "
                  "same HostBackend");
    engine_->enqueue(state_, {.kind = detail::host::op_kind::wait, .event = e.state_});
}

static_assert(detail::check_backend<HostBackend>() && Backend<HostBackend> && has_copy_failure_injection_v<HostBackend>);

}  // namespace unikv
