#!/usr/bin/env bash
# Proves both ways an engine can take unikv: find_package from an install prefix, and add_subdirectory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=build/consumers
rm -rf "$work"
cmake -S . -B "$work/unikv" -G Ninja -DUNIKV_BUILD_TESTS=OFF -DUNIKV_BUILD_BENCHMARKS=OFF \
  -DUNIKV_BUILD_EXAMPLES=OFF -DUNIKV_CHECK_HEADERS=OFF >/dev/null
cmake --install "$work/unikv" --prefix "$work/prefix" >/dev/null
for mode in find_package add_subdirectory; do
  cmake -S tests/consumer -B "$work/$mode" -G Ninja -DUNIKV_CONSUMER_MODE=$mode \
    -DCMAKE_PREFIX_PATH="$root/$work/prefix" -DUNIKV_SOURCE_DIR="$root" >/dev/null
  cmake --build "$work/$mode" >/dev/null
  "$work/$mode/consumer"
done
