#!/usr/bin/env bash
# The CUDA tests and benchmarks on a GPU, in two steps, because the GPU machine may have no network (no
# doctest or Google Benchmark packages there):
#   scripts/gpu-check.sh pack   here (nvcc, doctest-dev, libbenchmark-dev): builds test_cuda and every
#                               bench_cuda_* for ${UNIKV_CUDA_ARCH:-90} into .gpu/ with libbenchmark beside them
#                               (add "/.gpu/" to .git/info/exclude and carry .gpu to the GPU machine)
#   scripts/gpu-check.sh run    on the GPU machine, from the repository root: runs the tests (plain, then under
#                               compute-sanitizer memcheck when present) and the benchmarks; results in
#                               ${OUT:-build/gpu-check} (a JSON file per benchmark). About a minute on an H200.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
pack)
  dpkg -s doctest-dev libbenchmark-dev >/dev/null 2>&1 || scripts/install-deps.sh
  cmake -S . -B build/gpu-pack -G Ninja -DCMAKE_BUILD_TYPE=Release -DUNIKV_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES="${UNIKV_CUDA_ARCH:-90}" \
    -DUNIKV_BUILD_EXAMPLES=OFF -DUNIKV_CHECK_HEADERS=OFF >/dev/null
  benches=$(cd bench && ls */*_bench.cu | sed -E 's|.*/(.*)_bench\.cu|bench_cuda_\1|')
  cmake --build build/gpu-pack --target test_cuda $benches
  rm -rf .gpu && mkdir .gpu
  cp build/gpu-pack/tests/test_cuda .gpu/
  for b in $benches; do cp "build/gpu-pack/bench/$b" .gpu/; done
  cp -L "$(ldd .gpu/bench_cuda_* | awk '/libbenchmark/ {print $3; exit}')" .gpu/
  du -sh .gpu ;;
run)
  out=${OUT:-build/gpu-check}
  mkdir -p "$out"
  export LD_LIBRARY_PATH=$PWD/.gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
  status=0
  timeout 120 .gpu/test_cuda --duration=true 2>&1 | tee "$out/test_cuda.txt" || status=1
  if command -v compute-sanitizer >/dev/null; then
    timeout 180 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 .gpu/test_cuda 2>&1 | tail -6 \
      | tee "$out/memcheck.txt" || status=1
  fi
  for b in .gpu/bench_cuda_*; do
    timeout 150 "$b" --benchmark_out="$out/$(basename "$b").json" --benchmark_out_format=json || status=1
  done
  exit $status ;;
*)
  echo "usage: scripts/gpu-check.sh pack|run" >&2
  exit 2 ;;
esac
