#!/usr/bin/env bash
# bench.sh - the main job: build uslab (Release) and run the seed benchmarks
# against glibc, jemalloc, tcmalloc and mimalloc (uslab-bench), then the malloc
# workloads and real programs under LD_PRELOAD (uslab-mbench), then what the
# debug caches cost and find against glibc's checking mode and the peers
# (uslab-dbench), then the redis memory scenario (bench/redis/redis_rss.sh).
# Extra arguments go to uslab-bench alone (e.g. "single --runs 5"); "malloc
# ..." runs only uslab-mbench with the rest (e.g. "malloc larson --runs 3"),
# "debug ..." only uslab-dbench (e.g. "debug detect"), "redis ..." only the
# redis scenario (e.g. "redis --rounds 1 --alloc jemalloc,uslab").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh bench
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release
if [ "${1:-}" = "malloc" ]; then
  shift
  exec build/release/bench/uslab-mbench "$@"
fi
if [ "${1:-}" = "debug" ]; then
  shift
  exec build/release/bench/uslab-dbench "$@"
fi
if [ "${1:-}" = "redis" ]; then
  shift
  exec bash bench/redis/redis_rss.sh --uslab build/release/libuslab.so "$@"
fi
build/release/bench/uslab-bench "$@"
if [ $# -eq 0 ] || [ "$1" = "all" ]; then
  build/release/bench/uslab-mbench
  build/release/bench/uslab-dbench
  bash bench/redis/redis_rss.sh --uslab build/release/libuslab.so
fi
