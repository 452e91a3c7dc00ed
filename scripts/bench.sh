#!/usr/bin/env bash
# bench.sh - the main job: build uslab (Release) and run the seed benchmarks
# against glibc, jemalloc, tcmalloc and mimalloc. Extra arguments go to
# uslab-bench (e.g. "single --runs 5").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release
exec build/release/bench/uslab-bench "$@"
