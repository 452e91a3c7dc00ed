#!/usr/bin/env bash
# deps.sh - install what uslab needs on Debian, only if missing. "deps.sh bench":
# the build tools, the peer allocators the benchmarks run against (scudo among
# them) and the real programs they run (python3, sqlite3, perl, gcc,
# redis-server and redis-benchmark):
# what scripts/bench.sh needs.
# bench and test: cargo (the Rust crates), if no cargo is installed.
# "deps.sh package": the build tools, the optional headers and the packaging
# tools (dpkg-dev, debhelper, lintian): what scripts/package.sh needs.
# "deps.sh test" (the default): those, plus clang with its sanitizer runtimes,
# valgrind, g++, pkg-config, git, and the kernel's source (linux-source-6.12)
# and liburcu-dev for the kernel's test suites. Nothing else is downloaded.
set -euo pipefail
want=${1:-test}
pkgs=()
command -v cmake >/dev/null || pkgs+=(cmake)
command -v ninja >/dev/null || pkgs+=(ninja-build)
command -v cc >/dev/null || pkgs+=(gcc)
# The real programs the benchmark (and the tests) run under LD_PRELOAD.
command -v python3 >/dev/null || pkgs+=(python3)
command -v sqlite3 >/dev/null || pkgs+=(sqlite3)
command -v perl >/dev/null || pkgs+=(perl)
# The Rust crates (bindings/rust: their tests, and the bench's Rust part).
# Debian's cargo where none is installed; crates come from the registry.
[ "$want" = package ] || command -v cargo >/dev/null || pkgs+=(cargo)
# The Debian packages (scripts/package.sh, the test package_deb): the
# packaging tools and debian/control's Build-Depends (the headers below).
if [ "$want" = package ] || [ "$want" = test ]; then
  command -v dpkg-buildpackage >/dev/null || pkgs+=(dpkg-dev)
  command -v dh >/dev/null || pkgs+=(debhelper)
  command -v lintian >/dev/null || pkgs+=(lintian)
  command -v pod2man >/dev/null || pkgs+=(perl)
  command -v pkg-config >/dev/null || pkgs+=(pkg-config)
  command -v c++ >/dev/null || pkgs+=(build-essential)
fi
if [ "$want" = bench ]; then
  # The redis memory scenario (bench/redis/redis_rss.sh).
  command -v redis-server >/dev/null || pkgs+=(redis-server)
  command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null || pkgs+=(redis-tools)
  # The compiler among the real programs (uslab-mbench's gcc workload).
  command -v gcc >/dev/null || pkgs+=(gcc)
  # scudo, the hardened peer of the debug detection table (bench/dbench/dbench.c).
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so >/dev/null 2>&1 ||
    pkgs+=(libclang-rt-14-dev)
  # The report's plots (scripts/bench_report.py draws them with gnuplot's pngcairo).
  command -v gnuplot >/dev/null || pkgs+=(gnuplot-nox)
fi
lib=/usr/lib/x86_64-linux-gnu
[ -e $lib/libjemalloc.so.2 ] || pkgs+=(libjemalloc2)
[ -e $lib/libtcmalloc_minimal.so.4 ] || pkgs+=(libtcmalloc-minimal4)
[ -e $lib/libmimalloc.so.2 ] || pkgs+=(libmimalloc2.0)
# Debug reports' call stacks and names (optional: the build works without).
[ -e /usr/include/x86_64-linux-gnu/libunwind.h ] || [ -e /usr/include/libunwind.h ] || pkgs+=(libunwind-dev)
[ -e /usr/include/elfutils/libdwfl.h ] || pkgs+=(libdw-dev)
# kfree_rcu and SLAB_TYPESAFE_BY_RCU on liburcu (optional, headers only; its
# tests and uslab-rcubench link it), and the kernel's test suites' RCU.
[ -e /usr/include/urcu/uatomic.h ] || ls /usr/include/*/urcu/uatomic.h >/dev/null 2>&1 || pkgs+=(liburcu-dev)
# NUMA placement: slabs' pages bound to their node (optional, as above).
[ -e /usr/include/numaif.h ] || pkgs+=(libnuma-dev)
if [ "$want" = test ]; then
  command -v clang >/dev/null || pkgs+=(clang)
  command -v valgrind >/dev/null || pkgs+=(valgrind)
  command -v pkg-config >/dev/null || pkgs+=(pkg-config)
  # The C++ test, and git among the programs the tests run under LD_PRELOAD.
  command -v g++ >/dev/null || pkgs+=(g++)
  command -v git >/dev/null || pkgs+=(git)
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.tsan-x86_64.a >/dev/null 2>&1 || pkgs+=(libclang-rt-14-dev)
  # The kernel's own test suites on uslab (scripts/kernel-suites.sh): the
  # kernel's source as Debian ships it, and the RCU library they link.
  [ -e /usr/src/linux-source-6.12.tar.xz ] || pkgs+=(linux-source-6.12)
elif [ "$want" != bench ] && [ "$want" != package ]; then
  echo "deps: usage: deps.sh [bench|test|package]" >&2
  exit 2
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "deps: missing ${pkgs[*]}; run as root (or install sudo) to install them" >&2
      exit 1
    fi
    sudo=sudo
  fi
  echo "deps: installing ${pkgs[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
