//! `KmemCache<T>`: a typed kmem_cache, and `CacheBox<'c, T>`, the owning
//! handle of one of its objects.
//!
//! Handles borrow their cache (`CacheBox<'c, T>` holds `&'c KmemCache<T>`):
//! the borrow checker makes a cache outliving its handles impossible, and a
//! handle costs nothing more than its two words (an `Arc` would add an atomic
//! increment and decrement on a shared line to every allocation and free,
//! which is what a slab cache exists to avoid). A cache that must live as
//! long as the program is a `static` (`std::sync::OnceLock`) or
//! [`KmemCache::leak`]ed, and its handles are then `CacheBox<'static, T>`.

use std::alloc::Layout;
use std::ffi::{c_void, CString};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::info::{SlabInfo, Stats};
use crate::sys;

/// Why a cache could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The name holds a NUL byte (C strings cannot).
    NulInName,
    /// The name is empty.
    EmptyName,
    /// `T`'s alignment is above what a cache gives (the page size).
    Alignment {
        /// `align_of::<T>()`.
        align: usize,
        /// The largest a cache takes.
        max: usize,
    },
    /// `T` is larger than a cache's objects may be (2 MiB with 4 KiB pages).
    Size {
        /// `size_of::<T>()`.
        size: usize,
        /// The largest a cache takes.
        max: usize,
    },
    /// uslab refused the cache (the reason is in its report on stderr or to
    /// the report handler), or memory ran out.
    Refused,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NulInName => write!(f, "cache name contains a NUL byte"),
            Error::EmptyName => write!(f, "cache name is empty"),
            Error::Alignment { align, max } => {
                write!(f, "type alignment {align} is above the largest a cache gives ({max})")
            }
            Error::Size { size, max } => write!(f, "type size {size} is above the largest cache object ({max})"),
            Error::Refused => write!(f, "uslab refused to create the cache (see its report)"),
        }
    }
}

impl std::error::Error for Error {}

/// An allocation that failed for want of memory; holds the value back.
pub struct AllocError<T>(pub T);

impl<T> fmt::Debug for AllocError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AllocError(..)")
    }
}

impl<T> fmt::Display for AllocError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of memory in a uslab cache")
    }
}

impl<T> std::error::Error for AllocError<T> {}

/// Cache flags (the C `SLAB_*` flags that make sense for a typed cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CacheFlags(u32);

impl CacheFlags {
    /// No flags: the cache may be merged with a compatible one (same size
    /// and alignment, no debugging), as the kernel merges caches.
    pub const NONE: Self = Self(0);
    /// Never merged: its slabinfo row and statistics are its own.
    pub const NO_MERGE: Self = Self(sys::SLAB_NO_MERGE);
    /// Objects aligned to cache lines (when above half a line).
    pub const HWCACHE_ALIGN: Self = Self(sys::SLAB_HWCACHE_ALIGN);
    /// The kernel's deterministic order (no random order, no delayed reuse).
    pub const ORDERED: Self = Self(sys::SLAB_ORDERED);
    /// Type isolation: the cache's address range is never another cache's.
    pub const VIRTUAL: Self = Self(sys::SLAB_VIRTUAL);
    /// Debug: consistency checks on every alloc and free (F).
    pub const CONSISTENCY_CHECKS: Self = Self(sys::SLAB_CONSISTENCY_CHECKS);
    /// Debug: red zones around objects (Z).
    pub const RED_ZONE: Self = Self(sys::SLAB_RED_ZONE);
    /// Debug: free objects poisoned (P).
    pub const POISON: Self = Self(sys::SLAB_POISON);
    /// Debug: the last allocating and freeing call stacks kept (U).
    pub const STORE_USER: Self = Self(sys::SLAB_STORE_USER);
    /// `F | Z | P | U`, the kernel's `slub_debug=FZPU`.
    pub const DEBUG: Self =
        Self(sys::SLAB_CONSISTENCY_CHECKS | sys::SLAB_RED_ZONE | sys::SLAB_POISON | sys::SLAB_STORE_USER);

    /// The C flag bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for CacheFlags {
    type Output = Self;
    fn bitor(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }
}

/// The largest alignment a cache gives (the page size).
fn max_align() -> usize {
    extern "C" {
        fn sysconf(name: std::ffi::c_int) -> std::ffi::c_long;
    }
    const SC_PAGESIZE: std::ffi::c_int = 30;
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { sysconf(SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// A cache of objects of type `T`: the kernel's `kmem_cache`, typed.
///
/// `Send + Sync`: any thread may allocate from it and free to it (a
/// [`CacheBox`] may be dropped on another thread than the one that made it,
/// when `T: Send`).
///
/// Zero-sized types get a cache that allocates nothing: handles point at a
/// dangling, aligned address (as `Box` does), and drop still runs each
/// value's destructor. Types aligned above the page size, or larger than
/// 2 MiB, are refused with an [`Error`].
///
/// ```
/// use uslab::{KmemCache, CacheFlags};
///
/// #[derive(Debug, PartialEq)]
/// struct Request { id: u32, payload: [u8; 200] }
///
/// let cache = KmemCache::<Request>::with_flags("request", CacheFlags::NO_MERGE)?;
/// let reqs: Vec<_> = cache.alloc_bulk((0..100).map(|id| Request { id, payload: [0; 200] }))?;
/// assert_eq!(reqs[42].id, 42);
/// assert!(cache.slabinfo().active_objs >= 100);
/// cache.free_bulk(reqs);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KmemCache<T> {
    raw: *mut sys::kmem_cache, // NULL for a zero-sized T
    _t: PhantomData<fn(T) -> T>,
}

// SAFETY: the C cache is thread-safe (any thread allocates and frees); the
// cache holds no value of T (handles do, and carry T's own Send and Sync).
unsafe impl<T> Send for KmemCache<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for KmemCache<T> {}

impl<T> KmemCache<T> {
    /// A cache named `name` (shown by slabinfo; truncated to 47 bytes), with
    /// no flags: it may share slabs with a compatible cache, as the kernel
    /// merges caches ([`CacheFlags::NO_MERGE`] keeps it apart).
    pub fn new(name: &str) -> Result<Self, Error> {
        Self::with_flags(name, CacheFlags::NONE)
    }

    /// A cache with flags.
    pub fn with_flags(name: &str, flags: CacheFlags) -> Result<Self, Error> {
        let cname = CString::new(name).map_err(|_| Error::NulInName)?;
        if name.is_empty() {
            return Err(Error::EmptyName);
        }
        let layout = Layout::new::<T>();
        let max = max_align();
        if layout.align() > max {
            return Err(Error::Alignment { align: layout.align(), max });
        }
        const MAX_SIZE: usize = 2 << 20;
        if layout.size() > MAX_SIZE {
            return Err(Error::Size { size: layout.size(), max: MAX_SIZE });
        }
        if layout.size() == 0 {
            return Ok(Self { raw: ptr::null_mut(), _t: PhantomData });
        }
        // SAFETY: a NUL-terminated name (copied by C), sizes checked above,
        // no constructor.
        let raw = unsafe {
            sys::kmem_cache_create(cname.as_ptr(), layout.size() as u32, layout.align() as u32, flags.bits(), None)
        };
        if raw.is_null() {
            return Err(Error::Refused);
        }
        Ok(Self { raw, _t: PhantomData })
    }

    /// The C cache (NULL for a zero-sized `T`), for calls this crate does not
    /// wrap. It must not be destroyed, nor given objects of another type.
    pub fn as_raw(&self) -> *mut sys::kmem_cache {
        self.raw
    }

    /// Makes the cache live for the rest of the program, so its handles are
    /// `CacheBox<'static, T>`.
    pub fn leak(self) -> &'static Self {
        Box::leak(Box::new(self))
    }

    #[inline]
    fn raw_alloc(&self, gfp: sys::gfp_t) -> Option<NonNull<T>> {
        if self.raw.is_null() {
            return Some(NonNull::dangling());
        }
        // SAFETY: a live cache (it is destroyed only by Drop, after every
        // handle is gone); the object, if any, has T's size and alignment.
        NonNull::new(unsafe { sys::kmem_cache_alloc(self.raw, gfp) }.cast())
    }

    /// Moves `value` into an object of the cache. Panics (through
    /// `std::alloc::handle_alloc_error`, as `Box::new`) when memory runs out.
    #[inline]
    pub fn alloc(&self, value: T) -> CacheBox<'_, T> {
        match self.try_alloc(value) {
            Ok(b) => b,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<T>()),
        }
    }

    /// Moves `value` into an object of the cache, or gives it back when
    /// memory runs out (no report is printed).
    #[inline]
    pub fn try_alloc(&self, value: T) -> Result<CacheBox<'_, T>, AllocError<T>> {
        match self.raw_alloc(sys::GFP_KERNEL | sys::__GFP_NOWARN) {
            Some(p) => {
                // SAFETY: p is a fresh object of T's layout, ours alone.
                unsafe { p.as_ptr().write(value) };
                Ok(CacheBox { ptr: p, cache: self })
            }
            None => Err(AllocError(value)),
        }
    }

    /// One object per value of `values`, allocated together (the C bulk
    /// call: all or nothing), filled in order. Out of memory: an error, and
    /// nothing is taken from `values`. If the iterator yields fewer values
    /// than it said, the objects left over are freed; if it panics, the
    /// values already written are dropped and every object freed.
    pub fn alloc_bulk<I>(&self, values: I) -> Result<Vec<CacheBox<'_, T>>, AllocError<I::IntoIter>>
    where
        I: IntoIterator,
        I::IntoIter: ExactSizeIterator<Item = T>,
    {
        let mut it = values.into_iter();
        let n = it.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut out: Vec<CacheBox<'_, T>> = Vec::with_capacity(n);
        if self.raw.is_null() {
            out.extend(it.map(|v| self.alloc(v)));
            return Ok(out);
        }
        let mut raw: Vec<*mut c_void> = vec![ptr::null_mut(); n];
        // SAFETY: raw holds n slots; all-or-nothing in C.
        let got =
            unsafe { sys::kmem_cache_alloc_bulk(self.raw, sys::GFP_KERNEL | sys::__GFP_NOWARN, n, raw.as_mut_ptr()) };
        if got as usize != n {
            return Err(AllocError(it));
        }
        // Objects not yet holding a value are freed if the iterator panics or
        // comes up short (the values written are dropped by their handles in
        // out, which is dropped on unwind).
        struct Rest<'a, T> {
            cache: &'a KmemCache<T>,
            raw: &'a mut [*mut c_void],
        }
        impl<T> Drop for Rest<'_, T> {
            fn drop(&mut self) {
                if !self.raw.is_empty() {
                    // SAFETY: objects of this cache holding no value.
                    unsafe { sys::kmem_cache_free_bulk(self.cache.raw, self.raw.len(), self.raw.as_mut_ptr()) };
                }
            }
        }
        let mut rest = Rest { cache: self, raw: &mut raw[..] };
        while !rest.raw.is_empty() {
            let Some(v) = it.next() else { break };
            let p = rest.raw[0] as *mut T;
            // SAFETY: a fresh object of T's layout from the bulk call.
            unsafe { p.write(v) };
            out.push(CacheBox { ptr: unsafe { NonNull::new_unchecked(p) }, cache: self });
            rest.raw = &mut mem::take(&mut rest.raw)[1..];
        }
        drop(rest);
        Ok(out)
    }

    /// Drops the values and frees their objects with one bulk call. Handles
    /// of another cache are dropped the ordinary way.
    pub fn free_bulk<'c>(&'c self, boxes: impl IntoIterator<Item = CacheBox<'c, T>>) {
        let mut raw: Vec<*mut c_void> = Vec::new();
        for b in boxes {
            if !ptr::eq(b.cache, self) || self.raw.is_null() {
                drop(b);
                continue;
            }
            let b = ManuallyDrop::new(b);
            // A panicking destructor leaves the objects gathered so far
            // unfreed (leaked, never freed twice).
            // SAFETY: the handle owned the value; it is dropped once, here.
            unsafe { ptr::drop_in_place(b.ptr.as_ptr()) };
            raw.push(b.ptr.as_ptr().cast());
        }
        if !raw.is_empty() {
            // SAFETY: objects of this cache, their values dropped.
            unsafe { sys::kmem_cache_free_bulk(self.raw, raw.len(), raw.as_mut_ptr()) };
        }
    }

    /// Gives back what the cache holds unused (its per-CPU sheaves flushed,
    /// empty slabs freed, pages returned to the OS). `true` when slabs with
    /// objects in use remain. Slow: every CPU's slot of the cache is taken
    /// for a moment.
    pub fn shrink(&self) -> bool {
        if self.raw.is_null() {
            return false;
        }
        // SAFETY: a live cache.
        unsafe { sys::kmem_cache_shrink(self.raw) == 1 }
    }

    /// The cache's /proc/slabinfo row (all zero for a zero-sized `T`).
    pub fn slabinfo(&self) -> SlabInfo {
        let mut si = sys::uslab_slabinfo::default();
        if !self.raw.is_null() {
            // SAFETY: a live cache and a valid out pointer.
            unsafe { sys::uslab_cache_slabinfo(self.raw, &mut si) };
        }
        SlabInfo::from(si)
    }

    /// The cache's counters (the kernel's CONFIG_SLUB_STATS), or `None`
    /// unless the program runs with `USLAB_STATS` set.
    pub fn stats(&self) -> Option<Stats> {
        if self.raw.is_null() || !crate::stats_enabled() {
            return None;
        }
        Some(Stats::read(self.raw))
    }

    /// The text of one of the cache's sysfs attributes (`"objects"`,
    /// `"order"`, `"sheaf_capacity"`, ...: the C `uslab_cache_attrs` list),
    /// or `None` for an unknown name or a counter without `USLAB_STATS`.
    pub fn attr(&self, name: &str) -> Option<String> {
        if self.raw.is_null() {
            return None;
        }
        crate::info::attr(self.raw, name)
    }

    /// The kernel's `min_partial`: partial slabs a node keeps even when empty.
    pub fn set_min_partial(&self, n: u32) -> bool {
        self.write_attr("min_partial", n)
    }

    fn write_attr(&self, name: &str, v: u32) -> bool {
        if self.raw.is_null() {
            return false;
        }
        let (a, v) = (CString::new(name).unwrap(), CString::new(v.to_string()).unwrap());
        // SAFETY: a live cache and NUL-terminated strings.
        unsafe { sys::uslab_cache_attr_write(self.raw, a.as_ptr(), v.as_ptr()) == 0 }
    }

    /// The cache's name (a merged cache's is the first creator's).
    pub fn name(&self) -> String {
        if self.raw.is_null() {
            return String::new();
        }
        // SAFETY: a live cache; the name is valid until it is destroyed.
        let p = unsafe { sys::kmem_cache_name(self.raw) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: NUL-terminated, valid during the borrow of self.
        unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl<T> Drop for KmemCache<T> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: no handle can be alive (they borrow the cache). Objects
            // whose handles were forgotten are reported by C, and the cache
            // then kept: their memory stays valid.
            unsafe { sys::kmem_cache_destroy(self.raw) };
        }
    }
}

impl<T> fmt::Debug for KmemCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KmemCache").field("name", &self.name()).field("object_size", &mem::size_of::<T>()).finish()
    }
}

/// An object of a [`KmemCache`], owning its value: dropped and freed to its
/// cache when the handle is dropped. Two words: the object and its cache.
pub struct CacheBox<'c, T> {
    ptr: NonNull<T>,
    cache: &'c KmemCache<T>,
}

// SAFETY: the handle owns its T as Box does; the cache reference is Sync.
unsafe impl<T: Send> Send for CacheBox<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for CacheBox<'_, T> {}

impl<'c, T> CacheBox<'c, T> {
    /// The value, moved out; the object goes back to the cache.
    pub fn into_inner(b: Self) -> T {
        let b = ManuallyDrop::new(b);
        // SAFETY: the handle owned an initialised value, read once; the
        // object is then freed without dropping it again.
        let v = unsafe { b.ptr.as_ptr().read() };
        b.free_object();
        v
    }

    /// The value, for the rest of the cache's life (the object is never freed).
    pub fn leak(b: Self) -> &'c mut T {
        let b = ManuallyDrop::new(b);
        // SAFETY: the object lives as long as the cache ('c), and nobody
        // else holds it.
        unsafe { &mut *b.ptr.as_ptr() }
    }

    /// The object's address.
    pub fn as_ptr(b: &Self) -> *const T {
        b.ptr.as_ptr()
    }

    /// The cache the object belongs to.
    pub fn cache(b: &Self) -> &'c KmemCache<T> {
        b.cache
    }

    /// The raw object, owning its value; the handle is consumed.
    pub fn into_raw(b: Self) -> NonNull<T> {
        ManuallyDrop::new(b).ptr
    }

    /// A handle from [`CacheBox::into_raw`]'s pointer.
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of a handle of `cache`, and no handle owns
    /// it now. (A second handle for one object is a double free: uslab
    /// reports and refuses the second free, but the value is dropped twice.)
    pub unsafe fn from_raw(ptr: NonNull<T>, cache: &'c KmemCache<T>) -> Self {
        CacheBox { ptr, cache }
    }

    #[inline]
    fn free_object(&self) {
        if !self.cache.raw.is_null() {
            // SAFETY: an object of this cache, its value dropped or moved out.
            unsafe { sys::kmem_cache_free(self.cache.raw, self.ptr.as_ptr().cast()) };
        }
    }
}

impl<T> Drop for CacheBox<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // The object is freed even if the value's destructor panics.
        struct Free<'a, 'c, T>(&'a CacheBox<'c, T>);
        impl<T> Drop for Free<'_, '_, T> {
            #[inline]
            fn drop(&mut self) {
                self.0.free_object();
            }
        }
        let _free = Free(self);
        // SAFETY: the handle owns an initialised value, dropped only here.
        unsafe { ptr::drop_in_place(self.ptr.as_ptr()) };
    }
}

impl<T> Deref for CacheBox<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: an initialised value owned by the handle.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for CacheBox<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the handle is borrowed mutably.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> AsRef<T> for CacheBox<'_, T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T> AsMut<T> for CacheBox<'_, T> {
    fn as_mut(&mut self) -> &mut T {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for CacheBox<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Display> fmt::Display for CacheBox<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl<T: PartialEq> PartialEq for CacheBox<'_, T> {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}
