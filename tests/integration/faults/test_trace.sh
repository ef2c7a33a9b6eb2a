#!/bin/bash
# The fault lab's trace (SOFTRNIC_TRACE, docs/fault-lab-design.md) from
# Debian's unmodified ibv_rc_pingpong over softrnic on a lossy link
# (SOFTRNIC_TRANSPORT=udp, SOFTRNIC_FAULTS=drop=0.02,seed=3): each process
# writes trace-<pid>.json and its .txt summary at exit, and
#   - the JSON validates against the trace event format's schema
#     (trace_event_schema.json, python3-jsonschema);
#   - every QP the pingpongs created ("local address: ... QPN 0x...") has a
#     thread track named after it;
#   - retransmissions and fault events are recorded;
#   - the summary parses: one qp= line per QP, a total line that adds up.
#
# usage: test_trace.sh [LIBDIR]   (default: $SOFTRNIC_LIB_DIR)
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -f "$LIBDIR/libibverbs.so.1" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
command -v ibv_rc_pingpong >/dev/null || { echo "ibv_rc_pingpong not installed" >&2; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null || { echo "python3-jsonschema not installed" >&2; exit 77; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + ($$ % 20000)))

export SOFTRNIC_TRANSPORT=udp
export SOFTRNIC_FAULTS=drop=0.02,seed=3
export SOFTRNIC_TRACE="$TMP/trace-%p.json"
# 4 KiB messages of 4 packets each way, 500 round trips: ~4,000 request
# packets, so 2% loss costs dozens of them (and ACKs) in every run.
args=(-g 0 -s 4096 -n 500 -p "$PORT")
timeout 120 ibv_rc_pingpong "${args[@]}" >"$TMP/srv.out" 2>&1 &
spid=$!
sleep 0.5
timeout 120 ibv_rc_pingpong "${args[@]}" 127.0.0.1 >"$TMP/cli.out" 2>&1
crc=$?
wait "$spid"
src=$?
if [[ $crc -ne 0 || $src -ne 0 ]]; then
  echo "FAIL ibv_rc_pingpong (client rc $crc, server rc $src)"
  tail -20 "$TMP/cli.out" "$TMP/srv.out"
  exit 1
fi

python3 - "$TMP" "$HERE/trace_event_schema.json" <<'PY'
import glob, json, os, re, sys
import jsonschema

tmp, schema_path = sys.argv[1], sys.argv[2]
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
failures = []

def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)

# The QPNs the two programs printed for their own QPs.
printed = set()
for name in ("srv.out", "cli.out"):
    text = open(os.path.join(tmp, name)).read()
    m = re.search(r"local address:.*QPN (0x[0-9a-fA-F]+)", text)
    if not m:
        fail(f"{name}: no 'local address: ... QPN' line:\n{text}")
    else:
        printed.add(int(m.group(1), 16))

traces = sorted(glob.glob(os.path.join(tmp, "trace-*.json")))
if len(traces) != 2:
    fail(f"expected a trace per process, found {traces}")
if glob.glob(os.path.join(tmp, "*.tmp-*")):
    fail("temporary files left behind: %s" % glob.glob(os.path.join(tmp, "*.tmp-*")))

tracked, names, fault_events, retransmissions = set(), {}, 0, 0
summary_qps = set()
for path in traces:
    doc = json.load(open(path))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:5]:
        fail(f"{os.path.basename(path)}: schema: {e.message} at {list(e.absolute_path)}")
    pid = int(re.search(r"trace-(\d+)\.json$", path).group(1))
    events = doc["traceEvents"]
    procs = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    if len(procs) != 1 or procs[0]["pid"] != pid or \
            procs[0]["args"]["name"] != f"softrnic softrnic0 pid {pid}":
        fail(f"{path}: process track: {procs}")
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[e["tid"]] = e["args"]["name"]
            if e["args"]["name"].startswith("QP "):
                tracked.add(e["tid"])
        elif e.get("cat") == "fault":
            fault_events += 1
        elif e["name"] in ("rewind", "selective_resend", "retransmit_timeout"):
            retransmissions += 1
    other = doc["otherData"]
    if other["dropped_events"] != 0:
        fail(f"{path}: {other['dropped_events']} events dropped")

    # The summary: key=value lines, one per QP and a total that adds up.
    lines = open(path + ".txt").read().splitlines()
    per_qp, total = [], None
    for line in lines:
        fields = line.split(" ")
        head = fields[0]
        kv = dict(f.split("=", 1) for f in (fields if head.startswith("qp=") else fields[1:]))
        if head.startswith("qp="):
            if not re.fullmatch(r"0x[0-9a-f]{6}", kv["qp"]):
                fail(f"{path}.txt: bad qp= in {line!r}")
            per_qp.append(kv)
            summary_qps.add(int(kv["qp"], 16))
        elif head == "total":
            total = kv
        else:
            fail(f"{path}.txt: unexpected line {line!r}")
    keys = ["retransmitted", "timeouts", "rnr_naks_in", "rnr_naks_out", "completions_in_error"]
    expected_qp_keys = ["qp", "type", "state", "sent"] + keys + ["faults"]
    for kv in per_qp:
        if list(kv) != expected_qp_keys:
            fail(f"{path}.txt: keys {list(kv)} != {expected_qp_keys}")
    if total is None or list(total) != ["qps"] + keys + ["faults"]:
        fail(f"{path}.txt: total line {total}")
    else:
        if int(total["qps"]) != len(per_qp):
            fail(f"{path}.txt: qps={total['qps']} but {len(per_qp)} qp lines")
        for k in keys:
            if int(total[k]) != sum(int(kv[k]) for kv in per_qp):
                fail(f"{path}.txt: total {k} does not add up")
        if int(total["faults"]) != other["faults"]:
            fail(f"{path}.txt: total faults {total['faults']} != otherData {other['faults']}")

missing = printed - tracked
if missing:
    fail("QPs without a thread track: %s (tracks: %s)" %
         ([hex(q) for q in missing], names))
if printed - summary_qps:
    fail("QPs missing from the summaries: %s" % [hex(q) for q in printed - summary_qps])
for q in printed & tracked:
    peer = [p for p in printed if p != q]
    if peer and f"peer QPN 0x{peer[0]:06x}" not in names[q]:
        fail(f"track of 0x{q:06x} does not name its peer: {names[q]!r}")
if retransmissions == 0:
    fail("no retransmission recorded at 2% loss")
if fault_events == 0:
    fail("no fault event recorded (does the fault transport report to Transport::SetFaultEventSink?)")
print(f"traces: {len(traces)}, QP tracks: {len(tracked)}, retransmission events: "
      f"{retransmissions}, fault events: {fault_events}")
sys.exit(1 if failures else 0)
PY
rc=$?
if [[ $rc -ne 0 ]]; then
  for f in "$TMP"/trace-*.json.txt; do echo "--- $f"; cat "$f"; done
  exit 1
fi
echo "PASS trace"
