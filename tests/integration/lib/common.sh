#!/usr/bin/env bash
# Shared helpers for softrnic integration scripts.
#
#   #!/usr/bin/env bash
#   set -euo pipefail
#   source "${SOFTRNIC_SOURCE_DIR:-$(dirname "$0")/../../..}/tests/integration/lib/common.sh"
#   softrnic_require_root                 # exit 77 (ctest: skipped) if not root
#   netns_pair_up srn-foo-a srn-foo-b 10.77.0.1 10.77.0.2
#   softrnic_env                          # LD_LIBRARY_PATH -> our libibverbs
#   start_bg server 30 run_in_ns srn-foo-b ibv_rc_pingpong -g 0
#   wait_for_port -n srn-foo-b 18515 10
#   run_in_ns srn-foo-a ibv_rc_pingpong -g 0 10.77.0.2
#   wait_bg server
#
# Everything a script starts is bounded by `timeout` and torn down by one EXIT
# trap (namespaces, background processes, captures, temp dir), so a hung tool
# can never hang CI. Register your own cleanup with `softrnic_on_exit CMD...`;
# do not install your own EXIT trap (it would replace ours).
#
# Environment (set by ctest via softrnic_add_script_test, guessed otherwise):
#   SOFTRNIC_SOURCE_DIR, SOFTRNIC_BUILD_DIR, SOFTRNIC_LIB_DIR
#   SOFTRNIC_CMD_TIMEOUT  default timeout (s) for run_in_ns/run_t   (60)
#   SOFTRNIC_PYTHON       python with scapy                         (/usr/bin/python3)
#   SOFTRNIC_KEEP_TMP=1   keep $SOFTRNIC_TMP (logs, pcaps) after exit
#   SOFTRNIC_VERBOSE=1    trace commands
#   SOFTRNIC_NO_LOG_DUMP=1  do not print background logs when failing

[[ -n "${_SOFTRNIC_COMMON_SH:-}" ]] && return 0
_SOFTRNIC_COMMON_SH=1

_softrnic_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SOFTRNIC_SOURCE_DIR:=$(cd "$_softrnic_lib_dir/../../.." && pwd)}"
if [[ -z "${SOFTRNIC_BUILD_DIR:-}" ]]; then
  for _d in build build-ci build-infra build-tsan; do
    if [[ -f "$SOFTRNIC_SOURCE_DIR/$_d/CMakeCache.txt" ]]; then
      SOFTRNIC_BUILD_DIR="$SOFTRNIC_SOURCE_DIR/$_d"; break
    fi
  done
  : "${SOFTRNIC_BUILD_DIR:=$SOFTRNIC_SOURCE_DIR/build}"
fi
: "${SOFTRNIC_LIB_DIR:=$SOFTRNIC_BUILD_DIR/lib}"
: "${SOFTRNIC_CMD_TIMEOUT:=60}"
if [[ -z "${SOFTRNIC_PYTHON:-}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then SOFTRNIC_PYTHON=/usr/bin/python3; else SOFTRNIC_PYTHON=python3; fi
fi
export SOFTRNIC_SOURCE_DIR SOFTRNIC_BUILD_DIR SOFTRNIC_LIB_DIR SOFTRNIC_CMD_TIMEOUT SOFTRNIC_PYTHON
# ip, nft, tcpdump live in /usr/sbin, which a non-login root shell may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac

SOFTRNIC_TMP=$(mktemp -d "${TMPDIR:-/tmp}/softrnic-it.XXXXXX")
export SOFTRNIC_TMP
[[ "${SOFTRNIC_VERBOSE:-0}" == 1 ]] && set -x

# ---------------------------------------------------------------- logging
_softrnic_name=$(basename "${0:-script}")
log()  { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "$_softrnic_name" "$*" >&2; }
die()  { log "FAIL: $*"; exit 1; }
skip() { log "SKIP: $*"; exit 77; }          # ctest: SKIP_RETURN_CODE 77
# check DESCRIPTION CMD...: run CMD, log PASS/FAIL, exit on failure.
check() {
  local what=$1; shift
  if "$@"; then log "ok: $what"; else die "$what (command: $*)"; fi
}

softrnic_require_root() {
  [[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces / nftables)"
}
softrnic_require_cmd() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null 2>&1 || skip "missing command: $c"; done
}
# softrnic_require_lib: skip if the verbs shim has not been built.
softrnic_require_lib() {
  [[ -e "$SOFTRNIC_LIB_DIR/libibverbs.so.1" ]] ||
    skip "softrnic libibverbs.so.1 not built in $SOFTRNIC_LIB_DIR"
}

# ---------------------------------------------------------------- cleanup
_softrnic_cleanups=()
# softrnic_on_exit CMD...: run CMD at exit (LIFO). CMD is eval'ed.
softrnic_on_exit() { _softrnic_cleanups+=("$*"); }
_softrnic_exit() {
  local rc=$? i
  set +e +u
  trap - EXIT INT TERM
  _softrnic_kill_all_bg
  for (( i=${#_softrnic_cleanups[@]}-1; i>=0; i-- )); do
    eval "${_softrnic_cleanups[i]}" >/dev/null 2>&1
  done
  if (( rc != 0 && rc != 77 )) && [[ "${SOFTRNIC_NO_LOG_DUMP:-0}" != 1 ]]; then
    local f
    for f in "$SOFTRNIC_TMP"/*.log; do
      [[ -s "$f" ]] || continue
      printf -- '----- %s (last 40 lines) -----\n' "$(basename "$f")" >&2
      tail -n 40 "$f" >&2
    done
  fi
  if [[ "${SOFTRNIC_KEEP_TMP:-0}" == 1 ]]; then
    log "kept temp dir $SOFTRNIC_TMP"
  else
    rm -rf "$SOFTRNIC_TMP"
  fi
  exit "$rc"
}
trap _softrnic_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- timeouts / retry
# run_t SECS CMD...: run with a hard timeout (TERM, then KILL 5 s later).
run_t() { local t=$1; shift; timeout -k 5 "$t" "$@"; }

# retry N DELAY CMD...: try CMD up to N times, sleeping DELAY between tries.
retry() {
  local n=$1 delay=$2 i; shift 2
  for (( i=1; i<=n; i++ )); do
    "$@" && return 0
    (( i < n )) && sleep "$delay"
  done
  return 1
}

# wait_until TIMEOUT CMD...: poll CMD every 0.1 s until it succeeds.
wait_until() {
  local t=$1; shift
  local deadline=$(( $(date +%s%N) + t * 1000000000 ))
  while (( $(date +%s%N) < deadline )); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# wait_for_port [-n NS] [-u] [-p BGNAME] PORT [TIMEOUT=10]: wait until
# something listens on PORT (TCP, or UDP with -u), inside namespace NS if
# given. With -p, give up as soon as background process BGNAME has exited.
wait_for_port() {
  local ns="" proto=t bg=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -n) ns=$2; shift 2 ;;
      -p) bg=$2; shift 2 ;;
      -u) proto=u; shift ;;
      -t) proto=t; shift ;;
      *) break ;;
    esac
  done
  local port=$1 t=${2:-10}
  local pre=()
  [[ -n "$ns" ]] && pre=(ip netns exec "$ns")
  local what; what="$([[ $proto == u ]] && echo udp || echo tcp) port $port${ns:+ in $ns}"
  local deadline=$(( $(date +%s%N) + t * 1000000000 ))
  while (( $(date +%s%N) < deadline )); do
    "${pre[@]}" ss -Hln"$proto" "sport = :$port" 2>/dev/null | grep -q . && return 0
    if [[ -n "$bg" ]] && ! bg_running "$bg"; then
      log "$bg exited before listening on $what"; return 1
    fi
    sleep 0.1
  done
  log "nothing listening on $what after ${t}s"; return 1
}

# ---------------------------------------------------------------- background processes
declare -A _softrnic_bg_pid=()
# start_bg NAME TIMEOUT CMD...: start CMD in the background, killed after
# TIMEOUT s at the latest; output goes to $SOFTRNIC_TMP/NAME.log. CMD may be
# a program, run_in_ns NS ..., or a shell function (run in a child bash:
# it sees exported variables and common.sh's basic helpers only).
start_bg() {
  local name=$1 t=$2; shift 2
  if [[ "$1" == run_in_ns ]]; then
    # run_in_ns NS CMD... -> ip netns exec NS CMD... under this timeout.
    set -- ip netns exec "${@:2}"
  elif [[ $(type -t "$1") == function ]]; then
    # timeout can only exec programs: run shell functions in a child bash.
    export -f "${1?}" log die skip run_t retry wait_until run_in_ns
    set -- bash -c '"$@"' _ "$@"
  fi
  timeout -k 5 "$t" "$@" >"$SOFTRNIC_TMP/$name.log" 2>&1 &
  _softrnic_bg_pid[$name]=$!
  log "started $name (pid $!, timeout ${t}s): $*"
}
bg_pid() { echo "${_softrnic_bg_pid[$1]:-}"; }
bg_log() { cat "$SOFTRNIC_TMP/$1.log" 2>/dev/null; }
bg_log_file() { echo "$SOFTRNIC_TMP/$1.log"; }
bg_running() { local p=${_softrnic_bg_pid[$1]:-}; [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; }
# dump_stacks PID: every thread's stack of PID and its descendants on
# stderr (gdb, when installed), so that a hang in CI says where it waited.
dump_stacks() {
  command -v gdb >/dev/null 2>&1 || return 0
  local q
  for q in "$1" $(pgrep -P "$1" 2>/dev/null); do
    [[ $q == "$1" ]] || { dump_stacks "$q"; continue; }
    [[ $(cat /proc/$q/comm 2>/dev/null) == timeout ]] && continue
    echo "--- stacks of pid $q: $(tr '\0' ' ' < /proc/$q/cmdline 2>/dev/null)" >&2
    timeout 30 gdb -p "$q" -batch -nx -ex 'thread apply all bt' 2>&1 |
      grep -E '^(Thread|#)' | head -120 >&2 || true
  done
}
# wait_bg NAME [TIMEOUT]: wait for NAME to exit, return its status (124 if
# its own timeout fired). With TIMEOUT, kill it if still running after that.
wait_bg() {
  local name=$1 t=${2:-}; local p=${_softrnic_bg_pid[$name]:-}
  [[ -n "$p" ]] || { log "wait_bg: no such process $name"; return 1; }
  if [[ -n "$t" ]] && ! wait_until "$t" bash -c "! kill -0 $p 2>/dev/null"; then
    log "wait_bg: $name still running after ${t}s, killing"
    dump_stacks "$p"
    kill_bg "$name"
    return 124
  fi
  local rc=0
  wait "$p" || rc=$?
  unset "_softrnic_bg_pid[$name]"
  return "$rc"
}
# kill_bg NAME [SIGNAL=TERM]: stop NAME; KILL it if still alive after 3 s.
kill_bg() {
  local name=$1 sig=${2:-TERM}; local p=${_softrnic_bg_pid[$name]:-}
  [[ -n "$p" ]] || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill -s "$sig" "$p" 2>/dev/null || true
    wait_until 3 bash -c "! kill -0 $p 2>/dev/null" || {
      pkill -KILL -P "$p" 2>/dev/null || true
      kill -KILL "$p" 2>/dev/null || true
    }
  fi
  wait "$p" 2>/dev/null || true
  unset "_softrnic_bg_pid[$name]"
}
_softrnic_kill_all_bg() {
  local n
  for n in "${!_softrnic_bg_pid[@]}"; do kill_bg "$n"; done
}

# children_of PID: the pids whose parent is PID, one per line, read from
# /proc with bash builtins only. (pgrep deadlocks under the sanitizer
# runtime that softrnic_env preloads for CI builds.)
children_of() {
  local f line rest ppid pid
  for f in /proc/[0-9]*/stat; do
    # (The braces: a pid gone since the glob is a redirection error, which
    # a 2> on the command itself would not silence.)
    { read -r line <"$f"; } 2>/dev/null || continue
    rest=${line##*) }          # after "pid (comm) "
    read -r _ ppid _ <<<"$rest"
    if [[ "$ppid" == "$1" ]]; then pid=${f#/proc/}; echo "${pid%/stat}"; fi
  done
}

# ---------------------------------------------------------------- softrnic libraries
# softrnic_env: make verbs programs (ours or Debian's unmodified tools) load
# softrnic's libibverbs.so.1 / librdmacm.so.1 / provider stubs. If the
# libraries were built with ASan or TSan (build type CI / TSan), preload the
# sanitizer runtime, since Debian's binaries are not instrumented.
softrnic_env() {
  export LD_LIBRARY_PATH="$SOFTRNIC_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local lib="$SOFTRNIC_LIB_DIR/libibverbs.so.1" rt
  if [[ -e "$lib" ]]; then
    rt=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
    if [[ -n "$rt" && -e "$rt" ]]; then
      local real; real=$(readlink -f "$rt")
      case ":${LD_PRELOAD:-}:" in
        *libasan.so*|*libtsan.so*) ;;   # already preloaded (ctest does it)
        *) export LD_PRELOAD="$real${LD_PRELOAD:+:$LD_PRELOAD}" ;;
      esac
      # Leaks inside uninstrumented tools are not ours to report.
      case "$rt" in
        *asan*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
      esac
    fi
  fi
}

# ---------------------------------------------------------------- network namespaces
# Inside each namespace the veth end is named $NETNS_IFACE (veth0).
NETNS_IFACE=veth0
_softrnic_pair_seq=0
_softrnic_ns_cleanup() {
  local ns=$1
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$ns" || return 0
  local pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
  ip netns del "$ns" 2>/dev/null || true
}

# netns_pair_up NS_A NS_B IP_A IP_B [PREFIXLEN=24]: two namespaces ("hosts")
# joined by a veth pair, each with its own IPv4 address and lo up. Removed at
# exit (or earlier with netns_pair_down). Stale namespaces of the same name
# from a crashed run are removed first. Env NETNS_MTU sets the veth MTU.
netns_pair_up() {
  local a=$1 b=$2 ipa=$3 ipb=$4 plen=${5:-24}
  command -v ip >/dev/null || die "ip (iproute2) not installed"
  _softrnic_ns_cleanup "$a"; _softrnic_ns_cleanup "$b"
  _softrnic_pair_seq=$(( _softrnic_pair_seq + 1 ))
  local va="sv$$x${_softrnic_pair_seq}a" vb="sv$$x${_softrnic_pair_seq}b"
  softrnic_on_exit "netns_pair_down '$a' '$b'"
  ip netns add "$a" && ip netns add "$b" &&
  ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  ip -n "$a" link set "$va" name "$NETNS_IFACE" &&
  ip -n "$b" link set "$vb" name "$NETNS_IFACE" || { log "netns_pair_up: failed creating $a/$b"; return 1; }
  local ns ip
  for ns in "$a" "$b"; do
    if [[ $ns == "$a" ]]; then ip=$ipa; else ip=$ipb; fi
    ip -n "$ns" link set lo up
    [[ -n "${NETNS_MTU:-}" ]] && ip -n "$ns" link set "$NETNS_IFACE" mtu "$NETNS_MTU"
    # A veth passes a UDP GSO run (softrnic sends runs of packets with
    # UDP_SEGMENT) whole to the other namespace, where no real wire would:
    # a NIC puts each segment on the wire with its own IPv4 header. One
    # segment per skb makes the kernel segment before the veth, so captures,
    # nftables loss and the receiver see what a real wire carries.
    # NETNS_GSO=1 keeps the runs whole.
    [[ "${NETNS_GSO:-0}" == 1 ]] || ip -n "$ns" link set "$NETNS_IFACE" gso_max_segs 1
    ip -n "$ns" addr add "$ip/$plen" dev "$NETNS_IFACE"
    ip -n "$ns" link set "$NETNS_IFACE" up
  done
  # veth carrier comes up asynchronously; wait for it and for DAD-free IPv4.
  wait_until 5 bash -c "ip -n '$a' link show $NETNS_IFACE | grep -q 'LOWER_UP' &&
                        ip -n '$b' link show $NETNS_IFACE | grep -q 'LOWER_UP'" ||
    { log "netns_pair_up: veth link did not come up"; return 1; }
  log "netns $a ($ipa) <-> $b ($ipb) up"
}

# netns_bridge_up SWITCH NS:IPV4:IPV6 ...: namespaces ("hosts") on one
# bridge that lives in namespace SWITCH; each host has lo and veth0 up with
# exactly the IPv4 (/24) and IPv6 (/64, no DAD wait) address given, as a
# cluster of machines with one address each. Removed at exit.
netns_bridge_up() {
  local sw=$1; shift
  local spec ns ip4 ip6 i=0
  _softrnic_ns_cleanup "$sw"
  softrnic_on_exit "netns_pair_down '$sw'"
  ip netns add "$sw" && ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up ||
    { log "netns_bridge_up: no bridge"; return 1; }
  for spec in "$@"; do
    IFS=: read -r ns ip4 _ <<<"$spec"
    ip6=${spec#*:*:}
    i=$((i + 1))
    _softrnic_ns_cleanup "$ns"
    softrnic_on_exit "netns_pair_down '$ns'"
    local vh="sb$$x${i}h" vs="sb$$x${i}s"
    ip netns add "$ns" && ip link add "$vh" type veth peer name "$vs" &&
    ip link set "$vh" netns "$ns" && ip link set "$vs" netns "$sw" &&
    ip -n "$ns" link set "$vh" name "$NETNS_IFACE" &&
    ip -n "$sw" link set "$vs" master br0 && ip -n "$sw" link set "$vs" up ||
      { log "netns_bridge_up: failed creating $ns"; return 1; }
    ip -n "$ns" link set lo up
    [[ "${NETNS_GSO:-0}" == 1 ]] || ip -n "$ns" link set "$NETNS_IFACE" gso_max_segs 1
    ip -n "$ns" addr add "$ip4/24" dev "$NETNS_IFACE"
    ip -n "$ns" addr add "$ip6/64" dev "$NETNS_IFACE" nodad
    ip -n "$ns" link set "$NETNS_IFACE" up
  done
  wait_until 5 bash -c "for n in $(printf '%s ' "${@%%:*}"); do
                          ip -n \$n link show $NETNS_IFACE | grep -q LOWER_UP || exit 1; done" ||
    { log "netns_bridge_up: links did not come up"; return 1; }
  log "bridge $sw: $*"
}

# netns_pair_down NS_A NS_B: kill everything inside, delete both namespaces
# (deleting a namespace deletes its veth end, and with it the peer).
netns_pair_down() {
  local ns
  for ns in "$@"; do _softrnic_ns_cleanup "$ns"; done
}

# run_in_ns NS CMD...: run CMD inside NS with a hard timeout
# ($SOFTRNIC_CMD_TIMEOUT, default 60 s). The environment is kept.
# ns_wait_listening NS PORT...: waits up to 10 s for a TCP listener on
# each PORT inside NS (perftest's and ibv_rc_pingpong's out-of-band
# exchange), dies naming the first that never came.
ns_wait_listening() {
  local ns=$1 p; shift
  for p in "$@"; do
    wait_until 10 bash -c "ip netns exec $ns ss -Hltn 'sport = :$p' | grep -q ." ||
      die "nothing listening on $ns:$p"
  done
}

run_in_ns() {
  local ns=$1; shift
  timeout -k 5 "$SOFTRNIC_CMD_TIMEOUT" ip netns exec "$ns" "$@"
}

# ---------------------------------------------------------------- loss injection
# nft_drop_udp4791 NS PERCENT [PORT=4791]: on NS's INPUT hook (the receiver:
# an OUTPUT drop would return EPERM to the sender, unlike a lossy wire) drop
# a random PERCENT of UDP packets to PORT. Replaces any earlier rule.
nft_drop_udp4791() {
  local ns=$1 pct=$2 port=${3:-4791}
  nft_clear_drop "$ns"
  ip netns exec "$ns" nft -f - <<NFT || { log "nft_drop_udp4791: nft failed"; return 1; }
table inet softrnic_loss {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport $port numgen random mod 100 < $pct counter drop
  }
}
NFT
  log "dropping ${pct}% of udp/$port arriving in $ns"
}
# nft_count_roce NS: count RoCE v2 packets (UDP to 4791) arriving on NS's
# veth; nft_roce_count NS: how many so far.
nft_count_roce() {
  ip netns exec "$1" nft -f - <<NFT
table inet softrnic_count {
  chain input {
    type filter hook input priority 0; policy accept;
    iifname "$NETNS_IFACE" udp dport 4791 counter
  }
}
NFT
}
nft_roce_count() {
  ip netns exec "$1" nft list table inet softrnic_count | sed -nE 's/.*counter packets ([0-9]+).*/\1/p'
}
# nft_clear_drop NS: remove the loss rule.
nft_clear_drop() { ip netns exec "$1" nft delete table inet softrnic_loss 2>/dev/null || true; }
# nft_drop_count NS: packets dropped so far by the loss rule.
nft_drop_count() {
  ip netns exec "$1" nft list table inet softrnic_loss 2>/dev/null |
    sed -nE 's/.*counter packets ([0-9]+).*/\1/p' | head -1
}

# ---------------------------------------------------------------- packet capture
# capture_start IFACE FILE [NS] [FILTER...]: tcpdump IFACE (inside NS if given)
# into FILE (pcap), full packets, flushed per packet; returns once tcpdump
# is listening. Stop with capture_stop (also done at exit).
_softrnic_capture_seq=0
declare -A _softrnic_capture_file=()
capture_start() {
  local ifc=$1 file=$2 ns=${3:-}; shift $(( $# < 3 ? $# : 3 ))
  command -v tcpdump >/dev/null || die "tcpdump not installed"
  _softrnic_capture_seq=$(( _softrnic_capture_seq + 1 ))
  local name="capture$_softrnic_capture_seq" pre=()
  [[ -n "$ns" ]] && pre=(ip netns exec "$ns")
  start_bg "$name" "${SOFTRNIC_CAPTURE_TIMEOUT:-600}" "${pre[@]}" \
    tcpdump -i "$ifc" -w "$file" -U -s 0 -n -B "${SOFTRNIC_CAPTURE_BUFFER_KB:-65536}" "$@"
  SOFTRNIC_CAPTURE=$name
  _softrnic_capture_file[$name]=$file
  wait_until 10 grep -q 'listening on' "$(bg_log_file "$name")" ||
    { log "capture_start: tcpdump did not start"; bg_log "$name" >&2; return 1; }
}
# capture_stop [NAME]: stop the last (or named) capture; flushes the file.
capture_stop() {
  local name=${1:-${SOFTRNIC_CAPTURE:-}}
  [[ -n "$name" ]] || return 0
  # tcpdump drops what it has not yet read from the kernel ring when told to
  # stop, and the ring hands it packets in blocks (at the latest every 1 s),
  # so wait until the file (written per packet, -U) has not grown for 1.2 s
  # (at most 15 s): on a loaded 2-core machine it can lag behind the traffic.
  # (--immediate-mode would avoid the wait but, with -s 0, leaves the ring
  # only a few frames and the kernel drops packets under load.)
  local file=${_softrnic_capture_file[$name]:-} last=-1 cur i still=0
  for (( i=0; i<50 && still<4; i++ )); do
    cur=$(stat -c %s "$file" 2>/dev/null || echo 0)
    if [[ "$cur" == "$last" ]]; then still=$(( still + 1 )); else still=0; fi
    last=$cur
    sleep 0.3
  done
  kill_bg "$name" TERM
  local f; f=$(bg_log_file "$name")
  grep -E 'packets (captured|received)' "$f" >&2 || true
  if grep -qE '^[1-9][0-9]* packets dropped by kernel' "$f"; then
    log "capture_stop: WARNING: $(grep 'dropped by kernel' "$f")"
  fi
}
