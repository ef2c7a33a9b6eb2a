#!/bin/bash
# Debian's unmodified ibv_{rc,uc,ud,srq}_pingpong between two network
# namespaces ("hosts") joined by a veth pair, each with its own IP: the
# server in one namespace, the client in the other, GID index 0 (the
# namespace's ::ffff:10.x address), RoCE v2 traffic at UDP port 4791 across
# the veth. nftables counters on both input hooks prove the packets crossed
# the wire at port 4791.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong nft
softrnic_require_lib
softrnic_env

A=srpp_a B=srpp_b IPA=10.232.0.1 IPB=10.232.0.2
# Jumbo frames, so a 4096-byte path MTU fits the link (as on a real RoCE fabric).
export NETNS_MTU=9000
netns_pair_up $A $B $IPA $IPB || die "netns setup"
nft_count_roce $A || die "nft counter setup"
nft_count_roce $B || die "nft counter setup"
count() { nft_roce_count "$1"; }

fail=0
run_case() {  # run_case NAME TOOL ARGS...
  local name=$1 tool=$2; shift 2
  start_bg srv 60 run_in_ns $B "$tool" -g 0 "$@"
  wait_until 5 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 0.5
  if run_in_ns $A "$tool" -g 0 "$@" $IPB >"$SOFTRNIC_TMP/cli.log" 2>&1 && wait_bg srv 30 &&
     grep -q "iters in" "$SOFTRNIC_TMP/cli.log"; then
    log "PASS $name: $(grep 'iters in' "$SOFTRNIC_TMP/cli.log" | sed 's/.*= //')"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    tail -5 "$SOFTRNIC_TMP/cli.log" >&2
    bg_log srv | tail -5 >&2
    kill_bg srv
  fi
}

run_case "rc 4096" ibv_rc_pingpong -s 4096 -n 200
run_case "rc 1MiB mtu 4096 check" ibv_rc_pingpong -s 1048576 -m 4096 -n 10 -c
run_case "rc events" ibv_rc_pingpong -s 100 -n 200 -e
run_case "uc 4096" ibv_uc_pingpong -s 4096 -n 200
run_case "ud 1024 check" ibv_ud_pingpong -s 1024 -n 200 -c
run_case "srq 4 qps" ibv_srq_pingpong -s 4096 -n 100 -q 4
run_case "srq events" ibv_srq_pingpong -s 100 -n 100 -e

ca=$(count $A) cb=$(count $B)
log "UDP/4791 packets in: $A=$ca $B=$cb"
(( ca > 1000 && cb > 1000 )) || die "too little RoCE traffic crossed the veth ($ca / $cb)"
(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: all pingpongs across namespaces"
