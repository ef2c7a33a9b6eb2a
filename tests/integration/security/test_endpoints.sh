#!/bin/bash
# Security review M5 (and the loopback part of L4): endpoint squatting by a
# second local user (nobody, 65534) against a root victim's device, in a
# private network namespace with one "host" address (a veth interface).
#   hostname  nobody binds the abstract names softrnic-udp-<hostIP>:4791
#             (datagram and listening stream) first -> the victim's device
#             still owns hostIP:4791 (its GID table lists ::ffff:hostIP)
#   loopback  nobody binds UDP 4791 on all 16 pid-derived loopback candidates
#             of the victim's pid (known before it execs) and their
#             abstract names -> the victim's device still opens, with a
#             loopback GID nobody could predict
# What this cannot cover: binding UDP hostIP:4791 itself before any softrnic
# process runs takes the host address from every softrnic process of other
# users (RoCE v2's port is fixed and unprivileged): docs/security.md.
set -u
if [[ -z "${_SOFTRNIC_SEC_PRIVATE_NET:-}" && $(id -u) == 0 ]]; then
  export _SOFTRNIC_SEC_PRIVATE_NET=1
  exec unshare -n -m --propagation private bash "$0" "$@"
fi
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
softrnic_require_cmd setpriv
softrnic_require_cmd ibv_devinfo
id nobody >/dev/null 2>&1 || skip "no user nobody"
softrnic_env
mount -t tmpfs -o mode=1777,size=64m softrnic-sec-shm /dev/shm || die "private /dev/shm"
HOSTIP=10.77.0.1
ip link set lo up || die "lo"
ip link add sec0 type veth peer name sec1 && ip addr add $HOSTIP/24 dev sec0 &&
  ip link set sec1 up && ip link set sec0 up || die "veth interface"

fail=0
result() { if [[ $1 == 0 ]]; then log "PASS $2"; else log "FAIL $2"; fail=$((fail + 1)); fi; }

# squatter MODE ARG: nobody's python squatter, in the background; waits
# until it has bound everything.
squatter() {
  local ready=-
  setpriv --reuid=65534 --regid=65534 --clear-groups -- "$SOFTRNIC_PYTHON" -c '
import socket, sys, time
mode, arg, ready = sys.argv[1], sys.argv[2], sys.argv[3]
held = []
def names(name):
    for t in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        s = socket.socket(socket.AF_UNIX, t)
        try:
            s.bind("\0" + name)
            if t == socket.SOCK_STREAM: s.listen(1)
            held.append(s)
        except OSError as e: print("name", name, e)
if mode == "hostname":
    names("softrnic-udp-%s:4791" % arg)
else:
    pid = int(arg)
    for k in range(16):
        a = 1 + ((pid >> 16) + 66 * k) % 254
        ip = "127.%d.%d.%d" % (a, (pid >> 8) & 0xff, pid & 0xff)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind((ip, 4791)); held.append(u)
        except OSError as e: print("udp", ip, e)
        names("softrnic-udp-%s:4791" % ip)
print("ready", flush=True)
time.sleep(60)
' "$1" "$2" "$ready" >"$SOFTRNIC_TMP/squatter.log" 2>&1 &
  squat_pid=$!
  wait_until 10 grep -q '^ready' "$SOFTRNIC_TMP/squatter.log" || die "squatter did not start: $(cat "$SOFTRNIC_TMP/squatter.log")"
}

cases=("$@")
(( ${#cases[@]} )) || cases=(hostname loopback)
for c in "${cases[@]}"; do
  case $c in
    hostname)
      squatter hostname $HOSTIP
      rc=0; timeout 20 ibv_devinfo -v >"$SOFTRNIC_TMP/hostname.out" 2>&1 || rc=$?
      gids=$(grep -i 'GID\[' "$SOFTRNIC_TMP/hostname.out" | tr -s ' \t' ' ')
      log "victim (exit $rc) GIDs: $gids"
      ok=1; [[ $rc == 0 ]] && grep -q "::ffff:$HOSTIP" <<<"$gids" && ok=0
      result $ok "hostname: the victim owns $HOSTIP:4791 despite nobody's abstract names"
      kill "$squat_pid" 2>/dev/null; wait "$squat_pid" 2>/dev/null ;;
    loopback)
      go=$SOFTRNIC_TMP/go pidf=$SOFTRNIC_TMP/pid
      rm -f "$go" "$pidf"
      timeout -k 2 30 bash -c 'echo $$ >"$1"; while [[ ! -e $2 ]]; do sleep 0.05; done; exec ibv_devinfo -v' _ "$pidf" "$go" \
        >"$SOFTRNIC_TMP/loopback.out" 2>&1 &
      vwrap=$!
      wait_until 5 test -s "$pidf" || die "victim pid"
      squatter loopback "$(cat "$pidf")"
      touch "$go"
      rc=0; wait "$vwrap" || rc=$?
      gids=$(grep -i 'GID\[' "$SOFTRNIC_TMP/loopback.out" | tr -s ' \t' ' ')
      log "victim (exit $rc) GIDs: $gids"
      [[ $rc == 0 ]] || tail -3 "$SOFTRNIC_TMP/loopback.out" >&2
      ok=1; [[ $rc == 0 ]] && grep -q "::ffff:127\." <<<"$gids" && ok=0
      result $ok "loopback: the victim's device opens with every pid-derived candidate squatted"
      kill "$squat_pid" 2>/dev/null; wait "$squat_pid" 2>/dev/null ;;
    *) die "unknown case $c" ;;
  esac
done
(( fail == 0 )) || die "$fail check(s) failed"
log "all passed"
