//! The workloads under the mimalloc crate's global allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    uslab_bench::run(false);
}
