# Two IPv6-only "hosts" for the tests in this directory: network namespaces
# joined by a veth pair with fd77:243::1/64 and fd77:243::2/64 (`nodad`, and
# DAD off for the link-local addresses, so every address is usable at once),
# no IPv4 address at all (127.0.0.1 is removed from lo too: a program's
# passive AF_UNSPEC getaddrinfo, ibv_rc_pingpong's TCP server, then binds
# :: first, and softrnic's device has only its IPv6 GIDs).
#
#   ipv6_pair_up NS_A NS_B
#   ipv6_gid_index NS ADDRESS   # the GID index ibv_devinfo shows for ADDRESS
IPV6_A=fd77:243::1
IPV6_B=fd77:243::2

ipv6_pair_up() {
  local a=$1 b=$2 ns va vb
  _softrnic_ns_cleanup "$a"; _softrnic_ns_cleanup "$b"
  _softrnic_pair_seq=$(( _softrnic_pair_seq + 1 ))
  va="s6$$x${_softrnic_pair_seq}a" vb="s6$$x${_softrnic_pair_seq}b"
  softrnic_on_exit "netns_pair_down '$a' '$b'"
  ip netns add "$a" && ip netns add "$b" &&
  ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  ip -n "$a" link set "$va" name "$NETNS_IFACE" &&
  ip -n "$b" link set "$vb" name "$NETNS_IFACE" || { log "ipv6_pair_up: failed creating $a/$b"; return 1; }
  for ns in "$a" "$b"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 \
      net.ipv6.conf.default.accept_dad=0 "net.ipv6.conf.$NETNS_IFACE.accept_dad=0" ||
      { log "ipv6_pair_up: sysctl failed in $ns"; return 1; }
    ip -n "$ns" link set lo up
    ip -n "$ns" addr del 127.0.0.1/8 dev lo 2>/dev/null
    [[ -n "${NETNS_MTU:-}" ]] && ip -n "$ns" link set "$NETNS_IFACE" mtu "$NETNS_MTU"
    # One segment per skb, as netns_pair_up does: captures see the wire.
    ip -n "$ns" link set "$NETNS_IFACE" gso_max_segs 1
  done
  ip -n "$a" addr add "$IPV6_A/64" dev "$NETNS_IFACE" nodad &&
  ip -n "$b" addr add "$IPV6_B/64" dev "$NETNS_IFACE" nodad || { log "ipv6_pair_up: addr add failed"; return 1; }
  ip -n "$a" link set "$NETNS_IFACE" up && ip -n "$b" link set "$NETNS_IFACE" up
  wait_until 5 bash -c "ip -n '$a' link show $NETNS_IFACE | grep -q 'LOWER_UP' &&
                        ip -n '$b' link show $NETNS_IFACE | grep -q 'LOWER_UP' &&
                        ip -n '$a' -6 addr show dev $NETNS_IFACE scope link | grep -q fe80 &&
                        ip -n '$b' -6 addr show dev $NETNS_IFACE scope link | grep -q fe80" ||
    { log "ipv6_pair_up: veth or link-local address did not come up"; return 1; }
  if ip -n "$a" -4 addr | grep -q inet; then log "ipv6_pair_up: $a still has IPv4"; return 1; fi
  log "netns $a ($IPV6_A) <-> $b ($IPV6_B) up, IPv6 only"
}

# ipv6_gid_index NS ADDRESS: the index of GID ADDRESS in ibv_devinfo -v run
# inside NS (softrnic's device), or nothing.
ipv6_gid_index() {
  run_in_ns "$1" ibv_devinfo -v 2>/dev/null |
    sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+$2, RoCE v2\$/\1/p" | head -1
}
