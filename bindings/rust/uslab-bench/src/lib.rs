//! The Rust workloads of the bench job (bench/rust/run.py runs them): each
//! binary in src/bin sets one global allocator and calls `run`, which prints
//! one line per workload, `name<TAB>ns per operation`.
//!
//! Allocator workloads (every binary): Box<Obj> alloc+free pairs, random-order
//! frees, threads replacing objects in their rings; BTreeMap and HashMap
//! churn; string building. Pool workloads (the uslab binary only: they do not
//! allocate from the global allocator after warm-up): uslab's KmemCache<Obj>,
//! the slab crate's Slab<Obj> and sharded-slab's Slab<Obj>, on the same
//! patterns.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Instant;

/// The object of the pair and random-free workloads: 64 bytes.
#[derive(Clone, Copy)]
pub struct Obj {
    pub words: [u64; 8],
}

impl Obj {
    #[inline]
    fn new(i: u64) -> Obj {
        Obj { words: [i; 8] }
    }
}

/// xorshift64*: deterministic and cheap.
struct Rng(u64);
impl Rng {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

pub struct Sizes {
    pairs: u64,
    random: usize,
    rounds: usize,
    thread_ops: u64,
    churn: u64,
}

fn threads() -> usize {
    // More threads than CPUs, as the project's multithreaded tests.
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

fn report(name: &str, t: Instant, ops: u64) {
    println!("{name}\t{:.3}", t.elapsed().as_nanos() as f64 / ops as f64);
}

/// `z.pairs` times: an object made and freed at once; ns per pair.
fn pairs<S, H>(name: &str, z: &Sizes, state: &mut S, make: fn(&mut S, u64) -> H, free: fn(&mut S, H)) {
    let t = Instant::now();
    for i in 0..z.pairs {
        let h = make(state, i);
        free(state, black_box(h));
    }
    report(name, t, z.pairs);
}

/// `z.rounds` times: `z.random` objects made, then freed in a shuffled
/// order; ns per object (its make and free).
fn random_free<S, H>(name: &str, z: &Sizes, state: &mut S, make: fn(&mut S, u64) -> H, free: fn(&mut S, H)) {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut order: Vec<usize> = (0..z.random).collect();
    let mut total = std::time::Duration::ZERO;
    for _ in 0..z.rounds {
        rng.shuffle(&mut order);
        let t = Instant::now();
        let mut v: Vec<Option<H>> = (0..z.random as u64).map(|i| Some(make(state, i))).collect();
        for &k in &order {
            let h = v[k].take().unwrap();
            free(state, black_box(h));
        }
        total += t.elapsed();
    }
    println!("{name}\t{:.3}", total.as_nanos() as f64 / (z.random * z.rounds) as f64);
}

fn box_pair(z: &Sizes) {
    pairs("box-pair", z, &mut (), |_, i| Box::new(Obj::new(i)), |_, b| drop(b));
}

fn box_random_free(z: &Sizes) {
    random_free("box-random-free", z, &mut (), |_, i| Box::new(Obj::new(i)), |_, b| drop(b));
}

/// Each thread keeps a ring of 256 live objects and replaces a random one
/// per operation (free the old, allocate a new): wall time per operation of
/// all threads together.
fn ring_threads<P: Sync>(name: &str, z: &Sizes, pool: &P, work: impl Fn(&P, &mut Rng, u64) + Sync) {
    let n = threads();
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..n {
            let work = &work;
            s.spawn(move || {
                let mut rng = Rng(0x1234567 + k as u64 * 7919);
                work(pool, &mut rng, z.thread_ops);
            });
        }
    });
    report(name, t, z.thread_ops * n as u64);
}

fn box_threads(z: &Sizes) {
    ring_threads("box-threads", z, &(), |_, rng, ops| {
        let mut ring: Vec<Box<Obj>> = (0..256).map(|i| Box::new(Obj::new(i))).collect();
        for i in 0..ops {
            let k = (rng.next() & 255) as usize;
            ring[k] = Box::new(Obj::new(i));
        }
        black_box(&ring);
    });
}

fn btree_churn(z: &Sizes) {
    let mut rng = Rng(42);
    let mut m: BTreeMap<u64, [u64; 4]> = BTreeMap::new();
    for _ in 0..100_000 {
        let k = rng.next() % 200_000;
        m.insert(k, [k; 4]);
    }
    let t = Instant::now();
    for _ in 0..z.churn {
        let k = rng.next() % 200_000;
        if m.remove(&k).is_none() {
            m.insert(k, [k; 4]);
        }
    }
    black_box(&m);
    report("btreemap-churn", t, z.churn);
}

fn hash_churn(z: &Sizes) {
    let mut rng = Rng(43);
    let mut m: HashMap<String, Vec<u64>> = HashMap::new();
    let t = Instant::now();
    for i in 0..z.churn / 2 {
        let k = rng.next() % 50_000;
        let key = format!("key-{k}");
        match m.get_mut(&key) {
            Some(v) if v.len() > 6 => {
                m.remove(&key);
            }
            Some(v) => v.push(i),
            None => {
                m.insert(key, vec![i]);
            }
        }
    }
    black_box(&m);
    report("hashmap-churn", t, z.churn / 2);
}

fn strings(z: &Sizes) {
    let t = Instant::now();
    let rounds = z.churn / 1000;
    for r in 0..rounds {
        let mut parts: Vec<String> = Vec::with_capacity(100);
        for i in 0..100 {
            let mut s = String::new();
            for j in 0..(i % 7 + 1) {
                s.push_str(&format!("{r}.{i}.{j};"));
            }
            parts.push(s);
        }
        let joined = parts.join(",");
        black_box(joined.len());
    }
    report("string-building", t, rounds * 100);
}

fn kmem(z: &Sizes) {
    use uslab::{CacheFlags, KmemCache};
    let cache = KmemCache::<Obj>::with_flags("bench-obj", CacheFlags::NO_MERGE).unwrap();
    let mut c = &cache;
    pairs("kmemcache-pair", z, &mut c, |c, i| c.alloc(Obj::new(i)), |_, b| drop(b));
    random_free("kmemcache-random-free", z, &mut c, |c, i| c.alloc(Obj::new(i)), |_, b| drop(b));

    ring_threads("kmemcache-threads", z, &cache, |c, rng, ops| {
        let mut ring: Vec<_> = (0..256).map(|i| c.alloc(Obj::new(i))).collect();
        for i in 0..ops {
            let k = (rng.next() & 255) as usize;
            ring[k] = c.alloc(Obj::new(i));
        }
        black_box(&ring);
    });
}

fn slab_crate(z: &Sizes) {
    let mut s: slab::Slab<Obj> = slab::Slab::with_capacity(1024);
    pairs(
        "slab-pair",
        z,
        &mut s,
        |s, i| s.insert(Obj::new(i)),
        |s, k| {
            black_box(s.remove(k));
        },
    );
    let mut s: slab::Slab<Obj> = slab::Slab::new();
    random_free(
        "slab-random-free",
        z,
        &mut s,
        |s, i| s.insert(Obj::new(i)),
        |s, k| {
            black_box(s.remove(k));
        },
    );
}

fn sharded(z: &Sizes) {
    let mut s: sharded_slab::Slab<Obj> = sharded_slab::Slab::new();
    pairs(
        "sharded-slab-pair",
        z,
        &mut s,
        |s, i| s.insert(Obj::new(i)).unwrap(),
        |s, k| {
            black_box(s.take(k));
        },
    );
    random_free(
        "sharded-slab-random-free",
        z,
        &mut s,
        |s, i| s.insert(Obj::new(i)).unwrap(),
        |s, k| {
            black_box(s.take(k));
        },
    );

    ring_threads("sharded-slab-threads", z, &s, |s, rng, ops| {
        let mut ring: Vec<usize> = (0..256).map(|i| s.insert(Obj::new(i)).unwrap()).collect();
        for i in 0..ops {
            let k = (rng.next() & 255) as usize;
            black_box(s.take(ring[k]));
            ring[k] = s.insert(Obj::new(i)).unwrap();
        }
        for k in ring {
            s.take(k);
        }
    });
}

/// Runs the workloads; `pools`: the pool workloads too. Arguments: `--quick`
/// (a tenth of the counts), `--only NAME` (workloads whose name starts so).
pub fn run(pools: bool) {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let d = if quick { 10 } else { 1 };
    let z = Sizes {
        pairs: 20_000_000 / d,
        random: 200_000,
        rounds: 20 / d as usize,
        thread_ops: 2_000_000 / d,
        churn: 4_000_000 / d,
    };
    let want = |n: &str| only.as_deref().map_or(true, |o| n.starts_with(o));
    let all: [(&str, fn(&Sizes)); 6] = [
        ("box-pair", box_pair),
        ("box-random-free", box_random_free),
        ("box-threads", box_threads),
        ("btreemap-churn", btree_churn),
        ("hashmap-churn", hash_churn),
        ("string-building", strings),
    ];
    for (n, f) in all {
        if want(n) {
            f(&z);
        }
    }
    if pools {
        for (n, f) in [("kmemcache", kmem as fn(&Sizes)), ("slab", slab_crate), ("sharded-slab", sharded)] {
            if want(n) {
                f(&z);
            }
        }
    }
}
