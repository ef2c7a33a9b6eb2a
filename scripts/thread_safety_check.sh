#!/usr/bin/env bash
# Clang's thread-safety analysis over the sources that touch the engine lock
# (src/common/thread_annotations.h says what the annotations mean).
#
#   scripts/thread_safety_check.sh [DIR...]     (default: src/engine src/verbs)
#
# The product is built with GCC, which ignores the annotations; this compiles
# each file once with clang (-fsyntax-only: no objects) and fails on any
# thread-safety warning: a GUARDED_BY member touched or a REQUIRES function
# called without the lock. Exit 77 (a skip for ctest) when clang is missing.
#
# Environment: CXX_TSA (clang++-14), JOBS (2).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cxx=${CXX_TSA:-clang++-14}
jobs=${JOBS:-2}
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: $cxx not installed" >&2; exit 77; }
# A sanitizer runtime preloaded by ctest for gcc builds must not reach clang.
unset LD_PRELOAD

dirs=("$@")
[[ ${#dirs[@]} -eq 0 ]] && dirs=(src/engine src/verbs)
files=()
for d in "${dirs[@]}"; do
  while IFS= read -r f; do files+=("$f"); done < <(find "$src/$d" -name '*.cc' | sort)
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
if ! printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" "$cxx" -std=c++20 -fsyntax-only -I"$src/src" \
    -Wthread-safety -Werror=thread-safety -Wno-unknown-warning-option 2>"$log"; then
  grep -E 'error|warning|note' "$log" | head -80 >&2
  echo "FAIL: thread-safety analysis ($(grep -c 'error:' "$log") errors)" >&2
  exit 1
fi
echo "thread-safety analysis: ${#files[@]} files clean in $((SECONDS - start)) s"
