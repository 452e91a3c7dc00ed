/* kmalloc.h - the kmalloc layer (src/kmalloc/), as the malloc override sees
 * it: malloc's size classes and their table, the malloc fast path, and ksize
 * under another name for reports. kmalloc, kfree and the rest of the family
 * are public (uslab.h). Calls the common layer and below. Lock: the common
 * layer's classes lock, while classes are made. */
#ifndef USL_KMALLOC_H
#define USL_KMALLOC_H

#include "../common/common.h"

/* The class cache for n <= KMALLOC_MAX_CACHE_SIZE at [(n + 15) >> 4]; all
 * NULL until usl_malloc_bytes has made the classes (malloc's inline path). */
#define KMALLOC_SHIFT_HIGH 13                       /* the largest class: 8 KiB */
#define KMALLOC_MAX_CACHE_SIZE (1UL << KMALLOC_SHIFT_HIGH)
#define USL_MALLOC_TAB (KMALLOC_MAX_CACHE_SIZE / 16 + 1)
extern struct kmem_cache *usl_malloc_tab[USL_MALLOC_TAB] USL_HIDDEN;
/* The same classes for malloc's fast path: their slots (cpu_slab; NULL until
 * published, and for a debug class) and their free markers' secret (a malloc
 * class's marker is word 0), in one 16-byte entry, so the fast path loads no
 * cache structure. A malloc class (16 bytes or more, with sheaves) is a
 * two-word cache (types.h, usl_two_word): its flag is word 1. */
#define USL_MALLOC_FLAG 8
struct usl_malloc_class {
	struct kmem_cache_cpu *slots;
	uintptr_t secret;
};
extern struct usl_malloc_class usl_malloc_classes[USL_MALLOC_TAB] USL_HIDDEN;
/* malloc from the class at usl_malloc_tab[i], whose slots and secret are c's:
 * the sheaf pop and the marker check with no load of the cache; on failure
 * kmem_cache_alloc(class, GFP_KERNEL | __GFP_NOWARN), errno ENOMEM when that
 * fails. */
USL_HIDDEN void *usl_malloc_fast(struct kmem_cache_cpu *slots, size_t i, uintptr_t secret);
/* malloc's allocation: kmalloc, with finer classes up to 8 KiB (steps of 16 and
 * 32 bytes to 256, then eight a doubling), each made on first use. */
USL_HIDDEN void *usl_malloc_bytes(size_t n, gfp_t gfp, uintptr_t caller);   /* caller: for debug classes' owner track (0: this call's) */
/* malloc's class serving n (0 < n <= 8 KiB), made and published in
 * usl_malloc_classes if it is not yet; NULL above 8 KiB or if it cannot be
 * made. */
USL_HIDDEN struct kmem_cache *usl_malloc_cache_for(size_t n);
/* An allocation of size bytes from s, a class with debugging (no slots are
 * published for it), for the caller at address caller. */
USL_HIDDEN void *usl_kmalloc_debug(struct kmem_cache *s, size_t size, gfp_t gfp, uintptr_t caller);
/* p, a block of a debug class, now holds n bytes for its user (an aligned
 * allocation from a larger class, a shrink in place): its kept size and
 * kmalloc red zone follow. Nothing for any other block. */
USL_HIDDEN void usl_kmalloc_note_size(void *p, size_t n);
/* ksize, with reports naming fn (0 for a pointer that starts no block). */
USL_HIDDEN size_t usl_ksize_as(const void *p, const char *fn);

#endif /* USL_KMALLOC_H */
