#!/usr/bin/env bash
# Installs the Debian packages the host build needs, only those that are missing. The CUDA toolkit (nvcc and
# CCCL under /usr/local/cuda) is optional: without it the Thrust comparison benchmark and the CUDA preset
# are skipped. libsimdjson-dev reads the simulator's traces, libcli11-dev parses its command line, gnuplot-nox
# draws its --plot. libxxhash-dev hashes the storage tier's object keys and checksums (storage/object_key.hpp).
# libhiredis-dev is RedisClusterStorage's Redis client (storage/redis_cluster_storage.hpp).
# redis-server (with redis-cli) runs the Redis test cluster of the storage tests (scripts/redis-cluster.sh).
set -euo pipefail
packages=(cmake ninja-build g++ doctest-dev libbenchmark-dev libsimdjson-dev libcli11-dev gnuplot-nox libxxhash-dev
  libhiredis-dev redis-server)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "unikv: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
