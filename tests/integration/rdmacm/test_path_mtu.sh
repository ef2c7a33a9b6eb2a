#!/usr/bin/env bash
# rdma_cm connects QPs at the port's active MTU (issue 17), not a fixed
# 1024: cm_events (the program of rdmacm_cm_events) checks that both QPs of
# its connection have the port's active_mtu as path MTU; here it runs in a
# fresh network namespace with loopback only, where that is 4096
# (src/engine/port_mtu.h), and with SOFTRNIC_MTU=2048.
#
# usage: test_path_mtu.sh CM_EVENTS    (ctest sets SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 77 (skip) without root.
set -euo pipefail
source "${SOFTRNIC_SOURCE_DIR:-$(dirname "$0")/../../..}/tests/integration/lib/common.sh"
softrnic_require_root
unshare -n true 2>/dev/null || { echo "unshare -n not permitted" >&2; exit 77; }
softrnic_env
prog=$1
fail=0
# run_in_namespace EXPECTED_MTU [VAR=VALUE...]
run_in_namespace() {
  local want=$1 out rc=0
  shift
  out=$(timeout 150 unshare -n env "$@" bash -c 'ip link set lo up && exec "$0"' "$prog" 2>&1) || rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^path MTU $want (port active_mtu $want)$" <<<"$out"; then
    echo "PASS path MTU $want ($*)"
  else
    echo "FAIL path MTU $want ($*): rc $rc"
    echo "$out" | tail -20
    fail=1
  fi
}
run_in_namespace 4096
run_in_namespace 2048 SOFTRNIC_MTU=2048
exit $fail
