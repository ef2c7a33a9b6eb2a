#!/bin/bash
# Counters of the direct path (issue 18, "counters for every path"): two
# processes on one host (default transport: shared memory) do N RDMA WRITEs
# of S bytes, M RDMA READs of S bytes and A FETCH_ADDs, which the requester
# executes itself on the target's memory (src/engine/same_host/shm_direct.h; no
# packet). `softrnic stat -p PID -j` then shows exactly those operations and
# bytes in the requester's shm_direct_* counters, and none in the target's
# (its CPU takes no part). The exact counts are also the proof that every
# operation took the direct path: one that went through the ring as a
# packet would be missing from them. The Prometheus output carries the
# same numbers, with HELP text of their own.
# Nothing depends on the machine's speed: the subject (traffic_then_idle
# direct) waits for each completion, then both processes stay alive and idle
# until the test closes their stdin; the counters are read once they stopped
# moving.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
SUBJECT=${1:?usage: test_direct_counters.sh TRAFFIC_THEN_IDLE}
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
[[ -x $SUBJECT ]] || skip "no $SUBJECT"
softrnic_env
unset SOFTRNIC_TRANSPORT  # the default: shared memory between same-host processes
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"

N=100 S=12345 M=40 A=25  # S: not a multiple of anything the engine rounds to
mkfifo "$SOFTRNIC_TMP/in"
timeout -k 5 250 "$SUBJECT" direct $N $S $M $A 3>&- <"$SOFTRNIC_TMP/in" \
  >"$SOFTRNIC_TMP/subject.log" 2>&1 &
spid=$!
exec 3>"$SOFTRNIC_TMP/in"
softrnic_on_exit "kill $spid"
wait_until 120 grep -q '^idle$' "$SOFTRNIC_TMP/subject.log" ||
  die "the subject did not finish its traffic: $(cat "$SOFTRNIC_TMP/subject.log")"
req=$(awk '$1 == "requester" {print $2}' "$SOFTRNIC_TMP/subject.log")
tgt=$(awk '$1 == "target" {print $2}' "$SOFTRNIC_TMP/subject.log")
[[ -n $req && -n $tgt ]] || die "no pids in: $(cat "$SOFTRNIC_TMP/subject.log")"
log "requester pid $req, target pid $tgt"

# The publisher writes within 100 ms of a change: wait until two reads a
# moment apart agree and count something (a wait, not a check).
snapshot() { "$TOOL" stat -p "$1" -j 2>/dev/null; }
settled() {
  local a b
  a=$(snapshot "$req") && sleep 0.3 && b=$(snapshot "$req") && [[ $a == "$b" ]] &&
    grep -q '"shm_direct_ops": [1-9]' <<<"$a"
}
wait_until 60 settled || { "$TOOL" stat >&2; die "the requester's counters never settled"; }
snapshot "$req" >"$SOFTRNIC_TMP/req.json" || die "softrnic stat -p $req -j failed"
snapshot "$tgt" >"$SOFTRNIC_TMP/tgt.json" || die "softrnic stat -p $tgt -j failed"
"$TOOL" stat -p "$req" >&2

check "requester: exact direct counters per opcode" "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/req.json" \
  "$N" "$S" "$M" "$A" <<'PY'
import json, sys
[proc] = json.load(open(sys.argv[1]))
c = proc["counters"]
n, s, m, a = map(int, sys.argv[2:])
want = {
    "shm_direct_write_ops": n, "shm_direct_write_bytes": n * s,
    "shm_direct_read_ops": m, "shm_direct_read_bytes": m * s,
    "shm_direct_atomic_ops": a,
    "shm_direct_ops": n + m + a, "shm_direct_bytes": (n + m) * s + 8 * a,
}
got = {k: c.get(k) for k in want}
print(got, file=sys.stderr)
assert got == want, (got, want)
PY
check "target: no direct counter (its CPU is not involved)" "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/tgt.json" <<'PY'
import json, sys
[proc] = json.load(open(sys.argv[1]))
direct = {k: v for k, v in proc["counters"].items() if k.startswith("shm_direct_")}
assert len(direct) == 11 and not any(direct.values()), direct
PY
"$TOOL" stat -p "$req" -P >"$SOFTRNIC_TMP/req.prom" || die "softrnic stat -p $req -P failed"
check "Prometheus: the same count" grep -qE \
  "^softrnic_shm_direct_write_ops_total\{pid=\"$req\".*\} $N\$" "$SOFTRNIC_TMP/req.prom"
check "Prometheus: HELP text of its own" grep -qx \
  "# HELP softrnic_shm_direct_read_bytes_total Bytes read by direct RDMA READs from same-host peers." \
  "$SOFTRNIC_TMP/req.prom"
check "both processes alive through every read" kill -0 "$req" "$tgt"
exec 3>&-
wait "$spid"; rc=$?
check "the subject checked its data and exits 0 when released (got $rc)" test "$rc" -eq 0
log "PASS: direct-path counters"
