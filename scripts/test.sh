#!/usr/bin/env bash
# test.sh - the full test suite: the Release build, then AddressSanitizer+UBSan
# and ThreadSanitizer builds (clang), each running the default CTest suite in both
# per-CPU modes. "scripts/test.sh stress" runs the long stress label instead,
# "scripts/test.sh kernel" the kernel's long test suites (gcc build only).
# Every suite runs even if one fails; the last line sums them up, and the exit
# status is non-zero if a build or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test || exit 1
label_args=(-LE 'stress|kernel')
[ "${1:-}" = "stress" ] && label_args=(-L stress)
[ "${1:-}" = "kernel" ] && label_args=(-L kernel)
summary=()
failed=0
run() {   # run NAME CC SANITIZE
  local dir=build/$1 log
  log=$(mktemp)
  echo "== build: $1"
  if ! CC=$2 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUSLAB_SANITIZE="$3" \
         -DUSLAB_BUILD_BENCH=$([ -z "$3" ] && echo ON || echo OFF) >/dev/null || ! cmake --build "$dir"; then
    summary+=("$1: BUILD FAILED")
    failed=1
    return
  fi
  echo "== tests: $1"
  (cd "$dir" && ctest --output-on-failure -j2 "${label_args[@]}") | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^[0-9]+% tests passed' "$log" | tail -1)
  summary+=("$1: ${line:-no CTest summary (exit $rc)}")
  [ "$rc" -eq 0 ] || failed=1
  rm -f "$log"
}
run test gcc ""
if [ "${1:-}" != kernel ]; then   # the kernel's suites run on the gcc build alone
  run asan clang address
  run tsan clang thread
fi
echo
echo "== summary (${1:-default} suite)"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "FAILED"
  exit 1
fi
echo "ALL PASSED"
