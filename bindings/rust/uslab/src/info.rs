//! A cache's slabinfo row and counters as structures.

use std::ffi::{c_char, CString};

use crate::sys;

/// One cache's /proc/slabinfo row (`uslab_slabinfo` prints the same numbers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlabInfo {
    /// Objects in use (SLAB: and in per-CPU arrays).
    pub active_objs: u64,
    /// Objects the cache's slabs hold.
    pub num_objs: u64,
    /// The stride: object size with uslab's metadata.
    pub objsize: u32,
    /// Objects per slab.
    pub objperslab: u32,
    /// Pages per slab.
    pub pagesperslab: u32,
    /// SLAB's tunables (0 on SLUB).
    pub limit: u32,
    /// SLAB's batch count (0 on SLUB).
    pub batchcount: u32,
    /// SLAB's shared factor (0 on SLUB).
    pub sharedfactor: u32,
    /// Slabs with objects in use (SLUB: all of them).
    pub active_slabs: u64,
    /// Slabs.
    pub num_slabs: u64,
    /// Objects in SLAB's shared arrays (0 on SLUB).
    pub sharedavail: u64,
}

impl From<sys::uslab_slabinfo> for SlabInfo {
    fn from(s: sys::uslab_slabinfo) -> Self {
        SlabInfo {
            active_objs: s.active_objs as u64,
            num_objs: s.num_objs as u64,
            objsize: s.objsize,
            objperslab: s.objperslab,
            pagesperslab: s.pagesperslab,
            limit: s.limit,
            batchcount: s.batchcount,
            sharedfactor: s.sharedfactor,
            active_slabs: s.active_slabs as u64,
            num_slabs: s.num_slabs as u64,
            sharedavail: s.sharedavail as u64,
        }
    }
}

/// A cache's counters, summed over the CPUs (the kernel's CONFIG_SLUB_STATS
/// names; `USLAB_STATS` must be set for them to count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Allocations from a per-CPU sheaf.
    pub alloc_cpu_sheaf: u64,
    /// Allocations on the fast path (a cpu slab's free list).
    pub alloc_fastpath: u64,
    /// Allocations on the slow path.
    pub alloc_slowpath: u64,
    /// Frees to a per-CPU sheaf.
    pub free_cpu_sheaf: u64,
    /// Frees on the fast path.
    pub free_fastpath: u64,
    /// Frees on the slow path.
    pub free_slowpath: u64,
    /// Sheaves refilled from slabs.
    pub sheaf_refill: u64,
    /// Sheaves flushed to slabs.
    pub sheaf_flush: u64,
    /// Full sheaves taken from the barn.
    pub barn_get: u64,
    /// Barn empty when a sheaf was wanted.
    pub barn_get_fail: u64,
    /// Sheaves put in the barn.
    pub barn_put: u64,
    /// Barn full when a sheaf was put.
    pub barn_put_fail: u64,
    /// New slabs made.
    pub alloc_slab: u64,
    /// Slabs freed.
    pub free_slab: u64,
}

pub(crate) fn attr(raw: *mut sys::kmem_cache, name: &str) -> Option<String> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: a live cache, a NUL-terminated name, buf of its length.
        let n = unsafe { sys::uslab_cache_attr(raw, cname.as_ptr(), buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if n < 0 {
            return None;
        }
        if (n as usize) < buf.len() {
            buf.truncate(n as usize);
            return Some(String::from_utf8_lossy(&buf).trim_end().to_string());
        }
        buf.resize(n as usize + 1, 0);
    }
}

fn counter(raw: *mut sys::kmem_cache, name: &str) -> u64 {
    attr(raw, name).and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok())).unwrap_or(0)
}

impl Stats {
    pub(crate) fn read(raw: *mut sys::kmem_cache) -> Stats {
        let c = |n| counter(raw, n);
        Stats {
            alloc_cpu_sheaf: c("alloc_cpu_sheaf"),
            alloc_fastpath: c("alloc_fastpath"),
            alloc_slowpath: c("alloc_slowpath"),
            free_cpu_sheaf: c("free_cpu_sheaf"),
            free_fastpath: c("free_fastpath"),
            free_slowpath: c("free_slowpath"),
            sheaf_refill: c("sheaf_refill"),
            sheaf_flush: c("sheaf_flush"),
            barn_get: c("barn_get"),
            barn_get_fail: c("barn_get_fail"),
            barn_put: c("barn_put"),
            barn_put_fail: c("barn_put_fail"),
            alloc_slab: c("alloc_slab"),
            free_slab: c("free_slab"),
        }
    }
}
