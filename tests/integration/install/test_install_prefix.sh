#!/bin/bash
# `cmake --install` into a temporary prefix, then the prefix moved elsewhere
# (the install is relocatable: `softrnic run` finds ../lib/softrnic from its
# own location), then Debian's tools run through the installed `softrnic`
# with the source and build trees hidden (run_installed.sh). Checks the
# layout: the drop-in libraries only in lib/softrnic (a private folder), the
# command in bin, the man page and docs in share; removing the files of
# install_manifest.txt leaves none behind.
set -u
source "$SOFTRNIC_INTEGRATION_LIB/common.sh"
softrnic_require_root   # hiding the trees takes a mount namespace
softrnic_require_lib
softrnic_require_cmd ibv_devinfo ibv_rc_pingpong unshare
[[ -x $SOFTRNIC_BUILD_DIR/bin/softrnic ]] || skip "softrnic not built"

prefix=$SOFTRNIC_TMP/prefix
run_t 120 cmake --install "$SOFTRNIC_BUILD_DIR" --prefix "$prefix" >"$SOFTRNIC_TMP/install.log" 2>&1 ||
  die "cmake --install failed: $(cat "$SOFTRNIC_TMP/install.log")"
cp "$SOFTRNIC_BUILD_DIR/install_manifest.txt" "$SOFTRNIC_TMP/manifest" || die "no install_manifest.txt"
(cd "$prefix" && find . \( -type f -o -type l \) | sort) >"$SOFTRNIC_TMP/files"
sed 's/^/    /' "$SOFTRNIC_TMP/files" | grep -v '^    ./share/doc/' >&2
for f in bin/softrnic lib/softrnic/libibverbs.so.1 lib/softrnic/librdmacm.so.1 \
         lib/softrnic/libmlx5.so.1 lib/softrnic/libmlx4.so.1 lib/softrnic/libefa.so.1 \
         lib/softrnic/libmana.so.1 share/man/man1/softrnic.1 share/doc/softrnic/README.md \
         share/doc/softrnic/user-guide.md share/softrnic/scenarios/loss-1.toml; do
  check "installed $f" test -e "$prefix/$f"
done
check "no library directly in lib/ (only the private lib/softrnic/)" \
  test -z "$(find "$prefix/lib" -maxdepth 1 -type f)"
check "nothing but bin, lib/softrnic, share/{man,doc,softrnic/scenarios}" \
  test -z "$(grep -vE '^\./(bin/softrnic|lib/softrnic/lib[a-z0-9]+\.so\.1|lib/softrnic/softrnic-nicd|share/man/man1/softrnic\.1|share/doc/softrnic/[A-Za-z0-9_.-]+\.md|share/softrnic/scenarios/[A-Za-z0-9_.-]+\.toml)$' "$SOFTRNIC_TMP/files")"
# Without the sanitizer runtime ctest preloads for ASan builds: troff is
# not built for it (alloc-dealloc-mismatch aborts it).
check "the man page renders" env -u LD_PRELOAD bash -c "man -l '$prefix/share/man/man1/softrnic.1' 2>/dev/null | grep -q 'softrnic run' || groff -man -Tutf8 '$prefix/share/man/man1/softrnic.1' 2>/dev/null | grep -q 'softrnic run'"
check "no build-tree path in the installed files' RUNPATH" \
  bash -c "! readelf -d '$prefix'/lib/softrnic/*.so.1 '$prefix/bin/softrnic' | grep -E 'R(UN)?PATH' | grep -qF '$SOFTRNIC_BUILD_DIR'"

moved=$SOFTRNIC_TMP/elsewhere
mv "$prefix" "$moved"
cp "$SOFTRNIC_SOURCE_DIR/tests/integration/install/run_installed.sh" "$SOFTRNIC_TMP/"
hide=("$SOFTRNIC_SOURCE_DIR")
[[ $SOFTRNIC_BUILD_DIR == "$SOFTRNIC_SOURCE_DIR"/* ]] || hide+=("$SOFTRNIC_BUILD_DIR")
run_t 200 unshare -m --propagation private bash "$SOFTRNIC_TMP/run_installed.sh" \
  "$moved/bin/softrnic" 27311 "${hide[@]}" || die "the installed files do not work on their own"
mv "$moved" "$prefix"
# Uninstall: what cmake --install recorded is everything it installed.
xargs -d '\n' rm -f -- <"$SOFTRNIC_TMP/manifest"
check "removing install_manifest.txt's files leaves no file in the prefix" \
  test -z "$(find "$prefix" ! -type d)"
log "PASS: cmake --install gives a relocatable install that runs without the build tree"
