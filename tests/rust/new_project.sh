#!/usr/bin/env bash
# new_project.sh - the README's promise: a new Cargo project that adds the uslab
# crate by path and the two lines of its README runs on uslab. The program
# allocates, and USLAB_STATS=<file> (the slabinfo written at exit) must show
# the kmalloc caches in use; without the two lines it must not (so the check
# can fail).
# Usage: new_project.sh REPO_ROOT TARGET_DIR
set -euo pipefail
root=$1 target=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo new -q --vcs none --name newproj "$dir/newproj"
cd "$dir/newproj"
printf 'uslab = { path = "%s/bindings/rust/uslab" }\n' "$root" >> Cargo.toml
body='fn main() {
    let v: Vec<String> = (0..10000).map(|i| format!("block {i}")).collect();
    assert_eq!(v[9999], "block 9999");
    std::mem::forget(v); // still in use when the slabinfo is written at exit
}'
run() {   # run WITH_LINES -> the slabinfo file
  if [ "$1" = yes ]; then
    printf '#[global_allocator]\nstatic GLOBAL: uslab::Uslab = uslab::Uslab;\n\n%s\n' "$body" > src/main.rs
  else
    printf '%s\n' "$body" > src/main.rs
  fi
  rm -f "$dir/slabinfo"
  USLAB_STATS="$dir/slabinfo" cargo run -q --target-dir "$target" >/dev/null
}
# kmalloc-16 holds the 10000 strings' buffers ("block 9999" is 10 bytes).
active() { [ -f "$dir/slabinfo" ] && awk '$1 == "kmalloc-16" { print $2 }' "$dir/slabinfo" || true; }
run yes
n=$(active)
echo "with the README's two lines: kmalloc-16 active objects ${n:-none}"
[ -n "$n" ] && [ "$n" -ge 10000 ] || { echo "FAIL: the program did not allocate from uslab"; exit 1; }
run no
n=$(active)
echo "without them: kmalloc-16 active objects ${n:-none}"
[ -z "$n" ] || [ "$n" -lt 10000 ] || { echo "FAIL: uslab served a program that did not ask for it"; exit 1; }
echo "PASS"
