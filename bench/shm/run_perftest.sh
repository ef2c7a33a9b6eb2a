#!/usr/bin/env bash
# perftest over the shared-memory transport, as docs/shm.md reports it.
#
#   bench/shm/run_perftest.sh [BUILD_DIR] [RUNS] [pinned|unpinned]
#
# Runs ib_write_lat / ib_send_lat (8 B) and ib_write_bw / ib_read_bw (64 KiB)
# RUNS times each (default 3), server and client on 127.0.0.1 with GID 0;
# pinned = client `taskset -c 0`, server `taskset -c 1`. Prints one line per
# run: tool, t_typical and t_avg (usec) for latency, BW average (GB/s =
# MB/s / 1000, perftest's MB is 2^20 bytes: converted) for bandwidth.
set -u
BUILD=${1:-build}
RUNS=${2:-3}
MODE=${3:-pinned}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
export LD_LIBRARY_PATH="$BUILD/lib"
export SOFTRNIC_TRANSPORT=${SOFTRNIC_TRANSPORT:-shm}
port=$((19000 + RANDOM % 5000))
srv_pin=() cli_pin=()
if [[ "$MODE" == pinned ]]; then srv_pin=(taskset -c 1); cli_pin=(taskset -c 0); fi

run() {  # tool args...
  local tool=$1; shift
  port=$((port + 1))
  "${srv_pin[@]}" timeout 60 "$tool" -x 0 -p "$port" "$@" >/tmp/shm_srv.$$ 2>&1 &
  local spid=$!
  sleep 0.4
  local out
  out=$("${cli_pin[@]}" timeout 60 "$tool" -x 0 -p "$port" "$@" 127.0.0.1 2>&1)
  wait "$spid"
  case "$tool" in
    *lat) awk -v t="$tool" '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ {printf "%s typical %s avg %s\n", t, $5, $6}' <<<"$out" ;;
    *bw)  awk -v t="$tool" '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ {printf "%s bw_avg_GBps %.2f\n", t, $4 * 1048576 / 1e9}' <<<"$out" ;;
  esac
}

for ((i = 0; i < RUNS; i++)); do
  run ib_write_lat -s 8 -n 20000
  run ib_send_lat -s 8 -n 20000
  run ib_write_bw -s 65536 -n 20000
  run ib_read_bw -s 65536 -n 20000
done
