#!/bin/bash
# Debian's unmodified ibv_xsrq_pingpong between two network namespaces
# ("hosts") joined by a veth pair (subnet 10.244.0.0/24): XRC requests as
# RoCE v2 at UDP port 4791 across the veth. nftables counters prove the
# packets crossed; the server's capture (SOFTRNIC_CAPTURE, decoded by
# tshark) shows XRC opcodes and, right after the BTH, the XRCETH holding
# the SRQ number the client announced.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ibv_xsrq_pingpong nft
softrnic_require_lib
softrnic_env

A=xrc_a B=xrc_b IPA=10.244.0.1 IPB=10.244.0.2
export NETNS_MTU=9000
netns_pair_up $A $B $IPA $IPB || die "netns setup"
nft_count_roce $A || die "nft counter setup"
nft_count_roce $B || die "nft counter setup"
count() { nft_roce_count "$1"; }

CAP=$SOFTRNIC_TMP/cap
mkdir -m 700 "$CAP"
fail=0
run_case() {  # run_case NAME [capture] ARGS...
  local name=$1; shift
  local cap=()
  if [[ $1 == capture ]]; then cap=(env "SOFTRNIC_CAPTURE=$CAP/srv-%p.pcapng"); shift; fi
  start_bg srv 60 run_in_ns $B "${cap[@]}" ibv_xsrq_pingpong -g 0 "$@"
  wait_until 5 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 0.5
  if run_in_ns $A ibv_xsrq_pingpong -g 0 "$@" $IPB >"$SOFTRNIC_TMP/cli.log" 2>&1 && wait_bg srv 30 &&
     grep -qx success "$SOFTRNIC_TMP/cli.log" && bg_log srv | grep -qx success; then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    tail -5 "$SOFTRNIC_TMP/cli.log" >&2
    bg_log srv | tail -5 >&2
    kill_bg srv
  fi
}

# run_multi NAME N ARGS...: a server in B with -c N, N clients in A at
# once. The server sends client i's messages over client j's receive QP:
# the clients' processes in A share the XRC domain of /tmp/xrc_domain
# (src/engine/same_host/xrc_share.h); across the veth nothing differs from -c 1.
# Each client process has an address of its own in A (10.244.0.1<i>), as
# several processes of one host reachable from another need
# (docs/addressing.md, "Reaching another host").
run_multi() {
  local name=$1 n=$2 i ok=1; shift 2
  for (( i = 1; i <= n; i++ )); do
    ip -n $A addr replace 10.244.0.1$i/24 dev veth0 || die "address for client $i"
  done
  start_bg srv 90 run_in_ns $B ibv_xsrq_pingpong -g 0 -c "$n" "$@"
  wait_until 5 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 0.5
  for (( i = 1; i <= n; i++ )); do
    start_bg "cli$i" 90 run_in_ns $A env SOFTRNIC_BIND=10.244.0.1$i ibv_xsrq_pingpong -g 0 "$@" $IPB
  done
  for (( i = 1; i <= n; i++ )); do
    wait_bg "cli$i" 90 && bg_log "cli$i" | grep -qx success || { ok=0; bg_log "cli$i" | tail -5 >&2; }
  done
  wait_bg srv 30 && bg_log srv | grep -qx success || { ok=0; bg_log srv | tail -5 >&2; }
  if (( ok )); then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    kill_bg srv
    for (( i = 1; i <= n; i++ )); do kill_bg "cli$i"; done
  fi
}

run_case "1 MiB mtu 4096" -s 1048576 -m 4096 -n 10
run_multi "-c 3 (clients share the XRC domain)" 3 -n 50
run_case "events (-e)" -e -s 100 -n 100
run_case "4096 bytes, server captured" capture -n 100  # last: its logs are read below

ca=$(count $A) cb=$(count $B)
log "UDP/4791 packets in: $A=$ca $B=$cb"
(( ca > 100 && cb > 100 )) || die "too little RoCE traffic crossed the veth ($ca / $cb)"
(( fail == 0 )) || die "$fail case(s) failed"

# The wire: the server's first request is an XRC SEND (opcode 0xA0-0xA5)
# whose 4 bytes after the BTH are the XRCETH: a zero byte, then the SRQ
# number the client printed as its local SRQN.
if command -v tshark >/dev/null; then
  # The server prints the client's SRQ number as the remote SRQN.
  srqn=$(bg_log srv | sed -nE 's/^ *remote: .*SRQN ([0-9a-f]{6}),.*/\1/p' | head -1)
  [[ -n "$srqn" ]] || die "no remote SRQN in the server's output"
  pcap=$(ls "$CAP"/srv-*.pcapng 2>/dev/null | head -1)
  [[ -n "$pcap" ]] || die "no capture written"
  # Wireshark names the XRC opcodes but shows the XRCETH as an unknown
  # 4-byte header (infiniband.vendor).
  line=$(tshark -r "$pcap" -Y 'infiniband.bth.opcode >= 160 && infiniband.bth.opcode <= 165' \
           -T fields -e infiniband.bth.opcode -e infiniband.vendor 2>/dev/null | head -1)
  log "first XRC request in the capture: ${line:0:40}"
  [[ -n "$line" ]] || die "no XRC SEND in the capture"
  xrceth=$(awk '{print $2}' <<<"$line" | cut -d, -f1 | tr -d ':')
  [[ ${xrceth:0:2} == 00 ]] || die "XRCETH reserved byte is not 0: ${xrceth:0:8}"
  [[ ${xrceth:2:6} == "$srqn" ]] || die "XRCETH names ${xrceth:2:6}, the client's SRQ is $srqn"
  log "XRCETH ${xrceth:0:8}: the client's SRQ $srqn"
fi
log "PASS: ibv_xsrq_pingpong across namespaces"
