#!/bin/bash
# Security review H3: the rdma_cm host registry against a second local user.
# A root victim runs Debian's rping pair (server and client on this host,
# client -> 127.0.0.1, found through the registry); user nobody (65534), the
# attacker, prepares softrnic's paths first. Each case must leave the victim
# working and unharmed:
#   fifo       nobody mkfifo's in every registry directory it can write to
#              (the victim's own, made by a first rping pair, and the
#              legacy shared /dev/shm/softrnic-cm) -> the pair completes
#              within its timeout (the old registry hung both processes)
#   symlink    nobody pre-creates the registry directories and plants
#              symlinks to a root-owned canary at every name the victim will
#              write (the old temporary name carried the victim's pid, known
#              here before rping starts) -> the canary is untouched
#   foreign_dir nobody pre-creates the directories (0777) with an entry for
#              the victim's port naming pid 1 -> the victim's rdma_listen
#              succeeds (no EADDRINUSE) and the pair completes
#   squat      nobody runs its own rping server on the victim's port first
#              -> a victim client with no victim server is not connected to
#              nobody's (same-host rdma_cm between two users does not go
#              through the registry: docs/rdmacm.md); the victim's server
#              on that port gets a clean EADDRINUSE while nobody's holds it
#              when root's nicd serves both users (the port is the host's
#              then, first come as in the kernel's rdma_cm and TCP:
#              docs/host-nic.md, "Users"), or listens beside it otherwise;
#              once nobody's listener is gone, the victim's server listens
#              and its client reaches it, and nobody's server saw nothing
# Runs in a private mount namespace with its own /dev/shm (no interference
# with other tests' registries), on per-process loopback addresses.
#
# usage: test_cm_registry.sh [CASE...]   (default: all)
set -u
if [[ -z "${_SOFTRNIC_SEC_PRIVATE_SHM:-}" && $(id -u) == 0 ]]; then
  export _SOFTRNIC_SEC_PRIVATE_SHM=1
  exec unshare -m --propagation private bash "$0" "$@"
fi
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
[[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]] || skip "librdmacm.so.1 not built in $SOFTRNIC_LIB_DIR"
softrnic_require_cmd rping
softrnic_require_cmd setpriv
id nobody >/dev/null 2>&1 || skip "no user nobody"
softrnic_env
mount -t tmpfs -o mode=1777,size=64m softrnic-sec-shm /dev/shm || die "private /dev/shm"
chmod 0755 "$SOFTRNIC_TMP"   # nobody reads the helper scripts kept there

NOBODY=65534
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups -- "$@"; }
NETNS=$(readlink /proc/self/ns/net | tr -dc 0-9)
PORT=21900
LEGACY=/dev/shm/softrnic-cm
OURS=/dev/shm/softrnic-cm-0

cases=("$@")
(( ${#cases[@]} )) || cases=(fifo symlink foreign_dir squat)

fresh_shm() { rm -rf /dev/shm/* /dev/shm/.[!.]* 2>/dev/null || true; }

# rping_pair NAME PORT [SERVER_PREFIX...]: a root rping server and client
# (3 pings) within 20 s; 0 if both exit 0 and the client saw its pings.
rping_pair() {
  local name=$1 port=$2; shift 2
  start_bg "$name-server" 20 "$@" rping -s -v -C 3 -p "$port"
  wait_until 10 bash -c "ls /dev/shm/softrnic-cm*/*-106-$port >/dev/null 2>&1" || sleep 1
  local crc=0 src=0
  timeout -k 2 15 rping -c -a 127.0.0.1 -v -C 3 -p "$port" >"$SOFTRNIC_TMP/$name-client.log" 2>&1 || crc=$?
  wait_bg "$name-server" 15 || src=$?
  log "$name: client exit $crc, server exit $src"
  if (( crc != 0 || src != 0 )) || ! grep -q 'ping data: rdma-ping-2' "$SOFTRNIC_TMP/$name-client.log"; then
    sed 's/^/  client: /' "$SOFTRNIC_TMP/$name-client.log" | tail -5 >&2
    bg_log "$name-server" | sed 's/^/  server: /' | tail -5 >&2
    return 1
  fi
}

# plant KIND: as nobody, create the registry directories if missing (0777,
# as the old code's mkdir would be seen) and plant KIND in each writable one.
plant() {
  local kind=$1 arg=${2:-}
  as_nobody bash -s "$kind" "$arg" "$NETNS" "$PORT" "$LEGACY" "$OURS" <<'EOS'
kind=$1 arg=$2 ns=$3 port=$4; shift 4
for d in "$@"; do
  mkdir -m 0777 "$d" 2>/dev/null
  [[ -w $d ]] || { echo "cannot write $d"; continue; }
  case $kind in
    fifo) mkfifo "$d/x" "$d/$ns-106-$port" && echo "FIFOs in $d" ;;
    symlink)  # every name the victim (pid $arg) would create for its port
      for n in "$ns-106-$port" "$ns-106-$port.tmp.$arg"; do ln -sf "$CANARY" "$d/$n"; done
      echo "symlinks in $d" ;;
    entry) echo "1 127.0.0.1" >"$d/$ns-106-$port" && echo "entry in $d" ;;
  esac
done
EOS
}

fail=0
result() { if [[ $1 == 0 ]]; then log "PASS $2"; else log "FAIL $2"; fail=$((fail + 1)); fi; }

for c in "${cases[@]}"; do
  fresh_shm
  case $c in
    fifo)
      rping_pair fifo-warmup $PORT || die "rping pair without attacker failed"
      plant fifo
      rc=0; rping_pair fifo $PORT || rc=1
      result $rc "fifo: rping pair completes with nobody's FIFOs planted" ;;
    symlink)
      export CANARY=$SOFTRNIC_TMP/canary
      echo "canary: the victim's own file" >"$CANARY"; chmod 0644 "$CANARY"
      cp "$CANARY" "$SOFTRNIC_TMP/canary.orig"
      # The server's pid is known before it execs rping.
      go=$SOFTRNIC_TMP/symlink.go pidf=$SOFTRNIC_TMP/symlink.pid
      rm -f "$go" "$pidf"
      start_bg symlink-server 30 bash -c 'echo $$ >"$1"; while [[ ! -e $2 ]]; do sleep 0.05; done; exec rping -s -v -C 3 -p "$3"' _ "$pidf" "$go" $PORT
      wait_until 5 test -s "$pidf" || die "server pid"
      plant symlink "$(cat "$pidf")"
      touch "$go"
      wait_until 10 bash -c "ls /dev/shm/softrnic-cm*/*-106-$PORT >/dev/null 2>&1" || sleep 1
      timeout -k 2 15 rping -c -a 127.0.0.1 -v -C 3 -p $PORT >"$SOFTRNIC_TMP/symlink-client.log" 2>&1 || true
      wait_bg symlink-server 15 || true
      rc=0
      if ! cmp -s "$CANARY" "$SOFTRNIC_TMP/canary.orig"; then
        rc=1; log "canary now holds: $(head -c 100 "$CANARY" | cat -v)"
      fi
      result $rc "symlink: nobody's links do not make the victim write the canary" ;;
    foreign_dir)
      plant entry
      rc=0; rping_pair foreign $PORT || rc=1
      result $rc "foreign_dir: listen and connect despite nobody's pre-created registry and entry" ;;
    squat)
      # nobody's listener on the victim's port, first (it registers wherever
      # nobody's softrnic registers).
      start_bg squat-attacker 40 setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups -- rping -s -v -C 3 -p $PORT
      wait_until 10 bash -c "ls /dev/shm/softrnic-cm*/*-106-$PORT >/dev/null 2>&1" || sleep 1
      # 1. No victim server: the victim's client must not reach nobody's.
      timeout -k 2 15 rping -c -a 127.0.0.1 -v -C 3 -p $PORT >"$SOFTRNIC_TMP/squat-lone-client.log" 2>&1
      lone=$?
      rc=0
      if grep -q 'ping data' "$SOFTRNIC_TMP/squat-lone-client.log"; then
        rc=1; log "the victim's client talked to nobody's server (exit $lone)"
      fi
      result $rc "squat: a victim client is not connected to nobody's listener"
      # 2. The victim's own server on the same port: it listens beside
      # nobody's, or (root's nicd serving both at the host address, where
      # the port is the host's) its listen fails cleanly with EADDRINUSE.
      timeout -k 2 3 rping -s -v -C 3 -p $PORT >"$SOFTRNIC_TMP/squat-held.log" 2>&1
      held=$?
      rc=0
      if grep -q "rdma_listen: Address already in use" "$SOFTRNIC_TMP/squat-held.log"; then
        log "the victim's listen while nobody's holds the port: EADDRINUSE (the host's port)"
      elif (( held != 124 )); then
        rc=1; log "the victim's server while nobody's listens: exit $held: $(tail -2 "$SOFTRNIC_TMP/squat-held.log" | tr '\n' ' ')"
      fi
      result $rc "squat: the victim's listen beside nobody's either works or fails with EADDRINUSE"
      # 3. Once nobody's listener is gone, the victim's server listens and
      # its client reaches it; nobody's server never saw a ping.
      kill_bg squat-attacker
      rc=0; rping_pair squat $PORT || rc=1
      if grep -q 'ping data' "$(bg_log_file squat-attacker)"; then
        rc=1; log "nobody's server received the victim's pings"
      fi
      result $rc "squat: the victim's server then listens and its client reaches it" ;;
    *) die "unknown case $c" ;;
  esac
done
(( fail == 0 )) || die "$fail check(s) failed"
log "all passed"
