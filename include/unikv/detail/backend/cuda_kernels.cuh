#pragma once
/// \file
/// The page-envelope kernels behind `CudaBackend`: a warp-per-unit gather/scatter of envelope slices and a
/// page fill. Page indices come from device memory (`cuda_index_staging.cuh` stages them there).

#if !defined(__CUDACC__)
#error "unikv: detail/backend/cuda_kernels.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <unikv/backend/page_copy.hpp>

namespace unikv::detail::cuda {

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

}  // namespace unikv::detail::cuda
