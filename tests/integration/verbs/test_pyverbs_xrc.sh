#!/bin/bash
# Runs pyverbs_xrc.py (python3-pyverbs over softrnic's libibverbs.so.1):
# XRC domains, SRQs, send and receive QPs, traffic and the wrong-SRQ error,
# with the calls rdma-core's tests/test_xrc.py makes.
#
# usage: test_pyverbs_xrc.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 2 on a usage error, 77 (skip)
# when python3-pyverbs is not installed.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -f "$LIBDIR/libibverbs.so.1" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
PY=/usr/bin/python3
$PY -c "import pyverbs.xrcd" 2>/dev/null || { echo "python3-pyverbs not installed" >&2; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 $PY "$HERE/pyverbs_xrc.py"
