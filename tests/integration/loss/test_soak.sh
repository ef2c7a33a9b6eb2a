#!/usr/bin/env bash
# Soak under loss: several QPs (perftest -q 4) across two network namespaces
# with 2 % of UDP/4791 dropped on both input hooks, for SOAK_SECONDS
# (default 90: CI-sized; set e.g. SOAK_SECONDS=3600 for a real soak).
#
#   1. ib_write_bw -q 4 -D (40 % of the budget) and
#   2. ib_send_bw  -q 4 -D (40 %): time-based runs whose processes' VmRSS
#      (/proc/<pid>/status) is sampled every 2 s; after warm-up (the first
#      quarter of the run) memory must stay steady: the last sample must be
#      below 1.5x the warm-up sample, on both sides;
#   3. the rest of the budget: ib_write_bw -q 4 / ib_send_bw -q 4 -n 200,
#      repeated (fresh processes, connection setup and teardown under loss).
#
# Every run must complete (both sides exit 0) and the nft counters must show
# drops. SOAK_LOSS sets the loss percentage (2).
set -u
source "${SOFTRNIC_INTEGRATION_LIB:-$(dirname "$0")/../lib}/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib_loss.sh"
softrnic_require_root
softrnic_require_cmd nft ss ib_write_bw ib_send_bw
softrnic_require_lib

S=${SOAK_SECONDS:-90}
PCT=${SOAK_LOSS:-2}
(( S >= 30 )) || S=30
D=$(( S * 2 / 5 ))
IPB=10.234.0.2
loss_setup srsoak_a srsoak_b 10.234.0.1 "$IPB"
loss_set "$PCT"

fail=0 port=25000
deadline=$(( $(date +%s) + S ))

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
# The tool is the child of `timeout` (ip netns exec execs it).
tool_pid() { children_of "$1" | head -1; }

# timed NAME DURATION TOOL ARGS...: a -D run with RSS sampling.
timed() {
  local name=$1 dur=$2 tool=$3; shift 3
  port=$((port + 1))
  local t=$(( dur + 60 ))
  local slog="$SOFTRNIC_TMP/$name.server.log" clog="$SOFTRNIC_TMP/$name.client.log"
  timeout -k 5 "$t" ip netns exec "$LOSS_B" "$tool" -F -p "$port" -D "$dur" "$@" >"$slog" 2>&1 &
  local sto=$!
  _loss_wait_listen "$LOSS_B" "$port" "$sto" || sleep 0.5
  timeout -k 5 "$t" ip netns exec "$LOSS_A" "$tool" -F -p "$port" -D "$dur" "$@" "$IPB" >"$clog" 2>&1 &
  local cto=$!
  local spid="" cpid="" samples_s=() samples_c=() start; start=$(date +%s)
  while kill -0 "$cto" 2>/dev/null || kill -0 "$sto" 2>/dev/null; do
    [[ -z "$spid" ]] && spid=$(tool_pid "$sto")
    [[ -z "$cpid" ]] && cpid=$(tool_pid "$cto")
    local rs rc
    rs=$( [[ -n "$spid" ]] && rss_kb "$spid" ) rc=$( [[ -n "$cpid" ]] && rss_kb "$cpid" )
    [[ -n "$rs" ]] && samples_s+=("$rs")
    [[ -n "$rc" ]] && samples_c+=("$rc")
    sleep 2
  done
  local crc=0 src=0
  wait "$cto" || crc=$?
  wait "$sto" || src=$?
  local ms=$(( ($(date +%s) - start) * 1000 ))
  if (( crc != 0 || src != 0 )); then
    fail=$((fail + 1))
    log "FAIL $name: client rc=$crc server rc=$src"
    tail -5 "$clog" >&2; tail -5 "$slog" >&2
    return
  fi
  local side arr n w last
  for side in server client; do
    if [[ $side == server ]]; then arr=("${samples_s[@]}"); else arr=("${samples_c[@]}"); fi
    n=${#arr[@]}
    if (( n < 4 )); then
      log "$name $side: only $n RSS samples, not judged"
      continue
    fi
    w=${arr[$(( n / 4 ))]} last=${arr[$(( n - 1 ))]}
    log "$name $side VmRSS kB: warm-up $w, last $last, samples: ${arr[*]}"
    if (( last * 2 > w * 3 )); then
      fail=$((fail + 1))
      log "FAIL $name $side: memory grew from $w kB to $last kB (> 1.5x)"
    fi
  done
  log "PASS $name ($ms ms): $(awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {print; exit}' "$clog" | tr -s ' \t' ' ')"
}

log "=== soak ${S}s at ${PCT}% loss"
timed "write_bw-q4-D$D" "$D" ib_write_bw -q 4
timed "send_bw-q4-D$D" "$D" ib_send_bw -q 4

runs=0
while :; do
  for tool in ib_write_bw ib_send_bw; do
    port=$((port + 1))
    runs=$((runs + 1))
    if pair "rep$runs-$tool" 120 "$port" "$tool" -F -q 4 -n 200 -p "$port" -- \
         "$tool" -F -q 4 -n 200 -p "$port" "$IPB"; then
      log "PASS repeat $runs $tool -q 4 -n 200 (${PAIR_MS} ms)"
    else
      fail=$((fail + 1))
    fi
  done
  (( $(date +%s) >= deadline )) && break
done

d=$(loss_drops)
log "nft drops a/b: ${d/ //}, repeated runs: $runs"
(( ${d% *} + ${d#* } > 0 )) || { fail=$((fail + 1)); log "FAIL: nft dropped nothing"; }
loss_set 0
(( fail == 0 )) || die "$fail failure(s)"
log "PASS: soak completed, memory steady"
