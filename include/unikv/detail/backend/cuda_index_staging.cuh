#pragma once
/// \file
/// `index_staging`: the ring that carries page-index lists from the host to `CudaBackend`'s kernels.

#if !defined(__CUDACC__)
#error "unikv: detail/backend/cuda_index_staging.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <vector>

#include <unikv/detail/backend/atomic_counters.hpp>
#include <unikv/detail/backend/cuda_check.cuh>
#include <unikv/error.hpp>

namespace unikv::detail::cuda {

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

}  // namespace unikv::detail::cuda
