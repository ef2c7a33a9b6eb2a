# bench/issue17/netns.sh - issue 17's rows between two network namespaces,
# sourced by bench/run_bench.sh. The closest this machine has to two hosts:
# namespaces sbn17a and sbn17b joined by a veth pair left at its defaults
# (MTU 1500, GSO as the kernel sets it), 10.248.0.1 / 10.248.0.2. Created
# here and deleted on every exit path (i17_ns_down is called from
# run_bench.sh's EXIT trap as well as at the end of the block).
#
# softrnic runs with no SOFTRNIC_* setting at all: the transport is UDP
# (the peer is in another namespace), the active MTU comes from the veth's
# (1500 -> 1024). Server in sbn17b, client in sbn17a; perftest's default
# GID (index 0, the namespace's ::ffff:10.248.0.x) as
# tests/integration/verbs/test_pingpong_netns.sh.
#
# Ids: i17_ns_write_lat, i17_ns_write_bw (softrnic), i17_ns_ucx_tcp_lat (UCX
# tcp tag_lat 8 B), i17_ns_tcp_bw (qperf tcp_bw 64 KiB); placement "netns".

I17_NS_A=sbn17a I17_NS_B=sbn17b I17_IP_A=10.248.0.1 I17_IP_B=10.248.0.2
I17_NS_UP=0

i17_ns_down() {
  (( I17_NS_UP )) || return 0
  local ns pids
  for ns in "$I17_NS_A" "$I17_NS_B"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  I17_NS_UP=0
}

i17_ns_up() {
  [[ $(id -u) -eq 0 ]] || { say "issue 17: not root: namespace rows skipped"; return 1; }
  local ns
  # leftovers of a run that was killed with SIGKILL
  for ns in "$I17_NS_A" "$I17_NS_B"; do
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" && { I17_NS_UP=1; i17_ns_down; }
  done
  I17_NS_UP=1
  ip netns add "$I17_NS_A" && ip netns add "$I17_NS_B" &&
    ip link add sbn17va netns "$I17_NS_A" type veth peer name sbn17vb netns "$I17_NS_B" || return 1
  ip -n "$I17_NS_A" addr add "$I17_IP_A/24" dev sbn17va && ip -n "$I17_NS_B" addr add "$I17_IP_B/24" dev sbn17vb &&
    ip -n "$I17_NS_A" link set lo up && ip -n "$I17_NS_B" link set lo up &&
    ip -n "$I17_NS_A" link set sbn17va up && ip -n "$I17_NS_B" link set sbn17vb up || return 1
  local i
  for (( i=0; i<100; i++ )); do
    ip netns exec "$I17_NS_A" ping -c1 -W1 "$I17_IP_B" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

i17_netns() {
  if ! i17_ns_up; then
    fail i17_ns_write_lat netns 0 "could not set up namespaces $I17_NS_A/$I17_NS_B"
    i17_ns_down
    return
  fi
  meta i17_ns_mtu "$(ip -n "$I17_NS_A" -o link show sbn17va | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
  local exa=(ip netns exec "$I17_NS_A") exb=(ip netns exec "$I17_NS_B")
  # Enough round trips that the slow first ones do not decide the median
  # (trial runs here: softrnic's -n 1000 gave a 261 us median, -n 20000 9.9
  # us; UCX tcp's -n 2000 4 ms, -n 20000 9 us).
  local nl=$(( QUICK ? 5000 : 50000 )) nb=$(( QUICK ? 1000 : 20000 )) rep row f
  LISTEN_NS=$I17_NS_B
  for (( rep=1; rep<=RUNS; rep++ )); do
    SRV=("${exb[@]}" "${SRN_ENV[@]}" ib_write_lat -F -p @PORT@ -s 8 -n "$nl")
    CLI=("${exa[@]}" "${SRN_ENV[@]}" ib_write_lat -F -p @PORT@ -s 8 -n "$nl" "$I17_IP_B")
    pair "i17_ns_write_lat_$rep" unpinned 60
    row=$(pt_row "$CLOG")
    if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
      fail i17_ns_write_lat netns "$rep" "rc=$PAIR_RC: ib_write_lat -s 8 -n $nl across the veth"
    else
      read -r -a f <<<"$row"
      rec i17_ns_write_lat "softrnic ib_write_lat (netns, no settings)" netns 8 lat us "${f[4]}" "$rep"
      rec i17_ns_write_lat "softrnic ib_write_lat (netns, no settings)" netns 8 lat_p999 us "${f[8]}" "$rep"
    fi
    SRV=("${exb[@]}" "${SRN_ENV[@]}" ib_write_bw -F -p @PORT@ -s 65536 -n "$nb")
    CLI=("${exa[@]}" "${SRN_ENV[@]}" ib_write_bw -F -p @PORT@ -s 65536 -n "$nb" "$I17_IP_B")
    pair "i17_ns_write_bw_$rep" unpinned 90
    row=$(pt_row "$CLOG")
    if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
      fail i17_ns_write_bw netns "$rep" "rc=$PAIR_RC: ib_write_bw -s 65536 -n $nb across the veth"
    else
      read -r -a f <<<"$row"
      rec i17_ns_write_bw "softrnic ib_write_bw (netns, no settings)" netns 65536 bw GB/s \
        "$(awk -v m="${f[3]}" 'BEGIN {printf "%.4f", m * 1048576 / 1e9}')" "$rep"
    fi
    if have ucx_perftest; then
      local un=$(( QUICK ? 5000 : 50000 ))
      SRV=("${exb[@]}" env UCX_TLS=tcp UCX_NET_DEVICES=sbn17vb ucx_perftest -p @PORT@)
      CLI=("${exa[@]}" env UCX_TLS=tcp UCX_NET_DEVICES=sbn17va ucx_perftest "$I17_IP_B" -p @PORT@
           -t tag_lat -s 8 -n "$un" -w $(( un / 10 + 1 )))
      pair "i17_ns_ucx_tcp_lat_$rep" unpinned 60
      row=$(awk '$1 == "Final:" {print; exit}' "$CLOG")
      if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
        fail i17_ns_ucx_tcp_lat netns "$rep" "rc=$PAIR_RC: UCX_TLS=tcp ucx_perftest -t tag_lat across the veth"
      else
        read -r -a f <<<"$row"
        # p50 (of UCX's last 2048 samples) as softrnic's median; overall average beside it
        rec i17_ns_ucx_tcp_lat "UCX tcp tag_lat (netns)" netns 8 lat us "${f[2]}" "$rep"
        rec i17_ns_ucx_tcp_lat "UCX tcp tag_lat (netns)" netns 8 lat_avg us "${f[4]}" "$rep"
      fi
    else
      fail i17_ns_ucx_tcp_lat netns "$rep" "ucx_perftest missing"
    fi
    if have qperf; then
      next_port
      local qport=$PORT
      timeout 60 "${exb[@]}" qperf -lp "$qport" >"$LOGS/i17_ns_qperf_srv_$rep.log" 2>&1 &
      local qpid=$!
      local log=$LOGS/i17_ns_qperf_bw_$rep.log
      if wait_listen "$qport" "$qpid" 10 &&
         timeout 30 "${exa[@]}" qperf "$I17_IP_B" -lp "$qport" -t $(( QUICK ? 1 : 2 )) -m 64K tcp_bw >"$log" 2>&1; then
        rec i17_ns_tcp_bw "kernel TCP (qperf tcp_bw, netns)" netns 65536 bw GB/s "$(qperf_val "$log" bw)" "$rep"
      else
        fail i17_ns_tcp_bw netns "$rep" "qperf tcp_bw across the veth"
      fi
      kill "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null
    else
      fail i17_ns_tcp_bw netns "$rep" "qperf missing"
    fi
  done
  LISTEN_NS=""
  i17_ns_down
  say "issue 17: namespace rows done"
}
