#!/usr/bin/env bash
# `softrnic setup` / `softrnic setup --remove` (root). Run inside a private
# mount namespace whose /dev, /run and /sys/class are tmpfs stand-ins, so the
# host is never touched (other tests run meanwhile): /dev holds only a null
# device, /sys/class either an empty infiniband/ (as with ib_core loaded) or
# none. Checks: uverbs0/rdma_cm are character devices 1:3 mode 0666 that
# nobody can open read-write; the sysfs tree is mounted read-only with the
# host's GIDs; setup twice is idempotent; --remove restores exactly the state
# before; without /sys/class/infiniband only /dev is set up and the message
# says so; a non-root caller gets exit 2 and a pointer to `softrnic run`;
# in a private network namespace, setup starts root's host NIC daemon
# (softrnic-nicd --stay), a second setup finds it, --remove stops it.
set -euo pipefail
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd unshare setpriv
TOOL="$SOFTRNIC_BUILD_DIR/bin/softrnic"
[[ -x "$TOOL" ]] || skip "softrnic tool not built ($TOOL)"
cp "$TOOL" "$SOFTRNIC_TMP/softrnic"
chmod 755 "$SOFTRNIC_TMP"
TOOL="$SOFTRNIC_TMP/softrnic"

out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$TOOL" setup 2>&1) && rc=0 || rc=$?
[[ $rc -eq 2 ]] && grep -q "softrnic run" <<<"$out" || die "setup as nobody: want exit 2 and a hint, got $rc: $out"
log "ok: setup as nobody refused (exit 2, points to softrnic run)"

# The scenario, run in the private mount namespace. $1: with (1) or without
# (0) /sys/class/infiniband.
scenario='
set -eu
with_sysfs=$1 TOOL=$2
fail() { echo "FAIL: $*"; exit 1; }
mount --make-rprivate /
mount -t tmpfs fakerun /run
mount -t tmpfs fakedev /dev && mknod -m 666 /dev/null c 1 3 && ln -s /proc/self/fd /dev/fd
mount -t tmpfs fakeclass /sys/class && mkdir /sys/class/net
[ "$with_sysfs" = 1 ] && mkdir /sys/class/infiniband
before=$(find /dev /sys/class /run | sort)
"$TOOL" setup
[ "$(stat -c "%F %t:%T %a" /dev/infiniband/uverbs0)" = "character special file 1:3 666" ] || fail "uverbs0: $(stat -c "%F %t:%T %a" /dev/infiniband/uverbs0)"
[ "$(stat -c "%F %t:%T %a" /dev/infiniband/rdma_cm)" = "character special file 1:3 666" ] || fail rdma_cm
setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c ": <>/dev/infiniband/uverbs0" || fail "nobody cannot open uverbs0 rw"
S=/sys/class/infiniband/softrnic0
if [ "$with_sysfs" = 1 ]; then
  [ "$(cat $S/ports/1/state)" = "4: ACTIVE" ] || fail "state"
  [ "$(cat $S/ports/1/link_layer)" = "Ethernet" ] || fail "link_layer"
  [ "$(cat $S/node_type)" = "1: CA" ] || fail "node_type"
  [ "$(cat $S/ports/1/gid_attrs/types/0 2>/dev/null || echo none)" != "" ] || fail types
  n=$(ls $S/ports/1/gids | wc -l)
  # One GID per IPv4 and IPv6 address of an interface that is up (not lo).
  h=$(ip -o addr show up | grep -v " lo " | grep -Ec " inet6? ")
  [ "$n" -le "$h" ] || fail "gids: $n, host addresses $h (no per-process loopback GID expected)"
  touch $S/x 2>/dev/null && fail "sysfs view is writable"
  echo "sysfs ok: $n GIDs, gids/0 $(cat $S/ports/1/gids/0 2>/dev/null)"
else
  [ ! -e $S ] || fail "sysfs tree without /sys/class/infiniband"
fi
"$TOOL" setup >/dev/null || fail "second setup"
[ "$(grep -c . /run/softrnic/setup.state)" = "$(sort -u /run/softrnic/setup.state | grep -c .)" ] || fail "state grew on a second setup"
[ "$(findmnt -n /sys/class/infiniband | wc -l)" -le 1 ] || fail "second setup stacked a second tmpfs"
"$TOOL" setup --remove
after=$(find /dev /sys/class /run | sort)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); fail "remove left changes"; }
findmnt -n /sys/class/infiniband >/dev/null 2>&1 && fail "tmpfs still mounted after remove"
"$TOOL" setup --remove | grep -q "nothing to remove" || fail "second remove"
echo "scenario $with_sysfs ok"
'
for with in 1 0; do
  out=$(unshare -m bash -c "$scenario" _ "$with" "$TOOL" 2>&1) && rc=0 || rc=$?
  echo "$out" | sed 's/^/    /' >&2
  [[ $rc -eq 0 ]] || die "setup scenario (sysfs dir: $with) failed"
  if [[ $with == 0 ]]; then
    grep -q "does not exist" <<<"$out" || die "no message about the missing /sys/class/infiniband"
  fi
  log "ok: setup / setup again / --remove, /sys/class/infiniband present: $with"
done
# Root's host NIC daemon: setup starts softrnic-nicd --stay for the network
# namespace (here a private one, with an install layout whose
# lib/softrnic holds nicd), a second setup finds it, --remove stops it.
INST="$SOFTRNIC_TMP/inst"
mkdir -p "$INST/bin" "$INST/lib/softrnic"
cp "$TOOL" "$INST/bin/softrnic"
cp -a "$SOFTRNIC_LIB_DIR"/lib*.so* "$SOFTRNIC_LIB_DIR/softrnic-nicd" "$INST/lib/softrnic/"
nicd_scenario='
set -eu
TOOL=$1
fail() { echo "FAIL: $*"; exit 1; }
mount --make-rprivate /
mount -t tmpfs fakerun /run
mount -t tmpfs fakedev /dev && mknod -m 666 /dev/null c 1 3 && ln -s /proc/self/fd /dev/fd
mount -t tmpfs fakeclass /sys/class && mkdir /sys/class/net
ip link set lo up
out=$("$TOOL" setup)
echo "$out"
echo "$out" | grep -q "started root.s host NIC daemon" || fail "no nicd started"
ss -Hxl | grep -q "@softrnic-nicd-0-4791" || fail "no listener on root nicd name"
pid=$(echo "$out" | sed -nE "s/.*\(pid ([0-9]+)\).*/\1/p")
# The daemon would outlive the network namespace of this scenario: it goes
# with the scenario, whatever the outcome.
[ -n "$pid" ] && trap "kill $pid 2>/dev/null || true" EXIT
[ "$(cat /proc/$pid/comm)" = softrnic-nicd ] || fail "pid $pid is not softrnic-nicd"
tr "\0" " " </proc/$pid/cmdline | grep -q -- "--stay" || fail "nicd not started with --stay"
sleep 3  # longer than a nicd without --stay stays with no process
kill -0 "$pid" || fail "nicd left while idle"
"$TOOL" setup | grep -q "already runs" || fail "second setup did not find nicd"
"$TOOL" setup --remove | grep -q "stopped root.s host NIC daemon" || fail "remove did not stop nicd"
for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "nicd still runs after --remove"
ss -Hxl | grep -q "@softrnic-nicd-0-4791" && fail "root nicd name still listened on"
echo "nicd scenario ok"
'
out=$(unshare -m -n bash -c "$nicd_scenario" _ "$INST/bin/softrnic" 2>&1) && rc=0 || rc=$?
echo "$out" | sed 's/^/    /' >&2
[[ $rc -eq 0 ]] || die "setup's nicd scenario failed"
log "ok: setup starts root's host NIC daemon (--stay), finds it again, --remove stops it"
[[ ! -e /dev/infiniband ]] || die "the host's /dev changed"
log "PASS: softrnic setup"
