#pragma once
/// \file
/// `detail::cuda::check`: turns a failed CUDA runtime call into `unikv::cuda_error` naming the call.

#if !defined(__CUDACC__)
#error "unikv: detail/backend/cuda_check.cuh needs nvcc (a .cu translation unit)"
#endif

#include <cuda_runtime.h>

#include <unikv/error.hpp>

namespace unikv::detail::cuda {

inline void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
        throw cuda_error(concat("unikv: ", call, " failed: ", cudaGetErrorName(status), ": ",
                                cudaGetErrorString(status)));
    }
}

}  // namespace unikv::detail::cuda
