#!/bin/bash
# bench/sealed/sealed_bench.sh - what sealed RC costs (docs/sealed.md,
# issue 43), between two network namespaces joined by a veth pair at its
# defaults (MTU 1500: IB MTU 1024 for both), in one run:
#   - ib_write_lat 8 B (median, average, p99.9) and ib_write_bw 64 KiB
#     (MB/s and the CPU seconds both processes used per GB moved), sealed
#     (SOFTRNIC_SEAL=require on both ends, one key) against plain, A/B
#     alternated within each run, --runs times;
#   - the floor: `openssl speed` of AES-256-GCM on 1 KiB and 4 KiB blocks,
#     one core (what the cipher alone allows per direction), and of
#     ChaCha20-Poly1305, the other AEAD the issue names, the same way.
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
for t in ib_write_lat ib_write_bw openssl /usr/bin/time; do
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
    row=$(pair $sealed ib_write_bw -s 65536 -n $BW_ITERS)
    add "bw_$sealed" "$(awk '{print $4}' <<<"$row")"
    # CPU seconds of both processes (setup included) per GB moved.
    add "cpu_$sealed" "$(awk -v n=$BW_ITERS '{for (i = 1; i < NF; i++) if ($i == "cpu") c = $(i + 1)} END {printf "%.3f", c / (n * 65536 / 1e9)}' <<<"$row")"
  done
done

floor() {  # floor CIPHER BYTES: the AEAD's MB/s on one core (OpenSSL's EVP)
  openssl speed -elapsed -seconds 2 -bytes "$2" -evp "$1" 2>/dev/null |
    awk 'NF >= 2 && $NF ~ /k$/ {v = $NF} END {sub(/k$/, "", v); printf "%.0f", v * 1000 / 1e6}'
}
f1k=$(floor aes-256-gcm 1024) f4k=$(floor aes-256-gcm 4096)
c1k=$(floor chacha20-poly1305 1024) c4k=$(floor chacha20-poly1305 4096)

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
  echo "| ib_write_bw 64 KiB, MB/s | $(m bw_1) [${VAL[bw_1]# }] | $(m bw_0) [${VAL[bw_0]# }] | $(ratio "$(m bw_1)" "$(m bw_0)") |"
  echo "| CPU per GB (both processes), s | $(m cpu_1) [${VAL[cpu_1]# }] | $(m cpu_0) [${VAL[cpu_0]# }] | $(ratio "$(m cpu_1)" "$(m cpu_0)") |"
  echo "| floor: AES-256-GCM on one core, 1 KiB / 4 KiB blocks, MB/s | $f1k / $f4k | | |"
  echo "| the alternative: ChaCha20-Poly1305 on one core, 1 KiB / 4 KiB, MB/s | $c1k / $c4k | | |"
} | tee "$OUT"
