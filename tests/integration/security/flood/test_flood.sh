#!/usr/bin/env bash
# Issue 14, "Must show": a flood of forged RoCE packets with valid ICRCs
# against a live RC connection across two network namespaces. The
# connection (ibv_rc_pingpong -c: every message's buffer checked) must
# finish, and `softrnic stat` must show the forged packets dropped by
# reason.
#
# Two forgers (roce_flood.cc), each in one "host" spoofing the other end's
# exact address and UDP port 4791 with a raw socket, for FLOOD_SECONDS
# (default 10), FLOOD_PPS each (default 4000, see below): one toward the
# server, one toward the client, each mixing requests and responses. Half
# their packets sweep QPNs blindly with random PSNs; the other half aim at
# the live QPN (taken from ibv_rc_pingpong's output, as an on-path observer
# would) with PSNs outside the live window. Neither may
# disturb the transfer: blind ones die as unknown QPs, aimed ones at the
# PSN checks. Both ends run without the host NIC (SOFTRNIC_HOST_NIC=0),
# so that every forged packet reaches the process and its engine's checks
# are what is tested: with it, a blind packet for a lane no process holds
# goes to nicd's sink and never reaches a process (session 38;
# NicdInProcess.APacketForNoLiveLaneReachesNoProcess), and this test saw
# no unknown QP at all.
set -u
source "${SOFTRNIC_INTEGRATION_LIB:-$(dirname "$0")/../../lib}/common.sh"
softrnic_require_root
softrnic_require_cmd ibv_rc_pingpong ss
softrnic_require_lib

TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
FLOOD=${SOFTRNIC_FLOOD_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic_roce_flood}
[[ -x "$TOOL" ]] || skip "softrnic tool not built ($TOOL)"
[[ -x "$FLOOD" ]] || skip "flood tool not built ($FLOOD)"
SECONDS_FLOOD=${FLOOD_SECONDS:-10}
# Each forger's rate. This test is about acceptance, not capacity: a sender
# faster than the receiving process makes the kernel drop datagrams from the
# socket buffer, legitimate ones included, whatever softrnic then does with
# what it gets (unpaced, ~30k pps per forger against an ASan build on 2
# shared vCPUs, the engine saw ~5.6k pps and RC retries ran out). FLOOD_PPS=0
# floods unpaced.
export ROCE_FLOOD_PPS=${FLOOD_PPS:-4000}

NS_A=srflood_a NS_B=srflood_b IPA=10.236.0.1 IPB=10.236.0.2
netns_pair_up "$NS_A" "$NS_B" "$IPA" "$IPB" || die "netns setup"
softrnic_env
PORT=26101

pingpong() {  # pingpong NAME ITERS: server in B, client in A, background (300 s at most)
  start_bg "$1-server" 300 run_in_ns "$NS_B" env SOFTRNIC_STATS=1 SOFTRNIC_HOST_NIC=0 stdbuf -oL ibv_rc_pingpong -g 0 -c -n "$2" -s 4096 -p "$PORT"
  wait_for_port -n "$NS_B" -p "$1-server" "$PORT" 10 || die "server did not listen"
  start_bg "$1-client" 300 run_in_ns "$NS_A" env SOFTRNIC_STATS=1 SOFTRNIC_HOST_NIC=0 stdbuf -oL ibv_rc_pingpong -g 0 -c -n "$2" -s 4096 -p "$PORT" "$IPB"
}

# Calibration: how many exchanges per second here (sanitizers, 2 shared
# vCPUs; it varies with the load), from the pingpong's own "usec/iter"
# (startup excluded). The measured run is sized to last 2 times the flood
# plus a few seconds at that rate, and still end inside start_bg's 300 s if
# the load makes it a few times slower. ctest runs tests side by side, so
# the rate moves both ways: in one CI run the calibration saw 2,026 us per
# exchange and the flooded run finished 10,365 exchanges in under 10 s.
# So the counters are read live with `softrnic stat` when the pair outlived
# the flood, and otherwise from the dump each process prints at exit
# (SOFTRNIC_STATS=1): counters of a process that has exited can only count
# forged packets that reached its live QP.
pingpong calib 2000
wait_bg calib-client || die "calibration client failed"
wait_bg calib-server || die "calibration server failed"
usec=$(sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1/p' "$(bg_log_file calib-client)" | head -1)
[[ -n "$usec" ]] || die "no usec/iter in the calibration output"
ITERS=${FLOOD_ITERS:-$(awk -v u="$usec" -v s="$SECONDS_FLOOD" 'BEGIN { printf "%d", 2 * (s + 4) * 1e6 / u }')}
log "calibration: $usec usec per exchange; the flooded run does $ITERS"

pingpong run "$ITERS"
# "local address:  LID 0x0000, QPN 0x0000b1, PSN 0x4c0c5e, GID ::ffff:..."
qp_of() { sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\), PSN \(0x[0-9a-f]*\).*/\1 \2/p' "$(bg_log_file "$1")" | head -1; }
have_both() { [[ -n "$(qp_of run-server)" && -n "$(qp_of run-client)" ]]; }
wait_until 20 have_both || die "no QPN in the pingpong output"
read -r SQPN SPSN <<<"$(qp_of run-server)"
read -r CQPN CPSN <<<"$(qp_of run-client)"
log "server QPN $SQPN PSN $SPSN, client QPN $CQPN PSN $CPSN"
# ip netns exec, env and stdbuf exec the pingpong: it is timeout's only child.
# (stdbuf -oL: its QPN line must reach the log while it runs.)
spid=$(children_of "$(bg_pid run-server)" 2>/dev/null | head -1)
cpid=$(children_of "$(bg_pid run-client)" 2>/dev/null | head -1)

# Toward the server (QP SQPN): its responder started at the client's PSN,
# its requester at its own. Toward the client: the other way round.
run_in_ns "$NS_A" "$FLOOD" "$IPA" 4791 "$IPB" 4791 "$SECONDS_FLOOD" "$SQPN" "$CPSN" "$SPSN" \
  >"$SOFTRNIC_TMP/flood_a.log" 2>&1 &
fa=$!
run_in_ns "$NS_B" "$FLOOD" "$IPB" 4791 "$IPA" 4791 "$SECONDS_FLOOD" "$CQPN" "$SPSN" "$CPSN" \
  >"$SOFTRNIC_TMP/flood_b.log" 2>&1 &
fb=$!
wait "$fa"; ra=$?
wait "$fb"; rb=$?
cat "$SOFTRNIC_TMP/flood_a.log" "$SOFTRNIC_TMP/flood_b.log" >&2
(( ra == 77 || rb == 77 )) && skip "raw sockets not permitted"
(( ra == 0 && rb == 0 )) || die "flood tool failed ($ra, $rb)"

# Counters of both ends: live while the connection is still up, else at exit.
if bg_running run-client && bg_running run-server; then
  log "the connection outlived the flood: counters from softrnic stat"
  for who in server client; do
    pid=$([[ $who == server ]] && echo "$spid" || echo "$cpid")
    [[ -n "$pid" ]] && "$TOOL" stat -p "$pid" -r >"$SOFTRNIC_TMP/stat.$who" 2>&1
  done
  counter() { awk -v n="$2" '$3 == n {print $4}' "$SOFTRNIC_TMP/stat.$1"; }
  LIVE=1
else
  log "the pair finished its $ITERS exchanges before the flood ended: counters from its exit dump"
  LIVE=0
fi

# ITERS ends the pair (bounded by start_bg's 300 s); -c checked every buffer.
wait_bg run-client || die "client failed (data check or completion error)"
wait_bg run-server || die "server failed (data check or completion error)"
grep -q "iters in" "$(bg_log_file run-client)" || die "client did not report its exchanges"
if (( ! LIVE )); then
  for who in server client; do
    awk '$1 == "softrnic" && NF == 3 { print "x x", $2, $3 }' "$(bg_log_file "run-$who")" >"$SOFTRNIC_TMP/stat.$who"
  done
  counter() { awk -v n="$2" '$3 == n {v = $4} END {print v}' "$SOFTRNIC_TMP/stat.$1"; }
fi
for who in server client; do
  log "$who drops:"
  grep -E "rx_dropped_|rx_responses_|rx_duplicates|rx_out_of_sequence|rx_rnr_naks_invalid|rx_sr_unnegotiated|rx_ooo_|udp_rx_icrc_errors" \
    "$SOFTRNIC_TMP/stat.$who" >&2 || true
done
sent_a=$(sed -n 's/^sent \([0-9]*\) .*/\1/p' "$SOFTRNIC_TMP/flood_a.log")
check "flood toward the server sent packets (${sent_a:-0})" test "${sent_a:-0}" -gt 1000
check "server counted blind packets as unknown QPs ($(counter server rx_dropped_unknown_qp))" \
  test "$(counter server rx_dropped_unknown_qp)" -gt 0
check "server counted aimed requests as duplicates ($(counter server rx_duplicates))" \
  test "$(counter server rx_duplicates)" -gt 0
check "client counted aimed responses as never sent ($(counter client rx_responses_unsent))" \
  test "$(counter client rx_responses_unsent)" -gt 0
log "PASS"
