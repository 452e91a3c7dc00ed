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
/// Allocations up to 16-byte alignment take `uslab_malloc`: the drop-in
/// malloc's finer classes (steps of 16 and 32 bytes to 256, then eight a
/// doubling, to 8 KiB) and its fast path (a table load and the per-CPU
/// sheaf pop), larger blocks from the page provider, direct mappings beyond
/// 4 MiB. Larger alignments take `uslab_aligned_alloc` (the power-of-two
/// class of the size, naturally aligned). `dealloc` is `kfree`, which finds
/// the block's class from its address (the address must be checked all the
/// same, so the size given does not make it faster). `realloc` keeps the
/// block while the new size fits and is more than half of it, grows a direct
/// mapping in place (`krealloc`: mremap), and otherwise moves; `alloc_zeroed`
/// is the zeroing path.
///
/// Out of memory returns NULL without a report (Rust's
/// `handle_alloc_error` says it). The program's C code keeps the C
/// library's malloc.
#[derive(Debug, Clone, Copy, Default)]
pub struct Uslab;

const GFP: sys::gfp_t = sys::GFP_KERNEL | sys::__GFP_NOWARN;
/// uslab_malloc's guaranteed alignment (every class is 16-aligned).
const MALLOC_ALIGN: usize = 16;
/// The largest block of the page provider: above, direct mappings.
const MAX_BLOCK: usize = 4 << 20;

/// A block for layout: malloc's classes up to their alignment, else aligned.
#[inline]
fn alloc_with(layout: Layout, gfp: sys::gfp_t) -> *mut u8 {
    // SAFETY: plain C calls, any size and alignment accepted.
    unsafe {
        if layout.align() <= MALLOC_ALIGN {
            sys::uslab_malloc(layout.size(), gfp) as *mut u8
        } else {
            sys::uslab_aligned_alloc(layout.align(), layout.size(), gfp) as *mut u8
        }
    }
}

// SAFETY: every block returned is at least layout.size() bytes aligned to
// layout.align() (uslab_malloc's classes are 16-aligned, uslab_aligned_alloc
// aligns to any power of two), stays valid until freed, and is freed only
// through kfree (which takes both kinds).
unsafe impl GlobalAlloc for Uslab {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        alloc_with(layout, GFP)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: ptr came from this allocator.
        unsafe { sys::kfree(ptr as *const c_void) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        alloc_with(layout, GFP | sys::__GFP_ZERO)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: ptr is a live block of ours of layout.size() bytes;
        // new_size > 0 (GlobalAlloc's contract).
        unsafe {
            let old = sys::ksize(ptr as *const c_void);
            // In place while it fits and is not more than twice too big (a
            // much smaller size moves, so the memory is given back).
            if new_size <= old && (new_size > old / 2 || old <= 2 * MALLOC_ALIGN) {
                return ptr;
            }
            // A direct mapping that stays one: mremap, no copy (the
            // alignment of a mapping is the page's, and stays).
            if old > MAX_BLOCK && new_size > MAX_BLOCK && layout.align() <= 4096 {
                return sys::krealloc(ptr as *const c_void, new_size, GFP) as *mut u8;
            }
            let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                sys::kfree(ptr as *const c_void);
            }
            new
        }
    }
}
