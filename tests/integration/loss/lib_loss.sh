#!/usr/bin/env bash
# Helpers shared by the loss tests (sourced after common.sh).
#
#   loss_setup NS_A NS_B IP_A IP_B   namespaces + veth, softrnic env
#   loss_set PCT                     drop PCT% of UDP/4791 on both input hooks
#   loss_drops                       "A B" packets the rules dropped so far
#   pair NAME T SERVER_CMD... -- CLIENT_CMD...
#                                    server in NS_B, client in NS_A, each
#                                    bounded by T seconds; 0 if both exit 0

LOSS_A="" LOSS_B=""

loss_setup() {
  LOSS_A=$1 LOSS_B=$2
  netns_pair_up "$1" "$2" "$3" "$4" || die "netns setup"
  softrnic_env
}

# The receiving side's input hook drops (an output drop would return EPERM
# to the sender, unlike a lossy wire). Traffic flows both ways (requests one
# way, ACKs and READ responses the other), so both ends get a rule.
loss_set() {
  local pct=$1
  if (( pct == 0 )); then
    nft_clear_drop "$LOSS_A"; nft_clear_drop "$LOSS_B"
  else
    nft_drop_udp4791 "$LOSS_A" "$pct" || die "nft rule in $LOSS_A"
    nft_drop_udp4791 "$LOSS_B" "$pct" || die "nft rule in $LOSS_B"
  fi
}

loss_drops() { echo "$(nft_drop_count "$LOSS_A" || echo 0) $(nft_drop_count "$LOSS_B" || echo 0)"; }

# wait until something in NS listens on TCP PORT (or the server died)
_loss_wait_listen() {
  local ns=$1 port=$2 pid=$3 i
  for (( i=0; i<200; i++ )); do
    ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# pair NAME TIMEOUT PORT SERVER_CMD... -- CLIENT_CMD...
# Logs: $SOFTRNIC_TMP/NAME.server.log, NAME.client.log. Sets PAIR_MS.
pair() {
  local name=$1 t=$2 port=$3; shift 3
  local srv=() cli=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  local slog="$SOFTRNIC_TMP/$name.server.log" clog="$SOFTRNIC_TMP/$name.client.log"
  local t0; t0=$(date +%s%N)
  timeout -k 5 "$t" ip netns exec "$LOSS_B" "${srv[@]}" >"$slog" 2>&1 &
  local spid=$!
  _loss_wait_listen "$LOSS_B" "$port" "$spid" || sleep 0.5
  local crc=0 src=0
  timeout -k 5 "$t" ip netns exec "$LOSS_A" "${cli[@]}" >"$clog" 2>&1 || crc=$?
  wait "$spid" || src=$?
  PAIR_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
  if (( crc != 0 || src != 0 )); then
    log "$name: client rc=$crc server rc=$src$( (( crc == 124 || src == 124 )) && echo ' (timeout)') after ${PAIR_MS} ms"
    sed 's/^/    client: /' "$clog" | tail -8 >&2
    sed 's/^/    server: /' "$slog" | tail -8 >&2
    return 1
  fi
  return 0
}
