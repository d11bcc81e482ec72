// expect: unikv: cuda_backend.cuh needs nvcc
// A CUDA-only header included from a host-only translation unit stops with a message that says what to use.
#ifdef UNIKV_COMPILE_FAIL_CONTROL
#include <unikv/backend/default_backend.hpp>
#else
#include <unikv/backend/cuda_backend.cuh>
#endif
int main() {}
