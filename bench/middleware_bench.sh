#!/usr/bin/env bash
# middleware_bench.sh - UCX over softrnic beside UCX's own transports, in one run.
#
#   bench/middleware_bench.sh [--runs N] [--build DIR]
#
# Runs Debian's unmodified ucx_perftest (UCP tag_lat 8 B, tag_bw 64 KiB,
# stream_bw 64 KiB), server and client on this host, unpinned (as users
# run it; on 2 vCPUs each process busy-polls on its own CPU), N times each
# (default 5), alternating the configurations within every repetition:
#   softrnic  UCX_TLS=rc_v,ud_v,self over softrnic (`softrnic run`): its
#             shared-memory path, one-sided operations direct into the
#             peer's memory
#   softrnic-udp  the same with SOFTRNIC_TRANSPORT=udp (RoCE v2 over UDP on
#             loopback)
#   ucx-posix UCX_TLS=posix,self (UCX's own shared memory)
#   ucx-tcp   UCX_TLS=tcp,self (kernel TCP on loopback)
# Prints a markdown table (median, min, max per figure, ratio of softrnic
# to each UCX transport) and writes bench/results/middleware-latest.tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=5 BUILD="$ROOT/build"
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--build DIR]" >&2; exit 2 ;;
  esac
done
TOOL="$BUILD/bin/softrnic"
[[ -x "$TOOL" ]] || { echo "build softrnic first: scripts/build.sh (needs $TOOL)" >&2; exit 2; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing: apt-get install ucx-utils" >&2; exit 2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
TSV="$ROOT/bench/results/middleware-latest.tsv"
PORT=$(( 30000 + $$ % 5000 ))

# one CONFIG TEST SIZE ITERS: prints the median latency (us) or bandwidth (MB/s)
one() {
  local cfg=$1 test=$2 size=$3 iters=$4 pre=() env=()
  case $cfg in
    softrnic) pre=("$TOOL" run --); env=(UCX_TLS=rc_v,ud_v,self UCX_NET_DEVICES=softrnic0:1) ;;
    softrnic-udp) pre=("$TOOL" run --); env=(UCX_TLS=rc_v,ud_v,self UCX_NET_DEVICES=softrnic0:1 SOFTRNIC_TRANSPORT=udp) ;;
    ucx-posix) env=(UCX_TLS=posix,self) ;;
    ucx-tcp) env=(UCX_TLS=tcp,self) ;;
  esac
  PORT=$(( PORT + 1 ))
  env "${env[@]}" timeout 60 "${pre[@]}" ucx_perftest -p $PORT >/dev/null 2>&1 &
  local srv=$!
  for _ in $(seq 50); do ss -Hltn "sport = :$PORT" | grep -q . && break; sleep 0.1; done
  local out
  out=$(env "${env[@]}" timeout 60 "${pre[@]}" ucx_perftest 127.0.0.1 -p $PORT -t "$test" -s "$size" -n "$iters" 2>/dev/null | grep '^Final:') || true
  wait $srv 2>/dev/null || true
  # Final: iters  p50-lat  avg-lat  overall-lat  avg-bw  overall-bw  avg-rate  overall-rate
  case $test in
    *_lat) echo "$out" | awk '{print $3}' ;;    # 50th percentile latency, us
    *) echo "$out" | awk '{print $7}' ;;        # overall bandwidth, MB/s
  esac
}

CFGS=(softrnic softrnic-udp ucx-posix ucx-tcp)
TESTS=("tag_lat 8 20000" "tag_bw 65536 5000" "stream_bw 65536 5000")
: >"$TMP/raw"
for r in $(seq "$RUNS"); do
  for t in "${TESTS[@]}"; do
    read -r test size iters <<<"$t"
    for cfg in "${CFGS[@]}"; do
      v=$(one "$cfg" "$test" "$size" "$iters")
      printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$cfg" "$test" "$size" "${v:-nan}" >>"$TMP/raw"
    done
  done
  echo "run $r/$RUNS done" >&2
done
mkdir -p "$(dirname "$TSV")"
{ printf 'run\tconfig\ttest\tsize\tvalue\n'; cat "$TMP/raw"; } >"$TSV"

python3 - "$TSV" "${CFGS[@]}" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
cfgs = sys.argv[2:]
tests = []
for r in rows:
    if (r['test'], r['size']) not in tests: tests.append((r['test'], r['size']))
def vals(c, t, s):
    return [float(r['value']) for r in rows if r['config'] == c and r['test'] == t and r['size'] == s and r['value'] != 'nan']
print('| test | ' + ' | '.join(cfgs) + ' | softrnic / posix | softrnic / tcp |')
print('|---' * (len(cfgs) + 3) + '|')
for t, s in tests:
    unit = 'µs' if t.endswith('_lat') else 'MB/s'
    cells, med = [], {}
    for c in cfgs:
        v = vals(c, t, s)
        if not v: cells.append('failed'); continue
        med[c] = statistics.median(v)
        cells.append(f'{med[c]:.2f} ({min(v):.2f}-{max(v):.2f})' if unit == 'µs' else f'{med[c]:.0f} ({min(v):.0f}-{max(v):.0f})')
    ratio = lambda o: f"{med['softrnic'] / med[o]:.2f}x" if 'softrnic' in med and o in med and med[o] else 'n/a'
    print(f'| {t} {s} B ({unit}) | ' + ' | '.join(cells) + f" | {ratio('ucx-posix')} | {ratio('ucx-tcp')} |")
n = len({r['run'] for r in rows})
print(f'\nMedian (min-max) of {n} runs; latency is the 50th percentile, bandwidth the overall figure; '
      'lower latency / higher bandwidth is better.')
PY
