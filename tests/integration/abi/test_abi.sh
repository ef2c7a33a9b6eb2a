#!/bin/bash
# Every ELF file (executables, libraries, python extension modules, UCX /
# libfabric / Open MPI / MPICH plugins) of Debian's RDMA consumers loads
# against softrnic's libraries with every symbol resolved:
#   1. check_abi.py: static check of every version requirement and every
#      imported symbol on libibverbs/librdmacm/libmlx5/libmlx4/libefa/libmana
#      against ours (same soname, same version), then `ldd -r` on each file
#      that NEEDs one of them;
#   2. the programs themselves: every pyverbs module imports, ucx_info loads
#      libuct_ib (and libuct_rdmacm), fi_info -l loads libfabric.
# A missing package is a failure, not a skip (scripts/install-deps.sh
# installs them all).
#
# usage: test_abi.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when everything loads, 1 otherwise, 2 on a usage error.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -d "$LIBDIR" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
LIBDIR=$(cd "$LIBDIR" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "FAIL: $PY not found (install python3)"; exit 1; }

fail=0
echo "== static check and ldd -r against $LIBDIR"
$PY "$HERE/check_abi.py" "$LIBDIR" || fail=1

run_lib() { env LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

echo "== pyverbs: import every extension module"
run_lib timeout 120 $PY "$HERE/import_pyverbs.py" || fail=1

echo "== ucx_info -d: libuct_ib and libuct_rdmacm load"
# UCX_MEM_EVENTS=no: UCX's malloc hooks and a preloaded sanitizer runtime
# (CI builds) do not mix; loading is what is tested here.
out=$(run_lib UCX_LOG_LEVEL=debug UCX_MEM_EVENTS=no timeout 120 ucx_info -d 2>&1)
rc=$?
bad=$(grep -E "dlopen\(.*libuct_(ib|rdmacm).*failed|version .* not found|undefined symbol" <<<"$out")
if (( rc != 0 )) || [[ -n "$bad" ]] ||
   ! grep -q "loading modules for uct_ib" <<<"$out"; then
  echo "FAIL ucx_info -d (exit $rc):"
  if [[ -n "$bad" ]]; then echo "$bad"; else tail -5 <<<"$out"; fi
  fail=1
else
  echo "PASS ucx_info -d loads libuct_ib"
fi

echo "== fi_info -l: libfabric loads"
out=$(run_lib timeout 120 fi_info -l 2>&1)
rc=$?
if (( rc != 0 )) || ! grep -q '^verbs:' <<<"$out"; then
  echo "FAIL fi_info -l (exit $rc):"
  tail -5 <<<"$out"
  fail=1
else
  echo "PASS fi_info -l lists the verbs provider"
fi

if (( fail )); then
  echo "FAIL: some Debian RDMA consumers do not load against $LIBDIR"
  exit 1
fi
echo "OK: every checked Debian RDMA consumer loads against $LIBDIR"
