#!/usr/bin/env bash
# Builds softrnic's libFuzzer targets with clang and runs each for N seconds
# on its seed corpus (docs/hardening.md).
#
#   fuzz/run_fuzzers.sh [SECONDS=30] [FUZZER...]
#
#   FUZZER: packet_parser, responder, udp_receive, shm_ring, stats_file, cm,
#   rsocket (default: every one that is built; cm and rsocket exist once
#   their sources are in fuzz/).
#
# Environment:
#   FUZZ_BUILD_DIR   clang build directory            (<source>/build-fuzz)
#   FUZZ_WORK_DIR    grown corpora, logs              ($FUZZ_BUILD_DIR/fuzz-work)
#   FUZZ_JOBS        parallel build jobs              (2)
#   FUZZ_ARGS        extra libFuzzer flags, e.g. "-jobs=2 -workers=2"
#   FUZZ_TARGET      build target                     (fuzzers: all of them)
#   CC, CXX          compilers                        (clang-14, clang++-14)
#
# The corpus a run grows stays in FUZZ_WORK_DIR; the committed seeds in
# fuzz/corpus/<fuzzer>/ are only read. A crash, leak, timeout or invariant
# failure is written to fuzz/crashes/<fuzzer>-<kind>-<sha1> and the script
# exits 1 after printing how to reproduce it. Exit 77: clang missing (skip).
set -euo pipefail

secs=${1:-30}
[[ $# -gt 0 ]] && shift
fuzzers=("$@")

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
work=${FUZZ_WORK_DIR:-$build/fuzz-work}
jobs=${FUZZ_JOBS:-2}
cc=${CC:-clang-14}
cxx=${CXX:-clang++-14}
# A sanitizer runtime preloaded by ctest for gcc builds must not leak into
# the clang-built fuzzers or the compilers.
unset LD_PRELOAD

log() { printf '[%s run_fuzzers] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v "$cxx" >/dev/null 2>&1 || { log "SKIP: $cxx not installed"; exit 77; }
command -v "$cc" >/dev/null 2>&1 || { log "SKIP: $cc not installed"; exit 77; }

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  log "configuring $build with $cxx"
  mkdir -p "$build"
  # ccache, where installed, makes the clang build nearly free on the
  # second run (the build is most of the CI fuzz stage's time).
  launcher=()
  command -v ccache >/dev/null 2>&1 &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=$cc CXX=$cxx cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
    -DSOFTRNIC_BUILD_FUZZERS=ON -DSOFTRNIC_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; log "FAIL: configure"; exit 1; }
fi
target=${FUZZ_TARGET:-fuzzers}
log "building $target (-j$jobs)"
build_start=$SECONDS
cmake --build "$build" -j"$jobs" --target "$target" >"$build/fuzz-build.log" 2>&1 ||
  { tail -40 "$build/fuzz-build.log" >&2; log "FAIL: build"; exit 1; }
log "built in $((SECONDS - build_start))s"
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  for f in packet_parser responder udp_receive shm_ring stats_file cm rsocket; do
    [[ -x "$build/fuzz/${f}_fuzzer" ]] && fuzzers+=("$f")
  done
fi

mkdir -p "$work" "$src/fuzz/crashes"
status=0
summary=()
for f in "${fuzzers[@]}"; do
  bin="$build/fuzz/${f}_fuzzer"
  [[ -x "$bin" ]] || { log "FAIL: no fuzzer $bin"; exit 1; }
  corpus="$work/$f"
  mkdir -p "$corpus"
  seeds=()
  [[ -d "$src/fuzz/corpus/$f" ]] && seeds=("$src/fuzz/corpus/$f")
  flog="$work/$f.log"
  log "running $f for ${secs}s"
  rc=0
  # First corpus dir is where new inputs go; the committed seeds are read only.
  # shellcheck disable=SC2086
  timeout -k 10 $(( secs + 120 )) "$bin" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -error_exitcode=1 \
    -print_final_stats=1 -artifact_prefix="$src/fuzz/crashes/$f-" \
    ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}" >"$flog" 2>&1 || rc=$?
  # `|| true`: a fuzzer that crashed at once printed no coverage line, and
  # a failing grep must not end the script (set -e) before the summary.
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$flog" | tail -1 || true)
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$flog" | tail -1 || true)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$flog" | tail -1 || true)
  line="$f: rc=$rc execs=${execs:-?} (${rate:-?}/s) ${cov:-} corpus=$(ls "$corpus" | wc -l)"
  summary+=("$line")
  if (( rc != 0 )); then
    status=1
    log "FAIL: $line"
    grep -E 'ERROR|invariant|property|SUMMARY|artifact|Test unit written' "$flog" | head -20 >&2 || true
    tail -60 "$flog" >&2
    log "reproduce: $bin fuzz/crashes/<file>"
  fi
done
for l in "${summary[@]}"; do log "$l"; done
(( status == 0 )) && log "PASS: no crashes" || log "FAIL: see fuzz/crashes/"
exit "$status"
