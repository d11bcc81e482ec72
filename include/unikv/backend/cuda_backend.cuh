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
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include <unikv/backend/backend_concept.hpp>
#include <unikv/backend/counters.hpp>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/owned_handle.hpp>
#include <unikv/error.hpp>

namespace unikv {
namespace detail::cuda {

inline void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
        throw cuda_error(concat("unikv: ", call, " failed: ", cudaGetErrorName(status), ": ",
                                cudaGetErrorString(status)));
    }
}

// The warp copies `len` bytes: 16-byte vectors, eight in flight per lane (a whole 4 KiB unit in one round
// trip), when both ends are 16-byte aligned (the tail bytewise); bytes otherwise.
__device__ inline void warp_copy(std::byte* __restrict__ dst, const std::byte* __restrict__ src, std::size_t len,
                                 unsigned lane) {
    constexpr std::size_t depth = 8;
    std::size_t done = 0;
    if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0) {
        auto* d = reinterpret_cast<uint4*>(dst);
        const auto* s = reinterpret_cast<const uint4*>(src);
        const std::size_t vectors = len / 16;
        std::size_t i = lane;
        for (; i + 32 * (depth - 1) < vectors; i += 32 * depth) {
            uint4 v[depth];
#pragma unroll
            for (std::size_t k = 0; k < depth; ++k) v[k] = s[i + 32 * k];
#pragma unroll
            for (std::size_t k = 0; k < depth; ++k) d[i + 32 * k] = v[k];
        }
        for (; i < vectors; i += 32) d[i] = s[i];
        done = vectors * 16;
    }
    for (std::size_t i = done + lane; i < len; i += 32) dst[i] = src[i];
}

// Bytes one warp copies per work unit: a 4 KiB envelope is one unit, a 1 MiB one spreads over 256 warps.
inline constexpr std::size_t copy_unit_bytes = 4096;

[[nodiscard]] constexpr std::size_t copy_units(std::size_t pairs, const EnvelopeSlice& slice) noexcept {
    return pairs * slice.count * ((slice.bytes + copy_unit_bytes - 1) / copy_unit_bytes);
}

// One warp per unit (grid-stride over units): a unit is up to `copy_unit_bytes` of one run of the slice of
// one page pair. The page indices come from device memory (staged there by a copy queued just before).
template <int Unused = 0>
__global__ void copy_pages_kernel(const std::byte* src, const std::int32_t* src_pages, std::byte* dst,
                                  const std::int32_t* dst_pages, std::size_t n, std::size_t page_bytes,
                                  EnvelopeSlice slice) {
    const std::size_t units_per_run = (slice.bytes + copy_unit_bytes - 1) / copy_unit_bytes;
    const std::size_t units_per_page = units_per_run * slice.count;
    const std::size_t units = n * units_per_page;
    const unsigned lane = threadIdx.x % 32;
    const std::size_t warps = static_cast<std::size_t>(gridDim.x) * (blockDim.x / 32);
    for (std::size_t u = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32; u < units;
         u += warps) {
        const std::size_t pair = u / units_per_page;
        const std::size_t run = u % units_per_page / units_per_run;
        const std::size_t first = u % units_per_run * copy_unit_bytes;
        const std::size_t offset = slice.offset + run * slice.stride + first;
        warp_copy(dst + static_cast<std::size_t>(dst_pages[pair]) * page_bytes + offset,
                  src + static_cast<std::size_t>(src_pages[pair]) * page_bytes + offset,
                  slice.bytes - first < copy_unit_bytes ? slice.bytes - first : copy_unit_bytes, lane);
    }
}

template <int Unused = 0>
__global__ void fill_pages_kernel(std::byte* region, const std::int32_t* pages, std::size_t n,
                                  std::size_t page_bytes, std::byte value) {
    for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
        std::byte* d = region + static_cast<std::size_t>(pages[i]) * page_bytes;
        for (std::size_t b = threadIdx.x; b < page_bytes; b += blockDim.x) d[b] = value;
    }
}

struct atomic_counters {
    std::atomic<std::uint64_t> host_synchronizations{0};
    std::atomic<std::uint64_t> stream_waits{0};
    std::atomic<std::uint64_t> copies_queued{0};
    std::atomic<std::uint64_t> bytes_copied{0};
};

/// A ring of page indices in pinned host memory, mirrored in device memory, that carries index lists to the
/// kernels: each list takes the next contiguous range of the ring, is copied (`cudaMemcpyAsync`) into the
/// device mirror right before its kernel (kernels never read host memory over the bus), and its range is
/// released once the event recorded behind that kernel has fired. Capacity is counted in indices, not in
/// copies: thousands of small copies (per-layer loads) can be in flight. The host waits (a counted
/// synchronization) only when the ring, or its 1024 in-flight records, are full.
class index_staging {
public:
    static constexpr std::size_t capacity = std::size_t{1} << 20;  // indices (4 MiB pinned + 4 MiB device)
    static constexpr std::size_t max_chunk = std::size_t{1} << 16;  // indices per kernel, both lists together
    static constexpr std::size_t max_records = 1024;                 // lists in flight

    explicit index_staging(atomic_counters& counters) : counters_(counters) {
        check(cudaHostAlloc(reinterpret_cast<void**>(&host_), capacity * sizeof(std::int32_t), cudaHostAllocPortable),
              "cudaHostAlloc(index staging)");
        try {
            check(cudaMalloc(reinterpret_cast<void**>(&device_), capacity * sizeof(std::int32_t)),
                  "cudaMalloc(index staging)");
            records_.reserve(2 * max_records);      // live records plus released ones not yet compacted away
            spare_events_.reserve(max_records + 1);  // every event: the live records' and the one in hand
        } catch (...) {
            cudaFreeHost(host_);
            cudaFree(device_);  // a no-op on nullptr
            throw;
        }
    }
    index_staging(const index_staging&) = delete;
    index_staging& operator=(const index_staging&) = delete;
    ~index_staging() {
        for (std::size_t i = first_record_; i < records_.size(); ++i) {
            cudaEventSynchronize(records_[i].done);
            cudaEventDestroy(records_[i].done);
        }
        for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
        cudaFreeHost(host_);
        cudaFree(device_);
    }

    /// Stages `a` (and `b`, if not empty, as long as `a`) in chunks; calls `launch(dev_a, dev_b, count)` per
    /// chunk with device pointers, then records the chunk's event on `stream`. O(list length) host copies.
    template <class Launch>
    void stage(std::span<const std::int32_t> a, std::span<const std::int32_t> b, cudaStream_t stream, Launch launch) {
        UNIKV_ASSERT(b.empty() || b.size() == a.size());
        const std::size_t lists = b.empty() ? 1 : 2;
        const std::size_t per_chunk = max_chunk / lists;
        std::lock_guard lk(m_);
        for (std::size_t first = 0; first < a.size(); first += per_chunk) {
            const std::size_t count = std::min(per_chunk, a.size() - first);
            const cudaEvent_t done = take_event();
            std::size_t at = 0;
            try {
                at = reserve(lists * count);
            } catch (...) {
                spare_events_.push_back(done);
                throw;
            }
            // From here the range is recorded as in flight whatever fails, and released in order, never too early:
            // a failed copy queues nothing (an event never recorded counts as fired), a failed record waits below.
            records_.push_back({head_, done});
            std::int32_t* h = host_ + at;
            std::int32_t* d = device_ + at;
            std::memcpy(h, a.data() + first, count * sizeof(std::int32_t));
            if (!b.empty()) std::memcpy(h + count, b.data() + first, count * sizeof(std::int32_t));
            check(cudaMemcpyAsync(d, h, lists * count * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream),
                  "cudaMemcpyAsync(index staging)");
            (void)cudaGetLastError();  // an earlier, already reported error must not be taken for this launch's
            launch(d, d + count, count);
            const cudaError_t launched = cudaGetLastError();
            const cudaError_t recorded = cudaEventRecord(done, stream);
            if (recorded != cudaSuccess) {
                // The copy (and maybe the kernel) is queued but `done` does not follow it, so it would count as
                // fired: wait for the stream before the range can be reused (a counted synchronization).
                counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
                (void)cudaStreamSynchronize(stream);
                check(recorded, "cudaEventRecord(index staging)");
            }
            check(launched, "kernel launch");
        }
    }

private:
    struct record {
        std::size_t end;  // `head_` after this list: the ring is free up to here once `done` fired
        cudaEvent_t done;
    };

    // The offset of `n` free, contiguous indices (wrapping to the ring's start when they would not fit before
    // its end). Releases fired records first; waits for the oldest when the ring or the records are full.
    std::size_t reserve(std::size_t n) {
        std::size_t at = head_ % capacity;
        const std::size_t skip = at + n > capacity ? capacity - at : 0;  // the tail end left unused this lap
        while (head_ + skip + n - released_ > capacity || records_.size() - first_record_ >= max_records) {
            release_oldest(true);
        }
        while (first_record_ < records_.size() && release_oldest(false)) {
        }
        head_ += skip;
        at = head_ % capacity;
        head_ += n;
        return at;
    }

    // Releases the oldest record if its event fired (or, with `wait`, after waiting for it: a counted host
    // synchronization). False when it had not fired and `wait` is false.
    bool release_oldest(bool wait) {
        const record r = records_[first_record_];
        const cudaError_t status = cudaEventQuery(r.done);
        if (status == cudaErrorNotReady) {
            if (!wait) return false;
            counters_.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
            check(cudaEventSynchronize(r.done), "cudaEventSynchronize(index staging)");
        } else {
            check(status, "cudaEventQuery(index staging)");
        }
        released_ = r.end;
        spare_events_.push_back(r.done);
        if (++first_record_ == records_.size()) {
            records_.clear();
            first_record_ = 0;
        } else if (first_record_ >= max_records) {  // keep the live records at the front, without allocating
            records_.erase(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(first_record_));
            first_record_ = 0;
        }
        return true;
    }

    cudaEvent_t take_event() {
        if (!spare_events_.empty()) {
            const cudaEvent_t e = spare_events_.back();
            spare_events_.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate(index staging)");
        return e;
    }

    atomic_counters& counters_;
    std::mutex m_;
    std::int32_t* host_ = nullptr;
    std::int32_t* device_ = nullptr;
    std::size_t head_ = 0;      // indices handed out since construction (the ring offset is head_ % capacity)
    std::size_t released_ = 0;  // indices whose kernels have run
    std::vector<record> records_;  // in flight: records_[first_record_..] oldest first
    std::size_t first_record_ = 0;
    std::vector<cudaEvent_t> spare_events_;
};

struct state {
    atomic_counters counters;
    index_staging staging{counters};
    int sm_count = 1;
};

}  // namespace detail::cuda

/// The CUDA backend. Move-only; streams, events and buffers it hands out must not outlive it.
class CudaBackend {
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
        /// `cudaEventQuery`: true when the latest record completed (or the event was never recorded).
        [[nodiscard]] bool query() const {
            const cudaError_t status = cudaEventQuery(event_);
            if (status == cudaErrorNotReady) return false;
            detail::cuda::check(status, "cudaEventQuery");
            return true;
        }
        /// `cudaEventSynchronize`: blocks the host. Counted in `host_synchronizations`.
        void synchronize() const {
            UNIKV_EXPECTS(state_ != nullptr, "synchronize on an empty event handle");
            state_->counters.host_synchronizations.fetch_add(1, std::memory_order_relaxed);
            detail::cuda::check(cudaEventSynchronize(event_), "cudaEventSynchronize");
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

    /// Where a `Buffer` lives.
    enum class MemoryKind { device, pinned_host };

    /// An owned, zero-filled buffer: device memory (`cudaMalloc`) or pinned host memory (`cudaHostAlloc`).
    class Buffer {
    public:
        Buffer() = default;
        Buffer(Buffer&& o) noexcept
            : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), kind_(o.kind_) {}
        Buffer& operator=(Buffer&& o) noexcept {
            std::swap(data_, o.data_);
            std::swap(size_, o.size_);
            std::swap(kind_, o.kind_);
            return *this;
        }
        ~Buffer() {
            if (data_ == nullptr) return;
            if (kind_ == MemoryKind::pinned_host) cudaFreeHost(data_); else cudaFree(data_);
        }
        [[nodiscard]] std::byte* data() const noexcept { return data_; }
        [[nodiscard]] std::size_t size() const noexcept { return size_; }
        [[nodiscard]] region_ref region() const noexcept { return {data_, size_}; }

    private:
        friend class CudaBackend;
        Buffer(std::byte* d, std::size_t n, MemoryKind kind) : data_(d), size_(n), kind_(kind) {}
        std::byte* data_ = nullptr;
        std::size_t size_ = 0;
        MemoryKind kind_ = MemoryKind::device;
    };

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
    [[nodiscard]] Buffer allocate_device(std::size_t bytes) {
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
        return Buffer(static_cast<std::byte*>(p), bytes, MemoryKind::device);
    }

    /// Zero-filled pinned host memory. Throws `out_of_memory` on failure.
    [[nodiscard]] Buffer allocate_pinned(std::size_t bytes) {
        void* p = nullptr;
        const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
        if (status == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            throw out_of_memory(detail::concat("unikv: cudaHostAlloc of ", bytes, " bytes failed"));
        }
        detail::cuda::check(status, "cudaHostAlloc");
        std::memset(p, 0, bytes);
        return Buffer(static_cast<std::byte*>(p), bytes, MemoryKind::pinned_host);
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

    /// Queues a gather/scatter of whole page envelopes on `s` (see `HostBackend::copy_pages_async`).
    /// Validates on the host and throws `logic_error` before queuing anything. No host synchronization unless
    /// the index ring (4 MiB of indices, or 1024 lists) is full of lists still in flight. Not capturable in a CUDA
    /// graph (the ring is reused).
    void copy_pages_async(region_ref src, std::span<const std::int32_t> src_pages, region_ref dst,
                          std::span<const std::int32_t> dst_pages, std::size_t page_bytes, stream_ref s) {
        queue_copy("copy_pages_async", src, src_pages, dst, dst_pages, page_bytes, EnvelopeSlice::whole(page_bytes), s);
    }

    /// Queues a copy of `slice` of each envelope on `s`; bytes outside the slice are not touched.
    void copy_page_slices_async(region_ref src, std::span<const std::int32_t> src_pages, region_ref dst,
                                std::span<const std::int32_t> dst_pages, std::size_t page_bytes,
                                EnvelopeSlice slice, stream_ref s) {
        queue_copy("copy_page_slices_async", src, src_pages, dst, dst_pages, page_bytes, slice, s);
    }

    /// Queues setting every byte of the listed envelopes to `value` on `s`.
    void fill_pages_async(region_ref region, std::span<const std::int32_t> pages, std::size_t page_bytes,
                          std::byte value, stream_ref s) {
        check_stream("fill_pages_async", s);
        detail::validate_pages_in_region("fill_pages_async", region, pages, page_bytes, "fill");
        if (pages.empty()) return;
        state_->counters.copies_queued.fetch_add(1, std::memory_order_relaxed);
        state_->counters.bytes_copied.fetch_add(pages.size() * page_bytes, std::memory_order_relaxed);
        state_->staging.stage(pages, {}, s.stream_, [&](const std::int32_t* p, const std::int32_t*, std::size_t n) {
            detail::cuda::fill_pages_kernel<<<grid_for(n), 256, 0, s.stream_>>>(region.data, p, n, page_bytes, value);
        });
    }

    /// Synchronization, wait and copy counts since construction (`bytes_copied` counts queued bytes).
    [[nodiscard]] BackendCounters counters() const noexcept {
        const auto& c = state_->counters;
        return {c.host_synchronizations.load(), c.stream_waits.load(), c.copies_queued.load(), c.bytes_copied.load()};
    }

private:
    void check_stream(const char* call, stream_ref s) const {
        UNIKV_EXPECTS(s.state_ == state_.get(), call, ": the stream is empty or belongs to another CudaBackend");
    }

    void queue_copy(const char* call, region_ref src, std::span<const std::int32_t> src_pages, region_ref dst,
                    std::span<const std::int32_t> dst_pages, std::size_t page_bytes, EnvelopeSlice slice,
                    stream_ref s) {
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
