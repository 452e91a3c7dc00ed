//! `Uslab`, the global allocator: uslab's kmalloc family.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use crate::sys;

/// uslab as Rust's global allocator.
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: uslab::Uslab = uslab::Uslab;
/// ```
///
/// Allocations up to 8-byte alignment are `kmalloc` blocks (size classes
/// 8 to 8 KiB, larger blocks from the page provider, direct mappings beyond
/// 4 MiB); larger alignments take `uslab_aligned_alloc` (the power-of-two
/// class of the size, naturally aligned). `dealloc` is `kfree`, which finds
/// the block's class from its address (no faster with the size given: the
/// address must be checked all the same). `realloc` is `krealloc` (in place
/// when the block is large enough), `alloc_zeroed` the zeroing path.
///
/// Out of memory returns NULL without a report (Rust's
/// `handle_alloc_error` says it). The program's C code keeps the C
/// library's malloc.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uslab;

const GFP: sys::gfp_t = sys::GFP_KERNEL | sys::__GFP_NOWARN;
/// kmalloc's guaranteed alignment (every class is 8-aligned).
const KMALLOC_ALIGN: usize = 8;

// SAFETY: every block returned is at least layout.size() bytes aligned to
// layout.align() (kmalloc's classes are 8-aligned, uslab_aligned_alloc
// aligns to any power of two), stays valid until freed, and is freed only
// through kfree (which takes both kinds).
unsafe impl GlobalAlloc for Uslab {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain C calls.
        unsafe {
            if layout.align() <= KMALLOC_ALIGN {
                sys::kmalloc(layout.size(), GFP) as *mut u8
            } else {
                sys::uslab_aligned_alloc(layout.align(), layout.size(), GFP) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: ptr came from this allocator.
        unsafe { sys::kfree(ptr as *const c_void) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let gfp = GFP | sys::__GFP_ZERO;
        // SAFETY: plain C calls.
        unsafe {
            if layout.align() <= KMALLOC_ALIGN {
                sys::kmalloc(layout.size(), gfp) as *mut u8
            } else {
                sys::uslab_aligned_alloc(layout.align(), layout.size(), gfp) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= KMALLOC_ALIGN {
            // SAFETY: ptr is a block of ours; new_size > 0 (GlobalAlloc's
            // contract), so krealloc never frees here; NULL leaves ptr as is.
            return unsafe { sys::krealloc(ptr as *const c_void, new_size, GFP) as *mut u8 };
        }
        // Over-aligned: in place if the block is already large enough (its
        // alignment is unchanged), else a new aligned block.
        // SAFETY: ptr is a live block of ours of layout.size() bytes.
        unsafe {
            if sys::ksize(ptr as *const c_void) >= new_size {
                return ptr;
            }
            let new = sys::uslab_aligned_alloc(layout.align(), new_size, GFP) as *mut u8;
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                sys::kfree(ptr as *const c_void);
            }
            new
        }
    }
}
