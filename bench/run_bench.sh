#!/usr/bin/env bash
# run_bench.sh - softrnic vs its peers, on this machine, in one run.
#
#   bench/run_bench.sh                 # full run: 5 repetitions, ~10-15 min,
#                                      # writes docs/benchmarks.md + docs/img/*.png
#   bench/run_bench.sh --quick         # 1 repetition, tiny iteration counts,
#                                      # ~1-2 min, writes to a temp dir (never docs/)
#   bench/run_bench.sh --runs 3
#
# What it does:
#   1. installs missing tools from Debian packages (root only; otherwise the
#      peers that are missing are skipped): perftest, qperf, ucx-utils,
#      libfabric-bin, python3-matplotlib, iperf3 (optional)
#   2. builds softrnic (RelWithDebInfo, <repo>/build-bench) unless --lib-dir
#      names an existing build's lib/ directory
#   3. runs Debian's unmodified perftest on softrnic's libibverbs.so.1
#      (LD_LIBRARY_PATH), server and client on this host, both unpinned (as
#      users run it) and pinned (client on cpu $CPU_CLIENT, server on cpu
#      $CPU_SERVER): ib_write_lat 8B, ib_send_lat 8B, ib_read_lat 8B,
#      ib_atomic_lat 8B, ib_write_bw 64KiB,
#      ib_write_bw 64B (message rate), ib_read_bw 64KiB, ib_send_bw 64KiB
#      over UDP (SOFTRNIC_TRANSPORT=udp), and ib_write_lat, ib_send_lat,
#      ib_write_bw, ib_read_bw over shared memory (SOFTRNIC_TRANSPORT=shm)
#   4. runs the peers the same way: kernel TCP (qperf tcp_lat / tcp_bw, iperf3),
#      UCX (ucx_perftest tag_lat 8B / tag_bw 64KiB over UCX_TLS=tcp and
#      UCX_TLS=posix,self), libfabric (fi_pingpong over tcp/msg, udp/dgram,
#      udp;ofi_rxd/rdm and shm/rdm; fabtests is not packaged in Debian 12)
#   3b. the kernel UDP floor (bench/floor/udp_floor.cc): a plain UDP
#      ping-pong and a UDP GSO/GRO stream with softrnic's datagrams, without
#      and with the per-packet work softrnic must do (ICRC, placement)
#   5. size sweeps (ib_write_lat -a, ib_write_bw -a, UCX tcp/shm) for plots
#   6. bench/report.py: medians with min/max, CPU per GB, ratios vs peers and
#      vs the project's targets, plots -> markdown
#
# Options:
#   --quick            1 rep, tiny iteration counts, output to a temp dir
#   --runs N           repetitions per figure (default 5; --quick: 1)
#   --out-dir DIR      where the markdown/plots go (default: docs/ of the
#                      repo; --quick: $TMPDIR/softrnic-bench-quick)
#   --lib-dir DIR      use softrnic libraries from DIR (skip the build)
#   --build-dir DIR    build directory (default <repo>/build-bench)
#   --no-install       never call apt-get
#   --no-peers         softrnic only
#   --no-sweep         skip the size sweeps and plots
#   --no-issue17       skip issue 17's extra rows (bench/issue17/*.sh: UCX
#                      rc_verbs over softrnic, two network namespaces,
#                      event-driven round trips, QP scale, -q 1..1000,
#                      256 MiB messages, ibv_reg_mr of 1 GiB, cmtime -c 1000)
# Environment: CPU_CLIENT (0), CPU_SERVER (1), BENCH_TARGET_SEC (seconds one
# measured run should last, full mode, default 2), BENCH_KEEP_LOGS=1,
# UDP_MTU (SOFTRNIC_MTU of the UDP runs, default 4096: they cross loopback,
# whose 65536-byte MTU carries 4096-byte packets, as the TCP peers' segments
# are as large; softrnic's own default, 1024, is for 1500-byte Ethernet).
#
# Every process is bounded by `timeout`; a failed or timed-out run is recorded
# (and shown in the report) but does not stop the benchmark.
set -uo pipefail
# Job control: every background job is a process group of its own (pair()).
set -m

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
QUICK=0 RUNS="" OUT_DIR="" LIB_DIR="" BUILD_DIR="$REPO/build-bench"
INSTALL=1 PEERS=1 SWEEP=1 ISSUE17=1
ARGS_ORIG=("$@")
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --runs) RUNS=$2; shift 2 ;;
    --out-dir) OUT_DIR=$2; shift 2 ;;
    --lib-dir) LIB_DIR=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --no-peers) PEERS=0; shift ;;
    --no-sweep) SWEEP=0; shift ;;
    --no-issue17) ISSUE17=0; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$RUNS" ]]; then (( QUICK )) && RUNS=1 || RUNS=5; fi
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "--runs needs a positive integer" >&2; exit 2; }
if [[ -z "$OUT_DIR" ]]; then
  if (( QUICK )); then OUT_DIR="${TMPDIR:-/tmp}/softrnic-bench-quick"; else OUT_DIR="$REPO/docs"; fi
fi
if (( QUICK )); then MD_NAME=benchmarks-quick.md; else MD_NAME=benchmarks.md; fi
CPU_CLIENT=${CPU_CLIENT:-0}
CPU_SERVER=${CPU_SERVER:-1}
TARGET_SEC=${BENCH_TARGET_SEC:-2}
PY=/usr/bin/python3; [[ -x $PY ]] || PY=python3
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac

T0=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/softrnic-bench.XXXXXX")
LOGS=$WORK/logs; mkdir -p "$LOGS"
RES=$WORK/results.tsv; : >"$RES"
FAILS=$WORK/failures.tsv; : >"$FAILS"
META=$WORK/meta.txt; : >"$META"
BG_PIDS=()
cleanup() {
  local p
  declare -F i17_ns_down >/dev/null && i17_ns_down
  for p in "${BG_PIDS[@]}"; do
    [[ -n "$p" ]] && kill "$p" 2>/dev/null
  done
  if [[ "${BENCH_KEEP_LOGS:-0}" == 1 ]]; then
    echo "run_bench: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '[%s bench] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }
have() { command -v "$1" >/dev/null 2>&1; }

# ------------------------------------------------------------------ 1. tools
install_pkgs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  (( ${#missing[@]} )) || return 0
  if (( ! INSTALL )) || [[ $(id -u) -ne 0 ]] || ! have apt-get; then
    say "not installing (${missing[*]}): not root / --no-install; those parts are skipped"
    return 0
  fi
  say "installing: ${missing[*]}"
  apt-get update -qq >/dev/null 2>&1 || true
  local q
  for q in "${missing[@]}"; do   # one by one: an unavailable one must not block the rest
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$q" \
      >/dev/null 2>&1 || say "could not install $q (skipped)"
  done
}
if have dpkg-query; then
  install_pkgs perftest qperf ucx-utils libfabric-bin python3-matplotlib iperf3 procps iproute2
fi
have ib_write_lat || { echo "run_bench: perftest (ib_write_lat) is required" >&2; exit 1; }
have ss || { echo "run_bench: ss (iproute2) is required" >&2; exit 1; }

# ------------------------------------------------------------------ 2. build
if [[ -z "$LIB_DIR" ]]; then
  if ! have cmake || ! have g++; then
    if [[ -x "$REPO/scripts/install-deps.sh" && $(id -u) -eq 0 && $INSTALL -eq 1 ]]; then
      "$REPO/scripts/install-deps.sh" || true
    fi
  fi
  say "building softrnic (RelWithDebInfo) in $BUILD_DIR"
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$WORK/cmake.log" 2>&1 ||
      { tail -30 "$WORK/cmake.log" >&2; echo "run_bench: cmake configure failed" >&2; exit 1; }
  fi
  JOBS=$(nproc 2>/dev/null || echo 2)
  cmake --build "$BUILD_DIR" -j"$JOBS" >>"$WORK/cmake.log" 2>&1 ||
    { tail -30 "$WORK/cmake.log" >&2; echo "run_bench: build failed" >&2; exit 1; }
  LIB_DIR=$BUILD_DIR/lib
fi
LIB_DIR=$(cd "$LIB_DIR" 2>/dev/null && pwd) || { echo "run_bench: no lib dir" >&2; exit 1; }
[[ -e "$LIB_DIR/libibverbs.so.1" ]] || { echo "run_bench: $LIB_DIR/libibverbs.so.1 missing" >&2; exit 1; }
BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$LIB_DIR/../CMakeCache.txt" 2>/dev/null)
# Environment for processes that must load softrnic. A sanitizer build needs
# its runtime preloaded (Debian's tools are not instrumented).
SRN_ENV=(env "LD_LIBRARY_PATH=$LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
SAN_RT=$(ldd "$LIB_DIR/libibverbs.so.1" 2>/dev/null | awk '/lib(asan|tsan)\.so/ {print $3; exit}')
if [[ -n "$SAN_RT" ]]; then
  SRN_ENV+=("LD_PRELOAD=$SAN_RT" "ASAN_OPTIONS=detect_leaks=0")
  say "WARNING: $LIB_DIR is a sanitizer build: numbers are not representative"
fi

# ------------------------------------------------------------------ machine
UDP_MTU=${UDP_MTU:-4096}
meta softrnic_mtu "$UDP_MTU (SOFTRNIC_MTU of the softrnic runs)"
meta date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta kernel "$(uname -srm)"
meta cpu_model "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
meta cpus "$(nproc)"
meta lscpu "$(lscpu 2>/dev/null | grep -E '^(Architecture|CPU\(s\)|Thread|Core|Socket|Model name|CPU MHz|L1d|L2|L3|Hypervisor|NUMA node\(s\))' | tr -s ' ' | paste -sd';')"
meta mem "$(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}')"
meta loadavg_before "$(cut -d' ' -f1-3 /proc/loadavg)"
meta os "$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")"
meta commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || echo ' (+ uncommitted changes in src/)')"
meta build "$LIB_DIR (${BUILD_TYPE:-unknown build type})${SAN_RT:+ SANITIZER BUILD}"
meta perftest "$(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
meta qperf "$(dpkg-query -W -f='${Version}' qperf 2>/dev/null)"
meta ucx "$(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null)"
meta libfabric "$(dpkg-query -W -f='${Version}' libfabric-bin 2>/dev/null)"
meta iperf3 "$(dpkg-query -W -f='${Version}' iperf3 2>/dev/null)"
meta mode "$( (( QUICK )) && echo quick || echo full)"
meta runs "$RUNS"
meta cpus_pinned "client cpu$CPU_CLIENT, server cpu$CPU_SERVER"
if (( QUICK )); then meta command "bench/run_bench.sh ${ARGS_ORIG[*]}"
else meta command "bench/run_bench.sh${ARGS_ORIG[*]:+ ${ARGS_ORIG[*]}}"; fi

# ------------------------------------------------------------------ helpers
PORT=$(( 23000 + ($$ % 10000) ))
next_port() {
  PORT=$((PORT + 1))
  while ss -Hltun "sport = :$PORT" 2>/dev/null | grep -q .; do PORT=$((PORT + 1)); done
}
LISTEN_NS=""  # network namespace wait_listen looks into (issue17/netns.sh)
wait_listen() {  # PORT PID [secs]: until a TCP listener on PORT, or PID died
  local i ns=()
  [[ -n $LISTEN_NS ]] && ns=(ip netns exec "$LISTEN_NS")
  for (( i=0; i<${3:-10}*20; i++ )); do
    "${ns[@]}" ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# cpu_run CPUFILE CMD...: run CMD, then write the CPU seconds (user+sys) of
# all its descendants (getrusage children, as bash `times` reports) to CPUFILE.
cpu_run() {
  local f=$1; shift
  "$@"; local rc=$?
  # no pipe / $(): `times` must run in this very process to see its children
  times >"$f.raw"
  awk 'NR==2 {
      n = split($0, a, " "); s = 0
      for (i = 1; i <= n; i++) { split(a[i], b, "m"); sub("s", "", b[2]); s += b[1] * 60 + b[2] }
      print s }' "$f.raw" >"$f"
  return $rc
}
pin() {  # pin client|server|none -> taskset prefix
  case "$1" in
    client) echo "taskset -c $CPU_CLIENT" ;;
    server) echo "taskset -c $CPU_SERVER" ;;
  esac
}
rec() {  # rec ID LABEL PLACE SIZE METRIC UNIT VALUE REP
  [[ -n "$7" && "$7" != nan && "$7" != -nan ]] || return 0
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RES"
}
fail() {  # fail ID PLACE REP WHAT
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$FAILS"
  say "FAILED: $1 [$2] rep $3: $4"
}

# pair TAG PLACE TIMEOUT: run server SRV=(...) and client CLI=(...) (arrays,
# set by the caller) on a fresh PORT (the caller puts $PORT into the
# commands via the literal word @PORT@). Sets PAIR_RC, PAIR_CPU (s, both
# processes), CLOG, SLOG.
pair() {
  local tag=$1 place=$2 t=$3
  next_port
  local srv=("${SRV[@]//@PORT@/$PORT}") cli=("${CLI[@]//@PORT@/$PORT}")
  local ps="" pc=""
  if [[ $place == pinned ]]; then ps=$(pin server); pc=$(pin client); fi
  # both processes on one core (issue 17's event-driven rows)
  if [[ $place == onecore ]]; then ps=$(pin client); pc=$ps; fi
  SLOG=$LOGS/$tag.srv.log CLOG=$LOGS/$tag.cli.log
  # Each side runs as its own process group (job control, set -m above) with
  # `timeout --foreground`, which stays in that group: killing the group
  # takes the tool and anything it started, so nothing of this pair outlives
  # it and competes with the next measurement.
  # shellcheck disable=SC2086
  ( cpu_run "$LOGS/$tag.srv.cpu" timeout --foreground -k 3 $((t + 10)) $ps "${srv[@]}" ) >"$SLOG" 2>&1 &
  local spid=$!
  if ! wait_listen "$PORT" "$spid" 15; then
    sleep 0.2
  fi
  local crc=0
  # shellcheck disable=SC2086
  ( cpu_run "$LOGS/$tag.cli.cpu" timeout --foreground -k 3 "$t" $pc "${cli[@]}" ) >"$CLOG" 2>&1 &
  local cpid=$!
  wait "$cpid" || crc=$?
  kill -KILL -- "-$cpid" 2>/dev/null
  # the client failed: do not wait for the server's own timeout
  (( crc != 0 )) && kill -TERM -- "-$spid" 2>/dev/null
  local src=0
  wait "$spid" || src=$?
  kill -KILL -- "-$spid" 2>/dev/null
  PAIR_RC=$(( crc != 0 ? crc : src ))
  PAIR_CPU=$(awk '{s += $1} END {printf "%.4f", s}' "$LOGS/$tag.srv.cpu" "$LOGS/$tag.cli.cpu" 2>/dev/null)
  return 0
}

# perftest result row (after the "#bytes" header), fields split by blanks.
pt_row() { awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ && NF >= 4 {print; exit}' "$1"; }

# ------------------------------------------------------------------ 3. softrnic perftest
# Iterations: --quick uses tiny fixed counts; the full run first probes each
# test (not recorded) and sizes -n so one run lasts about TARGET_SEC.
LAT_PROBE=100 BW_PROBE=200
if (( QUICK )); then LAT_N=50 BW_N=100 RATE_N=2000; fi

# sr_test ID TOOL SIZE KIND(lat|bw) EXTRA...  (path: $SR_TRANSPORT, udp or shm)
SR_TRANSPORT=udp
sr_test() {
  local id=$1 tool=$2 size=$3 kind=$4; shift 4
  local SRN_ENV=("${SRN_ENV[@]}" "SOFTRNIC_TRANSPORT=$SR_TRANSPORT" "SOFTRNIC_MTU=$UDP_MTU")
  local n
  if (( QUICK )); then
    if [[ $kind == lat ]]; then n=$LAT_N; elif (( size < 1024 )); then n=$RATE_N; else n=$BW_N; fi
  else
    # probe (unpinned) to size the measured runs
    local pn=$LAT_PROBE; [[ $kind == bw ]] && pn=$BW_PROBE
    [[ $kind == bw ]] && (( size < 1024 )) && pn=5000
    SRV=("${SRN_ENV[@]}" "$tool" -F -p @PORT@ -s "$size" -n "$pn" "$@")
    CLI=("${SRV[@]}" 127.0.0.1)
    pair "${id}_probe" unpinned 120
    local row; row=$(pt_row "$CLOG")
    if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
      fail "$id" probe 0 "rc=$PAIR_RC: ${SRV[*]:2} (server) / 127.0.0.1 (client)"
      n=$pn
    elif [[ $kind == lat ]]; then
      # one iteration = one round trip = 2 x the one-way latency perftest
      # prints. Sized from the probe's median (t_typical), not its average:
      # one preempted trip among the probe's 100 can raise the average
      # tenfold (a busy run got -n 315 for shm ib_write_lat that way). At
      # least 10000 trips, so that the p99.9 recorded rests on 10 of them.
      n=$(awk -v r="$row" -v T="$TARGET_SEC" 'BEGIN {split(r, f, " "); l = f[5]; if (l <= 0) l = 1
            n = int(T * 1e6 / (2 * l)); if (n < 10000) n = 10000; if (n > 200000) n = 200000; print n}')
    else
      n=$(awk -v r="$row" -v T="$TARGET_SEC" -v s="$size" 'BEGIN {split(r, f, " "); bw = f[4] * 1048576
            if (bw <= 0) bw = 1e6; n = int(T * bw / s); if (n < 200) n = 200; if (n > 5000000) n = 5000000; print n}')
    fi
  fi
  local place rep
  for place in unpinned pinned; do
    for (( rep=1; rep<=RUNS; rep++ )); do
      SRV=("${SRN_ENV[@]}" "$tool" -F -p @PORT@ -s "$size" -n "$n" "$@")
      CLI=("${SRV[@]}" 127.0.0.1)
      local t=$(( QUICK ? 60 : 120 + TARGET_SEC * 10 ))
      pair "${id}_${place}_$rep" "$place" "$t"
      local row; row=$(pt_row "$CLOG")
      if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
        fail "$id" "$place" "$rep" "rc=$PAIR_RC$( ((PAIR_RC == 124)) && echo ' (timeout)'): $tool -F -s $size -n $n $* (server: -p PORT; client: -p PORT 127.0.0.1)"
        continue
      fi
      local f; read -r -a f <<<"$row"
      local label="softrnic $SR_TRANSPORT $tool"
      if [[ $kind == lat ]]; then
        # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
        rec "$id" "$label" "$place" "$size" lat us "${f[4]}" "$rep"
        rec "$id" "$label" "$place" "$size" lat_avg us "${f[5]}" "$rep"
        rec "$id" "$label" "$place" "$size" lat_p99 us "${f[7]}" "$rep"
        rec "$id" "$label" "$place" "$size" lat_p999 us "${f[8]}" "$rep"
      else
        # bytes iters bw_peak bw_avg(MiB/s) msg_rate(Mpps)
        local bytes; bytes=$(awk -v a="${f[1]}" -v s="${f[0]}" 'BEGIN {printf "%.0f", a * s}')
        rec "$id" "$label" "$place" "$size" bw GB/s "$(awk -v m="${f[3]}" 'BEGIN {printf "%.4f", m * 1048576 / 1e9}')" "$rep"
        rec "$id" "$label" "$place" "$size" rate Mmsg/s "${f[4]}" "$rep"
        rec "$id" "$label" "$place" "$size" cpu_per_gb "ms/GB" \
          "$(awk -v c="$PAIR_CPU" -v b="$bytes" 'BEGIN {if (b > 0) printf "%.1f", c * 1000 / (b / 1e9)}')" "$rep"
      fi
      rec "$id" "$label" "$place" "$size" iters n "$n" "$rep"
    done
  done
  say "softrnic $id done (n=$n)"
}

say "softrnic perftest: runs=$RUNS, lib=$LIB_DIR"
sr_test sr_write_lat ib_write_lat 8 lat
sr_test sr_send_lat ib_send_lat 8 lat
# One-sided round trips whose target application sleeps (softrnic's
# progress thread must be woken per request): not targets, shown for users.
sr_test sr_read_lat ib_read_lat 8 lat
sr_test sr_atomic_lat ib_atomic_lat 8 lat
sr_test sr_write_bw ib_write_bw 65536 bw
sr_test sr_write_rate ib_write_bw 64 bw
sr_test sr_read_bw ib_read_bw 65536 bw
sr_test sr_send_bw ib_send_bw 65536 bw
# The same-host shared-memory path (docs/shm.md), forced.
SR_TRANSPORT=shm
sr_test sr_shm_write_lat ib_write_lat 8 lat
sr_test sr_shm_send_lat ib_send_lat 8 lat
sr_test sr_shm_write_bw ib_write_bw 65536 bw
sr_test sr_shm_read_bw ib_read_bw 65536 bw
SR_TRANSPORT=udp

# ------------------------------------------------------------------ 3b. floors
# What the kernel's UDP path alone costs here, with softrnic's datagrams
# (bench/floor/udp_floor.cc): the floor softrnic's UDP figures stand on,
# measured in the same run. Ping-pong: one 40-byte datagram per trip
# (single) and the request + ACK GSO datagram softrnic's ib_write_lat sends
# (req-ack). Stream: 64 KiB messages in 4096-byte packets with GSO/GRO,
# with no per-packet work (copy), a CRC-32 at both ends (crc), and the
# receiver also copying the payload out (crc-place), as softrnic must.
FLOOR_BIN=$(cd "$LIB_DIR/.." && pwd)/bin/udp_floor
SHM_FLOOR_BIN=$(cd "$LIB_DIR/.." && pwd)/bin/shm_floor
# rec_pingpong ID LABEL PLACE REP ITERS OUT: the rows of a floor's 8 B
# ping-pong from its "one_way_us typical= avg= p99= p999=" line.
rec_pingpong() {
  local id=$1 label=$2 place=$3 rep=$4 iters=$5 out=$6 key metric
  for key in typical:lat avg:lat_avg p99:lat_p99 p999:lat_p999; do
    metric=${key#*:}
    rec "$id" "$label" "$place" 8 "$metric" us "$(sed -n "s/.*[ _]${key%%:*}=\([0-9.]*\).*/\1/p" <<<"$out")" "$rep"
  done
  rec "$id" "$label" "$place" 8 iters n "$iters" "$rep"
}
floors() {
  [[ -x $FLOOR_BIN ]] || { say "udp_floor missing ($FLOOR_BIN): floors skipped"; return; }
  local place rep pat work out
  local iters=$(( QUICK ? 2000 : 100000 )) secs=$(( QUICK ? 1 : TARGET_SEC ))
  for place in unpinned pinned; do
    local pinarg=()
    [[ $place == pinned ]] && pinarg=(--pin "$CPU_CLIENT,$CPU_SERVER")
    for (( rep=1; rep<=RUNS; rep++ )); do
      for pat in single req-ack; do
        local id=floor_udp_lat_${pat//-/}
        if ! out=$(timeout 120 "$FLOOR_BIN" pingpong --pattern "$pat" --iters "$iters" "${pinarg[@]}" 2>&1); then
          fail "$id" "$place" "$rep" "udp_floor pingpong --pattern $pat: $out"; continue
        fi
        rec_pingpong "$id" "kernel UDP ping-pong ($pat)" "$place" "$rep" "$iters" "$out"
      done
      # The shared-memory floor (bench/floor/shm_floor.cc): two processes
      # and a cache line each way, no engine: what softrnic's shm latency
      # and its tail stand on (a tail it shows is this machine's).
      if [[ -x $SHM_FLOOR_BIN ]]; then
        local id=floor_shm_lat
        if out=$(timeout 120 "$SHM_FLOOR_BIN" --iters "$((iters * 2))" "${pinarg[@]}" 2>&1); then
          rec_pingpong "$id" "shared-memory ping-pong" "$place" "$rep" "$((iters * 2))" "$out"
        else
          fail "$id" "$place" "$rep" "shm_floor: $out"
        fi
      fi
      for work in copy crc crc-place; do
        local id=floor_udp_stream_${work//-/}
        if ! out=$(timeout 120 "$FLOOR_BIN" stream --work "$work" --seconds "$secs" "${pinarg[@]}" 2>&1); then
          fail "$id" "$place" "$rep" "udp_floor stream --work $work: $out"; continue
        fi
        rec "$id" "kernel UDP stream ($work)" "$place" 65536 bw GB/s "$(sed -n 's/.*gbps=\([0-9.]*\).*/\1/p' <<<"$out")" "$rep"
        rec "$id" "kernel UDP stream ($work)" "$place" 65536 cpu_per_gb ms/GB "$(sed -n 's/.*cpu_ms_per_gb=\([0-9.]*\).*/\1/p' <<<"$out")" "$rep"
      done
    done
  done
  say "floors done"
}
floors

# ------------------------------------------------------------------ 4. peers
qperf_val() {  # FILE KEY -> number (us for latency, GB/s for bw)
  awk -v k="$2" '$1 == k {
      v = $3; u = $4
      if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000; else if (u == "sec") v *= 1e6
      else if (u == "MB/sec") v /= 1000; else if (u == "KB/sec") v /= 1e6
      else if (u == "bytes/sec") v /= 1e9
      print v; exit }' "$1"
}
proc_cpu() {  # PID -> CPU seconds of PID incl. reaped children
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15 + $16 + $17) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}

peers_qperf() {
  have qperf || { say "qperf missing: kernel TCP peer skipped"; return; }
  local place rep qt=$(( QUICK ? 1 : 2 ))
  for place in unpinned pinned; do
    next_port
    local qport=$PORT ps="" pc=""
    [[ $place == pinned ]] && { ps=$(pin server); pc=$(pin client); }
    # shellcheck disable=SC2086
    $ps qperf -lp "$qport" >"$LOGS/qperf_server_$place.log" 2>&1 &
    local qpid=$!; BG_PIDS+=("$qpid")
    wait_listen "$qport" "$qpid" 10 || { fail qperf "$place" 0 "qperf server did not start"; continue; }
    for (( rep=1; rep<=RUNS; rep++ )); do
      local f=$LOGS/qperf_lat_${place}_$rep.log
      # shellcheck disable=SC2086
      timeout 60 $pc qperf 127.0.0.1 -lp "$qport" -t "$qt" -m 8 tcp_lat >"$f" 2>&1 ||
        fail peer_tcp_lat "$place" "$rep" "qperf tcp_lat rc=$?"
      rec peer_tcp_lat "kernel TCP (qperf tcp_lat)" "$place" 8 lat us "$(qperf_val "$f" latency)" "$rep"
      f=$LOGS/qperf_bw_${place}_$rep.log
      local c0 c1 t0 t1
      c0=$(proc_cpu "$qpid")
      # shellcheck disable=SC2086
      ( cpu_run "$f.cpu" timeout 60 $pc qperf 127.0.0.1 -lp "$qport" -t "$qt" -m 64K -v tcp_bw ) >"$f" 2>&1 ||
        fail peer_tcp_bw "$place" "$rep" "qperf tcp_bw rc=$?"
      sleep 0.3   # let the server reap its per-test child
      c1=$(proc_cpu "$qpid")
      local bw; bw=$(qperf_val "$f" bw)
      rec peer_tcp_bw "kernel TCP (qperf tcp_bw)" "$place" 65536 bw GB/s "$bw" "$rep"
      # bytes moved: msg_rate (K/sec) x time would be exact; bw x time is close
      local tsec; tsec=$(qperf_val "$f" time); tsec=$(awk -v t="$tsec" 'BEGIN {print t / 1e6}')
      rec peer_tcp_bw "kernel TCP (qperf tcp_bw)" "$place" 65536 cpu_per_gb ms/GB \
        "$(awk -v a="$c0" -v b="$c1" -v c="$(cat "$f.cpu" 2>/dev/null)" -v bw="$bw" -v t="$tsec" \
             'BEGIN {if (bw > 0 && t > 0) printf "%.1f", (b - a + c) * 1000 / (bw * t)}')" "$rep"
    done
    kill "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null
  done
  say "qperf done"
}

peers_iperf3() {
  have iperf3 || { say "iperf3 missing: skipped (optional)"; return; }
  have jq || return
  local place rep it=$(( QUICK ? 1 : 2 ))
  for place in unpinned pinned; do
    for (( rep=1; rep<=RUNS; rep++ )); do
      local aff_s=() aff_c=()
      [[ $place == pinned ]] && { aff_s=(-A "$CPU_SERVER"); aff_c=(-A "$CPU_CLIENT"); }
      SRV=(iperf3 -s -1 -p @PORT@ "${aff_s[@]}")
      CLI=(iperf3 -c 127.0.0.1 -p @PORT@ -t "$it" -l 64K -J "${aff_c[@]}")
      pair "iperf3_${place}_$rep" "$place" 60
      if (( PAIR_RC != 0 )); then fail peer_iperf3 "$place" "$rep" "iperf3 rc=$PAIR_RC"; continue; fi
      local bytes bw
      bytes=$(jq '.end.sum_received.bytes' "$CLOG" 2>/dev/null)
      bw=$(jq '.end.sum_received.bits_per_second / 8e9' "$CLOG" 2>/dev/null)
      rec peer_iperf3 "kernel TCP (iperf3)" "$place" 65536 bw GB/s "$bw" "$rep"
      rec peer_iperf3 "kernel TCP (iperf3)" "$place" 65536 cpu_per_gb ms/GB \
        "$(awk -v c="$PAIR_CPU" -v b="$bytes" 'BEGIN {if (b > 0) printf "%.1f", c * 1000 / (b / 1e9)}')" "$rep"
    done
  done
  say "iperf3 done"
}

# ucx TLS ID LABEL TEST SIZE ITERS [ ucx_perftest args ]
ucx_one() {
  local tls=$1 id=$2 label=$3 test=$4 size=$5 iters=$6 place=$7 rep=$8
  SRV=(env "UCX_TLS=$tls" ucx_perftest -p @PORT@)
  CLI=(env "UCX_TLS=$tls" ucx_perftest 127.0.0.1 -p @PORT@ -t "$test" -s "$size" -n "$iters" -w $(( iters / 10 + 1 )) -f)
  pair "${id}_${size}_${place}_$rep" "$place" 60
  # final row: iters p50 avg overall bw_avg(MiB/s) bw_overall mr_avg mr_overall
  local row; row=$(awk 'NF == 8 && $1 ~ /^[0-9]+$/ {r = $0} END {print r}' "$CLOG")
  if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
    fail "$id" "$place" "$rep" "UCX_TLS=$tls ucx_perftest -t $test -s $size rc=$PAIR_RC"; return 1
  fi
  local f; read -r -a f <<<"$row"
  if [[ $test == *lat ]]; then
    # whole-run average ("overall"; the 50.0%ile and avg columns cover the last report interval only)
    rec "$id" "$label" "$place" "$size" lat us "${f[3]}" "$rep"
  else
    rec "$id" "$label" "$place" "$size" bw GB/s "$(awk -v m="${f[5]}" 'BEGIN {printf "%.4f", m * 1048576 / 1e9}')" "$rep"
    rec "$id" "$label" "$place" "$size" cpu_per_gb ms/GB \
      "$(awk -v c="$PAIR_CPU" -v n="$iters" -v s="$size" 'BEGIN {printf "%.1f", c * 1000 / (n * s / 1e9)}')" "$rep"
  fi
}
peers_ucx() {
  have ucx_perftest || { say "ucx_perftest missing: UCX peer skipped"; return; }
  local place rep tls
  for tls in tcp posix,self; do
    local nl nb
    if (( QUICK )); then nl=2000 nb=1000
    elif [[ $tls == tcp ]]; then nl=50000 nb=20000
    else nl=300000 nb=100000; fi
    local nm=${tls//,self/}
    for place in unpinned pinned; do
      for (( rep=1; rep<=RUNS; rep++ )); do
        ucx_one "$tls" "peer_ucx_${nm}_lat" "UCX $tls (tag_lat)" tag_lat 8 "$nl" "$place" "$rep"
        ucx_one "$tls" "peer_ucx_${nm}_bw" "UCX $tls (tag_bw)" tag_bw 65536 "$nb" "$place" "$rep"
      done
    done
  done
  say "UCX done"
}

# fi_pingpong: ID LABEL PROVIDER EP SIZE ITERS PLACE REP
fi_one() {
  local id=$1 label=$2 prov=$3 ep=$4 size=$5 iters=$6 place=$7 rep=$8
  SRV=(fi_pingpong -B @PORT@ -p "$prov" -e "$ep" -S "$size" -I "$iters")
  CLI=(fi_pingpong -P @PORT@ -p "$prov" -e "$ep" -S "$size" -I "$iters" 127.0.0.1)
  pair "${id}_${size}_${place}_$rep" "$place" 60
  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
  local row; row=$(awk '$3 ~ /^=/ {print; exit}' "$CLOG")
  if [[ $PAIR_RC -ne 0 || -z "$row" ]]; then
    fail "$id" "$place" "$rep" "fi_pingpong -p $prov -e $ep -S $size rc=$PAIR_RC"; return 1
  fi
  local f; read -r -a f <<<"$row"
  if (( size <= 64 )); then
    rec "$id" "$label" "$place" "$size" lat us "${f[6]}" "$rep"
  else
    rec "$id" "$label" "$place" "$size" bw GB/s "$(awk -v m="${f[5]}" 'BEGIN {printf "%.4f", m / 1000}')" "$rep"
    # ping-pong: each iteration moves size bytes each way
    rec "$id" "$label" "$place" "$size" cpu_per_gb ms/GB \
      "$(awk -v c="$PAIR_CPU" -v n="$iters" -v s="$size" 'BEGIN {printf "%.1f", c * 1000 / (2 * n * s / 1e9)}')" "$rep"
  fi
}
peers_libfabric() {
  have fi_pingpong || { say "fi_pingpong missing: libfabric peer skipped"; return; }
  local place rep q=$QUICK
  local nl=$(( q ? 1000 : 20000 )) nb=$(( q ? 200 : 5000 )) nr=$(( q ? 100 : 2000 ))
  for place in unpinned pinned; do
    for (( rep=1; rep<=RUNS; rep++ )); do
      fi_one peer_fi_tcp_lat "libfabric tcp/msg (fi_pingpong)" tcp msg 8 "$nl" "$place" "$rep"
      fi_one peer_fi_tcp_bw "libfabric tcp/msg (fi_pingpong)" tcp msg 65536 "$nb" "$place" "$rep"
      fi_one peer_fi_udp_lat "libfabric udp/dgram (fi_pingpong)" udp dgram 8 "$nl" "$place" "$rep"
      fi_one peer_fi_rxd_bw "libfabric udp;ofi_rxd/rdm (fi_pingpong)" udp rdm 65536 "$nr" "$place" "$rep"
      fi_one peer_fi_shm_lat "libfabric shm/rdm (fi_pingpong)" shm rdm 8 "$(( nl * 5 ))" "$place" "$rep"
      fi_one peer_fi_shm_bw "libfabric shm/rdm (fi_pingpong)" shm rdm 65536 "$(( nb * 2 ))" "$place" "$rep"
    done
  done
  say "libfabric done"
}
if (( PEERS )); then
  say "peers: runs=$RUNS"
  peers_qperf
  peers_iperf3
  peers_ucx
  peers_libfabric
fi

# ------------------------------------------------------------------ 5. sweeps
SWEEP_TSV=$WORK/sweep.tsv; : >"$SWEEP_TSV"
sweep_perftest() {  # TOOL KIND N TRANSPORT
  local tool=$1 kind=$2 n=$3 tr=$4
  SRV=("${SRN_ENV[@]}" "SOFTRNIC_TRANSPORT=$tr" "SOFTRNIC_MTU=$UDP_MTU" "$tool" -F -p @PORT@ -a -n "$n")
  CLI=("${SRV[@]}" 127.0.0.1)
  pair "sweep_${tr}_$tool" pinned $(( QUICK ? 120 : 400 ))
  if (( PAIR_RC != 0 )); then fail "sweep_${tr}_$tool" pinned 1 "rc=$PAIR_RC: SOFTRNIC_TRANSPORT=$tr $tool -F -a -n $n"; fi
  awk -v k="$kind" -v t="softrnic $tr $tool" '/#bytes/ {h=1; next}
      h && $1 ~ /^[0-9]+$/ && NF >= 4 {
        if (k == "lat") printf "%s\tlat\t%s\t%s\n", t, $1, $5
        else printf "%s\tbw\t%s\t%.6g\n", t, $1, $4 * 1048576 / 1e9 }' "$CLOG" >>"$SWEEP_TSV"
}
sweep_ucx() {
  local tls=$1 s
  local sizes="8 64 512 4096 32768 262144 1048576 4194304"
  for s in $sizes; do
    local nl=20000 nb=5000
    [[ $tls == tcp ]] && { nl=5000; nb=2000; }
    (( s >= 262144 )) && { nl=$(( nl / 20 + 50 )); nb=$(( nb / 20 + 50 )); }
    (( s >= 4194304 )) && { nl=30; nb=30; }
    if ucx_one "$tls" "sweep_ucx_${tls%%,*}" "x" tag_lat "$s" "$nl" pinned 1; then
      awk -v t="UCX $tls tag_lat" -v s="$s" 'NF == 8 && $1 ~ /^[0-9]+$/ {r = $4} END {printf "%s\tlat\t%s\t%s\n", t, s, r}' "$CLOG" >>"$SWEEP_TSV"
    fi
    if ucx_one "$tls" "sweep_ucx_${tls%%,*}" "x" tag_bw "$s" "$nb" pinned 1; then
      awk -v t="UCX $tls tag_bw" -v s="$s" 'NF == 8 && $1 ~ /^[0-9]+$/ {r = $6} END {printf "%s\tbw\t%s\t%.6g\n", t, s, r * 1048576 / 1e9}' "$CLOG" >>"$SWEEP_TSV"
    fi
  done
}
if (( SWEEP )); then
  say "size sweeps"
  for tr in udp shm; do
    sweep_perftest ib_write_lat lat $(( QUICK ? 5 : 50 )) $tr
    sweep_perftest ib_write_bw bw $(( QUICK ? 5 : 100 )) $tr
  done
  if (( PEERS && ! QUICK )) && have ucx_perftest; then
    sweep_ucx tcp
    sweep_ucx posix,self
  fi
  # sweep results are not headline figures
  sed -i '/^sweep_ucx/d' "$RES"
fi

# ------------------------------------------------------------------ 5b. issue 17
# The rows of issue 17's target table that the sections above do not
# measure (bench/issue17/*.sh; rendered by bench/report_issue17.py).
if (( ISSUE17 )); then
  say "issue 17 rows"
  # shellcheck source=issue17/one_host.sh
  source "$HERE/issue17/one_host.sh"
  # shellcheck source=issue17/netns.sh
  source "$HERE/issue17/netns.sh"
  i17_one_host
  i17_netns
fi

# ------------------------------------------------------------------ 6. report
meta loadavg_after "$(cut -d' ' -f1-3 /proc/loadavg)"
meta duration_s "$(( $(date +%s) - T0 ))"
mkdir -p "$OUT_DIR"
if (( ! QUICK )); then
  mkdir -p "$HERE/results"
  cp "$RES" "$HERE/results/latest.tsv"; cp "$SWEEP_TSV" "$HERE/results/latest-sweep.tsv"
  cp "$META" "$HERE/results/latest-meta.tsv"; cp "$FAILS" "$HERE/results/latest-failures.tsv"
fi
"$PY" "$HERE/report.py" --results "$RES" --sweep "$SWEEP_TSV" --meta "$META" \
  --failures "$FAILS" --out "$OUT_DIR/$MD_NAME" --img-dir "$OUT_DIR/img" \
  $( (( QUICK )) && echo --img-prefix quick- ) ||
  { echo "run_bench: report generation failed" >&2; exit 1; }
say "wrote $OUT_DIR/$MD_NAME in $(( $(date +%s) - T0 )) s ($(wc -l <"$FAILS") failed runs)"
# The README's status quotes the full report (tests/integration/docs).
if (( ! QUICK )) && [[ "$OUT_DIR" -ef "$HERE/../docs" ]]; then
  "$PY" "$HERE/../scripts/readme_status.py" || echo "run_bench: README.md's speed block not updated" >&2
fi
