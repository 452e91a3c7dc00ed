#!/usr/bin/env bash
# link.sh BUILD_DIR - install the build into a scratch prefix and link small
# programs the way a user does, with pkg-config: against uslab (the program's
# malloc becomes uslab's) and against uslab-core (the kmem_cache API only; the
# program keeps its own malloc); and README's "Use it as the kmem_cache API"
# program, which must build and print what README says. Nothing is rebuilt.
set -euo pipefail
build=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(dirname "$(find "$work/prefix" -name uslab-core.pc | head -1)")
[ -n "$pc" ] || { echo "FAIL: no uslab-core.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$pc
libdir=$(pkg-config --variable=libdir uslab)
cat >"$work/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <uslab.h>
int main(void)
{
	struct kmem_cache *s = kmem_cache_create("link", 64, 0, 0, NULL);
	void *o = s ? kmem_cache_alloc(s, GFP_KERNEL) : NULL;
	if (!o)
		return 2;
	kmem_cache_free(s, o);
	kmem_cache_destroy(s);
	void *p = malloc(100);
	/* ksize names a uslab block's size, and reports anything else. */
	uslab_set_report_handler(NULL, NULL);
	printf("%s\n", ksize(p) ? "malloc=uslab" : "malloc=own");
	free(p);
	return 0;
}
C
fail=0
for lib in uslab uslab-core; do
	cc "$work/prog.c" $(pkg-config --cflags --libs "$lib") -o "$work/prog-$lib"
	out=$(LD_LIBRARY_PATH="$libdir" "$work/prog-$lib" 2>/dev/null) || { echo "FAIL $lib: exit $?"; fail=1; continue; }
	want="malloc=uslab"; [ "$lib" = uslab-core ] && want="malloc=own"
	if [ "$out" = "$want" ]; then echo "ok   $lib: $out ($(pkg-config --libs "$lib"))"; else echo "FAIL $lib: $out, want $want"; fail=1; fi
done
# README's "Use it as the kmem_cache API" program, as a reader pastes it.
src=$(dirname "$0")/../..
awk '/^A complete program/{f=1} f&&/^```c$/{p=1;next} p&&/^```$/{exit} p' "$src/README.md" >"$work/conn.c"
if cc "$work/conn.c" $(pkg-config --cflags --libs uslab-core) -o "$work/conn" &&
   out=$(LD_LIBRARY_PATH="$libdir" "$work/conn") &&
   grep -q "^fd -1, object size 204, .* per-CPU mode$" <<<"$out" && grep -q "^shrink: 0 " <<<"$out"; then
	echo "ok   README's program"
else
	echo "FAIL README's program:"; echo "${out:-}"; fail=1
fi
exit $fail
