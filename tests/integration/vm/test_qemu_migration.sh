#!/bin/bash
# QEMU RDMA live migration between two hosts (network namespaces), QEMU as
# Debian ships it, under `softrnic run` (issue 44, docs/storage.md).
#
#   test_qemu_migration.sh
#
# A TCG guest of 256 MiB whose memory from 16 MiB on holds a 192 MiB
# pattern (QEMU's loader device; every page names itself) runs its firmware
# in namespace A and migrates over `rdma:` to a QEMU started with
# `-incoming rdma:` in namespace B: once plain, once with rdma-pin-all. The
# judge (qmp_migrate.py): query-migrate says completed, the destination
# runs, and its memory over the pattern's range, saved with pmemsave, equals
# the pattern byte for byte (the firmware lives below 16 MiB and at the top
# of memory, outside that range). softrnic's counters show the bytes went
# over UDP.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
source "$SOFTRNIC_SOURCE_DIR/tests/integration/middleware/middleware_lib.sh"
softrnic_require_root
softrnic_require_cmd qemu-system-x86_64
softrnic_require_lib
HERE=$(cd "$(dirname "$0")" && pwd)

A=sr_mig_a B=sr_mig_b IPA=10.238.0.1 IPB=10.238.0.2
netns_pair_up $A $B $IPA $IPB || die "netns setup"
export SOFTRNIC_TRANSPORT=udp
PATTERN="$SOFTRNIC_TMP/pattern.bin" ADDR=0x1000000
"$SOFTRNIC_PYTHON" "$HERE/gen_pattern.py" "$PATTERN" 192 || die "pattern"
QEMU=(qemu-system-x86_64 -machine pc -accel tcg -m 256M -nodefaults -display none
      -device "loader,file=$PATTERN,addr=$ADDR")

STATS=()
migrate() {  # migrate NAME PIN_ALL PORT
  local name=$1 pin=$2 port=$3
  start_bg "dst-$name" 120 ip netns exec $B "$SOFTRNIC_TOOL" run -- "${QEMU[@]}" \
    -qmp "unix:$SOFTRNIC_TMP/dst-$name.sock,server=on,wait=off" -incoming "rdma:$IPB:$port"
  start_bg "src-$name" 120 ip netns exec $A "$SOFTRNIC_TOOL" run -- "${QEMU[@]}" \
    -qmp "unix:$SOFTRNIC_TMP/src-$name.sock,server=on,wait=off"
  wait_until 20 test -S "$SOFTRNIC_TMP/dst-$name.sock" -a -S "$SOFTRNIC_TMP/src-$name.sock" ||
    { bg_log "src-$name" | tail -3; bg_log "dst-$name" | tail -3; die "$name: QEMU did not start"; }
  local out rc=0
  out=$(run_t 90 "$SOFTRNIC_PYTHON" "$HERE/qmp_migrate.py" "$SOFTRNIC_TMP/src-$name.sock" \
        "$SOFTRNIC_TMP/dst-$name.sock" "rdma:$IPB:$port" "$pin" "$PATTERN" $ADDR \
        "$SOFTRNIC_TMP/dump-$name.bin" 2>&1) || rc=$?
  wait_bg "src-$name" 20 || true
  wait_bg "dst-$name" 20 || true
  (( rc == 0 )) || { echo "$out"; bg_log "src-$name" | grep -v '^softrnic ' | tail -5;
                     bg_log "dst-$name" | grep -v '^softrnic ' | tail -5; die "$name: $out"; }
  log "$name: $out"
  STATS+=("$(bg_log_file "src-$name")" "$(bg_log_file "dst-$name")")
}
migrate plain 0 4444
migrate pin-all 1 4445

FLOOR=$(( 2 * 192 * 1048576 ))
log "softrnic counters: $(paths_used "${STATS[@]}")"
(( $(counter_sum udp_tx_bytes "${STATS[@]}") >= FLOOR )) || die "UDP carried less than $FLOOR bytes"
log "PASS: QEMU RDMA live migration across namespaces, plain and rdma-pin-all"
