#!/bin/bash
# Nothing left behind (issue 18): a softrnic process killed with SIGKILL
# cannot remove its /dev/shm/softrnic-<pid>.stats file or its shared-memory
# endpoint links; the next process of the same user that creates a device,
# and `softrnic stat`, remove them. Files of other users are never touched.
#   device   SIGKILL a process with a device; its files stay; a new process
#            (ibv_devinfo) removes them
#   stat     the same, removed by `softrnic stat`
#   foreign  a file of a dead pid owned by nobody stays through root's
#            device creation and `softrnic stat`; nobody's own
#            `softrnic stat` removes it
# Runs in a private mount namespace with its own /dev/shm.
set -u
if [[ -z "${_SOFTRNIC_SWEEP_PRIVATE_SHM:-}" && $(id -u) == 0 ]]; then
  export _SOFTRNIC_SWEEP_PRIVATE_SHM=1
  exec unshare -m --propagation private bash "$0" "$@"
fi
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
softrnic_require_cmd setpriv ibv_devinfo ibv_rc_pingpong
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
softrnic_env
mount -t tmpfs -o mode=1777,size=64m softrnic-sweep-shm /dev/shm || die "private /dev/shm"
unset SOFTRNIC_STATS_DIR SOFTRNIC_STATS_SHM
EP_DIR=/dev/shm/softrnic-ep-0

# A process that keeps its device open until killed: an ibv_rc_pingpong
# server waiting for a client that never comes.
port=27100
start_victim() {  # start_victim NAME -> sets vpid
  port=$((port + 1))
  start_bg "$1" 60 ibv_rc_pingpong -g 0 -p "$port"
  local tpid; tpid=$(bg_pid "$1")   # timeout's pid; the victim is its child
  vpid=""
  for _ in {1..100}; do
    vpid=$(children_of "$tpid" | head -1)
    [[ -n $vpid ]] && break
    sleep 0.1
  done
  [[ -n $vpid ]] || die "$1 did not start: $(bg_log "$1")"
  wait_until 20 test -e "/dev/shm/softrnic-$vpid.stats" ||
    { ls -la /dev/shm >&2; die "$1 (pid $vpid) published no stats file"; }
}
links_of() { find "$EP_DIR" -maxdepth 1 -lname "/proc/$1/fd/*" 2>/dev/null | wc -l; }
# kill_victim NAME: SIGKILL (no atexit handler runs) and reap it.
kill_victim() {
  kill -KILL "$vpid"
  wait_bg "$1" 10
}

# device: the next device creation sweeps.
start_victim v1
nlinks=$(links_of "$vpid")
log "victim 1: pid $vpid, stats file and $nlinks endpoint link(s)"
kill_victim v1
check "SIGKILL left softrnic-$vpid.stats" test -e "/dev/shm/softrnic-$vpid.stats"
run_t 20 ibv_devinfo >"$SOFTRNIC_TMP/devinfo.out" 2>&1 || die "ibv_devinfo failed: $(cat "$SOFTRNIC_TMP/devinfo.out")"
check "the next device creation removed softrnic-$vpid.stats" test ! -e "/dev/shm/softrnic-$vpid.stats"
check "... and the victim's endpoint links" test "$(links_of "$vpid")" -eq 0

# stat: `softrnic stat` sweeps (the links too).
start_victim v2
nlinks=$(links_of "$vpid")
log "victim 2: pid $vpid, stats file and $nlinks endpoint link(s)"
kill_victim v2
check "SIGKILL left softrnic-$vpid.stats" test -e "/dev/shm/softrnic-$vpid.stats"
(( nlinks == 0 )) || check "SIGKILL left the endpoint links" test "$(links_of "$vpid")" -eq "$nlinks"
rc=0; run_t 20 "$TOOL" stat >"$SOFTRNIC_TMP/stat.out" 2>&1 || rc=$?
check "softrnic stat: no live process -> exit 1 (got $rc)" test "$rc" -eq 1
check "softrnic stat removed softrnic-$vpid.stats" test ! -e "/dev/shm/softrnic-$vpid.stats"
check "softrnic stat removed the endpoint links" test "$(links_of "$vpid")" -eq 0
# A live process's file stays through a sweep.
start_victim v3
run_t 20 "$TOOL" stat -p "$vpid" >/dev/null || die "softrnic stat -p $vpid (alive) failed"
check "a live process's file stays" test -e "/dev/shm/softrnic-$vpid.stats"
kill_bg v3 INT

# foreign: another user's file of a dead pid.
id nobody >/dev/null 2>&1 || skip "no user nobody (device and stat cases passed)"
dead=$vpid  # v3 is gone now
kill -0 "$dead" 2>/dev/null && die "pid $dead still alive"
f=/dev/shm/softrnic-$dead-7.stats
printf 'softrnic-stats 1\npid %d\ncomm ibv_rc_pingpong\ndevice softrnic0\n' "$dead" >"$f"
chown 65534:65534 "$f"
run_t 20 ibv_devinfo >/dev/null 2>&1 || die "ibv_devinfo failed"
run_t 20 "$TOOL" stat >/dev/null 2>&1
check "root's device creation and softrnic stat kept nobody's file" test -e "$f"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
if as_nobody test -x "$TOOL"; then
  as_nobody "$TOOL" stat >/dev/null 2>&1
  check "nobody's own softrnic stat removed nobody's stale file" test ! -e "$f"
else
  log "nobody cannot run $TOOL (build tree permissions): not checking nobody's own sweep"
  rm -f "$f"
fi
log "PASS: stale stats files and endpoint links are swept, other users' kept"
