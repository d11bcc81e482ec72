#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the CUDA configuration for the GPU found (sm_90 on H100/H200),
# runs the CUDA tests and the CUDA copy benchmark (device-to-device and pinned host-to-device floors in the
# same binary). Results go to ${OUT:-build/gpu-check}. Designed to finish within 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv | tee "$out/gpu.txt"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
command -v ninja >/dev/null || scripts/install-deps.sh
dpkg -s doctest-dev libbenchmark-dev >/dev/null 2>&1 || scripts/install-deps.sh
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DUNIKV_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES="$cap" \
  -DUNIKV_RUN_CUDA_TESTS=ON -DUNIKV_BUILD_EXAMPLES=OFF -DUNIKV_CHECK_HEADERS=OFF >/dev/null
timeout 240 cmake --build build/gpu --target test_cuda bench_cuda_copy -j "$(nproc)" 2>&1 | tee "$out/build.txt" \
  | grep -E "error|warning|Linking" || true
test -x build/gpu/tests/test_cuda  # the build failed: see $out/build.txt
timeout 60 build/gpu/tests/test_cuda 2>&1 | tee "$out/test_cuda.txt"
timeout 150 build/gpu/bench/bench_cuda_copy --benchmark_out="$out/bench_cuda_copy.json" \
  --benchmark_out_format=json 2>&1 | tee "$out/bench_cuda_copy.txt"
