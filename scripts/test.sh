#!/usr/bin/env bash
# THE test command: installs dependencies, builds with sanitizers, runs every
# unit and integration test, prints a summary. Exit status is non-zero if
# anything failed (deps, configure, build or any test).
#
#   scripts/test.sh [ctest args...]       e.g. scripts/test.sh -L unit
#                                              scripts/test.sh -R icrc
#   Environment:
#     BUILD_TYPE   CI (default: ASan+UBSan, -Werror) | TSan | RelWithDebInfo;
#                  a BUILD_DIR already configured keeps its own by default
#     BUILD_DIR    default build-ci for CI, build-tsan for TSan, build otherwise
#     JOBS         build parallelism (default $(nproc))
#     CTEST_JOBS   test parallelism (default $(nproc)); tests that share netns
#                  names or fixed ports are serialised with RESOURCE_LOCK
#     TEST_TIMEOUT default per-test timeout in seconds (default 300)
#     SOFTRNIC_SKIP_DEPS=1   do not run scripts/install-deps.sh
#
# Integration tests that create network namespaces need root; run as non-root
# they skip themselves (ctest reports them as skipped, not failed).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
# A BUILD_DIR that is already configured keeps its build type unless
# BUILD_TYPE says otherwise (it used to be reconfigured as CI silently).
if [[ -z "${BUILD_TYPE:-}" && -n "${BUILD_DIR:-}" ]]; then
  cache="$BUILD_DIR/CMakeCache.txt"; [[ "$BUILD_DIR" = /* ]] || cache="$ROOT/$cache"
  [[ -f "$cache" ]] && BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
fi
BUILD_TYPE=${BUILD_TYPE:-CI}
case "$BUILD_TYPE" in
  CI) def_dir=build-ci ;; TSan) def_dir=build-tsan ;; RelWithDebInfo) def_dir=build ;;
  *) def_dir=build-$(echo "$BUILD_TYPE" | tr '[:upper:]' '[:lower:]') ;;
esac
BUILD_DIR=${BUILD_DIR:-$def_dir}
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
CTEST_JOBS=${CTEST_JOBS:-$(nproc)}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}

start=$(date +%s)
stage() { printf '\n==================== %s ====================\n' "$*"; }
elapsed() { echo $(( $(date +%s) - start ))s; }

stage "dependencies"
if ! scripts/install-deps.sh; then
  echo "test.sh: FAILED installing dependencies"; exit 2
fi

stage "build ($BUILD_TYPE -> ${BUILD_DIR#"$ROOT"/})"
# Keep going past a broken target so every test that can run still runs; a
# failed build still fails the whole command.
build_rc=0
KEEP_GOING=1 scripts/build.sh "$BUILD_TYPE" "$BUILD_DIR" || build_rc=$?
if (( build_rc != 0 )); then
  if [[ ! -f "$BUILD_DIR/CTestTestfile.cmake" ]]; then
    echo "test.sh: FAILED to configure ($(elapsed))"; exit 3
  fi
  echo "test.sh: BUILD FAILED (exit $build_rc); running the tests that did build"
fi

# Sanitizer runtime options: fail loudly, symbolize, no leak false positives
# from dlopen'ed providers of the system libibverbs.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# Debian's python3 has scapy; a pyenv/venv python3 earlier in PATH may not.
# Put the system directories first so tests get Debian's tools and python.
export PATH="/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"
export SOFTRNIC_PYTHON=${SOFTRNIC_PYTHON:-/usr/bin/python3}

stage "ctest (-j$CTEST_JOBS, timeout ${TEST_TIMEOUT}s per test)"
log="$BUILD_DIR/test-summary.log"
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "$TEST_TIMEOUT" \
  -j "$CTEST_JOBS" --no-tests=error "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# ThreadSanitizer over the progress engine: the engine and transport unit
# tests (two engines per test over real sockets or shared memory, progress
# threads racing application threads) in a TSan build of their own. Only
# after the main CI build; TSAN_STAGE=0 skips it.
tsan_rc=0 tsan_line=""
if [[ "$BUILD_TYPE" == CI && "${TSAN_STAGE:-1}" == 1 && $# -eq 0 ]]; then
  stage "ThreadSanitizer: engine and transport unit tests"
  tsan_dir="$ROOT/build-tsan"
  tsan_log="$tsan_dir/tsan-summary.log"
  if scripts/build.sh TSan "$tsan_dir" --target softrnic_engine_tests softrnic_transport_tests; then
    : >"$tsan_log"
    for t in softrnic_engine_tests softrnic_transport_tests; do
      # history_size=7: the longest access history, so that the stack of an
      # engine copy into application memory (by design, tests/tsan.supp) is
      # still restorable when the application reads it much later; else
      # "[failed to restore the stack]" and the suppression cannot match.
      TSAN_OPTIONS="suppressions=$ROOT/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1:history_size=7" \
        timeout 900 "$tsan_dir/tests/$t" --gtest_brief=1 2>&1 | tee -a "$tsan_log" | tail -5
      (( PIPESTATUS[0] != 0 )) && tsan_rc=1
    done
    races=$(grep -c 'WARNING: ThreadSanitizer' "$tsan_log" || true)
    tsan_failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$tsan_log" | sed -E 's/^\[  FAILED  \] //; s/ \(.*//' | sort -u | tr '\n' ' ')
    tsan_line="$(grep -E '^\[  PASSED  \]' "$tsan_log" | awk '{n += $4} END {print n + 0}') tests passed, $races ThreadSanitizer reports${tsan_failed:+, failed: $tsan_failed}"
    (( tsan_rc != 0 )) && [[ -z "$tsan_failed" ]] && tsan_line+=", a test binary exited non-zero"
  else
    tsan_rc=3 tsan_line="TSan build failed"
  fi
fi

stage "summary"
# ctest prints e.g. "100% tests passed, 0 tests failed out of 42"
summary=$(grep -E 'tests passed|tests failed out of' "$log" | tail -1)
total=$(sed -nE 's/.* out of ([0-9]+).*/\1/p' <<<"$summary")
failed=$(sed -nE 's/.*, ([0-9]+) tests failed.*/\1/p' <<<"$summary")
# Skipped tests count as "passed" in ctest's percentage line; list them apart.
skipped=$(sed -n '/The following tests did not run/,/^$/p' "$log" | grep -cE '\((Skipped|Disabled)\)' || true)
echo "build type : $BUILD_TYPE ($BUILD_DIR)"
labels=$(ctest --test-dir "$BUILD_DIR" --print-labels 2>/dev/null | sed -nE 's/^ +([^ ].*)$/\1/p')
for l in $labels; do
  n=$(ctest --test-dir "$BUILD_DIR" -N -L "^$l\$" 2>/dev/null | sed -nE 's/^Total Tests: ([0-9]+)/\1/p')
  printf '  label %-12s %s tests\n' "$l" "${n:-0}"
done
if grep -q 'The following tests did not run' "$log"; then
  echo "skipped tests:"
  sed -n '/The following tests did not run/,/^$/p' "$log" | grep -E '\((Skipped|Disabled)\)' | sed 's/^\s*/  /'
fi
if grep -q 'The following tests FAILED' "$log"; then
  echo "failed tests:"
  sed -n '/The following tests FAILED/,$p' "$log" | grep -E '^\s+[0-9]+ - ' | sed -E 's/^\s+/  /'
  # Why, in a few lines per test: the lines of its output (printed under
  # its status line by --output-on-failure) that name a failure. A report
  # that keeps only the end of this output still says what went wrong.
  echo "why they failed (first lines of each that name a failure):"
  awk '
    /Test +#[0-9]+: / {
      cur = ""
      if ($0 ~ /\*\*\*(Failed|Timeout|Exception)/) { cur = $4; n = 0 }
      next
    }
    /^ *Start +[0-9]+: / { next }
    cur != "" && n < 6 && /FAIL|Failure|FAILED|error:|Error|Timeout|Sanitizer|runtime error|Segmentation|Aborted|Expected|Which is/ {
      line = substr($0, 1, 240); sub(/^ +/, "", line)
      print "  " cur ": " line; n++
    }' "$log"
fi
if [[ -n "$total" ]]; then
  f=${failed:-0}; s=${skipped:-0}
  echo "total: $total tests in $(elapsed)"
  echo "tests: $(( total - f - s )) passed, $f failed, $s skipped"
else
  echo "tests: no ctest summary (rc=$rc) in $(elapsed)"
fi
if [[ -n "$tsan_line" ]]; then
  echo "tsan : $tsan_line"
  (( tsan_rc != 0 && rc == 0 )) && rc=4
fi
if (( build_rc != 0 )); then
  echo "build      : FAILED (see the build output above)"
  (( rc == 0 )) && rc=3
fi
if (( rc != 0 )); then echo "RESULT: FAIL"; else echo "RESULT: PASS"; fi
exit "$rc"
