#!/bin/bash
# UD multicast between processes (issue 15). Argument: the mcast_traffic
# program (mcast_traffic.c).
# - One host: three member processes and a sender; each member receives
#   every message, with the group in its GRH area.
# - Two network namespaces (10.246.0.1 <-> 10.246.0.2 on a veth): a member
#   beside the sender and two in the other namespace; a tcpdump capture of
#   the veth holds the datagrams to the group's IP address, tshark decodes
#   them as RoCE v2 UD SENDs to the multicast QPN 0xFFFFFF, and scapy's
#   ICRC check (icrc_judge.py) passes on every one.
# - Debian's mckey (rdmacm-utils) between two processes on one host and
#   across the namespaces: rdma_join_multicast, the MULTICAST_JOIN event's
#   address vector, then the data.
# - An IPv6 group (ff0e::f6:1) between two IPv6-only namespaces
#   (lib_ipv6.sh), members on both sides, each process with an address of
#   its own.
# - The same through python3-pyverbs (pyverbs_multicast.py: join with an
#   address and with JoinMCAttrEx, send-only join, UDParam, leave; nothing
#   arrives after leaving), two processes in one namespace and across.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd mckey tcpdump tshark
softrnic_require_lib
softrnic_env
PROG=${1:?usage: test_multicast.sh MCAST_TRAFFIC}
[[ -x $PROG ]] || die "no $PROG"
COUNT=40
fail=0

# members_then_send NAME GROUP SENDER_PREFIX MEMBER_PREFIX...: starts a
# member under each prefix (a command prefix, word-split: "" for here,
# "run_in_ns X" for a namespace), waits until all are ready, sends COUNT
# messages from a sender under SENDER_PREFIX (PACE microseconds apart,
# default 200), checks each member.
members_then_send() {
  local name=$1 group=$2 sender=$3; shift 3
  local i=0 prefix
  for prefix in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    start_bg "m$i" 60 $prefix "$PROG" recv "$group" $COUNT
  done
  local n=$i
  for ((i = 1; i <= n; i++)); do
    wait_until 10 grep -q '^ready' "$(bg_log_file "m$i")" ||
      { fail=$((fail + 1)); log "FAIL $name: member $i not ready"; bg_log "m$i" >&2; }
  done
  # shellcheck disable=SC2086
  if ! $sender "$PROG" send "$group" $COUNT ${PACE:-200} >"$SOFTRNIC_TMP/send.log" 2>&1; then
    fail=$((fail + 1)); log "FAIL $name: sender"; cat "$SOFTRNIC_TMP/send.log" >&2
  fi
  for ((i = 1; i <= n; i++)); do
    if wait_bg "m$i" 40 && grep -q "^received $COUNT of $COUNT" "$(bg_log_file "m$i")"; then
      log "PASS $name: member $i: $(grep '^received' "$(bg_log_file "m$i")")"
    else
      fail=$((fail + 1)); log "FAIL $name: member $i"; bg_log "m$i" | tail -5 >&2
      kill_bg "m$i"
    fi
  done
}

# mckey_pair NAME GROUP SRV_PREFIX SRV_BIND CLI_PREFIX CLI_BIND (prefixes
# as above; a bind address becomes mckey's -b)
mckey_pair() {
  local name=$1 group=$2 sp=$3 sb=$4 cp=$5 cb=$6
  # shellcheck disable=SC2086
  # Line-buffered: the test waits for its "joined" line.
  start_bg mck 60 $sp stdbuf -oL mckey -m "$group" ${sb:+-b $sb} -C 20 -S 100
  wait_until 10 grep -q 'joined dgid' "$(bg_log_file mck)" ||
    { fail=$((fail + 1)); log "FAIL $name: mckey receiver did not join"; bg_log mck >&2; }
  # shellcheck disable=SC2086
  $cp mckey -m "$group" ${cb:+-b $cb} -s -C 20 -S 100 >"$SOFTRNIC_TMP/mckey-s.log" 2>&1 ||
    { fail=$((fail + 1)); log "FAIL $name: mckey sender"; cat "$SOFTRNIC_TMP/mckey-s.log" >&2; }
  if wait_bg mck 30 && grep -q 'data transfers complete' "$(bg_log_file mck)" &&
     grep -q "joined dgid: ::ffff:$group" "$(bg_log_file mck)"; then
    log "PASS $name: $(grep 'joined dgid' "$(bg_log_file mck)")"
  else
    fail=$((fail + 1)); log "FAIL $name: mckey receiver"; bg_log mck | tail -6 >&2
    kill_bg mck
  fi
}

# ---------------------------------------------------------------- one host
members_then_send "one host, 3 members" 239.246.0.1 "" "" "" ""
# A burst (no pause between sends): the group sockets' buffers hold it.
COUNT=500 PACE=0 members_then_send "one host, 3 members, burst of 500" 239.246.0.7 "" "" "" ""
mckey_pair "mckey one host" 239.246.0.2 "" "" "" ""

# ---------------------------------------------------------------- two namespaces
A=smc_a B=smc_b IP_A=10.246.0.1 IP_B=10.246.0.2
netns_pair_up $A $B $IP_A $IP_B || die "netns setup"
# Two processes in A that B must hear: each its own address, as
# docs/addressing.md says (a process with only its loopback GID reaches
# same-host members only). Members in B need none: a group's datagrams
# reach every member socket, whatever its device's addresses.
IP_A2=10.246.0.11
ip -n $A addr add $IP_A2/24 dev $NETNS_IFACE || die "second address in $A"
capture_start $NETNS_IFACE "$SOFTRNIC_TMP/mcast.pcap" $B udp port 4791 || die "capture"
members_then_send "two namespaces, members in both" 239.246.0.3 \
  "run_in_ns $A env SOFTRNIC_BIND=$IP_A2" "run_in_ns $A env SOFTRNIC_BIND=$IP_A" \
  "run_in_ns $B" "run_in_ns $B"
mckey_pair "mckey across namespaces" 239.246.0.4 "run_in_ns $B" $IP_B "run_in_ns $A" $IP_A
capture_stop

# pyverbs_pair NAME SRV_PREFIX SRV_IP CLI_PREFIX CLI_IP GROUP [ex]
pyverbs_pair() {
  local name=$1 sp=$2 sip=$3 cp=$4 cip=$5 group=$6 ex=${7:-}
  local py=$SOFTRNIC_SOURCE_DIR/tests/integration/multicast/pyverbs_multicast.py
  # shellcheck disable=SC2086
  start_bg pym 60 $sp "$SOFTRNIC_PYTHON" "$py" recv $sip $group 20 $ex
  wait_until 10 grep -q '^joined' "$(bg_log_file pym)" ||
    { fail=$((fail + 1)); log "FAIL $name: pyverbs member did not join"; bg_log pym >&2; }
  # shellcheck disable=SC2086
  $cp "$SOFTRNIC_PYTHON" "$py" send $cip $group 20 >"$SOFTRNIC_TMP/pys.log" 2>&1 ||
    { fail=$((fail + 1)); log "FAIL $name: pyverbs sender"; cat "$SOFTRNIC_TMP/pys.log" >&2; }
  if wait_bg pym 30 && grep -q '^nothing after leaving' "$(bg_log_file pym)" &&
     grep -q '^PASS' "$(bg_log_file pym)"; then
    log "PASS $name: $(grep -c . "$(bg_log_file pym)") lines, $(grep '^received' "$(bg_log_file pym)")"
  else
    fail=$((fail + 1)); log "FAIL $name: pyverbs member"; bg_log pym | tail -6 >&2
    kill_bg pym
  fi
}
pyverbs_pair "pyverbs one namespace" "run_in_ns $B" $IP_B "run_in_ns $B" $IP_B 239.246.0.5
pyverbs_pair "pyverbs across namespaces (join_ex)" "run_in_ns $B" $IP_B "run_in_ns $A" $IP_A \
  239.246.0.6 ex

# What crossed the veth: UD SENDs to the group address and the multicast QPN.
n=$(tshark -r "$SOFTRNIC_TMP/mcast.pcap" -Y 'ip.dst == 239.246.0.3 && infiniband.bth.destqp == 0xffffff && infiniband.bth.opcode == 100' 2>/dev/null | wc -l)
log "captured $n UD SENDs to 239.246.0.3, QPN 0xFFFFFF"
(( n == COUNT )) || { fail=$((fail + 1)); log "FAIL expected $COUNT multicast SENDs on the veth, saw $n"; }
"$SOFTRNIC_PYTHON" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" "$SOFTRNIC_TMP/mcast.pcap" \
  --min-packets $COUNT || { fail=$((fail + 1)); log "FAIL icrc_judge on the multicast capture"; }

# ---------------------------------------------------------------- IPv6
source "$SOFTRNIC_SOURCE_DIR/tests/integration/ipv6/lib_ipv6.sh"
A6=smc6_a B6=smc6_b
ipv6_pair_up $A6 $B6 || die "IPv6 netns setup"
# An IPv6-only namespace has no loopback GID: every process there needs an
# address of its own.
ip -n $A6 addr add fd77:243::11/64 dev $NETNS_IFACE nodad &&
  ip -n $B6 addr add fd77:243::12/64 dev $NETNS_IFACE nodad || die "IPv6 addresses"
members_then_send "IPv6 group between IPv6-only namespaces" ff0e::f6:1 \
  "run_in_ns $A6 env SOFTRNIC_BIND=fd77:243::11" "run_in_ns $A6 env SOFTRNIC_BIND=$IPV6_A" \
  "run_in_ns $B6 env SOFTRNIC_BIND=$IPV6_B" "run_in_ns $B6 env SOFTRNIC_BIND=fd77:243::12"

(( fail == 0 )) || die "$fail check(s) failed"
log "PASS: UD multicast on one host and across namespaces (IPv4 and IPv6), mckey and pyverbs both ways"
