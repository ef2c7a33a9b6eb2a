#!/bin/bash
# An on-path attacker against a sealed RC connection (issue 43, docs/sealed.md).
# Two "hosts" (namespaces on a veth pair) run a long checked ping-pong
# (ibv_rc_pingpong -c: every buffer verified) with SOFTRNIC_SEAL=require and
# one key. Meanwhile the attacker captures the client's sealed packets on
# the path and sends them to the server again with valid ICRCs
# (seal_attacker.py): replayed, reordered, with a bit flipped, and forged
# (counter ahead, body random). Nothing of it may be placed or completed:
# the ping-pong finishes with every buffer intact, and the server counts
# each kind where it belongs (replays as replays, the rest as forged).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd tcpdump ibv_rc_pingpong
softrnic_require_lib
softrnic_env
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x "$TOOL" ]] || skip "softrnic tool not built ($TOOL)"

A=srseat_a B=srseat_b IPA=10.238.0.1 IPB=10.238.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
KEY=$SOFTRNIC_TMP/seal.key
head -c 32 /dev/urandom >"$KEY" && chmod 600 "$KEY"
SEALED=(env SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY="$KEY")

# Long enough to outlive the attack on a loaded machine; it ends by count.
ITERS=${SEAL_ATTACK_ITERS:-200000}
start_bg srv 240 run_in_ns $B "${SEALED[@]}" ibv_rc_pingpong -g 0 -c -n "$ITERS" -s 2048 -p 19511
sleep 0.5
start_bg cli 240 run_in_ns $A "${SEALED[@]}" ibv_rc_pingpong -g 0 -c -n "$ITERS" -s 2048 -p 19511 $IPB
spid=""
wait_until 20 bash -c "[[ -n \"\$(ls /dev/shm/softrnic-*.stats 2>/dev/null)\" ]]" || true
for _ in $(seq 50); do
  spid=$(children_of "$(bg_pid srv)" 2>/dev/null | head -1)
  [[ -n "$spid" ]] && "$TOOL" stat -p "$spid" -r 2>/dev/null | grep -q "rx_sealed_packets" && break
  sleep 0.2
done
[[ -n "$spid" ]] || die "no server process"
live() { "$TOOL" stat -p "$spid" -r 2>/dev/null | awk -v n="$1" '$3 == n {v = $4} END {print v + 0}'; }

# The attacker's view of the path: 2 s of the client's packets.
PCAP=$SOFTRNIC_TMP/path.pcap
capture_start $NETNS_IFACE "$PCAP" $A udp dst port 4791 and dst host $IPB -c 200 || die "capture"
sleep 2
capture_stop
bg_running cli || die "the ping-pong ended before the attack (raise SEAL_ATTACK_ITERS)"
replay0=$(live rx_dropped_seal_replay) auth0=$(live rx_dropped_seal_auth)
run_in_ns $A "$SOFTRNIC_PYTHON" "$(dirname "$0")/seal_attacker.py" "$PCAP" $IPB \
  >"$SOFTRNIC_TMP/attack.log" 2>&1 || { cat "$SOFTRNIC_TMP/attack.log"; die "attacker failed"; }
cat "$SOFTRNIC_TMP/attack.log" >&2
sent() { awk -v k="$1" '$1 == k {print $2}' "$SOFTRNIC_TMP/attack.log"; }
bg_running cli || log "note: the ping-pong ended during the attack"
# The server reads them in its next passes.
sleep 1
replays=$(( $(live rx_dropped_seal_replay) - replay0 ))
forged=$(( $(live rx_dropped_seal_auth) - auth0 ))
log "server: $replays more replays, $forged more forged"

wait_bg cli || { bg_log cli; die "client failed (a data check or a completion error)"; }
wait_bg srv || { bg_log srv; die "server failed (a data check or a completion error)"; }
grep -q "iters in" "$(bg_log_file cli)" || die "client did not report its exchanges"
# Replayed and reordered copies are replays (seen, or older than the
# window); bit-flipped and forged ones carry counters ahead of everything
# sent, so only their tags refuse them. Allow a tenth lost on a loaded
# machine.
want_replays=$(( ($(sent replay) + $(sent reorder)) * 9 / 10 ))
want_forged=$(( ($(sent bitflip) + $(sent forge)) * 9 / 10 ))
check "replayed and reordered packets counted as replays ($replays of $(( $(sent replay) + $(sent reorder) )))" \
  test "$replays" -ge "$want_replays"
check "bit-flipped and forged packets refused by their tags ($forged of $(( $(sent bitflip) + $(sent forge) )))" \
  test "$forged" -ge "$want_forged"
log "PASS: the checked ping-pong finished intact under replay, reorder, bit-flip and forgery"
