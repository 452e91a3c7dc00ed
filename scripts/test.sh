#!/usr/bin/env bash
# test.sh - the full test suite: the Release build, then AddressSanitizer+UBSan
# and ThreadSanitizer builds (clang), each running the default CTest suite in both
# per-CPU modes. "scripts/test.sh stress" runs the long stress label instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
label_args=(-LE stress)
[ "${1:-}" = "stress" ] && label_args=(-L stress)
run() {   # run NAME CC SANITIZE
  local dir=build/$1
  CC=$2 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUSLAB_SANITIZE="$3" \
    -DUSLAB_BUILD_BENCH=$([ -z "$3" ] && echo ON || echo OFF) >/dev/null
  cmake --build "$dir"
  echo "== tests: $1"
  (cd "$dir" && ctest --output-on-failure -j2 "${label_args[@]}")
}
run test gcc ""
run asan clang address
run tsan clang thread
