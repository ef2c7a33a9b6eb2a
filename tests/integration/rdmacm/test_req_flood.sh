#!/bin/bash
# A flood of forged connection requests (security review M3): 5,000 REQs with
# distinct communication IDs from 200 spoofed addresses against a synchronous
# listener (rdma_create_ep + rdma_listen(backlog 16) + rdma_get_request, the
# kind that used to get one eventfd per request) that takes nothing during
# the flood. Checks, in the listener's /proc:
#   - during the flood (sampled every 50 ms) its open fds grow by at most the backlog (the kernel's
#     ucma bounds unclaimed CONNECT_REQUESTs by the backlog; before, every
#     REQ kept an id, an event and an eventfd);
#   - once the requests are older than a client's REQ retry window, every one
#     is reclaimed: fds back to where they were;
#   - a legitimate client connecting afterwards is served (ESTABLISHED, one
#     SEND echoed).
# Prints fds and VmRSS before, during and after. Needs root, else skipped.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
[[ -e "$SOFTRNIC_LIB_DIR/librdmacm.so.1" ]] || skip "librdmacm.so.1 not built in $SOFTRNIC_LIB_DIR"
VICTIM=${1:?usage: test_req_flood.sh PATH/TO/cm_victim}
FORGE="$SOFTRNIC_PYTHON $(dirname "$0")/forge_cm.py"
softrnic_env
export SOFTRNIC_TRANSPORT=udp
BACKLOG=16 COUNT=5000 PORT=21830

A=srrf_a B=srrf_b IPA=10.237.0.1 IPB=10.237.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
GO=$SOFTRNIC_TMP/go
# The listener's CM: 100 ms x 5 REQ retry window, so unclaimed requests are
# reclaimed after 1 s (2 windows) instead of 10 s.
start_bg listener 90 run_in_ns $A env SOFTRNIC_CM_TIMEOUT_MS=100 SOFTRNIC_CM_RETRIES=4 SOFTRNIC_CM_DEBUG=1 \
  "$VICTIM" listen $PORT "$GO" $BACKLOG
wait_until 10 grep -q READY "$(bg_log_file listener)" || die "listener did not start"
pid=$(children_of "$(bg_pid listener)" | head -1)
[[ -n "$pid" ]] || die "listener pid not found"
# `ip netns exec` execs the program: the child of `timeout` is the listener.
fds() { ls /proc/$pid/fd 2>/dev/null | wc -l; }
rss() { awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null; }
fd0=$(fds) rss0=$(rss)
log "listener pid $pid: $fd0 fds, VmRSS ${rss0} kB"

ip netns exec $B env -u LD_PRELOAD $FORGE --src 10.237.0.20 --spoof-range 200 --dst $IPA --attr REQ \
  --port $PORT --count $COUNT --rate 5000 >"$SOFTRNIC_TMP/forge.log" 2>&1 &
forger=$!
# The most fds the listener had open at any time during the flood.
fd1=$fd0
while kill -0 $forger 2>/dev/null; do
  n=$(fds); (( n > fd1 )) && fd1=$n
  sleep 0.05
done
wait $forger || die "forge_cm.py: $(cat "$SOFTRNIC_TMP/forge.log")"
rss1=$(rss)
got=$(grep -c 'recv REQ' "$(bg_log_file listener)")
dropped=$(grep -c 'dropped: backlog' "$(bg_log_file listener)")
log "during $COUNT forged REQs ($got reached the CM, $dropped dropped for the backlog): at most $fd1 fds; after: VmRSS ${rss1} kB"
fail=0
if (( fd1 - fd0 > BACKLOG + 4 )); then
  fail=$((fail + 1)); log "FAIL: fds grew by $((fd1 - fd0)), more than the backlog ($BACKLOG)"
fi
sleep 3
fd2=$(fds) rss2=$(rss)
reclaimed=$(grep -c 'reclaimed' "$(bg_log_file listener)")
log "3 s later: $fd2 fds, VmRSS ${rss2} kB, $reclaimed request(s) reclaimed"
if (( fd2 > fd0 + 1 )); then
  fail=$((fail + 1)); log "FAIL: unclaimed requests not reclaimed ($fd2 fds, $fd0 before the flood)"
fi
touch "$GO"
if run_in_ns $B "$VICTIM" legit $IPA $PORT >"$SOFTRNIC_TMP/legit.log" 2>&1 && grep -q '^OK' "$SOFTRNIC_TMP/legit.log"; then
  log "PASS: the legitimate client after the flood was served"
else
  fail=$((fail + 1)); log "FAIL: legitimate client: $(grep -m1 FAIL "$SOFTRNIC_TMP/legit.log")"
fi
wait_bg listener 20 || { fail=$((fail + 1)); log "FAIL: listener: $(grep -m1 FAIL "$(bg_log_file listener)")"; }
grep -m1 'requests taken' "$(bg_log_file listener)" >&2 || true
(( fail == 0 )) || die "$fail check(s) failed"
log "PASS: REQ flood bounded by the backlog, reclaimed, legitimate client served"
