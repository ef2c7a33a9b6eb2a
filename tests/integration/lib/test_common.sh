#!/usr/bin/env bash
# Self-test of tests/integration/lib/common.sh: two namespaces joined by a
# veth pair, ping, a UDP exchange on port 4791, a capture, nftables loss on
# the receiver's input hook, background-process timeouts, clean teardown.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

softrnic_require_root
softrnic_require_cmd ip nft ping tcpdump timeout ss
[[ -x "$SOFTRNIC_PYTHON" ]] || command -v "$SOFTRNIC_PYTHON" >/dev/null || skip "no python3"

A=srn-libtest-a; B=srn-libtest-b
IPA=10.78.0.1;  IPB=10.78.0.2
PORT=4791

# --- background helpers: timeout fires, kill_bg stops, wait_bg reports
start_bg sleeper 1 sleep 30
rc=0; wait_bg sleeper 10 || rc=$?
check "start_bg timeout kills a hung command (rc=$rc)" test "$rc" -eq 124
start_bg sleeper2 60 sleep 30
t0=$(date +%s); kill_bg sleeper2
check "kill_bg stops a process quickly" test $(( $(date +%s) - t0 )) -le 4
if retry 2 0.1 false; then die "retry should give up"; fi
check "retry retries until success" retry 3 0.1 test -e "$SOFTRNIC_TMP"
check "wait_until succeeds" wait_until 2 true
bgfn() { echo "from function $1"; }
start_bg fn 10 bgfn hello
wait_bg fn
check "start_bg runs shell functions" grep -q "from function hello" "$(bg_log_file fn)"

# --- namespaces
netns_pair_up "$A" "$B" "$IPA" "$IPB"
check "namespace $A exists" bash -c "ip netns list | grep -qw $A"
check "$IPA on $NETNS_IFACE in $A" bash -c "ip -n $A -4 addr show $NETNS_IFACE | grep -q $IPA/24"
check "lo up in $B" bash -c "ip -n $B link show lo | grep -q UP"
check "ping $A -> $B" run_in_ns "$A" ping -q -c 2 -W 2 "$IPB"
check "namespaces are isolated (no route to $IPB from root ns)" \
  bash -c "! ping -c 1 -W 1 $IPB >/dev/null 2>&1 || ip -4 addr | grep -q $IPB"

# --- UDP echo on 4791 across the pair
SERVER='
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(20)
try:
    while True:
        d, a = s.recvfrom(2048)
        s.sendto(d, a)
except socket.timeout:
    pass
'
CLIENT='
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
seen = set()
def recv_until(deadline, want=None):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        s.settimeout(left)
        try:
            d, _ = s.recvfrom(2048)
        except socket.timeout:
            return
        seq = int.from_bytes(d[:4], "big")
        seen.add(seq)
        if seq == want:
            return
for i in range(n):
    s.sendto(i.to_bytes(4, "big") + b"x" * 60, (host, port))
    recv_until(time.monotonic() + 0.05, i)
recv_until(time.monotonic() + 1.0)   # late echoes still count
print(len(seen))
'
start_bg udp_echo 60 run_in_ns "$B" "$SOFTRNIC_PYTHON" -c "$SERVER" "$IPB" "$PORT"
check "udp echo server listening in $B" wait_for_port -n "$B" -u "$PORT" 10

PCAP="$SOFTRNIC_TMP/selftest.pcap"
capture_start "$NETNS_IFACE" "$PCAP" "$B" udp port "$PORT"
N=200
got=$(run_in_ns "$A" "$SOFTRNIC_PYTHON" -c "$CLIENT" "$IPB" "$PORT" "$N")
log "no loss: $got/$N echoed"
check "lossless UDP exchange ($got/$N)" test "$got" -eq "$N"
capture_stop
npk=$(timeout 30 tcpdump -nr "$PCAP" 2>/dev/null | wc -l)
check "capture saw the exchange ($npk packets >= $((2 * N)))" test "$npk" -ge $(( 2 * N ))
if command -v tshark >/dev/null; then
  # tshark decodes udp/4791 as RoCE v2 (InfiniBand BTH); our payload is not
  # a valid BTH, so just check that it reads the file.
  check "tshark reads the capture" bash -c "timeout 30 tshark -r '$PCAP' -c 1 >/dev/null 2>&1"
fi

# --- 30 % loss on B's input hook
nft_drop_udp4791 "$B" 30
got=$(run_in_ns "$A" "$SOFTRNIC_PYTHON" -c "$CLIENT" "$IPB" "$PORT" "$N")
drops=$(nft_drop_count "$B")
log "30% loss: $got/$N echoed, nft dropped ${drops:-?}"
check "loss visible (got $got of $N, expect ~$((N * 7 / 10)))" \
  test "$got" -lt $(( N * 9 / 10 )) -a "$got" -gt $(( N * 4 / 10 ))
check "nft counter counted drops" test "${drops:-0}" -gt 0
check "drop count matches loss ($drops + $got = $N)" test $(( drops + got )) -eq "$N"
nft_clear_drop "$B"
got=$(run_in_ns "$A" "$SOFTRNIC_PYTHON" -c "$CLIENT" "$IPB" "$PORT" 50)
check "loss rule removed ($got/50)" test "$got" -eq 50

# --- teardown
kill_bg udp_echo
netns_pair_down "$A" "$B"
check "namespaces removed" bash -c "! ip netns list | grep -qE '^($A|$B)( |\$)'"
check "no stray veth left" bash -c "! ip link show | grep -q 'sv$$x'"
echo "integration lib self-test: all checks passed"
