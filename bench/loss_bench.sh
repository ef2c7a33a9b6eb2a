#!/usr/bin/env bash
# loss_bench.sh - selective retransmission vs go-back-N, and congestion
# control, measured with Debian's unmodified ib_write_bw on softrnic between
# two network namespaces (docs/loss.md).
#
#   sudo bench/loss_bench.sh                     # full run (~10 min)
#   sudo bench/loss_bench.sh --runs 1 --secs 3   # quick look
#
# 1. Loss: ib_write_bw 64 KiB, -D SECS, client in namespace A, server in B,
#    joined by a veth; an nftables rule on B's INPUT hook (the receiver: an
#    OUTPUT drop would return EPERM to the sender, unlike a lossy wire) drops
#    a random LOSS % of UDP/4791. For each loss in LOSSES and each mode in
#    MODES (SOFTRNIC_RETRANSMIT=gbn|selective, set on both ends), RUNS
#    repetitions; reports median goodput, spread (min-max), ratio to the
#    same mode's loss-free median, and retransmitted packets (the client's
#    tx_retransmit_packets, printed at exit with SOFTRNIC_STATS=1).
# 2. tbf: 4 ib_write_bw process pairs (per-flow numbers, for Jain's fairness
#    index) at once through A's veth egress shaped with
#    `tc qdisc add dev veth0 root tbf rate TBF_RATE burst 64kb latency 5ms`;
#    reports aggregate goodput vs the link rate, Jain's index and the share of
#    bytes sent again (tx_retransmit_bytes / udp_tx_bytes of the clients).
#
# Targets (issue #7): 1 % loss >= 70 % of loss-free, 5 % >= 40 %; tbf
# aggregate >= 90 % of the rate, Jain >= 0.9, retransmitted bytes <= 5 %.
#
# Options:
#   --runs N          repetitions per point (default 3)
#   --secs S          seconds per ib_write_bw run (-D, default 4)
#   --losses "0 1 5"  loss percentages
#   --modes "gbn selective"
#   --tbf-rate RATE   tc rate for the tbf case (default 400mbit; pick one the
#                     machine can fill: 8 busy-polling processes share its CPUs)
#   --no-loss / --no-tbf   skip a part
#   --lib-dir DIR     softrnic's lib/ (default <repo>/build/lib; build it with
#                     scripts/build.sh RelWithDebInfo build)
#   --out FILE        raw results (default <repo>/bench/results/loss-latest.tsv)
# Environment: LOSS_BENCH_KEEP=1 keeps the logs directory.
#
# Self-contained on purpose (it does not source the test helpers). Every
# process is bounded by `timeout`; namespaces are removed at exit.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
RUNS=3 SECS=4 LOSSES="0 1 5" MODES="gbn selective" TBF_RATE=400mbit
DO_LOSS=1 DO_TBF=1 LIB_DIR="$REPO/build/lib" OUT="$REPO/bench/results/loss-latest.tsv"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --losses) LOSSES=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --tbf-rate) TBF_RATE=$2; shift 2 ;;
    --no-loss) DO_LOSS=0; shift ;;
    --no-tbf) DO_TBF=0; shift ;;
    --lib-dir) LIB_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "loss_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac
[[ $(id -u) -eq 0 ]] || { echo "loss_bench.sh: needs root (namespaces, nft, tc)" >&2; exit 1; }
for c in ip nft tc ib_write_bw ss timeout awk; do
  command -v "$c" >/dev/null || { echo "loss_bench.sh: missing $c" >&2; exit 1; }
done
[[ -e "$LIB_DIR/libibverbs.so.1" ]] || { echo "loss_bench.sh: no $LIB_DIR/libibverbs.so.1" >&2; exit 1; }
if ldd "$LIB_DIR/libibverbs.so.1" | grep -qE 'lib(asan|tsan)'; then
  echo "loss_bench.sh: $LIB_DIR is a sanitizer build; use a RelWithDebInfo build" >&2; exit 1
fi

NS_A=srlb_a NS_B=srlb_b NET=10.236.0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/softrnic-lossbench.XXXXXX")
log() { printf '[%s loss_bench] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ns_down() {
  local ns pids
  for ns in "$NS_A" "$NS_B"; do
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" || continue
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}
cleanup() {
  ns_down
  if [[ "${LOSS_BENCH_KEEP:-0}" == 1 ]]; then log "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two namespaces joined by a veth; addresses .1-.4 in A and .11-.14 in B
# (one per process pair: each softrnic process binds UDP 4791 on its own
# address, SOFTRNIC_BIND).
ns_up() {
  ns_down
  ip netns add "$NS_A" && ip netns add "$NS_B" &&
  ip link add srlbva type veth peer name srlbvb &&
  ip link set srlbva netns "$NS_A" && ip link set srlbvb netns "$NS_B" &&
  ip -n "$NS_A" link set srlbva name veth0 && ip -n "$NS_B" link set srlbvb name veth0 || return 1
  local i
  for i in 1 2 3 4; do
    ip -n "$NS_A" addr add "$NET.$i/24" dev veth0
    ip -n "$NS_B" addr add "$NET.$((10 + i))/24" dev veth0
  done
  local ns
  for ns in "$NS_A" "$NS_B"; do
    ip -n "$ns" link set lo up
    # softrnic sends a message's packets as one UDP GSO run; a veth would
    # carry the run whole (and nftables would drop it whole). One segment
    # per skb makes the kernel cut it before the veth, as a NIC would put
    # each packet on the wire: the drops stay per packet.
    ip -n "$ns" link set veth0 gso_max_segs 1
    ip -n "$ns" link set veth0 up
  done
  for i in $(seq 50); do
    ip -n "$NS_A" link show veth0 | grep -q LOWER_UP && ip -n "$NS_B" link show veth0 | grep -q LOWER_UP && return 0
    sleep 0.1
  done
  return 1
}

# Drop PCT % of UDP/4791 arriving in NS (input hook).
nft_loss() {
  local ns=$1 pct=$2
  ip netns exec "$ns" nft delete table inet srlb_loss 2>/dev/null
  (( pct == 0 )) && return 0
  ip netns exec "$ns" nft -f - <<NFT
table inet srlb_loss {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 4791 numgen random mod 100 < $pct counter drop
  }
}
NFT
}
nft_count() {
  ip netns exec "$1" nft list table inet srlb_loss 2>/dev/null |
    sed -nE 's/.*counter packets ([0-9]+).*/\1/p' | head -1
}

wait_listen() {  # NS PORT PID
  local i
  for (( i=0; i<200; i++ )); do
    ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# bw LOG: the "BW average" column (MB/sec) of an ib_write_bw report.
bw_of() { awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print $4; exit}' "$1"; }
# counter LOG NAME: a counter from the SOFTRNIC_STATS=1 dump at exit.
counter_of() { awk -v n="$2" '$1 == "softrnic" && $2 == n {v=$3} END {print v+0}' "$1"; }

# start_server / start_client NAME MODE INDEX PORT: one side of an
# ib_write_bw pair, client .INDEX in A, server .1INDEX in B, in the
# background; the pids go to PAIR_PIDS. Servers are all started (and
# listening) before any client, so the flows of the tbf case start together.
PAIR_PIDS=()
COMMON_ENV=()
pair_env() {
  COMMON_ENV=(env LD_LIBRARY_PATH="$LIB_DIR" SOFTRNIC_TRANSPORT=udp SOFTRNIC_STATS=1
              SOFTRNIC_STATS_SHM=0 SOFTRNIC_RETRANSMIT="$1")
}
PERF_ARGS=()
start_server() {
  local name=$1 mode=$2 idx=$3 port=$4
  pair_env "$mode"
  PERF_ARGS=(-F -x 0 -s 65536 -D "$SECS" -p "$port" --report_gbits)
  timeout -k 5 $(( SECS + 60 )) ip netns exec "$NS_B" "${COMMON_ENV[@]}" SOFTRNIC_BIND="$NET.$((10 + idx))" \
    ib_write_bw "${PERF_ARGS[@]}" >"$WORK/$name.server.log" 2>&1 &
  local spid=$!
  PAIR_PIDS+=("$spid")
  wait_listen "$NS_B" "$port" "$spid" || sleep 0.5
}
start_client() {
  local name=$1 mode=$2 idx=$3 port=$4
  pair_env "$mode"
  PERF_ARGS=(-F -x 0 -s 65536 -D "$SECS" -p "$port" --report_gbits)
  timeout -k 5 $(( SECS + 60 )) ip netns exec "$NS_A" "${COMMON_ENV[@]}" SOFTRNIC_BIND="$NET.$idx" \
    ib_write_bw "${PERF_ARGS[@]}" "$NET.$((10 + idx))" >"$WORK/$name.client.log" 2>&1 &
  PAIR_PIDS+=("$!")
}
start_pair() {
  start_server "$@"
  start_client "$@"
}
wait_pairs() {
  local p rc=0
  for p in "${PAIR_PIDS[@]}"; do wait "$p" || rc=1; done
  PAIR_PIDS=()
  return $rc
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { sort -g | awk 'NR==1 {mn=$1} {mx=$1} END {if (NR==0) print "nan nan"; else print mn, mx}'; }

ns_up || { log "namespace setup failed"; exit 1; }
mkdir -p "$(dirname "$OUT")"
printf 'case\tmode\tloss_pct\trep\tgoodput_gbps\tretx_packets\tretx_bytes\tudp_tx_bytes\tnft_drops\tflow\n' >"$OUT"
log "lib $LIB_DIR, $RUNS runs x ${SECS}s, losses [$LOSSES], modes [$MODES], tbf $TBF_RATE"
port=26000

if (( DO_LOSS )); then
  for loss in $LOSSES; do
    for mode in $MODES; do
      for (( r=1; r<=RUNS; r++ )); do
        port=$((port + 1))
        nft_loss "$NS_B" "$loss" || { log "nft failed"; exit 1; }
        name="loss$loss-$mode-$r"
        start_pair "$name" "$mode" 1 "$port"
        wait_pairs || log "$name: a process failed (see logs)"
        bw=$(bw_of "$WORK/$name.client.log"); bw=${bw:-0}
        cl="$WORK/$name.client.log"
        drops=$(nft_count "$NS_B"); drops=${drops:-0}
        printf 'loss\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\n' "$mode" "$loss" "$r" "$bw" \
          "$(counter_of "$cl" tx_retransmit_packets)" "$(counter_of "$cl" tx_retransmit_bytes)" \
          "$(counter_of "$cl" udp_tx_bytes)" "$drops" >>"$OUT"
        log "$name: ${bw} Gb/s, retransmitted $(counter_of "$cl" tx_retransmit_packets) packets, nft dropped $drops"
      done
    done
  done
  nft_loss "$NS_B" 0
fi

if (( DO_TBF )); then
  ip netns exec "$NS_A" tc qdisc add dev veth0 root tbf rate "$TBF_RATE" burst 64kb latency 5ms ||
    { log "tc tbf failed"; exit 1; }
  for mode in $MODES; do
    for (( r=1; r<=RUNS; r++ )); do
      for i in 1 2 3 4; do start_server "tbf-$mode-$r-q$i" "$mode" "$i" $((port + i)); done
      for i in 1 2 3 4; do start_client "tbf-$mode-$r-q$i" "$mode" "$i" $((port + i)); done
      port=$((port + 4))
      wait_pairs || log "tbf-$mode-$r: a process failed (see logs)"
      for i in 1 2 3 4; do
        cl="$WORK/tbf-$mode-$r-q$i.client.log"
        bw=$(bw_of "$cl"); bw=${bw:-0}
        printf 'tbf\t%s\t0\t%s\t%s\t%s\t%s\t%s\t0\t%s\n' "$mode" "$r" "$bw" \
          "$(counter_of "$cl" tx_retransmit_packets)" "$(counter_of "$cl" tx_retransmit_bytes)" \
          "$(counter_of "$cl" udp_tx_bytes)" "$i" >>"$OUT"
      done
      log "tbf-$mode-$r: per flow $(awk -F'\t' -v m="$mode" -v r="$r" '$1=="tbf" && $2==m && $4==r {printf "%s ", $5}' "$OUT")Gb/s"
    done
  done
  ip netns exec "$NS_A" tc qdisc del dev veth0 root 2>/dev/null
fi

# ------------------------------------------------------------------ summary
rate_gbps=$(awk -v r="$TBF_RATE" 'BEGIN {
  v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
  if (u == "gbit") v *= 1; else if (u == "mbit") v /= 1000; else if (u == "kbit") v /= 1e6; else v /= 1e9
  print v }')
echo
echo "## ib_write_bw 64 KiB, ${SECS}s, $RUNS runs, nft drop on the receiver's input hook"
echo
echo "| loss | mode | goodput Gb/s (median) | min-max | vs loss-free | retransmitted packets (median) | target |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
declare -A base
for loss in $LOSSES; do
  for mode in $MODES; do
    vals=$(awk -F'\t' -v m="$mode" -v l="$loss" '$1=="loss" && $2==m && $3==l {print $5}' "$OUT")
    [[ -z "$vals" ]] && continue
    med=$(median <<<"$vals"); mm=$(minmax <<<"$vals")
    retx=$(awk -F'\t' -v m="$mode" -v l="$loss" '$1=="loss" && $2==m && $3==l {print $6}' "$OUT" | median)
    [[ "$loss" == 0 ]] && base[$mode]=$med
    ratio=$(awk -v a="$med" -v b="${base[$mode]:-0}" 'BEGIN {if (b > 0) printf "%.0f %%", 100*a/b; else print "-"}')
    target="-"
    [[ "$loss" == 1 ]] && target=">= 70 %"
    [[ "$loss" == 5 ]] && target=">= 40 %"
    echo "| $loss % | $mode | $med | ${mm/ /-} | $ratio | $retx | $target |"
  done
done
if (( DO_TBF )); then
  echo
  echo "## 4 ib_write_bw pairs through tbf $TBF_RATE (burst 64kb, latency 5ms), ${SECS}s, $RUNS runs"
  echo
  echo "| mode | aggregate Gb/s (median) | min-max | vs link rate | Jain (median) | retransmitted bytes % (median) | per-flow Gb/s (median run) |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for mode in $MODES; do
    per_run=$(awk -F'\t' -v m="$mode" '$1=="tbf" && $2==m {s[$4]+=$5; q[$4]+=$5*$5; n[$4]++; rb[$4]+=$7; tb[$4]+=$8; f[$4]=f[$4] $5 " "}
      END {for (r in s) printf "%s %.4f %.4f %.3f %s\n", r, s[r], (q[r] > 0 ? s[r]*s[r]/(n[r]*q[r]) : 0), (tb[r] > 0 ? 100*rb[r]/tb[r] : 0), f[r]}' "$OUT")
    [[ -z "$per_run" ]] && continue
    agg=$(awk '{print $2}' <<<"$per_run" | median); mm=$(awk '{print $2}' <<<"$per_run" | minmax)
    jain=$(awk '{print $3}' <<<"$per_run" | median); rp=$(awk '{print $4}' <<<"$per_run" | median)
    flows=$(sort -k2 -g <<<"$per_run" | awk -v n="$(wc -l <<<"$per_run")" 'NR == int((n+1)/2) {for (i=5; i<=NF; i++) printf "%s ", $i}')
    vs=$(awk -v a="$agg" -v b="$rate_gbps" 'BEGIN {printf "%.0f %%", 100*a/b}')
    echo "| $mode | $agg | ${mm/ /-} | $vs | $jain | $rp | $flows|"
  done
  echo
  echo "Targets: aggregate >= 90 % of the link rate, Jain >= 0.9, retransmitted bytes <= 5 %."
fi
echo
echo "Raw results: $OUT"
