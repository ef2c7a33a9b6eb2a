#!/bin/bash
# rdma_cm error paths with Debian's rping on softrnic: each failing client
# must exit non-zero within 10 s (no hang) and report the documented event.
#   1. this host, a port nobody listens on       -> RDMA_CM_EVENT_REJECTED (8)
#   2. across namespaces, softrnic CM running there but nobody on the port
#                                                 -> RDMA_CM_EVENT_REJECTED (8)
#   3. across namespaces, no softrnic process there (REQs unanswered)
#                                                 -> RDMA_CM_EVENT_UNREACHABLE (-110)
#   4. an address without a route                 -> RDMA_CM_EVENT_ADDR_ERROR (-101)
#   5. a silent address on the link (no host)     -> RDMA_CM_EVENT_UNREACHABLE
#   6. a source address (-I) not on the host      -> rdma_resolve_addr fails at once,
#                                                    EADDRNOTAVAIL (as rdma_bind_addr)
#   7. cases 4 and 6 over IPv6 (fd77:238::/64 on the same veth), which
#      rdma_resolve_addr takes through the same path as IPv4
# rdma_resolve_addr(3): -1 and errno when the call fails; rdma_get_cm_event(3):
# ADDR_ERROR when the resolution does, its status the negative errno.
# The namespace cases need root (else only case 1 runs).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
[[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]] || skip "librdmacm.so.1 not built in $SOFTRNIC_LIB_DIR"
softrnic_require_cmd rping
softrnic_env

fail=0
# expect_fail NAME EVENT_REGEX CMD...: CMD exits non-zero within 10 s and
# prints EVENT_REGEX.
expect_fail() {
  local name=$1 re=$2; shift 2
  local out="$SOFTRNIC_TMP/$name.out" t0 t1 rc=0
  t0=$(date +%s%N)
  timeout -k 2 15 "$@" >"$out" 2>&1 || rc=$?
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  if (( rc != 0 && rc != 124 && rc != 137 && ms < 10000 )) && grep -Eq "$re" "$out"; then
    log "PASS $name: exit $rc after ${ms} ms: $(grep -Eo "$re.*" "$out" | head -1)"
  else
    fail=$((fail + 1))
    log "FAIL $name: exit $rc after ${ms} ms, wanted /$re/"
    tail -5 "$out" >&2
  fi
}

expect_fail local_no_listener 'RDMA_CM_EVENT_REJECTED, error 8' \
  rping -c -a 127.0.0.1 -p 21799 -C 1 -v

if [[ $(id -u) -eq 0 ]]; then
  A=srce_a B=srce_b IPA=10.234.0.1 IPB=10.234.0.2
  netns_pair_up $A $B $IPA $IPB || die "netns setup"
  # Nobody in B yet: the REQ is never answered.
  expect_fail remote_no_cm 'RDMA_CM_EVENT_UNREACHABLE, error -110' \
    ip netns exec $A rping -c -a $IPB -p 21798 -C 1 -v
  # A softrnic rdma_cm listener in B, on another port.
  start_bg listener 60 run_in_ns $B rping -s -p 21797 -C 1 -v
  wait_until 10 bash -c "ls /dev/shm/softrnic-cm-$(id -u)/*-106-21797 >/dev/null 2>&1" || sleep 1
  expect_fail remote_no_listener 'RDMA_CM_EVENT_REJECTED, error 8' \
    ip netns exec $A rping -c -a $IPB -p 21796 -C 1 -v
  kill_bg listener
  expect_fail no_route 'RDMA_CM_EVENT_ADDR_ERROR, error -101' \
    ip netns exec $A rping -c -a 10.255.255.1 -p 21795 -C 1 -v
  expect_fail silent_address 'RDMA_CM_EVENT_UNREACHABLE|RDMA_CM_EVENT_ADDR_ERROR' \
    ip netns exec $A rping -c -a 10.234.0.99 -p 21794 -C 1 -v
  expect_fail foreign_source 'rdma_resolve_addr: Cannot assign requested address' \
    ip netns exec $A rping -c -I 10.234.0.77 -a $IPB -p 21793 -C 1 -v
  # IPv6: the namespaces' veth gets fd77:238::1/64 and ::2 (no other route).
  for ns in $A $B; do
    ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=0 "net.ipv6.conf.$NETNS_IFACE.disable_ipv6=0" ||
      die "IPv6 in $ns"
  done
  ip -n $A addr add fd77:238::1/64 dev $NETNS_IFACE nodad &&
    ip -n $B addr add fd77:238::2/64 dev $NETNS_IFACE nodad || die "IPv6 addresses"
  expect_fail no_route6 'RDMA_CM_EVENT_ADDR_ERROR, error -101' \
    ip netns exec $A rping -c -a 2001:db8::1 -p 21792 -C 1 -v
  expect_fail foreign_source6 'rdma_resolve_addr: Cannot assign requested address' \
    ip netns exec $A rping -c -I fd77:238::77 -a fd77:238::2 -p 21791 -C 1 -v
else
  log "not root: namespace cases skipped"
fi

# No stale registry entries of ours were left behind by the failed clients.
(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: error events"
