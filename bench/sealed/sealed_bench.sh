#!/bin/bash
# bench/sealed/sealed_bench.sh - what sealed RC costs (docs/sealed.md,
# issue 43), between two network namespaces joined by a veth pair at its
# defaults (MTU 1500: IB MTU 1024 for both), in one run:
#   - ib_write_lat 8 B (median, average, p99.9) and ib_write_bw 64 KiB
#     (MB/s and the CPU seconds both processes used per GB moved), sealed
#     (SOFTRNIC_SEAL=require on both ends, one key) against plain, A/B
#     alternated within each run, --runs times;
#   - ib_send_lat 8 B the same way: its receiver polls its CQ, so the
#     application takes the packets itself and no progress-thread wake-up
#     is in the round trip (ib_write_lat's target spins on memory instead,
#     and waits for the engine's check of a polling application);
#   - the cipher alone on one core: bench/sealed/aead_bench.cc (softrnic's
#     seal, OpenSSL's AES-256-GCM and ChaCha20-Poly1305, libsodium's).
# Placement: unpinned; servers in namespace B, clients in A. Medians over
# the runs, every run's value listed. Needs root and perftest.
#
#   bench/sealed/sealed_bench.sh [--runs N] [--lib-dir DIR] [--out FILE]
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
[[ -e "$LIB_DIR/libibverbs.so.1" ]] || { echo "no softrnic libraries in $LIB_DIR (build first)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 2; }
for t in ib_write_lat ib_send_lat ib_write_bw /usr/bin/time; do
  command -v $t >/dev/null || { echo "$t missing" >&2; exit 2; }
done
OUT=${OUT:-$ROOT/bench/results/sealed-latest.md}
NA=sbsla NB=sbslb IPA=10.247.0.1 IPB=10.247.0.2
TMP=$(mktemp -d)
source "$ROOT/bench/lib/netns_pair.sh"
down() { bench_pair_down $NA $NB; rm -rf "$TMP"; }
trap down EXIT
bench_pair_up $NA $NB $IPA $IPB || exit 1

export LD_LIBRARY_PATH=$LIB_DIR
unset SOFTRNIC_BIND SOFTRNIC_PORT SOFTRNIC_TRANSPORT SOFTRNIC_FAULTS SOFTRNIC_SEAL SOFTRNIC_SEAL_KEY
KEY=$TMP/seal.key
head -c 32 /dev/urandom >"$KEY" && chmod 600 "$KEY"
PORT=19700

# pair SEALED TOOL ARGS...: one server in B, one client in A, each under
# /usr/bin/time; the client's result row, then the CPU seconds of both.
pair() {
  local sealed=$1 tool=$2; shift 2
  local env=(env)
  (( sealed )) && env=(env SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY="$KEY")
  PORT=$((PORT + 1))
  timeout 120 ip netns exec $NB "${env[@]}" /usr/bin/time -f "cpu %U %S" -o "$TMP/s.time" \
    $tool -F -x 0 -p $PORT "$@" >"$TMP/s.log" 2>&1 &
  local s=$!
  for _ in $(seq 100); do ip netns exec $NB ss -Hltn "sport = :$PORT" | grep -q . && break; sleep 0.05; done
  timeout 120 ip netns exec $NA "${env[@]}" /usr/bin/time -f "cpu %U %S" -o "$TMP/c.time" \
    $tool -F -x 0 -p $PORT "$@" $IPB >"$TMP/c.log" 2>&1
  wait $s
  local row cpu
  row=$(awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print; exit}' "$TMP/c.log")
  cpu=$(cat "$TMP/s.time" "$TMP/c.time" | awk '$1 == "cpu" {s += $2 + $3} END {print s}')
  echo "$row cpu $cpu"
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

declare -A VAL
add() { VAL[$1]="${VAL[$1]:-} $2"; }
BW_ITERS=20000
for r in $(seq "$RUNS"); do
  for sealed in 1 0; do   # A/B alternated within each run
    row=$(pair $sealed ib_write_lat -s 8 -n 10000)  # t_min t_max t_typical t_avg t_stdev 99% 99.9%
    add "lat_med_$sealed" "$(awk '{print $5}' <<<"$row")"
    add "lat_avg_$sealed" "$(awk '{print $6}' <<<"$row")"
    add "lat_p999_$sealed" "$(awk '{print $9}' <<<"$row")"
    row=$(pair $sealed ib_send_lat -s 8 -n 10000)
    add "slat_med_$sealed" "$(awk '{print $5}' <<<"$row")"
    add "slat_avg_$sealed" "$(awk '{print $6}' <<<"$row")"
    add "slat_p999_$sealed" "$(awk '{print $9}' <<<"$row")"
    row=$(pair $sealed ib_write_bw -s 65536 -n $BW_ITERS)
    add "bw_$sealed" "$(awk '{print $4}' <<<"$row")"
    # CPU seconds of both processes (setup included) per GB moved.
    add "cpu_$sealed" "$(awk -v n=$BW_ITERS '{for (i = 1; i < NF; i++) if ($i == "cpu") c = $(i + 1)} END {printf "%.3f", c / (n * 65536 / 1e9)}' <<<"$row")"
  done
done

# The cipher alone, one core: aead_bench (Google Benchmark, aead_bench.cc),
# ns per packet by payload size for softrnic's seal and the AEADs compared.
AEAD_BENCH=${AEAD_BENCH:-$(dirname "$LIB_DIR")/bin/aead_bench}
aead_rows=""
if [[ -x "$AEAD_BENCH" ]]; then
  aead_rows=$("$AEAD_BENCH" --benchmark_min_time=0.3 --benchmark_format=csv 2>/dev/null |
    awk -F, '$1 ~ /^"[A-Za-z0-9]+\/[0-9]+"$/ {gsub(/"/, "", $1); split($1, n, "/");
      ns[n[1]] = ns[n[1]] " | " sprintf("%.0f", $4); if (!(n[1] in seen)) {order[++k] = n[1]; seen[n[1]] = 1}}
      END {for (i = 1; i <= k; i++) print "| " order[i] ns[order[i]] " |"}')
fi

m() { tr ' ' '\n' <<<"${VAL[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
{
  echo "## Sealed RC (issue 43): $(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  echo
  echo "\`bench/sealed/sealed_bench.sh --runs $RUNS\`: two namespaces on a veth at its defaults"
  echo "(MTU 1500, IB MTU 1024), server in one and client in the other, unpinned; medians of"
  echo "$RUNS runs (every run in brackets), sealed (\`SOFTRNIC_SEAL=require\`, one key) and plain"
  echo "alternated within each run. CPU: user + system seconds of both processes, setup"
  echo "included, per GB moved."
  echo
  echo "| measure | sealed | plain | sealed / plain |"
  echo "| --- | --- | --- | --- |"
  echo "| ib_write_lat 8 B median, µs | $(m lat_med_1) [${VAL[lat_med_1]# }] | $(m lat_med_0) [${VAL[lat_med_0]# }] | $(ratio "$(m lat_med_1)" "$(m lat_med_0)") |"
  echo "| ib_write_lat 8 B average, µs | $(m lat_avg_1) | $(m lat_avg_0) | $(ratio "$(m lat_avg_1)" "$(m lat_avg_0)") |"
  echo "| ib_write_lat 8 B p99.9, µs | $(m lat_p999_1) | $(m lat_p999_0) | $(ratio "$(m lat_p999_1)" "$(m lat_p999_0)") |"
  echo "| ib_send_lat 8 B median, µs | $(m slat_med_1) [${VAL[slat_med_1]# }] | $(m slat_med_0) [${VAL[slat_med_0]# }] | $(ratio "$(m slat_med_1)" "$(m slat_med_0)") |"
  echo "| ib_send_lat 8 B average, µs | $(m slat_avg_1) | $(m slat_avg_0) | $(ratio "$(m slat_avg_1)" "$(m slat_avg_0)") |"
  echo "| ib_send_lat 8 B p99.9, µs | $(m slat_p999_1) | $(m slat_p999_0) | $(ratio "$(m slat_p999_1)" "$(m slat_p999_0)") |"
  echo "| ib_write_bw 64 KiB, MB/s | $(m bw_1) [${VAL[bw_1]# }] | $(m bw_0) [${VAL[bw_0]# }] | $(ratio "$(m bw_1)" "$(m bw_0)") |"
  echo "| CPU per GB (both processes), s | $(m cpu_1) [${VAL[cpu_1]# }] | $(m cpu_0) [${VAL[cpu_0]# }] | $(ratio "$(m cpu_1)" "$(m cpu_0)") |"
  if [[ -n "$aead_rows" ]]; then
    echo
    echo "The cipher alone, one core, ns per packet (\`aead_bench\`, same run):"
    echo
    echo "| case | 8 B | 256 B | 1 KiB | 4 KiB |"
    echo "| --- | ---: | ---: | ---: | ---: |"
    echo "$aead_rows"
  fi
} | tee "$OUT"
