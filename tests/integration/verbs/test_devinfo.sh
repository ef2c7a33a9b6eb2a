#!/bin/bash
# Runs Debian's unmodified ibv_devices and ibv_devinfo (-v) over softrnic's
# libibverbs.so.1 and checks what they print: one device "softrnic0", our own
# vendor_part_id (not a ConnectX id, so perftest posts with ibv_post_send),
# vendor id, a node GUID the same in every process of the namespace,
# port ACTIVE on an Ethernet link layer, and every GID listed as an
# IPv4-mapped RoCE v2 GID (gid_tbl_len of them).
#
# usage: test_devinfo.sh [LIBDIR]     (default: $SOFTRNIC_LIB_DIR)
# exit 0 when all checks pass, 1 otherwise, 2 on a usage error, 77 (skip) when a tool is missing.
set -u
LIBDIR=${1:-${SOFTRNIC_LIB_DIR:-}}
if [[ -z "$LIBDIR" || ! -f "$LIBDIR/libibverbs.so.1" ]]; then
  echo "usage: $0 LIBDIR (or set SOFTRNIC_LIB_DIR)" >&2
  exit 2
fi
command -v ibv_devinfo >/dev/null || { echo "ibverbs-utils not installed" >&2; exit 77; }
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

fail=0
check() {  # check DESCRIPTION COMMAND...: passes when COMMAND succeeds
  local what=$1
  shift
  if "$@"; then
    echo "PASS $what"
  else
    echo "FAIL $what"
    fail=1
  fi
}

# The loaded library must be ours, not the system one.
check "ibv_devinfo loads softrnic's libibverbs" \
  bash -c "ldd \$(command -v ibv_devinfo) | grep -q '$LIBDIR/libibverbs.so.1'"

devices=$(timeout 20 ibv_devices 2>&1)
rc=$?
check "ibv_devices exits 0" test $rc -eq 0
check "ibv_devices lists softrnic0 with a GUID" \
  grep -Eq '^\s+softrnic0\s+[0-9a-f]{16}$' <<<"$devices"
check "ibv_devices lists exactly one device" \
  test "$(grep -Ec '^\s+\S+\s+[0-9a-f]{16}$' <<<"$devices")" -eq 1

info=$(timeout 20 ibv_devinfo 2>&1)
rc=$?
check "ibv_devinfo exits 0" test $rc -eq 0
check "ibv_devinfo: hca_id softrnic0" grep -q 'hca_id:[[:space:]]*softrnic0' <<<"$info"
check "ibv_devinfo: vendor_part_id 24311 (0x5ef7)" \
  grep -Eq 'vendor_part_id:[[:space:]]*24311$' <<<"$info"
check "ibv_devinfo: vendor_id 0x025352, softrnic's own (issue 15)" \
  grep -Eq 'vendor_id:[[:space:]]*0x0*25352$' <<<"$info"
# The node GUID is the host's, not the process's: another process (with
# another per-process loopback GID) reports the same one, and ibv_devices
# lists it; a process in another network namespace gets another one.
guid_of() { sed -n 's/.*node_guid:[[:space:]]*\([0-9a-f:]*\).*/\1/p' <<<"$1"; }
guid=$(guid_of "$info")
guid2=$(guid_of "$(timeout 20 ibv_devinfo 2>&1)")
check "ibv_devinfo: a node_guid ($guid)" grep -Eq '^[0-9a-f]{4}(:[0-9a-f]{4}){3}$' <<<"$guid"
check "ibv_devinfo: the same node_guid in a second process ($guid2)" test "$guid" = "$guid2"
check "ibv_devices: the same GUID" grep -q "${guid//:/}" <<<"$devices"
check "ibv_devinfo: node_guid locally administered, not 0200:5e00 (pid-derived)" \
  bash -c '[[ $(( 0x${1:0:2} & 3 )) -eq 2 && ${1:0:9} != 0200:5e00 ]]' _ "$guid"
if unshare -n true 2>/dev/null; then
  other_ns=$(unshare -n bash -c 'ip link set lo up && timeout 20 ibv_devinfo' 2>&1)
  guid_ns=$(guid_of "$other_ns")
  check "another network namespace: another node_guid ($guid_ns)" \
    bash -c '[[ -n $1 && $1 != "$2" ]]' _ "$guid_ns" "$guid"
else
  echo "SKIP another network namespace: unshare -n not permitted"
fi
check "ibv_devinfo: port ACTIVE" grep -q 'state:[[:space:]]*PORT_ACTIVE (4)' <<<"$info"
check "ibv_devinfo: link_layer Ethernet" grep -q 'link_layer:[[:space:]]*Ethernet' <<<"$info"
check "ibv_devinfo: phys_port_cnt 1" grep -Eq 'phys_port_cnt:[[:space:]]*1$' <<<"$info"
# SOFTRNIC_MTU sets the port's active MTU (docs/user-guide.md); a value
# that is not an IB MTU is refused with a message and the default kept.
info4k=$(SOFTRNIC_MTU=4096 timeout 20 ibv_devinfo 2>&1)
check "SOFTRNIC_MTU=4096: active_mtu 4096 (5)" grep -Eq 'active_mtu:[[:space:]]*4096 \(5\)' <<<"$info4k"

verbose=$(timeout 20 ibv_devinfo -v 2>&1)
rc=$?
check "ibv_devinfo -v exits 0" test $rc -eq 0
# Without SOFTRNIC_MTU the active MTU follows the links (src/engine/port_mtu.h):
# the largest IB MTU whose packets (payload + 88 header bytes) fit the
# smallest MTU of the interfaces that are up with an address (loopback
# among them: the per-process 127.x address). Every address the automatic
# scheme may bind counts, not only those this process got (another process
# may hold a host address's port), so every process of the namespace
# derives the same MTU; test_port_mtu.sh checks the mapping case by case.
link_mtu=$(ip -o addr show up | awk '{print $2}' | sort -u |
  while read -r ifc; do cat "/sys/class/net/${ifc%@*}/mtu"; done | sort -n | head -1)
want_mtu=256
for m in 4096 2048 1024 512; do
  (( m + 88 <= ${link_mtu:-1500} )) && { want_mtu=$m; break; }
done
check "ibv_devinfo -v: active_mtu $want_mtu (smallest link MTU $link_mtu)" \
  grep -Eq "active_mtu:[[:space:]]*$want_mtu " <<<"$verbose"
info_bad=$(SOFTRNIC_MTU=1500 timeout 20 ibv_devinfo -v 2>&1)
check "SOFTRNIC_MTU=1500: refused, active_mtu stays the derived $want_mtu" \
  bash -c 'grep -q "ignoring SOFTRNIC_MTU=1500" <<<"$1" && grep -Eq "active_mtu:[[:space:]]*$2 " <<<"$1"' _ "$info_bad" "$want_mtu"
gid_tbl_len=$(sed -n 's/.*gid_tbl_len:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$verbose")
check "ibv_devinfo -v: gid_tbl_len >= 1 (got '${gid_tbl_len}')" test "${gid_tbl_len:-0}" -ge 1
ngids=$(grep -Ec 'GID\[ *[0-9]+\]:' <<<"$verbose")
check "ibv_devinfo -v: lists gid_tbl_len GIDs ($ngids)" test "$ngids" -eq "${gid_tbl_len:-0}"
# IPv4 GIDs are IPv4-mapped; the host's IPv6 addresses have GIDs of their own
# (docs/addressing.md) when this process holds their endpoint (another
# softrnic process running at the same time may hold them), all RoCE v2.
nv4=$(grep -Ec 'GID\[ *[0-9]+\]:[[:space:]]*::ffff:[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+, RoCE v2$' <<<"$verbose")
nv6=$(grep -Ec 'GID\[ *[0-9]+\]:[[:space:]]*[0-9a-f:]+, RoCE v2$' <<<"$verbose")
check "ibv_devinfo -v: IPv4-mapped GIDs ($nv4) + IPv6 GIDs ($nv6) are every GID, all RoCE v2" \
  test $((nv4 + nv6)) -eq "$ngids"
check "ibv_devinfo -v: a per-process loopback GID ::ffff:127.x" \
  grep -Eq 'GID\[ *[0-9]+\]:[[:space:]]*::ffff:127\.' <<<"$verbose"
check "ibv_devinfo -v: max_qp_rd_atom > 0" grep -Eq 'max_qp_rd_atom:[[:space:]]*[1-9]' <<<"$verbose"
check "ibv_devinfo -v: max_msg_sz" grep -Eq 'max_msg_sz:[[:space:]]*0x[1-9a-f]' <<<"$verbose"
check "ibv_devinfo -v: num_comp_vectors 1" grep -Eq 'num_comp_vectors:[[:space:]]*1$' <<<"$verbose"
check "ibv_devinfo -v: atomic_cap ATOMIC_HCA" grep -q 'atomic_cap:[[:space:]]*ATOMIC_HCA' <<<"$verbose"
# XRC (issue 15, engine/queues/xrc.cc): IBV_DEVICE_XRC among device_cap_flags.
check "ibv_devinfo -v: device_cap_flags lists XRC" \
  bash -c 'sed -n "/device_cap_flags:/,/max_sge:/p" <<<"$1" | grep -Eq "^[[:space:]]+XRC$"' _ "$verbose"

# Selecting the device by name and a port that does not exist.
check "ibv_devinfo -d softrnic0" bash -c 'timeout 20 ibv_devinfo -d softrnic0 >/dev/null 2>&1'
check "ibv_devinfo -d nosuchdev fails" bash -c '! timeout 20 ibv_devinfo -d nosuchdev >/dev/null 2>&1'

if (( fail )); then
  echo "--- ibv_devinfo -v output ---"
  echo "$verbose"
  exit 1
fi
echo "devinfo: all checks passed"
exit 0
