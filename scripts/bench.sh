#!/usr/bin/env bash
# bench.sh - the main job: build uslab (Release) and run the seed benchmarks
# against glibc, jemalloc, gperftools (Debian's libtcmalloc-minimal4: gperftools
# 2.10 tcmalloc with per-thread caches, not Google's per-CPU tcmalloc) and
# mimalloc (uslab-bench: single, nalloc, bulk, detached, remote, random-free,
# partial-drain, seed003, messaging, colour), then the malloc
# workloads and real programs under LD_PRELOAD (uslab-mbench), then what the
# debug caches cost and find against glibc's checking mode and the peers
# (uslab-dbench), then the redis memory scenario (bench/redis/redis_rss.sh),
# then the kernel's own test suites on uslab against the kernel's slab shim over
# each peer (bench/kernel/suites_time.sh), then the Rust crate against the
# mimalloc and tikv-jemallocator crates, the system allocator, Box, slab and
# sharded-slab (bench/rust/run.py), then kfree_rcu against call_rcu with a
# freeing callback per object (uslab-rcubench), and write the report:
# bench/report/README.md with every table and the plots (scripts/bench_report.py),
# the programs' own output kept in bench/report/raw/.
# Progress goes to stderr, the tables to stdout, and a short summary ends it.
#
# "quick" (first argument): every part with small counts and few runs (about
# 5 minutes on a 2-CPU machine), the report the same, marked quick mode.
# "all ..." or no argument: the full job (about 30 minutes); the rest of
# the arguments go to uslab-bench (e.g. "all --runs 5").
# Other arguments run one program without a report: extra arguments go to
# uslab-bench alone (e.g. "single --runs 5", "partial-drain --runs 5");
# "malloc ..." runs only uslab-mbench with the rest (e.g. "malloc larson
# --runs 3"), "debug ..." only uslab-dbench (e.g. "debug detect"), "redis ..."
# only the redis scenario (e.g. "redis --rounds 1 --alloc jemalloc,uslab"),
# "kernel ..." only the kernel's suites (e.g. "kernel --suites maple:3"),
# "rust ..." only the Rust part (e.g. "rust --runs 3"), "rcu ..." only
# uslab-rcubench (kfree_rcu against call_rcu per object; liburcu needed).
set -euo pipefail
cd "$(dirname "$0")/.."
command_line="bash scripts/bench.sh${*:+ $*}"
bash scripts/deps.sh bench
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release
B=build/release/bench
USLAB_SO=build/release/libuslab.so
case "${1:-}" in
malloc) shift; exec $B/uslab-mbench "$@" ;;
debug) shift; exec $B/uslab-dbench "$@" ;;
redis) shift; exec bash bench/redis/redis_rss.sh --uslab $USLAB_SO "$@" ;;
kernel) shift; exec bash bench/kernel/suites_time.sh --uslab build/release "$@" ;;
rust) shift; exec python3 bench/rust/run.py "$@" ;;
rcu) shift; exec $B/uslab-rcubench "$@" ;;
esac
mode=full
if [ "${1:-}" = quick ]; then
  mode=quick
  shift
elif [ $# -gt 0 ] && [ "$1" != all ]; then
  exec $B/uslab-bench "$@"
fi

# The report run: each part's stdout and stderr are shown and kept in raw/.
REPORT=bench/report
RAW=$REPORT/raw
mkdir -p "$RAW"
rm -f "$RAW"/* "$REPORT"/*.png "$REPORT"/README.md
python3 scripts/bench_report.py meta "$REPORT" --mode "$mode" --command "$command_line"
start=$SECONDS
failed=0

# run_part NAME COMMAND...: runs it with stdout to the terminal and
# $RAW/NAME.txt, stderr to the terminal and $RAW/NAME.err; records its exit
# status, seconds and the load average at its end in $RAW/parts.tsv (the
# machine may be shared: the report shows the load beside each part).
run_part() {
  local name=$1 t0=$SECONDS rc
  shift
  echo "== bench.sh: $name: $*" >&2
  set +e
  "$@" 2> >(tee "$RAW/$name.err" >&2) | tee "$RAW/$name.txt"
  rc=${PIPESTATUS[0]}
  set -e
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    >> "$RAW/parts.tsv"
  if [ "$rc" != 0 ]; then
    echo "== bench.sh: $name exited with status $rc; going on with the next part" >&2
    failed=$((failed + 1))
  fi
}

if [ $mode = quick ]; then
  run_part uslab-bench $B/uslab-bench all --runs 3 --quick "$@" --data "$RAW/data.tsv"
  run_part uslab-mbench $B/uslab-mbench --runs 3 --quick --data "$RAW/data.tsv"
  run_part uslab-dbench $B/uslab-dbench --runs 3 --quick
  run_part redis bash bench/redis/redis_rss.sh --uslab $USLAB_SO --rounds 1 --keys 300000 --out "$RAW/redis.tsv"
  run_part kernel-suites bash bench/kernel/suites_time.sh --uslab build/release --quick --out "$RAW/kernel.tsv"
  run_part rust python3 bench/rust/run.py --quick
  [ -x $B/uslab-rcubench ] && run_part rcu $B/uslab-rcubench --runs 3 --quick
else
  run_part uslab-bench $B/uslab-bench "$@" --data "$RAW/data.tsv"
  run_part uslab-mbench $B/uslab-mbench --data "$RAW/data.tsv"
  run_part uslab-dbench $B/uslab-dbench
  run_part redis bash bench/redis/redis_rss.sh --uslab $USLAB_SO --out "$RAW/redis.tsv"
  run_part kernel-suites bash bench/kernel/suites_time.sh --uslab build/release --out "$RAW/kernel.tsv"
  run_part rust python3 bench/rust/run.py
  [ -x $B/uslab-rcubench ] && run_part rcu $B/uslab-rcubench
fi
sleep 1   # the stderr copies (tee in a process substitution) finish writing
printf '%s\t%s\t%s\t%s\t%s\n' total $failed $((SECONDS - start)) "$command_line" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  >> "$RAW/parts.tsv"
python3 scripts/bench_report.py report "$REPORT" ||
  { echo "bench.sh: the report generator failed (the programs' output is in $RAW/)" >&2; exit 1; }
[ $failed = 0 ]
