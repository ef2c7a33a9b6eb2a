#!/bin/bash
# `softrnic stat --prometheus` (issue 18): the counters in the Prometheus
# text format, read by prometheus_client's own parser, equal those of
# `softrnic stat -j` for the same moment.
#   traffic   two subjects (traffic_then_idle: a loopback RC pair, WRITEs and
#             SENDs), one with SOFTRNIC_TRANSPORT=udp, one with the default
#             (auto; whichever path it takes to itself), that finish their
#             traffic and then stay alive and idle until the test closes
#             their stdin: every read sees both processes; nonzero traffic
#             counters required
#   escaping  a stats file with quotes, backslashes, non-ASCII and control
#             bytes in its strings and an invalid counter name: the output
#             still parses, and the label values are as documented
#   usage     -P with -j, or with -w: exit 2
# Nothing depends on the machine's speed: the subjects wait for the test,
# and the -P / -j pair is read again until a -P read before and one after
# the -j read agree (the counters stopped moving in between).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
SUBJECT=${1:?usage: test_prometheus.sh TRAFFIC_THEN_IDLE}
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
[[ -x $SUBJECT ]] || skip "no $SUBJECT"
"$SOFTRNIC_PYTHON" -c 'import prometheus_client.parser' 2>/dev/null ||
  skip "python3-prometheus-client is not installed (scripts/install-deps.sh)"
CHECK=$(dirname "${BASH_SOURCE[0]}")/check_prometheus.py
softrnic_env
# A directory of this test: no other test's process reads or sweeps it.
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"

# start_subject NAME TRANSPORT: sets spid; the subject runs until its stdin
# (a FIFO the test holds open on fd 3 or 4) is closed.
start_subject() {
  local name=$1 transport=$2 fd=$3
  mkfifo "$SOFTRNIC_TMP/$name.in"
  SOFTRNIC_TRANSPORT=$transport timeout -k 5 250 "$SUBJECT" 200 3>&- 4>&- <"$SOFTRNIC_TMP/$name.in" \
    >"$SOFTRNIC_TMP/$name.log" 2>&1 &
  eval "spid_$name=\$!"
  eval "exec $fd>\"\$SOFTRNIC_TMP/$name.in\""
}
start_subject udp udp 3
start_subject auto auto 4
tpids="$spid_udp $spid_auto"
softrnic_on_exit "kill $tpids"
# timeout's children are the subjects.
for n in udp auto; do
  t=spid_$n
  wait_until 120 grep -q '^idle$' "$SOFTRNIC_TMP/$n.log" ||
    die "subject $n did not finish its traffic: $(cat "$SOFTRNIC_TMP/$n.log")"
  eval "pid_$n=\$(children_of \"\${!t}\" | head -1)"
done
log "subjects: udp pid $pid_udp, auto pid $pid_auto"
counter() {  # counter PID NAME
  "$TOOL" stat -p "$1" -r 2>/dev/null | awk -v n="$2" '$3 == n {print $4}'
}
# The publisher writes within 100 ms of a change: wait for the traffic to
# show before comparing (a wait, not a check).
published() { (( $(counter "$pid_udp" udp_tx_packets) > 0 )) &&
              (( $(counter "$pid_auto" shm_tx_packets) + $(counter "$pid_auto" shm_direct_ops) +
                 $(counter "$pid_auto" udp_tx_packets) > 0 )); }
wait_until 60 published || { "$TOOL" stat >&2; die "the subjects' traffic never showed in their stats files"; }

# 1. -P and -j of the same moment.
stable=0
for try in $(seq 1 50); do
  "$TOOL" stat --prometheus >"$SOFTRNIC_TMP/a.prom" || die "softrnic stat --prometheus failed"
  "$TOOL" stat -j >"$SOFTRNIC_TMP/stat.json" || die "softrnic stat -j failed"
  "$TOOL" stat -P >"$SOFTRNIC_TMP/b.prom" || die "softrnic stat -P failed"
  if cmp -s "$SOFTRNIC_TMP/a.prom" "$SOFTRNIC_TMP/b.prom"; then stable=1; break; fi
  sleep 0.2
done
(( stable )) || die "the counters of idle subjects kept changing over 50 reads"
log "read -P, -j, -P with no change in between (attempt $try)"
grep -E '^(# (HELP|TYPE) )?softrnic_udp_tx_packets_total' "$SOFTRNIC_TMP/a.prom" | sed 's/^/    /' >&2
check "every counter of both subjects equals the JSON's, traffic counted" \
  "$SOFTRNIC_PYTHON" "$CHECK" "$SOFTRNIC_TMP/a.prom" "$SOFTRNIC_TMP/stat.json" \
  "$pid_udp:udp_tx_packets" "$pid_udp:udp_rx_packets" "$pid_udp:udp_tx_bytes" \
  "$pid_udp:tx_packets" "$pid_udp:rx_packets" \
  "$pid_auto:shm_tx_packets+shm_direct_ops+udp_tx_packets"
check "-p PID: only that process" bash -c \
  "'$TOOL' stat -p $pid_udp -P | grep -v '^#' | grep -v 'pid=\"$pid_udp\"' | grep -c . | grep -qx 0"
"$TOOL" stat -p "$pid_udp" -P >"$SOFTRNIC_TMP/p.prom" && "$TOOL" stat -p "$pid_udp" -j >"$SOFTRNIC_TMP/p.json" ||
  die "softrnic stat -p $pid_udp -P/-j failed"
check "-p PID -P equals -p PID -j" "$SOFTRNIC_PYTHON" "$CHECK" "$SOFTRNIC_TMP/p.prom" "$SOFTRNIC_TMP/p.json" \
  "$pid_udp:udp_tx_packets"
check "both subjects alive through every read" kill -0 "$pid_udp" "$pid_auto"
exec 3>&- 4>&-
for n in udp auto; do
  t=spid_$n
  wait "${!t}"; rc=$?
  check "subject $n exits 0 when released (got $rc)" test "$rc" -eq 0
done

# 2. Escaping: a file another local user could have shaped. ReadStatsDir
# takes only files of live processes whose /proc/<pid>/comm matches the
# file's, so a python process renames itself (PR_SET_NAME: quote,
# backslash, UTF-8 and ESC bytes) and writes the file for its own pid.
FORGE=$SOFTRNIC_TMP/forge
mkdir -p "$FORGE"
start_bg forger 250 "$SOFTRNIC_PYTHON" -c '
import ctypes, os, sys, time
comm = b"q\"b\\x\xc3\xa9\x1b"
ctypes.CDLL(None).prctl(15, ctypes.c_char_p(comm), 0, 0, 0)  # PR_SET_NAME
with open(os.path.join(sys.argv[1], "softrnic-%d.stats" % os.getpid()), "wb") as f:
    f.write(b"softrnic-stats 1\npid %d\ncomm %s\n" % (os.getpid(), comm))
    f.write(b"device dev\"0\\x\ngid 0 ::ffff:10.0.0.1\nrx_packets 5\nbad-name 7\nrx_naks 1\nrx_naks 2\n")
print(os.getpid(), flush=True)
time.sleep(240)' "$FORGE"
wait_until 30 grep -q '^[0-9]' "$(bg_log_file forger)" || die "the forger did not start: $(bg_log forger)"
victim=$(head -1 "$(bg_log_file forger)")
"$TOOL" stat -d "$FORGE" -P >"$SOFTRNIC_TMP/forge.prom" || die "softrnic stat -d $FORGE -P failed"
sed 's/^/    /' "$SOFTRNIC_TMP/forge.prom" | grep -v '^    #' >&2
check "escaped labels parse as documented" "$SOFTRNIC_PYTHON" - "$SOFTRNIC_TMP/forge.prom" "$victim" "$(id -u)" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1], encoding="utf-8").read())}
pid = sys.argv[2]
rx = [s for s in fams["softrnic_rx_packets"].samples if s.name == "softrnic_rx_packets_total"]
assert len(rx) == 1 and rx[0].value == 5, rx
assert rx[0].labels == {"pid": pid, "uid": sys.argv[3], "device": 'dev"0\\x', "port": "1"}, rx[0].labels
naks = fams["softrnic_rx_naks"].samples
assert [s.value for s in naks] == [2], naks  # the last line of a name, as -j
assert not any("bad" in n for n in fams), sorted(fams)
info = fams["softrnic_device_info"].samples[0].labels
assert info["comm"] == 'q"b\\x\\xc3\\xa9\\x1b', info["comm"]
assert info["gids"] == "::ffff:10.0.0.1", info
PY

# 3. Usage errors.
"$TOOL" stat -P -j >/dev/null 2>&1; rc=$?
check "-P with -j: exit 2 (got $rc)" test "$rc" -eq 2
"$TOOL" stat -P -w 1 >/dev/null 2>&1; rc=$?
check "-P with -w: exit 2 (got $rc)" test "$rc" -eq 2
log "PASS: softrnic stat --prometheus"
