#!/bin/bash
# RoCE v2 over IPv6 between two IPv6-only network namespaces (issue 15):
# - ibv_devinfo -v in each shows a RoCE v2 GID for its global and its
#   link-local IPv6 address and no IPv4 GID;
# - Debian's ibv_rc_pingpong (-g the global GID, then the link-local one),
#   ibv_ud_pingpong (UD: address handles with IPv6 GIDs, the 40-byte IPv6
#   header in the GRH area) and ibv_srq_pingpong between them;
# - a tcpdump capture of the veth holds IPv6 RoCE packets (UDP 4791, no
#   IPv4 at all) whose ICRCs pass icrc_judge.py's IPv6 checks;
# - `softrnic devinfo --peer` names the UDP path from the global GID;
# - `softrnic capture` of an ibv_rc_pingpong client renders its packets as
#   Ethernet/IPv6/UDP frames (wire/roce_frame.h) that pass the same judge.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib_ipv6.sh"
softrnic_require_root
softrnic_require_cmd ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong tcpdump
softrnic_require_lib
softrnic_env

A=s6v_a B=s6v_b
ipv6_pair_up $A $B || die "netns setup"

fail=0
# GID tables.
for ns in $A $B; do
  run_in_ns $ns ibv_devinfo -v >"$SOFTRNIC_TMP/devinfo-$ns.txt" 2>&1 || die "ibv_devinfo in $ns"
  grep GID "$SOFTRNIC_TMP/devinfo-$ns.txt" | sed "s/^/  $ns /" >&2
  ll=$(ip -n $ns -6 addr show dev $NETNS_IFACE scope link | sed -nE 's/.*inet6 (fe80[^/]*).*/\1/p')
  want=$IPV6_A; [[ $ns == "$B" ]] && want=$IPV6_B
  grep -qE "GID\[ *0\]:[[:space:]]+$want, RoCE v2" "$SOFTRNIC_TMP/devinfo-$ns.txt" ||
    { fail=$((fail + 1)); log "FAIL $ns: GID 0 is not $want"; }
  grep -qE "GID\[ *1\]:[[:space:]]+$ll, RoCE v2" "$SOFTRNIC_TMP/devinfo-$ns.txt" ||
    { fail=$((fail + 1)); log "FAIL $ns: GID 1 is not the link-local $ll"; }
  ! grep -q "::ffff:" "$SOFTRNIC_TMP/devinfo-$ns.txt" ||
    { fail=$((fail + 1)); log "FAIL $ns: an IPv4 GID in an IPv6-only namespace"; }
done
# softrnic devinfo --peer explains the IPv6 path: UDP from the global GID.
run_in_ns $A "$SOFTRNIC_BUILD_DIR/bin/softrnic" devinfo --peer $IPV6_B >"$SOFTRNIC_TMP/peer.txt" 2>&1
grep -qE "path +UDP from GID\[0\] $IPV6_A through $NETNS_IFACE" "$SOFTRNIC_TMP/peer.txt" ||
  { fail=$((fail + 1)); log "FAIL devinfo --peer $IPV6_B"; tail -8 "$SOFTRNIC_TMP/peer.txt" >&2; }
ll_b=$(ip -n $B -6 addr show dev $NETNS_IFACE scope link | sed -nE 's/.*inet6 (fe80[^/]*).*/\1/p')

capture_start $NETNS_IFACE "$SOFTRNIC_TMP/ipv6.pcap" $A udp port 4791 || die "capture"

run_case() {  # run_case NAME TOOL ARGS...
  local name=$1 tool=$2; shift 2
  start_bg srv 60 run_in_ns $B "$tool" "$@"
  wait_until 5 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 0.5
  if run_in_ns $A "$tool" "$@" $IPV6_B >"$SOFTRNIC_TMP/cli.log" 2>&1 && wait_bg srv 30 &&
     grep -q "iters in" "$SOFTRNIC_TMP/cli.log" && grep -q "GID $IPV6_B\|GID $ll_b" "$SOFTRNIC_TMP/cli.log"; then
    log "PASS $name: $(grep 'iters in' "$SOFTRNIC_TMP/cli.log" | sed 's/.*= //')"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    tail -5 "$SOFTRNIC_TMP/cli.log" >&2
    bg_log srv | tail -5 >&2
    kill_bg srv
  fi
}

run_case "rc global gid" ibv_rc_pingpong -g 0 -s 4096 -n 200
run_case "rc 1MiB check" ibv_rc_pingpong -g 0 -s 1048576 -n 4 -c
run_case "rc link-local gid" ibv_rc_pingpong -g 1 -s 1024 -n 100
run_case "ud 1024 check" ibv_ud_pingpong -g 0 -s 1024 -n 200 -c
run_case "srq 4 qps" ibv_srq_pingpong -g 0 -s 4096 -n 100 -q 4
capture_stop

# What crossed the veth: IPv6 RoCE v2 only, every ICRC right.
n6=$(tcpdump -nr "$SOFTRNIC_TMP/ipv6.pcap" ip6 and udp port 4791 2>/dev/null | wc -l)
n4=$(tcpdump -nr "$SOFTRNIC_TMP/ipv6.pcap" ip and udp port 4791 2>/dev/null | wc -l)
log "captured: $n6 IPv6 RoCE packets, $n4 IPv4 ones"
(( n6 > 1000 )) || { fail=$((fail + 1)); log "FAIL too few IPv6 RoCE packets on the veth ($n6)"; }
(( n4 == 0 )) || { fail=$((fail + 1)); log "FAIL IPv4 RoCE packets on an IPv6-only link"; }
"$SOFTRNIC_PYTHON" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" "$SOFTRNIC_TMP/ipv6.pcap" \
  --min-packets 1000 --require-ipv6 || { fail=$((fail + 1)); log "FAIL icrc_judge on the IPv6 capture"; }

# softrnic's own capture renders IPv6 frames.
start_bg srv 60 run_in_ns $B ibv_rc_pingpong -g 0 -s 2048 -n 50
wait_until 5 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 0.5
run_in_ns $A "$SOFTRNIC_BUILD_DIR/bin/softrnic" capture -w "$SOFTRNIC_TMP/softrnic.pcapng" -- \
  ibv_rc_pingpong -g 0 -s 2048 -n 50 $IPV6_B >"$SOFTRNIC_TMP/cap.log" 2>&1 && wait_bg srv 30 ||
  { fail=$((fail + 1)); log "FAIL softrnic capture run"; tail -5 "$SOFTRNIC_TMP/cap.log" >&2; kill_bg srv; }
"$SOFTRNIC_PYTHON" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" "$SOFTRNIC_TMP/softrnic.pcapng" \
  --min-packets 100 --require-ipv6 || { fail=$((fail + 1)); log "FAIL icrc_judge on softrnic capture's IPv6 frames"; }

(( fail == 0 )) || die "$fail check(s) failed"
log "PASS: RoCE v2 over IPv6 between IPv6-only namespaces"
