#!/bin/bash
# Security review L1/L2: the stats files in /dev/shm against a second local
# user (nobody, 65534); the victim is root.
#   fifo     nobody mkfifo's softrnic-x.stats -> `softrnic stat` returns
#            within 5 s (it used to block in open)
#   symlink  nobody plants symlinks to a root-owned canary at the names the
#            victim's publisher writes (softrnic-<pid>.stats.tmp and the
#            final name; the pid is known before the victim execs) -> the
#            canary is untouched
#   escapes  a stats file of a live root process whose strings hold an ESC
#            sequence, a BEL, quotes, backslashes and non-UTF-8 bytes ->
#            `softrnic stat` prints no control byte; `-j` is valid JSON
#   forge    nobody writes a file naming a live root pid -> root's
#            `softrnic stat` does not show it (the file's owner must run the
#            pid); a user sees only its own processes
# Runs in a private mount namespace with its own /dev/shm.
set -u
if [[ -z "${_SOFTRNIC_SEC_PRIVATE_SHM:-}" && $(id -u) == 0 ]]; then
  export _SOFTRNIC_SEC_PRIVATE_SHM=1
  exec unshare -m --propagation private bash "$0" "$@"
fi
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
softrnic_require_cmd setpriv
softrnic_require_cmd ibv_devinfo
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
id nobody >/dev/null 2>&1 || skip "no user nobody"
softrnic_env
mount -t tmpfs -o mode=1777,size=64m softrnic-sec-shm /dev/shm || die "private /dev/shm"
unset SOFTRNIC_STATS_DIR SOFTRNIC_STATS_SHM

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
fail=0
result() { if [[ $1 == 0 ]]; then log "PASS $2"; else log "FAIL $2"; fail=$((fail + 1)); fi; }
fresh_shm() { rm -rf /dev/shm/* 2>/dev/null || true; }

cases=("$@")
(( ${#cases[@]} )) || cases=(fifo symlink escapes forge)
for c in "${cases[@]}"; do
  fresh_shm
  case $c in
    fifo)
      as_nobody mkfifo /dev/shm/softrnic-x.stats || die "mkfifo as nobody"
      rc=0; timeout -k 1 5 "$TOOL" stat >"$SOFTRNIC_TMP/fifo.out" 2>&1 || rc=$?
      log "softrnic stat exit $rc"
      result $(( rc == 124 || rc == 137 )) "fifo: softrnic stat returns despite nobody's FIFO" ;;
    symlink)
      canary=$SOFTRNIC_TMP/canary
      echo "the victim's own file" >"$canary"; cp "$canary" "$canary.orig"
      go=$SOFTRNIC_TMP/go pidf=$SOFTRNIC_TMP/pid
      # The victim keeps its device open for a while (ibv_devinfo -v is quick:
      # a loop of them, all with the pid of the wrapper's exec).
      timeout -k 2 20 bash -c 'echo $$ >"$1"; while [[ ! -e $2 ]]; do sleep 0.05; done; exec ibv_devinfo -v' _ "$pidf" "$go" \
        >"$SOFTRNIC_TMP/victim.log" 2>&1 &
      vwrap=$!
      wait_until 5 test -s "$pidf" || die "victim pid"
      vpid=$(cat "$pidf")
      for n in "softrnic-$vpid.stats.tmp" "softrnic-$vpid.stats"; do
        as_nobody ln -s "$canary" "/dev/shm/$n"
      done
      touch "$go"
      wait "$vwrap"; vrc=$?
      rc=0
      cmp -s "$canary" "$canary.orig" || { rc=1; log "canary now: $(head -c 120 "$canary" | tr '\n' ' ')"; }
      result $rc "symlink: nobody's links do not make the victim write the canary (victim exit $vrc)" ;;
    escapes)
      # A live root process named in the file (this shell's sleep child).
      sleep 30 & spid=$!
      printf 'softrnic-stats 1\npid %d\ncomm sleep\ndevice \033[2J\033]0;pwned\007dev"\\\n' "$spid" >/dev/shm/softrnic-evil.stats
      printf 'gid 0 \377\376"quote\\\ntime_ns 1\nseq 1\nrx\033[31m_packets 5\nudp_rx_packets 9\n' >>/dev/shm/softrnic-evil.stats
      rc=0
      timeout 5 "$TOOL" stat >"$SOFTRNIC_TMP/esc.txt" 2>&1 || rc=1
      timeout 5 "$TOOL" stat -r >>"$SOFTRNIC_TMP/esc.txt" 2>&1 || rc=1
      grep -q "pid $spid" "$SOFTRNIC_TMP/esc.txt" || { rc=1; log "the file was not listed"; }
      if LC_ALL=C grep -q $'[\001-\010\013-\037\177]' "$SOFTRNIC_TMP/esc.txt"; then
        rc=1; log "control bytes reached the terminal: $(cat -v "$SOFTRNIC_TMP/esc.txt" | head -3)"
      fi
      result $rc "escapes: text output carries no control bytes"
      rc=0
      timeout 5 "$TOOL" stat -j >"$SOFTRNIC_TMP/esc.json" 2>/dev/null || rc=1
      "$SOFTRNIC_PYTHON" -m json.tool "$SOFTRNIC_TMP/esc.json" >/dev/null 2>&1 || { rc=1; log "invalid JSON: $(head -c 300 "$SOFTRNIC_TMP/esc.json" | cat -v)"; }
      result $rc "escapes: -j output is valid JSON"
      kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null ;;
    forge)
      sleep 30 & spid=$!
      as_nobody bash -c "printf 'softrnic-stats 1\npid %d\ncomm sleep\ndevice softrnic0\nrx_packets 31337\n' $spid >/dev/shm/softrnic-$spid.stats"
      rc=0
      timeout 5 "$TOOL" stat -p "$spid" -r >"$SOFTRNIC_TMP/forge.txt" 2>&1
      if grep -q 31337 "$SOFTRNIC_TMP/forge.txt"; then rc=1; log "root's softrnic stat shows nobody's forgery for root's pid $spid"; fi
      result $rc "forge: counters forged by nobody for a root process are not shown"
      kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null ;;
    *) die "unknown case $c" ;;
  esac
done
(( fail == 0 )) || die "$fail check(s) failed"
log "all passed"
