#!/usr/bin/env python3
"""run.py - the bench job's Rust part: the uslab crate against the Rust
allocator crates and object pools (bindings/rust/uslab-bench).

Builds the four workload binaries (release), one per global allocator: uslab
(`uslab::Uslab`), the mimalloc crate, the tikv-jemallocator crate and the
system allocator (glibc malloc), then runs them RUNS times each, interleaved,
and prints the medians (ns per operation; lower is better) with ratios against
uslab in the same run. The pool workloads (uslab's KmemCache<T>, the slab and
sharded-slab crates) run in the uslab binary. Every allocator is called the way
Rust programs call it: the crate as #[global_allocator].

Usage: run.py [--quick] [--runs N] [--target-dir DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALLOCS = [("uslab", "uslab"), ("mimalloc", "mimalloc"), ("jemalloc", "jemalloc"), ("system", "system")]
GLOBAL = ["box-pair", "box-random-free", "box-threads", "btreemap-churn", "hashmap-churn", "string-building"]
POOLS = [("pair", "kmemcache-pair", "slab-pair", "sharded-slab-pair", "box-pair"),
         ("random-order free (200k)", "kmemcache-random-free", "slab-random-free", "sharded-slab-random-free",
          "box-random-free"),
         ("threads (2 x CPUs)", "kmemcache-threads", None, "sharded-slab-threads", "box-threads")]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--target-dir", default=os.path.join(ROOT, "build", "release", "rust"))
    a = ap.parse_args()
    runs = a.runs or (3 if a.quick else 5)
    manifest = os.path.join(ROOT, "bindings", "rust", "Cargo.toml")
    print("[rust] cargo build --release -p uslab-bench", file=sys.stderr, flush=True)
    r = subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "uslab-bench",
                        "--manifest-path", manifest, "--target-dir", a.target_dir])
    if r.returncode != 0:
        print("run.py: the Rust build failed", file=sys.stderr)
        return 1
    results = {}  # (alloc, workload) -> [ns]
    for run in range(runs):
        for key, _ in ALLOCS:
            exe = os.path.join(a.target_dir, "release", "rbench-" + key)
            print("[rust] run %d/%d: %s" % (run + 1, runs, key), file=sys.stderr, flush=True)
            out = subprocess.run([exe] + (["--quick"] if a.quick else []), capture_output=True, text=True)
            if out.returncode != 0:
                print("run.py: %s exited with %d: %s" % (exe, out.returncode, out.stderr.strip()[-500:]),
                      file=sys.stderr)
                continue
            for line in out.stdout.splitlines():
                name, ns = line.split("\t")
                results.setdefault((key, name), []).append(float(ns))
    med = {k: statistics.median(v) for k, v in results.items()}

    def cell(k):
        return "%9.2f" % med[k] if k in med else "%9s" % "-"

    print("CPU: %s, %d CPUs; medians of %d runs per allocator, runs interleaved%s"
          % (cpu_model(), os.cpu_count() or 0, runs, " (quick: a tenth of the counts)" if a.quick else ""))
    print()
    print("== Rust: global allocators, ns per operation ==")
    print("(#[global_allocator]: uslab::Uslab, the mimalloc crate's MiMalloc, the tikv-jemallocator crate's "
          "Jemalloc, none: the system allocator, glibc's malloc)")
    print("%-18s" % "workload" + "".join("%12s" % label for _, label in ALLOCS) + "   uslab/best peer")
    for w in GLOBAL:
        peers = [med[(k, w)] for k, _ in ALLOCS[1:] if (k, w) in med]
        ratio = "%8.2f" % (med[("uslab", w)] / min(peers)) if ("uslab", w) in med and peers else "       -"
        print("%-18s" % w + "".join("%12s" % cell((k, w)).strip() for k, _ in ALLOCS) + "   " + ratio)
    print()
    print("== Rust: object pools, ns per operation ==")
    print("(KmemCache<T>, slab and sharded-slab in the uslab binary; Box<T> under the fastest global allocator "
          "of the table above; T is 64 bytes)")
    print("%-26s%12s%12s%14s%22s" % ("workload", "KmemCache", "slab", "sharded-slab", "Box (fastest)"))
    verdicts = []
    for label, km, sl, sh, bx in POOLS:
        boxes = [(med[(k, bx)], k) for k, _ in ALLOCS if (k, bx) in med]
        best = min(boxes) if boxes else None
        print("%-26s%12s%12s%14s%22s" % (label, cell(("uslab", km)).strip(),
                                         cell(("uslab", sl)).strip() if sl else "-",
                                         cell(("uslab", sh)).strip(),
                                         "%.2f (%s)" % best if best else "-"))
        if ("uslab", km) in med and best:
            verdicts.append("KmemCache %s / Box under %s: %.2f" % (label, best[1], med[("uslab", km)] / best[0]))
        if ("uslab", km) in med and ("uslab", sh) in med:
            verdicts.append("KmemCache %s / sharded-slab: %.2f" % (label, med[("uslab", km)] / med[("uslab", sh)]))
    print()
    print("== Rust: the targets ==")
    print("(KmemCache pair at most Box's under the fastest allocator: ratio <= 1; faster than sharded-slab "
          "under threads: ratio < 1)")
    for v in verdicts:
        print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
