//! Raw declarations of uslab's C API (`include/uslab.h`), and the C library
//! itself, built from source by this crate's build script (the core library:
//! the `kmem_cache` and `kmalloc` API, without the malloc override).
//!
//! Use the [`uslab`](https://docs.rs/uslab) crate for a safe interface. Every
//! function here is the C function of the same name, with the rules the
//! header states (thread safety, bad input reported and refused).
//!
//! The declarations are written from the header, not generated at build time;
//! the test `tests/header.rs` parses `include/uslab.h` and fails when a
//! function, a constant or a structure disagrees with this file (structure
//! layouts are checked against the C compiler's `sizeof` and `offsetof`).
#![no_std]
#![allow(non_camel_case_types, non_upper_case_globals)]

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

/// An opaque C type: no fields, neither Send nor Sync nor Unpin (the
/// pattern the Rustonomicon gives for FFI types).
macro_rules! opaque {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
            _pin: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    };
}

pub const USLAB_VERSION_MAJOR: c_uint = 0;
pub const USLAB_VERSION_MINOR: c_uint = 1;

opaque! {
    /// An object cache (opaque).
    kmem_cache
}
opaque! {
    /// A prefilled sheaf (opaque).
    slab_sheaf
}
opaque! {
    /// C's `FILE` (opaque).
    FILE
}

pub type slab_flags_t = c_uint;
pub type gfp_t = c_uint;

pub const SLAB_CONSISTENCY_CHECKS: slab_flags_t = 0x00000100;
pub const SLAB_RED_ZONE: slab_flags_t = 0x00000400;
pub const SLAB_POISON: slab_flags_t = 0x00000800;
pub const SLAB_NO_MERGE: slab_flags_t = 0x01000000;
pub const SLAB_HWCACHE_ALIGN: slab_flags_t = 0x00002000;
pub const SLAB_STORE_USER: slab_flags_t = 0x00010000;
pub const SLAB_PANIC: slab_flags_t = 0x00040000;
pub const SLAB_TRACE: slab_flags_t = 0x00200000;
pub const SLAB_ORDERED: slab_flags_t = 0x00000001;
pub const SLAB_VIRTUAL: slab_flags_t = 0x00000002;
pub const SLAB_TYPESAFE_BY_RCU: slab_flags_t = 0x00080000;

pub const __GFP_NOWARN: gfp_t = 0x2000;
pub const __GFP_ZERO: gfp_t = 0x100;
pub const GFP_ATOMIC: gfp_t = 0x20;
pub const GFP_NOWAIT: gfp_t = 0x800;
pub const GFP_KERNEL: gfp_t = 0xcc0;

pub const NUMA_NO_NODE: c_int = -1;
/// What `kmalloc(0)` returns.
pub const ZERO_SIZE_PTR: *mut c_void = 16 as *mut c_void;

/// The kernel's `struct kmem_cache_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct kmem_cache_args {
    pub align: c_uint,
    pub useroffset: c_uint,
    pub usersize: c_uint,
    pub freeptr_offset: c_uint,
    pub use_freeptr_offset: bool,
    pub ctor: Option<unsafe extern "C" fn(*mut c_void)>,
    pub sheaf_capacity: c_uint,
}

/// One cache's /proc/slabinfo row as numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct uslab_slabinfo {
    pub active_objs: c_ulong,
    pub num_objs: c_ulong,
    pub objsize: c_uint,
    pub objperslab: c_uint,
    pub pagesperslab: c_uint,
    pub limit: c_uint,
    pub batchcount: c_uint,
    pub sharedfactor: c_uint,
    pub active_slabs: c_ulong,
    pub num_slabs: c_ulong,
    pub sharedavail: c_ulong,
}

opaque! {
    /// liburcu's `struct rcu_flavor_struct` (opaque here).
    rcu_flavor_struct
}
opaque! {
    /// liburcu's `struct rcu_head` (opaque here).
    rcu_head
}

/// kfree_rcu's counters (`uslab_rcu_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct uslab_rcu_stats {
    pub queued: c_ulong,
    pub batches: c_ulong,
    pub freed: c_ulong,
    pub waiting: c_ulong,
    pub refused: c_ulong,
    pub waits: c_ulong,
    pub slabs_waiting: c_ulong,
    pub flavor_set: c_int,
}

/// `enum uslab_error`: the kinds of problems uslab reports.
pub type uslab_error = c_uint;
pub const USLAB_ERR_NONE: uslab_error = 0;
pub const USLAB_ERR_FOREIGN: uslab_error = 1;
pub const USLAB_ERR_WRONG_CACHE: uslab_error = 2;
pub const USLAB_ERR_NOT_OBJECT: uslab_error = 3;
pub const USLAB_ERR_DOUBLE_FREE: uslab_error = 4;
pub const USLAB_ERR_BAD_ARG: uslab_error = 5;
pub const USLAB_ERR_LEAK: uslab_error = 6;
pub const USLAB_ERR_NOMEM: uslab_error = 7;
pub const USLAB_ERR_OPTION: uslab_error = 8;
pub const USLAB_ERR_CORRUPT: uslab_error = 9;
pub const USLAB_ERR_SLAB_BUG: uslab_error = 10;
pub const USLAB_ERR_SLAB_FIX: uslab_error = 11;

pub type uslab_report_fn = Option<unsafe extern "C" fn(kind: uslab_error, line: *const c_char, arg: *mut c_void)>;

extern "C" {
    pub fn kmem_cache_create(
        name: *const c_char,
        size: c_uint,
        align: c_uint,
        flags: slab_flags_t,
        ctor: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> *mut kmem_cache;
    pub fn uslab_kmem_cache_create_args(
        name: *const c_char,
        size: c_uint,
        args: *mut kmem_cache_args,
        flags: slab_flags_t,
    ) -> *mut kmem_cache;
    pub fn kmem_cache_destroy(s: *mut kmem_cache);
    pub fn kmem_cache_alloc(s: *mut kmem_cache, flags: gfp_t) -> *mut c_void;
    pub fn kmem_cache_alloc_node(s: *mut kmem_cache, flags: gfp_t, node: c_int) -> *mut c_void;
    pub fn kmem_cache_zalloc(s: *mut kmem_cache, flags: gfp_t) -> *mut c_void;
    pub fn kmem_cache_free(s: *mut kmem_cache, obj: *mut c_void);
    pub fn kmem_cache_alloc_bulk(s: *mut kmem_cache, flags: gfp_t, nr: usize, p: *mut *mut c_void) -> c_int;
    pub fn uslab_alloc_bulk_node(
        s: *mut kmem_cache,
        flags: gfp_t,
        node: c_int,
        nr: usize,
        p: *mut *mut c_void,
    ) -> c_int;
    pub fn kmem_cache_free_bulk(s: *mut kmem_cache, nr: usize, p: *mut *mut c_void);
    pub fn kmem_cache_shrink(s: *mut kmem_cache) -> c_int;
    pub fn uslab_cache_shrink_node(s: *mut kmem_cache, node: c_int) -> c_int;
    pub fn kmem_cache_prefill_sheaf(s: *mut kmem_cache, gfp: gfp_t, size: c_uint) -> *mut slab_sheaf;
    pub fn kmem_cache_refill_sheaf(s: *mut kmem_cache, gfp: gfp_t, sheafp: *mut *mut slab_sheaf, size: c_uint)
        -> c_int;
    pub fn kmem_cache_return_sheaf(s: *mut kmem_cache, gfp: gfp_t, sheaf: *mut slab_sheaf);
    pub fn kmem_cache_alloc_from_sheaf(s: *mut kmem_cache, gfp: gfp_t, sheaf: *mut slab_sheaf) -> *mut c_void;
    pub fn kmem_cache_sheaf_size(sheaf: *mut slab_sheaf) -> c_uint;
    pub fn kmem_cache_size(s: *mut kmem_cache) -> c_uint;
    pub fn kmem_cache_name(s: *mut kmem_cache) -> *const c_char;

    pub fn kmalloc(size: usize, flags: gfp_t) -> *mut c_void;
    pub fn kzalloc(size: usize, flags: gfp_t) -> *mut c_void;
    pub fn kmalloc_node(size: usize, flags: gfp_t, node: c_int) -> *mut c_void;
    pub fn kmalloc_array(n: usize, size: usize, flags: gfp_t) -> *mut c_void;
    pub fn kcalloc(n: usize, size: usize, flags: gfp_t) -> *mut c_void;
    pub fn krealloc(p: *const c_void, n: usize, flags: gfp_t) -> *mut c_void;
    pub fn kfree(p: *const c_void);
    pub fn ksize(p: *const c_void) -> usize;
    pub fn kstrdup(s: *const c_char, flags: gfp_t) -> *mut c_char;
    pub fn kmemdup(src: *const c_void, len: usize, flags: gfp_t) -> *mut c_void;
    pub fn kfree_bulk(nr: usize, p: *mut *mut c_void);
    pub fn uslab_malloc(size: usize, flags: gfp_t) -> *mut c_void;
    pub fn uslab_aligned_alloc(align: usize, size: usize, flags: gfp_t) -> *mut c_void;

    pub fn uslab_set_report_handler(fn_: uslab_report_fn, arg: *mut c_void);
    pub fn uslab_error_count() -> c_ulong;
    pub fn kmem_cache_validate(s: *mut kmem_cache) -> c_int;
    pub fn uslab_percpu_mode() -> *const c_char;
    pub fn uslab_allocator() -> *const c_char;
    pub fn uslab_front() -> *const c_char;
    pub fn uslab_sheaf_capacity(s: *mut kmem_cache) -> c_uint;
    pub fn uslab_release_free_memory() -> usize;
    pub fn uslab_cache_attrs() -> *const *const c_char;
    pub fn uslab_cache_attr(s: *mut kmem_cache, attr: *const c_char, buf: *mut c_char, size: usize) -> c_int;
    pub fn uslab_cache_attr_write(s: *mut kmem_cache, attr: *const c_char, value: *const c_char) -> c_int;
    pub fn uslab_stats_enabled() -> c_int;
    pub fn uslab_cache_find(name: *const c_char) -> *mut kmem_cache;
    pub fn uslab_for_each_cache(
        fn_: Option<unsafe extern "C" fn(s: *mut kmem_cache, arg: *mut c_void) -> c_int>,
        arg: *mut c_void,
    ) -> c_int;
    pub fn uslab_cache_slabinfo(s: *mut kmem_cache, out: *mut uslab_slabinfo) -> c_int;
    pub fn uslab_slabinfo(f: *mut FILE);
    pub fn uslab_slabinfo_write(line: *const c_char) -> c_int;

    // Present only where the C library was built with liburcu's headers.
    pub fn uslab_rcu_init(flavor: *const rcu_flavor_struct) -> c_int;
    pub fn uslab_kvfree_call_rcu(head: *mut rcu_head, ptr: *mut c_void);
    pub fn kvfree_rcu_barrier();
    pub fn uslab_rcu_stats(out: *mut uslab_rcu_stats) -> c_int;
}

/// Layout facts the C compiler gives (`layout.c`), for the header test.
#[doc(hidden)]
pub mod layout {
    extern "C" {
        /// Pairs of (name, value): sizes, offsets and constants as C sees them,
        /// ended by a NULL name.
        pub static uslab_sys_layout: [LayoutEntry; 0];
    }
    #[repr(C)]
    pub struct LayoutEntry {
        pub name: *const core::ffi::c_char,
        pub value: u64,
    }
}
