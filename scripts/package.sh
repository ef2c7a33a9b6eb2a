#!/usr/bin/env bash
# Builds softrnic's Debian package (CPack's DEB generator, rules in the
# top-level CMakeLists.txt): only the installed targets (the `softrnic`
# command and the drop-in libraries), not the tests.
#
#   scripts/package.sh [BUILD_TYPE] [BUILD_DIR] [OUT_DIR]
#     BUILD_TYPE  RelWithDebInfo (default; CPack strips the files)
#     BUILD_DIR   default build-pkg
#     OUT_DIR     where the .deb goes (default BUILD_DIR)
#   Prints the package's path on its last line. Install and remove with
#     dpkg -i softrnic_<version>_<arch>.deb      # files: dpkg -L softrnic
#     dpkg -P softrnic
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_TYPE=${1:-RelWithDebInfo}
BUILD_DIR=${2:-build-pkg}
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
OUT_DIR=${3:-$BUILD_DIR}
[[ "$OUT_DIR" = /* ]] || OUT_DIR="$PWD/$OUT_DIR"

command -v dpkg-deb >/dev/null || { echo "package.sh: dpkg-deb not found (Debian's dpkg)" >&2; exit 2; }
# Configure only when needed (an existing build dir keeps its settings).
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  SOFTRNIC_CMAKE_ARGS="-DSOFTRNIC_BUILD_TESTS=OFF ${SOFTRNIC_CMAKE_ARGS:-}" \
    "$ROOT/scripts/build.sh" "$BUILD_TYPE" "$BUILD_DIR" --target softrnic_install_targets
else
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target softrnic_install_targets
fi
mkdir -p "$OUT_DIR"
# CPack's work tree goes to a temp dir: nothing is left in the build dir.
work=$(mktemp -d "${TMPDIR:-/tmp}/softrnic-cpack.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$work" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log" >&2; echo "package.sh: cpack failed" >&2; exit 1; }
deb=$(find "$work" -maxdepth 1 -name 'softrnic_*.deb' | head -1)
[[ -n "$deb" ]] || { cat "$work/cpack.log" >&2; echo "package.sh: no .deb produced" >&2; exit 1; }
mv -f "$deb" "$OUT_DIR/"
deb="$OUT_DIR/$(basename "$deb")"
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Architecture\|Depends\|Installed-Size\):/  \1:/p'
echo "$deb"
