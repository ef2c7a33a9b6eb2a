#!/bin/bash
# The Debian package: scripts/package.sh builds it from this build tree,
# `dpkg -i` installs it on this machine (CI runs as root on a throwaway
# machine), Debian's tools run through /usr/bin/softrnic with the source and
# build trees hidden (run_installed.sh), and `dpkg -P` removes it leaving
# nothing behind. The package is purged on every exit path, failures
# included. Also checked: the system's libibverbs is untouched, the private
# folder is not on the loader's path (a program started without `softrnic
# run` still loads the system's libibverbs), and an ibv_devinfo through the
# package leaves no stats file behind.
#
# Two checkouts on one machine would fight over the package: the dpkg steps
# run under flock /tmp/softrnic-dpkg.lock (not the integration lock, which a
# caller of ctest may already hold).
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root
softrnic_require_lib
softrnic_require_cmd dpkg dpkg-deb cpack ibv_devinfo ibv_rc_pingpong unshare flock
[[ -x $SOFTRNIC_BUILD_DIR/bin/softrnic ]] || skip "softrnic not built"
# The sanitizer runtime ctest preloads for ASan builds only where our
# libraries are loaded (run_installed.sh): cpack hangs under it, and dpkg,
# strip and ldconfig are not built for it.
sanitizer_preload=${LD_PRELOAD:-}
unset LD_PRELOAD

out=$SOFTRNIC_TMP/pkg
run_t 600 "$SOFTRNIC_SOURCE_DIR/scripts/package.sh" "" "$SOFTRNIC_BUILD_DIR" "$out" \
  >"$SOFTRNIC_TMP/package.log" 2>&1 || die "scripts/package.sh failed: $(tail -30 "$SOFTRNIC_TMP/package.log")"
deb=$(tail -1 "$SOFTRNIC_TMP/package.log")
check "package.sh made $deb" test -f "$deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p' >&2
dpkg-deb --contents "$deb" | awk '{print $NF}' >"$SOFTRNIC_TMP/contents"
for f in ./usr/bin/softrnic ./usr/lib/softrnic/libibverbs.so.1 ./usr/lib/softrnic/librdmacm.so.1 \
         ./usr/share/man/man1/softrnic.1 ./usr/share/doc/softrnic/README.md \
         ./usr/share/softrnic/scenarios/loss-1.toml; do
  check "package holds $f" grep -qxF "$f" "$SOFTRNIC_TMP/contents"
done
check "no file outside /usr/bin/softrnic, /usr/lib/softrnic/, /usr/share/{man,doc,softrnic}" \
  test -z "$(grep -v '/$' "$SOFTRNIC_TMP/contents" | grep -vE '^\./usr/(bin/softrnic|lib/softrnic/[^/]+|share/man/man1/softrnic\.1(\.gz)?|share/doc/softrnic/[^/]+|share/softrnic/scenarios/[^/]+\.toml)$')"

exec 9>/tmp/softrnic-dpkg.lock
flock -w 600 9 || die "waited 600 s for /tmp/softrnic-dpkg.lock"
if dpkg-query -W -f '${Status}' softrnic 2>/dev/null | grep -q installed; then
  skip "a softrnic package is already installed here; not replacing it"
fi
# Registered before installing: purged whatever happens next.
softrnic_on_exit "dpkg -P softrnic"
sys_ibverbs=$(readlink -f /usr/lib/"$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)"/libibverbs.so.1 2>/dev/null || true)
sys_sum=""; [[ -n $sys_ibverbs && -e $sys_ibverbs ]] && sys_sum=$(sha256sum "$sys_ibverbs")
# Every file and directory on the paths the package uses, before.
snapshot() { find /usr/bin /usr/lib /usr/share /usr/share/man/man1 /usr/share/doc -maxdepth 1 -name '*softrnic*' 2>/dev/null | sort; }
snapshot >"$SOFTRNIC_TMP/before"

run_t 120 dpkg -i "$deb" >"$SOFTRNIC_TMP/dpkg-i.log" 2>&1 || die "dpkg -i failed: $(cat "$SOFTRNIC_TMP/dpkg-i.log")"
check "dpkg reports softrnic installed" bash -c "dpkg-query -W -f '\${Status}' softrnic | grep -q 'install ok installed'"
check "/usr/bin/softrnic is on PATH" test "$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v softrnic)" = /usr/bin/softrnic
check "softrnic --help works" bash -c "/usr/bin/softrnic --help | grep -q 'softrnic run'"
[[ -z $sys_sum ]] || check "the system's libibverbs is untouched" test "$(sha256sum "$sys_ibverbs")" = "$sys_sum"
check "/usr/lib/softrnic is not on the loader's path" bash -c "! ldconfig -p | grep -q /usr/lib/softrnic"
check "ibv_devinfo without softrnic run loads the system's libibverbs" \
  bash -c "env -u LD_LIBRARY_PATH ldd \$(command -v ibv_devinfo) | grep 'libibverbs.so.1 =>' | grep -vq /usr/lib/softrnic"

cp "$SOFTRNIC_SOURCE_DIR/tests/integration/install/run_installed.sh" "$SOFTRNIC_TMP/"
hide=("$SOFTRNIC_SOURCE_DIR")
[[ $SOFTRNIC_BUILD_DIR == "$SOFTRNIC_SOURCE_DIR"/* ]] || hide+=("$SOFTRNIC_BUILD_DIR")
shm_before=$(ls /dev/shm | grep -c '^softrnic-[0-9]' || true)
run_t 200 env ${sanitizer_preload:+LD_PRELOAD="$sanitizer_preload"} unshare -m --propagation private bash "$SOFTRNIC_TMP/run_installed.sh" \
  /usr/bin/softrnic 27321 "${hide[@]}" || die "the installed package does not work on its own"

dpkg -L softrnic >"$SOFTRNIC_TMP/files"
run_t 120 dpkg -P softrnic >"$SOFTRNIC_TMP/dpkg-p.log" 2>&1 || die "dpkg -P failed: $(cat "$SOFTRNIC_TMP/dpkg-p.log")"
check "dpkg no longer knows softrnic" bash -c "! dpkg-query -W -f '\${Status}' softrnic 2>/dev/null | grep -q installed"
left=""
while read -r f; do
  case $f in /usr/bin/softrnic|/usr/lib/softrnic*|*/softrnic.1*|/usr/share/doc/softrnic*|/usr/share/softrnic*) [[ -e $f || -L $f ]] && left+=" $f" ;; esac
done <"$SOFTRNIC_TMP/files"
check "every file and directory of the package is gone${left:+ (left:$left)}" test -z "$left"
snapshot >"$SOFTRNIC_TMP/after"
check "nothing named softrnic left in /usr/{bin,lib,share,share/man/man1,share/doc}" cmp -s "$SOFTRNIC_TMP/before" "$SOFTRNIC_TMP/after"
log "PASS: the package installs, runs Debian's tools without the build tree and purges cleanly"
