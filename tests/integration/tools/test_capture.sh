#!/bin/bash
# `softrnic capture` (docs/capture.md): Debian's perftest, unmodified, over
# softrnic, captured on every path and judged from outside.
#
#   1. One host (shared memory): ib_write_bw, ib_send_lat, ib_read_lat and
#      ib_atomic_lat, server and client under one `softrnic capture`.
#      WRITE/READ/atomics take the direct path (no packet exists: they are
#      rendered as the packets they replace), SEND the rings.
#   2. Two network namespaces joined by a veth (UDP): the same four, and
#      tcpdump on the veth at the same time; the capture must hold exactly
#      the packets the wire carried (opcode, QP, PSN, length).
#   1b. An ib_write_bw pair already running, captured mid-stream with -p
#      and -a (the running processes are asked through a request file).
# Every capture: tshark decodes each frame as RoCE v2 with the opcodes,
# QPNs, PSNs and lengths perftest's run implies (check_capture.py), and
# scapy's ICRC check passes on every packet (icrc_judge.py). `--merge` of
# the kept per-process files gives the same capture as the run's own merge.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_cmd tshark tcpdump ib_write_bw ib_send_lat ib_read_lat ib_atomic_lat ss
softrnic_require_lib
softrnic_env
SOFTRNIC=$SOFTRNIC_BUILD_DIR/bin/softrnic
[[ -x $SOFTRNIC ]] || die "no $SOFTRNIC"
HERE=$SOFTRNIC_SOURCE_DIR/tests/integration
PORT=18743   # perftest's TCP exchange port, apart from other tests'
SIZE=4000    # four packets at MTU 1024: FIRST, MIDDLE, MIDDLE, LAST
ITERS=20

# The pair, as one command for `softrnic capture` to run: the server, then
# (once it listens) the client, each behind its namespace prefix.
cat >"$SOFTRNIC_TMP/pair.sh" <<'PAIR'
#!/bin/bash
# pair.sh SERVER_PREFIX CLIENT_PREFIX ADDR PORT LOGDIR TOOL ARGS...
srv=$1 cli=$2 addr=$3 port=$4 logs=$5 tool=$6; shift 6
$srv "$tool" -p "$port" "$@" >"$logs/srv.log" 2>&1 &
spid=$!
for _ in $(seq 200); do
  $srv ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.05
done
$cli "$tool" -p "$port" "$@" "$addr" >"$logs/cli.log" 2>&1
crc=$?
wait $spid
src=$?
exit $(( crc | src ))
PAIR
chmod +x "$SOFTRNIC_TMP/pair.sh"

# judge NAME KIND SIZE: the capture of the last run against perftest's log.
judge() {
  local pcap=$1 kind=$2 size=$3 q
  q=$(awk '/local address/ {print $6, $8} /remote address/ {print $6, $8}' "$SOFTRNIC_TMP/cli.log")
  [[ $(wc -w <<<"$q") == 4 ]] || { cat "$SOFTRNIC_TMP/cli.log"; die "no QPN/PSN in perftest's output"; }
  # shellcheck disable=SC2086
  "$SOFTRNIC_PYTHON" "$HERE/tools/check_capture.py" "$pcap" "$kind" "$size" "$ITERS" 1024 $q ||
    die "$pcap: the capture does not match the run"
  local n
  n=$(tshark -r "$pcap" 2>/dev/null | wc -l)
  set -- $q
  "$SOFTRNIC_PYTHON" "$HERE/icrc_judge.py" "$pcap" --min-packets "$n" --expect-dqpn "$1,$3" ||
    die "$pcap: the ICRC / tshark judge failed"
}

# run_captured NAME SRV_PREFIX CLI_PREFIX ADDR TOOL ARGS...
run_captured() {
  local name=$1 srv=$2 cli=$3 addr=$4; shift 4
  run_t 120 "$SOFTRNIC" capture -k -w "$SOFTRNIC_TMP/$name.pcapng" -- \
    "$SOFTRNIC_TMP/pair.sh" "$srv" "$cli" "$addr" $PORT "$SOFTRNIC_TMP" "$@" \
    2>"$SOFTRNIC_TMP/$name.capture.log" ||
    { cat "$SOFTRNIC_TMP/$name.capture.log" "$SOFTRNIC_TMP/cli.log" "$SOFTRNIC_TMP/srv.log"; die "$name: run failed"; }
  cat "$SOFTRNIC_TMP/$name.capture.log" >&2
  local kept
  kept=$(sed -nE 's/.*per-process files kept in (.*)/\1/p' "$SOFTRNIC_TMP/$name.capture.log")
  [[ -n $kept ]] && softrnic_on_exit "rm -rf '$kept'"
}

# ---- 1. one host: shared memory
export SOFTRNIC_TRANSPORT=auto
for t in write_bw send_lat read_lat atomic_lat; do
  size=$SIZE
  [[ $t == atomic_lat ]] && size=8
  [[ $t == send_lat ]] && size=1000   # ib_send_lat: at most one MTU inline-free message
  args=(-n $ITERS)
  [[ $t != atomic_lat ]] && args+=(-s $size)
  run_captured "shm_$t" env env 127.0.0.1 "ib_$t" "${args[@]}"
  judge "$SOFTRNIC_TMP/shm_$t.pcapng" $t $size
done
# The direct path was taken (its frames say so), and the rings were used.
direct=$(tshark -r "$SOFTRNIC_TMP/shm_write_bw.pcapng" -Y 'frame.comment contains "direct"' 2>/dev/null | wc -l)
(( direct > 0 )) || die "no direct WRITE in the shared-memory capture: the direct path was not exercised"
log "ok: one host, $direct rendered direct-WRITE frames in ib_write_bw's capture"

# --merge of the kept per-process files reproduces the run's own capture.
kept=$(sed -nE 's/.*per-process files kept in (.*)/\1/p' "$SOFTRNIC_TMP/shm_send_lat.capture.log")
[[ -d $kept ]] || die "no kept directory named"
"$SOFTRNIC" capture --merge -w "$SOFTRNIC_TMP/remerged.pcapng" "$kept"/softrnic-*.pcapng ||
  die "--merge failed"
cmp <(tshark -r "$SOFTRNIC_TMP/shm_send_lat.pcapng" -T fields -e frame.len -e infiniband.bth.psn 2>/dev/null) \
    <(tshark -r "$SOFTRNIC_TMP/remerged.pcapng" -T fields -e frame.len -e infiniband.bth.psn 2>/dev/null) ||
  die "--merge differs from the run's merge"
log "ok: --merge of the per-process files gives the same capture"

# ---- 1b. attaching to processes already running (-p, -a): an ib_write_bw
# pair running for a while, captured for a second mid-stream. Its stats
# (and so the capture requests) in a directory of this test: -a must not
# reach other tests' processes.
export SOFTRNIC_TRANSPORT=auto
export SOFTRNIC_STATS_DIR=$SOFTRNIC_TMP/stats
mkdir -p "$SOFTRNIC_STATS_DIR"
start_bg bw_srv 90 ib_write_bw -p $((PORT + 1)) -s $SIZE -D 60
# Not wait_for_port: its probe connection would be the one perftest accepts.
wait_until 10 bash -c "ss -ltn | grep -q ':$((PORT + 1)) '" || die "ib_write_bw server did not listen"
start_bg bw_cli 90 ib_write_bw -p $((PORT + 1)) -s $SIZE -D 60 127.0.0.1
# The perftest processes are the children of start_bg's `timeout`s (not
# pgrep: under the CI build's ASan preload it can hang).
srv_pid=$(children_of "$(bg_pid bw_srv)" | head -1)
cli_pid=$(children_of "$(bg_pid bw_cli)" | head -1)
[[ -n $srv_pid && -n $cli_pid ]] || die "perftest pids not found"
# Streaming (perftest's stdout is a file: its lines arrive only at exit, so
# the counters tell): direct WRITEs are being counted.
wait_until 15 bash -c "'$SOFTRNIC' stat -p $cli_pid -j | grep -q '\"shm_direct_write_ops\": [1-9]'" ||
  die "ib_write_bw is not streaming"
run_t 30 "$SOFTRNIC" capture -w "$SOFTRNIC_TMP/attach.pcapng" -s 1 -p "$srv_pid" -p "$cli_pid" -t 1 ||
  die "capture -p failed"
"$SOFTRNIC_PYTHON" "$HERE/icrc_judge.py" "$SOFTRNIC_TMP/attach.pcapng" --min-packets 100 \
  --expect-opcodes 6,7,8,17 || die "attached capture failed the judge"
# The processes stopped capturing when the tool did: no request is left.
ls "$SOFTRNIC_STATS_DIR"/softrnic-*.capture* 2>/dev/null && die "request left behind"
# -a finds them too; a pid that is no softrnic device is refused with 1.
run_t 30 "$SOFTRNIC" capture -w "$SOFTRNIC_TMP/all.pcapng" -s 1 -a -t 1 || die "capture -a failed"
"$SOFTRNIC_PYTHON" "$HERE/icrc_judge.py" "$SOFTRNIC_TMP/all.pcapng" --min-packets 100 ||
  die "capture -a failed the judge"
"$SOFTRNIC" capture -w "$SOFTRNIC_TMP/none.pcapng" -p $$ -t 1 2>"$SOFTRNIC_TMP/none.log"
rc=$?
[[ $rc == 1 ]] && grep -q "no running softrnic device with pid" "$SOFTRNIC_TMP/none.log" ||
  die "capture -p of a non-softrnic pid: exit $rc, $(cat "$SOFTRNIC_TMP/none.log")"
kill_bg bw_cli; kill_bg bw_srv
unset SOFTRNIC_STATS_DIR
log "ok: capture attached to running processes (-p, -a)"

# ---- 2. two namespaces: UDP, against the wire
A=srn_capt_a B=srn_capt_b IPA=10.241.0.1 IPB=10.241.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
for t in write_bw send_lat read_lat atomic_lat; do
  size=$SIZE
  [[ $t == atomic_lat ]] && size=8
  [[ $t == send_lat ]] && size=1000
  args=(-n $ITERS)
  [[ $t != atomic_lat ]] && args+=(-s $size)
  capture_start $NETNS_IFACE "$SOFTRNIC_TMP/wire_$t.pcap" $B udp port 4791 || die "tcpdump"
  run_captured "udp_$t" "ip netns exec $B" "ip netns exec $A" $IPB "ib_$t" "${args[@]}"
  capture_stop
  judge "$SOFTRNIC_TMP/udp_$t.pcapng" $t $size
  fields=(-T fields -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn -e udp.length)
  if ! cmp <(tshark -r "$SOFTRNIC_TMP/udp_$t.pcapng" "${fields[@]}" 2>/dev/null | sort) \
           <(tshark -r "$SOFTRNIC_TMP/wire_$t.pcap" "${fields[@]}" 2>/dev/null | sort); then
    diff <(tshark -r "$SOFTRNIC_TMP/udp_$t.pcapng" "${fields[@]}" 2>/dev/null | sort) \
         <(tshark -r "$SOFTRNIC_TMP/wire_$t.pcap" "${fields[@]}" 2>/dev/null | sort) | head -20
    die "udp $t: softrnic's capture and the wire's differ"
  fi
  log "ok: udp $t: $(tshark -r "$SOFTRNIC_TMP/wire_$t.pcap" 2>/dev/null | wc -l) packets, as on the wire"
done
log "PASS"
