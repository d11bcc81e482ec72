#pragma once
/// \file
/// `CudaBackend`: the device backend. `cudaMalloc` arena, pinned host pools, CUDA streams and events, and a
/// page-envelope copy kernel. Same API as `HostBackend`; everything here is asynchronous on the given stream
/// and never synchronizes the host, except where a doc comment says so.

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
#include <unikv/backend/counters.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/atomic_counters.hpp>
#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/cuda_check.cuh>
#include <unikv/detail/backend/cuda_index_staging.cuh>
#include <unikv/detail/backend/cuda_kernels.cuh>
#include <unikv/detail/backend/owned_buffer.hpp>
#include <unikv/detail/backend/owned_handle.hpp>
#include <unikv/error.hpp>

namespace unikv {
namespace detail::cuda {

// What every handle of one backend points at; on the heap, so moving the backend keeps handles valid.
struct state {
    atomic_counters counters;
    index_staging staging{counters};
    int sm_count = 1;
};

}  // namespace detail::cuda

/// The CUDA backend. Move-only; streams, events and buffers it hands out must not outlive it.
///
/// Page copies (`copy_pages_async`, `copy_page_slices_async`, any pair of memory spaces) validate on the host and
/// throw `logic_error` before queuing anything. They never synchronize the host unless the index ring (4 MiB of
/// indices, or 1024 lists) is full of lists still in flight, and they are not capturable in a CUDA graph (the
/// ring is reused).
class CudaBackend : public detail::copy_entry_points<CudaBackend> {
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
        friend class CudaBackend;
        friend class event_ref;
        stream_ref(detail::cuda::state* st, cudaStream_t s) : state_(st), stream_(s) {}
        detail::cuda::state* state_ = nullptr;
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
        friend class CudaBackend;
        friend class stream_ref;
        event_ref(detail::cuda::state* st, cudaEvent_t e) : state_(st), event_(e) {}
        detail::cuda::state* state_ = nullptr;
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
    class Stream : public detail::owned_handle<stream_ref, &CudaBackend::release_stream> {
        friend class CudaBackend;
        explicit Stream(stream_ref r) : owned_handle(r) {}
    };

    /// An owned event.
    class Event : public detail::owned_handle<event_ref, &CudaBackend::release_event> {
        friend class CudaBackend;
        explicit Event(event_ref r) : owned_handle(r) {}
    };

private:
    static void free_device(std::byte* p) noexcept { cudaFree(p); }
    static void free_pinned(std::byte* p) noexcept { cudaFreeHost(p); }
    template <MemorySpace Space>
    using buffer_base = detail::owned_buffer<Space, Space == MemorySpace::device ? &CudaBackend::free_device
                                                                                 : &CudaBackend::free_pinned>;

public:
    /// An owned, zero-filled buffer in memory space `Space`: device memory (`cudaMalloc`) or pinned host
    /// memory (`cudaHostAlloc`). Move-only; `region()` is typed by `Space`.
    template <MemorySpace Space>
    class Buffer : public buffer_base<Space> {
    public:
        Buffer() noexcept = default;

    private:
        friend class CudaBackend;
        Buffer(std::byte* d, std::size_t n) noexcept : buffer_base<Space>(d, n) {}
    };
    /// The buffer `allocate_device` returns.
    using DeviceBuffer = Buffer<MemorySpace::device>;
    /// The buffer `allocate_pinned` returns.
    using PinnedBuffer = Buffer<MemorySpace::pinned_host>;

    /// Uses the current CUDA device.
    CudaBackend() : state_(std::make_unique<detail::cuda::state>()) {
        int device = 0;
        detail::cuda::check(cudaGetDevice(&device), "cudaGetDevice");
        detail::cuda::check(cudaDeviceGetAttribute(&state_->sm_count, cudaDevAttrMultiProcessorCount, device),
                            "cudaDeviceGetAttribute");
    }
    /// Moving keeps every handle valid (they point at the state, which does not move).
    CudaBackend(CudaBackend&&) noexcept = default;
    /// Not assignable: the replaced state would leave its handles dangling.
    CudaBackend& operator=(CudaBackend&&) = delete;

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
            detail::cuda::fill_pages_kernel<<<grid_for(n), 256, 0, s.stream_>>>(region.data, p, n, page_bytes, value);
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

    friend class detail::copy_entry_points<CudaBackend>;  // forwards the typed copy calls to queue_copy

    void queue_copy(const char* call, detail::raw_region src, std::span<const std::int32_t> src_pages,
                    detail::raw_region dst, std::span<const std::int32_t> dst_pages, std::size_t page_bytes,
                    EnvelopeSlice slice, stream_ref s) {
        check_stream(call, s);
        detail::validate_page_copy(call, src, src_pages, dst, dst_pages, page_bytes, slice);
        if (src_pages.empty()) return;
        state_->counters.copies_queued.fetch_add(1, std::memory_order_relaxed);
        state_->counters.bytes_copied.fetch_add(src_pages.size() * slice.bytes * slice.count, std::memory_order_relaxed);
        state_->staging.stage(src_pages, dst_pages, s.stream_,
                              [&](const std::int32_t* sp, const std::int32_t* dp, std::size_t n) {
                                  const std::size_t units = detail::cuda::copy_units(n, slice);  // a warp each
                                  detail::cuda::copy_pages_kernel<<<grid_for((units + 7) / 8), 256, 0, s.stream_>>>(
                                      src.data, sp, dst.data, dp, n, page_bytes, slice);
                              });
    }

    /// Blocks for `wanted` blocks of work: at most one full wave (8 blocks of 256 threads per SM), grid-stride beyond.
    [[nodiscard]] unsigned grid_for(std::size_t wanted) const noexcept {
        return static_cast<unsigned>(std::min<std::size_t>(wanted, static_cast<std::size_t>(state_->sm_count) * 8));
    }
    std::unique_ptr<detail::cuda::state> state_;
};

inline void CudaBackend::stream_ref::wait(event_ref e) const {
    UNIKV_EXPECTS(state_ != nullptr && e.state_ == state_, "wait: the stream and the event must come from the "
                  "same CudaBackend");
    state_->counters.stream_waits.fetch_add(1, std::memory_order_relaxed);
    detail::cuda::check(cudaStreamWaitEvent(stream_, e.event_, 0), "cudaStreamWaitEvent");
}

static_assert(detail::check_backend<CudaBackend>() && Backend<CudaBackend>);

}  // namespace unikv
