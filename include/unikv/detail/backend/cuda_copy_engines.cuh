#pragma once
/// \file
/// The copy engines behind `BasicCudaBackend` that need no CUB: the warp kernel, `cudaMemcpyBatchAsync`, and the
/// per-direction dispatch, with what they share (`resources`: counters, the index ring, the SM count).

#if !defined(__CUDACC__)
#error "unikv: detail/backend/cuda_copy_engines.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/atomic_counters.hpp>
#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/cuda_check.cuh>
#include <unikv/detail/backend/cuda_index_staging.cuh>
#include <unikv/detail/backend/cuda_kernels.cuh>

namespace unikv::detail::cuda {

/// What every handle and engine of one backend points at; on the heap, so moving the backend keeps handles
/// valid.
struct resources {
    atomic_counters counters;
    index_staging staging{counters};
    int sm_count = 1;

    /// Blocks for `wanted` blocks of work: at most one full wave (8 blocks of 256 threads per SM), grid-stride
    /// beyond.
    [[nodiscard]] unsigned grid_for(std::size_t wanted) const noexcept {
        return static_cast<unsigned>(std::min<std::size_t>(wanted, static_cast<std::size_t>(sm_count) * 8));
    }
};

/// Today's engine: page indices through the ring, then `copy_pages_kernel` (a warp per 4 KiB unit).
class kernel_copy_engine {
public:
    explicit kernel_copy_engine(resources& r) noexcept : r_(&r) {}

    void copy(const page_copy_request& job, cudaStream_t stream) {
        r_->staging.stage(job.src_pages, job.dst_pages, stream,
                          [&](const std::int32_t* sp, const std::int32_t* dp, std::size_t n) {
                              const std::size_t units = copy_units(n, job.slice);  // a warp each
                              copy_pages_kernel<<<r_->grid_for((units + 7) / 8), 256, 0, stream>>>(
                                  job.src.data, sp, job.dst.data, dp, n, job.page_bytes, job.slice);
                          });
    }

private:
    resources* r_;
};

/// `cudaMemcpyBatchAsync` over one descriptor per run (a whole envelope is one run): the driver picks the
/// copy engines (DMA) or SMs. The descriptor arrays are host memory the call reads before it returns, so
/// they are reused, behind a mutex, in batches of `max_batch`; no index ring.
class memcpy_batch_engine {
public:
    static constexpr std::size_t max_batch = 8192;  // descriptors per call: 192 KiB of arrays, reserved once

    explicit memcpy_batch_engine(resources&) {
        dsts_.reserve(max_batch);
        srcs_.reserve(max_batch);
        sizes_.reserve(max_batch);
    }

    void copy(const page_copy_request& job, cudaStream_t stream) {
        std::lock_guard lk(m_);
        const EnvelopeSlice& sl = job.slice;
        const std::size_t runs = job.src_pages.size() * sl.count;
        for (std::size_t first = 0; first < runs; first += max_batch) {
            const std::size_t count = std::min(max_batch, runs - first);
            dsts_.clear();
            srcs_.clear();
            sizes_.assign(count, sl.bytes);
            for (std::size_t i = first; i < first + count; ++i) {
                const std::size_t offset = sl.offset + i % sl.count * sl.stride;
                const std::size_t pair = i / sl.count;
                srcs_.push_back(job.src.data + static_cast<std::size_t>(job.src_pages[pair]) * job.page_bytes + offset);
                dsts_.push_back(job.dst.data + static_cast<std::size_t>(job.dst_pages[pair]) * job.page_bytes + offset);
            }
            cudaMemcpyAttributes attributes{};
            attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // the source is read in stream order
            std::size_t first_of_attributes = 0;
            check(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), count, &attributes,
                                       &first_of_attributes, 1, stream),
                  "cudaMemcpyBatchAsync");
        }
    }

private:
    std::mutex m_;
    std::vector<void*> dsts_;
    std::vector<const void*> srcs_;
    std::vector<std::size_t> sizes_;
};

/// One engine per direction; `copy` dispatches on the request's direction.
template <class DeviceToDevice, class HostToDevice, class DeviceToHost, class HostToHost>
class per_direction_engine {
public:
    explicit per_direction_engine(resources& r) : d2d_(r), h2d_(r), d2h_(r), h2h_(r) {}

    void copy(const page_copy_request& job, cudaStream_t stream) {
        switch (job.direction) {
            case CopyDirection::device_to_device: d2d_.copy(job, stream); return;
            case CopyDirection::host_to_device: h2d_.copy(job, stream); return;
            case CopyDirection::device_to_host: d2h_.copy(job, stream); return;
            case CopyDirection::host_to_host: h2h_.copy(job, stream); return;
        }
    }

private:
    typename DeviceToDevice::impl d2d_;
    typename HostToDevice::impl h2d_;
    typename DeviceToHost::impl d2h_;
    typename HostToHost::impl h2h_;
};

}  // namespace unikv::detail::cuda
