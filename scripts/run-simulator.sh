#!/usr/bin/env bash
# The README's main job: builds unikv-sim and replays the whole carried Mooncake trace (3,993 requests) on a
# cluster of 8 simulated H200s running Gemma-3-27B behind a prefix-aware router, at the load where prefilling every
# prompt without reuse would take 70% of their compute (--target-load 0.7), sharing one 8 TiB file store under
# build/sim-store. It replays the unified arena with every tier, then without the storage tier, without the host
# tier, and a static FULL/SWA split (SGLang's default ratio) with every tier (--compare-tiers), and draws occupancy
# per instance and hit rate over time into build/simulator.png. About a minute here. Extra arguments go to unikv-sim
# (a later flag overrides these; --arrival-scale cannot be given beside the script's --target-load: give
# --target-load instead).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target unikv-sim >/dev/null
exec build/default/sim/unikv-sim --trace data/traces/mooncake_synthetic_trace.jsonl \
  --model gemma-3-27b --device-memory 80GiB --host-memory 256GiB --write-policy back \
  --instances 8 --router prefix --target-load 0.7 --storage file:build/sim-store --storage-size 8TiB \
  --compare-tiers --plot build/simulator.png "$@"
