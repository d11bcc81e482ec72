#pragma once
/// \file
/// The copy-engine policy of `BasicCudaBackend`: what moves the bytes of a page-envelope copy (whole or sliced)
/// once it is validated. Each engine is a tag with a nested `impl` the backend constructs from its shared
/// resources and calls as `impl.copy(request, stream)`. `KernelCopyEngine` and `MemcpyBatchCopyEngine` live
/// here; `CubBatchedCopyEngine` has its own header (`cub_copy_engine.cuh`), so only translation units that
/// name it compile CUB.

#if !defined(__CUDACC__)
#error "unikv: copy_engines.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <concepts>
#include <type_traits>

#include <unikv/detail/backend/copy_entry_points.hpp>
#include <unikv/detail/backend/cuda_copy_engines.cuh>

namespace unikv {

/// The warp kernel (`detail/backend/cuda_kernels.cuh`): page indices travel through the backend's index ring
/// into device memory, then a warp copies each 4 KiB unit of each run with 16-byte vectors. One launch per
/// 32K page pairs.
struct KernelCopyEngine {
    using impl = detail::cuda::kernel_copy_engine;
};

/// `cudaMemcpyBatchAsync` with one descriptor per run (per envelope for whole copies), sources read in stream
/// order: the driver may use the DMA copy engines, which frees the SMs during host transfers. Builds the
/// descriptors on the host (O(runs) per copy, into arrays reserved once); no index ring.
struct MemcpyBatchCopyEngine {
    using impl = detail::cuda::memcpy_batch_engine;
};

/// Chooses an engine per direction (`CopyDirection`); host-to-host copies use `HostToHost`.
template <class DeviceToDevice, class HostToDevice, class DeviceToHost, class HostToHost = DeviceToHost>
struct PerDirectionCopyEngine {
    using impl = detail::cuda::per_direction_engine<DeviceToDevice, HostToDevice, DeviceToHost, HostToHost>;
};

/// The engine `CudaBackend` uses, per direction: device-to-device, host-to-device, device-to-host. Meant to be
/// whichever `bench_cuda_copy` measures fastest per direction on the target GPU, 4 KiB to 1 MiB envelopes.
/// Not measured yet (no GPU where this was written), so every direction keeps the warp kernel, the engine the
/// README's H200 figures are for. A CUB engine chosen here would put CUB into every CUDA translation unit.
struct DefaultCopyEngine : PerDirectionCopyEngine<KernelCopyEngine, KernelCopyEngine, KernelCopyEngine> {};

/// True when `E` is a copy engine: `E::impl` is constructible from the backend's resources and has
/// `copy(request, cudaStream_t)`.
template <class E>
inline constexpr bool is_copy_engine_v = requires {
    typename E::impl;  // checked in order: the later requirements name it
    requires std::constructible_from<typename E::impl, detail::cuda::resources&>;
    requires requires(typename E::impl& impl, const detail::page_copy_request& job, cudaStream_t s) {
        impl.copy(job, s);
    };
};

/// A copy-engine policy of `BasicCudaBackend`.
template <class E>
concept CopyEngine = is_copy_engine_v<E>;

static_assert(CopyEngine<KernelCopyEngine> && CopyEngine<MemcpyBatchCopyEngine> && CopyEngine<DefaultCopyEngine>);

}  // namespace unikv
