#!/bin/bash
# Runs Debian's verbs tools through an installed `softrnic` with no build
# tree visible: in a mount namespace of its own, an empty tmpfs is mounted
# over every directory named in HIDE (the source and build trees), the
# working directory is /, and LD_LIBRARY_PATH is unset, so the only
# softrnic libraries anything can load are the installed ones.
#
#   unshare -m --propagation private bash run_installed.sh SOFTRNIC PORT HIDE...
# Self-contained (the tests' lib/ is in the hidden source tree); exit 0 if
# every check passed.
set -u
tool=$1 port=$2; shift 2
fail() { echo "run_installed: FAIL: $*" >&2; exit 1; }
ok() { echo "run_installed: ok: $*" >&2; }
for d in "$@"; do
  [[ -d $d ]] && { mount -t tmpfs -o size=1m,mode=0755 softrnic-hidden "$d" || fail "cannot hide $d"; }
done
for d in "$@"; do
  [[ -z "$(ls -A "$d" 2>/dev/null)" ]] || fail "$d still visible"
done
ok "hidden: $*"
cd / || fail "cd /"
unset LD_LIBRARY_PATH SOFTRNIC_LIB_DIR SOFTRNIC_BUILD_DIR SOFTRNIC_SOURCE_DIR SOFTRNIC_INTEGRATION_LIB
tmp=$(mktemp -d) || fail mktemp
trap 'kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
spid=""

# Which libibverbs a program run through the tool loads.
timeout -k 2 20 "$tool" run bash -c 'echo "$LD_LIBRARY_PATH"' >"$tmp/ldpath" 2>&1 || fail "softrnic run bash: $(cat "$tmp/ldpath")"
libdir=${tool%/bin/softrnic}/lib/softrnic
[[ "$(head -1 "$tmp/ldpath")" == "$libdir"* ]] || fail "LD_LIBRARY_PATH under softrnic run is '$(cat "$tmp/ldpath")', not $libdir first"
ok "softrnic run puts $libdir first"
timeout -k 2 20 "$tool" run bash -c 'ldd "$(command -v ibv_devinfo)"' >"$tmp/ldd" 2>&1
grep -q "libibverbs.so.1 => $libdir/libibverbs.so.1" "$tmp/ldd" ||
  fail "ibv_devinfo does not load the installed libibverbs: $(grep libibverbs "$tmp/ldd")"
ok "ibv_devinfo resolves libibverbs.so.1 to $libdir"

timeout -k 2 30 "$tool" run ibv_devinfo >"$tmp/devinfo" 2>&1 || fail "softrnic run ibv_devinfo: $(cat "$tmp/devinfo")"
grep -q "hca_id:[[:space:]]*softrnic0" "$tmp/devinfo" || fail "no softrnic0 in ibv_devinfo: $(cat "$tmp/devinfo")"
grep -q "PORT_ACTIVE" "$tmp/devinfo" || fail "port not active: $(cat "$tmp/devinfo")"
ok "softrnic run ibv_devinfo shows softrnic0, port active"

timeout -k 2 60 "$tool" run ibv_rc_pingpong -g 0 -p "$port" -n 200 >"$tmp/server" 2>&1 &
spid=$!
# The client retries while the server is not listening yet (no sleep race).
crc=1
for _ in {1..50}; do
  timeout -k 2 60 "$tool" run ibv_rc_pingpong -g 0 -p "$port" -n 200 127.0.0.1 >"$tmp/client" 2>&1 && { crc=0; break; }
  grep -q "Couldn't connect" "$tmp/client" || break
  sleep 0.2
done
src=0; wait "$spid" || src=$?
spid=""
(( crc == 0 && src == 0 )) || fail "ibv_rc_pingpong pair: client $crc, server $src
--- client:
$(cat "$tmp/client")
--- server:
$(cat "$tmp/server")"
grep -q "200 iters" "$tmp/client" || fail "client did not report 200 iterations: $(cat "$tmp/client")"
ok "ibv_rc_pingpong pair through softrnic run: $(grep iters "$tmp/client" | head -1)"
