#!/bin/bash
# Runs pyverbs_parent_domain.py (python3-pyverbs over softrnic's
# libibverbs.so.1): parent domains with custom allocators, with the calls
# rdma-core's tests/test_parent_domain.py makes, on this host over UDP.
#
# usage: test_pyverbs_parent_domain.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 2 on a usage error, 77 (skip)
# when python3-pyverbs is not installed.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -f "$LIBDIR/libibverbs.so.1" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
PY=/usr/bin/python3
$PY -c "import pyverbs.pd" 2>/dev/null || { echo "python3-pyverbs not installed" >&2; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
# Sanitizer builds preload the ASan runtime into python (tests/integration/
# CMakeLists.txt). Its __cxa_throw interceptor binds the real function when
# it starts, and python links no libstdc++: the std::bad_alloc a NULL from
# the allocator becomes (domain_allocator.cc) would then stop ASan with
# "CHECK failed ... real___cxa_throw". Preloading libstdc++ too gives it one.
if [[ "${LD_PRELOAD:-}" == *libasan* ]]; then
  stdcxx=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null)
  [[ -f "$stdcxx" ]] && export LD_PRELOAD="$LD_PRELOAD:$(realpath "$stdcxx")"
fi
# One process, two QPs on one device: over UDP (RoCE v2 through the
# kernel). The shared-memory path needs two processes: pyverbs_memory.py
# (verbs_memory_features_pyverbs) makes its responder's QP and CQ on a
# parent domain with allocators, on one host and between namespaces.
SOFTRNIC_TRANSPORT=udp LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  timeout 120 $PY "$HERE/pyverbs_parent_domain.py"
