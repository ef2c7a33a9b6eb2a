#!/bin/bash
# Forged CM MADs (security review H2; IBA 12.6): a client and a server in two
# network namespaces connect over UDP; an attacker on a third address of the
# client's link, knowing both communication IDs (read from the victims'
# SOFTRNIC_CM_DEBUG lines, standing in for a prediction or a capture), sends
#   - DREQ, REJ, RTU to the server and DREQ, REJ, REP to the client, from the
#     third address with the right IDs;
#   - DREQ to each side from the peer's own (spoofed) address but a wrong peer
#     communication ID;
# and neither side may see any CM event; the connection then carries a SEND
# each way and ends with a normal DISCONNECTED. Then a client whose REQ is
# still unanswered gets a forged REP and REJ from the third address: it must
# stay waiting (no ESTABLISHED on the attacker's QPN, no REJECTED); so must
# a UD client given a forged SIDR_REP. Last,
# 2,000 MADs of no connection from spoofed sources get at most 100 answers
# per second (a reflector at the attacker's service otherwise).
# Needs root (namespaces, raw socket), else skipped.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
[[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]] || skip "librdmacm.so.1 not built in $SOFTRNIC_LIB_DIR"
VICTIM=${1:?usage: test_forged_cm.sh PATH/TO/cm_victim}
FORGE="$SOFTRNIC_PYTHON $(dirname "$0")/forge_cm.py"
softrnic_env
export SOFTRNIC_TRANSPORT=udp SOFTRNIC_CM_DEBUG=1

A=srfc_a B=srfc_b IPA=10.236.0.1 IPB=10.236.0.2 EVIL=10.236.0.3
netns_pair_up $A $B $IPA $IPB || die "netns setup"
ip -n $B addr add $EVIL/24 dev "$NETNS_IFACE" || die "third address"
forge() { ip netns exec $B env -u LD_PRELOAD $FORGE "$@" || die "forge_cm.py $*"; }
fail=0

# --- 1. an established connection --------------------------------------------
GO=$SOFTRNIC_TMP/go1
start_bg server 60 run_in_ns $A "$VICTIM" server 21820 "$GO"
wait_until 10 grep -q LISTENING "$(bg_log_file server)" || die "server did not start"
start_bg client 60 run_in_ns $B "$VICTIM" client $IPA 21820 "$GO"
wait_until 15 bash -c "grep -q ESTABLISHED '$(bg_log_file server)' && grep -q ESTABLISHED '$(bg_log_file client)'" ||
  die "no connection"
# The server's REP names both IDs: "send REP to <client> (comm <server> -> <client>)".
read -r S C < <(sed -nE 's/.*send REP to [0-9.]+ \(comm ([0-9a-f]+) -> ([0-9a-f]+)\).*/\1 \2/p' "$(bg_log_file server)" | head -1)
[[ -n "${S:-}" && -n "${C:-}" ]] || die "comm IDs not found in the server's debug output"
log "server comm $S, client comm $C; attacking from $EVIL"
# To the server, as if from the client (local = client's ID, remote = server's).
for attr in DREQ REJ RTU; do forge --src $EVIL --dst $IPA --attr $attr --local $C --remote $S; done
# To the client, as if from the server.
for attr in DREQ REJ REP; do forge --src $EVIL --dst $IPB --attr $attr --local $S --remote $C; done
# From the right (spoofed) addresses, but without the peer's comm ID.
forge --src $IPB --dst $IPA --attr DREQ --local "$(printf %08x $(( 0x$C ^ 1 )))" --remote $S
forge --src $IPA --dst $IPB --attr DREQ --local "$(printf %08x $(( 0x$S ^ 1 )))" --remote $C
sleep 1
touch "$GO"
for side in server client; do
  if wait_bg $side 20 && grep -q '^OK' "$(bg_log_file $side)"; then
    log "PASS $side: no effect, data still flows: $(grep -c 'ignored' "$(bg_log_file $side)") ignored-MAD line(s)"
  else
    fail=$((fail + 1))
    log "FAIL $side: $(grep -m1 FAIL "$(bg_log_file $side)")"
  fi
done

# --- 2. a client whose REQ is unanswered --------------------------------------
# Nobody runs softrnic in A now: the REQ is retried for ~5 s.
GO=$SOFTRNIC_TMP/go2
start_bg pending 60 run_in_ns $B "$VICTIM" pending $IPA 21821 "$GO"
wait_until 10 grep -q READY "$(bg_log_file pending)" || die "pending client did not start"
wait_until 5 grep -q 'send REQ' "$(bg_log_file pending)" || die "no REQ sent"
C=$(sed -nE 's/.*send REQ to [0-9.]+ \(comm ([0-9a-f]+) -> .*/\1/p' "$(bg_log_file pending)" | head -1)
log "pending client comm $C"
forge --src $EVIL --dst $IPB --attr REP --local 0badc0de --remote "$C"
forge --src $EVIL --dst $IPB --attr REJ --local 0badc0de --remote "$C"
sleep 0.5
touch "$GO"
if wait_bg pending 20 && grep -q '^OK' "$(bg_log_file pending)"; then
  log "PASS pending client: forged REP and REJ ignored"
else
  fail=$((fail + 1))
  log "FAIL pending client: $(grep -m1 FAIL "$(bg_log_file pending)")"
fi

# The same for a UD id: a forged SIDR_REP (it names only our request ID).
GO=$SOFTRNIC_TMP/go2u
start_bg udpending 60 run_in_ns $B "$VICTIM" udpending $IPA 21824 "$GO"
wait_until 10 grep -q READY "$(bg_log_file udpending)" || die "UD client did not start"
wait_until 5 grep -q 'send SIDR_REQ' "$(bg_log_file udpending)" || die "no SIDR_REQ sent"
R=$(sed -nE 's/.*send SIDR_REQ to [0-9.]+ \(comm ([0-9a-f]+) -> .*/\1/p' "$(bg_log_file udpending)" | head -1)
log "UD client request ID $R"
forge --src $EVIL --dst $IPB --attr SIDR_REP --local "$R" --port 21824
sleep 0.5
touch "$GO"
if wait_bg udpending 20 && grep -q '^OK' "$(bg_log_file udpending)"; then
  log "PASS UD client: forged SIDR_REP ignored"
else
  fail=$((fail + 1))
  log "FAIL UD client: $(grep -m1 FAIL "$(bg_log_file udpending)")"
fi

# --- 3. replies to MADs of no connection (review L7) ----------------------------
# REQs for a port nobody listens on and DREQs for unknown comm IDs, from
# spoofed sources: each would be answered (REJ, DREP) at 1:1 size towards
# whoever the source names. The CM answers at most 100 per second.
GO=$SOFTRNIC_TMP/go3
start_bg reflector 60 run_in_ns $A "$VICTIM" listen 21822 "$GO" 4
wait_until 10 grep -q READY "$(bg_log_file reflector)" || die "listener did not start"
t0=$(date +%s%N)
forge --src 10.236.0.50 --dst $IPA --attr REQ --port 21823 --count 1000 --rate 2000 >/dev/null
for i in $(seq 10); do
  forge --src 10.236.0.51 --dst $IPA --attr DREQ --local "$(printf %08x $((RANDOM * 65536 + RANDOM)))" \
    --remote "$(printf %08x $((RANDOM * 65536 + RANDOM + 1)))" --count 100 --rate 2000 >/dev/null
done
secs=$(( ($(date +%s%N) - t0) / 1000000000 + 1 ))
sleep 0.5
rej=$(grep -c 'send REJ' "$(bg_log_file reflector)")
drep=$(grep -c 'send DREP' "$(bg_log_file reflector)")
touch "$GO"
kill_bg reflector
if (( rej + drep <= 100 * (secs + 1) )); then
  log "PASS replies: 1000 REQs + 1000 DREQs of no connection in ${secs}s got $rej REJ + $drep DREP"
else
  fail=$((fail + 1))
  log "FAIL replies: $rej REJ + $drep DREP for 2000 MADs of no connection in ${secs}s (limit 100/s)"
fi

(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: forged CM MADs change nothing"
