# bench/issue17/one_host.sh - issue 17's rows that run on one host, sourced
# by bench/run_bench.sh (uses its pair, rec, fail, SRN_ENV, RUNS, QUICK, ...).
# Every process is bounded by `timeout`; a failed run is recorded with fail().
#
# Ids (results.tsv), rendered by bench/report_issue17.py:
#   i17_ucx_put_lat          UCX rc_verbs put_lat 8 B over softrnic (shm path)
#   i17_ev_{shm,udp}         ibv_rc_pingpong -e -s 64 round trip (unpinned, onecore)
#   i17_tcp_rtt              qperf tcp_lat x 2 (unpinned, onecore)
#   i17_qp_scale             bench/scale/qp_scale: qps, create_us, kib_per_qp (16+16
#                            slots), kib_per_qp_d1 (1+1), kib_beyond_queues
#   i17_mq_{shm,udp}_qN      ib_write_bw 64 KiB -q N (pinned)
#   i17_big_{shm,udp}_write  ib_write_bw 256 MiB; i17_big_udp_read ib_read_bw 256 MiB
#   i17_reg_{untouched,zeroed,filled}  reg_cost -s 1024: reg_ms, dereg_ms
#   i17_cm_rate              cmtime -c 1000 (bench/cm_rate.sh): connects_s, max_ms
#   i17_a2a                  bench/scale/shm_all_to_all -n 128 -m 2: processes_ok
#                            (128 when every message of every pair arrived intact),
#                            udp_packets, exchange_s

I17_BIN=$(cd "$LIB_DIR/.." && pwd)/bin

# UCX's own RC pattern over softrnic on one host (bench/findings.md, "Session
# 7"): UCT put_lat over rc_verbs under `softrnic run` (the shared-memory path
# softrnic picks by default on one host).
i17_ucx_put_lat() {
  have ucx_perftest || { fail i17_ucx_put_lat all 0 "ucx_perftest missing"; return; }
  [[ -x $I17_BIN/softrnic ]] || { fail i17_ucx_put_lat all 0 "$I17_BIN/softrnic missing"; return; }
  local n=$(( QUICK ? 5000 : 200000 )) place rep
  for place in unpinned pinned; do
    for (( rep=1; rep<=RUNS; rep++ )); do
      SRV=("${SRN_ENV[@]}" "$I17_BIN/softrnic" run -- ucx_perftest -p @PORT@ -d softrnic0:1 -x rc_verbs)
      CLI=("${SRV[@]}" -t put_lat -s 8 -n "$n" -w $(( n / 10 + 1 )) 127.0.0.1)
      pair "i17_ucx_put_lat_${place}_$rep" "$place" 60
      # Final: iters p50 avg overall bw_avg bw_overall rate_avg rate_overall
      local row; row=$(awk '$1 == "Final:" {print; exit}' "$CLOG")
      if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
        fail i17_ucx_put_lat "$place" "$rep" "softrnic run -- ucx_perftest -x rc_verbs -t put_lat rc=$PAIR_RC"
        continue
      fi
      local f; read -r -a f <<<"$row"
      rec i17_ucx_put_lat "UCX rc_verbs put_lat over softrnic (shm)" "$place" 8 lat us "${f[2]}" "$rep"
      rec i17_ucx_put_lat "UCX rc_verbs put_lat over softrnic (shm)" "$place" 8 lat_avg us "${f[4]}" "$rep"
    done
  done
  say "issue 17: UCX rc_verbs put_lat done"
}

# Event-driven completions: Debian's ibv_rc_pingpong -e (completion channel,
# blocking in ibv_get_cq_event) vs kernel TCP's blocking round trip (qperf
# tcp_lat, one-way x 2), unpinned and with both processes on one core.
i17_events() {
  local n=$(( QUICK ? 500 : 2000 )) place rep tr
  for place in unpinned onecore; do
    for (( rep=1; rep<=RUNS; rep++ )); do
      for tr in shm udp; do
        SRV=("${SRN_ENV[@]}" "SOFTRNIC_TRANSPORT=$tr" ibv_rc_pingpong -e -g 0 -s 64 -n "$n" -p @PORT@)
        CLI=("${SRV[@]}" 127.0.0.1)
        pair "i17_ev_${tr}_${place}_$rep" "$place" 60
        # "2000 iters in 0.16 seconds = 81.23 usec/iter": one iteration = one round trip
        local us; us=$(sed -n 's/.*iters in .* = \([0-9.]*\) usec\/iter.*/\1/p' "$CLOG" | head -1)
        if [[ $PAIR_RC -ne 0 || -z "$us" ]]; then
          fail "i17_ev_$tr" "$place" "$rep" "SOFTRNIC_TRANSPORT=$tr ibv_rc_pingpong -e -s 64 -n $n rc=$PAIR_RC"
          continue
        fi
        rec "i17_ev_$tr" "softrnic $tr ibv_rc_pingpong -e" "$place" 64 rtt us "$us" "$rep"
      done
      if have qperf; then
        next_port
        local qport=$PORT pre=()
        [[ $place == onecore ]] && pre=(taskset -c "$CPU_CLIENT")
        timeout 60 "${pre[@]}" qperf -lp "$qport" >"$LOGS/i17_qperf_srv_${place}_$rep.log" 2>&1 &
        local qpid=$!
        local f=$LOGS/i17_qperf_lat_${place}_$rep.log
        if wait_listen "$qport" "$qpid" 10 &&
           timeout 30 "${pre[@]}" qperf 127.0.0.1 -lp "$qport" -t $(( QUICK ? 1 : 2 )) -m 64 tcp_lat >"$f" 2>&1; then
          local l; l=$(qperf_val "$f" latency)
          rec i17_tcp_rtt "kernel TCP (qperf tcp_lat x 2)" "$place" 64 rtt us \
            "$(awk -v l="$l" 'BEGIN {if (l > 0) printf "%.3f", 2 * l}')" "$rep"
        else
          fail i17_tcp_rtt "$place" "$rep" "qperf tcp_lat -m 64"
        fi
        kill "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null
      else
        fail i17_tcp_rtt "$place" "$rep" "qperf missing"
      fi
    done
  done
  say "issue 17: event-driven round trips done"
}

# QPs per device, create cost, idle memory (bench/scale/qp_scale.cc): the
# last table row is the largest step reached.
i17_qp_scale() {
  [[ -x $I17_BIN/qp_scale ]] || { fail i17_qp_scale unpinned 0 "$I17_BIN/qp_scale missing"; return; }
  local n=$(( QUICK ? 4000 : 131072 )) rep
  for (( rep=1; rep<=RUNS; rep++ )); do
    local log=$LOGS/i17_qp_scale_$rep.log
    timeout -k 5 $(( QUICK ? 60 : 300 )) "${SRN_ENV[@]}" "$I17_BIN/qp_scale" -n "$n" -l $(( QUICK ? 200 : 2000 )) >"$log" 2>&1
    local rc=$? row
    # idle_qps create_med create_max KiB_per_qp write_rtt_med write_rtt_p99
    row=$(awk '$1 ~ /^[0-9]+$/ && NF == 6 {r = $0} END {print r}' "$log")
    if [[ $rc -ne 0 || -z "$row" ]]; then
      fail i17_qp_scale unpinned "$rep" "qp_scale -n $n rc=$rc: $(grep '^#' "$log" | tail -1)"
      continue
    fi
    local f; read -r -a f <<<"$row"
    local lab="qp_scale -n $n (idle RC QPs in INIT, 16+16 slots)"
    # + the connected measuring pair
    rec i17_qp_scale "$lab" unpinned 0 qps n "$(( f[0] + 2 ))" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 create_us us "${f[1]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 create_max_us us "${f[2]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 kib_per_qp KiB "${f[3]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 rtt_at_max us "${f[4]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 page_touch_us us \
      "$(sed -n 's/^# fresh page first touch: \([0-9.]*\) us.*/\1/p' "$log")" "$rep"
    grep -q 'creating QP .* failed' "$log" &&
      rec i17_qp_scale "$lab" unpinned 0 create_failed n 1 "$rep"
    # The target is the QP's memory beyond its queues: the same run with
    # 1+1 slots gives the cost of 15 send + 15 receive slots (the
    # difference), and so what a QP costs with none: m1 - (m16 - m1) / 15.
    local log1=$LOGS/i17_qp_scale_d1_$rep.log row1
    timeout -k 5 $(( QUICK ? 60 : 300 )) "${SRN_ENV[@]}" "$I17_BIN/qp_scale" -n "$n" -d 1 -l 10 >"$log1" 2>&1
    rc=$?
    row1=$(awk '$1 ~ /^[0-9]+$/ && NF == 6 {r = $0} END {print r}' "$log1")
    if [[ $rc -ne 0 || -z "$row1" ]]; then
      fail i17_qp_scale unpinned "$rep" "qp_scale -n $n -d 1 rc=$rc: $(grep '^#' "$log1" | tail -1)"
      continue
    fi
    local g; read -r -a g <<<"$row1"
    rec i17_qp_scale "$lab" unpinned 0 create_us_d1 us "${g[1]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 kib_per_qp_d1 KiB "${g[3]}" "$rep"
    rec i17_qp_scale "$lab" unpinned 0 kib_beyond_queues KiB \
      "$(awk -v m16="${f[3]}" -v m1="${g[3]}" 'BEGIN {printf "%.2f", m1 - (m16 - m1) / 15}')" "$rep"
  done
  say "issue 17: qp_scale done"
}

# i17_bw ID LABEL TRANSPORT PLACE SECS_TIMEOUT TOOL ARGS...: one perftest
# bandwidth pair over softrnic (SOFTRNIC_MTU=$UDP_MTU as the main rows), the
# GB/s recorded as metric bw.
i17_bw() {
  local id=$1 label=$2 tr=$3 place=$4 t=$5 size=$6 rep=$7; shift 7
  SRV=("${SRN_ENV[@]}" "SOFTRNIC_TRANSPORT=$tr" "SOFTRNIC_MTU=$UDP_MTU" "$@" -F -p @PORT@ -s "$size")
  CLI=("${SRV[@]}" 127.0.0.1)
  pair "${id}_${place}_$rep" "$place" "$t"
  local row; row=$(pt_row "$CLOG")
  if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
    fail "$id" "$place" "$rep" "rc=$PAIR_RC: SOFTRNIC_TRANSPORT=$tr $* -s $size$(grep -h -o -E 'Failed status [0-9]+|Completion with error[a-z ]*|Couldn.t [^.]*' "$CLOG" "$SLOG" | head -2 | paste -sd' ' | sed 's/^./: &/')"
    return 1
  fi
  local f; read -r -a f <<<"$row"
  rec "$id" "$label" "$place" "$size" bw GB/s "$(awk -v m="${f[3]}" 'BEGIN {printf "%.4f", m * 1048576 / 1e9}')" "$rep"
}

# Aggregate bandwidth over 1, 16, 256 and 1,000 QPs (perftest -q: the
# client's messages go round-robin over its QPs), pinned as the spot runs
# of bench/findings.md; -D (seconds) rather than -n, which perftest counts
# per QP.
i17_many_qps() {
  local d=$(( QUICK ? 1 : 2 )) rep tr q
  for (( rep=1; rep<=RUNS; rep++ )); do
    for tr in shm udp; do
      for q in 1 16 256 1000; do
        i17_bw "i17_mq_${tr}_q$q" "softrnic $tr ib_write_bw -q $q" "$tr" pinned 90 65536 "$rep" \
          ib_write_bw -q "$q" -D "$d"
      done
    done
  done
  say "issue 17: many-QP bandwidth done"
}

# 256 MiB messages: ib_write_bw on both paths against the 64 KiB rows of the
# main run (unpinned), and whether a 256 MiB ib_read_bw over UDP completes.
i17_big() {
  local n=$(( QUICK ? 5 : 10 )) rep tr   # perftest's least -n is 5
  for (( rep=1; rep<=RUNS; rep++ )); do
    for tr in shm udp; do
      i17_bw "i17_big_${tr}_write" "softrnic $tr ib_write_bw 256 MiB" "$tr" unpinned 120 268435456 "$rep" \
        ib_write_bw -n "$n"
    done
  done
  i17_bw i17_big_udp_read "softrnic udp ib_read_bw 256 MiB" udp unpinned 120 268435456 1 ib_read_bw -n "$n"
  say "issue 17: 256 MiB messages done"
}

# ibv_reg_mr / ibv_dereg_mr of 1 GiB (bench/scale/reg_cost.cc), one fresh
# mapping per run: untouched, zeroed and filled buffers.
i17_reg_cost() {
  [[ -x $I17_BIN/reg_cost ]] || { fail i17_reg_cost unpinned 0 "$I17_BIN/reg_cost missing"; return; }
  local rep
  for (( rep=1; rep<=RUNS; rep++ )); do
    local log=$LOGS/i17_reg_cost_$rep.log
    if ! timeout -k 5 120 "${SRN_ENV[@]}" "$I17_BIN/reg_cost" -s 1024 -r 1 >"$log" 2>&1; then
      fail i17_reg_cost unpinned "$rep" "reg_cost -s 1024 -r 1 rc=$?: $(tail -1 "$log")"
      continue
    fi
    # | filled | 2400.1 (2400.1) | 3700.2 (3700.2) |
    local kind reg dereg
    while IFS='|' read -r _ kind reg dereg _; do
      kind=$(echo $kind) reg=${reg%%(*} dereg=${dereg%%(*}
      case $kind in untouched|zeroed|filled) ;; *) continue ;; esac
      rec "i17_reg_$kind" "reg_cost 1 GiB, $kind buffer" unpinned 1073741824 reg_ms ms "$(echo $reg)" "$rep"
      rec "i17_reg_$kind" "reg_cost 1 GiB, $kind buffer" unpinned 1073741824 dereg_ms ms "$(echo $dereg)" "$rep"
    done <"$log"
  done
  say "issue 17: reg_cost done"
}

# rdma_cm connections per second: bench/cm_rate.sh (Debian's cmtime) with -c 1000.
i17_cm_rate() {
  have cmtime || { fail i17_cm_rate unpinned 0 "cmtime missing (rdmacm-utils)"; return; }
  local tsv=$WORK/i17_cm_rate.tsv
  timeout -k 5 $(( 120 + 60 * RUNS )) "$HERE/cm_rate.sh" --counts 1000 --runs "$RUNS" \
    --lib-dir "$LIB_DIR" --out "$tsv" >"$LOGS/i17_cm_rate.log" 2>&1 ||
    fail i17_cm_rate unpinned 0 "bench/cm_rate.sh rc=$?"
  local got=0 count run rate total max _
  while IFS=$'\t' read -r count run rate total max _; do
    [[ $count == 1000 ]] || continue
    rec i17_cm_rate "cmtime -c 1000" unpinned 1000 connects_s "1/s" "$rate" "$run"
    rec i17_cm_rate "cmtime -c 1000" unpinned 1000 max_ms ms "$max" "$run"
    got=$((got + 1))
  done < <(cat "$tsv" 2>/dev/null)
  (( got == RUNS )) || fail i17_cm_rate unpinned 0 "$got of $RUNS cmtime -c 1000 runs completed: $(grep -m1 failed "$LOGS/i17_cm_rate.log")"
  say "issue 17: cmtime -c 1000 done"
}

# 128 processes on one host, each connected to every other by an RC QP,
# exchange verified 4 KiB SENDs (bench/scale/shm_all_to_all.cc); the UDP
# packet count comes from softrnic's own counters of every process.
i17_all_to_all() {
  [[ -x $I17_BIN/shm_all_to_all ]] || { fail i17_a2a unpinned 0 "$I17_BIN/shm_all_to_all missing"; return; }
  local n=$(( QUICK ? 16 : 128 )) rep
  for (( rep=1; rep<=RUNS; rep++ )); do
    local log=$LOGS/i17_a2a_$rep.log
    timeout -k 5 360 "${SRN_ENV[@]}" "$I17_BIN/shm_all_to_all" -n "$n" -m 2 -t 300 >"$log" 2>&1
    local rc=$? line
    line=$(grep '^processes=' "$log")
    local -A kv=()
    local pair
    for pair in $line; do kv[${pair%%=*}]=${pair#*=}; done
    if [[ $rc != 0 || ${kv[result]:-} != ok ]]; then
      fail i17_a2a unpinned "$rep" "shm_all_to_all -n $n -m 2 rc=$rc: $(grep -m1 '^# process' "$log") ${line:-no summary}"
      continue
    fi
    local lab="shm_all_to_all -n $n -m 2 (4 KiB SENDs, every pair)"
    rec i17_a2a "$lab" unpinned 4096 processes_ok n "${kv[processes]}" "$rep"
    rec i17_a2a "$lab" unpinned 4096 udp_packets n "${kv[udp_packets]}" "$rep"
    rec i17_a2a "$lab" unpinned 4096 shm_packets n "${kv[shm_packets]}" "$rep"
    rec i17_a2a "$lab" unpinned 4096 exchange_s s "${kv[exchange_s]}" "$rep"
  done
  say "issue 17: shm_all_to_all done"
}

i17_one_host() {
  i17_ucx_put_lat
  i17_events
  i17_qp_scale
  i17_many_qps
  i17_big
  i17_reg_cost
  i17_cm_rate
  i17_all_to_all
}
