#!/usr/bin/env bash
# suites_time.sh - the kernel's own user-space test suites (tools/testing/radix-tree),
# timed on uslab against the kernel's own slab shim over each peer malloc.
#
# The suites are built by scripts/kernel-suites.sh twice: once with uslab's adapter
# (tests/kernel/: every kmem_cache call a uslab cache, kmalloc uslab's kmalloc, and
# malloc uslab's since libuslab is linked in), once with the kernel's shim
# (tools/testing/shared/linux.c: kmem_cache over malloc and a mutex, with a list of
# ten recycled objects per cache). Variants, called as their users call them:
#   uslab          the adapter build
#   uslab-malloc   the kernel's shim with LD_PRELOAD=libuslab.so (an extra row:
#                  uslab as malloc only, under the kernel's shim)
#   glibc          the kernel's shim, no preload
#   jemalloc, tcmalloc, mimalloc   the kernel's shim with LD_PRELOAD of the peer
#                  (tcmalloc: Debian's libtcmalloc-minimal4, gperftools 2.10 with
#                  per-thread caches, not Google's per-CPU tcmalloc; the table names
#                  it gperftools, the TSV keeps the key tcmalloc)
# Rounds are interleaved (round 1: every variant, then round 2 ...); the table
# gives each variant's median seconds and uslab's ratio to the best peer (glibc,
# jemalloc, tcmalloc, mimalloc).
#
#   bash bench/kernel/suites_time.sh [--uslab DIR] [--suites "xarray:5 idr-test:1"]
#                                    [--quick] [--out FILE.tsv] [--dir D]
#     --uslab DIR   the directory of libuslab.so (default <repo>/build/release)
#     --suites      suite:rounds pairs (default: xarray:5 multiorder:5 maple:1;
#                   --quick: xarray:3 multiorder:3); idr-test and main (44 and 85 s
#                   a run here, most of it loops that run for a set time) are
#                   left to an explicit --suites
#     --out FILE    every run as TSV: suite, variant, round, wall seconds, exit
#                   status, CPU seconds
#     --dir D       kernel-suites.sh's directory (default its own)
# A run that fails shows as FAILED; the exit status is 1 when one of uslab's did.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
uslab=$repo/build/release
suites="xarray:5 multiorder:5 maple:1"
out=""
dirarg=()
while [ $# -gt 0 ]; do
  case $1 in
    --uslab) uslab=${2:?}; shift 2 ;;
    --suites) suites=${2:?}; shift 2 ;;
    --quick) suites="xarray:3 multiorder:3"; shift ;;
    --out) out=${2:?}; shift 2 ;;
    --dir) dirarg=(--dir "${2:?}"); shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "suites_time: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
uslab=$(cd "$uslab" && pwd) || exit 2
names=""
for sr in $suites; do
  s=${sr%%:*} r=${sr#*:}
  [[ $sr == *:* && $r =~ ^[1-9][0-9]*$ ]] || { echo "suites_time: '$sr' is not suite:rounds" >&2; exit 2; }
  names="$names $s"
done

# Build both (the adapter's build and the kernel's shim build); the script
# checks the suite names.
bash "$repo/scripts/kernel-suites.sh" "${dirarg[@]}" --lib "$uslab" --suites "$names" --shim-only || exit $?
kdir=${dirarg[1]:-${TMPDIR:-/tmp}/uslab-kernel-suites}
version=6.12
ubin=$kdir/uslab-$version/tools/testing/radix-tree
sbin=$kdir/shim-$version/tools/testing/radix-tree

lib=/usr/lib/x86_64-linux-gnu
variants=(uslab uslab-malloc glibc jemalloc tcmalloc mimalloc)
declare -A dirof preload
for v in "${variants[@]}"; do dirof[$v]=$sbin; preload[$v]=""; done
dirof[uslab]=$ubin
preload[uslab-malloc]=$uslab/libuslab.so
preload[jemalloc]=$lib/libjemalloc.so.2
preload[tcmalloc]=$lib/libtcmalloc_minimal.so.4
preload[mimalloc]=$lib/libmimalloc.so.2
present=()
for v in "${variants[@]}"; do
  if [ -n "${preload[$v]}" ] && [ ! -e "${preload[$v]}" ]; then
    echo "suites_time: ${preload[$v]} missing: $v left out" >&2
    continue
  fi
  present+=("$v")
done

tsv=$(mktemp)
printf 'suite\tvariant\tround\tseconds\tstatus\tcpu_seconds\n' >"$tsv"
TIMEFORMAT='%R %U %S'
for sr in $suites; do
  s=${sr%%:*} rounds=${sr#*:}
  for r in $(seq "$rounds"); do
    for v in "${present[@]}"; do
      for try in 1 2; do
        # bash's time: wall, user and system seconds of the suite's process.
        t=$( { time (cd "${dirof[$v]}" && if [ -n "${preload[$v]}" ]; then LD_PRELOAD=${preload[$v]} ./"$s"
                                          else ./"$s"; fi >"$tsv.log" 2>&1; echo $? >"$tsv.rc"); } 2>&1 )
        rc=$(cat "$tsv.rc")
        # The maple suite's reader race (scripts/kernel-suites.sh) is run again
        # once, whoever's run lost it; any other failure stands.
        [ "$rc" != 0 ] && [ $try = 1 ] && tail -c 300 "$tsv.log" | grep -q 'run_check_rcu_slowread: Assertion' ||
          break
        echo "suites_time: $s round $r $v lost run_check_rcu_slowread's reader race; run again" >&2
      done
      read -r secs user sys <<<"$t"
      cpu=$(echo "$user + $sys" | bc)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$v" "$r" "$secs" "$rc" "$cpu" >>"$tsv"
      echo "suites_time: $s round $r $v ${secs} s, cpu ${cpu} s (exit $rc)" >&2
      [ "$rc" = 0 ] || echo "suites_time: $s under $v failed: $(grep -v -e '^/' -e 'Aborted' "$tsv.log" | tail -n 1 | tail -c 200)" >&2
    done
  done
done
rm -f "$tsv.rc" "$tsv.log"
[ -n "$out" ] && cp "$tsv" "$out"

python3 - "$tsv" "${present[*]}" "$(cd "$repo" && git describe --always --dirty 2>/dev/null || echo '?')" <<'EOF'
import sys, statistics, time
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]).readlines()[1:]]
variants = sys.argv[2].split()
peers = [v for v in ("glibc", "jemalloc", "tcmalloc", "mimalloc") if v in variants]
shown = {"tcmalloc": "gperftools"}
suites = list(dict.fromkeys(r[0] for r in rows))
failed = 0
print("== the kernel's test suites (tools/testing/radix-tree, linux-source-6.12): seconds per run, "
      "median of the rounds, lower is better ==")
print("run %s, uslab %s; uslab: the suites' kmem_cache calls on uslab's caches (the adapter in tests/kernel/); "
      "uslab-malloc (extra): the kernel's shim, uslab preloaded as malloc; peers: the kernel's shim "
      "(kmem_cache = malloc + a mutex) with the peer preloaded" % (time.strftime("%Y-%m-%d %H:%M"), sys.argv[3]))
for col, what in ((3, "wall seconds"), (5, "CPU seconds (user + system)")):
    print("\n%s:" % what)
    print("%-11s %6s" % ("suite", "rounds") + "".join(" %12s" % shown.get(v, v) for v in variants)
          + " %11s %10s" % ("uslab/best", "best"))
    for s in suites:
        med = {}
        for v in variants:
            vals = [float(r[col]) for r in rows if r[0] == s and r[1] == v]
            if any(r[4] != "0" for r in rows if r[0] == s and r[1] == v):
                failed |= v.startswith("uslab")     # a peer's failure is shown, not ours
                med[v] = None
            elif vals:
                med[v] = statistics.median(vals)
        n = max(int(r[2]) for r in rows if r[0] == s)
        line = "%-11s %6d" % (s, n) + "".join(" %12s" % ("FAILED" if med.get(v) is None else "%.3f" % med[v])
                                              for v in variants)
        ok = [(med[p], p) for p in peers if med.get(p)]
        if ok and med.get("uslab"):
            b = min(ok)
            line += " %11.2f %10s" % (med["uslab"] / b[0], shown.get(b[1], b[1]))
        print(line)
if "tcmalloc" in variants:
    print("\ngperftools = Debian libtcmalloc-minimal4, gperftools 2.10 tcmalloc with per-thread caches (not "
          "Google's per-CPU tcmalloc)")
print("\nuslab/best: uslab's median over the best peer's (below 1.00: uslab is faster). idr-test and main "
      "run loops for a set time (idr-test about 33 of its 44 s, main's iteration checks) and maple sleeps "
      "in its RCU tests: their times say little about the allocator; xarray and multiorder do fixed work.")
sys.exit(failed)
EOF
rc=$?
rm -f "$tsv"
exit $rc
