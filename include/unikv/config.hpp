#pragma once
/// \file
/// Library-wide configuration: version, host/device annotations, CUDA detection.
/// Kept light on purpose (no <iostream>, no Thrust): every other header includes it.

#define UNIKV_VERSION_MAJOR 0
#define UNIKV_VERSION_MINOR 1
#define UNIKV_VERSION_PATCH 0
/// Single integer version, `major * 10000 + minor * 100 + patch`.
#define UNIKV_VERSION (UNIKV_VERSION_MAJOR * 10000 + UNIKV_VERSION_MINOR * 100 + UNIKV_VERSION_PATCH)

#if defined(__CUDACC__)
/// 1 when the translation unit is compiled by nvcc, so CUDA kernels and runtime calls are available.
#define UNIKV_HAS_CUDA 1
/// Marks functions callable from both host code and device kernels.
#define UNIKV_HOST_DEVICE __host__ __device__
#else
#define UNIKV_HAS_CUDA 0
#define UNIKV_HOST_DEVICE
#endif

#if defined(__GNUC__)
/// 1 when GCC/Clang vector types (`__attribute__((vector_size))`) are available to host code.
#define UNIKV_HAS_VECTOR_TYPES 1
#else
#define UNIKV_HAS_VECTOR_TYPES 0
#endif

#if UNIKV_HAS_VECTOR_TYPES && defined(__x86_64__)
/// 1 when host code may carry AVX2 variants (`target("avx2")`) picked at run time with `__builtin_cpu_supports`.
#define UNIKV_HAS_AVX2_DISPATCH 1
#else
#define UNIKV_HAS_AVX2_DISPATCH 0
#endif

#if defined(UNIKV_ENABLE_ASSERTS) || !defined(NDEBUG)
/// 1 when `UNIKV_ASSERT` checks internal invariants (debug builds, or `-DUNIKV_ENABLE_ASSERTS`).
#define UNIKV_ASSERTS_ENABLED 1
#else
#define UNIKV_ASSERTS_ENABLED 0
#endif
