//! A program whose global allocator is uslab: threads outnumbering the CPUs
//! build strings, vectors and maps, hand blocks to each other to free, and
//! check every byte; over-aligned, zeroed and reallocated blocks.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;

#[global_allocator]
static GLOBAL: uslab::Uslab = uslab::Uslab;

fn threads() -> usize {
    // More threads than CPUs: preemption and migration inside the fast paths.
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2 + 1
}

/// Blocks the program allocates are uslab's: ksize knows them (a foreign
/// pointer would be reported and sized 0).
#[test]
fn heap_blocks_are_uslabs() {
    let before = uslab::error_count();
    let b = Box::new([7u8; 100]);
    let s = String::from("a string on the uslab heap");
    let v: Vec<u64> = (0..1000).collect();
    unsafe {
        assert!(uslab::sys::ksize(b.as_ptr().cast()) >= 100);
        assert!(uslab::sys::ksize(s.as_ptr().cast()) >= s.len());
        assert!(uslab::sys::ksize(v.as_ptr().cast()) >= 8000);
    }
    assert_eq!(uslab::error_count(), before);
}

#[test]
fn threads_churn_and_free_each_others_blocks() {
    let n = threads();
    let (tx, rx) = mpsc::channel::<(usize, Vec<String>, Box<[u64]>)>();
    let mut hs = Vec::new();
    for t in 0..n {
        let tx = tx.clone();
        hs.push(std::thread::spawn(move || {
            let mut map: HashMap<String, Vec<u32>> = HashMap::new();
            let mut tree: BTreeMap<u64, String> = BTreeMap::new();
            for round in 0..3000u64 {
                let key = format!("k{}-{}", t, round % 257);
                map.entry(key.clone()).or_default().push(round as u32);
                tree.insert(round * 7 % 1009, key);
                if round % 3 == 0 {
                    map.remove(&format!("k{}-{}", t, (round * 13) % 257));
                    tree.remove(&(round % 1009));
                }
                if round % 100 == 0 {
                    let strings: Vec<String> = (0..20).map(|i| format!("{t}:{round}:{i}").repeat(i % 5 + 1)).collect();
                    let words: Box<[u64]> = (0..round % 300 + 1).map(|i| i ^ (t as u64)).collect();
                    tx.send((t, strings, words)).unwrap();
                }
            }
            for (k, v) in &map {
                assert!(k.starts_with(&format!("k{t}-")));
                assert!(v.windows(2).all(|w| w[0] < w[1]));
            }
        }));
    }
    drop(tx);
    let mut got = 0;
    for (t, strings, words) in rx {
        // Freed here, on another thread than the one that allocated them.
        for (i, s) in strings.iter().enumerate() {
            let unit_len = s.len() / (i % 5 + 1);
            assert!(s.starts_with(&format!("{t}:")) && s.len() % unit_len == 0);
        }
        assert!(words.iter().enumerate().all(|(i, w)| *w == i as u64 ^ t as u64));
        got += 1;
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(got, n * 30);
}

#[repr(align(64))]
struct Line([u8; 64]);
#[repr(align(4096))]
struct Page(#[allow(dead_code)] [u8; 100]);

#[test]
fn over_aligned_zeroed_and_reallocated() {
    let lines: Vec<Box<Line>> = (0..1000).map(|i| Box::new(Line([i as u8; 64]))).collect();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(&**l as *const Line as usize % 64, 0);
        assert!(l.0.iter().all(|b| *b == i as u8));
    }
    let pages: Vec<Box<Page>> = (0..50).map(|_| Box::new(Page([3; 100]))).collect();
    assert!(pages.iter().all(|p| &**p as *const Page as usize % 4096 == 0));
    for align in [16usize, 32, 128, 1 << 12, 1 << 16, 1 << 21] {
        for size in [1usize, 24, 100, 5000, 70_000, 5 << 20] {
            let l = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let z = GLOBAL.alloc_zeroed(l);
                assert!(!z.is_null() && z as usize % align == 0, "{size} at {align}");
                assert!(std::slice::from_raw_parts(z, size).iter().all(|b| *b == 0));
                z.write_bytes(0xa5, size);
                // Grow: contents kept, alignment kept.
                let g = GLOBAL.realloc(z, l, size * 3);
                assert!(!g.is_null() && g as usize % align == 0);
                assert!(std::slice::from_raw_parts(g, size).iter().all(|b| *b == 0xa5));
                let l3 = Layout::from_size_align(size * 3, align).unwrap();
                // Shrink: in place or moved, contents kept.
                let s = GLOBAL.realloc(g, l3, size.div_ceil(2));
                assert!(!s.is_null() && s as usize % align == 0);
                assert!(std::slice::from_raw_parts(s, size.div_ceil(2)).iter().all(|b| *b == 0xa5));
                GLOBAL.dealloc(s, Layout::from_size_align(size.div_ceil(2), align).unwrap());
            }
        }
    }
    let big = vec![0u8; 64 << 20];
    assert!(big.iter().step_by(4096).all(|b| *b == 0));
    let mut v: Vec<u32> = Vec::new();
    for i in 0..5_000_000 {
        v.push(i); // realloc through every class, large blocks, and mappings grown
    }
    assert!(v.iter().enumerate().all(|(i, x)| *x == i as u32));
    v.truncate(1000);
    v.shrink_to_fit(); // from a mapping back to a class
    assert!(v.iter().enumerate().all(|(i, x)| *x == i as u32));
}

#[test]
fn out_of_memory_is_null_not_abort() {
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(isize::MAX as usize - 64).is_err());
    let l = Layout::from_size_align(1 << 46, 8).unwrap();
    unsafe { assert!(GLOBAL.alloc(l).is_null()) };
}
