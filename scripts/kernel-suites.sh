#!/usr/bin/env bash
# kernel-suites.sh - the kernel's own user-space test suites (tools/testing/radix-tree:
# the XArray, maple tree, IDR/IDA and radix-tree suites) built against uslab and run.
#
# The kernel's source comes from Debian's linux-source-<version> package (installed
# if missing) and is unpacked into a directory outside the repository; nothing of
# it is committed or edited. The suites normally link a small slab shim the kernel
# ships (tools/testing/shared/linux.c, tools/lib/slab.c: malloc and a mutex); here
# they link tests/kernel/ instead, the same interface on uslab's caches and kmalloc
# (see tests/kernel/shim.c). Every kmem_cache call of the suites is served by
# uslab, and so is their malloc (libuslab is linked in).
#
#   scripts/kernel-suites.sh [options]
#     --version V     kernel source package version (default 6.12; 6.1 works too)
#     --dir D         where to unpack and build (default ${TMPDIR:-/tmp}/uslab-kernel-suites)
#     --lib DIR       the directory of the libuslab.so to use (default: build one,
#                     Release, under D)
#     --suites "..."  among: xarray idr-test multiorder maple main (default: all)
#     --modes "..."   among: slub slub-nosheaves slub-locked slab slab-locked debug
#                     (default: all; debug is USLAB_DEBUG=FZPU)
#     --stats         run each suite once more with USLAB_STATS=1 and print the
#                     slabinfo lines of the kernel's caches it made
#     --jobs N        suites run at once (default 1: the maple suite has checks
#                     that lose races when another suite runs beside it; see run_one)
#     --adapter DIR   the adapter's sources (default tests/kernel; for its own tests)
#     --build-only    build, run nothing
#     --shim-only     build the kernel's own shim variant too (for bench/kernel.sh)
#
# One line per suite and mode: PASS or FAIL, the time, and on failure the log's
# path. Exit status 0 only when every one passed; 1 when one failed or the build
# failed (the adapter's missing functions are named); 2 when the source package
# cannot be had (nothing is left behind then).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=6.12
dir=${TMPDIR:-/tmp}/uslab-kernel-suites
lib=""
adapter=$repo/tests/kernel
all_suites="xarray idr-test multiorder maple main"
all_modes="slub slub-nosheaves slub-locked slab slab-locked debug"
suites=$all_suites
modes=$all_modes
jobs=1
build_only=0
stats=0
want_shim=0

die() { echo "kernel-suites: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --version) version=${2:?}; shift 2 ;;
    --dir) dir=${2:?}; shift 2 ;;
    --lib) lib=${2:?}; shift 2 ;;
    --suites) suites=${2:?}; shift 2 ;;
    --modes) modes=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --adapter) adapter=$(cd "${2:?}" && pwd) || exit 2; shift 2 ;;
    --stats) stats=1; shift ;;
    --build-only) build_only=1; shift ;;
    --shim-only) want_shim=1; build_only=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kernel-suites: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
for s in $suites; do
  case " $all_suites " in *" $s "*) ;; *) echo "kernel-suites: unknown suite '$s' (one of: $all_suites)" >&2; exit 2 ;; esac
done
for m in $modes; do
  case " $all_modes " in *" $m "*) ;; *) echo "kernel-suites: unknown mode '$m' (one of: $all_modes)" >&2; exit 2 ;; esac
done
case $version in *[!0-9.]*|"") echo "kernel-suites: bad version '$version'" >&2; exit 2 ;; esac
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "kernel-suites: --jobs wants a positive number, not '$jobs'" >&2; exit 2; }

created=0
[ -d "$dir" ] || created=1
mkdir -p "$dir" || die "cannot create $dir"
dir=$(cd "$dir" && pwd)
# One build at a time per directory (CTest runs several of these at once).
exec 9>"$dir/.lock"
flock 9

# ---- the source package -------------------------------------------------------
pkg=linux-source-$version
tarball=/usr/src/$pkg.tar.xz
src=$dir/src-$version
# The suites use liburcu (call_rcu, rcu_barrier): Debian's liburcu-dev.
have_urcu() { echo '#include <urcu/uatomic.h>' | cc -E -x c - >/dev/null 2>&1; }
if ! have_urcu; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
  if ! $sudo apt-get install -y -qq liburcu-dev >/dev/null 2>&1 || ! have_urcu; then
    [ "$created" = 1 ] && rm -rf "$dir"
    echo "kernel-suites: liburcu-dev (which the suites link) is not installed and apt-get could not install it" >&2
    exit 2
  fi
fi
if [ ! -e "$src/.unpacked" ]; then
  if [ ! -e "$tarball" ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
    if ! { $sudo apt-get install -y -qq "$pkg" >"$dir/apt.log" 2>&1 || { $sudo apt-get update -qq >/dev/null 2>&1 &&
         $sudo apt-get install -y -qq "$pkg" >"$dir/apt.log" 2>&1; }; } || [ ! -e "$tarball" ]; then
      rm -f "$dir/apt.log"
      [ "$created" = 1 ] && rm -rf "$dir"
      echo "kernel-suites: the kernel source package $pkg is not installed and apt-get could not install it ($tarball missing)" >&2
      exit 2
    fi
    rm -f "$dir/apt.log"
  fi
  rm -rf "$src" "$src.tmp"
  mkdir -p "$src.tmp"
  # The suites' own directories, the tools headers and libraries they include,
  # and the kernel's lib/ and include/ (the data-structure code they test).
  if ! tar -xJf "$tarball" -C "$src.tmp" --strip-components=1 \
       --exclude="$pkg/tools/testing/selftests" "$pkg/tools/include" "$pkg/tools/lib" "$pkg/tools/arch" \
       "$pkg/tools/testing" "$pkg/lib" "$pkg/include" 2>"$dir/tar.log"; then
    echo "kernel-suites: cannot unpack $tarball: $(head -1 "$dir/tar.log")" >&2
    rm -rf "$src.tmp" "$dir/tar.log"
    [ "$created" = 1 ] && rm -rf "$dir"
    exit 2
  fi
  rm -f "$dir/tar.log"
  mv "$src.tmp" "$src" && touch "$src/.unpacked"
fi
# Two layouts: in newer kernels (6.12) the shim and the common make rules are
# in tools/testing/shared (shared.mk, SHARED_OFILES); in older ones (6.1), in
# the suites' directory (CORE_OFILES). The kernel's shim is linux.c (and slab.o) in either.
[ -e "$src/tools/testing/radix-tree/Makefile" ] || die "$pkg has no tools/testing/radix-tree/Makefile"
if [ -e "$src/tools/testing/shared/shared.mk" ]; then
  objvar=SHARED_OFILES; kshim=$src/tools/testing/shared/linux.c
else
  objvar=CORE_OFILES; kshim=$src/tools/testing/radix-tree/linux.c
fi
[ -e "$kshim" ] || die "$pkg has no slab shim where this script looks ($kshim)"

# ---- uslab ----------------------------------------------------------------------
if [ -z "$lib" ]; then
  echo "== kernel-suites: building uslab (Release) in $dir/uslab"
  { cmake -S "$repo" -B "$dir/uslab" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUSLAB_BUILD_BENCH=OFF \
      -DUSLAB_BUILD_TESTS=OFF >/dev/null && cmake --build "$dir/uslab" --target uslab >/dev/null; } ||
    die "building uslab failed"
  lib=$dir/uslab
fi
lib=$(cd "$lib" && pwd)
[ -e "$lib/libuslab.so" ] || die "no libuslab.so in $lib"

# ---- the two builds: the kernel's shim (for comparison) and uslab's adapter -----
targets="main idr-test multiorder xarray maple"
# A variable of the suites' Makefile, as make computes it.
make_var() {   # make_var NAME
  make -s -C "$src/tools/testing/radix-tree" --no-print-directory --eval "uslab-print-%: ; @echo \$(\$*)" \
    "uslab-print-$1" 2>/dev/null
}
# Flags: the suites' own, but optimised as a program is (-O2 for -Og) and
# without the sanitizers, which would replace malloc under both builds.
kcflags=$(make_var CFLAGS | tr ' ' '\n' | grep -v -e '^-fsanitize' -e '^-Og$' | tr '\n' ' ')
[ -n "$kcflags" ] || die "cannot read the suites' CFLAGS from $pkg's Makefile"
kcflags="$kcflags -O2 -Wno-unused-variable"
# Debian's 6.1 source has maple tree fixes from later kernels that use
# `fallthrough`, which its tools headers do not define yet: defined on the
# header of ours included first in both builds (no file of the kernel is edited).
if ! grep -rqs 'define fallthrough' "$src/tools/include"; then
  printf '#ifndef fallthrough\n#define fallthrough __attribute__((__fallthrough__))\n#endif\n' >"$src/uslab-compat.h"
  kcflags="$kcflags -include $src/uslab-compat.h"
fi
# The shared objects, the kernel's shim (linux.o, slab.o) replaced by the adapter.
kobjs=$(make_var "$objvar" | tr ' ' '\n' | grep -v -e '^linux\.o$' -e '^slab\.o$' | tr '\n' ' ')
echo "$kobjs" | grep -q 'radix-tree\.o' || die "cannot read $objvar from $pkg's Makefile"
kobjs="$kobjs uslab-shim.o uslab-backend.o"
# Older shims (6.1's) grant a bulk allocation without reclaim all or nothing;
# newer ones (6.12's) object by object. The adapter does as this one does.
shimdefs=""
grep -q 'non_kernel < size' "$kshim" && shimdefs="-DKSHIM_BULK_ALL_OR_NOTHING"

# A tree to build in: the tools directories copied, lib/ and include/ shared.
make_tree() {   # make_tree DEST
  rm -rf "$1" && mkdir -p "$1/tools/testing" || return 1
  cp -a "$src/tools/include" "$src/tools/lib" "$src/tools/arch" "$1/tools/" &&
    cp -a "$src/tools/testing/radix-tree" "$1/tools/testing/" &&
    { [ ! -d "$src/tools/testing/shared" ] || cp -a "$src/tools/testing/shared" "$1/tools/testing/"; } &&
    ln -s "$src/lib" "$1/lib" && ln -s "$src/include" "$1/include"
}

# What a build depends on: the adapter's sources, uslab's exported names, the
# library's place, the package. A build is reused while they are the same.
stamp_of() {
  { cat "$adapter/"*.[ch] "$0"; nm -D --defined-only "$lib/libuslab.so" | awk '{print $3}'
    echo "$lib $version"; ls -l "$tarball" 2>/dev/null; } | sha256sum | cut -c1-16
}

build_shim() {
  local tree=$dir/shim-$version
  [ -e "$tree/.built" ] && return 0
  make_tree "$tree" || die "cannot copy the kernel tree"
  if ! make -C "$tree/tools/testing/radix-tree" -j"$jobs" CFLAGS="$kcflags" LDFLAGS="" $targets \
       >"$tree/build.log" 2>&1; then
    die "the kernel's own shim build failed (log: $tree/build.log)"
  fi
  touch "$tree/.built"
}

build_uslab() {
  local tree=$dir/uslab-$version stamp
  stamp=$(stamp_of)
  [ "$(cat "$tree/.built" 2>/dev/null)" = "$stamp" ] && return 0
  make_tree "$tree" || die "cannot copy the kernel tree"
  local rt=$tree/tools/testing/radix-tree
  # Every name libuslab exports that the suites' shim also has (kmem_cache_*,
  # kmalloc, kfree, ...) is renamed shim_<name> in the kernel's objects and in
  # shim.c, so the suites call the adapter and the adapter's backend calls
  # uslab. A kernel that calls one the adapter lacks fails to link, named.
  nm -D --defined-only "$lib/libuslab.so" | awk '$3 ~ /^k/ {print "#define " $3 " shim_" $3}' \
    >"$rt/uslab-names.h" || die "cannot read libuslab's names"
  local cflags="$kcflags -include $rt/uslab-names.h"
  (
    cd "$rt" && cc $cflags $shimdefs -c "$adapter/shim.c" -I"$adapter" -o "$rt/uslab-shim.o" -Wno-unused-function &&
      cc -O2 -g -Wall -c "$adapter/backend.c" -I"$repo/include" -I"$adapter" -o "$rt/uslab-backend.o"
  ) >"$tree/build.log" 2>&1 || die "the adapter does not compile against $pkg (log: $tree/build.log)"
  if ! (cd "$rt" && make -k -j"$jobs" CFLAGS="$cflags" LDFLAGS="" "$objvar=$kobjs" \
        LDLIBS="-lpthread -lurcu -L$lib -Wl,-rpath,$lib -luslab" $targets) >>"$tree/build.log" 2>&1; then
    local missing
    missing=$(grep -o "undefined reference to \`[A-Za-z0-9_]*'" "$tree/build.log" | sed "s/.*\`\(shim_\)\{0,1\}\([A-Za-z0-9_]*\)'/\2/" | sort -u | tr '\n' ' ')
    if [ -n "$missing" ]; then
      echo "kernel-suites: the adapter ($adapter) lacks what $pkg's suites call: $missing" >&2
    fi
    die "building the suites on uslab failed (log: $tree/build.log)"
  fi
  echo "$stamp" >"$tree/.built"
}

[ "$want_shim" = 1 ] && build_shim
build_uslab
flock -u 9
[ "$build_only" = 1 ] && exit 0

# ---- running --------------------------------------------------------------------
mode_env() {
  case $1 in
    slub) echo "USLAB_ALLOCATOR=slub" ;;
    slub-nosheaves) echo "USLAB_ALLOCATOR=slub USLAB_SHEAVES=0" ;;
    slub-locked) echo "USLAB_ALLOCATOR=slub USLAB_RSEQ=0" ;;
    slab) echo "USLAB_ALLOCATOR=slab" ;;
    slab-locked) echo "USLAB_ALLOCATOR=slab USLAB_RSEQ=0" ;;
    debug) echo "USLAB_ALLOCATOR=slub USLAB_DEBUG=FZPU" ;;
  esac
}
rt=$dir/uslab-$version/tools/testing/radix-tree
logs=$dir/logs-$version
mkdir -p "$logs"

# run_one SUITE MODE: one line, status 0 when it passed. A suite passes when it
# exits 0, every "N of M tests passed" line has N = M, and (the adapter checks)
# uslab reported nothing.
# One check of the maple suite is a race the machine can lose:
# run_check_rcu_slowread asserts that a reader saw the old value of index 4390,
# which its readers read 400 us after they start and its writer replaces as soon
# as all 20 readers are made, so it passes only while making them takes longer.
# The kernel's own shim on glibc loses it too (3 runs of 3 on 2 CPUs with two
# busy processes beside it, now and then on an idle machine). A failure there,
# and only there, is run once more, and said. (6.1's maple suite also fails
# next_prev_test at random, about as often on the kernel's shim over glibc: a
# retry would not make it pass, so it is not retried; docs/GUIDE.md, "The
# kernel's own test suites".)
run_one() {
  local s=$1 m=$2 log=$logs/$1.$2.log t0 t1 rc why="" note=""
  t0=$(date +%s.%N)
  # (exit $?: the subshell waits and says "Aborted" into the log, not here)
  (cd "$rt" && env $(mode_env "$m") ./"$s"; exit $?) >"$log" 2>&1
  rc=$?
  local race
  if [ $rc -ne 0 ] && [ "$s" = maple ] &&
     race=$(tail -c 300 "$log" | grep -o -E 'run_check_rcu_slowread: Assertion' | cut -d: -f1); then
    mv "$log" "$log.race"
    note="  ($race's race lost once, run again; first log: $log.race)"
    (cd "$rt" && env $(mode_env "$m") ./"$s"; exit $?) >"$log" 2>&1
    rc=$?
  fi
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ]; then
    why="exit status $rc"
  elif awk '/ of [0-9]+ tests passed/ { if ($(NF-4) != $(NF-2)) bad = 1 } END { exit !bad }' "$log"; then
    why="$(grep ' of [0-9]* tests passed' "$log" | tail -1)"
  fi
  if [ -z "$why" ]; then
    printf 'PASS  %-10s %-15s %7.1f s%s\n' "$s" "$m" "$(echo "$t1 - $t0" | bc)" "$note"
    return 0
  fi
  printf 'FAIL  %-10s %-15s %7.1f s  (%s; log: %s)%s\n' "$s" "$m" "$(echo "$t1 - $t0" | bc)" "$why" "$log" "$note"
  return 1
}

failed=0
pids=()
for m in $modes; do
  for s in $suites; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || failed=1; done
    run_one "$s" "$m" &
  done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done

# With USLAB_STATS=1 uslab prints /proc/slabinfo's text at exit: the caches
# the kernel's code made must be there (radix_tree_node; the maple suite's,
# maple_node).
if [ "$stats" = 1 ]; then
  for s in $suites; do
    log=$logs/$s.stats.log
    # (merging as by default, whatever the caller's environment says)
    (cd "$rt" && USLAB_STATS=1 USLAB_NOMERGE=0 ./"$s") >"$log" 2>&1 ||
      { echo "FAIL  $s with USLAB_STATS=1 (log: $log)"; failed=1; }
    echo "== $s with USLAB_STATS=1: the kernel's caches in uslab's slabinfo at exit"
    grep -E '^(# name|radix_tree_node|maple_node|test_cache)' "$log" | sed 's/^/  /'
    want=radix_tree_node
    case $s in maple) want=maple_node ;; esac
    for c in $want; do
      grep -q "^$c " "$log" || { echo "FAIL  $s: no $c in uslab's slabinfo (log: $log)"; failed=1; }
    done
  done
fi
exit $failed
