#!/usr/bin/env bash
# THE first command: install softrnic from source and run Debian's own,
# unmodified RDMA tools on the installed files, first on one host, then
# across two "hosts" (network namespaces joined by a veth pair, real RoCE v2
# over UDP 4791 through the kernel stack).
#
#   scripts/demo.sh
# builds only what is installed (the `softrnic` command and the drop-in
# libraries: target softrnic_install_targets, not the tests), installs it
# with `cmake --install` into DEMO_PREFIX (the command in bin/, the
# libraries in the private lib/softrnic/, never over the system's
# libibverbs), then runs every step on the installed libraries.
#   Environment:
#     BUILD_DIR          default build (RelWithDebInfo)
#     DEMO_PREFIX        default /usr/local as root, ~/.local otherwise
#     SOFTRNIC_SKIP_DEPS=1 / SOFTRNIC_SKIP_BUILD=1   skip those steps
#     DEMO_GID_INDEX     GID index passed to the tools (default 0)
#     DEMO_IP_A/B        default 10.77.0.1 / 10.77.0.2
#     DEMO_CAPTURE=FILE  also capture the cross-namespace traffic to FILE
#                        (open it in Wireshark: RoCE v2 decodes as InfiniBand)
# Needs root for the namespace steps (skipped otherwise).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build}
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
GID=${DEMO_GID_INDEX:-0}
IP_A=${DEMO_IP_A:-10.77.0.1}
IP_B=${DEMO_IP_B:-10.77.0.2}
NS_A=srn-demo-a
NS_B=srn-demo-b
STEP_TIMEOUT=${DEMO_STEP_TIMEOUT:-60}

banner() { printf '\n\033[1m######## %s\033[0m\n' "$*"; }
say()    { printf '\033[36m$ %s\033[0m\n' "$*"; }

if [[ $(id -u) -eq 0 ]]; then PREFIX=${DEMO_PREFIX:-/usr/local}; else PREFIX=${DEMO_PREFIX:-$HOME/.local}; fi

banner "1/6 dependencies"
scripts/install-deps.sh

banner "2/6 build and install (RelWithDebInfo -> ${BUILD_DIR#"$ROOT"/} -> $PREFIX)"
if [[ "${SOFTRNIC_SKIP_BUILD:-0}" != 1 ]]; then
  scripts/build.sh RelWithDebInfo "$BUILD_DIR" --target softrnic_install_targets
fi
say "cmake --install ${BUILD_DIR#"$ROOT"/} --prefix $PREFIX"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" | grep -v '/share/doc/' || true
SOFTRNIC="$PREFIX/bin/softrnic"
[[ -x "$SOFTRNIC" ]] || { echo "demo: $SOFTRNIC was not installed" >&2; exit 1; }

# Every step below uses the installed files only.
export SOFTRNIC_BUILD_DIR="$BUILD_DIR" SOFTRNIC_LIB_DIR="$PREFIX/lib/softrnic"
export SOFTRNIC_CMD_TIMEOUT=$STEP_TIMEOUT SOFTRNIC_NO_LOG_DUMP=1
# Namespaces, background servers, captures: all cleaned up by one EXIT trap.
# shellcheck source=../tests/integration/lib/common.sh
source "$ROOT/tests/integration/lib/common.sh"

if [[ ! -e "$SOFTRNIC_LIB_DIR/libibverbs.so.1" ]]; then
  echo "demo: $SOFTRNIC_LIB_DIR/libibverbs.so.1 was not installed (verbs shim missing?)" >&2
  exit 1
fi
softrnic_env
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH${LD_PRELOAD:+ LD_PRELOAD=$LD_PRELOAD}"
say "ldd $(command -v ibv_devinfo) | grep libibverbs"
ldd "$(command -v ibv_devinfo)" | grep libibverbs || true

results=()
record() { results+=("$(printf '%-48s %s' "$1" "$2")"); }
# step NAME CMD...: run CMD in the foreground, echo it, record PASS/FAIL.
step() {
  local name=$1; shift
  say "$*"
  local rc=0
  "$@" || rc=$?
  if (( rc == 0 )); then record "$name" PASS; else record "$name" "FAIL (exit $rc)"; fi
  return 0
}

# client_server NAME SERVER_NS CLIENT_NS SERVER_ADDR TOOL ARGS...
# Starts "TOOL ARGS" as server (in SERVER_NS, or this host if "-"), waits for
# its TCP port 18515, then runs "TOOL ARGS SERVER_ADDR" as client.
client_server() {
  local name=$1 sns=$2 cns=$3 addr=$4; shift 4
  local cli=(timeout -k 5 "$STEP_TIMEOUT")
  [[ $cns != - ]] && cli+=(ip netns exec "$cns")
  local tag=${name//[^A-Za-z0-9]/_}
  local swhere="" cwhere=""
  [[ $sns != - ]] && swhere=" in $sns"
  [[ $cns != - ]] && cwhere=" in $cns"
  say "[server$swhere] $*"
  if [[ $sns == - ]]; then
    start_bg "$tag" "$STEP_TIMEOUT" "$@"
  else
    start_bg "$tag" "$STEP_TIMEOUT" ip netns exec "$sns" "$@"
  fi
  local wargs=(-p "$tag")
  [[ $sns != - ]] && wargs+=(-n "$sns")
  if ! wait_for_port "${wargs[@]}" 18515 15; then
    echo "--- server output:"; bg_log "$tag"
    kill_bg "$tag"; record "$name" "FAIL (server did not start)"; return 0
  fi
  say "[client$cwhere] $* $addr"
  local rc=0 src=0
  "${cli[@]}" "$@" "$addr" || rc=$?
  wait_bg "$tag" 15 || src=$?
  echo "--- server output:"; bg_log "$tag"
  if (( rc == 0 && src == 0 )); then record "$name" PASS
  else record "$name" "FAIL (client exit $rc, server exit $src)"; fi
}

banner "3/6 ibv_devices / ibv_devinfo (Debian ibverbs-utils on softrnic)"
step "softrnic run ibv_devinfo" timeout 20 "$SOFTRNIC" run ibv_devinfo
step "ibv_devices" timeout 20 ibv_devices
step "ibv_devinfo" timeout 20 ibv_devinfo -v

banner "4/6 ibv_rc_pingpong, one host (client and server are two processes)"
client_server "ibv_rc_pingpong same host" - - 127.0.0.1 ibv_rc_pingpong -g "$GID"

have_ns=1
if [[ $(id -u) -ne 0 ]]; then
  have_ns=0; echo "not root: skipping the two-host (network namespace) steps"
  record "two-namespace steps" "SKIPPED (needs root)"
fi

if (( have_ns )); then
  banner "5/6 ibv_rc_pingpong across two hosts: $NS_A ($IP_A) <-> $NS_B ($IP_B) over veth"
  netns_pair_up "$NS_A" "$NS_B" "$IP_A" "$IP_B"
  say "ip -n $NS_B addr show $NETNS_IFACE"; ip -n "$NS_B" -br addr show "$NETNS_IFACE"
  if [[ -n "${DEMO_CAPTURE:-}" ]]; then
    capture_start "$NETNS_IFACE" "$DEMO_CAPTURE" "$NS_B" udp port 4791
  fi
  step "ibv_devinfo in $NS_A" timeout 20 ip netns exec "$NS_A" ibv_devinfo
  client_server "ibv_rc_pingpong $NS_A -> $NS_B" "$NS_B" "$NS_A" "$IP_B" \
    ibv_rc_pingpong -g "$GID"
fi

banner "6/6 perftest"
if command -v ib_write_bw >/dev/null && command -v ib_send_lat >/dev/null; then
  if (( have_ns )); then s=$NS_B c=$NS_A a=$IP_B where="$NS_A -> $NS_B"
  else s=- c=- a=127.0.0.1 where="same host"; fi
  client_server "ib_write_bw ($where)" "$s" "$c" "$a" \
    ib_write_bw -x "$GID" -F -s 65536 -n 2000 --report_gbits
  client_server "ib_send_lat ($where)" "$s" "$c" "$a" \
    ib_send_lat -x "$GID" -F -s 8 -n 2000
  client_server "ib_write_bw (same host)" - - 127.0.0.1 \
    ib_write_bw -x "$GID" -F -s 65536 -n 2000 --report_gbits
else
  echo "perftest not installed: skipping"; record "perftest" "SKIPPED (not installed)"
fi

# rdma_cm (softrnic's librdmacm.so.1): rping exchanges and verifies 10 pings.
if command -v rping >/dev/null && [[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]]; then
  banner "rping over rdma_cm (Debian rdmacm-utils on softrnic's librdmacm.so.1)"
  say "[server] rping -s -a 127.0.0.1 -p 7471 -C 10 -V"
  start_bg rping_srv "$STEP_TIMEOUT" rping -s -a 127.0.0.1 -p 7471 -C 10 -V
  sleep 1
  say "[client] rping -c -a 127.0.0.1 -p 7471 -C 10 -V -v"
  rc=0
  timeout -k 5 "$STEP_TIMEOUT" rping -c -a 127.0.0.1 -p 7471 -C 10 -V -v || rc=$?
  src=0
  wait_bg rping_srv 15 || src=$?
  if (( rc == 0 && src == 0 )); then record "rping -V -C 10 (same host)" PASS
  else record "rping -V -C 10 (same host)" "FAIL (client exit $rc, server exit $src)"; fi
fi

# Middleware (docs/middleware.md): Debian's UCX over softrnic, started with
# `softrnic run` (library path + the /dev and /sys entries UCX checks).
if command -v ucx_perftest >/dev/null; then
  banner "UCX over softrnic (Debian ucx-utils, UCX_TLS=rc_v,ud_v,self)"
  sr=("$SOFTRNIC" run --)
  export UCX_TLS=rc_v,ud_v,self UCX_NET_DEVICES=softrnic0:1
  say "softrnic run ucx_info -d | grep -A1 softrnic"
  "${sr[@]}" ucx_info -d 2>/dev/null | grep -B1 "Device: softrnic0" || true
  say "[server] softrnic run ucx_perftest -p 13371 &"
  start_bg ucx_srv "$STEP_TIMEOUT" "${sr[@]}" ucx_perftest -p 13371
  wait_for_port -p ucx_srv 13371 10 || true
  step "UCX UCP tag_lat over softrnic (same host)" timeout -k 5 "$STEP_TIMEOUT" \
    "${sr[@]}" ucx_perftest 127.0.0.1 -p 13371 -t tag_lat -n 10000
  wait_bg ucx_srv 15 || true
  unset UCX_TLS UCX_NET_DEVICES
fi

if [[ -n "${DEMO_CAPTURE:-}" ]] && (( have_ns )); then
  capture_stop
  say "tshark -r $DEMO_CAPTURE -c 10"
  timeout 30 tshark -r "$DEMO_CAPTURE" -c 10 2>/dev/null || true
fi

banner "summary"
fail=0
for r in "${results[@]}"; do echo "  $r"; [[ $r == *FAIL* ]] && fail=1; done
if (( fail )); then echo "demo: some steps FAILED"; exit 1; fi
echo "demo: all steps passed"
echo "installed: $SOFTRNIC (man softrnic; docs in $PREFIX/share/doc/softrnic)"
echo "run any verbs program with: softrnic run CMD"
