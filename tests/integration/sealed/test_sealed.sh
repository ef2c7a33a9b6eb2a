#!/bin/bash
# Sealed RC across two "hosts" (network namespaces on a veth pair), both with
# SOFTRNIC_SEAL=require and one pre-shared key file (docs/sealed.md):
#   1. rping -V (rdma_cm; every ping's data verified by rping) while tcpdump
#      captures the veth: every RoCE packet is sealed (BTH TVer 1), passes
#      scapy's ICRC check and tshark's decode, and rping's text ("rdma-ping-")
#      appears nowhere in the capture. The same run unsealed shows the text
#      in the capture: the search can find it.
#      Its rdma_cm connection was keyed by the X25519 exchange (the
#      server's cm_seal_exchanges).
#   2. ibv_rc_pingpong -c (out-of-band exchange, every buffer checked) and
#      perftest over rdma_cm (ib_write_bw -R, ib_read_lat -R) complete.
#   2b. prefer: two preferring ends without any key file seal by the
#      exchange alone; a preferring server and a plain client stay plain
#      (cm_seal_declined), and rping completes both ways.
#   3. What must not connect does not: a plain rdma_cm peer of a require
#      end, either side (refused by a REJ with a clear error on both
#      sides, counted as cm_seal_refused); out of band, a plain client to a
#      sealed server and a client with another key (each counted by reason
#      at the server); a key file other users may read (the device is
#      refused, with why).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd tcpdump tshark rping ibv_rc_pingpong ibv_devinfo ib_write_bw ib_read_lat
softrnic_require_lib
softrnic_env

A=srseal_a B=srseal_b IPA=10.237.0.1 IPB=10.237.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
JUDGE="$SOFTRNIC_SOURCE_DIR/tests/integration/icrc_judge.py"

KEY=$SOFTRNIC_TMP/seal.key OTHER=$SOFTRNIC_TMP/other.key LOOSE=$SOFTRNIC_TMP/loose.key
head -c 32 /dev/urandom >"$KEY" && chmod 600 "$KEY"
head -c 32 /dev/urandom >"$OTHER" && chmod 600 "$OTHER"
head -c 32 /dev/urandom >"$LOOSE" && chmod 644 "$LOOSE"
SEALED=(env SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY="$KEY")

# rping_pair TAG SERVER_ENV... -- CLIENT_ENV...: 20 verified pings of 1 KiB.
rping_pair() {
  local tag=$1; shift
  local senv=() cenv=()
  while [[ $1 != -- ]]; do senv+=("$1"); shift; done
  shift
  cenv=("$@")
  start_bg "rps-$tag" 60 run_in_ns $B "${senv[@]}" SOFTRNIC_STATS=1 rping -s -a $IPB -p 19501 -C 20 -S 1024 -V
  sleep 1  # rping listens through rdma_cm: no socket to wait for
  run_in_ns $A "${cenv[@]}" rping -c -a $IPB -p 19501 -C 20 -S 1024 -V \
    >"$SOFTRNIC_TMP/rpc-$tag.log" 2>&1
}

# --- 1. rping, sealed, captured; then the same unsealed as the control.
PCAP=$SOFTRNIC_TMP/sealed.pcap
capture_start $NETNS_IFACE "$PCAP" $B udp port 4791 || die "capture"
rping_pair sealed "${SEALED[@]}" -- "${SEALED[@]}" ||
  { cat "$SOFTRNIC_TMP/rpc-sealed.log"; bg_log rps-sealed; die "sealed rping client failed"; }
wait_bg rps-sealed 30 || { bg_log rps-sealed; die "sealed rping server failed"; }
capture_stop

PLAIN_PCAP=$SOFTRNIC_TMP/plain.pcap
capture_start $NETNS_IFACE "$PLAIN_PCAP" $B udp port 4791 || die "capture"
rping_pair plain env -- env || { cat "$SOFTRNIC_TMP/rpc-plain.log"; die "plain rping failed"; }
wait_bg rps-plain 30 || die "plain rping server failed"
capture_stop

in_capture() { "$SOFTRNIC_PYTHON" -c 'import sys; print(open(sys.argv[1], "rb").read().count(b"rdma-ping-"))' "$1"; }
plain_hits=$(in_capture "$PLAIN_PCAP")
sealed_hits=$(in_capture "$PCAP")
log "'rdma-ping-' in the plain capture: $plain_hits times; in the sealed one: $sealed_hits"
check "the control capture shows rping's text in clear" test "$plain_hits" -gt 0
check "the sealed capture holds no rping text" test "$sealed_hits" -eq 0

total=$(tshark -r "$PCAP" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
sealed_pkts=$(tshark -r "$PCAP" -Y 'udp.dstport == 4791 && infiniband.bth.tver == 1' 2>/dev/null | wc -l)
log "sealed capture: $sealed_pkts of $total RoCE packets carry TVer 1"
check "every RoCE packet of the sealed run is sealed ($sealed_pkts of $total), CM MADs aside" \
  test "$total" -gt 40 -a "$sealed_pkts" -ge $(( total - 12 ))
# rdma_cm's MADs (QP1, UD) are not sealed: the only plain packets allowed.
plain_non_mad=$(tshark -r "$PCAP" -Y 'udp.dstport == 4791 && infiniband.bth.tver == 0 && infiniband.bth.destqp != 1' 2>/dev/null | wc -l)
check "no plain packet but CM MADs ($plain_non_mad)" test "$plain_non_mad" -eq 0
"$SOFTRNIC_PYTHON" "$JUDGE" "$PCAP" --min-packets 40 ||
  die "the sealed capture failed the ICRC / tshark judge"
stat_of() { awk -v n="$2" '$1 == "softrnic" && $2 == n {v = $3} END {print v + 0}' "$1"; }
check "the sealed rping's connection was keyed by the rdma_cm exchange" \
  test "$(stat_of "$(bg_log_file rps-sealed)" cm_seal_exchanges)" -ge 1

# --- 1b. prefer, no key file anywhere: sealed by the exchange alone; a
# plain client of a preferring server: plain, and counted.
PREF_PCAP=$SOFTRNIC_TMP/prefer.pcap
capture_start $NETNS_IFACE "$PREF_PCAP" $B udp port 4791 || die "capture"
rping_pair prefer env SOFTRNIC_SEAL=prefer -- env SOFTRNIC_SEAL=prefer ||
  { cat "$SOFTRNIC_TMP/rpc-prefer.log"; bg_log rps-prefer; die "preferring rping failed"; }
wait_bg rps-prefer 30 || { bg_log rps-prefer; die "preferring rping server failed"; }
capture_stop
check "two preferring ends sealed by the exchange (no key file)" \
  test "$(stat_of "$(bg_log_file rps-prefer)" cm_seal_exchanges)" -ge 1
check "and no rping text is in their capture" test "$(in_capture "$PREF_PCAP")" -eq 0
rping_pair mixed env SOFTRNIC_SEAL=prefer -- env ||
  { cat "$SOFTRNIC_TMP/rpc-mixed.log"; bg_log rps-mixed; die "preferring server, plain client: rping failed"; }
wait_bg rps-mixed 30 || { bg_log rps-mixed; die "preferring server with a plain client failed"; }
check "a preferring server left a plain client's connection plain (cm_seal_declined)" \
  test "$(stat_of "$(bg_log_file rps-mixed)" cm_seal_declined)" -ge 1
check "and sealed nothing" test "$(stat_of "$(bg_log_file rps-mixed)" qps_sealed)" -eq 0

# --- 2. Out-of-band exchange and perftest over rdma_cm, sealed.
start_bg pps 60 run_in_ns $B "${SEALED[@]}" ibv_rc_pingpong -g 0 -c -n 200 -s 4096 -p 19502
sleep 0.5
run_in_ns $A "${SEALED[@]}" SOFTRNIC_STATS=1 ibv_rc_pingpong -g 0 -c -n 200 -s 4096 -p 19502 $IPB \
  >"$SOFTRNIC_TMP/ppc.log" 2>&1 || { cat "$SOFTRNIC_TMP/ppc.log"; die "sealed ibv_rc_pingpong failed"; }
wait_bg pps 30 || { bg_log pps; die "sealed ibv_rc_pingpong server failed"; }
check "the pingpong's QP was sealed" test "$(stat_of "$SOFTRNIC_TMP/ppc.log" qps_sealed)" -ge 1
check "and its packets opened ($(stat_of "$SOFTRNIC_TMP/ppc.log" rx_sealed_packets))" \
  test "$(stat_of "$SOFTRNIC_TMP/ppc.log" rx_sealed_packets)" -gt 200

for t in "ib_write_bw -R -s 65536 -n 500" "ib_read_lat -R -s 64 -n 500"; do
  read -r -a tool <<<"$t"
  start_bg perf 60 run_in_ns $B "${SEALED[@]}" "${tool[@]}" -p 19503
  sleep 1
  run_in_ns $A "${SEALED[@]}" "${tool[@]}" -p 19503 $IPB >"$SOFTRNIC_TMP/perf.log" 2>&1 ||
    { cat "$SOFTRNIC_TMP/perf.log"; bg_log perf; die "sealed $t failed"; }
  wait_bg perf 30 || { bg_log perf; die "sealed $t server failed"; }
  log "sealed $t: $(grep -E '^ *[0-9]+ +[0-9]+ ' "$SOFTRNIC_TMP/perf.log" | tail -1)"
done

# --- 3. Refusals. The server's counters are read live (it never
# completes, and is killed after): `softrnic stat -r` of its process.
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x "$TOOL" ]] || skip "softrnic tool not built ($TOOL)"
live_stat() {  # live_stat BG_NAME COUNTER
  local pid
  pid=$(children_of "$(bg_pid "$1")" 2>/dev/null | head -1)
  [[ -n "$pid" ]] || { echo 0; return; }
  "$TOOL" stat -p "$pid" -r 2>/dev/null | awk -v n="$2" '$3 == n {v = $4} END {print v + 0}'
}
# require against a plain rdma_cm peer: refused when the connection is made,
# with a clear error on both sides (a REJ, not retries that run out).
# Sealed server, plain client: rdma_accept fails with EACCES, the client
# is REJECTED (consumer reject, 28).
rping_pair refuse-srv "${SEALED[@]}" -- env &&
  die "a plain rping client connected to a require server"
wait_bg rps-refuse-srv 30 && die "the require server's rping succeeded with a plain client"
log "plain client: $(grep -m1 -E 'cma event|error' "$SOFTRNIC_TMP/rpc-refuse-srv.log")"
log "require server: $(grep -m1 -E 'rdma_accept|error' "$(bg_log_file rps-refuse-srv)")"
check "the plain client was rejected (REJECTED, consumer reject)" \
  grep -q "RDMA_CM_EVENT_REJECTED, error 28" "$SOFTRNIC_TMP/rpc-refuse-srv.log"
check "the require server's rdma_accept failed with EACCES" \
  grep -q "rdma_accept.*Permission denied" "$(bg_log_file rps-refuse-srv)"
check "and counted the refusal (cm_seal_refused)" \
  test "$(stat_of "$(bg_log_file rps-refuse-srv)" cm_seal_refused)" -ge 1
check "and sealed no QP" test "$(stat_of "$(bg_log_file rps-refuse-srv)" qps_sealed)" -eq 0
# Plain server, sealed client: the client's REP had no answer, so it gets
# CONNECT_ERROR (-EACCES) and sends a REJ; the server is REJECTED.
rping_pair refuse-cli env -- "${SEALED[@]}" SOFTRNIC_STATS=1 &&
  die "a require rping client connected to a plain server"
wait_bg rps-refuse-cli 30 && die "the plain server's rping succeeded with a require client"
log "require client: $(grep -m1 -E 'cma event|error' "$SOFTRNIC_TMP/rpc-refuse-cli.log")"
log "plain server: $(grep -m1 -E 'cma event|error' "$(bg_log_file rps-refuse-cli)")"
check "the require client refused the plain server's REP (CONNECT_ERROR, -EACCES)" \
  grep -q "RDMA_CM_EVENT_CONNECT_ERROR, error -13" "$SOFTRNIC_TMP/rpc-refuse-cli.log"
check "and counted it (cm_seal_refused)" \
  test "$(stat_of "$SOFTRNIC_TMP/rpc-refuse-cli.log" cm_seal_refused)" -ge 1
check "the plain server was rejected (REJECTED)" \
  grep -q "RDMA_CM_EVENT_REJECTED" "$(bg_log_file rps-refuse-cli)"

# A plain client to a sealed server: the client's packets are dropped at the
# server (counted), the server's at the client; nothing completes.
start_bg refuse 40 run_in_ns $B "${SEALED[@]}" ibv_rc_pingpong -g 0 -n 5 -p 19504
sleep 0.5
if run_in_ns $A timeout 15 ibv_rc_pingpong -g 0 -n 5 -p 19504 $IPB >"$SOFTRNIC_TMP/refused.log" 2>&1; then
  die "a plain client completed a ping-pong with a sealed server"
fi
n=$(live_stat refuse rx_dropped_unsealed)
kill_bg refuse
check "the sealed server dropped the plain client's packets as plain ($n)" test "$n" -gt 0

start_bg wrongkey 40 run_in_ns $B "${SEALED[@]}" ibv_rc_pingpong -g 0 -n 5 -p 19505
sleep 0.5
if run_in_ns $A env SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY="$OTHER" timeout 15 \
     ibv_rc_pingpong -g 0 -n 5 -p 19505 $IPB >"$SOFTRNIC_TMP/wrongkey.log" 2>&1; then
  die "a client with another key completed a ping-pong"
fi
n=$(live_stat wrongkey rx_dropped_seal_auth)
kill_bg wrongkey
check "the server refused the other key's packets as forged ($n)" test "$n" -gt 0

# A key file that other users may read: no device, and the reason.
run_in_ns $A env SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY="$LOOSE" ibv_devinfo \
  >"$SOFTRNIC_TMP/loose.log" 2>&1
check "a loose key file is refused with its reason" grep -q "chmod 600" "$SOFTRNIC_TMP/loose.log"
check "and no device is offered" bash -c "! grep -q 'hca_id' '$SOFTRNIC_TMP/loose.log'"
log "PASS"
