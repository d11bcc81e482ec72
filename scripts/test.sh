#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the default preset (test suites under ASan +
# UBSan, header checks, compile-fail tests, benchmarks, examples) and runs every test. The storage suite needs
# the Redis test cluster (scripts/redis-cluster.sh): started here when it does not run, and then stopped again
# when ctest ends, passing or not; one that already ran (.ci/run's) is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default
if ! scripts/redis-cluster.sh status >/dev/null 2>&1; then
  trap 'scripts/redis-cluster.sh stop' EXIT
  scripts/redis-cluster.sh start
fi
ctest --preset default
