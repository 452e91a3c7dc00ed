//! The workloads under the tikv-jemallocator crate's global allocator.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    uslab_bench::run(false);
}
