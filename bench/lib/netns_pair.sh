# bench/lib/netns_pair.sh - two network namespaces ("hosts") joined by a veth
# pair left at its defaults (MTU 1500, GSO as the kernel sets it), for the
# benchmark scripts that compare builds or settings across them. Sourced.
#
#   bench_pair_up NA NB IPA IPB   create (after removing leftovers), wait for a ping
#   bench_pair_down NA NB         kill everything inside, delete both

bench_pair_down() {
  local ns p
  for ns in "$@"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  return 0
}

bench_pair_up() {
  local na=$1 nb=$2 ipa=$3 ipb=$4
  local va="${na:0:10}v" vb="${nb:0:10}v"
  bench_pair_down "$na" "$nb"
  ip netns add "$na" && ip netns add "$nb" &&
    ip link add "$va" netns "$na" type veth peer name "$vb" netns "$nb" &&
    ip -n "$na" addr add "$ipa/24" dev "$va" && ip -n "$nb" addr add "$ipb/24" dev "$vb" &&
    ip -n "$na" link set lo up && ip -n "$nb" link set lo up &&
    ip -n "$na" link set "$va" up && ip -n "$nb" link set "$vb" up ||
    { echo "netns setup failed" >&2; return 1; }
  for _ in $(seq 100); do ip netns exec "$na" ping -c1 -W1 "$ipb" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "netns $na cannot reach $ipb" >&2
  return 1
}
