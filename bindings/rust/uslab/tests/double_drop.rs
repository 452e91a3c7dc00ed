//! A double drop through unsafe code: the second free of one object is
//! caught by uslab (a report of kind DoubleFree, or a debug cache's BUG
//! report), refused, and the object is
//! not handed out twice afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};

use uslab::{CacheBox, CacheFlags, KmemCache, ReportKind};

static DOUBLE: AtomicUsize = AtomicUsize::new(0);

#[test]
fn double_drop_is_reported() {
    uslab::set_report_handler(|kind, line| {
        // A debug cache (USLAB_DEBUG) reports in the kernel's shape: a BUG
        // report "Object already free", then a FIX line.
        if kind == ReportKind::DoubleFree || (kind == ReportKind::SlabBug && line.contains("already free")) {
            assert!(line.contains("rs-double"), "{line}");
            DOUBLE.fetch_add(1, Ordering::SeqCst);
        }
    });
    let cache = KmemCache::<[u64; 4]>::with_flags("rs-double", CacheFlags::NO_MERGE).unwrap();
    let a = cache.alloc([1; 4]);
    let raw = CacheBox::into_raw(a);
    // The bug under test: two handles for one object.
    let first = unsafe { CacheBox::from_raw(raw, &cache) };
    let second = unsafe { CacheBox::from_raw(raw, &cache) };
    let before = uslab::error_count();
    drop(first);
    drop(second);
    assert_eq!(DOUBLE.load(Ordering::SeqCst), 1);
    assert!(uslab::error_count() > before);
    // Refused: the object comes back once at most.
    let got: Vec<_> = (0..2000).map(|_| cache.alloc([2; 4])).collect();
    let mut addrs: Vec<usize> = got.iter().map(|b| CacheBox::as_ptr(b) as usize).collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), 2000);
    uslab::clear_report_handler();
}
