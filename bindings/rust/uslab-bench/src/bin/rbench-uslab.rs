//! The workloads under the uslab global allocator.
#[global_allocator]
static GLOBAL: uslab::Uslab = uslab::Uslab;

fn main() {
    uslab_bench::run(true);
}
