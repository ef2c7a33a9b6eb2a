#!/usr/bin/env bash
# What many QPs cost one device (issue 17): runs bench/scale/qp_scale over
# softrnic's libibverbs RUNS times and prints each table (docs/benchmarks.md,
# "Scale"), then bench/scale/reg_cost (ibv_reg_mr / ibv_dereg_mr of 1 GiB,
# RUNS repetitions). Unpinned: the application thread and the device's progress
# thread of one process share the 2 vCPUs as the scheduler places them.
#
#   bench/scale/run_scale.sh [BUILD_DIR] [RUNS] [qp_scale args...]
#     BUILD_DIR  default build (RelWithDebInfo; targets softrnic_verbs_libs qp_scale reg_cost)
#     RUNS       default 3
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${1:-build}
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
RUNS=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
[[ -x "$BUILD_DIR/bin/qp_scale" && -x "$BUILD_DIR/bin/reg_cost" && -e "$BUILD_DIR/lib/libibverbs.so.1" ]] ||
  cmake --build "$BUILD_DIR" --target softrnic_verbs_libs qp_scale reg_cost
for (( i = 1; i <= RUNS; i++ )); do
  echo "## run $i of $RUNS ($(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
  LD_LIBRARY_PATH="$BUILD_DIR/lib" timeout 900 "$BUILD_DIR/bin/qp_scale" "$@"
done
echo "## memory registration ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
LD_LIBRARY_PATH="$BUILD_DIR/lib" timeout 900 "$BUILD_DIR/bin/reg_cost" -s 1024 -r "$RUNS"
