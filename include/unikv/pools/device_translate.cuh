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

template <class In, class Out>
__device__ inline Out translate_one(const TranslationTable& table, std::int32_t v) {
    if constexpr (std::is_same_v<In, VirtualToken>) return Out{table.physical_token(v)};
    else return Out{table.physical_page(v)};
}

// Grid-stride; `In` and `Out` are strong ids of one int32 each. When both arrays are 16-byte aligned each
// thread moves four ids per step as one int4 load and store (the tail one by one), so the id traffic runs
// at copy speed; otherwise one id per step.
template <class In, class Out>
__global__ void translate_kernel(TranslationTable table, const In* in, Out* out, std::size_t n) {
    static_assert(sizeof(In) == 4 && sizeof(Out) == 4);
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    std::size_t scalar_from = 0;
    if (((reinterpret_cast<std::uintptr_t>(in) | reinterpret_cast<std::uintptr_t>(out)) & 15) == 0) {
        const auto* in4 = reinterpret_cast<const int4*>(in);
        auto* out4 = reinterpret_cast<int4*>(out);
        for (std::size_t i = first; i < n / 4; i += stride) {
            const int4 v = in4[i];
            out4[i] = int4{translate_one<In, Out>(table, v.x).value(), translate_one<In, Out>(table, v.y).value(),
                           translate_one<In, Out>(table, v.z).value(), translate_one<In, Out>(table, v.w).value()};
        }
        scalar_from = n / 4 * 4;
    }
    for (std::size_t i = scalar_from + first; i < n; i += stride) out[i] = translate_one<In, Out>(table, in[i].value());
}

template <class In, class Out>
void launch_translate(const char* call, const TranslationTable& table, std::span<const In> in, std::span<Out> out,
                      CudaBackend::stream_ref stream) {
    UNIKV_EXPECTS(out.size() >= in.size(), call, ": out holds ", out.size(), " ids for ", in.size(), " inputs");
    UNIKV_EXPECTS(table.v2p != nullptr, call, ": the table has no entries (a component the layout lacks?)");
    if (in.empty()) return;
    constexpr unsigned threads = 256;
    constexpr std::size_t max_blocks = 4096;  // grid-stride beyond this
    const auto blocks = static_cast<unsigned>(std::min(max_blocks, (in.size() / 4 + threads) / threads));
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
