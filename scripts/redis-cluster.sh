#!/usr/bin/env bash
# A 3-master Redis Cluster on 127.0.0.1 for RedisClusterStorage's tests and benchmark: no replicas, no
# persistence, 256 MB per node evicting the least recently used keys, live nodes serving their slots while
# another is down (cluster-require-full-coverage no).
#   scripts/redis-cluster.sh start            starts it and waits for cluster_state:ok (a no-op when it runs)
#   scripts/redis-cluster.sh stop             stops the nodes it started, by the PIDs in their files
#   scripts/redis-cluster.sh status           says how each node is; exit 0 when the cluster runs and is ok
#   scripts/redis-cluster.sh kill-node N      kills node N (1..3) as a crash would (SIGKILL), by its PID
#   scripts/redis-cluster.sh restart-node N   starts node N again from its files; it rejoins the cluster
# The nodes listen on 127.0.0.1:7301-7303 (the tests read UNIKV_REDIS_CLUSTER=127.0.0.1:7301); each keeps its
# redis.conf, nodes.conf, redis.pid and redis.log in build/redis-cluster/<port>/. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
ports=(7301 7302 7303)
root="$PWD/build/redis-cluster"

die() {
  echo "redis-cluster: $*" >&2
  exit 1
}
cli() { timeout 5 redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
pid_of() { cat "$root/$1/redis.pid" 2>/dev/null || true; }
# True when $1 is a live (not zombie) redis-server of port $2: a PID is never signalled unless it is ours.
alive() {
  local pid=$1 port=$2 state
  [[ -n "$pid" && -r /proc/$pid/stat ]] || return 1
  state=$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)
  [[ "$state" != Z ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "redis-server.*:$port"
}
node_alive() { alive "$(pid_of "$1")" "$1"; }
node_ok() { cli "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }
# Waits up to $1 tenths of a second for command "${@:2}" to succeed.
wait_for() {
  local tenths=$1
  shift
  for ((i = 0; i < tenths; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
all_ok() {
  for port in "${ports[@]}"; do node_ok "$port" || return 1; done
}
node_gone() { ! node_alive "$1"; }
port_of() {
  [[ "${1:-}" =~ ^[1-3]$ ]] || die "name a node 1..3 (got '${1:-}')"
  echo "${ports[$(($1 - 1))]}"
}

write_config() {
  local port=$1 dir="$root/$1"
  mkdir -p "$dir"
  cat >"$dir/redis.conf" <<EOF
# unikv test cluster node (scripts/redis-cluster.sh)
port $port
bind 127.0.0.1
protected-mode yes
daemonize yes
pidfile $dir/redis.pid
logfile $dir/redis.log
dir $dir
save ""
appendonly no
maxmemory 256mb
maxmemory-policy allkeys-lru
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
cluster-require-full-coverage no
EOF
}

start_node() {
  local port=$1 dir="$root/$1"
  command -v redis-server >/dev/null || die "redis-server is missing: scripts/install-deps.sh installs it"
  [[ -f "$dir/redis.conf" ]] || die "no configuration for port $port in $dir; run stop, then start"
  rm -f "$dir/redis.pid"
  # By its full path, which INFO's executable field then names (a test restarts a node it killed that way).
  "$(command -v redis-server)" "$dir/redis.conf" || die "redis-server did not start on port $port (see $dir/redis.log)"
  wait_for 50 node_alive "$port" || die "node $port did not write its PID file (see $dir/redis.log)"
  wait_for 50 cli "$port" ping >/dev/null 2>&1 || die "node $port does not answer (see $dir/redis.log)"
}

start() {
  local running=0
  for port in "${ports[@]}"; do node_alive "$port" && running=$((running + 1)); done
  if ((running == ${#ports[@]})) && all_ok; then
    echo "redis-cluster: already running on 127.0.0.1:${ports[0]}-${ports[-1]}"
    return 0
  fi
  if ((running == 0)); then
    for port in "${ports[@]}"; do
      if cli "$port" ping >/dev/null 2>&1; then
        die "port $port answers but is not this script's node; stop that server or free ports ${ports[*]}"
      fi
    done
    rm -rf "$root"
    for port in "${ports[@]}"; do
      write_config "$port"
      start_node "$port"
    done
    local nodes=()
    for port in "${ports[@]}"; do nodes+=("127.0.0.1:$port"); done
    timeout 30 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$root/create.log" 2>&1 ||
      die "redis-cli --cluster create failed (see $root/create.log)"
  else
    # Some nodes run: start the others from their files, they rejoin.
    for port in "${ports[@]}"; do node_alive "$port" || start_node "$port"; done
  fi
  wait_for 100 all_ok || die "the cluster is not ok after 10 s (see $root/*/redis.log); run stop, then start"
  echo "redis-cluster: running on 127.0.0.1:${ports[0]}-${ports[-1]} (UNIKV_REDIS_CLUSTER=127.0.0.1:${ports[0]})"
}

stop() {
  local pids=()
  for port in "${ports[@]}"; do
    local pid
    pid=$(pid_of "$port")
    if alive "$pid" "$port"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$port")
    fi
  done
  for port in "${pids[@]}"; do
    if ! wait_for 50 node_gone "$port"; then
      kill -KILL "$(pid_of "$port")" 2>/dev/null || true
      wait_for 20 node_gone "$port" || die "node $port (PID $(pid_of "$port")) does not exit"
    fi
  done
  for port in "${ports[@]}"; do rm -f "$root/$port/redis.pid"; done
  echo "redis-cluster: stopped"
}

status() {
  local good=0
  for port in "${ports[@]}"; do
    if node_alive "$port"; then
      local state
      state=$(cli "$port" cluster info 2>/dev/null | grep '^cluster_state:' | tr -d '\r' || true)
      echo "127.0.0.1:$port PID $(pid_of "$port") ${state:-cluster_state:unknown}"
      [[ "$state" == cluster_state:ok ]] && good=$((good + 1))
    else
      echo "127.0.0.1:$port not running"
    fi
  done
  ((good == ${#ports[@]}))
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  kill-node)
    port=$(port_of "${2:-}")
    pid=$(pid_of "$port")
    alive "$pid" "$port" || die "node $port is not running"
    kill -KILL "$pid"
    wait_for 50 node_gone "$port" || die "node $port (PID $pid) does not exit"
    ;;
  restart-node)
    port=$(port_of "${2:-}")
    node_alive "$port" || start_node "$port"
    wait_for 100 node_ok "$port" || die "node $port is not ok after 10 s (see $root/$port/redis.log)"
    ;;
  *) die "usage: $0 start|stop|status|kill-node N|restart-node N" ;;
esac
