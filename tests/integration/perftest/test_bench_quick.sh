#!/bin/bash
# bench/run_bench.sh --quick end to end: it must complete and write its
# markdown report (with the targets table and at least one softrnic figure).
# Numbers are not asserted. Output goes to this test's temp dir, never to
# docs/. Uses the libraries of the build under test (--lib-dir), no apt-get.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_lib
softrnic_require_cmd ib_write_lat ib_write_bw ss timeout

OUT=$SOFTRNIC_TMP/bench-out
# The benchmark measures what users run: an optimised build. When the tests
# run on a sanitizer build (CI), build the libraries once more without
# sanitizers, next to it.
LIB=$SOFTRNIC_LIB_DIR
if ldd "$LIB/libibverbs.so.1" 2>/dev/null | grep -qE 'lib(asan|tsan)'; then
  REL=$SOFTRNIC_BUILD_DIR/bench-release
  log "sanitizer build under test: building release libraries in $REL"
  # The sanitizer runtime preloaded for integration tests must not reach the
  # compilers (cc1 under a preloaded ASan aborts on its own leaks).
  unset LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  cmake -S "$SOFTRNIC_SOURCE_DIR" -B "$REL" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSOFTRNIC_BUILD_TESTS=OFF >"$SOFTRNIC_TMP/release-build.log" 2>&1 &&
    cmake --build "$REL" -j"$(nproc)" >>"$SOFTRNIC_TMP/release-build.log" 2>&1 ||
    { tail -20 "$SOFTRNIC_TMP/release-build.log"; die "release build failed"; }
  LIB=$REL/lib
fi
log "running bench/run_bench.sh --quick (lib: $LIB)"
TMPDIR=$SOFTRNIC_TMP run_t 560 bash "$SOFTRNIC_SOURCE_DIR/bench/run_bench.sh" --quick \
  --no-install --lib-dir "$LIB" --out-dir "$OUT" >"$SOFTRNIC_TMP/bench.log" 2>&1
rc=$?
tail -n 25 "$SOFTRNIC_TMP/bench.log"
(( rc == 0 )) || die "run_bench.sh --quick exited with $rc"

MD=$OUT/benchmarks-quick.md
check "report written" test -s "$MD"
check "targets table present" grep -q '^## Where softrnic stands against its targets' "$MD"
for path in udp shm; do
  check "softrnic $path ib_write_lat figure present" grep -qE "^\| softrnic $path ib_write_lat \| 8 B \| (unpinned|pinned) \| latency \(us\) \| [0-9]" "$MD"
  check "softrnic $path ib_write_bw figure present" grep -qE "^\| softrnic $path ib_write_bw \| 64 KiB \| (unpinned|pinned) \| bandwidth \(GB/s\) \| [0-9]" "$MD"
done
# The kernel UDP floors (bench/floor/udp_floor.cc) ran and were reported.
check "UDP ping-pong floor present" grep -qE "^\| kernel UDP ping-pong \(single\) \| 8 B \| (unpinned|pinned) \| latency \(us\) \| [0-9]" "$MD"
check "UDP stream floor with ICRC and placement present" grep -qE "^\| kernel UDP stream \(crc-place\) \| 64 KiB \| (unpinned|pinned) \| bandwidth \(GB/s\) \| [0-9]" "$MD"
check "docs/benchmarks.md not touched by --quick" test ! "$OUT/benchmarks.md" -ef "$SOFTRNIC_SOURCE_DIR/docs/benchmarks.md"
if ls "$OUT"/img/*.png >/dev/null 2>&1; then
  log "plots: $(ls "$OUT"/img/*.png | xargs -n1 basename | tr '\n' ' ')"
else
  log "no plots (python3-matplotlib missing?)"
fi
log "PASS: quick benchmark report at $MD"
