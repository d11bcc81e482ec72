#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the default preset (test suites under ASan +
# UBSan, header checks, compile-fail tests, benchmarks, examples) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default
