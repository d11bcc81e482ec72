#pragma once
/// \file
/// The one place that picks the backend: `CudaBackend` when compiled by nvcc, `HostBackend` otherwise.
/// `unikv::stream_ref` and `unikv::event_ref` name the chosen backend's handles, so engine code reads the
/// same in both builds.

#include <unikv/config.hpp>

#if UNIKV_HAS_CUDA
#include <unikv/backend/cuda_backend.cuh>
#else
#include <unikv/backend/host_backend.hpp>
#endif

namespace unikv {

#if UNIKV_HAS_CUDA
/// The backend of this build.
using DefaultBackend = CudaBackend;
#else
/// The backend of this build.
using DefaultBackend = HostBackend;
#endif

/// Stream handle of the default backend.
using stream_ref = DefaultBackend::stream_ref;
/// Event handle of the default backend.
using event_ref = DefaultBackend::event_ref;

}  // namespace unikv
