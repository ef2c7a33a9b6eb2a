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
#   nicdname  nobody listens on the abstract name of root's host NIC daemon
#             (softrnic-nicd-0-4791) first -> the victim does not trust it
#             (another uid) and still owns hostIP:4791, binding alone
#   lease     while root's nicd serves a root process, nobody asks it for a
#             lease (root's nicd serves other users forwarded: what comes
#             back are unix channels, never a UDP socket of the group) and
#             binds hostIP:4791 with SO_REUSEPORT to join the group
#             (EADDRINUSE): nobody holds no member, so it can neither
#             receive root's packets nor re-program the group
#             (docs/host-nic.md, "Users")
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
elif mode == "nicdname":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind("\0softrnic-nicd-%s-4791" % arg); s.listen(8); held.append(s)
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

# victim_owns_host CASE WHY: the victim's device (ibv_devinfo) opens and
# lists ::ffff:HOSTIP.
victim_owns_host() {
  local rc=0 gids ok=1
  timeout 20 ibv_devinfo -v >"$SOFTRNIC_TMP/$1.out" 2>&1 || rc=$?
  gids=$(grep -i 'GID\[' "$SOFTRNIC_TMP/$1.out" | tr -s ' \t' ' ')
  log "victim (exit $rc) GIDs: $gids"
  [[ $rc == 0 ]] && grep -q "::ffff:$HOSTIP" <<<"$gids" && ok=0
  result $ok "$1: the victim owns $HOSTIP:4791 $2"
}

cases=("$@")
(( ${#cases[@]} )) || cases=(hostname loopback nicdname lease)
for c in "${cases[@]}"; do
  case $c in
    hostname)
      squatter hostname $HOSTIP
      victim_owns_host hostname "despite nobody's abstract names"
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
    nicdname)
      # The earlier cases' nicd leaves ~10 s after its last process (the
      # last lane's quarantine, docs/host-nic.md).
      wait_until 20 bash -c "! ss -Hxl | grep -q '@softrnic-nicd-$(id -u)-4791'" ||
        die "root's nicd did not leave"
      squatter nicdname "$(id -u)"
      victim_owns_host nicdname "despite nobody's nicd name"
      kill "$squat_pid" 2>/dev/null; wait "$squat_pid" 2>/dev/null ;;
    lease)
      # A root process served by root's nicd (ibv_rc_pingpong's server holds
      # its device while it waits for a client that never comes).
      timeout -k 2 30 ibv_rc_pingpong -g 0 -p 19990 >"$SOFTRNIC_TMP/leaseholder.out" 2>&1 &
      holder=$!
      wait_until 10 bash -c "ss -Hltn 'sport = :19990' | grep -q ." || die "lease holder"
      ss -Hxl | grep -q "@softrnic-nicd-$(id -u)-4791" || die "no nicd serves the lease holder"
      out=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- "$SOFTRNIC_PYTHON" -c '
import array, errno, socket, struct, sys
hostip, uid = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect("\0softrnic-nicd-%s-4791" % uid)
    s.send(struct.pack("<IHH", 0x534e4831, 4791, 0))  # Hello
    s.settimeout(5)
    data, anc, flags, _ = s.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
    fds = []
    for (l, t, d) in anc:
        if t == socket.SCM_RIGHTS:
            fds += array.array("i", d[: len(d) - len(d) % 4]).tolist()
    fams = [socket.socket(fileno=f).family for f in fds]
    inet = sum(1 for f in fams if f in (socket.AF_INET, socket.AF_INET6))
    # Lease: magic, error, lane, count, forwarded (protocol.h).
    print("lease bytes=%d fds=%d inet=%d forwarded=%d" %
          (len(data), len(fds), inet, data[10] if len(data) > 10 else -1))
except OSError as e:
    print("lease refused:", e.strerror)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
try:
    u.bind((hostip, 4791)); print("joined the group")
except OSError as e:
    print("bind:", errno.errorcode.get(e.errno, e.errno))
' "$HOSTIP" "$(id -u)" 2>&1)
      log "nobody: $(tr '\n' ' ' <<<"$out")"
      kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
      ok=1
      grep -qE "^lease bytes=[0-9]+ fds=[1-9][0-9]* inet=0 forwarded=1" <<<"$out" &&
        grep -q "^bind: EADDRINUSE" <<<"$out" && ok=0
      result $ok "lease: root's nicd gives nobody channels, no socket of its group, and nobody cannot join the group" ;;
    *) die "unknown case $c" ;;
  esac
done
(( fail == 0 )) || die "$fail check(s) failed"
log "all passed"
