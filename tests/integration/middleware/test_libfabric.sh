#!/bin/bash
# libfabric 1.17 (Debian's libfabric1, libfabric-bin), unmodified, over
# softrnic: `fi_info -p verbs` lists softrnic0, and fi_pingpong completes
# with the verbs provider's FI_EP_MSG endpoints (rdma_cm) and with
# "verbs;ofi_rxm" FI_EP_RDM endpoints.
#
#   test_libfabric.sh host    both on this host: shared-memory path
#   test_libfabric.sh netns   two network namespaces: RoCE v2 over UDP
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
source "$(dirname "$0")/middleware_lib.sh"
MODE=${1:?usage: test_libfabric.sh host|netns}
softrnic_require_root
softrnic_require_cmd fi_info fi_pingpong
softrnic_require_lib

case $MODE in
  host)
    SRV=("$SOFTRNIC_TOOL" run --) CLI=("$SOFTRNIC_TOOL" run --) NS_SERVER=""
    # The address rdma_cm resolves to softrnic's device: a host address it
    # binds, or 127.0.0.1 when the host has none besides loopback.
    SERVER_IP=$(ip -4 -o addr show scope global up | awk '{print $4}' | cut -d/ -f1 | head -1)
    SERVER_IP=${SERVER_IP:-127.0.0.1} ;;
  netns)
    A=sr_fi_a B=sr_fi_b IPA=10.235.0.1 IPB=10.235.0.2
    netns_pair_up $A $B $IPA $IPB || die "netns setup"
    SRV=(ip netns exec $A "$SOFTRNIC_TOOL" run --) CLI=(ip netns exec $B "$SOFTRNIC_TOOL" run --)
    NS_SERVER=$A SERVER_IP=$IPA
    export SOFTRNIC_TRANSPORT=udp ;;
  *) die "unknown mode $MODE" ;;
esac

info=$("${SRV[@]}" fi_info -p verbs 2>&1) || { echo "$info" | tail; die "fi_info -p verbs failed"; }
echo "$info" | grep -q "domain: softrnic0$" || { echo "$info"; die "fi_info: no softrnic0 domain"; }
for ep in FI_EP_MSG FI_EP_RDM; do
  echo "$info" | grep -q "type: $ep" || die "fi_info: no $ep endpoint"
done
log "fi_info -p verbs: softrnic0 with FI_EP_MSG and FI_EP_RDM"

STATS=()
PORT=$(( 40000 + $$ % 10000 ))
# pingpong NAME PROVIDER EP: one fi_pingpong server/client pair, sizes from
# 64 B to 1 MiB, 50 iterations each, data checked (-c).
pingpong() {
  local name=$1 prov=$2 ep=$3
  PORT=$(( PORT + 1 ))
  start_bg "srv-$name" 90 "${SRV[@]}" fi_pingpong -p "$prov" -e "$ep" -B $PORT -I 50 -S all -c
  wait_for_port ${NS_SERVER:+-n $NS_SERVER} -p "srv-$name" $PORT 20 ||
    { bg_log "srv-$name" | tail; die "$name: server did not start"; }
  local out rc=0
  out=$(run_t 90 "${CLI[@]}" fi_pingpong -p "$prov" -e "$ep" -P $PORT -I 50 -S all -c "$SERVER_IP" \
        2>"$SOFTRNIC_TMP/cli-$name.err") || rc=$?
  (( rc == 0 )) || { echo "$out" | tail; grep -v '^softrnic ' "$SOFTRNIC_TMP/cli-$name.err" | tail; die "$name: client exit $rc"; }
  wait_bg "srv-$name" 20 || { bg_log "srv-$name" | grep -v '^softrnic ' | tail; die "$name: server failed"; }
  echo "$out" | grep -qE "^1m +50 " || { echo "$out"; die "$name: no 1 MiB result"; }
  log "$name: $(echo "$out" | grep -E '^(64|4k|64k|1m) ' | awk '{printf "%s %s us %s MB/s; ", $1, $7, $6}')"
  STATS+=("$(bg_log_file "srv-$name")" "$SOFTRNIC_TMP/cli-$name.err")
}
pingpong msg verbs msg
pingpong rdm "verbs;ofi_rxm" rdm

# Both directions together carried at least the 1 MiB messages once each way.
FLOOR=$(( 2 * 2 * 50 * 1048576 ))
total=$(softrnic_bytes "${STATS[@]}")
log "softrnic counters: $(paths_used "${STATS[@]}")"
if [[ $MODE == netns ]]; then
  (( $(counter_sum udp_tx_bytes "${STATS[@]}") >= FLOOR )) || die "UDP carried less than $FLOOR bytes"
fi
(( total >= FLOOR )) || die "softrnic carried $total bytes, less than $FLOOR"
log "PASS: libfabric verbs (msg) and verbs;ofi_rxm (rdm) over softrnic ($MODE)"
