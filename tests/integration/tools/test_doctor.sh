#!/bin/bash
# `softrnic doctor` (issue 18) finds a broken setup and passes a good one.
#   library   LD_LIBRARY_PATH with softrnic's lib dir: ok; with a directory
#             holding the system's libibverbs.so.1 ahead of softrnic's:
#             PROBLEM naming that file, exit 1 (softrnic's is shadowed);
#             the system's alone, or unset: ok, exit 0 (`softrnic run` is
#             the documented way; the line says what a bare start loads)
#   stale     a stats file of a dead process of ours is counted, not removed
#   usage     --help: 0; an unknown argument: 2
# As root, in network namespaces of this test (nothing else binds there):
#   good      every check ok, exit 0, directly and under `softrnic run`
#   port      nobody holds UDP 4791 on 0.0.0.0: PROBLEM naming port 4791 and
#             uid 65534 (nobody), exit 1; the device really cannot open there
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
SYSLIB=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
[[ -e $SYSLIB ]] || SYSLIB=$(ldconfig -p | awk '/libibverbs\.so\.1 / {print $NF; exit}')
[[ -e $SYSLIB ]] || skip "no system libibverbs.so.1 (ibverbs-providers / libibverbs1)"
LIB=$(readlink -f "$SOFTRNIC_LIB_DIR")
# The sanitizer runtime ctest preloads for CI builds stays; only the
# library path is varied.
unset SOFTRNIC_PORT SOFTRNIC_BIND SOFTRNIC_TRANSPORT
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"

# doctor NAME [ENV...]: runs `softrnic doctor` with the environment given,
# output in $SOFTRNIC_TMP/NAME.out, exit status in rc.
doctor() {
  local name=$1; shift
  rc=0
  env "$@" "$TOOL" doctor >"$SOFTRNIC_TMP/$name.out" 2>&1 || rc=$?
  sed "s/^/    [$name] /" "$SOFTRNIC_TMP/$name.out" >&2
}
line() { grep -E "^$2 +$3 " "$SOFTRNIC_TMP/$1.out"; }  # line NAME ok|PROBLEM CHECK

# library
doctor lib-good LD_LIBRARY_PATH="$LIB"
check "softrnic's lib dir on LD_LIBRARY_PATH: libibverbs ok" line lib-good ok libibverbs
BAD=$SOFTRNIC_TMP/system-first
mkdir -p "$BAD"
ln -s "$SYSLIB" "$BAD/libibverbs.so.1"
doctor lib-bad LD_LIBRARY_PATH="$BAD:$LIB"
check "system libibverbs first: exit 1 (got $rc)" test "$rc" -eq 1
check "... PROBLEM libibverbs naming $BAD/libibverbs.so.1" \
  grep -qE "^PROBLEM +libibverbs .*$BAD/libibverbs.so.1" "$SOFTRNIC_TMP/lib-bad.out"
check "... and the fix names softrnic's lib dir" grep -qF "LD_LIBRARY_PATH=$LIB" "$SOFTRNIC_TMP/lib-bad.out"
doctor lib-unset -u LD_LIBRARY_PATH
check "LD_LIBRARY_PATH unset: exit 0 on a healthy install (got $rc)" test "$rc" -eq 0
check "... ok libibverbs saying softrnic run loads softrnic's and a bare start the system's" \
  grep -qE "^ok +libibverbs +.softrnic run CMD. loads softrnic's .*started without it load (the system's|no libibverbs)" \
  "$SOFTRNIC_TMP/lib-unset.out"
doctor lib-system LD_LIBRARY_PATH="$BAD"
check "only the system's library on LD_LIBRARY_PATH: exit 0 (got $rc)" test "$rc" -eq 0
check "... ok libibverbs naming it as not softrnic's" \
  grep -qE "^ok +libibverbs .*$BAD/libibverbs.so.1, which is not softrnic's" "$SOFTRNIC_TMP/lib-system.out"

# stale: a stats file of a dead pid of ours is counted and left alone.
bash -c 'exit 0' & dead=$!
wait "$dead"
kill -0 "$dead" 2>/dev/null && die "pid $dead still alive"
printf 'softrnic-stats 1\npid %d\ncomm x\ndevice softrnic0\n' "$dead" >"$SOFTRNIC_STATS_DIR/softrnic-$dead.stats"
doctor stale LD_LIBRARY_PATH="$LIB"
check "stale stats file counted" grep -qE "^ok +stale-files +1 stats file" "$SOFTRNIC_TMP/stale.out"
check "... and not removed (doctor changes nothing)" test -e "$SOFTRNIC_STATS_DIR/softrnic-$dead.stats"
rm -f "$SOFTRNIC_STATS_DIR/softrnic-$dead.stats"

# usage
"$TOOL" doctor --help >"$SOFTRNIC_TMP/help.out" 2>&1; rc=$?
check "--help: exit 0 (got $rc)" test "$rc" -eq 0
check "--help describes the checks" grep -q "udp-port" "$SOFTRNIC_TMP/help.out"
"$TOOL" doctor --bogus >/dev/null 2>&1; rc=$?
check "unknown argument: exit 2 (got $rc)" test "$rc" -eq 2

if [[ $(id -u) != 0 ]]; then
  log "not root: the network-namespace cases (good setup, port taken by nobody) are not run"
  log "PASS: softrnic doctor (library, stale, usage)"
  exit 0
fi
softrnic_require_cmd ip setpriv ibv_devinfo
id nobody >/dev/null 2>&1 || skip "no user nobody"
GOOD_NS=srn-doctor-good-$$ PORT_NS=srn-doctor-port-$$
for ns in "$GOOD_NS" "$PORT_NS"; do
  ip netns add "$ns" || die "ip netns add $ns"
  softrnic_on_exit "ip netns delete $ns"
  ip netns exec "$ns" ip link set lo up
done

# good: a fresh namespace, softrnic's libraries.
rc=0
LD_LIBRARY_PATH="$LIB" ip netns exec "$GOOD_NS" "$TOOL" doctor >"$SOFTRNIC_TMP/good.out" 2>&1 || rc=$?
sed 's/^/    [good] /' "$SOFTRNIC_TMP/good.out" >&2
check "good setup: exit 0 (got $rc)" test "$rc" -eq 0
check "... five checks, all ok" test "$(grep -cE '^ok ' "$SOFTRNIC_TMP/good.out")" -eq 5
rc=0
env -u LD_LIBRARY_PATH ip netns exec "$GOOD_NS" "$TOOL" run "$TOOL" doctor >"$SOFTRNIC_TMP/run.out" 2>&1 || rc=$?
sed 's/^/    [run] /' "$SOFTRNIC_TMP/run.out" >&2
check "under softrnic run: exit 0 (got $rc)" test "$rc" -eq 0

# port: nobody binds 0.0.0.0:4791 and says so once bound.
start_bg holder 100 ip netns exec "$PORT_NS" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
  "$SOFTRNIC_PYTHON" -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 4791))
print("bound", flush=True)
time.sleep(90)'
wait_until 30 grep -q bound "$(bg_log_file holder)" || die "nobody's UDP holder did not bind: $(bg_log holder)"
rc=0
LD_LIBRARY_PATH="$LIB" ip netns exec "$PORT_NS" "$TOOL" doctor >"$SOFTRNIC_TMP/port.out" 2>&1 || rc=$?
sed 's/^/    [port] /' "$SOFTRNIC_TMP/port.out" >&2
check "port 4791 taken: exit 1 (got $rc)" test "$rc" -eq 1
check "... PROBLEM udp-port naming 4791 and uid 65534" \
  grep -qE '^PROBLEM +udp-port .*0\.0\.0\.0:4791 by uid 65534' "$SOFTRNIC_TMP/port.out"
check "... the libibverbs check still ok (only the port is wrong)" line port ok libibverbs
# What doctor predicts: a device cannot open there.
rc=0
LD_LIBRARY_PATH="$LIB" run_t 30 ip netns exec "$PORT_NS" ibv_devinfo >"$SOFTRNIC_TMP/devinfo.out" 2>&1 || rc=$?
check "... and ibv_devinfo indeed cannot open the device there (rc $rc)" \
  grep -q "0.0.0.0:4791" "$SOFTRNIC_TMP/devinfo.out"
kill_bg holder
log "PASS: softrnic doctor"
