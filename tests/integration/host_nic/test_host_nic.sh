#!/bin/bash
# The host NIC (docs/host-nic.md): many softrnic processes of host B share
# B's one address at UDP 4791 and are reached from host A by QPN, with no
# SOFTRNIC_* setting, through nicd's SO_REUSEPORT group and steering
# program.
#   1. 8 ib_write_bw servers in 8 processes on B, 8 clients on A at once:
#      all complete.
#   1b. A standard RoCE v2 sender that is not softrnic (scapy's ICRC)
#       reaches the QP of either of two processes at B's one address, and
#       only that process.
#   2. 4 ibv_rc_pingpong servers on B with data checks (-c; -e, event mode:
#      16 busy-polling processes would starve a 2-CPU machine), clients from A;
#      one server is killed with SIGKILL mid-run: the other three complete.
#   2b. Two processes of B at B's address: a checked ping-pong through
#       shared memory.
#   2c. The same over B's shared IPv6 address.
#   3. rdma_cm: 3 rping servers on B on different ports, clients from A.
#   3b. nicd is killed with SIGKILL during two checked ping-pongs: both
#       complete.
#   4. nicd exits by itself once no process is left.
# The first 3,000 packets on B's wire pass scapy's ICRC check.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ib_write_bw ibv_rc_pingpong rping ss nft
softrnic_require_lib
[[ -x "$SOFTRNIC_LIB_DIR/softrnic-nicd" ]] || die "no softrnic-nicd in $SOFTRNIC_LIB_DIR"
softrnic_env
unset SOFTRNIC_BIND SOFTRNIC_PORT SOFTRNIC_HOST_NIC SOFTRNIC_TRANSPORT SOFTRNIC_FAULTS

A=shn_a B=shn_b IPA=10.234.0.1 IPB=10.234.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
ip -n $A addr add fd34::1/64 dev "$NETNS_IFACE" nodad && ip -n $B addr add fd34::2/64 dev "$NETNS_IFACE" nodad ||
  die "IPv6 addresses"
nft_count_roce $B || die "nft counter setup"
count() { nft_roce_count "$1"; }
nicd_pids() {
  local p
  for p in $(ip netns pids $B 2>/dev/null); do
    [[ $(cat /proc/$p/comm 2>/dev/null) == softrnic-nicd ]] && echo "$p"
  done
}
wait_listening() { ns_wait_listening $B "$@"; }

fail=0
# ---- 1. 8 ib_write_bw pairs at once, one address on B; the first 3,000
# RoCE packets on B's wire are captured for the scapy ICRC judge
capture_start "$NETNS_IFACE" "$SOFTRNIC_TMP/hostnic.pcap" $B -c 3000 udp port 4791 ||
  die "capture"
PORTS=()
for i in $(seq 0 7); do PORTS+=($((19100 + i))); done
for i in "${!PORTS[@]}"; do
  start_bg wbs$i 120 run_in_ns $B ib_write_bw -F -x 0 -s 65536 -n 2000 -p "${PORTS[$i]}"
done
wait_listening "${PORTS[@]}"
(( $(nicd_pids | wc -l) == 1 )) || die "expected exactly one nicd on $B, found: $(nicd_pids)"
for i in "${!PORTS[@]}"; do
  start_bg wbc$i 120 run_in_ns $A ib_write_bw -F -x 0 -s 65536 -n 2000 -p "${PORTS[$i]}" $IPB
done
for i in "${!PORTS[@]}"; do
  if wait_bg wbc$i 110 && wait_bg wbs$i 20 &&
     awk '/#bytes/ {h=1; next} h && $1 == 65536 && $2 == 2000 {ok=1} END {exit !ok}' \
       "$(bg_log_file wbc$i)"; then
    log "PASS ib_write_bw pair $i: $(awk '/#bytes/ {h=1; next} h && $1 == 65536 {print $4 " MB/s"}' "$(bg_log_file wbc$i)")"
  else
    fail=$((fail + 1)); log "FAIL ib_write_bw pair $i"
    bg_log wbc$i | tail -5 >&2; bg_log wbs$i | tail -5 >&2
  fi
done
log "UDP/4791 packets into $B: $(count $B)"
capture_stop
"${SOFTRNIC_PYTHON:-python3}" "$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py" \
  "$SOFTRNIC_TMP/hostnic.pcap" --min-packets 2000 ||
  { fail=$((fail + 1)); log "FAIL icrc_judge on the capture of the 8 pairs"; }

# ---- 1b. a standard RoCE v2 sender that is not softrnic (scapy frames the
# ICRC) reaches the QPN of either of two processes at B's address: the
# packets reach that process's QP (counted as from a source that is not the
# QP's peer) and nothing reaches the other process
for i in 0 1; do start_bg rs$i 60 run_in_ns $B ibv_rc_pingpong -g 0 -p $((19150 + i)); done
wait_listening 19150 19151
tool="$SOFTRNIC_BUILD_DIR/bin/softrnic"
stat_of() { LD_PRELOAD= timeout 10 "$tool" stat -p "$1" -r | awk -v n="$2" '$3 == n {print $4}'; }
# A QP shows in the stats file at the publisher's next pass.
for _ in $(seq 50); do
  rs_pid=() rs_qpn=()
  for p in $(ip netns pids $B); do
    [[ $(cat /proc/$p/comm 2>/dev/null) == ibv_rc_pingpong ]] || continue
    q=$(LD_PRELOAD= timeout 10 "$tool" stat -q -p "$p" -P | sed -nE 's/.*qpn="([0-9]+)".*/\1/p' | head -1)
    [[ -n "$q" ]] && { rs_pid+=("$p"); rs_qpn+=("$q"); }
  done
  (( ${#rs_pid[@]} == 2 )) && break
  sleep 0.1
done
(( ${#rs_pid[@]} == 2 )) || die "expected 2 servers with a QP on $B, found ${#rs_pid[@]}"
for t in 0 1; do
  o=$((1 - t))
  before_t=$(stat_of "${rs_pid[$t]}" rx_packets) before_o=$(stat_of "${rs_pid[$o]}" rx_packets)
  LD_PRELOAD= run_in_ns $A "${SOFTRNIC_PYTHON:-python3}" "$(dirname "$0")/roce_sender.py" \
    $IPA $IPB "${rs_qpn[$t]}" 20 >&2 || die "roce_sender"
  wait_until 5 bash -c "(( \$(LD_PRELOAD= timeout 10 '$tool' stat -p ${rs_pid[$t]} -r | awk '\$3 == \"rx_packets\" {print \$4}') >= $before_t + 20 ))"
  got_t=$(( $(stat_of "${rs_pid[$t]}" rx_packets) - before_t ))
  got_o=$(( $(stat_of "${rs_pid[$o]}" rx_packets) - before_o ))
  icrc=$(( $(stat_of "${rs_pid[$t]}" udp_rx_icrc_errors) + $(stat_of "${rs_pid[$o]}" udp_rx_icrc_errors) ))
  unknown=$(( $(stat_of "${rs_pid[$t]}" rx_dropped_unknown_qp) + $(stat_of "${rs_pid[$o]}" rx_dropped_unknown_qp) ))
  if (( got_t == 20 && got_o == 0 && icrc == 0 && unknown == 0 )); then
    log "PASS scapy's RoCE v2 packets to QPN ${rs_qpn[$t]} reached its process only"
  else
    fail=$((fail + 1))
    log "FAIL scapy's packets to QPN ${rs_qpn[$t]}: target got $got_t, other $got_o, ICRC errors $icrc, unknown QP $unknown"
  fi
done
kill_bg rs0; kill_bg rs1

# ---- 2. checked ping-pongs; one server killed mid-run
for i in 0 1 2 3; do
  start_bg pps$i 120 run_in_ns $B ibv_rc_pingpong -e -g 0 -c -s 4096 -n 20000 -p $((19200 + i))
done
wait_listening 19200 19201 19202 19203
# The victim is found before the clients start (a run can end within a
# second on a quiet machine).
victim=""
for p in $(ip netns pids $B); do
  if [[ $(cat /proc/$p/comm 2>/dev/null) == ibv_rc_pingpong ]] &&
     tr '\0' ' ' </proc/$p/cmdline | grep -q -- '-p 19200 '; then victim=$p; fi
done
[[ -n "$victim" ]] || die "no ibv_rc_pingpong server for port 19200 on $B"
for i in 0 1 2 3; do
  start_bg ppc$i 120 run_in_ns $A ibv_rc_pingpong -e -g 0 -c -s 4096 -n 20000 -p $((19200 + i)) $IPB
done
sleep 0.3
kill -KILL "$victim"
log "killed the server of port 19200 (pid $victim)"
for i in 1 2 3; do
  if wait_bg ppc$i 110 && wait_bg pps$i 20 && grep -q "iters in" "$(bg_log_file ppc$i)"; then
    log "PASS checked pingpong $i after a neighbour's SIGKILL: $(grep 'iters in' "$(bg_log_file ppc$i)" | sed 's/.*= //')"
  else
    fail=$((fail + 1)); log "FAIL checked pingpong $i"
    bg_log ppc$i | tail -5 >&2; bg_log pps$i | tail -5 >&2
  fi
done
kill_bg ppc0; kill_bg pps0

# ---- 2b. two processes of B reach each other at B's shared address, and
# through shared memory: the link of a shared address names the lane's
# process (docs/host-nic.md, "Same host")
start_bg sps 60 run_in_ns $B env SOFTRNIC_STATS=1 ibv_rc_pingpong -g 0 -c -s 4096 -n 500 -p 19250
wait_listening 19250
if run_in_ns $B env SOFTRNIC_STATS=1 ibv_rc_pingpong -g 0 -c -s 4096 -n 500 -p 19250 $IPB \
     >"$SOFTRNIC_TMP/spc.log" 2>&1 && wait_bg sps 20 && grep -q "iters in" "$SOFTRNIC_TMP/spc.log"; then
  # Counters at exit (SOFTRNIC_STATS=1): nothing went over UDP.
  udp=$(awk '$1 == "softrnic" && $2 == "udp_tx_packets" { s += $3; n++ } END { print n ? s : -1 }' \
        "$SOFTRNIC_TMP/spc.log" "$(bg_log_file sps)")
  if (( udp == 0 )); then
    log "PASS same-host checked pingpong at the shared address, through shared memory (0 UDP packets)"
  else
    fail=$((fail + 1)); log "FAIL same-host pingpong at the shared address: $udp UDP packets (want 0)"
  fi
else
  fail=$((fail + 1)); log "FAIL same-host checked pingpong at the shared address"
  tail -5 "$SOFTRNIC_TMP/spc.log" >&2; bg_log sps | tail -5 >&2; kill_bg sps
fi

# ---- 2c. IPv6: B's global IPv6 address is shared too (GID 2: after the
# IPv4 host address and the loopback one, docs/addressing.md); a second
# process holds it meanwhile
start_bg v6other 60 run_in_ns $B ibv_rc_pingpong -g 2 -n 10 -p 19261
start_bg v6s 60 run_in_ns $B ibv_rc_pingpong -e -g 2 -c -s 4096 -n 1000 -p 19260
wait_listening 19260 19261
if run_in_ns $A ibv_rc_pingpong -e -g 2 -c -s 4096 -n 1000 -p 19260 $IPB >"$SOFTRNIC_TMP/v6c.log" 2>&1 &&
   wait_bg v6s 20 && grep -q "iters in" "$SOFTRNIC_TMP/v6c.log" &&
   grep -q "remote address.*GID fd34::2" "$SOFTRNIC_TMP/v6c.log"; then
  log "PASS checked pingpong to B's shared IPv6 address"
else
  fail=$((fail + 1)); log "FAIL checked pingpong to B's shared IPv6 address"
  tail -5 "$SOFTRNIC_TMP/v6c.log" >&2; bg_log v6s | tail -5 >&2; kill_bg v6s
fi
kill_bg v6other

# ---- 3. rdma_cm: 3 rping servers on B, one per port, clients from A
for i in 0 1 2; do
  start_bg rps$i 60 run_in_ns $B rping -s -a $IPB -p $((19300 + i)) -C 20 -S 1024 -V
done
# rping listens through rdma_cm (no TCP socket to wait for): its entry in
# the user's rdma_cm registry (rdmacm/host_registry.h) says it is up.
wait_until 10 bash -c "(( \$(ls /dev/shm/softrnic-cm-$(id -u)/ 2>/dev/null | grep -cE -- '-106-1930[012]\$') >= 3 ))" ||
  sleep 2
for i in 0 1 2; do
  if run_in_ns $A rping -c -a $IPB -p $((19300 + i)) -C 20 -S 1024 -V >"$SOFTRNIC_TMP/rpc$i.log" 2>&1 &&
     wait_bg rps$i 20; then
    log "PASS rping to server $i"
  else
    fail=$((fail + 1)); log "FAIL rping to server $i"
    tail -5 "$SOFTRNIC_TMP/rpc$i.log" >&2; bg_log rps$i | tail -5 >&2
  fi
done

# ---- 3b. nicd killed with SIGKILL during traffic: the running processes'
# QPs carry on (their sockets and the kernel's steering program outlive it;
# docs/host-nic.md, "When nicd dies")
# nicd must have taken the rping servers' ends before these leases: it
# reads a control connection's EOF and moves its books, but an exiting
# process may still hold a member for an instant, and a lease made in that
# instant appends a member where nicd does not expect it (a race of nicd's
# bookkeeping, docs/host-nic.md "When a process dies"; it made this case
# fail once in CI, session 38). This case is about nicd's death.
sleep 1
for i in 0 1; do
  start_bg kds$i 120 run_in_ns $B ibv_rc_pingpong -e -g 0 -c -s 4096 -n 20000 -p $((19400 + i))
done
wait_listening 19400 19401
for i in 0 1; do
  start_bg kdc$i 120 run_in_ns $A ibv_rc_pingpong -e -g 0 -c -s 4096 -n 20000 -p $((19400 + i)) $IPB
done
sleep 0.5
nicd=$(nicd_pids)
[[ -n "$nicd" ]] || die "no nicd on $B during traffic"
kill -KILL $nicd
log "killed nicd (pid $nicd) during traffic"
for i in 0 1; do
  if wait_bg kdc$i 110 && wait_bg kds$i 20 && grep -q "iters in" "$(bg_log_file kdc$i)"; then
    log "PASS checked pingpong $i across nicd's SIGKILL"
  else
    fail=$((fail + 1)); log "FAIL checked pingpong $i across nicd's SIGKILL"
    bg_log kdc$i | tail -5 >&2; bg_log kds$i | tail -5 >&2
  fi
done

# ---- 4. nicd leaves once nobody uses it
gone=0
for _ in $(seq 1 200); do
  [[ -z "$(nicd_pids)" ]] && { gone=1; break; }
  sleep 0.1
done
(( gone )) || { fail=$((fail + 1)); log "FAIL nicd still running 20 s after its last process"; }

(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: host NIC"
