#!/usr/bin/env bash
# The port's active MTU without SOFTRNIC_MTU follows the links, as rxe's
# follows its netdev: the largest IB MTU whose packets (payload + 88 header
# bytes, src/engine/port_mtu.h) fit the smallest MTU of the interfaces the
# device has addresses on. Each case is a fresh network namespace
# (unshare -n: gone when its shell exits) with loopback and one veth end
# whose MTU the case sets, and Debian's ibv_devinfo over our libibverbs.
#
# usage: test_port_mtu.sh    (ctest sets SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 77 (skip) without root or tools.
set -euo pipefail
source "${SOFTRNIC_SOURCE_DIR:-$(dirname "$0")/../../..}/tests/integration/lib/common.sh"
softrnic_require_root
command -v ibv_devinfo >/dev/null || { echo "ibverbs-utils not installed" >&2; exit 77; }
unshare -n true 2>/dev/null || { echo "unshare -n not permitted" >&2; exit 77; }
softrnic_env

fail=0
# active_mtu_in LINK_MTU [VAR=VALUE...]: ibv_devinfo's active_mtu line in a
# namespace whose veth end has MTU LINK_MTU ('-': loopback only).
active_mtu_in() {
  local link=$1
  shift
  timeout 30 unshare -n env "$@" bash -c '
    ip link set lo up
    if [[ $1 != - ]]; then
      ip link add v0 mtu "$1" type veth peer name v1 mtu "$1"
      ip link set v0 up && ip link set v1 up
      ip addr add 10.247.0.1/24 dev v0
    fi
    ibv_devinfo 2>&1 | sed -n "s/.*active_mtu:[[:space:]]*//p"' _ "$link"
}
expect() {  # expect DESCRIPTION WANT GOT
  if [[ $3 == "$2" ]]; then
    echo "PASS $1: $3"
  else
    echo "FAIL $1: want '$2', got '$3'"
    fail=1
  fi
}

expect "loopback only (65536)" "4096 (5)" "$(active_mtu_in -)"
expect "jumbo frames (9000)" "4096 (5)" "$(active_mtu_in 9000)"
# The boundaries: 4096 + 88 = 4184, 512 + 88 = 600.
expect "4184-byte link: 4096 fits exactly" "4096 (5)" "$(active_mtu_in 4184)"
expect "4183-byte link" "2048 (4)" "$(active_mtu_in 4183)"
expect "1500-byte Ethernet" "1024 (3)" "$(active_mtu_in 1500)"
expect "600-byte link: 512 fits exactly" "512 (2)" "$(active_mtu_in 600)"
expect "599-byte link" "256 (1)" "$(active_mtu_in 599)"
# Both ends take the path MTU from their own port, so a process that could
# not bind the veth address (another process holds its port 4791) must
# derive the same MTU as the one that did: from the interfaces, not from
# its own GIDs (which are loopback's alone). Without the host NIC
# (SOFTRNIC_HOST_NIC=0): with it, every process has the address
# (docs/host-nic.md).
held=$(timeout 40 unshare -n bash -c '
  export SOFTRNIC_HOST_NIC=0
  ip link set lo up
  ip link add v0 mtu 1500 type veth peer name v1 mtu 1500
  ip link set v0 up && ip link set v1 up
  ip addr add 10.247.0.1/24 dev v0
  timeout 20 ibv_rc_pingpong -g 0 -p 18790 >/dev/null 2>&1 &
  for _ in $(seq 50); do ss -lun | grep -q "10.247.0.1:4791" && break; sleep 0.1; done
  out=$(ibv_devinfo -v 2>&1)
  kill %1
  echo "$(grep -c "10.247.0.1" <<<"$out") $(sed -n "s/.*active_mtu:[[:space:]]*//p" <<<"$out")"')
expect "1500-byte Ethernet, its address held by another process: no GID there, same MTU" \
  "0 1024 (3)" "$held"
# A setting wins over the links, in both directions.
expect "SOFTRNIC_MTU=1024 on jumbo frames" "1024 (3)" "$(active_mtu_in 9000 SOFTRNIC_MTU=1024)"
expect "SOFTRNIC_MTU=4096 on 1500" "4096 (5)" "$(active_mtu_in 1500 SOFTRNIC_MTU=4096)"
expect "SOFTRNIC_MTU=auto on 1500" "1024 (3)" "$(active_mtu_in 1500 SOFTRNIC_MTU=auto)"
exit $fail
