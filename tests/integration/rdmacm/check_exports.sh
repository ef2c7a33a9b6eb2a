#!/bin/bash
# Verifies that softrnic's librdmacm.so.1 exports every symbol Debian's
# rdmacm-utils, perftest and qperf import from librdmacm.so.1, under the exact
# version node (RDMACM_1.0..1.3), with SONAME librdmacm.so.1, that it also
# exports everything the real librdmacm exports, and that each consumer loads
# (ldd resolves it to our library, BIND_NOW: no missing version).
#
# usage: check_exports.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 ok, 1 on a miss, 2 usage error, 77 skip (tool or binaries missing).
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -d "$LIBDIR" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
command -v objdump >/dev/null || { echo "objdump not found" >&2; exit 77; }
LIB=$LIBDIR/librdmacm.so.1
[[ -f "$LIB" ]] || { echo "MISSING LIBRARY $LIB"; exit 1; }

consumers=()
for f in /usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/cmtime /usr/bin/rdma_* \
         /usr/bin/rstream /usr/bin/rcopy /usr/bin/udpong /usr/bin/riostream /usr/bin/ib_* \
         /usr/bin/qperf; do
  [[ -f "$f" && "$(head -c4 "$f" | tr -d "\000" | tail -c3)" == ELF ]] || continue
  objdump -T "$f" | grep -q 'RDMACM_' && consumers+=("$f")
done
if (( ${#consumers[@]} == 0 )); then
  echo "no librdmacm consumers found (install rdmacm-utils perftest qperf)" >&2
  exit 77
fi

fail=0
soname=$(readelf -d "$LIB" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ "$soname" == librdmacm.so.1 ]] || { echo "BAD SONAME: '$soname'"; fail=1; }

declare -A provided
while read -r name ver; do provided["$name@$ver"]=1; done < <(
  objdump -T "$LIB" | awk '$0 !~ /\*UND\*/ && NF >= 7 { v=$(NF-1); gsub(/[()]/,"",v); print $NF, v }')

total=0
for f in "${consumers[@]}"; do
  while read -r name ver; do
    total=$((total + 1))
    if [[ -z "${provided[$name@$ver]:-}" ]]; then
      echo "MISSING $name@$ver (imported by $f)"
      fail=1
    fi
  done < <(objdump -T "$f" | awk '/\*UND\*/ && /RDMACM_/ { v=$(NF-1); gsub(/[()]/,"",v); print $NF, v }' | sort -u)
done

# Everything the real library exports (so programs we did not list load too).
real=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
if [[ -f "$real" ]]; then
  while read -r name ver; do
    [[ "$name" == "$ver" ]] && continue
    if [[ -z "${provided[$name@$ver]:-}" ]]; then
      echo "MISSING $name@$ver (exported by the system librdmacm)"
      fail=1
    fi
  done < <(objdump -T "$real" | awk '$0 !~ /\*UND\*/ && NF >= 7 && /RDMACM_/ { v=$(NF-1); gsub(/[()]/,"",v); print $NF, v }')
fi

# Each consumer resolves librdmacm.so.1 (and libibverbs.so.1) to ours.
for f in "${consumers[@]}"; do
  out=$(LD_LIBRARY_PATH="$LIBDIR" LD_BIND_NOW=1 ldd "$f" 2>&1)
  if ! grep -q "librdmacm.so.1 => $LIBDIR/librdmacm.so.1" <<<"$out" &&
     ! grep -q "librdmacm.so.1 => $(readlink -f "$LIBDIR")/librdmacm.so.1" <<<"$out"; then
    echo "LOAD $f does not resolve librdmacm.so.1 to $LIBDIR"; fail=1
  fi
  if grep -qE 'not found|version .* not found' <<<"$out"; then
    echo "LOAD $f: $(grep -E 'not found' <<<"$out" | head -3)"; fail=1
  fi
done

echo "checked $total imports of ${#consumers[@]} consumers against $LIB"
exit $fail
