#!/bin/sh
# layout.sh BUILD_DIR [TRIALS]: the heap-layout figures (adjacent, fresh,
# reuse; tests/public/test_layout.c) of each allocator with its defaults, through
# LD_PRELOAD, as a Markdown table, and uslab with USLAB_RANDOM=0. The peers are
# Debian's; a missing one is left out.
set -eu
build=${1:?usage: layout.sh BUILD_DIR [TRIALS]}
trials=${2:-2000}
prog="$build/bench/uslab-layout"
lib=/usr/lib/x86_64-linux-gnu
scudo=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so 2>/dev/null | head -n 1 || true)
echo "| allocator | adjacent % | fresh % | reuse % |"
echo "|---|---|---|---|"
row() {   # name, preload ('' for glibc), env
	name=$1 pre=$2
	shift 2
	if [ -n "$pre" ] && [ ! -e "$pre" ]; then
		return
	fi
	line=$(env "$@" ${pre:+LD_PRELOAD=$pre} "$prog" figures "$trials" --print | awk '$1 == "mean" { print $2, $3, $4 }')
	set -- $line
	echo "| $name | $1 | $2 | $3 |"
}
row glibc ""
row jemalloc "$lib/libjemalloc.so.2"
row "gperftools 2.10 (tcmalloc-minimal)" "$lib/libtcmalloc_minimal.so.4"
row mimalloc "$lib/libmimalloc.so.2"
[ -n "$scudo" ] && row scudo "$scudo"
row uslab "$build/libuslab.so"
row "uslab USLAB_RANDOM=0" "$build/libuslab.so" USLAB_RANDOM=0
