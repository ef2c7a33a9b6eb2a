#!/bin/bash
# Debian's unmodified ibv_xsrq_pingpong (XRC: a send QP per peer, receives
# through an XRC SRQ named by number in every request) between two
# processes on this host, over the transport ctest sets
# (SOFTRNIC_TRANSPORT=udp: RoCE v2 on loopback sockets; shm: the
# shared-memory rings). A case passes when both sides print "success".
#
# With -c N the server sends client i's messages over client j's receive
# QP, to the XRC SRQ in client i's process: the clients' processes share the
# XRC domain of /tmp/xrc_domain (src/engine/same_host/xrc_share.h; docs/user-guide.md,
# "XRC"). Each client must see its own messages, which proves that.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_cmd ibv_xsrq_pingpong ss
softrnic_require_lib
softrnic_env

PORT=$((21000 + ($$ % 20000)))
fail=0
run_case() {  # run_case NAME ARGS...
  local name=$1; shift
  PORT=$((PORT + 1))
  while ss -tan 2>/dev/null | awk '{print $4}' | grep -q ":$PORT\$"; do PORT=$((PORT + 1)); done
  start_bg srv 60 ibv_xsrq_pingpong -g 0 -p "$PORT" "$@"
  wait_until 5 bash -c "ss -ltn 2>/dev/null | grep -q ':$PORT '" || true
  if run_t 60 ibv_xsrq_pingpong -g 0 -p "$PORT" "$@" 127.0.0.1 >"$SOFTRNIC_TMP/cli.log" 2>&1 &&
     wait_bg srv 30 && grep -qx success "$SOFTRNIC_TMP/cli.log" && bg_log srv | grep -qx success; then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    tail -5 "$SOFTRNIC_TMP/cli.log" >&2
    bg_log srv | tail -5 >&2
    kill_bg srv
  fi
}

# run_multi NAME N ARGS...: a server with -c N and N clients at once.
run_multi() {
  local name=$1 n=$2 i ok=1; shift 2
  PORT=$((PORT + 1))
  while ss -tan 2>/dev/null | awk '{print $4}' | grep -q ":$PORT\$"; do PORT=$((PORT + 1)); done
  start_bg srv 90 ibv_xsrq_pingpong -g 0 -p "$PORT" -c "$n" "$@"
  wait_until 5 bash -c "ss -ltn 2>/dev/null | grep -q ':$PORT '" || true
  for (( i = 1; i <= n; i++ )); do
    start_bg "cli$i" 90 ibv_xsrq_pingpong -g 0 -p "$PORT" "$@" 127.0.0.1
  done
  for (( i = 1; i <= n; i++ )); do
    wait_bg "cli$i" 90 && bg_log "cli$i" | grep -qx success || { ok=0; bg_log "cli$i" | tail -5 >&2; }
  done
  wait_bg srv 30 && bg_log srv | grep -qx success || { ok=0; bg_log srv | tail -5 >&2; }
  if (( ok )); then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
    kill_bg srv
    for (( i = 1; i <= n; i++ )); do kill_bg "cli$i"; done
  fi
}

run_case "default (4096 bytes, mtu 1024)" -n 200
run_case "1 byte" -s 1 -n 200
run_case "64 KiB mtu 4096" -s 65536 -m 4096 -n 50
run_case "events (-e)" -e -n 100
run_multi "-c 2 (shared XRC domain)" 2 -n 100
run_multi "-c 4 (shared XRC domain)" 4 -n 50
run_multi "-c 2, 64 KiB mtu 4096, events" 2 -s 65536 -m 4096 -n 20 -e
(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: ibv_xsrq_pingpong over ${SOFTRNIC_TRANSPORT:-auto}"
