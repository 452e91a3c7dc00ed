//! The workloads under the system allocator (glibc malloc).
fn main() {
    uslab_bench::run(false);
}
