# Shared helpers of the middleware tests (sourced after common.sh).
#
# Every middleware process runs under `softrnic run` (tools/softrnic_run.cc),
# which sets LD_LIBRARY_PATH to softrnic's libraries and gives the process
# the /dev/infiniband and /sys/class/infiniband view UCX and libfabric check.
# Each process also prints softrnic's counters at exit (SOFTRNIC_STATS=1),
# which the tests add up to show the bytes went through softrnic.

SOFTRNIC_TOOL="$SOFTRNIC_BUILD_DIR/bin/softrnic"
[[ -x "$SOFTRNIC_TOOL" ]] || die "softrnic tool not built: $SOFTRNIC_TOOL"
export SOFTRNIC_STATS=1

# UCX may use softrnic's transports only: RC (with UD for its wire-up, UCX's
# "rc_v" alias), UD, and UCX's in-process loopback for a rank's messages to
# itself. No tcp, posix, sysv, cma: nothing of UCX's own can carry the data.
export UCX_TLS=rc_v,ud_v,self
export UCX_NET_DEVICES=softrnic0:1
# Some UCX warnings name a missing feature that is not an error (e.g. no
# GPU memory types): keep them, but keep the log readable.
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-warn}

# sr CMD...: CMD under `softrnic run`. In a network namespace the tests run
# `ip netns exec NS softrnic run CMD`, in that order: ip netns exec remounts
# /sys, which would hide the view.
sr() { "$SOFTRNIC_TOOL" run -- "$@"; }

# counter_sum NAME FILE...: the sum of softrnic counter NAME over every
# "softrnic NAME value" line in FILEs (one per process that exited).
counter_sum() {
  local name=$1; shift
  awk -v n="$name" '$1 == "softrnic" && $2 == n { s += $3 } END { printf "%.0f\n", s }' "$@"
}

# softrnic_bytes FILE...: bytes that left through softrnic on any path: UDP
# datagram bytes, packet bytes through shared-memory rings, bytes of direct
# one-sided operations on a peer's memory, and the bytes placed WRITEs put
# into a peer's shared pages (the rest of such a WRITE is in shm_tx_bytes).
softrnic_bytes() {
  echo $(( $(counter_sum udp_tx_bytes "$@") + $(counter_sum shm_tx_bytes "$@") +
           $(counter_sum shm_direct_bytes "$@") + $(counter_sum shm_placed_write_bytes "$@") ))
}

# paths_used FILE...: "udp=<bytes> shm_ring=<bytes> shm_direct=<bytes>
# shm_placed=<bytes>".
paths_used() {
  echo "udp=$(counter_sum udp_tx_bytes "$@") shm_ring=$(counter_sum shm_tx_bytes "$@")" \
       "shm_direct=$(counter_sum shm_direct_bytes "$@")" \
       "shm_placed=$(counter_sum shm_placed_write_bytes "$@")"
}
