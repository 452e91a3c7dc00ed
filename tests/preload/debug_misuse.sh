#!/usr/bin/env bash
# debug_misuse.sh LIBUSLAB DEBUG_PROG HAVE_LIBDW - each misuse of debug_prog.c
# under LD_PRELOAD=LIBUSLAB with USLAB_DEBUG=FZPU: the report's own words,
# the allocating function named (with libdw: a program's functions are not
# exported, so dladdr cannot name them), and "survived".
set -uo pipefail
lib=$(realpath "$1")
prog=$(realpath "$2")
have_dw=${3:-0}
fail=0
# scenario | text that must appear | allocating function
cases=(
	"overflow|[Right Redzone overwritten]|alloc_overflow"
	"kmalloc-redzone|[kmalloc Redzone overwritten]|alloc_kmalloc_rz"
	"underflow|[Left Redzone overwritten]|alloc_underflow"
	"use-after-free|[Poison overwritten]|alloc_after_free"
	"double-free|Object already free|alloc_twice_freed"
	"interior|is not an object of this cache|"
	"free-sized|free_sized with size 30, allocated with 24|alloc_sized"
	"delete-size|operator delete with size 64, allocated with 56|alloc_for_delete"
)
for c in "${cases[@]}"; do
	IFS='|' read -r name want fn <<<"$c"
	out=$(USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" "$name" 2>&1)
	rc=$?
	ok=1
	[ "$rc" -eq 0 ] || { echo "FAIL $name: exit status $rc"; ok=0; }
	grep -qF -- "$want" <<<"$out" || { echo "FAIL $name: no '$want' in the report"; ok=0; }
	tail -1 <<<"$out" | grep -qx survived || { echo "FAIL $name: the program did not go on"; ok=0; }
	if [ -n "$fn" ] && [ "$have_dw" = 1 ]; then
		grep -q "^Allocated in $fn+" <<<"$out" || { echo "FAIL $name: the report does not name $fn"; ok=0; }
	fi
	if [ "$ok" = 1 ]; then
		echo "ok   $name"
	else
		fail=1
		sed 's/^/    | /' <<<"$out" | head -30
	fi
done
# A stale write after the block was reused: unseen without a quarantine,
# found with one.
out=$(USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" stale-write 2>&1)
if grep -q "^reused" <<<"$out" && ! grep -q "Poison overwritten" <<<"$out"; then
	echo "ok   stale-write without a quarantine: reused, unseen (as expected)"
else
	echo "FAIL stale-write without a quarantine: expected reuse and no report"; fail=1
	sed 's/^/    | /' <<<"$out" | head -20
fi
out=$(USLAB_QUARANTINE=8k USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" stale-write 2>&1)
if grep -q "^not reused" <<<"$out" && grep -qF "[Poison overwritten]" <<<"$out" &&
   grep -q "released from the quarantine" <<<"$out" && tail -1 <<<"$out" | grep -qx survived &&
   { [ "$have_dw" != 1 ] || grep -q "^Allocated in alloc_stale+" <<<"$out"; }; then
	echo "ok   stale-write with USLAB_QUARANTINE=8k: found"
else
	echo "FAIL stale-write with USLAB_QUARANTINE=8k"; fail=1
	sed 's/^/    | /' <<<"$out" | head -30
fi
# A quarantine larger than all the program frees: the block never leaves it
# while the program runs, and the write is found when what waits is checked
# at exit.
out=$(USLAB_QUARANTINE=1m USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" stale-write 2>&1)
if grep -q "^not reused" <<<"$out" && grep -qF "[Poison overwritten]" <<<"$out" &&
   grep -q "released from the quarantine" <<<"$out" && grep -qx survived <<<"$out"; then
	echo "ok   stale-write with USLAB_QUARANTINE=1m: found at exit"
else
	echo "FAIL stale-write with USLAB_QUARANTINE=1m: not found at exit"; fail=1
	sed 's/^/    | /' <<<"$out" | head -30
fi
out=$(USLAB_QUARANTINE=1m USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" clean 2>&1)
if [ "$out" = survived ]; then
	echo "ok   clean with USLAB_QUARANTINE=1m: nothing reported at exit"
else
	echo "FAIL clean with USLAB_QUARANTINE=1m: expected only 'survived'"; fail=1
	sed 's/^/    | /' <<<"$out" | head -30
fi
out=$(USLAB_QUARANTINE=lots LD_PRELOAD="$lib" "$prog" overflow 2>&1)
grep -q "USLAB_QUARANTINE='lots' is not a size" <<<"$out" ||
	{ echo "FAIL USLAB_QUARANTINE=lots not reported"; fail=1; }
# The interior free also reports a pointer that is not uslab's at all.
out=$(USLAB_DEBUG=FZPU LD_PRELOAD="$lib" "$prog" interior 2>&1)
grep -q "is not a uslab pointer" <<<"$out" || { echo "FAIL interior: a stack pointer's free not reported"; fail=1; }
exit $fail
