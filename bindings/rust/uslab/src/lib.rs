//! uslab for Rust: the Linux kernel's slab allocator (SLUB, and SLAB as a
//! second engine) as a global allocator and as typed object caches.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: uslab::Uslab = uslab::Uslab;
//! ```
//!
//! Every heap allocation of the program then comes from uslab's `kmalloc`:
//! hardened by default (a double free, a write after free into its free-list
//! word or a forged free pointer is stopped and reported, never followed),
//! per-CPU sheaves on restartable sequences for the fast paths, and memory
//! given back to the OS while the program is idle.
//!
//! For many objects of one type, a [`KmemCache<T>`] is the kernel's
//! `kmem_cache`: objects of one size packed in slabs, with their own
//! statistics ([`KmemCache::slabinfo`]) and bulk calls.
//!
//! ```
//! use uslab::KmemCache;
//!
//! struct Inode { ino: u64, size: u64 }
//!
//! let cache = KmemCache::<Inode>::new("inode").unwrap();
//! let mut a = cache.alloc(Inode { ino: 1, size: 0 });
//! a.size += 4096;
//! assert_eq!(a.ino, 1);
//! drop(a); // back to the cache
//! ```
//!
//! # Options
//!
//! uslab reads its options from `USLAB_*` environment variables at start-up,
//! as the C library does (`USLAB_DEBUG=FZPU` for the kernel's `slub_debug`
//! checks, `USLAB_HARDEN`, `USLAB_RANDOM`, `USLAB_STATS`, ...: see the
//! project's docs/GUIDE.md). What the C API can change at run time is here
//! as functions: [`KmemCache::set_min_partial`], [`set_report_handler`],
//! [`release_free_memory`].
//!
//! # Requirements
//!
//! Linux, glibc 2.35 or later (its `rseq` registration), and a program
//! linked with the library (an executable, or a library that is not loaded
//! with `dlopen`: the C code uses initial-exec thread-local storage).
//!
//! # How the unsafe code was reviewed
//!
//! Miri cannot run foreign code, so the unsafe blocks were reviewed by hand
//! against three rules, each stated where it is used: a pointer from the C
//! library is checked for NULL before it becomes a `NonNull`; an object's
//! memory is written with `ptr::write` before a handle to it exists and its
//! value is dropped with `ptr::drop_in_place` exactly once, before the memory
//! is freed; and a handle cannot outlive its cache (the borrow checker,
//! through `CacheBox<'c, T>`). The tests run the same code under uslab's own
//! checks (`USLAB_DEBUG=FZPU` in the project's test command), which report any
//! write outside an object or after its free.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cache;
mod global;
mod info;

pub use cache::{AllocError, CacheBox, CacheFlags, Error, KmemCache};
pub use global::Uslab;
pub use info::{SlabInfo, Stats};

pub use uslab_sys as sys;

/// The README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use std::ffi::CStr;

/// The kinds of problems uslab reports (C's `enum uslab_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReportKind {
    /// A notice, not counted by [`error_count`].
    None,
    /// A pointer uslab did not hand out.
    Foreign,
    /// An object freed to another cache than its own.
    WrongCache,
    /// A pointer inside an object, not at its start.
    NotObject,
    /// An object freed twice.
    DoubleFree,
    /// An invalid argument.
    BadArg,
    /// Objects still in use when their cache was destroyed.
    Leak,
    /// Out of memory.
    NoMem,
    /// A malformed `USLAB_*` variable.
    Option,
    /// A freed object written after its free.
    Corrupt,
    /// A debug cache's check failed (the kernel's `BUG` report).
    SlabBug,
    /// What uslab repaired (the kernel's `FIX` line).
    SlabFix,
    /// A kind this crate does not know yet.
    Other(u32),
}

impl ReportKind {
    fn from_raw(k: sys::uslab_error) -> Self {
        match k {
            sys::USLAB_ERR_NONE => Self::None,
            sys::USLAB_ERR_FOREIGN => Self::Foreign,
            sys::USLAB_ERR_WRONG_CACHE => Self::WrongCache,
            sys::USLAB_ERR_NOT_OBJECT => Self::NotObject,
            sys::USLAB_ERR_DOUBLE_FREE => Self::DoubleFree,
            sys::USLAB_ERR_BAD_ARG => Self::BadArg,
            sys::USLAB_ERR_LEAK => Self::Leak,
            sys::USLAB_ERR_NOMEM => Self::NoMem,
            sys::USLAB_ERR_OPTION => Self::Option,
            sys::USLAB_ERR_CORRUPT => Self::Corrupt,
            sys::USLAB_ERR_SLAB_BUG => Self::SlabBug,
            sys::USLAB_ERR_SLAB_FIX => Self::SlabFix,
            other => Self::Other(other),
        }
    }
}

/// Reports uslab made since start-up (notices not counted).
pub fn error_count() -> u64 {
    // SAFETY: no arguments; thread-safe in C.
    unsafe { sys::uslab_error_count() as u64 }
}

type Handler = Box<dyn Fn(ReportKind, &str) + Send + Sync>;
static HANDLER: std::sync::RwLock<Option<Handler>> = std::sync::RwLock::new(None);

unsafe extern "C" fn trampoline(kind: sys::uslab_error, line: *const std::ffi::c_char, _arg: *mut std::ffi::c_void) {
    // SAFETY: uslab passes a NUL-terminated line valid during the call.
    let text = unsafe { CStr::from_ptr(line) }.to_string_lossy();
    // A panic must not unwind into C: caught, and the report printed instead.
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Ok(h) = HANDLER.read() {
            if let Some(h) = h.as_ref() {
                h(ReportKind::from_raw(kind), &text);
                return true;
            }
        }
        false
    }));
    if !matches!(done, Ok(true)) {
        eprintln!("{text}");
    }
}

/// Sends every report (one line, as uslab would print it on stderr) to `f`
/// instead of stderr. `f` runs on the thread that found the problem, with
/// no uslab lock held; it may allocate. It must not panic (a panic is caught
/// and the line printed). [`clear_report_handler`] restores printing.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// static SEEN: AtomicUsize = AtomicUsize::new(0);
/// uslab::set_report_handler(|_kind, _line| { SEEN.fetch_add(1, Ordering::Relaxed); });
/// uslab::clear_report_handler();
/// ```
pub fn set_report_handler<F: Fn(ReportKind, &str) + Send + Sync + 'static>(f: F) {
    *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    // SAFETY: the trampoline has the C signature and lives for ever.
    unsafe { sys::uslab_set_report_handler(Some(trampoline), std::ptr::null_mut()) };
}

/// Reports go to stderr again.
pub fn clear_report_handler() {
    // SAFETY: NULL restores printing.
    unsafe { sys::uslab_set_report_handler(None, std::ptr::null_mut()) };
    *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Gives memory back to the OS now (every cache's sheaves flushed, empty
/// slabs freed, free pages returned); the bytes released. Costs a shrink of
/// every cache: call it when idle.
pub fn release_free_memory() -> usize {
    // SAFETY: no arguments.
    unsafe { sys::uslab_release_free_memory() }
}

fn static_str(p: *const std::ffi::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: these C functions return string literals.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

/// The per-CPU mode chosen at start-up: `"rseq"` or `"locked"`.
pub fn percpu_mode() -> &'static str {
    // SAFETY: returns a string literal.
    static_str(unsafe { sys::uslab_percpu_mode() })
}

/// The engine under the caches: `"slub"` or `"slab"` (`USLAB_ALLOCATOR`).
pub fn allocator() -> &'static str {
    // SAFETY: returns a string literal.
    static_str(unsafe { sys::uslab_allocator() })
}

/// The per-CPU front end: `"sheaves"`, `"owned"`, `"cpuslab"` or `"arrays"`.
pub fn front() -> &'static str {
    // SAFETY: returns a string literal.
    static_str(unsafe { sys::uslab_front() })
}

/// Whether `USLAB_STATS` turned the per-cache counters on ([`Stats`]).
pub fn stats_enabled() -> bool {
    // SAFETY: no arguments.
    unsafe { sys::uslab_stats_enabled() != 0 }
}

/// /proc/slabinfo (version 2.1, the kernel's format) for every cache.
pub fn slabinfo_text() -> String {
    extern "C" {
        fn open_memstream(ptr: *mut *mut std::ffi::c_char, size: *mut usize) -> *mut sys::FILE;
        fn fclose(f: *mut sys::FILE) -> std::ffi::c_int;
        fn free(p: *mut std::ffi::c_void);
    }
    let mut buf: *mut std::ffi::c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: open_memstream's buffer is the C library's, valid after
    // fclose until freed with free; copied out before that.
    unsafe {
        let f = open_memstream(&mut buf, &mut len);
        if f.is_null() {
            return String::new();
        }
        sys::uslab_slabinfo(f);
        fclose(f);
        let s = String::from_utf8_lossy(std::slice::from_raw_parts(buf as *const u8, len)).into_owned();
        free(buf.cast());
        s
    }
}
