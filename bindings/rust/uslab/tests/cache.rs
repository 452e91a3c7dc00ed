//! KmemCache<T>: Drop types, zero-sized and over-aligned types, bad names,
//! bulk calls (short and panicking iterators), threads outnumbering the CPUs
//! freeing each other's objects, slabinfo and statistics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uslab::{CacheBox, CacheFlags, Error, KmemCache};

struct Counted {
    id: usize,
    drops: Arc<AtomicUsize>,
    _pad: [u64; 5],
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(id: usize, drops: &Arc<AtomicUsize>) -> Counted {
    Counted { id, drops: drops.clone(), _pad: [id as u64; 5] }
}

#[test]
fn drop_types_dropped_once() {
    let cache = KmemCache::<Counted>::with_flags("rs-counted", CacheFlags::NO_MERGE).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    {
        let boxes: Vec<_> = (0..500).map(|i| cache.alloc(counted(i, &drops))).collect();
        assert!(boxes.iter().enumerate().all(|(i, b)| b.id == i && b._pad == [i as u64; 5]));
        assert!(cache.slabinfo().active_objs >= 500); // (and what per-CPU sheaves hold)
    }
    assert_eq!(drops.load(Ordering::SeqCst), 500);
    let b = cache.alloc(counted(7, &drops));
    let v = CacheBox::into_inner(b);
    assert_eq!(drops.load(Ordering::SeqCst), 500); // moved out, not dropped
    assert_eq!(v.id, 7);
    drop(v);
    assert_eq!(drops.load(Ordering::SeqCst), 501);
    let leaked = CacheBox::leak(cache.alloc(counted(8, &drops)));
    assert_eq!(leaked.id, 8);
    cache.shrink();
    assert_eq!(cache.slabinfo().active_objs, 1); // the leaked one
}

#[test]
fn zero_sized_types() {
    struct Zst;
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    impl Drop for Zst {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let cache = KmemCache::<Zst>::new("rs-zst").unwrap();
    assert!(cache.as_raw().is_null());
    let a = cache.alloc(Zst);
    let b = cache.alloc(Zst);
    assert_eq!(CacheBox::as_ptr(&a) as usize % std::mem::align_of::<Zst>(), 0);
    drop((a, b));
    assert_eq!(DROPS.load(Ordering::SeqCst), 2);
    let v = cache.alloc_bulk((0..10).map(|_| Zst)).unwrap();
    cache.free_bulk(v);
    assert_eq!(DROPS.load(Ordering::SeqCst), 12);
    assert_eq!(cache.slabinfo(), Default::default());
    assert!(!cache.shrink());
}

#[test]
fn over_aligned_types() {
    #[repr(align(64))]
    struct A64(u8);
    #[repr(align(4096))]
    struct A4k([u8; 10]);
    #[repr(align(8192))]
    struct A8k(#[allow(dead_code)] u8);
    let c64 = KmemCache::<A64>::new("rs-a64").unwrap();
    let c4k = KmemCache::<A4k>::new("rs-a4k").unwrap();
    let v: Vec<_> = (0..300).map(|i| c64.alloc(A64(i as u8))).collect();
    assert!(v.iter().enumerate().all(|(i, b)| CacheBox::as_ptr(b) as usize % 64 == 0 && b.0 == i as u8));
    let w: Vec<_> = (0..20).map(|_| c4k.alloc(A4k([1; 10]))).collect();
    assert!(w.iter().all(|b| CacheBox::as_ptr(b) as usize % 4096 == 0 && b.0 == [1; 10]));
    match KmemCache::<A8k>::new("rs-a8k") {
        Err(Error::Alignment { align: 8192, max: 4096 }) => {}
        other => panic!("an 8 KiB alignment: {:?}", other.map(|_| ())),
    }
}

#[test]
fn bad_names_and_sizes() {
    assert_eq!(KmemCache::<u64>::new("bad\0name").unwrap_err(), Error::NulInName);
    assert_eq!(KmemCache::<u64>::new("").unwrap_err(), Error::EmptyName);
    assert!(matches!(KmemCache::<[u8; 3 << 20]>::new("rs-huge"), Err(Error::Size { .. })));
    let msg = Error::NulInName.to_string();
    assert!(msg.contains("NUL"));
    // A long name is truncated by uslab, not refused.
    let c = KmemCache::<u64>::with_flags(&"n".repeat(100), CacheFlags::NO_MERGE).unwrap();
    assert_eq!(c.name().len(), 47);
}

#[test]
fn bulk_all_short_and_panicking() {
    let cache = KmemCache::<Counted>::with_flags("rs-bulk", CacheFlags::NO_MERGE).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let v = cache.alloc_bulk((0..1000).map(|i| counted(i, &drops))).unwrap();
    assert_eq!(v.len(), 1000);
    assert!(v.iter().enumerate().all(|(i, b)| b.id == i));
    cache.free_bulk(v);
    assert_eq!(drops.load(Ordering::SeqCst), 1000);

    // An iterator that says 100 and gives 60: 60 handles, the rest freed.
    struct Liar<I>(I, usize);
    impl<I: Iterator> Iterator for Liar<I> {
        type Item = I::Item;
        fn next(&mut self) -> Option<I::Item> {
            self.0.next()
        }
    }
    impl<I: Iterator> ExactSizeIterator for Liar<I> {
        fn len(&self) -> usize {
            self.1
        }
    }
    let v = cache.alloc_bulk(Liar((0..60).map(|i| counted(i, &drops)), 100)).unwrap();
    assert_eq!(v.len(), 60);
    drop(v);
    cache.shrink();
    assert_eq!(cache.slabinfo().active_objs, 0);

    // A panic midway: values written are dropped, every object freed.
    let d0 = drops.load(Ordering::SeqCst);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cache.alloc_bulk((0..50).map(|i| if i == 30 { panic!("midway") } else { counted(i, &drops) }))
    }));
    assert!(r.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), d0 + 30);
    cache.shrink();
    assert_eq!(cache.slabinfo().active_objs, 0);

    // Handles of another cache given to free_bulk are dropped normally.
    let other = KmemCache::<Counted>::with_flags("rs-bulk-other", CacheFlags::NO_MERGE).unwrap();
    let mix = vec![cache.alloc(counted(1, &drops)), other.alloc(counted(2, &drops))];
    let before = uslab::error_count();
    cache.free_bulk(mix);
    assert_eq!(uslab::error_count(), before);
    other.shrink();
    assert_eq!(other.slabinfo().active_objs, 0);
}

#[test]
fn threads_share_a_cache() {
    let cache = KmemCache::<[u64; 8]>::with_flags("rs-threads", CacheFlags::NO_MERGE).unwrap();
    let n = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2 + 1;
    let (tx, rx) = std::sync::mpsc::channel::<CacheBox<'_, [u64; 8]>>();
    std::thread::scope(|s| {
        for t in 0..n {
            let tx = tx.clone();
            let cache = &cache;
            s.spawn(move || {
                let mut mine = Vec::new();
                for i in 0..20_000u64 {
                    let b = cache.alloc([t as u64 * 1_000_000 + i; 8]);
                    if i % 4 == 0 {
                        tx.send(b).unwrap(); // freed by the main thread
                    } else {
                        mine.push(b);
                        if mine.len() > 64 {
                            let k = (i as usize * 7) % mine.len();
                            let x = mine.swap_remove(k);
                            assert!(x.iter().all(|w| *w == x[0]));
                        }
                    }
                }
            });
        }
        drop(tx);
        let mut seen = 0;
        for b in rx {
            assert!(b.iter().all(|w| *w == b[0]));
            seen += 1;
        }
        assert_eq!(seen, n * 5000);
    });
    cache.shrink();
    assert_eq!(cache.slabinfo().active_objs, 0);
}

#[test]
fn try_alloc_and_slabinfo() {
    let cache = KmemCache::<[u8; 300]>::with_flags("rs-info", CacheFlags::NO_MERGE).unwrap();
    let v: Vec<_> = (0..100).map(|_| cache.try_alloc([9; 300]).unwrap()).collect();
    let si = cache.slabinfo();
    assert!(si.active_objs >= 100 && si.num_objs >= si.active_objs);
    assert!(si.objsize >= 300 && si.objperslab >= 1 && si.num_slabs >= 1);
    assert_eq!(cache.attr("object_size").as_deref(), Some("300"));
    assert_eq!(cache.attr("no-such-attribute"), None);
    assert!(uslab::slabinfo_text().contains("rs-info"));
    drop(v);
    assert!(cache.set_min_partial(3));
    assert_eq!(cache.attr("min_partial").as_deref(), Some("3"));
    if !uslab::stats_enabled() {
        assert!(cache.stats().is_none());
    }
}

/// The counters, in a child run with USLAB_STATS set (read at start-up).
#[test]
fn stats_with_uslab_stats() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stats_child", "--ignored", "--test-threads=1"])
        .env("USLAB_STATS", "/dev/null")
        .env_remove("USLAB_DEBUG") // (debug caches' own paths are not counted)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
#[ignore = "run by stats_with_uslab_stats with USLAB_STATS set"]
fn stats_child() {
    assert!(uslab::stats_enabled());
    let cache = KmemCache::<[u8; 64]>::with_flags("rs-stats", CacheFlags::NO_MERGE).unwrap();
    for _ in 0..1000 {
        drop(cache.alloc([0; 64]));
    }
    let s = cache.stats().unwrap();
    assert!(s.alloc_cpu_sheaf + s.alloc_fastpath + s.alloc_slowpath >= 1000, "{s:?}");
    assert!(s.free_cpu_sheaf + s.free_fastpath + s.free_slowpath >= 1000, "{s:?}");
}
