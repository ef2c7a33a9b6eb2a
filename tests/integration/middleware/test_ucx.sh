#!/bin/bash
# UCX 1.13 (Debian's libucx0, ucx-utils), unmodified, over softrnic:
#   - ucx_info -d lists softrnic0:1 with rc_verbs and ud_verbs;
#   - ucx_perftest UCT tests over rc_verbs (put_lat, put_bw, get (bandwidth), am_lat,
#     am_bw, add_lat) and ud_verbs (am_lat, am_bw: UD has no RDMA);
#   - UCP tag_lat, tag_bw and stream_bw with UCX_TLS limited to softrnic's
#     transports (rc_v = rc_verbs with ud_verbs for wire-up; ud_v; self).
#
#   test_ucx.sh host    both processes on this host: softrnic's shared-memory path
#   test_ucx.sh netns   server and client in two network namespaces joined by
#                       a veth pair: RoCE v2 over UDP
#
# Every process prints softrnic's counters at exit; the test requires that
# the bytes the bandwidth tests moved left through softrnic on the expected
# path (UDP datagram bytes between namespaces; shared-memory ring packets or
# direct operations on one host).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
source "$(dirname "$0")/middleware_lib.sh"
MODE=${1:?usage: test_ucx.sh host|netns}
softrnic_require_root
softrnic_require_cmd ucx_info ucx_perftest
softrnic_require_lib

case $MODE in
  host)
    SRV=("$SOFTRNIC_TOOL" run --) CLI=("$SOFTRNIC_TOOL" run --)
    SERVER_IP=127.0.0.1 NS_SERVER="" ;;
  netns)
    A=sr_ucx_a B=sr_ucx_b IPA=10.233.0.1 IPB=10.233.0.2
    netns_pair_up $A $B $IPA $IPB || die "netns setup"
    SRV=(ip netns exec $A "$SOFTRNIC_TOOL" run --) CLI=(ip netns exec $B "$SOFTRNIC_TOOL" run --)
    NS_SERVER=$A
    export SOFTRNIC_TRANSPORT=udp
    SERVER_IP=$IPA ;;
  *) die "unknown mode $MODE" ;;
esac

info=$(sr ucx_info -d 2>&1) || { echo "$info" | tail -20; die "ucx_info -d failed"; }
for tl in rc_verbs ud_verbs; do
  echo "$info" | grep -A2 "Transport: $tl" | grep -q "Device: softrnic0:1" ||
    { echo "$info" | grep -E "Transport|Device"; die "ucx_info -d: no $tl on softrnic0:1"; }
done
log "ucx_info -d: softrnic0:1 with rc_verbs and ud_verbs"

PORT=$(( 20000 + $$ % 10000 ))
STATS=()
FLOOR=0   # bytes the bandwidth tests must have moved through softrnic
# perf NAME SIZE ITERS [ucx_perftest args...]: one server/client run.
perf() {
  local name=$1 size=$2 iters=$3; shift 3
  PORT=$(( PORT + 1 ))
  start_bg "srv-$name" 90 "${SRV[@]}" ucx_perftest -p $PORT "$@"
  wait_for_port ${NS_SERVER:+-n $NS_SERVER} -p "srv-$name" $PORT 20 ||
    { bg_log "srv-$name" | tail -20; die "$name: server did not start"; }
  local out rc=0
  out=$(run_t 90 "${CLI[@]}" ucx_perftest "$SERVER_IP" -p $PORT -s "$size" -n "$iters" "$@" \
        2>"$SOFTRNIC_TMP/cli-$name.err") || rc=$?
  (( rc == 0 )) || { echo "$out" | tail -5; tail -20 "$SOFTRNIC_TMP/cli-$name.err"; die "$name: client exit $rc"; }
  wait_bg "srv-$name" 20 || { bg_log "srv-$name" | tail -20; die "$name: server failed"; }
  local final; final=$(echo "$out" | grep '^Final:') || { echo "$out" | tail; die "$name: no result"; }
  log "$name: $final"
  STATS+=("$(bg_log_file "srv-$name")" "$SOFTRNIC_TMP/cli-$name.err")
}

# UCT over RC: RDMA WRITE (put), READ (get), SEND (am), atomics (add).
perf uct-rc-put_lat 8 2000 -d softrnic0:1 -x rc_verbs -t put_lat
perf uct-rc-put_bw 65536 300 -d softrnic0:1 -x rc_verbs -t put_bw -D zcopy
perf uct-rc-get 65536 300 -d softrnic0:1 -x rc_verbs -t get -D zcopy
perf uct-rc-am_lat 8 2000 -d softrnic0:1 -x rc_verbs -t am_lat
perf uct-rc-am_bw 4096 1000 -d softrnic0:1 -x rc_verbs -t am_bw -D bcopy
perf uct-rc-add_lat 8 2000 -d softrnic0:1 -x rc_verbs -t add_lat
FLOOR=$(( FLOOR + 65536 * 300 * 2 + 4096 * 1000 ))
# UCT over UD: sends only.
perf uct-ud-am_lat 8 2000 -d softrnic0:1 -x ud_verbs -t am_lat
perf uct-ud-am_bw 1000 1000 -d softrnic0:1 -x ud_verbs -t am_bw -D bcopy
FLOOR=$(( FLOOR + 1000 * 1000 ))
# UCP with UCX_TLS limited to softrnic's transports.
perf ucp-tag_lat 8 2000 -t tag_lat
perf ucp-tag_bw 65536 300 -t tag_bw
perf ucp-stream_bw 65536 300 -t stream_bw
FLOOR=$(( FLOOR + 65536 * 300 * 2 ))
UCX_TLS=ud_v,self perf ucp-ud-tag_lat 8 2000 -t tag_lat

total=$(softrnic_bytes "${STATS[@]}")
log "softrnic counters of all $(( ${#STATS[@]} )) processes: $(paths_used "${STATS[@]}")"
case $MODE in
  host)
    shm=$(( $(counter_sum shm_tx_bytes "${STATS[@]}") + $(counter_sum shm_direct_bytes "${STATS[@]}") ))
    (( shm > 0 )) || die "nothing went through softrnic's shared-memory path"
    # put_bw/get reach the target's memory through its memfd: UCX's memory
    # hooks (ucm) break libc's mremap(MREMAP_FIXED), so this also checks
    # that softrnic shares pages inside a UCX process (shm_memory.cc,
    # RemapFixed).
    direct=$(counter_sum shm_direct_bytes "${STATS[@]}")
    (( direct >= 65536 * 300 )) || die "put_bw/get moved only $direct bytes directly"
    # am_lat: rc_verbs receives through an SRQ, whose WQEs the peer fills
    # itself (shm_direct_srq.cc): 2,000 round trips are 4,000 SENDs.
    am=$(counter_sum shm_direct_send_ops "$(bg_log_file srv-uct-rc-am_lat)" \
         "$SOFTRNIC_TMP/cli-uct-rc-am_lat.err")
    (( am >= 4000 )) || die "am_lat placed $am SENDs directly, fewer than its 4,000"
    log "am_lat: $am SENDs placed directly" ;;
  netns)
    udp=$(counter_sum udp_tx_bytes "${STATS[@]}")
    (( udp >= FLOOR )) || die "UDP carried $udp bytes, less than the $FLOOR the tests moved"
    (( $(counter_sum shm_tx_packets "${STATS[@]}") == 0 )) || die "shared memory used between namespaces" ;;
esac
(( total >= FLOOR )) || die "softrnic carried $total bytes, less than the $FLOOR the tests moved"
log "PASS: UCX UCT (rc_verbs, ud_verbs) and UCP over softrnic ($MODE), $total bytes >= $FLOOR"
