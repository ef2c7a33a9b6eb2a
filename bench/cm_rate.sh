#!/usr/bin/env bash
# cm_rate.sh - rdma_cm connection rate: Debian's unmodified cmtime
# (rdmacm-utils) on softrnic's librdmacm.so.1 + libibverbs.so.1, server and
# client on this host (the client connects to 127.0.0.1), as the rdmacm_tools
# test runs it (tests/integration/rdmacm/test_tools.sh, case cmtime). A
# benchmark, not a test: it prints and records figures, it asserts nothing.
#
#   bench/cm_rate.sh                        # -c 100 and -c 1000, 3 runs each
#   bench/cm_rate.sh --counts 1000 --runs 5
#   bench/cm_rate.sh --env SOFTRNIC_RETRANSMIT=gbn   # both processes
#
# cmtime's client creates N ids, then runs each step (resolve addr, resolve
# route, create QP, connect, disconnect, destroy) for all N at once and waits
# for the N events. For the "connect" step (rdma_connect to ESTABLISHED) it
# prints: total ms (the whole step, first rdma_connect to last ESTABLISHED),
# max ms and min us (the slowest and the fastest connection, rdma_connect to
# its ESTABLISHED, queueing behind the others included) and us / conn (total
# / N: the inverse of the rate; cmtime 44 prints no per-connection mean).
# Reported per run: connects/s = N / total, those four figures, and the same
# for "disconnect". The target (issue 17): >= 10,000 connects/s with
# -c 1000, no connect slower than 1 ms.
#
# Options:
#   --counts "100 1000"  connections per run (cmtime -c)
#   --runs N             runs per count (default 3); the summary is the median
#   --port P             first port (default 21790; run i uses P + i)
#   --env VAR=VALUE      set in both processes (repeatable)
#   --lib-dir DIR        softrnic's lib/ (default <repo>/build/lib; build it
#                        with scripts/build.sh RelWithDebInfo build)
#   --out FILE           raw results (default <repo>/bench/results/cm-rate-latest.tsv)
# Environment: CM_RATE_KEEP=1 keeps the logs directory.
#
# Every process is bounded by `timeout`; the server is killed at exit.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
COUNTS="100 1000" RUNS=3 PORT=21790 LIB_DIR="$REPO/build/lib"
OUT="$REPO/bench/results/cm-rate-latest.tsv"
EXTRA_ENV=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --counts) COUNTS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --env) EXTRA_ENV+=("$2"); shift 2 ;;
    --lib-dir) LIB_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cm_rate.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

command -v cmtime >/dev/null || { echo "cm_rate.sh: cmtime not found (apt-get install rdmacm-utils)" >&2; exit 2; }
[[ -e "$LIB_DIR/librdmacm.so.1" && -e "$LIB_DIR/libibverbs.so.1" ]] ||
  { echo "cm_rate.sh: no softrnic librdmacm.so.1 / libibverbs.so.1 in $LIB_DIR" >&2; exit 2; }
LIB_DIR=$(cd "$LIB_DIR" && pwd)

LOGS=$(mktemp -d /tmp/cm_rate.XXXXXX)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
  if [[ "${CM_RATE_KEEP:-0}" == 1 ]]; then echo "logs kept in $LOGS"; else rm -rf "$LOGS"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_env=(env LD_LIBRARY_PATH="$LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "${EXTRA_ENV[@]}")
registry="/dev/shm/softrnic-cm-$(id -u)"

mkdir -p "$(dirname "$OUT")"
printf 'count\trun\tconnects_per_s\tconnect_total_ms\tconnect_max_ms\tconnect_min_us\tconnect_us_per_conn\tdisconnect_total_ms\tdisconnect_max_ms\tdisconnect_min_us\n' >"$OUT"

echo "# cm_rate.sh $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# env: ${EXTRA_ENV[*]:-(none)}; lib: $LIB_DIR"
printf '%6s %4s %12s %12s %10s %10s %12s %14s %12s\n' count run connects/s total_ms max_ms min_us us/conn disc_total_ms disc_max_ms
i=0
for n in $COUNTS; do
  for ((r = 1; r <= RUNS; r++)); do
    port=$((PORT + i)); i=$((i + 1))
    slog="$LOGS/server-$n-$r.log" clog="$LOGS/client-$n-$r.log"
    timeout -k 5 300 "${run_env[@]}" cmtime -p "$port" -c "$n" >"$slog" 2>&1 &
    SERVER_PID=$!
    # The listener is up once it is in softrnic's host registry (port
    # space 0x106, TCP: docs/rdmacm.md "Addressing").
    for ((w = 0; w < 100; w++)); do
      compgen -G "$registry/*-106-$port" >/dev/null && break
      sleep 0.05
    done
    crc=0
    timeout -k 5 300 "${run_env[@]}" cmtime -s 127.0.0.1 -p "$port" -c "$n" >"$clog" 2>&1 || crc=$?
    kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""
    conn=$(awk '$1 == "connect" {print $3, $4, $5, $6}' "$clog")
    disc=$(awk '$1 == "disconnect" {print $3, $4, $5}' "$clog")
    if (( crc != 0 )) || [[ -z "$conn" ]]; then
      echo "cm_rate.sh: -c $n run $r failed (client rc $crc); last lines:" >&2
      tail -5 "$clog" >&2
      continue
    fi
    read -r total max min per <<<"$conn"
    read -r dtotal dmax dmin <<<"${disc:-- - -}"
    rate=$(awk -v n="$n" -v t="$total" 'BEGIN { printf "%.0f", (t > 0 ? n * 1000 / t : 0) }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$r" "$rate" "$total" "$max" "$min" "$per" \
      "$dtotal" "$dmax" "$dmin" >>"$OUT"
    printf '%6s %4s %12s %12s %10s %10s %12s %14s %12s\n' "$n" "$r" "$rate" "$total" "$max" "$min" "$per" "$dtotal" "$dmax"
  done
done

echo "# medians (min-max) per count:"
awk -F'\t' 'NR > 1 { k = $1; n[k]++; rate[k, n[k]] = $3; mx[k, n[k]] = $5; mn[k, n[k]] = $6 }
  function med(a, k, c,   i, j, t, v) {
    for (i = 1; i <= c; i++) v[i] = a[k, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((c + 1) / 2)] " (" v[1] "-" v[c] ")"
  }
  END { for (k in n) printf "#   -c %s: %s connects/s, slowest connect %s ms, fastest %s us (n=%d)\n",
                             k, med(rate, k, n[k]), med(mx, k, n[k]), med(mn, k, n[k]), n[k] }' "$OUT"
echo "# raw: $OUT"
echo "# reproduce: bench/cm_rate.sh --counts \"$COUNTS\" --runs $RUNS$(for e in "${EXTRA_ENV[@]}"; do printf ' --env %s' "$e"; done)"
