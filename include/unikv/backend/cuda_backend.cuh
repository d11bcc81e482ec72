#pragma once
/// \file
/// `CudaBackend`: the device backend. `cudaMalloc` arena, pinned host pools, CUDA streams and events, and
/// page-envelope copies through a copy-engine policy (`copy_engines.cuh`). Same API as `HostBackend`;
/// everything here is asynchronous on the given stream and never synchronizes the host, except where a doc
/// comment says so.

#if !defined(__CUDACC__)
#error "unikv: cuda_backend.cuh needs nvcc (a .cu translation unit); host-only code includes unikv/backend/default_backend.hpp or unikv/backend/host_backend.hpp"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/copy_engines.cuh>
#include <unikv/backend/counters.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/cuda_check.cuh>
#include <unikv/detail/backend/cuda_copy_engines.cuh>
#include <unikv/detail/backend/cuda_kernels.cuh>
#include <unikv/detail/backend/owned_buffer.hpp>
#include <unikv/detail/backend/owned_handle.hpp>
#include <unikv/error.hpp>

namespace unikv {

/// The CUDA backend, its page copies done by `Engine` (`DefaultCopyEngine`, `KernelCopyEngine`,
/// `MemcpyBatchCopyEngine`, `CubBatchedCopyEngine`, or one per direction). Move-only; streams, events and
/// buffers it hands out must not outlive it.
///
/// Page copies (`copy_pages_async`, `copy_page_slices_async`, any pair of memory spaces) validate on the host and
/// throw `logic_error` before queuing anything. With an engine that reads page indices on the device (the
/// kernel, CUB) they never synchronize the host unless the index ring (4 MiB of indices, or 1024 lists) is full
/// of lists still in flight, and they are not capturable in a CUDA graph (the ring is reused).
template <class Engine = DefaultCopyEngine>
class BasicCudaBackend : public detail::copy_entry_points<BasicCudaBackend<Engine>> {
    static_assert(is_copy_engine_v<Engine>, "unikv: BasicCudaBackend<Engine> needs a copy engine (a tag whose `impl` "
                  "is constructible from the backend's resources and has copy(request, stream)); use "
                  "DefaultCopyEngine, KernelCopyEngine, MemcpyBatchCopyEngine or CubBatchedCopyEngine");

public:
    class event_ref;

    /// A non-owning handle to a CUDA stream.
    class stream_ref {
    public:
        stream_ref() = default;
        /// `cudaStreamWaitEvent`: later work on this stream runs after `e`'s latest record. Never blocks the
        /// host. Counted in `stream_waits`.
        void wait(event_ref e) const;
        /// `cudaStreamSynchronize`: blocks the host. Counted in `host_synchronizations`.
        void synchronize() const {
            UNIKV_EXPECTS(state_ != nullptr, "synchronize on an empty stream handle");
            state_->counters.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
            detail::cuda::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
        }
        [[nodiscard]] cudaStream_t native() const noexcept { return stream_; }
        friend bool operator==(stream_ref, stream_ref) = default;

    private:
        friend class BasicCudaBackend;
        friend class event_ref;
        stream_ref(detail::cuda::resources* st, cudaStream_t s) : state_(st), stream_(s) {}
        detail::cuda::resources* state_ = nullptr;
        cudaStream_t stream_ = nullptr;
    };

    /// A non-owning handle to a CUDA event (timing disabled).
    class event_ref {
    public:
        event_ref() = default;
        /// `cudaEventRecord` on `s`.
        void record(stream_ref s) const {
            UNIKV_EXPECTS(state_ != nullptr && s.state_ == state_, "record: the event and the stream must come "
                          "from the same CudaBackend");
            detail::cuda::check(cudaEventRecord(event_, s.stream_), "cudaEventRecord");
        }
        /// `cudaEventQuery`: true when the latest record completed (or the event was never recorded), also when
        /// the work failed (then `failed()` says so). Throws `cuda_error` for a handle CUDA rejects.
        [[nodiscard]] bool query() const {
            UNIKV_EXPECTS(state_ != nullptr, "query on an empty event handle");
            const cudaError_t status = cudaEventQuery(event_);
            if (status == cudaErrorNotReady) return false;
            detail::cuda::check_unless_async_failure(status, "cudaEventQuery");
            return true;
        }
        /// True when `cudaEventQuery` reports an asynchronous error (a faulted copy or kernel): the work behind
        /// the record cannot be trusted. CUDA errors of that kind are sticky for the whole context, so every
        /// event reports it from then on, and later CUDA calls throw `cuda_error`. Never blocks.
        [[nodiscard]] bool failed() const {
            UNIKV_EXPECTS(state_ != nullptr, "failed on an empty event handle");
            const cudaError_t status = cudaEventQuery(event_);
            if (status == cudaErrorNotReady) return false;
            detail::cuda::check_unless_async_failure(status, "cudaEventQuery");
            return status != cudaSuccess;
        }
        /// `cudaEventSynchronize`: blocks the host. Counted in `host_synchronizations`. An asynchronous error
        /// of the awaited work is reported by `failed()`, not thrown (as on `HostBackend`).
        void synchronize() const {
            UNIKV_EXPECTS(state_ != nullptr, "synchronize on an empty event handle");
            state_->counters.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
            detail::cuda::check_unless_async_failure(cudaEventSynchronize(event_), "cudaEventSynchronize");
        }
        [[nodiscard]] cudaEvent_t native() const noexcept { return event_; }
        friend bool operator==(event_ref, event_ref) = default;

    private:
        friend class BasicCudaBackend;
        friend class stream_ref;
        event_ref(detail::cuda::resources* st, cudaEvent_t e) : state_(st), event_(e) {}
        detail::cuda::resources* state_ = nullptr;
        cudaEvent_t event_ = nullptr;
    };

private:
    static void release_stream(const stream_ref& r) noexcept {
        if (r.stream_ == nullptr) return;
        cudaStreamSynchronize(r.stream_);  // finish queued work, like HostBackend's streams
        cudaStreamDestroy(r.stream_);
    }
    static void release_event(const event_ref& r) noexcept {
        if (r.event_ != nullptr) cudaEventDestroy(r.event_);  // CUDA defers it past pending records
    }

public:
    /// An owned non-blocking stream; synchronized and destroyed with the owner.
    class Stream : public detail::owned_handle<stream_ref, &BasicCudaBackend::release_stream> {
        friend class BasicCudaBackend;
        explicit Stream(stream_ref r) : detail::owned_handle<stream_ref, &BasicCudaBackend::release_stream>(r) {}
    };

    /// An owned event.
    class Event : public detail::owned_handle<event_ref, &BasicCudaBackend::release_event> {
        friend class BasicCudaBackend;
        explicit Event(event_ref r) : detail::owned_handle<event_ref, &BasicCudaBackend::release_event>(r) {}
    };

private:
    static void free_device(std::byte* p) noexcept { cudaFree(p); }
    static void free_pinned(std::byte* p) noexcept { cudaFreeHost(p); }
    template <MemorySpace Space>
    using buffer_base = detail::owned_buffer<Space, Space == MemorySpace::device ? &BasicCudaBackend::free_device
                                                                                 : &BasicCudaBackend::free_pinned>;

public:
    /// An owned, zero-filled buffer in memory space `Space`: device memory (`cudaMalloc`) or pinned host
    /// memory (`cudaHostAlloc`). Move-only; `region()` is typed by `Space`.
    template <MemorySpace Space>
    class Buffer : public buffer_base<Space> {
    public:
        Buffer() noexcept = default;

    private:
        friend class BasicCudaBackend;
        Buffer(std::byte* d, std::size_t n) noexcept : buffer_base<Space>(d, n) {}
    };
    /// The buffer `allocate_device` returns.
    using DeviceBuffer = Buffer<MemorySpace::device>;
    /// The buffer `allocate_pinned` returns.
    using PinnedBuffer = Buffer<MemorySpace::pinned_host>;

    /// Uses the current CUDA device.
    BasicCudaBackend() : state_(std::make_unique<state>()) {
        int device = 0;
        detail::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
        detail::cuda::check(cudaDeviceGetAttribute(&state_->sm_count, cudaDevAttrMultiProcessorCount, device),
                            "cudaDeviceGetAttribute");
    }
    /// Moving keeps every handle valid (they point at the state, which does not move).
    BasicCudaBackend(BasicCudaBackend&&) noexcept = default;
    /// Not assignable: the replaced state would leave its handles dangling.
    BasicCudaBackend& operator=(BasicCudaBackend&&) = delete;

    /// Zero-filled device memory. Synchronous (setup time). Throws `out_of_memory` when the device is full.
    [[nodiscard]] DeviceBuffer allocate_device(std::size_t bytes) {
        void* p = nullptr;
        const cudaError_t status = cudaMalloc(&p, bytes);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            throw out_of_memory(detail::concat("unikv: cudaMalloc of ", bytes, " bytes failed"));
        }
        detail::cuda::check(status, "cudaMalloc");
        detail::cuda::check(cudaMemset(p, 0, bytes), "cudaMemset");
        // cudaMemset runs on the legacy stream, which our non-blocking streams do not order after: finish it.
        detail::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(after zero fill)");
        return DeviceBuffer(static_cast<std::byte*>(p), bytes);
    }

    /// Zero-filled pinned host memory. Throws `out_of_memory` on failure.
    [[nodiscard]] PinnedBuffer allocate_pinned(std::size_t bytes) {
        void* p = nullptr;
        const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            throw out_of_memory(detail::concat("unikv: cudaHostAlloc of ", bytes, " bytes failed"));
        }
        detail::cuda::check(status, "cudaHostAlloc");
        std::memset(p, 0, bytes);
        return PinnedBuffer(static_cast<std::byte*>(p), bytes);
    }

    [[nodiscard]] Stream make_stream() {
        cudaStream_t s = nullptr;
        detail::cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        return Stream(stream_ref(state_.get(), s));
    }
    [[nodiscard]] Event make_event() {
        cudaEvent_t e = nullptr;
        detail::cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        return Event(event_ref(state_.get(), e));
    }

    /// Queues setting every byte of the listed envelopes to `value` on `s`.
    template <MemorySpace S>
    void fill_pages_async(basic_region_ref<S> region, std::span<const std::int32_t> pages, std::size_t page_bytes,
                          std::byte value, stream_ref s) {
        check_stream("fill_pages_async", s);
        detail::validate_pages_in_region("fill_pages_async", detail::raw(region), pages, page_bytes, "fill");
        if (pages.empty()) return;
        state_->counters.copies_queued.fetch_add(1, std::memory_order_relaxed);
        state_->counters.bytes_copied.fetch_add(pages.size() * page_bytes, std::memory_order_relaxed);
        state_->staging.stage(pages, {}, s.stream_, [&](const std::int32_t* p, const std::int32_t*, std::size_t n) {
            detail::cuda::fill_pages_kernel<<<state_->grid_for(n), 256, 0, s.stream_>>>(region.data, p, n, page_bytes,
                                                                                          value);
        });
    }

    /// Synchronization, wait and copy counts since construction (`bytes_copied` counts queued bytes).
    [[nodiscard]] BackendCounters counters() const noexcept {
        return state_->counters.snapshot();
    }

private:
    void check_stream(const char* call, stream_ref s) const {
        UNIKV_EXPECTS(s.state_ == state_.get(), call, ": the stream is empty or belongs to another CudaBackend");
    }

    friend class detail::copy_entry_points<BasicCudaBackend>;  // forwards the typed copy calls to queue_copy

    // The resources, and the engine built on them (it may keep a reference: both live on the heap).
    struct state : detail::cuda::resources {
        typename Engine::impl engine{static_cast<detail::cuda::resources&>(*this)};
    };

    void queue_copy(const detail::page_copy_request& r, stream_ref s) {
        check_stream(r.call, s);
        detail::validate(r);
        if (r.src_pages.empty()) return;
        state_->counters.copies_queued.fetch_add(1, std::memory_order_relaxed);
        state_->counters.bytes_copied.fetch_add(r.src_pages.size() * r.slice.bytes * r.slice.count,
                                                std::memory_order_relaxed);
        state_->engine.copy(r, s.stream_);
    }

    std::unique_ptr<state> state_;
};

template <class Engine>
inline void BasicCudaBackend<Engine>::stream_ref::wait(event_ref e) const {
    UNIKV_EXPECTS(state_ != nullptr && e.state_ == state_, "wait: the stream and the event must come from the "
                  "same CudaBackend");
    state_->counters.stream_waits.fetch_add(1, std::memory_order_relaxed);
    detail::cuda::check(cudaStreamWaitEvent(stream_, e.event_, 0), "cudaStreamWaitEvent");
}

/// The CUDA backend with the default copy engines (`DefaultCopyEngine`).
using CudaBackend = BasicCudaBackend<>;

static_assert(detail::check_backend<CudaBackend>() && Backend<CudaBackend>);

}  // namespace unikv
