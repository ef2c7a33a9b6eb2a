#!/bin/bash
# Runs pyverbs_device.py (python3-pyverbs over softrnic's libibverbs.so.1):
# vendor id, node GUID across two processes, RELAXED_ORDERING, ECE.
#
# usage: test_pyverbs_device.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 2 on a usage error, 77 (skip)
# when python3-pyverbs is not installed.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -f "$LIBDIR/libibverbs.so.1" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
PY=/usr/bin/python3
$PY -c "import pyverbs.device" 2>/dev/null || { echo "python3-pyverbs not installed" >&2; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 $PY "$HERE/pyverbs_device.py"
