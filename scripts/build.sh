#!/usr/bin/env bash
# Configure and build softrnic.
#
#   scripts/build.sh [BUILD_TYPE] [BUILD_DIR] [cmake --build options, e.g. --target T]
#     BUILD_TYPE  RelWithDebInfo (default) | CI (ASan+UBSan, -Werror) | TSan | Debug | Release
#     BUILD_DIR   default: build (RelWithDebInfo), build-ci (CI), build-tsan (TSan),
#                 build-<type> otherwise; relative paths are relative to the repo root.
#   Environment: JOBS (default $(nproc)), CMAKE_GENERATOR (default Ninja if
#   installed), SOFTRNIC_CMAKE_ARGS (extra -D flags, space separated),
#   KEEP_GOING=1 (build every target that can be built despite failures;
#   the exit status still reports the failure).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_TYPE=${1:-RelWithDebInfo}
case "$BUILD_TYPE" in
  RelWithDebInfo) def_dir=build ;;
  CI)             def_dir=build-ci ;;
  TSan)           def_dir=build-tsan ;;
  *)              def_dir=build-$(echo "$BUILD_TYPE" | tr '[:upper:]' '[:lower:]') ;;
esac
BUILD_DIR=${2:-$def_dir}
# Anything after BUILD_DIR goes to `cmake --build` (e.g. --target NAME...).
BUILD_ARGS=("${@:3}")
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
JOBS=${JOBS:-$(nproc)}

gen_args=()
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  if [[ -n "${CMAKE_GENERATOR:-}" ]]; then
    gen_args=(-G "$CMAKE_GENERATOR")
  elif command -v ninja >/dev/null 2>&1; then
    gen_args=(-G Ninja)
  fi
fi

# shellcheck disable=SC2206
extra=(${SOFTRNIC_CMAKE_ARGS:-})

echo "==> configure: $BUILD_TYPE in $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" "${gen_args[@]}" \
  -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${extra[@]}"
keep=()
if [[ "${KEEP_GOING:-0}" == 1 ]]; then
  if [[ -f "$BUILD_DIR/build.ninja" ]]; then keep=(-- -k 0); else keep=(-- -k); fi
fi
echo "==> build: -j$JOBS${keep:+ (keep going)}"
cmake --build "$BUILD_DIR" -j "$JOBS" "${BUILD_ARGS[@]}" "${keep[@]}"
echo "==> built $BUILD_DIR"
