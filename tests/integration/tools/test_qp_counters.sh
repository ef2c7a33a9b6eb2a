#!/bin/bash
# Per-QP counters and the sysfs port counters (issue 18).
#
#   test_qp_counters.sh TRAFFIC_THEN_IDLE qp
#     Two processes (traffic_then_idle direct: one RC QP each) over UDP, so
#     every operation is packets: N RDMA WRITEs of S bytes, M RDMA READs,
#     A FETCH_ADDs. `softrnic stat --qp -j` then shows, per process, QPs
#     whose counters add up to the device's counters; the requester's QP
#     sent exactly the request packets and bytes those operations make
#     (resends aside), the target's QP received them; no error completion.
#     `softrnic stat --qp -P`, parsed by prometheus_client, has a sample per
#     QP counter equal to the JSON's, labelled with the QPN.
#   test_qp_counters.sh TRAFFIC_THEN_IDLE sysfs
#     The same traffic under `softrnic run`: the view's
#     ports/1/counters/* and hw_counters/* (kept live by the counter
#     updater, counter_updater.h), read through /proc/PID/root while both
#     processes live, equal what `softrnic stat -j` gives for the two
#     processes summed (port_counters.h's formulas), and the traffic is in
#     them.
# Nothing depends on the machine's speed: the subjects wait for each
# completion, then stay alive and idle until the test closes their stdin;
# the reads are repeated until they stop changing (a wait, not a check).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
SUBJECT=${1:?usage: test_qp_counters.sh TRAFFIC_THEN_IDLE qp|sysfs}
MODE=${2:?usage: test_qp_counters.sh TRAFFIC_THEN_IDLE qp|sysfs}
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
[[ -x $SUBJECT ]] || skip "no $SUBJECT"
softrnic_env
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"
export SOFTRNIC_TRANSPORT=udp  # packets for every operation (no direct path)

RUN=()
if [[ $MODE == sysfs ]]; then
  "$TOOL" run -- true 2>"$SOFTRNIC_TMP/run.err" ||
    skip "softrnic run cannot set up its view here: $(cat "$SOFTRNIC_TMP/run.err")"
  RUN=("$TOOL" run --)
fi

N=10 S=12345 M=4 A=3  # S: 13 packets of 1024 (the subject's path MTU)
# Both processes' files, with their QPs, once they stopped changing.
snapshot() { "$TOOL" stat --qp -j 2>/dev/null; }
settled() {
  local a b
  a=$(snapshot) && sleep 0.3 && b=$(snapshot) && [[ $a == "$b" ]] &&
    grep -q "\"pid\": $req" <<<"$a" && grep -q "\"pid\": $tgt" <<<"$a" &&
    grep -q '"qps": \[{' <<<"$a"
}
# start_subject: runs the subject (held on fd 3) until its traffic is done,
# sets req, tgt and spid, and leaves the settled counters in stat.json.
run=0
start_subject() {
  run=$((run + 1))
  rm -f "$SOFTRNIC_TMP/in"
  mkfifo "$SOFTRNIC_TMP/in"
  timeout -k 5 250 "${RUN[@]}" "$SUBJECT" direct $N $S $M $A 3>&- <"$SOFTRNIC_TMP/in" \
    >"$SOFTRNIC_TMP/subject$run.log" 2>&1 &
  spid=$!
  exec 3>"$SOFTRNIC_TMP/in"
  softrnic_on_exit "kill $spid"
  wait_until 120 grep -q '^idle$' "$SOFTRNIC_TMP/subject$run.log" ||
    die "the subject did not finish its traffic: $(cat "$SOFTRNIC_TMP/subject$run.log")"
  req=$(awk '$1 == "requester" {print $2}' "$SOFTRNIC_TMP/subject$run.log")
  tgt=$(awk '$1 == "target" {print $2}' "$SOFTRNIC_TMP/subject$run.log")
  [[ -n $req && -n $tgt ]] || die "no pids in: $(cat "$SOFTRNIC_TMP/subject$run.log")"
  log "requester pid $req, target pid $tgt"
  wait_until 60 settled || { "$TOOL" stat --qp >&2; die "the counters never settled"; }
  snapshot >"$SOFTRNIC_TMP/stat.json" || die "softrnic stat --qp -j failed"
}
start_subject

if [[ $MODE == qp ]]; then
  "$TOOL" stat --qp >&2
  check "per-QP counters add up to the device's and match the traffic" \
    "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/stat.json" "$req" "$tgt" $N $S $M $A <<'PY'
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))}
req, tgt, n, s, m, a = map(int, sys.argv[2:])
for pid in (req, tgt):
    p = procs[pid]
    assert p["live_qps"] == 1 and len(p["qps"]) == 1, (pid, p["live_qps"], p["qps"])
    for name in ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "tx_retransmit_packets",
                 "rx_naks", "rx_rnr_naks", "tx_rnr_naks"):
        total = sum(q["counters"][name] for q in p["qps"])
        assert total == p["counters"][name], (pid, name, total, p["counters"][name])
    q = p["qps"][0]
    assert q["state"] == "RTS" and q["type"] == "rc", q
    assert q["counters"]["cqe_errors"] == 0 and q["counters"]["cqe_flushes"] == 0, q
    assert p["counters"]["send_cqe_errors"] == 0 and p["counters"]["recv_cqe_errors"] == 0
    assert q["counters"]["shm_direct_ops"] == 0, q  # UDP: no direct path
rq, tq = procs[req]["qps"][0], procs[tgt]["qps"][0]
assert rq["peer_qpn"] == str(tq["qpn"]) and tq["peer_qpn"] == str(rq["qpn"]), (rq, tq)
rc, tc = rq["counters"], tq["counters"]
per_write = 13  # ceil(12345 / 1024)
want_packets = n * per_write + m + a  # WRITE packets, READ requests, atomics
sent = rc["tx_packets"] - rc["tx_retransmit_packets"]
assert sent == want_packets, ("requester request packets", sent, want_packets)
if rc["tx_retransmit_packets"] == 0:
    # BTH 12 + ICRC 4 per packet, RETH 16 on a WRITE's first packet and on
    # a READ request, AtomicETH 28; the payload padded to 4 bytes.
    want_bytes = n * (s + (-s % 4) + per_write * 16 + 16) + m * 32 + a * 44
    assert rc["tx_bytes"] == want_bytes, ("requester bytes", rc["tx_bytes"], want_bytes)
# The target received them all (duplicates of resends at most add).
assert tc["rx_packets"] >= want_packets, ("target received", tc["rx_packets"])
assert tc["rx_packets"] <= rc["tx_packets"], (tc["rx_packets"], rc["tx_packets"])
# It answered: 13 READ response packets per READ, an atomic ACK per atomic, ACKs.
assert tc["tx_packets"] >= m * per_write + a, tc
assert rc["rx_packets"] <= tc["tx_packets"] and rc["rx_packets"] >= m * per_write + a, (rc, tc)
print("requester", rc, "\ntarget", tc, file=sys.stderr)
PY
  if "$SOFTRNIC_PYTHON" -c 'import prometheus_client.parser' 2>/dev/null; then
    "$TOOL" stat --qp -P >"$SOFTRNIC_TMP/qp.prom" || die "softrnic stat --qp -P failed"
    snapshot >"$SOFTRNIC_TMP/stat2.json"
    check "the counters did not move during the reads" cmp -s "$SOFTRNIC_TMP/stat.json" "$SOFTRNIC_TMP/stat2.json"
    check "Prometheus per-QP samples (prometheus_client's parser) equal the JSON's" \
      "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/qp.prom" "$SOFTRNIC_TMP/stat.json" <<'PY'
import json, sys
from prometheus_client.parser import text_string_to_metric_families
procs = json.load(open(sys.argv[2]))
want = {}
for p in procs:
    for q in p["qps"]:
        for name, v in q["counters"].items():
            want[(str(p["pid"]), str(q["qpn"]), name)] = v
got, infos = {}, {}
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    if fam.name == "softrnic_qp_info":
        for smp in fam.samples:
            infos[(smp.labels["pid"], smp.labels["qpn"])] = smp.labels
        continue
    if not fam.name.startswith("softrnic_qp_"):
        continue
    assert fam.type == "counter" and fam.documentation, (fam.name, fam.type)
    for smp in fam.samples:
        if smp.name.endswith("_created"):
            continue
        name = smp.name[len("softrnic_qp_"):-len("_total")]
        key = (smp.labels["pid"], smp.labels["qpn"], name)
        assert key not in got, ("twice", key)
        assert smp.labels["type"] == "rc" and smp.labels["port"] == "1", smp.labels
        got[key] = int(smp.value)
assert got == want, (sorted(set(got.items()) ^ set(want.items())))
for p in procs:
    for q in p["qps"]:
        info = infos[(str(p["pid"]), str(q["qpn"]))]
        assert info["state"] == q["state"] and info["peer_qpn"] == q["peer_qpn"], info
print(len(got), "per-QP samples match", file=sys.stderr)
PY
  else
    log "python3-prometheus-client not installed: per-QP Prometheus output not parsed"
  fi
else
  # The view of the requester (both processes share it: the target is the
  # requester's child, in its mount namespace).
  PORT=/proc/$req/root/sys/class/infiniband/softrnic0/ports/1
  [[ -r $PORT/counters/port_xmit_packets ]] || die "no counters in the view: $(ls -R "$PORT" 2>&1 | head)"
  read_sysfs() {
    for f in "$PORT"/counters/* "$PORT"/hw_counters/*; do
      echo "${f#"$PORT"/} $(cat "$f")"
    done
  }
  # The updater rewrites the files within ~100 ms of a stats file's change:
  # wait until the view agrees with the counters (a wait, not a check).
  agree() {
    snapshot >"$SOFTRNIC_TMP/stat.json" && read_sysfs >"$SOFTRNIC_TMP/sysfs.txt" &&
      "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/stat.json" "$SOFTRNIC_TMP/sysfs.txt" "$req" "$tgt" \
        >"$SOFTRNIC_TMP/agree.out" 2>&1 <<'PY'
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))}
files = dict(l.split() for l in open(sys.argv[2]) if l.strip())
t = {}
for pid in map(int, sys.argv[3:]):
    for k, v in procs[pid]["counters"].items():
        t[k] = t.get(k, 0) + v
g = lambda k: t.get(k, 0)
want = {
    "counters/port_xmit_data": (g("tx_bytes") + g("shm_direct_write_bytes") + g("shm_placed_write_bytes")) // 4,
    "counters/port_rcv_data": (g("rx_bytes") + g("shm_direct_read_bytes")) // 4,
    "counters/port_xmit_packets": g("tx_packets"), "counters/port_rcv_packets": g("rx_packets"),
    "counters/unicast_xmit_packets": g("tx_packets") - g("tx_multicast_packets"),
    "counters/unicast_rcv_packets": g("rx_packets") - g("rx_multicast_packets"),
    "counters/multicast_xmit_packets": g("tx_multicast_packets"),
    "counters/multicast_rcv_packets": g("rx_multicast_packets"),
    "counters/port_rcv_errors": g("rx_dropped_parse") + g("udp_rx_icrc_errors") + g("udp_rx_runts"),
    "counters/symbol_error": 0, "counters/VL15_dropped": 0, "counters/link_downed": 0,
    "hw_counters/sent_pkts": g("tx_packets"), "hw_counters/rcvd_pkts": g("rx_packets"),
    "hw_counters/duplicate_request": g("rx_duplicates"),
    "hw_counters/out_of_seq_request": g("rx_out_of_sequence"),
    "hw_counters/rcvd_rnr_err": g("rx_rnr_naks"), "hw_counters/send_rnr_err": g("tx_rnr_naks"),
    "hw_counters/req_cqe_error": g("send_cqe_errors"),
    "hw_counters/local_ack_timeout_err": g("retransmit_timeouts"),
}
got = {k: int(files[k]) for k in want}
assert got == want, {k: (got[k], want[k]) for k in want if got[k] != want[k]}
assert g("tx_packets") > 0 and got["counters/port_xmit_data"] > 0
print(got)
PY
  }
  wait_until 60 agree || die "the view's counters never matched softrnic stat -j: $(cat "$SOFTRNIC_TMP/agree.out")"
  check "sysfs counters equal softrnic stat -j (both processes summed)" agree
  cat "$SOFTRNIC_TMP/agree.out" >&2
  # The updater: the process of that name in the view's mount namespace
  # (read from /proc by the shell itself: pgrep under the sanitizer runtime
  # the CI build preloads can hang).
  updater=""
  view_ns=$(readlink "/proc/$req/ns/mnt")
  for d in /proc/[0-9]*; do
    { read -r comm <"$d/comm"; } 2>/dev/null || continue
    [[ $comm == softrnic-ctrs && $(readlink "$d/ns/mnt") == "$view_ns" ]] && updater=${d#/proc/}
  done
  check "a counter updater runs in the view" test -n "$updater"
  check "the view is read-only for the command" \
    bash -c "! touch '$PORT/counters/port_xmit_data' 2>/dev/null"
  check "every file node_exporter's collector reads in counters/ is there" bash -c "
    for f in excessive_buffer_overrun_errors link_downed link_error_recovery local_link_integrity_errors \
      multicast_rcv_packets multicast_xmit_packets port_rcv_constraint_errors port_rcv_data \
      port_rcv_errors port_rcv_packets port_rcv_remote_physical_errors port_rcv_switch_relay_errors \
      port_xmit_constraint_errors port_xmit_data port_xmit_discards port_xmit_packets port_xmit_wait \
      symbol_error unicast_rcv_packets unicast_xmit_packets VL15_dropped; do
      [[ -r '$PORT'/counters/\$f ]] || { echo missing \$f; exit 1; }
    done"
fi
check "both processes alive through every read" kill -0 "$req" "$tgt"
exec 3>&-
wait "$spid"; rc=$?
check "the subject checked its data and exits 0 when released (got $rc)" test "$rc" -eq 0

if [[ $MODE == qp ]]; then
  # Again over shared memory (the default transport): the WRITEs, READs and
  # atomics are done directly on the target's memory, counted as the
  # requester QP's direct operations, exactly.
  unset SOFTRNIC_TRANSPORT
  start_subject
  "$TOOL" stat -p "$req" --qp >&2
  check "the requester QP's direct operations and bytes, exactly" \
    "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/stat.json" "$req" "$tgt" $N $S $M $A <<'PY'
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))}
req, tgt, n, s, m, a = map(int, sys.argv[2:])
rq = procs[req]["qps"][0]["counters"]
tq = procs[tgt]["qps"][0]["counters"]
assert rq["shm_direct_ops"] == n + m + a, rq
assert rq["shm_direct_bytes"] == (n + m) * s + 8 * a, rq
assert rq["shm_direct_ops"] == procs[req]["counters"]["shm_direct_ops"]
assert tq["shm_direct_ops"] == 0, tq
PY
  check "both processes alive through every read" kill -0 "$req" "$tgt"
  exec 3>&-
  wait "$spid"; rc=$?
  check "the subject exits 0 when released (got $rc)" test "$rc" -eq 0
fi
if [[ -n ${updater:-} ]]; then
  wait_until 30 bash -c "! kill -0 $updater 2>/dev/null" ||
    die "the counter updater (pid $updater) outlived the command"
  log "the counter updater ended with the command"
fi
log "PASS: per-QP counters ($MODE)"
