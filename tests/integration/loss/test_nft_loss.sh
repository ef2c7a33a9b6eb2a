#!/usr/bin/env bash
# Loss made by the kernel: two network namespaces joined by a veth, an
# nftables rule on each namespace's INPUT hook dropping a random share of
# UDP/4791 (1 % and 5 %), and Debian's unmodified tools over softrnic:
#
#   ibv_rc_pingpong -c    (payload checked by the tool on every iteration)
#   ib_write_bw -n 200, ib_read_bw -n 200, ib_atomic_bw -n 200 (default sizes)
#
# Every run must complete (both sides exit 0) and the nft counters must show
# that packets really were dropped. The drop counts are reported per case.
#
# usage: test_nft_loss.sh [PCT...]          (default: 1 5)
#   env: LOSS_TIMEOUT   seconds per run (120)
#        LOSS_ITERS     -n for perftest (200)
set -u
source "${SOFTRNIC_INTEGRATION_LIB:-$(dirname "$0")/../lib}/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib_loss.sh"
softrnic_require_root
softrnic_require_cmd nft ss ibv_rc_pingpong ib_write_bw ib_read_bw ib_atomic_bw
softrnic_require_lib

PCTS=("$@")
[[ ${#PCTS[@]} -eq 0 ]] && PCTS=(1 5)
T=${LOSS_TIMEOUT:-120}
N=${LOSS_ITERS:-200}
IPB=10.233.0.2
loss_setup srloss_a srloss_b 10.233.0.1 "$IPB"

fail=0 results=()
port=23000
run() {  # run NAME SERVER... -- CLIENT... (client gets $IPB appended)
  local name=$1; shift
  port=$((port + 1))
  loss_set "$PCT"
  local args=("$@")
  local i srv=() cli=()
  for (( i=0; i<${#args[@]}; i++ )); do [[ ${args[i]} == -- ]] && break; srv+=("${args[i]}"); done
  cli=("${args[@]:i+1}")
  if pair "$name-$PCT" "$T" "$port" "${srv[@]}" -- "${cli[@]}" "$IPB"; then
    local d; d=$(loss_drops)
    results+=("PASS  ${PCT}% $name: ${PAIR_MS} ms, nft drops a/b: ${d/ //}")
    log "PASS ${PCT}% $name (${PAIR_MS} ms, dropped ${d/ //})"
    # Loss must really have happened (both directions carry traffic).
    local da=${d% *} db=${d#* }
    if (( da + db == 0 )); then
      fail=$((fail + 1))
      results+=("FAIL  ${PCT}% $name: nft dropped nothing")
    fi
  else
    fail=$((fail + 1))
    results+=("FAIL  ${PCT}% $name ($(loss_drops | tr ' ' /) dropped)")
  fi
}

for PCT in "${PCTS[@]}"; do
  log "=== ${PCT}% loss on both input hooks"
  # -c: every received buffer is checked against the expected pattern.
  run "rc_pingpong -c 4096" ibv_rc_pingpong -g 0 -p $((port + 1)) -c -s 4096 -n 500 -- \
                            ibv_rc_pingpong -g 0 -p $((port + 1)) -c -s 4096 -n 500
  run "rc_pingpong -c 64KiB" ibv_rc_pingpong -g 0 -p $((port + 1)) -c -s 65536 -n 50 -- \
                             ibv_rc_pingpong -g 0 -p $((port + 1)) -c -s 65536 -n 50
  run "ib_write_bw -n $N"   ib_write_bw -F -n "$N" -p $((port + 1)) -- ib_write_bw -F -n "$N" -p $((port + 1))
  run "ib_read_bw -n $N"    ib_read_bw -F -n "$N" -p $((port + 1)) -- ib_read_bw -F -n "$N" -p $((port + 1))
  run "ib_atomic_bw -n $N"  ib_atomic_bw -F -n "$N" -p $((port + 1)) -- ib_atomic_bw -F -n "$N" -p $((port + 1))
done
loss_set 0

printf '%s\n' "${results[@]}"
(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: every tool completed under loss"
