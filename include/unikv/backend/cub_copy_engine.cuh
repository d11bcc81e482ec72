#pragma once
/// \file
/// `CubBatchedCopyEngine`: page-envelope copies through `cub::DeviceMemcpy::Batched`, one buffer per run (per
/// envelope for whole copies). In its own header so that only translation units that name it compile CUB and
/// Thrust's iterators: `BasicCudaBackend<CubBatchedCopyEngine>`, or a direction of `PerDirectionCopyEngine`.

#if !defined(__CUDACC__)
#error "unikv: cub_copy_engine.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <cub/device/device_memcpy.cuh>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <unikv/backend/copy_engines.cuh>
#include <unikv/backend/page_copy.hpp>
#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/cuda_check.cuh>
#include <unikv/detail/backend/cuda_copy_engines.cuh>

namespace unikv {
namespace detail::cuda {

// The address of buffer `i` of a batched envelope copy: run `i % count` of page `pages[i / count]`, whose index
// the kernel reads from the device mirror of the index ring.
template <class Byte>
struct run_address {
    Byte* base;
    const std::int32_t* pages;
    std::size_t page_bytes;
    EnvelopeSlice slice;

    __host__ __device__ Byte* operator()(std::int64_t i) const {
        const auto u = static_cast<std::size_t>(i);
        return base + static_cast<std::size_t>(pages[u / slice.count]) * page_bytes + slice.offset +
               u % slice.count * slice.stride;
    }
};

// Page indices through the ring (as for the kernel), then one `DeviceMemcpy::Batched` per chunk, its temporary
// storage taken and returned in stream order (`cudaMallocAsync`, from the device's default pool).
class cub_copy_engine {
public:
    explicit cub_copy_engine(resources& r) noexcept : r_(&r) {}

    void copy(const page_copy_request& job, cudaStream_t stream) {
        cudaError_t failed = cudaSuccess;  // the ring must see every chunk through, so errors wait until the end
        const char* failed_call = nullptr;
        r_->staging.stage(job.src_pages, job.dst_pages, stream,
                          [&](const std::int32_t* sp, const std::int32_t* dp, std::size_t n) {
                              if (failed == cudaSuccess) batched(job, sp, dp, n, stream, failed, failed_call);
                          });
        check(failed, failed_call == nullptr ? "cub::DeviceMemcpy::Batched" : failed_call);
    }

private:
    static void batched(const page_copy_request& job, const std::int32_t* sp, const std::int32_t* dp, std::size_t n,
                        cudaStream_t stream, cudaError_t& failed, const char*& failed_call) {
        const thrust::counting_iterator<std::int64_t> index(0);
        const auto src = thrust::make_transform_iterator(
            index, run_address<const std::byte>{job.src.data, sp, job.page_bytes, job.slice});
        const auto dst = thrust::make_transform_iterator(index, run_address<std::byte>{job.dst.data, dp, job.page_bytes, job.slice});
        const thrust::constant_iterator<std::size_t> sizes(job.slice.bytes);
        const auto buffers = static_cast<std::int64_t>(n * job.slice.count);
        std::size_t temp_bytes = 0;
        failed = cub::DeviceMemcpy::Batched(nullptr, temp_bytes, src, dst, sizes, buffers, stream);
        if (failed != cudaSuccess) return;
        void* temp = nullptr;
        failed_call = "cudaMallocAsync(cub temporary storage)";
        if ((failed = cudaMallocAsync(&temp, temp_bytes, stream)) != cudaSuccess) return;
        failed_call = "cub::DeviceMemcpy::Batched";
        failed = cub::DeviceMemcpy::Batched(temp, temp_bytes, src, dst, sizes, buffers, stream);
        const cudaError_t freed = cudaFreeAsync(temp, stream);
        if (failed == cudaSuccess && freed != cudaSuccess) {
            failed = freed;
            failed_call = "cudaFreeAsync(cub temporary storage)";
        }
    }

    resources* r_;
};

}  // namespace detail::cuda

/// `cub::DeviceMemcpy::Batched` over one buffer per run: page indices through the backend's index ring, the
/// buffer addresses computed on the device from them (Thrust transform iterators), CUB's temporary storage
/// taken and returned in stream order with `cudaMallocAsync` / `cudaFreeAsync`. One CUB call per 32K page
/// pairs.
struct CubBatchedCopyEngine {
    using impl = detail::cuda::cub_copy_engine;
};

static_assert(CopyEngine<CubBatchedCopyEngine>);

}  // namespace unikv
