#!/bin/bash
# bench/host_nic/host_nic_bench.sh - the host NIC's rows (docs/host-nic.md,
# issue 38) in one run, between two network namespaces joined by a veth pair
# left at its defaults (MTU 1500, GSO as the kernel sets it):
#   - ib_write_lat 8 B and ib_write_bw 64 KiB with the host NIC (steering by
#     nicd's program) against the same build with it bypassed
#     (SOFTRNIC_HOST_NIC=0: the process owns the address alone), A/B
#     alternated, --runs times each;
#   - ib_read_lat and ib_atomic_lat 8 B beside ib_write_lat (steered);
#   - the aggregate ib_write_bw of 8 pairs at once (8 servers at B's one
#     address) against one pair.
# Placement: unpinned; servers in namespace B, clients in A. Medians over the
# runs, with every run's value listed. Needs root and perftest.
#
#   bench/host_nic/host_nic_bench.sh [--runs N] [--lib-dir DIR] [--out FILE]
set -u
RUNS=3 LIB_DIR="" OUT=""
while (( $# )); do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --lib-dir) LIB_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--lib-dir DIR] [--out FILE]" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LIB_DIR=${LIB_DIR:-$ROOT/build/lib}
[[ -x "$LIB_DIR/softrnic-nicd" ]] || { echo "no softrnic-nicd in $LIB_DIR (build first)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 2; }
for t in ib_write_lat ib_write_bw ib_read_lat ib_atomic_lat; do
  command -v $t >/dev/null || { echo "$t missing (apt-get install perftest)" >&2; exit 2; }
done
OUT=${OUT:-$ROOT/bench/results/host_nic-latest.md}
NA=sbhna NB=sbhnb IPA=10.249.0.1 IPB=10.249.0.2
TMP=$(mktemp -d)
source "$ROOT/bench/lib/netns_pair.sh"
down() { bench_pair_down $NA $NB; rm -rf "$TMP"; }
trap down EXIT
bench_pair_up $NA $NB $IPA $IPB || exit 1

export LD_LIBRARY_PATH=$LIB_DIR
unset SOFTRNIC_BIND SOFTRNIC_PORT SOFTRNIC_TRANSPORT SOFTRNIC_FAULTS
PORT=19800

# pair HOSTNIC TOOL ARGS...: one server in B, one client in A; the client's
# result row on stdout.
pair() {
  local hn=$1 tool=$2; shift 2
  PORT=$((PORT + 1))
  SOFTRNIC_HOST_NIC=$hn timeout 120 ip netns exec $NB $tool -F -x 0 -p $PORT "$@" >"$TMP/s.log" 2>&1 &
  local s=$!
  for _ in $(seq 100); do ip netns exec $NB ss -Hltn "sport = :$PORT" | grep -q . && break; sleep 0.05; done
  SOFTRNIC_HOST_NIC=$hn timeout 120 ip netns exec $NA $tool -F -x 0 -p $PORT "$@" $IPB >"$TMP/c.log" 2>&1
  wait $s
  awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print; exit}' "$TMP/c.log"
  # nicd leaves about 2 s after its last process: the next pair meets a fresh one
  sleep 2.5
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

declare -A VAL
add() { VAL[$1]="${VAL[$1]:-} $2"; }
for r in $(seq "$RUNS"); do
  for hn in 1 0; do   # A/B alternated within each run
    row=$(pair $hn ib_write_lat -s 8 -n 10000)  # t_min t_max t_typical t_avg t_stdev 99% 99.9%
    add "write_lat_med_$hn" "$(awk '{print $5}' <<<"$row")"
    add "write_lat_avg_$hn" "$(awk '{print $6}' <<<"$row")"
    add "write_lat_p999_$hn" "$(awk '{print $9}' <<<"$row")"
    row=$(pair $hn ib_write_bw -s 65536 -n 5000)
    add "write_bw_$hn" "$(awk '{print $4}' <<<"$row")"
  done
  add read_lat "$(pair 1 ib_read_lat -s 8 -n 5000 | awk '{print $5}')"
  add atomic_lat "$(pair 1 ib_atomic_lat -n 5000 | awk '{print $5}')"
  add write_lat_again "$(pair 1 ib_write_lat -s 8 -n 5000 | awk '{print $5}')"
done

# 8 pairs at once against one pair (steered), one run each.
one=$(pair 1 ib_write_bw -s 65536 -n 3000 | awk '{print $4}')
for i in $(seq 0 7); do
  SOFTRNIC_HOST_NIC=1 timeout 180 ip netns exec $NB ib_write_bw -F -x 0 -p $((19900 + i)) -s 65536 -n 3000 \
    >"$TMP/ms$i.log" 2>&1 &
done
for i in $(seq 0 7); do
  for _ in $(seq 100); do ip netns exec $NB ss -Hltn "sport = :$((19900 + i))" | grep -q . && break; sleep 0.05; done
done
for i in $(seq 0 7); do
  SOFTRNIC_HOST_NIC=1 timeout 180 ip netns exec $NA ib_write_bw -F -x 0 -p $((19900 + i)) -s 65536 -n 3000 $IPB \
    >"$TMP/mc$i.log" 2>&1 &
done
wait
agg=0
for i in $(seq 0 7); do
  v=$(awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print $4; exit}' "$TMP/mc$i.log")
  agg=$(awk -v a="$agg" -v b="${v:-0}" 'BEGIN {print a + b}')
done

m() { tr ' ' '\n' <<<"${VAL[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
{
  echo "## Host NIC (issue 38): $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  echo
  echo "\`bench/host_nic/host_nic_bench.sh --runs $RUNS\`: two namespaces on a veth at its"
  echo "defaults, server in one and client in the other, unpinned; medians of $RUNS runs"
  echo "(every run in brackets), steered (host NIC) and bypassed (\`SOFTRNIC_HOST_NIC=0\`)"
  echo "alternated within each run."
  echo
  echo "| measure | steered | bypassed | ratio | target |"
  echo "| --- | --- | --- | --- | --- |"
  echo "| ib_write_lat 8 B median, µs | $(m write_lat_med_1) [${VAL[write_lat_med_1]# }] | $(m write_lat_med_0) [${VAL[write_lat_med_0]# }] | $(ratio "$(m write_lat_med_1)" "$(m write_lat_med_0)") | <= 1.05 |"
  echo "| ib_write_lat 8 B average, µs | $(m write_lat_avg_1) | $(m write_lat_avg_0) | $(ratio "$(m write_lat_avg_1)" "$(m write_lat_avg_0)") | |"
  echo "| ib_write_lat 8 B p99.9, µs | $(m write_lat_p999_1) | $(m write_lat_p999_0) | $(ratio "$(m write_lat_p999_1)" "$(m write_lat_p999_0)") | |"
  echo "| ib_write_bw 64 KiB, MB/s | $(m write_bw_1) [${VAL[write_bw_1]# }] | $(m write_bw_0) [${VAL[write_bw_0]# }] | $(ratio "$(m write_bw_1)" "$(m write_bw_0)") | >= 0.95 |"
  echo "| ib_read_lat 8 B median / ib_write_lat, µs | $(m read_lat) / $(m write_lat_again) [${VAL[read_lat]# }] | | $(ratio "$(m read_lat)" "$(m write_lat_again)") | <= 1.2 |"
  echo "| ib_atomic_lat median / ib_write_lat, µs | $(m atomic_lat) / $(m write_lat_again) [${VAL[atomic_lat]# }] | | $(ratio "$(m atomic_lat)" "$(m write_lat_again)") | <= 1.2 |"
  echo "| ib_write_bw 64 KiB, 8 pairs at B's one address (sum) / 1 pair, MB/s | $agg / $one | | $(ratio "$agg" "$one") | >= 0.9 |"
} | tee "$OUT"
