#!/usr/bin/env bash
# The README's main job: builds and runs the walkthrough on the CPU backend (the real allocator and tree
# through the action executor, with every token row checked). Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target arena_walkthrough >/dev/null
exec build/default/examples/arena_walkthrough "$@"
