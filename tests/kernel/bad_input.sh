#!/usr/bin/env bash
# bad_input.sh - scripts/kernel-suites.sh on what it must refuse:
#   1. a source package that cannot be had (apt-get fails): exit status 2, one
#      line on stderr naming the package, and nothing left in the directory;
#   2. an adapter that lacks a function the kernel's suites call: the build
#      fails (status 1) naming the function;
#   3. malformed arguments: status 2 and a line naming them (and the same for
#      bench/kernel/suites_time.sh).
#   bad_input.sh LIBDIR   (the directory of libuslab.so)
# Status 0 when all hold; each failure is printed.
set -uo pipefail
lib=${1:?usage: bad_input.sh LIBDIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
script=$repo/scripts/kernel-suites.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# 1. apt-get that always fails, and a version Debian never shipped.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "E: Unable to locate package" >&2\nexit 100\n' >"$tmp/bin/apt-get"
chmod +x "$tmp/bin/apt-get"
PATH=$tmp/bin:$PATH bash "$script" --version 0.1 --dir "$tmp/k" --lib "$lib" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || fail "unavailable package: exit status $rc, not 2"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "unavailable package: $(wc -l <"$tmp/err") lines on stderr, not 1: $(cat "$tmp/err")"
grep -q 'linux-source-0.1' "$tmp/err" || fail "unavailable package: the message does not name linux-source-0.1: $(cat "$tmp/err")"
[ ! -e "$tmp/k" ] || fail "unavailable package: $tmp/k left behind ($(ls -A "$tmp/k" | tr '\n' ' '))"

# 2. The adapter without kmem_cache_set_non_kernel (the maple suite's failure
# injection), built against the installed source (skipped without it).
if [ -e /usr/src/linux-source-6.12.tar.xz ]; then
  mkdir -p "$tmp/adapter"
  cp "$repo/tests/kernel/"*.[ch] "$tmp/adapter/"
  awk '/^void kmem_cache_set_non_kernel\(/ { skip = 1 } !skip { print } skip && /^}/ { skip = 0 }' \
    "$repo/tests/kernel/shim.c" >"$tmp/adapter/shim.c"
  grep -q 'kmem_cache_set_non_kernel(struct' "$tmp/adapter/shim.c" && fail "the test could not remove the function"
  bash "$script" --dir "$tmp/k2" --lib "$lib" --adapter "$tmp/adapter" --build-only >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 1 ] || fail "missing function: exit status $rc, not 1"
  grep -q 'lacks what linux-source-6.12.s suites call: .*kmem_cache_set_non_kernel' "$tmp/err" ||
    fail "missing function: stderr does not name kmem_cache_set_non_kernel: $(cat "$tmp/err")"
else
  echo "note: linux-source-6.12 not installed: the missing-function case is not run"
fi

# 3. Malformed arguments.
for args in "--suites nosuch" "--modes fast" "--jobs 0" "--version 6.x" "--frobnicate"; do
  bash "$script" $args --dir "$tmp/k3" --lib "$lib" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || fail "'$args': exit status $rc, not 2"
  [ -s "$tmp/err" ] || fail "'$args': nothing on stderr"
done
# 4. The bench's timing script (bench/kernel/suites_time.sh) on malformed
# arguments: status 2 and a line naming them, before any build.
for args in "--suites xarray" "--suites xarray:0" "--frobnicate"; do
  bash "$repo/bench/kernel/suites_time.sh" $args --uslab "$lib" --dir "$tmp/k4" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || fail "suites_time '$args': exit status $rc, not 2"
  [ -s "$tmp/err" ] || fail "suites_time '$args': nothing on stderr"
  [ ! -e "$tmp/k4" ] || fail "suites_time '$args': built something in $tmp/k4"
done
[ $bad -eq 0 ] && echo "bad_input: all cases held"
exit $bad
