#!/usr/bin/env bash
# Placed WRITEs (docs/shm.md, "Partly shared targets"): 64 KiB RDMA WRITE
# bandwidth into a same-host peer's region that starts on a page boundary
# against one that starts 64 bytes past it, alternated, RUNS rounds; and
# the unaligned case with the direct path off (SOFTRNIC_SHM_DIRECT=0: every
# byte through the ring, what softrnic did before placement). Unpinned:
# requester, its engine thread and the target's engine thread share the
# two CPUs as the scheduler likes.
#
#   [MTU=4096] [IMM=1] bench/shm/run_placed.sh [BUILD_DIR] [RUNS] [SIZE]
# MTU: the QPs' path MTU (default the port's active MTU, as perftest).
# IMM=1: WRITE_WITH_IMMs, whose target polls their receive completions
# (its CPU figure is then its polling loop's).
# Prints one line per run and the medians (GB/s, and CPU ms per GB moved
# of each process).
set -u
BUILD=${1:-build}
RUNS=${2:-5}
SIZE=${3:-65536}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
bin=$(mktemp /tmp/placed_write_bw.XXXXXX)
trap 'rm -f "$bin" "$bin.out"' EXIT
cc -O2 -o "$bin" "$ROOT/bench/shm/placed_write_bw.c" -libverbs || exit 1
export LD_LIBRARY_PATH="$BUILD/lib" SOFTRNIC_TRANSPORT=shm
: >"$bin.out"
for ((i = 0; i < RUNS; i++)); do
  for mode in aligned unaligned ring; do
    case $mode in
      aligned) line=$(timeout 120 "$bin" 0 "$SIZE") ;;
      unaligned) line=$(timeout 120 "$bin" 64 "$SIZE") ;;
      ring) line=$(SOFTRNIC_SHM_DIRECT=0 timeout 120 "$bin" 64 "$SIZE") ;;
    esac
    echo "$mode $line" | tee -a "$bin.out"
  done
done
python3 - "$bin.out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 11: continue
    rows.setdefault(f[0], []).append((float(f[6]), float(f[8]), float(f[10])))
med = {m: [statistics.median(c) for c in zip(*v)] for m, v in rows.items()}
for m, (gbps, child, parent) in med.items():
    print(f"median {m}: {gbps:.2f} GB/s (min {min(r[0] for r in rows[m]):.2f}, max {max(r[0] for r in rows[m]):.2f}), "
          f"target CPU {child:.0f} ms/GB, requester CPU {parent:.0f} ms/GB")
if "aligned" in med and "unaligned" in med:
    print(f"unaligned / aligned: {med['unaligned'][0] / med['aligned'][0]:.2f}x")
if "ring" in med and "unaligned" in med:
    print(f"unaligned placed / through the ring: {med['unaligned'][0] / med['ring'][0]:.2f}x")
PY
