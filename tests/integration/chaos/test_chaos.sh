#!/bin/bash
# `softrnic chaos` (issue 42, docs/fault-lab.md) over Debian's programs, on
# one host (RoCE v2 over loopback UDP, which a scenario forces):
#   rping        the whole shipped matrix; rping -V checks every buffer it
#                gets back, so corrupted data softrnic let through would fail
#                it; a peer that stops answering for 1 s must make it fail
#                (the retry budget, 7 x 67 ms, is shorter): the table says
#                FAILED and why
#   ib_write_bw  loss, an outage and ACK loss, faults on both ends
#   ucx_perftest UCP tag_bw over rc_verbs, under `softrnic run`, with loss
#   MPI          Open MPI over UCX, 2 ranks, the middleware tests' checked
#                program (mpi_check.c), with loss
# Each: the table has one line per scenario with the columns, a trace
# summary was read for every run that ended (its numbers are not "-"),
# faults were applied in the faulted runs, and no run crashed or hung past
# the limit (chaos exits 0 or 1, never 3).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
softrnic_require_cmd rping ib_write_bw
TOOL=${SOFTRNIC_TOOL:-$SOFTRNIC_BUILD_DIR/bin/softrnic}
[[ -x $TOOL ]] || skip "no $TOOL"
export SOFTRNIC_SCENARIO_DIR=$SOFTRNIC_SOURCE_DIR/share/scenarios
unset SOFTRNIC_FAULTS SOFTRNIC_FAULTS_FILE SOFTRNIC_TRACE

# chaos NAME ARGS...: runs softrnic chaos, table in $SOFTRNIC_TMP/NAME.table;
# rc is its exit status.
chaos() {
  local name=$1; shift
  rc=0
  run_t 420 "$TOOL" chaos -o "$SOFTRNIC_TMP/$name" "$@" >"$SOFTRNIC_TMP/$name.table" \
    2>"$SOFTRNIC_TMP/$name.err" || rc=$?
  sed "s/^/    [$name] /" "$SOFTRNIC_TMP/$name.table" >&2
  check "$name: chaos exit 0 or 1, no hang or crash (got $rc)" test "$rc" -le 1
}
# row NAME SCENARIO: the table line of SCENARIO
row() { awk -v s="$2" '$1 == s && NF >= 8' "$SOFTRNIC_TMP/$1.table"; }
# expect_row NAME SCENARIO VERDICT: the row exists, with its verdict and a
# summary read (retransmitted, timeouts, errors, faults are numbers)
expect_row() {
  local r
  r=$(row "$1" "$2")
  check "$1 $2: a row" test -n "$r"
  check "$1 $2: verdict $3 ($r)" test "$(awk '{print $2}' <<<"$r")" = "$3"
  check "$1 $2: trace summary numbers" grep -qE '^[^ ]+ +[A-Za-z]+ +[^ ]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$' <<<"$r"
}
faults_of() { row "$1" "$2" | awk '{print $8}'; }

PORT=$(( 21000 + $$ % 9000 ))

# ---- rping, the whole shipped matrix -------------------------------------
mapfile -t shipped < <(ls "$SOFTRNIC_SCENARIO_DIR"/*.toml | xargs -n1 basename | sed 's/\.toml$//')
(( ${#shipped[@]} >= 10 )) || die "only ${#shipped[@]} shipped scenarios"
PORT=$((PORT + 1))
chaos rping -l 30 --server "rping -s -a 127.0.0.1 -p $PORT -C 1000 -S 1024 -V" -- \
  rping -c -a 127.0.0.1 -p $PORT -C 1000 -S 1024 -V
expect_row rping none ok
check "rping none: no fault applied" test "$(faults_of rping none)" -eq 0
for s in loss-0.1 loss-1 reorder delay-jitter; do
  expect_row rping "$s" ok
done
for s in "${shipped[@]}"; do
  check "rping: a row for $s" test -n "$(row rping "$s")"
done
check "rping loss-1: faults applied" test "$(faults_of rping loss-1)" -gt 0
# A peer silent for 1 s outlasts rping's retry budget: the program fails,
# and the table says why.
expect_row rping peer-pause FAILED
check "rping peer-pause: the reason names the exit or the completions in error" \
  grep -qE '^peer-pause: FAILED: .*(exited|completions in error)' "$SOFTRNIC_TMP/rping.table"

# ---- ib_write_bw ----------------------------------------------------------
PORT=$((PORT + 1))
# Faults on both ends: ACKs are the server's, and each end's windows count
# from its own device's opening; -D 2 keeps data moving through them.
chaos write_bw -l 60 -s loss-1 -s outage-300ms -s ack-loss --faults-on both \
  --server "ib_write_bw -p $PORT -s 65536 -D 2" -- ib_write_bw -p $PORT -s 65536 -D 2 127.0.0.1
for s in none loss-1 outage-300ms ack-loss; do
  r=$(row write_bw "$s")
  check "ib_write_bw $s: a row with a summary" \
    grep -qE '^[^ ]+ +[A-Za-z]+ +[^ ]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$' <<<"$r"
done
expect_row write_bw loss-1 ok
check "ib_write_bw loss-1: retransmissions counted" test "$(row write_bw loss-1 | awk '{print $5}')" -gt 0
check "ib_write_bw outage-300ms: packets dropped in the window" test "$(faults_of write_bw outage-300ms)" -gt 0
check "ib_write_bw ack-loss: the server's ACKs lost" test "$(faults_of write_bw ack-loss)" -gt 0

# ---- UCX ------------------------------------------------------------------
if command -v ucx_perftest >/dev/null; then
  PORT=$((PORT + 1))
  export UCX_TLS=rc_v,self UCX_NET_DEVICES=softrnic0:1
  rc=0
  run_t 300 "$TOOL" run -- "$TOOL" chaos -o "$SOFTRNIC_TMP/ucx" -l 60 -s loss-1 \
    --server "ucx_perftest -p $PORT" -- ucx_perftest 127.0.0.1 -p $PORT -t tag_bw -s 65536 -n 2000 \
    >"$SOFTRNIC_TMP/ucx.table" 2>"$SOFTRNIC_TMP/ucx.err" || rc=$?
  sed "s/^/    [ucx] /" "$SOFTRNIC_TMP/ucx.table" >&2
  check "ucx: chaos exit 0 or 1 (got $rc)" test "$rc" -le 1
  expect_row ucx none ok
  expect_row ucx loss-1 ok
  unset UCX_TLS UCX_NET_DEVICES
else
  log "ucx_perftest not installed: UCX case not run"
fi

# ---- MPI ------------------------------------------------------------------
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$SOFTRNIC_TMP/mpi_check" "$SOFTRNIC_SOURCE_DIR/tests/integration/middleware/mpi_check.c" ||
    die "mpicc"
  export UCX_TLS=rc_v,self UCX_NET_DEVICES=softrnic0:1
  rc=0
  run_t 300 "$TOOL" run -- "$TOOL" chaos -o "$SOFTRNIC_TMP/mpi" -l 90 -s loss-0.1 -- \
    mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca osc ucx --mca btl self \
    -x UCX_TLS -x UCX_NET_DEVICES -x SOFTRNIC_TRANSPORT -x SOFTRNIC_FAULTS_FILE -x SOFTRNIC_TRACE \
    -x LD_LIBRARY_PATH "$SOFTRNIC_TMP/mpi_check" >"$SOFTRNIC_TMP/mpi.table" 2>"$SOFTRNIC_TMP/mpi.err" || rc=$?
  sed "s/^/    [mpi] /" "$SOFTRNIC_TMP/mpi.table" >&2
  check "mpi: chaos exit 0 or 1 (got $rc)" test "$rc" -le 1
  expect_row mpi none ok
  expect_row mpi loss-0.1 ok
  unset UCX_TLS UCX_NET_DEVICES
else
  log "Open MPI not installed: MPI case not run"
fi

# ---- a bad scenario runs nothing -----------------------------------------
printf 'name = "bad"\n[[rule]]\ndrop = 1.5\n' >"$SOFTRNIC_TMP/bad.toml"
rc=0
"$TOOL" chaos -o "$SOFTRNIC_TMP/bad" -s "$SOFTRNIC_TMP/bad.toml" -- touch "$SOFTRNIC_TMP/ran" \
  >"$SOFTRNIC_TMP/bad.out" 2>&1 || rc=$?
check "bad scenario: exit 2 (got $rc)" test "$rc" -eq 2
check "... the error names the file and line 3" grep -qF "$SOFTRNIC_TMP/bad.toml:3" "$SOFTRNIC_TMP/bad.out"
check "... and nothing ran" test ! -e "$SOFTRNIC_TMP/ran"
log "PASS: softrnic chaos over rping, ib_write_bw, UCX and MPI"
