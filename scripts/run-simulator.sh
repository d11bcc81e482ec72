#!/usr/bin/env bash
# The README's main job: builds unikv-sim and replays the carried Mooncake trace through unikv::Cache with the
# Gemma-3-27B preset (its first 1,000 requests, 273 s of arrivals, so the six replays finish in about half a
# minute), the unified arena beside static FULL/SWA splits of the same memory (--compare-static),
# and draws occupancy and hit rate over time into build/simulator.png. Extra arguments go to unikv-sim (a later
# --device-memory or --host-memory overrides these).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target unikv-sim >/dev/null
exec build/default/sim/unikv-sim --trace data/traces/mooncake_synthetic_trace.jsonl --max-requests 1000 \
  --model gemma-3-27b --device-memory 80GiB --host-memory 512GiB --write-policy back --compare-static \
  --plot build/simulator.png "$@"
