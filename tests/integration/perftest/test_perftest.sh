#!/bin/bash
# Debian's unmodified perftest (ib_{send,write,read,atomic}_{lat,bw}) between
# two processes on this host, loaded against softrnic's libibverbs.so.1.
#
# Every tool runs in its default mode (out-of-band exchange over TCP, port
# -p PORT, a fresh port per case so runs never collide) plus variants:
#   -a            all message sizes (small -n)
#   -b            bidirectional (bw tools)
#   -q 2 / -q 4   several QPs (bw tools)
#   -I 0 / -I 64  no inline / inline data (send/write lat and bw)
#   -A CMP_AND_SWAP / FETCH_AND_ADD (atomics)
#   -R            connection through rdma_cm (known issue for now)
# A case passes when server and client both exit 0 within the timeout and
# the client printed a result row (a line of numbers under the "#bytes"
# header).
#
# Cases in KNOWN_ISSUES are run too but only reported ("KNOWN ISSUE: reason");
# they do not fail the test. If one of them starts passing it is reported as
# "FIXED" so it can be moved back to the normal list.
#
# usage: test_perftest.sh [--quick] [--only REGEX]
#   env: SOFTRNIC_LIB_DIR (set by ctest), PERFTEST_TIMEOUT (s per side, 60;
#        the -a sweeps get 3x that),
#        PERFTEST_ITERS (-n for normal cases, 200)
# exit 0 if every non-known case passes, 1 otherwise, 77 if perftest is
# missing or softrnic is not built.
set -u
source "${SOFTRNIC_INTEGRATION_LIB:-$(dirname "$0")/../lib}/common.sh"

QUICK=0 ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "usage: $0 [--quick] [--only REGEX]" >&2; exit 2 ;;
  esac
done

softrnic_require_lib
softrnic_require_cmd ss timeout ib_send_lat ib_send_bw ib_write_lat ib_write_bw \
  ib_read_lat ib_read_bw ib_atomic_lat ib_atomic_bw
softrnic_env

TIMEOUT=${PERFTEST_TIMEOUT:-60}
N=${PERFTEST_ITERS:-200}
# Our own TCP port range (per process) so parallel runs do not collide; the
# ctest registration also takes the 18515 (perftest default port) lock.
PORT=$(( 21000 + ($$ % 15000) ))

# Known failures: "case name|reason". Matched against the case name exactly.
# Keep the reason short and tell the engine owner.
declare -A KNOWN_ISSUES=(
  ["write_bw -R (rdma_cm)"]="softrnic ships no librdmacm.so.1 yet: the system librdmacm finds no RDMA device (rdma_create_event_channel failed)"
  ["send_lat -R (rdma_cm)"]="softrnic ships no librdmacm.so.1 yet: the system librdmacm finds no RDMA device (rdma_create_event_channel failed)"
)

pass=0 fail=0 known=0 fixed=0 retried=0
failed_names=()

next_port() {
  PORT=$((PORT + 1))
  while ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; do PORT=$((PORT + 1)); done
}

# has_result LOG: a numeric row after the "#bytes" header.
has_result() {
  awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ && NF >= 4 {ok=1} END {exit !ok}' "$1"
}

# run_case NAME TOOL ARGS...: server `TOOL -p PORT ARGS`, client the same
# plus 127.0.0.1.
run_case() {
  local name=$1 tool=$2; shift 2
  if [[ -n "$ONLY" ]] && ! [[ "$name" =~ $ONLY ]]; then return 0; fi
  next_port
  local slog="$SOFTRNIC_TMP/server.log" clog="$SOFTRNIC_TMP/client.log"
  local t0=$(date +%s%N) T=${CASE_TIMEOUT:-$TIMEOUT}
  timeout -k 5 "$T" "$tool" -p "$PORT" "$@" >"$slog" 2>&1 &
  local spid=$!
  local i
  for (( i=0; i<200; i++ )); do
    ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  timeout -k 5 "$T" "$tool" -p "$PORT" "$@" 127.0.0.1 >"$clog" 2>&1
  local crc=$? src=0
  # The server normally ends right after the client; never wait forever.
  wait "$spid" || src=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local cmd="$tool -p $PORT $* [server] / ... 127.0.0.1 [client]"
  local ok=0
  [[ $crc -eq 0 && $src -eq 0 ]] && has_result "$clog" && ok=1
  local summary
  summary=$(awk '/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ {last=$0} END {print last}' "$clog" |
            tr -s ' \t' ' ')
  if [[ -n "${KNOWN_ISSUES[$name]:-}" ]]; then
    if (( ok )); then
      fixed=$((fixed + 1))
      printf 'FIXED       %-34s (was known issue: %s) %6d ms\n' "$name" "${KNOWN_ISSUES[$name]}" "$ms"
    else
      known=$((known + 1))
      printf 'KNOWN ISSUE %-34s client rc=%d server rc=%d: %s\n' "$name" "$crc" "$src" "${KNOWN_ISSUES[$name]}"
      printf '    command: %s\n' "$cmd"
    fi
    return 0
  fi
  if (( ok )); then
    pass=$((pass + 1))
    printf 'PASS        %-34s %6d ms |%s\n' "$name" "$ms" "$summary"
  elif [[ -z "${RETRYING:-}" ]]; then
    # One more try, reported: on this 2-vCPU machine under a parallel
    # sanitizer run a peer can be starved past its retry budget (perftest
    # sets retry_cnt 7 at a 67 ms Local ACK Timeout). A case that fails
    # twice fails the test; the first try's errors are printed either way.
    retried=$((retried + 1))
    printf 'RETRY       %-34s first try: client rc=%d server rc=%d; %s\n' "$name" "$crc" "$src" \
      "$(grep -hiE 'error|fail|unable|couldn|status' "$clog" "$slog" | head -4 | tr -s ' \t\n' ' ')"
    RETRYING=1 run_case "$name" "$tool" "$@"
  else
    fail=$((fail + 1))
    failed_names+=("$name")
    printf 'FAIL        %-34s client rc=%d server rc=%d%s\n' "$name" "$crc" "$src" \
      "$( (( crc == 124 || src == 124 )) && echo ' (timeout)')"
    printf '    command: %s\n' "$cmd"
    # perftest's errors go to stderr, unbuffered, so they sit above its
    # buffered stdout in the log: print them apart from the log's tail.
    grep -hiE 'error|fail|unable|couldn|status' "$clog" | head -5 | sed 's/^/    client error: /'
    grep -hiE 'error|fail|unable|couldn|status' "$slog" | head -5 | sed 's/^/    server error: /'
    sed 's/^/    client: /' "$clog" | grep -v -- '-----' | tail -8
    sed 's/^/    server: /' "$slog" | grep -v -- '-----' | tail -8
  fi
}

# -F: do not abort when cpufreq cannot be read (VMs, containers).
F=-F
NA=10             # iterations per size for -a sweeps
(( QUICK )) && N=100

# ---- default mode, every tool
run_case "send_lat default"       ib_send_lat   $F -n $N
run_case "send_bw default"        ib_send_bw    $F -n $N
run_case "write_lat default"      ib_write_lat  $F -n $N
run_case "write_bw default"       ib_write_bw   $F -n $N
run_case "read_lat default"       ib_read_lat   $F -n $N
run_case "read_bw default"        ib_read_bw    $F -n $N
run_case "atomic_lat default"     ib_atomic_lat $F -n $N
run_case "atomic_bw default"      ib_atomic_bw  $F -n $N

# ---- inline vs non-inline
run_case "send_lat -I 0"          ib_send_lat   $F -n $N -s 8 -I 0
run_case "send_lat -I 64"         ib_send_lat   $F -n $N -s 8 -I 64
run_case "write_lat -I 0"         ib_write_lat  $F -n $N -s 8 -I 0
run_case "write_lat -I 64"        ib_write_lat  $F -n $N -s 8 -I 64
run_case "write_bw -I 64 -s 64"   ib_write_bw   $F -n $N -s 64 -I 64
run_case "send_bw -I 64 -s 64"    ib_send_bw    $F -n $N -s 64 -I 64

# ---- atomics: both operations
run_case "atomic_lat CAS"         ib_atomic_lat $F -n $N -A CMP_AND_SWAP
run_case "atomic_lat FAA"         ib_atomic_lat $F -n $N -A FETCH_AND_ADD
run_case "atomic_bw CAS"          ib_atomic_bw  $F -n $N -A CMP_AND_SWAP

# ---- bidirectional (bw tools)
run_case "send_bw -b"             ib_send_bw    $F -n $N -b
run_case "write_bw -b"            ib_write_bw   $F -n $N -b
run_case "read_bw -b"             ib_read_bw    $F -n $N -b
run_case "atomic_bw -b"           ib_atomic_bw  $F -n $N -b

# ---- several QPs (bw tools)
for q in 2 4; do
  run_case "send_bw -q $q"        ib_send_bw    $F -n $N -q $q
  run_case "write_bw -q $q"       ib_write_bw   $F -n $N -q $q
  run_case "read_bw -q $q"        ib_read_bw    $F -n $N -q $q
  (( QUICK )) && continue
  run_case "atomic_bw -q $q"      ib_atomic_bw  $F -n $N -q $q
done

# ---- all sizes (2 B .. 8 MiB), few iterations per size
# (23 sizes, up to 8 MiB: slow while latency is milliseconds, so 3x timeout)
TA=$(( TIMEOUT * 3 ))
CASE_TIMEOUT=$TA run_case "write_lat -a"   ib_write_lat  $F -n $NA -a
CASE_TIMEOUT=$TA run_case "write_bw -a"    ib_write_bw   $F -n $NA -a
if (( ! QUICK )); then
  CASE_TIMEOUT=$TA run_case "send_lat -a"  ib_send_lat   $F -n $NA -a
  CASE_TIMEOUT=$TA run_case "send_bw -a"   ib_send_bw    $F -n $NA -a
  CASE_TIMEOUT=$TA run_case "read_lat -a"  ib_read_lat   $F -n $NA -a
  CASE_TIMEOUT=$TA run_case "read_bw -a"   ib_read_bw    $F -n $NA -a
  # larger messages, path MTU 4096, larger TX depth
  run_case "write_bw 1MiB -m 4096" ib_write_bw  $F -n 50 -s 1048576 -m 4096
  run_case "send_bw -t 128 -s 4096" ib_send_bw  $F -n $N -s 4096 -t 128
  run_case "read_bw -o 1"          ib_read_bw   $F -n $N -o 1
fi

# ---- connection through rdma_cm instead of the TCP exchange
CASE_TIMEOUT=30 run_case "write_bw -R (rdma_cm)" ib_write_bw $F -n $N -R
CASE_TIMEOUT=30 run_case "send_lat -R (rdma_cm)" ib_send_lat $F -n $N -R

echo "perftest: $pass passed, $fail failed, $known known issues, $fixed known issues now passing, $retried retried"
if (( fail )); then
  printf 'failed: %s\n' "${failed_names[@]}"
  exit 1
fi
exit 0
