#!/bin/bash
# Verifies that every symbol the Debian RDMA binaries (and the system
# librdmacm, which our librdmacm replaces but whose needs show what any
# librdmacm imports) take from libibverbs.so.1 / libmlx5.so.1 / libefa.so.1
# is exported by softrnic's libraries under the exact version node.
# Debian binaries are linked BIND_NOW: a single miss means "cannot load".
#
# usage: check_exports.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when all imports resolve, 1 on any miss, 2 on a usage error, 77 (skip) when a tool is missing.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -d "$LIBDIR" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
command -v objdump >/dev/null || { echo "objdump not found" >&2; exit 77; }

consumers=()
for f in /usr/bin/ibv_* /usr/bin/ib_* /usr/bin/qperf /usr/bin/rping /usr/bin/ucmatose \
         /usr/bin/udaddy /usr/bin/cmtime /usr/bin/rdma_* /usr/bin/rstream /usr/bin/rcopy \
         /usr/bin/udpong /usr/bin/riostream /usr/lib/x86_64-linux-gnu/librdmacm.so.1; do
  [[ -f "$f" && "$(head -c4 "$f" | tr -d "\000" | tail -c3)" == ELF ]] && consumers+=("$f")
done
if (( ${#consumers[@]} == 0 )); then
  echo "no RDMA binaries found (install ibverbs-utils perftest rdmacm-utils qperf)" >&2
  exit 77
fi

# "name version" for every defined dynamic symbol a library exports; a
# hidden (non-default) version in parentheses counts too: the loader binds it.
exports() {
  objdump -T "$1" | awk '$0 !~ /\*UND\*/ && NF >= 7 {
      v = $(NF-1); gsub(/[()]/, "", v); print $NF, v }' | sort -u
}

fail=0
total=0
declare -A provided
for lib in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
  if [[ ! -f "$LIBDIR/$lib" ]]; then
    echo "MISSING LIBRARY $LIBDIR/$lib"
    fail=1
    continue
  fi
  soname=$(readelf -d "$LIBDIR/$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  if [[ "$soname" != "$lib" ]]; then
    echo "BAD SONAME $lib: '$soname'"
    fail=1
  fi
  while read -r name ver; do provided["$name@$ver"]=1; done < <(exports "$LIBDIR/$lib")
done

# Which library each version prefix belongs to, for readable messages.
owner() {
  case "$1" in
    IBVERBS_*) echo libibverbs.so.1 ;;
    MLX5_*) echo libmlx5.so.1 ;;
    EFA_*) echo libefa.so.1 ;;
  esac
}

declare -A seen
for bin in "${consumers[@]}"; do
  while read -r name ver; do
    [[ -z "$name" ]] && continue
    key="$name@$ver"
    total=$((total + 1))
    if [[ -z "${provided[$key]:-}" ]]; then
      if [[ -z "${seen[$key]:-}" ]]; then
        echo "MISSING $key (from $(owner "$ver")) needed by $bin"
        seen[$key]=1
      fi
      fail=1
    fi
  done < <(objdump -T "$bin" | awk '/\*UND\*/ && ($(NF-1) ~ /^\(?(IBVERBS|MLX5|EFA)_/) {
              v = $(NF-1); gsub(/[()]/, "", v); print $NF, v }')
done

# Symbols must appear once, each under one default version (no accidental
# C++ or engine exports).
extra=$(objdump -T "$LIBDIR/libibverbs.so.1" | awk '$0 !~ /\*UND\*/ && NF >= 7 && $NF ~ /^_Z/' | head -5)
if [[ -n "$extra" ]]; then
  echo "UNEXPECTED C++ EXPORTS in libibverbs.so.1:"
  echo "$extra"
  fail=1
fi

uniq_needed=$(for bin in "${consumers[@]}"; do objdump -T "$bin" | awk '/\*UND\*/ && ($(NF-1) ~ /^\(?(IBVERBS|MLX5|EFA)_/) {print $NF, $(NF-1)}'; done | sort -u | wc -l)
if (( fail )); then
  echo "FAIL: some imports of ${#consumers[@]} binaries do not resolve against $LIBDIR"
  exit 1
fi
echo "OK: ${uniq_needed} distinct versioned imports of ${#consumers[@]} binaries resolve against $LIBDIR"
exit 0
