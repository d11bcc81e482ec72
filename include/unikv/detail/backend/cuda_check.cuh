#pragma once
/// \file
/// `detail::cuda::check`: turns a failed CUDA runtime call into `unikv::cuda_error` naming the call;
/// `check_unless_async_failure` lets the errors of failed asynchronous work through, for `event_ref::failed()`.

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

/// Like `check`, but lets pass the errors that report failed asynchronous work rather than a bad call (an
/// event query or synchronization returning a kernel's or copy's fault): those are the caller's to read as
/// `event_ref::failed()`. Handle and argument errors still throw.
inline void check_unless_async_failure(cudaError_t status, const char* call) {
    const bool bad_call = status == cudaErrorInvalidResourceHandle || status == cudaErrorInvalidValue ||
                          status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver ||
                          status == cudaErrorInitializationError;
    if (bad_call) check(status, call);
}

}  // namespace unikv::detail::cuda
