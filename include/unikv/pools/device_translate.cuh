#pragma once
/// \file
/// Translation on the device: kernels that gather physical token or page ids of device arrays of virtual
/// ones through a `TranslationTable` (a mirror from `UnifiedAllocator::device_tables()`), with the one
/// definition the host gathers use (`TranslationTable::physical_token` / `physical_page`). Asynchronous on the
/// given stream; queue them after `device_tables()` on the allocator's stream (or one that waits it).

#if !defined(__CUDACC__)
#error "unikv: device_translate.cuh needs nvcc (a .cu translation unit); host code translates with UnifiedAllocator::translate_*"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include <unikv/backend/cuda_backend.cuh>
#include <unikv/error.hpp>
#include <unikv/ids.hpp>
#include <unikv/pools/translate.hpp>

namespace unikv {
namespace detail::cuda {

// One thread per id, grid-stride. `In` and `Out` are strong ids of one int32 each.
template <class In, class Out>
__global__ void translate_kernel(TranslationTable table, const In* in, Out* out, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::int32_t v = in[i].value();
        if constexpr (std::is_same_v<In, VirtualToken>) out[i] = Out{table.physical_token(v)};
        else out[i] = Out{table.physical_page(v)};
    }
}

template <class In, class Out>
void launch_translate(const char* call, const TranslationTable& table, std::span<const In> in, std::span<Out> out,
                      CudaBackend::stream_ref stream) {
    UNIKV_EXPECTS(out.size() >= in.size(), call, ": out holds ", out.size(), " ids for ", in.size(), " inputs");
    UNIKV_EXPECTS(table.v2p != nullptr, call, ": the table has no entries (a component the layout lacks?)");
    if (in.empty()) return;
    constexpr unsigned threads = 256;
    constexpr std::size_t max_blocks = 4096;  // grid-stride beyond this
    const auto blocks = static_cast<unsigned>(std::min(max_blocks, (in.size() + threads - 1) / threads));
    translate_kernel<In, Out><<<blocks, threads, 0, stream.native()>>>(table, in.data(), out.data(), in.size());
    check(cudaGetLastError(), call);
}

}  // namespace detail::cuda

/// Writes the physical token of each virtual token of the device array `in` to the device array `out` (at
/// least as long), through `table`, on `stream`: `v2p[t / page_size] * page_size + t % page_size`, or token 0
/// (the sink) for an unbound, negative or out-of-range id. Asynchronous; no host synchronization. Throws
/// `logic_error` when `out` is shorter or `table` is empty, `cuda_error` when the launch fails. O(n) on the device.
inline void translate_tokens_async(const TranslationTable& table, std::span<const VirtualToken> in,
                                   std::span<PhysicalToken> out, CudaBackend::stream_ref stream) {
    detail::cuda::launch_translate("translate_tokens_async", table, in, out, stream);
}

/// Writes the physical page of each virtual page (or state id) of the device array `in` to the device array
/// `out`, through `table`, on `stream`; page 0 (the sink) for an unmapped id. Same contract as
/// `translate_tokens_async`.
template <class In>
    requires std::is_same_v<In, VirtualPage> || std::is_same_v<In, StateId>
void translate_pages_async(const TranslationTable& table, std::span<const In> in, std::span<PhysicalPage> out,
                           CudaBackend::stream_ref stream) {
    detail::cuda::launch_translate("translate_pages_async", table, in, out, stream);
}

}  // namespace unikv
