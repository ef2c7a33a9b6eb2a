#!/usr/bin/env bash
# `softrnic stat` while traffic runs: an ib_write_bw pair across two network
# namespaces (1 % loss, so recovery counters move too); the tool, run from
# the root namespace, must list both processes with non-zero packet and byte
# counters in every output mode (table, -p, -r, -j, -w watch).
# Nothing here depends on how fast the machine is: the pair runs (-D) far
# longer than the test could take and is ended by the test with SIGKILL once
# everything has been read, so both processes are alive for every read;
# their stats files, left behind by SIGKILL, must then be removed by the
# next `softrnic stat` (issue 18), and a process that exits normally must
# remove its own. The stats files go to a directory of this test
# (SOFTRNIC_STATS_DIR), so no other test's process sweeps them.
set -u
source "${SOFTRNIC_INTEGRATION_LIB:-$(dirname "$0")/../lib}/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib_loss.sh"
softrnic_require_root
softrnic_require_cmd nft ss ib_write_bw
softrnic_require_lib

TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x "$TOOL" ]] || skip "softrnic tool not built ($TOOL)"
STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$STATS_DIR"
export SOFTRNIC_STATS_DIR=$STATS_DIR

IPB=10.235.0.2
loss_setup srstat_a srstat_b 10.235.0.1 "$IPB"
loss_set 1

PORT=26001
# Longer than the test's own timeout: the test ends the pair itself.
DUR=600
timeout -k 5 400 ip netns exec "$LOSS_B" ib_write_bw -F -q 2 -D "$DUR" -p "$PORT" \
  >"$SOFTRNIC_TMP/server.log" 2>&1 &
sto=$!
softrnic_on_exit 'kill $sto $cto'   # timeout passes TERM on to ib_write_bw
cto=""
listening() { ip netns exec "$LOSS_B" ss -Hltn "sport = :$PORT" | grep -q .; }
wait_until 60 listening || die "the ib_write_bw server does not listen on $PORT: $(cat "$SOFTRNIC_TMP/server.log")"
timeout -k 5 400 ip netns exec "$LOSS_A" ib_write_bw -F -q 2 -D "$DUR" -p "$PORT" "$IPB" \
  >"$SOFTRNIC_TMP/client.log" 2>&1 &
cto=$!
spid="" cpid=""
both_running() { [[ -n "$(children_of "$sto")" && -n "$(children_of "$cto")" ]]; }
wait_until 60 both_running ||
  die "perftest did not start"
spid=$(children_of "$sto" | head -1) cpid=$(children_of "$cto" | head -1)
log "server pid $spid, client pid $cpid"

# Both publish within a moment of opening the device (the client after the
# TCP exchange); traffic has started once both show udp_tx_packets > 0.
counter() {  # counter PID NAME
  "$TOOL" stat -p "$1" -r 2>/dev/null | awk -v n="$2" '$3 == n {print $4}'
}
busy() { local a b; a=$(counter "$spid" udp_tx_packets) b=$(counter "$cpid" udp_tx_packets); (( ${a:-0} > 0 && ${b:-0} > 0 )); }
wait_until 60 busy || { "$TOOL" stat >&2; ls -l "$STATS_DIR"/softrnic-* >&2; die "no live counters for both pids (is StatsPublisher::StartForProcess called in Device::Get?)"; }

# 1. The listing shows both processes.
"$TOOL" stat >"$SOFTRNIC_TMP/stat.txt" || die "softrnic stat failed"
cat "$SOFTRNIC_TMP/stat.txt"
for p in "$spid" "$cpid"; do
  check "listing shows pid $p" grep -q "^pid $p ib_write_bw softrnic0 gid ::ffff:10.235.0." "$SOFTRNIC_TMP/stat.txt"
done

# 2. -p / -r: non-zero packets and bytes in both directions, for both.
for p in "$spid" "$cpid"; do
  "$TOOL" stat -p "$p" -r >"$SOFTRNIC_TMP/raw.$p" || die "softrnic stat -p $p -r failed"
  for c in udp_rx_packets udp_tx_packets udp_rx_bytes udp_tx_bytes rx_packets tx_packets; do
    v=$(awk -v n="$c" '$3 == n {print $4}' "$SOFTRNIC_TMP/raw.$p")
    check "pid $p $c = ${v:-missing} > 0" test "${v:-0}" -gt 0
  done
  # Everything else is present (zero or not).
  for c in retransmit_timeouts retransmit_rewinds tx_naks_sequence rx_naks tx_rnr_naks \
           rx_rnr_naks rx_dropped_parse rx_dropped_unknown_qp udp_rx_icrc_errors rx_duplicates; do
    check "pid $p reports $c" grep -q " $c [0-9]*\$" "$SOFTRNIC_TMP/raw.$p"
  done
done
"$TOOL" stat -p "$cpid" | sed 's/^/    /'
rec=$(( $(counter "$spid" tx_naks_sequence) + $(counter "$cpid" retransmit_rewinds) + $(counter "$cpid" retransmit_timeouts) ))
log "loss recovery visible in counters: $rec (NAKs sent by the server + client rewinds/timeouts)"

# 3. -j is valid JSON with both pids.
"$TOOL" stat -j >"$SOFTRNIC_TMP/stat.json" || die "softrnic stat -j failed"
check "JSON lists both pids with traffic" "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/stat.json" "$spid" "$cpid" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
procs = {p["pid"]: p for p in data}
for pid in map(int, sys.argv[2:]):
    assert pid in procs, pid
    assert procs[pid]["counters"]["udp_rx_packets"] > 0
PY

# 4. Watch mode: per-second rates, non-zero while traffic runs.
"$TOOL" stat -p "$cpid" -w 1 -c 2 >"$SOFTRNIC_TMP/watch.txt" || die "softrnic stat -w failed"
cat "$SOFTRNIC_TMP/watch.txt"
check "watch printed two intervals" test "$(grep -c '^--- ' "$SOFTRNIC_TMP/watch.txt")" -eq 2
check "watch shows a non-zero packet rate" \
  awk '$1 == "packets" && $3 + 0 > 0 {ok=1} END {exit !ok}' "$SOFTRNIC_TMP/watch.txt"

# 5. Unknown pid: exit 1.
"$TOOL" stat -p 999999 >/dev/null 2>&1; rc=$?
check "unknown pid -> exit 1" test "$rc" -eq 1

# Everything read: both were alive throughout (a read of a gone process
# would have failed above with "no running softrnic device").
check "both ib_write_bw still running after every read" both_running
kill -KILL "$cpid" "$spid"
wait "$cto" "$sto" 2>/dev/null
check "SIGKILL left both stats files" \
  test -e "$STATS_DIR/softrnic-$spid.stats" -a -e "$STATS_DIR/softrnic-$cpid.stats"
"$TOOL" stat >/dev/null 2>&1; rc=$?
check "softrnic stat with no live process -> exit 1 (got $rc)" test "$rc" -eq 1
check "softrnic stat removed the files the killed pair left" \
  test ! -e "$STATS_DIR/softrnic-$spid.stats" -a ! -e "$STATS_DIR/softrnic-$cpid.stats"
# A process that exits normally removes its own file (no sweep involved:
# nothing else uses this directory).
timeout -k 5 60 bash -c 'echo $$ >"$1"; exec ibv_devinfo' _ "$SOFTRNIC_TMP/devinfo.pid" \
  >"$SOFTRNIC_TMP/devinfo.log" 2>&1 || die "ibv_devinfo failed: $(cat "$SOFTRNIC_TMP/devinfo.log")"
dpid=$(cat "$SOFTRNIC_TMP/devinfo.pid")
check "ibv_devinfo (pid $dpid) left no stats file at exit" \
  test -z "$(ls -A "$STATS_DIR")"
loss_set 0
log "PASS: softrnic stat shows live counters for both ends"
