#!/bin/bash
# Debian's unmodified rdmacm-utils and perftest (rdma_cm mode) on softrnic's
# librdmacm.so.1 + libibverbs.so.1: a server and a client process per case,
# both must exit 0 (cmtime's server runs until killed: only the client's
# status counts there) and print the tool's own success lines.
#
# usage: test_tools.sh [--netns] [--addr IP] CASE...
#   CASE: rping rping_loss ucmatose ucmatose4 udaddy rdma_client cmtime send_bw
#         write_lat rstream rstream_async riostream rcopy (default: all), qperf (not by default:
#         its rc_lat server sometimes hangs in ibv_get_cq_event because the
#         engine retries the read on EINTR and qperf ends tests with SIGALRM)
#   (default)  both on this host, the client connects to 127.0.0.1 (--addr
#              picks another local address, e.g. the host's own IP)
#   --netns    server and client in two network namespaces joined by a veth
#              pair; the client connects to the server namespace's address
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
[[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]] || skip "librdmacm.so.1 not built in $SOFTRNIC_LIB_DIR"
softrnic_env

netns=0 addr=127.0.0.1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --netns) netns=1; shift ;;
    --addr) addr=$2; shift 2 ;;
    *) break ;;
  esac
done
cases=("$@")
(( ${#cases[@]} )) || cases=(rping rping_loss ucmatose ucmatose4 udaddy rdma_client cmtime send_bw write_lat
                              rstream rstream_async riostream rcopy)

A=srcm_a B=srcm_b IPA=10.233.0.1 IPB=10.233.0.2
srv_pre=() cli_pre=()
if (( netns )); then
  softrnic_require_root
  netns_pair_up $A $B $IPA $IPB || die "netns setup"
  srv_pre=(run_in_ns $B) cli_pre=(ip netns exec $A)
  addr=$IPB
fi
# Own port range per test script, so parallel ctest runs do not collide.
base=$(( netns ? 21600 : 21500 ))

# wait_listener PS PORT: a live listener is in softrnic's host registry
# (docs/rdmacm.md), or 10 s have passed.
# wait_listener tcp PORT: something listens on TCP PORT (qperf's control port).
wait_listener() {
  if [[ $1 == tcp ]]; then
    if (( netns )); then wait_for_port -n $B "$2" 10; else wait_for_port "$2" 10; fi
    return 0
  fi
  # An entry of a live process: a server killed before (kill_bg) leaves its
  # entry behind, and a client that came before the new server listens is
  # rejected (and perftest then crashes in its error path).
  wait_until 10 bash -c 'for f in /dev/shm/softrnic-cm-'"$(id -u)"'/*-'"$1-$2"'; do
                           [[ -f $f ]] && kill -0 "$(cut -d" " -f1 "$f")" 2>/dev/null && exit 0
                         done; exit 1' || sleep 1
}

fail=0
# run_case NAME PS PORT SERVER_OK_REGEX CLIENT_OK_REGEX -- SERVER... -- CLIENT...
run_case() {
  local name=$1 ps=$2 port=$3 sok=$4 cok=$5; shift 5
  [[ $1 == -- ]] && shift
  local srv=() cli=()
  while [[ $# -gt 0 && $1 != -- ]]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  local clog="$SOFTRNIC_TMP/$name-client.log"
  start_bg "$name-server" 90 "${srv_pre[@]}" "${srv[@]}"
  wait_listener "$ps" "$port"
  local crc=0 src=0
  timeout -k 5 60 "${cli_pre[@]}" "${cli[@]}" >"$clog" 2>&1 || crc=$?
  if [[ -n "$sok" ]]; then
    wait_bg "$name-server" 30 || src=$?
  else
    kill_bg "$name-server"
  fi
  local slog; slog=$(bg_log_file "$name-server")
  if (( crc == 0 && src == 0 )) && grep -Eq "$cok" "$clog" &&
     { [[ -z "$sok" ]] || grep -Eq "$sok" "$slog"; }; then
    log "PASS $name"
  else
    fail=$((fail + 1))
    log "FAIL $name (client rc $crc, server rc $src)"
    echo "--- client:" >&2; tail -15 "$clog" >&2
    echo "--- server:" >&2; tail -15 "$slog" >&2
  fi
}

for c in "${cases[@]}"; do
  case $c in
    rping)
      p=$((base + 1))
      run_case rping 106 $p 'server ping data: rdma-ping-9:' 'ping data: rdma-ping-9:' \
        -- rping -s -v -V -C 10 -p $p -- rping -c -a "$addr" -v -V -C 10 -p $p
      # The data really was verified: exactly 10 pings, no "data mismatch".
      n=$(grep -c '^ping data: rdma-ping-' "$SOFTRNIC_TMP/rping-client.log")
      [[ $n == 10 ]] || { fail=$((fail + 1)); log "FAIL rping: $n pings instead of 10"; }
      ! grep -qi mismatch "$SOFTRNIC_TMP/rping-client.log" || { fail=$((fail + 1)); log "FAIL rping: mismatch"; } ;;
    rping_loss)
      # 10% of all packets (CM MADs and data) dropped on transmit, both
      # sides: CM retransmission plus the engine's retries still connect,
      # verify and disconnect.
      p=$((base + 9))
      run_case rping_loss 106 $p 'server ping data: rdma-ping-9:' 'ping data: rdma-ping-9:' \
        -- env SOFTRNIC_FAULTS=drop=0.1,seed=3 rping -s -v -V -C 10 -p $p \
        -- env SOFTRNIC_FAULTS=drop=0.1,seed=11 rping -c -a "$addr" -v -V -C 10 -p $p ;;
    ucmatose)
      p=$((base + 2))
      run_case ucmatose 106 $p 'test complete' 'test complete' \
        -- ucmatose -p $p -- ucmatose -s "$addr" -p $p ;;
    ucmatose4)
      p=$((base + 3))
      run_case ucmatose4 106 $p 'test complete' 'test complete' \
        -- ucmatose -p $p -c 4 -C 20 -- ucmatose -s "$addr" -p $p -c 4 -C 20 ;;
    udaddy)
      # udaddy's port is fixed (7174; its -p is the port space).
      run_case udaddy 111 7174 'test complete' 'test complete' \
        -- udaddy -- udaddy -s "$addr" ;;
    rdma_client)
      p=$((base + 5))
      run_case rdma_client 106 $p 'rdma_server: end 0' 'rdma_client: end 0' \
        -- rdma_server -p $p -- rdma_client -s "$addr" -p $p ;;
    cmtime)
      p=$((base + 6))
      run_case cmtime 106 $p '' '^connect +:' \
        -- cmtime -p $p -c 50 -- cmtime -s "$addr" -p $p -c 50 ;;
    send_bw)
      p=$((base + 7))
      run_case send_bw 106 $p '65536 +1000' '65536 +1000' \
        -- ib_send_bw -R -p $p -- ib_send_bw -R -p $p "$addr" ;;
    write_lat)
      p=$((base + 8))
      run_case write_lat 106 $p '' '^ 2 +1000 ' \
        -- ib_write_lat -R -p $p -- ib_write_lat -R -p $p "$addr" ;;
    rstream)
      # rsockets (softrnic's simplified implementation), data verified.
      p=$((base + 10))
      run_case rstream 106 $p '64k +100 ' '64k +100 ' \
        -- rstream -p $p -S 65536 -C 100 -T v -- rstream -s "$addr" -p $p -S 65536 -C 100 -T v ;;
    rstream_async)
      # rpoll-driven non-blocking rsockets.
      p=$((base + 11))
      run_case rstream_async 106 $p '64k +100 ' '64k +100 ' \
        -- rstream -p $p -S 65536 -C 100 -T a -- rstream -s "$addr" -p $p -S 65536 -C 100 -T a ;;
    riostream)
      # riomap + riowrite (RDMA WRITE into the peer's mapped buffer, whose
      # CPU spins on the last byte), data verified.
      p=$((base + 14))
      run_case riostream 106 $p '64k +100 ' '64k +100 ' \
        -- riostream -p $p -S 65536 -C 100 -T v -- riostream -s "$addr" -p $p -S 65536 -C 100 -T v ;;
    rcopy)
      # rsockets file copy: 3 MB of random data arrive intact.
      p=$((base + 13))
      head -c 3000000 /dev/urandom >"$SOFTRNIC_TMP/rcopy.src"
      start_bg rcopy-server 60 "${srv_pre[@]}" rcopy -p $p
      wait_listener 106 $p
      if timeout -k 5 60 "${cli_pre[@]}" rcopy "$SOFTRNIC_TMP/rcopy.src" "$addr:$SOFTRNIC_TMP/rcopy.dst" \
           -p $p >"$SOFTRNIC_TMP/rcopy-client.log" 2>&1 &&
         wait_until 10 cmp -s "$SOFTRNIC_TMP/rcopy.src" "$SOFTRNIC_TMP/rcopy.dst"; then
        log "PASS rcopy"
      else
        fail=$((fail + 1)); log "FAIL rcopy"; tail -5 "$SOFTRNIC_TMP/rcopy-client.log" >&2
      fi
      kill_bg rcopy-server ;;
    qperf)
      # qperf -cm1: its server forks a child per test, which uses rdma_cm.
      p=$((base + 12))
      run_case qperf tcp $p '' 'latency +=' \
        -- qperf -lp $p -- qperf -cm1 -lp $p "$addr" rc_bw rc_lat ;;
    *) die "unknown case $c" ;;
  esac
done
(( fail == 0 )) || die "$fail case(s) failed"
log "PASS: ${cases[*]}$( (( netns )) && echo ' across namespaces')"
