#!/bin/bash
# Debian's Open MPI (pml ucx, osc ucx) and MPICH (ch4:ucx), unmodified, run
# a small MPI program of the tests' own (mpi_check.c: point-to-point with
# verified data, Allreduce, passive-target MPI_Put/MPI_Get) with 2 and 4
# ranks, UCX restricted to softrnic's transports.
#
#   test_mpi.sh host    all ranks on this host: softrnic's shared-memory path
#   test_mpi.sh netns   ranks spread over two network namespaces ("hosts"),
#                       started through a remote-shell agent that enters the
#                       other namespace: RoCE v2 over UDP between them
#   test_mpi.sh cluster 12 ranks, 4 on each of three namespaces on a bridge,
#                       each with one IPv4 and one IPv6 address and no
#                       SOFTRNIC_* setting: every rank of a host at the
#                       host's address (the host NIC, docs/host-nic.md), UDP
#                       between hosts and shared memory within one
#
# Proof the bytes went through softrnic: every rank prints softrnic's
# counters at exit, and their sum must cover the bytes the program handed
# MPI for other ranks. Open MPI is given only its "self" BTL and the UCX
# PML/OSC, and UCX only softrnic's transports, so neither can fall back to
# TCP or shared memory of its own.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
source "$(dirname "$0")/middleware_lib.sh"
MODE=${1:?usage: test_mpi.sh host|netns|cluster|sealed}
# sealed: netns with sealed RC (docs/sealed.md) on every rank.
BASE=$MODE
[[ $MODE == sealed ]] && BASE=netns
softrnic_require_root
softrnic_require_cmd mpicc.openmpi mpirun.openmpi mpicc.mpich mpiexec.mpich

SRC="$(dirname "$0")/mpi_check.c"
mpicc.openmpi -O2 -Wall -Wextra -o "$SOFTRNIC_TMP/mpi_ompi" "$SRC" || die "mpicc.openmpi"
mpicc.mpich -O2 -Wall -Wextra -o "$SOFTRNIC_TMP/mpi_mpich" "$SRC" || die "mpicc.mpich"

# The launchers' own remote shell for "hosts" that are network namespaces:
# `agent HOST CMD...` runs CMD in the namespace whose veth has address HOST.
AGENT="$SOFTRNIC_TMP/netns-rsh"
case $MODE in
  host)
    HOSTS_OMPI="" HOSTS_MPICH="" ;;
  netns|sealed)
    A=sr_mpi_a B=sr_mpi_b IPA=10.234.0.1 IPB=10.234.0.2
    netns_pair_up $A $B $IPA $IPB || die "netns setup"
    # Only one process per address can own port 4791 (docs/addressing.md):
    # each rank of a "host" gets an address of its own (its local rank's),
    # as each would have its own NIC or IP on a real cluster.
    ip -n $A addr add 10.234.0.11/24 dev "$NETNS_IFACE" || die "second address in $A"
    ip -n $B addr add 10.234.0.12/24 dev "$NETNS_IFACE" || die "second address in $B"
    RANK_BIND="$SOFTRNIC_TMP/rank-bind"
    cat >"$RANK_BIND" <<'BIND_EOF'
#!/bin/bash
# rank-bind CMD...: CMD with SOFTRNIC_BIND = the local rank's address of veth0.
lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
addr=$(ip -4 -o addr show dev veth0 | awk '{print $4}' | cut -d/ -f1 | sed -n "$(( lr + 1 ))p")
[[ -n "$addr" ]] || { echo "rank-bind: no address for local rank $lr" >&2; exit 1; }
export SOFTRNIC_BIND=$addr
exec "$@"
BIND_EOF
    chmod +x "$RANK_BIND"
    cat >"$AGENT" <<AGENT_EOF
#!/bin/bash
# Open MPI: agent [options] HOST CMD; MPICH: agent HOST CMD
while [[ "\$1" == -* ]]; do shift; done
host=\$1; shift
case \$host in $IPA) ns=$A ;; $IPB) ns=$B ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns "$SOFTRNIC_TOOL" run -- bash -c "\$*"
AGENT_EOF
    chmod +x "$AGENT"
    export SOFTRNIC_TRANSPORT=udp
    if [[ $MODE == sealed ]]; then
      export SOFTRNIC_SEAL=require SOFTRNIC_SEAL_KEY=$SOFTRNIC_TMP/seal.key
      head -c 32 /dev/urandom >"$SOFTRNIC_SEAL_KEY" && chmod 600 "$SOFTRNIC_SEAL_KEY"
      SEAL_VARS=,SOFTRNIC_SEAL,SOFTRNIC_SEAL_KEY
    fi ;;
  cluster)
    unset SOFTRNIC_BIND SOFTRNIC_PORT SOFTRNIC_TRANSPORT SOFTRNIC_HOST_NIC
    C1=sr_mpc_1 C2=sr_mpc_2 C3=sr_mpc_3 IP1=10.236.0.1 IP2=10.236.0.2 IP3=10.236.0.3
    netns_bridge_up sr_mpc_sw "$C1:$IP1:fd36::1" "$C2:$IP2:fd36::2" "$C3:$IP3:fd36::3" ||
      die "bridge setup"
    A=$C1
    cat >"$AGENT" <<AGENT_EOF
#!/bin/bash
# Open MPI: agent [options] HOST CMD; MPICH: agent HOST CMD
while [[ "\$1" == -* ]]; do shift; done
host=\$1; shift
case \$host in $IP1) ns=$C1 ;; $IP2) ns=$C2 ;; $IP3) ns=$C3 ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns "$SOFTRNIC_TOOL" run -- bash -c "\$*"
AGENT_EOF
    chmod +x "$AGENT" ;;
  *) die "unknown mode $MODE" ;;
esac

# check_run NAME RANKS LOG: the program passed, and softrnic carried at least
# the bytes it reports handing to MPI for other ranks.
check_run() {
  local name=$1 ranks=$2 logf=$3
  grep -q "mpi_check: PASS ranks=$ranks " "$logf" || { tail -40 "$logf"; die "$name: no PASS"; }
  local moved; moved=$(sed -nE 's/.*mpi_check: PASS ranks=[0-9]+ bytes=([0-9]+).*/\1/p' "$logf")
  local n; n=$(grep -c '^softrnic tx_packets ' "$logf")
  (( n == ranks )) || { tail -40 "$logf"; die "$name: counters of $n processes, want $ranks"; }
  local carried; carried=$(softrnic_bytes "$logf")
  log "$name: $ranks ranks, program moved $moved bytes; softrnic: $(paths_used "$logf")"
  if [[ $MODE == sealed ]]; then
    # Every rank's QPs sealed, and nothing refused: no forged, replayed or
    # plain packet among them.
    (( $(counter_sum qps_sealed "$logf") > 0 )) || die "$name: no QP was sealed"
    (( $(counter_sum rx_sealed_packets "$logf") > 0 )) || die "$name: no sealed packet opened"
    local refused=$(( $(counter_sum rx_dropped_seal_auth "$logf") + $(counter_sum rx_dropped_unsealed "$logf") +
                      $(counter_sum rx_dropped_seal_unexpected "$logf") ))
    (( refused == 0 )) || die "$name: $refused packets refused by the seal"
    log "$name: $(counter_sum qps_sealed "$logf") QPs sealed, $(counter_sum rx_sealed_packets "$logf") sealed packets opened"
  fi
  case $BASE in
    host) (( $(counter_sum shm_direct_bytes "$logf") + $(counter_sum shm_tx_bytes "$logf") > 0 )) ||
            die "$name: nothing through softrnic's shared memory" ;;
    netns) (( $(counter_sum udp_tx_bytes "$logf") >= moved )) ||
            die "$name: UDP carried $(counter_sum udp_tx_bytes "$logf") bytes of $moved" ;;
    cluster)
      (( $(counter_sum udp_tx_bytes "$logf") > 0 )) || die "$name: nothing between hosts on UDP"
      (( $(counter_sum shm_direct_bytes "$logf") + $(counter_sum shm_tx_bytes "$logf") > 0 )) ||
        die "$name: nothing within a host through shared memory" ;;
  esac
  (( carried >= moved )) || die "$name: softrnic carried $carried bytes of $moved"
}

# launch NAME LOG PROGRAM LAUNCHER...: an MPI job under `softrnic run`; in
# netns mode started in namespace A, every rank through rank-bind.
launch() {
  local name=$1 logf=$2 prog=$3; shift 3
  local pre=("$SOFTRNIC_TOOL" run --) wrap=()
  if [[ $BASE == netns ]]; then pre=(ip netns exec $A "${pre[@]}"); wrap=("$RANK_BIND"); fi
  if [[ $MODE == cluster ]]; then pre=(ip netns exec $A "${pre[@]}"); fi
  run_t 180 "${pre[@]}" "$@" "${wrap[@]}" "$prog" >"$logf" 2>&1 ||
    { # UCX's own error line comes before a long backtrace: show it first.
      grep -m 10 -iE 'ucx +(error|fatal)|retry count|error:' "$logf"
      tail -40 "$logf"; die "$name failed ($MODE)"; }
}

RANKS=(2 4)
[[ $MODE == cluster ]] && RANKS=(12)
for ranks in "${RANKS[@]}"; do
  # ---- Open MPI: only its "self" BTL, UCX for everything between ranks
  ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe -np $ranks
        --mca pml ucx --mca osc ucx --mca btl self
        -x UCX_TLS -x UCX_NET_DEVICES -x SOFTRNIC_STATS -x SOFTRNIC_TRANSPORT)
  [[ $MODE == sealed ]] && ompi+=(-x SOFTRNIC_SEAL -x SOFTRNIC_SEAL_KEY)
  [[ $BASE == netns ]] &&
    ompi+=(--host "$IPA:$(( ranks / 2 )),$IPB:$(( ranks / 2 ))" --mca plm_rsh_agent "$AGENT"
           --mca oob_tcp_if_include "$NETNS_IFACE" --mca plm_rsh_no_tree_spawn 1)
  [[ $MODE == cluster ]] &&
    ompi+=(--host "$IP1:4,$IP2:4,$IP3:4" --mca plm_rsh_agent "$AGENT"
           --mca oob_tcp_if_include "$NETNS_IFACE" --mca plm_rsh_no_tree_spawn 1)
  launch "Open MPI $ranks ranks" "$SOFTRNIC_TMP/ompi-$ranks.log" "$SOFTRNIC_TMP/mpi_ompi" "${ompi[@]}"
  check_run "Open MPI" $ranks "$SOFTRNIC_TMP/ompi-$ranks.log"
  # ---- MPICH (hydra; Debian's MPICH has only the UCX device)
  mpich=(mpiexec.mpich -n $ranks -genvlist UCX_TLS,UCX_NET_DEVICES,SOFTRNIC_STATS,SOFTRNIC_TRANSPORT${SEAL_VARS:-})
  [[ $BASE == netns ]] &&
    mpich+=(-hosts "$IPA:$(( ranks / 2 )),$IPB:$(( ranks / 2 ))" -launcher ssh -launcher-exec "$AGENT"
            -iface "$NETNS_IFACE")
  [[ $MODE == cluster ]] &&
    mpich+=(-hosts "$IP1:4,$IP2:4,$IP3:4" -launcher ssh -launcher-exec "$AGENT" -iface "$NETNS_IFACE")
  launch "MPICH $ranks ranks" "$SOFTRNIC_TMP/mpich-$ranks.log" "$SOFTRNIC_TMP/mpi_mpich" "${mpich[@]}"
  check_run "MPICH" $ranks "$SOFTRNIC_TMP/mpich-$ranks.log"
done
log "PASS: Open MPI and MPICH, ${RANKS[*]} ranks, over softrnic ($MODE)"
