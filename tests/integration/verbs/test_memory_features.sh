#!/bin/bash
# On-demand paging, device memory, memory windows and parent domains (issue
# 15) between two
# processes, on one host (SOFTRNIC_TRANSPORT=shm and =udp) and between two
# network namespaces joined by a veth pair:
#   - pyverbs_memory.py: python3-pyverbs, the calls rdma-core's test suite
#     makes (ODP explicit/implicit/prefetch, DM + zero-based DM MR, a QP and
#     extended CQ on a parent domain, the access errors);
#   - Debian's ibv_rc_pingpong with device memory (-j), ODP (-o) and
#     implicit ODP with prefetch (-O -P), each validating its buffers (-c).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd ibv_rc_pingpong
softrnic_require_lib
softrnic_env
PY=/usr/bin/python3
$PY -c "import pyverbs.device" 2>/dev/null || skip "python3-pyverbs not installed"
HERE=$(cd "$(dirname "$0")" && pwd)
fail=0
pass() { log "PASS $*"; }
failed() { log "FAIL $*"; fail=$((fail + 1)); }

# ---- one host ------------------------------------------------------------------
for transport in shm udp; do
  if SOFTRNIC_TRANSPORT=$transport timeout 120 $PY "$HERE/pyverbs_memory.py" \
       >"$SOFTRNIC_TMP/py-$transport.log" 2>&1 &&
     ! grep -q "using UDP" "$SOFTRNIC_TMP/py-$transport.log"; then
    pass "pyverbs memory features, one host, $transport ($(grep -c ^PASS "$SOFTRNIC_TMP/py-$transport.log") checks)"
  else
    failed "pyverbs memory features, one host, $transport"
    grep -E "FAIL|Error|using UDP" "$SOFTRNIC_TMP/py-$transport.log" | head -10 >&2
  fi
done

# in_ns NS CMD...: run_in_ns, or CMD on this host when NS is empty.
in_ns() {
  local ns=$1; shift
  if [[ -n "$ns" ]]; then run_in_ns "$ns" "$@"; else timeout -k 5 "$SOFTRNIC_CMD_TIMEOUT" "$@"; fi
}
port=18611
rc_pingpong_case() {  # rc_pingpong_case NAME SERVER_NS CLIENT_NS SERVER_ADDR ARGS...
  local name=$1 sns=$2 cns=$3 addr=$4; shift 4
  port=$((port + 1))
  start_bg srv 60 in_ns "$sns" ibv_rc_pingpong -g 0 -p $port "$@"
  wait_for_port ${sns:+-n $sns} -p srv $port 10 || true
  if in_ns "$cns" ibv_rc_pingpong -g 0 -p $port "$@" "$addr" >"$SOFTRNIC_TMP/cli.log" 2>&1 &&
     wait_bg srv 30 && grep -q "iters in" "$SOFTRNIC_TMP/cli.log"; then
    pass "$name: $(grep 'iters in' "$SOFTRNIC_TMP/cli.log" | sed 's/.*= //')"
  else
    failed "$name"
    tail -5 "$SOFTRNIC_TMP/cli.log" >&2
    bg_log srv | tail -5 >&2
    kill_bg srv
  fi
}
for transport in shm udp; do
  export SOFTRNIC_TRANSPORT=$transport
  rc_pingpong_case "rc_pingpong device memory, $transport" "" "" 127.0.0.1 -j -s 4096 -n 200 -c
  rc_pingpong_case "rc_pingpong ODP, $transport" "" "" 127.0.0.1 -o -s 8192 -n 200 -c
  rc_pingpong_case "rc_pingpong implicit ODP + prefetch, $transport" "" "" 127.0.0.1 -O -P -s 4096 -n 200 -c
done
unset SOFTRNIC_TRANSPORT

# ---- two namespaces --------------------------------------------------------------
A=srmem_a B=srmem_b IPA=10.245.0.1 IPB=10.245.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
start_bg resp 120 run_in_ns $B $PY "$HERE/pyverbs_memory.py" --listen $IPB:18610
wait_for_port -n $B -p resp 18610 10 || true
if run_in_ns $A $PY "$HERE/pyverbs_memory.py" --connect $IPB:18610 >"$SOFTRNIC_TMP/py-ns.log" 2>&1 &&
   wait_bg resp 30; then
  pass "pyverbs memory features between namespaces ($(grep -c ^PASS "$SOFTRNIC_TMP/py-ns.log") checks)"
else
  failed "pyverbs memory features between namespaces"
  grep -E "FAIL|Error" "$SOFTRNIC_TMP/py-ns.log" | head -10 >&2
  bg_log resp | grep -E "FAIL|Error" | head -10 >&2
  kill_bg resp
fi
rc_pingpong_case "rc_pingpong device memory, namespaces" $B $A $IPB -j -s 4096 -n 200 -c
rc_pingpong_case "rc_pingpong ODP, namespaces" $B $A $IPB -o -s 8192 -n 200 -c
rc_pingpong_case "rc_pingpong implicit ODP + prefetch, namespaces" $B $A $IPB -O -P -s 4096 -n 200 -c

(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: memory features on one host and between namespaces"
