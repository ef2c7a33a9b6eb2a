#!/bin/bash
# Two users at one host address (docs/host-nic.md, "Users"). On host B, root
# and an unprivileged user (nobody) run servers with no SOFTRNIC_* setting.
# Root's nicd owns B's address at UDP 4791 and serves nobody's processes
# through channels (forwarded leases), never with a member of its
# SO_REUSEPORT group (a member can re-program the whole group). From host A:
#   1. checked ibv_rc_pingpong clients reach root's and nobody's servers at
#      B's one address, at once;
#   2. scapy's RoCE v2 packets aimed at either server's QPN reach that
#      process only: the other user's process receives none of them;
#   3. nobody cannot take root's packets: a SO_REUSEPORT bind of B:4791 as
#      nobody is refused, and nobody's server holds no socket bound to
#      B:4791 (its lease carried channels; it sends from a port of its own);
#   4. nobody injects into root's QP: RC SENDs framed by scapy, sent from B
#      as plain UDP to root's QPN, reach root's process (RoCE v2 has no
#      sender authentication) and are dropped there (their source is not
#      the QP's peer: rx_dropped_source); root's checked ping-pong, running
#      meanwhile, completes with its data intact.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ibv_rc_pingpong setpriv ss nft
softrnic_require_lib
[[ -x "$SOFTRNIC_LIB_DIR/softrnic-nicd" ]] || die "no softrnic-nicd in $SOFTRNIC_LIB_DIR"
softrnic_env
unset SOFTRNIC_BIND SOFTRNIC_PORT SOFTRNIC_HOST_NIC SOFTRNIC_TRANSPORT SOFTRNIC_FAULTS
PY=${SOFTRNIC_PYTHON:-python3}
"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || skip "scapy missing (python3-scapy)"

# nobody runs the libraries from a copy everyone can read (the build tree
# may be private).
INST="$SOFTRNIC_TMP/inst"
mkdir -p "$INST"
cp -a "$SOFTRNIC_LIB_DIR"/lib*.so* "$SOFTRNIC_LIB_DIR/softrnic-nicd" "$INST/"
cp "$(dirname "$0")/roce_sender.py" "$INST/"
chmod 755 "$SOFTRNIC_TMP" "$INST"
chmod -R a+rX "$INST"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env LD_LIBRARY_PATH="$INST")

A=shu_a B=shu_b IPA=10.235.0.1 IPB=10.235.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
tool="$SOFTRNIC_BUILD_DIR/bin/softrnic"
stat_of() { LD_PRELOAD= timeout 10 "$tool" stat -p "$1" -r | awk -v n="$2" '$3 == n {print $4}'; }
qpn_of() {  # the QPN of a process's QP, once its stats file lists it (the publisher's next pass)
  local q _
  for _ in $(seq 50); do
    q=$(LD_PRELOAD= timeout 10 "$tool" stat -q -p "$1" -P | sed -nE 's/.*qpn="([0-9]+)".*/\1/p' | head -1)
    [[ -n "$q" ]] && { echo "$q"; return; }
    sleep 0.1
  done
}
wait_listening() { ns_wait_listening $B "$@"; }
server_pid() {  # server_pid PORT: the ibv_rc_pingpong of B started with -p PORT
  local p
  for p in $(ip netns pids $B); do
    [[ $(cat /proc/$p/comm 2>/dev/null) == ibv_rc_pingpong ]] &&
      tr '\0' ' ' </proc/$p/cmdline | grep -q -- "-p $1 " && { echo "$p"; return; }
  done
}
nicd_uids() {
  local p
  for p in $(ip netns pids $B); do
    [[ $(cat /proc/$p/comm 2>/dev/null) == softrnic-nicd ]] && stat -c %u /proc/$p
  done
}

fail=0
# ---- 1. root's and nobody's checked ping-pongs at B's one address, at once.
# Root's server first: its nicd (root's) owns B:4791.
start_bg rootsrv 120 run_in_ns $B ibv_rc_pingpong -e -g 0 -c -s 4096 -n 3000 -p 19500
wait_listening 19500
start_bg nobsrv 120 run_in_ns $B "${NOBODY[@]}" ibv_rc_pingpong -e -g 0 -c -s 4096 -n 3000 -p 19501
wait_listening 19501
[[ "$(nicd_uids | sort -u | tr '\n' ' ')" == "0 " ]] ||
  die "expected root's nicd alone on $B, found uids: $(nicd_uids | tr '\n' ' ')"
start_bg rootcli 120 run_in_ns $A ibv_rc_pingpong -e -g 0 -c -s 4096 -n 3000 -p 19500 $IPB
start_bg nobcli 120 run_in_ns $A ibv_rc_pingpong -e -g 0 -c -s 4096 -n 3000 -p 19501 $IPB
for who in root nob; do
  label=$([[ $who == root ]] && echo root || echo nobody)
  if wait_bg ${who}cli 110 && wait_bg ${who}srv 20 && grep -q "iters in" "$(bg_log_file ${who}cli)" &&
     grep -q "remote address.*GID ::ffff:$IPB" "$(bg_log_file ${who}cli)"; then
    log "PASS checked pingpong to $label's server at $IPB: $(grep 'iters in' "$(bg_log_file ${who}cli)" | sed 's/.*= //')"
  else
    fail=$((fail + 1)); log "FAIL checked pingpong to $label's server at $IPB"
    bg_log ${who}cli | tail -5 >&2; bg_log ${who}srv | tail -5 >&2
  fi
done

# ---- 2. scapy's packets to either user's QPN reach that process only.
start_bg r2 60 run_in_ns $B ibv_rc_pingpong -g 0 -p 19510
start_bg n2 60 run_in_ns $B "${NOBODY[@]}" ibv_rc_pingpong -g 0 -p 19511
wait_listening 19510 19511
pid=("$(server_pid 19510)" "$(server_pid 19511)")
[[ -n "${pid[0]}" && -n "${pid[1]}" ]] || die "servers of ports 19510/19511 not found"
[[ $(stat -c %u /proc/${pid[1]}) == 65534 ]] || die "the second server does not run as nobody"
qpn=("$(qpn_of "${pid[0]}")" "$(qpn_of "${pid[1]}")")
[[ -n "${qpn[0]}" && -n "${qpn[1]}" ]] || die "no QPN for the servers"
name=(root nobody)
for t in 0 1; do
  o=$((1 - t))
  before_t=$(stat_of "${pid[$t]}" rx_packets) before_o=$(stat_of "${pid[$o]}" rx_packets)
  LD_PRELOAD= run_in_ns $A "$PY" "$INST/roce_sender.py" $IPA $IPB "${qpn[$t]}" 20 >&2 ||
    die "roce_sender"
  wait_until 5 bash -c "(( \$(LD_PRELOAD= timeout 10 '$tool' stat -p ${pid[$t]} -r | awk '\$3 == \"rx_packets\" {print \$4}') >= $before_t + 20 ))"
  got_t=$(( $(stat_of "${pid[$t]}" rx_packets) - before_t ))
  got_o=$(( $(stat_of "${pid[$o]}" rx_packets) - before_o ))
  if (( got_t == 20 && got_o == 0 )); then
    log "PASS scapy's packets to ${name[$t]}'s QPN ${qpn[$t]} reached ${name[$t]}'s process only"
  else
    fail=$((fail + 1))
    log "FAIL scapy's packets to ${name[$t]}'s QPN ${qpn[$t]}: that process got $got_t, ${name[$o]}'s $got_o"
  fi
done

# ---- 3. nobody cannot take root's packets.
if run_in_ns $B "${NOBODY[@]}" "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
try:
    s.bind((sys.argv[1], 4791))
except OSError as e:
    print("refused:", e.strerror); sys.exit(0)
print("bound"); sys.exit(1)' $IPB; then
  log "PASS nobody's SO_REUSEPORT bind of $IPB:4791 is refused"
else
  fail=$((fail + 1)); log "FAIL nobody joined root's group at $IPB:4791"
fi
# The kernel names the local address:port of each socket of nobody's server.
if ip netns exec $B ss -Hunap "src $IPB" | grep "pid=${pid[1]}," | grep -q ":4791 "; then
  fail=$((fail + 1)); log "FAIL nobody's server holds a socket bound to $IPB:4791"
else
  log "PASS nobody's server holds no socket at $IPB:4791 (it sends from $(ip netns exec $B ss -Hunap "src $IPB" | grep "pid=${pid[1]}," | awk '{print $4}' | head -1))"
fi
kill_bg r2; kill_bg n2

# ---- 4. nobody's forged SENDs to root's QP, during root's checked ping-pong
# (its counters at exit: SOFTRNIC_STATS=1).
start_bg rootsrv4 120 run_in_ns $B env SOFTRNIC_STATS=1 ibv_rc_pingpong -e -g 0 -c -s 4096 -n 30000 -p 19520
wait_listening 19520
start_bg rootcli4 120 run_in_ns $A ibv_rc_pingpong -e -g 0 -c -s 4096 -n 30000 -p 19520 $IPB
victim="" q=""
for _ in $(seq 50); do
  victim=$(server_pid 19520)
  [[ -n "$victim" ]] && q=$(qpn_of "$victim") && [[ -n "$q" ]] && break
  sleep 0.1
done
[[ -n "$victim" && -n "$q" ]] || die "no QP for root's server of port 19520"
run_in_ns $B "${NOBODY[@]}" "$PY" "$INST/roce_sender.py" $IPB $IPB "$q" 50 >&2 || die "roce_sender as nobody"
if wait_bg rootcli4 110 && wait_bg rootsrv4 20 && grep -q "iters in" "$(bg_log_file rootcli4)"; then
  dropped=$(awk '$1 == "softrnic" && $2 == "rx_dropped_source" {print $3}' "$(bg_log_file rootsrv4)")
  if (( ${dropped:-0} >= 50 )); then
    log "PASS root's checked pingpong completes; nobody's 50 forged SENDs were dropped (rx_dropped_source $dropped)"
  else
    fail=$((fail + 1)); log "FAIL nobody's forged SENDs: rx_dropped_source ${dropped:-none} (want >= 50)"
    bg_log rootsrv4 | grep -E "^softrnic rx_" >&2
  fi
else
  fail=$((fail + 1)); log "FAIL root's checked pingpong under nobody's injection"
  bg_log rootcli4 | tail -5 >&2; bg_log rootsrv4 | tail -5 >&2
fi

(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: host NIC with two users"
