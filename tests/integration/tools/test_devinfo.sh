#!/bin/bash
# `softrnic devinfo` (issue 18): the device as ibv_devinfo sees it, and the
# path packets to a peer take, and why.
#   device     `softrnic devinfo -j` equals Debian's `ibv_devinfo -v` over
#              softrnic's libibverbs.so.1 field by field (check_devinfo.py),
#              in a network namespace of this test; its loopback GID is the
#              one derived from its own pid (docs/addressing.md)
#   usage      --help: 0; an unknown argument or a bad address: 2; a device
#              that cannot open (SOFTRNIC_BIND of no interface): 1 and a fix
# As root, two network namespaces A and B joined by a veth pair, and
# ibv_rc_pingpong servers as peers, each alive (waiting for a client that
# never comes) for as long as it is read:
#   netns      a server in B, asked from A by address: UDP from GID 0 through
#              veth0, because B's endpoint is published in another network
#              namespace; with --peer-pid too
#   live       a server in A: its endpoint (--peer-pid) and A's host address
#              it owns go through shared memory (step "shared"), owner = it
#   udp here   the same with SOFTRNIC_TRANSPORT=udp in devinfo: UDP from the
#              loopback GID, the setting named as the reason
#   udp there  a server in A run with SOFTRNIC_TRANSPORT=udp: UDP, no
#              endpoint published, its setting named
#   gone       the server killed (SIGKILL): its address is unreachable, exit 1
#   no route   an address A has no route to: unreachable, exit 1
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
CHECK=$SOFTRNIC_SOURCE_DIR/tests/integration/tools/check_devinfo.py
unset SOFTRNIC_PORT SOFTRNIC_BIND SOFTRNIC_TRANSPORT SOFTRNIC_FAULTS SOFTRNIC_SHM_DIRECT
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"

# usage (no device needed)
"$TOOL" devinfo --help >"$SOFTRNIC_TMP/help.out" 2>&1; rc=$?
check "--help: exit 0 (got $rc)" test "$rc" -eq 0
check "--help describes --peer" grep -q -- "--peer ADDRESS" "$SOFTRNIC_TMP/help.out"
"$TOOL" devinfo --bogus >/dev/null 2>&1; rc=$?
check "unknown argument: exit 2 (got $rc)" test "$rc" -eq 2
"$TOOL" devinfo --peer not-an-address >"$SOFTRNIC_TMP/bad.out" 2>&1; rc=$?
check "bad peer address: exit 2 (got $rc)" test "$rc" -eq 2
check "... and says what an address looks like" grep -q "::ffff:10.0.0.2" "$SOFTRNIC_TMP/bad.out"
"$TOOL" devinfo --peer-pid 0 >/dev/null 2>&1; rc=$?
check "bad pid: exit 2 (got $rc)" test "$rc" -eq 2

# A device that cannot open (an address of no interface here): exit 1, and
# the message says what to do.
SOFTRNIC_BIND=198.51.100.77 "$TOOL" devinfo >"$SOFTRNIC_TMP/noopen.out" 2>&1; rc=$?
check "device cannot be opened: exit 1 (got $rc)" test "$rc" -eq 1
check "... names the address and the fix" \
  bash -c "grep -q '198.51.100.77:4791' '$SOFTRNIC_TMP/noopen.out' && grep -q '^fix: .*softrnic doctor' '$SOFTRNIC_TMP/noopen.out'"

softrnic_require_root
softrnic_require_cmd ip ibv_devinfo ibv_rc_pingpong
softrnic_env   # Debian's tools load softrnic's libibverbs.so.1

A=srn-devinfo-a-$$ B=srn-devinfo-b-$$ IPA=10.242.0.1 IPB=10.242.0.2
netns_pair_up "$A" "$B" "$IPA" "$IPB" || die "netns setup"
# A device binds an IPv6 address only once duplicate address detection is
# over (docs/addressing.md): until then two processes in A could see
# different GID tables (a CI run compared 2 GIDs with 3).
wait_until 10 bash -c "! ip netns exec '$A' ip -6 addr show tentative | grep -q inet6" ||
  die "IPv6 duplicate address detection still running in $A"

# devinfo NAME NS [ENV...] -- ARGS...: `softrnic devinfo ARGS` in NS, output
# in $SOFTRNIC_TMP/NAME.out (stderr in NAME.err), exit status in rc.
devinfo() {
  local name=$1 ns=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  rc=0
  env "${envs[@]}" ip netns exec "$ns" "$TOOL" devinfo "$@" >"$SOFTRNIC_TMP/$name.out" 2>"$SOFTRNIC_TMP/$name.err" || rc=$?
  sed "s/^/    [$name] /" "$SOFTRNIC_TMP/$name.out" "$SOFTRNIC_TMP/$name.err" >&2
}
# field NAME EXPR: a value of NAME's JSON, EXPR in Python over `d`.
field() { "$SOFTRNIC_PYTHON" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$SOFTRNIC_TMP/$1.out"; }
# The per-process loopback address of `pid` (attempt 0, docs/addressing.md).
loopback_of() { echo "127.$((1 + ($1 >> 16))).$((($1 >> 8) & 255)).$(($1 & 255))"; }
# server NAME NS TCPPORT [ENV...]: ibv_rc_pingpong waiting for a client in
# NS (its device open, its QP created); sets srv_pid to the server's pid.
server() {
  local name=$1 ns=$2 port=$3; shift 3
  start_bg "$name" 120 env "$@" ip netns exec "$ns" ibv_rc_pingpong -g 0 -p "$port"
  wait_until 20 bash -c "ip netns exec '$ns' ss -ltn | grep -q ':$port '" ||
    die "$name did not listen on $port: $(bg_log "$name")"
  # timeout -> env -> ip -> exec: the server is the child of timeout.
  srv_pid=$(children_of "$(bg_pid "$name")" | head -1)
  [[ -n $srv_pid ]] || die "no pid for $name"
  log "$name is pid $srv_pid"
}

# ---- device: devinfo against ibv_devinfo -v, nothing else in A ------------
rc=0
ip netns exec "$A" ibv_devinfo -v >"$SOFTRNIC_TMP/ibv.out" 2>&1 || rc=$?
check "ibv_devinfo -v over softrnic in $A: exit 0 (got $rc)" test "$rc" -eq 0
ip netns exec "$A" "$TOOL" devinfo -j >"$SOFTRNIC_TMP/device.out" 2>"$SOFTRNIC_TMP/device.err" &
dpid=$!
wait "$dpid"; rc=$?
check "softrnic devinfo -j: exit 0 (got $rc)" test "$rc" -eq 0
check "every field equals ibv_devinfo -v's" \
  "$SOFTRNIC_PYTHON" "$CHECK" "$SOFTRNIC_TMP/ibv.out" "$SOFTRNIC_TMP/device.out"
check "GID 0 is $IPA on veth0, a host address" \
  test "$(field device 'd["gids"][0]["address"], d["gids"][0]["interface"], d["gids"][0]["loopback"]')" \
  = "$IPA veth0 False"
check "GID 1 is devinfo's own loopback address $(loopback_of "$dpid") (pid $dpid) on lo" \
  test "$(field device 'd["gids"][1]["address"], d["gids"][1]["interface"], d["gids"][1]["loopback"]')" \
  = "$(loopback_of "$dpid") lo True"
check "transport: shared memory + UDP, SOFTRNIC_TRANSPORT unset (auto)" \
  test "$(field device 'd["transport"]["shared_memory"], d["transport"]["settings"]["SOFTRNIC_TRANSPORT"]["set"]')" \
  = "True False"
devinfo text "$A" -- 
check "text form: the GID table with endpoints" grep -qE "GID\[  0\] ::ffff:$IPA +RoCE v2, UDP $IPA:4791 on veth0" "$SOFTRNIC_TMP/text.out"
check "text form: atomic_cap and max_qp" grep -qE "atomic_cap +ATOMIC_HCA \(1\)" "$SOFTRNIC_TMP/text.out"
devinfo udpmode "$A" SOFTRNIC_TRANSPORT=udp -- -j
check "SOFTRNIC_TRANSPORT=udp: no shared memory, the setting named" \
  test "$(field udpmode 'd["transport"]["shared_memory"], "SOFTRNIC_TRANSPORT=udp" in d["transport"]["why"]')" \
  = "False True"

# ---- netns: a server in B, asked from A -------------------------------------
server srvB "$B" 18611
devinfo netns "$A" -- -j --peer "$IPB"
check "peer in another namespace: exit 0 (got $rc)" test "$rc" -eq 0
check "... path UDP from GID 0 ($IPA) through veth0" \
  test "$(field netns 'd["peer"]["path"], d["peer"]["udp"]["gid_index"], d["peer"]["udp"]["source"], d["peer"]["udp"]["interface"]')" \
  = "udp 0 $IPA veth0"
check "... the shared-memory step: not published in this namespace" \
  test "$(field netns 'd["peer"]["shm_step"]')" = "not_published"
check "... why: server pid $srv_pid publishes it in another network namespace" \
  field netns "[w for w in d['peer']['why'] if 'pid $srv_pid' in w and 'another network namespace' in w][0]"
devinfo netnspid "$A" -- --peer "$IPB" --peer-pid "$srv_pid"
check "... with --peer-pid: pid $srv_pid is in another network namespace" \
  grep -q "pid $srv_pid is in another network namespace" "$SOFTRNIC_TMP/netnspid.out"
check "... the server was alive throughout" bg_running srvB
kill_bg srvB

# ---- no route ------------------------------------------------------------------
devinfo noroute "$A" -- -j --peer 198.51.100.7
check "an address without a route: exit 1 (got $rc)" test "$rc" -eq 1
check "... path unreachable, with a fix" \
  test "$(field noroute 'd["peer"]["path"], bool(d["peer"]["fix"])')" = "unreachable True"

# ---- live: a server in A ----------------------------------------------------------
# Without the host NIC it owns A's host address alone (its link names it);
# "shared" below checks a shared one.
server srvA "$A" 18612 SOFTRNIC_HOST_NIC=0
live=$srv_pid
devinfo live "$A" -- -j --peer-pid "$live"
check "live peer by pid: exit 0 (got $rc)" test "$rc" -eq 0
check "... its endpoint, shared memory (step shared), owner pid $live" \
  test "$(field live 'd["peer"]["path"], d["peer"]["shm_step"], d["peer"]["pid"]')" = "shm_ring shared $live"
check "... direct one-sided operations on (SOFTRNIC_SHM_DIRECT default)" test "$(field live 'd["peer"]["direct"]')" = True
devinfo livehost "$A" -- -j --peer "::ffff:$IPA"
check "A's host address, which the server owns (given as a GID): shared memory, pid $live" \
  test "$(field livehost 'd["peer"]["path"], d["peer"]["pid"]')" = "shm_ring $live"
devinfo livetext "$A" -- --peer "$IPA"
check "... text: the reason the transport gives" \
  grep -q "because shared memory: a softrnic device of this user in this network namespace publishes this endpoint" \
  "$SOFTRNIC_TMP/livetext.out"

# ---- udp here: devinfo's own SOFTRNIC_TRANSPORT=udp ----------------------------
devinfo udphere "$A" SOFTRNIC_TRANSPORT=udp -- -j --peer "$IPA"
check "SOFTRNIC_TRANSPORT=udp here: exit 0 (got $rc)" test "$rc" -eq 0
check "... path UDP from the loopback GID through lo" \
  test "$(field udphere 'd["peer"]["path"], d["gids"][d["peer"]["udp"]["gid_index"]]["loopback"], d["peer"]["udp"]["interface"]')" \
  = "udp True lo"
check "... because SOFTRNIC_TRANSPORT=udp" field udphere "[w for w in d['peer']['why'] if 'SOFTRNIC_TRANSPORT=udp' in w][0]"

# ---- udp there: a peer run with SOFTRNIC_TRANSPORT=udp ---------------------------
server srvU "$A" 18613 SOFTRNIC_TRANSPORT=udp
udp_peer=$srv_pid
devinfo udpthere "$A" -- -j --peer-pid "$udp_peer"
check "peer with SOFTRNIC_TRANSPORT=udp: exit 0 (got $rc)" test "$rc" -eq 0
check "... its address is its loopback $(loopback_of "$udp_peer"), path UDP, not published" \
  test "$(field udpthere 'd["peer"]["input"], d["peer"]["path"], d["peer"]["shm_step"]')" \
  = "$(loopback_of "$udp_peer") udp not_published"
check "... because it runs with SOFTRNIC_TRANSPORT=udp" \
  field udpthere "[w for w in d['peer']['why'] if 'runs with SOFTRNIC_TRANSPORT=udp' in w][0]"
check "... both servers alive throughout" bash -c "kill -0 $live && kill -0 $udp_peer"
kill_bg srvU

# ---- gone: the live server killed ---------------------------------------------------
# SIGKILL: it removes nothing; the next device (devinfo's own) sweeps its
# stale endpoint links, and nothing holds its UDP socket any more.
kill -KILL "$live"
wait_bg srvA 10 >/dev/null 2>&1
devinfo gone "$A" -- -j --peer "$(loopback_of "$live")"
check "the killed server's address: exit 1 (got $rc)" test "$rc" -eq 1
check "... unreachable: not published, nothing receives there, and a fix" \
  test "$(field gone 'd["peer"]["path"], d["peer"]["shm_step"], bool(d["peer"]["fix"])')" = "unreachable not_published True"
check "... the reason says nothing receives UDP there" \
  field gone "[w for w in d['peer']['why'] if 'nothing in this network namespace receives UDP' in w][0]"
# ---- shared: a server in A served by the host NIC (docs/host-nic.md) ---------------
# (After the owner above is gone.) It publishes A's host address with its lane:
# devinfo names it as a sharer (which process a QP reaches there follows the
# lane of its destination QPN, which devinfo is not told).
server srvH "$A" 18614 SOFTRNIC_HOST_NIC=1
shared=$srv_pid
devinfo sharedhost "$A" -- -j --peer "::ffff:$IPA"
check "A's host address, shared through the host NIC: pid $shared named as a sharer" \
  field sharedhost "[w for w in d['peer']['why'] if 'host NIC address shared' in w and 'pid $shared' in w][0]"
kill_bg srvH

log "PASS: softrnic devinfo"
