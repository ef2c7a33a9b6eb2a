#!/bin/bash
# rdma_cm and perftest over IPv6 between two network namespaces (issue 15):
# - Debian's rping (rdmacm-utils) between two IPv6-only namespaces: the
#   server bound to fd77:243::2 (sockaddr_in6), then a server bound to the
#   wildcard, the client resolving fd77:243::2; every ping verified (-v);
#   ucmatose and udaddy (UD, SIDR) the same way;
# - Debian's ib_send_bw (perftest, -x the IPv6 GID's index) between them.
#   perftest 4.5 exchanges its parameters over IPv4 TCP only (its --ipv6
#   means GIDs), so for this phase the veth also gets 10.243.0.1/.2 for that
#   exchange while softrnic binds only the IPv6 address (SOFTRNIC_BIND): the
#   RoCE traffic stays IPv6, which the capture proves;
# - the captures hold IPv6 RoCE packets only, every ICRC right
#   (icrc_judge.py --require-ipv6).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib_ipv6.sh"
softrnic_require_root
softrnic_require_cmd rping ucmatose udaddy ib_send_bw tcpdump
softrnic_require_lib
softrnic_env

A=s6c_a B=s6c_b
ipv6_pair_up $A $B || die "netns setup"
fail=0

capture_start $NETNS_IFACE "$SOFTRNIC_TMP/rping.pcap" $A udp port 4791 || die "capture"
rping_case() {  # rping_case NAME PORT SERVER-ARGS...
  local name=$1 port=$2; shift 2
  start_bg rsrv 60 run_in_ns $B rping -s -v -V -C 10 -p "$port" "$@"
  sleep 1
  if run_in_ns $A rping -c -a $IPV6_B -v -V -C 10 -p "$port" >"$SOFTRNIC_TMP/rping.log" 2>&1 &&
     wait_bg rsrv 30 && [[ $(grep -c '^ping data: rdma-ping-' "$SOFTRNIC_TMP/rping.log") == 10 ]] &&
     bg_log rsrv | grep -q 'server ping data: rdma-ping-9:'; then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    tail -5 "$SOFTRNIC_TMP/rping.log" >&2
    bg_log rsrv | tail -5 >&2
    kill_bg rsrv
  fi
}
rping_case "rping, server bound to $IPV6_B" 7174 -a $IPV6_B
rping_case "rping, server bound to the wildcard" 7175
# ucmatose (RC, several connections) and udaddy (UD through SIDR, address
# handles from rdma_cm's IPv6 route) with their default ports.
for tool in ucmatose udaddy; do
  start_bg csrv 60 run_in_ns $B $tool -b $IPV6_B
  sleep 1
  if run_in_ns $A $tool -s $IPV6_B >"$SOFTRNIC_TMP/$tool.log" 2>&1 && wait_bg csrv 30 &&
     grep -q "return status 0" "$SOFTRNIC_TMP/$tool.log" && bg_log csrv | grep -q "return status 0"; then
    log "PASS $tool over IPv6"
  else
    fail=$((fail + 1))
    log "FAIL $tool over IPv6"
    tail -5 "$SOFTRNIC_TMP/$tool.log" >&2
    bg_log csrv | tail -5 >&2
    kill_bg csrv
  fi
done
capture_stop
"$SOFTRNIC_PYTHON" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" "$SOFTRNIC_TMP/rping.pcap" \
  --min-packets 40 --require-ipv6 || { fail=$((fail + 1)); log "FAIL icrc_judge on the rping capture"; }

# perftest: IPv4 for its TCP exchange only; softrnic on the IPv6 address.
ip -n $A addr add 10.243.0.1/24 dev $NETNS_IFACE && ip -n $B addr add 10.243.0.2/24 dev $NETNS_IFACE ||
  die "IPv4 side channel"
capture_start $NETNS_IFACE "$SOFTRNIC_TMP/perftest.pcap" $A udp port 4791 || die "capture"
start_bg psrv 60 env SOFTRNIC_BIND=$IPV6_B ip netns exec $B ib_send_bw -x 0 -n 2000 -s 4096
wait_until 10 ip netns exec $B ss -ltn 2>/dev/null | grep -q ':18515 ' || sleep 1
if SOFTRNIC_BIND=$IPV6_A run_in_ns $A ib_send_bw -x 0 -n 2000 -s 4096 10.243.0.2 \
     >"$SOFTRNIC_TMP/pcli.log" 2>&1 && wait_bg psrv 30 &&
   grep -qE "^ *4096 +2000 " "$SOFTRNIC_TMP/pcli.log" && grep -q "GID: 253:119:02:67" "$SOFTRNIC_TMP/pcli.log"; then
  log "PASS ib_send_bw -x 0 over IPv6: $(grep -E '^ *4096 +2000 ' "$SOFTRNIC_TMP/pcli.log")"
else
  fail=$((fail + 1))
  log "FAIL ib_send_bw over IPv6"
  tail -20 "$SOFTRNIC_TMP/pcli.log" >&2
  bg_log psrv | tail -5 >&2
  kill_bg psrv
fi
capture_stop
n4=$(tcpdump -nr "$SOFTRNIC_TMP/perftest.pcap" ip and udp port 4791 2>/dev/null | wc -l)
(( n4 == 0 )) || { fail=$((fail + 1)); log "FAIL $n4 IPv4 RoCE packets in the perftest capture"; }
"$SOFTRNIC_PYTHON" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" "$SOFTRNIC_TMP/perftest.pcap" \
  --min-packets 2000 --require-ipv6 || { fail=$((fail + 1)); log "FAIL icrc_judge on the perftest capture"; }

(( fail == 0 )) || die "$fail check(s) failed"
log "PASS: rping and ib_send_bw over IPv6"
