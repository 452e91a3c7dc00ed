/* kmalloc.h - the kmalloc layer (src/kmalloc/), as the malloc override sees
 * it: malloc's size classes and their table, the malloc fast path, and ksize
 * under another name for reports. kmalloc, kfree and the rest of the family
 * are public (uslab.h). Calls the common layer and below. Lock: the common
 * layer's classes lock, while classes are made. */
#ifndef USL_KMALLOC_H
#define USL_KMALLOC_H

#include "../arch/arch.h"
#include "../common/common.h"
#include "../freestate.h"
#include "../percpu/percpu.h"

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
 * two-word cache (freestate.h, usl_two_word): its flag is word 1. */
#define USL_MALLOC_FLAG 8
struct usl_malloc_class {
	struct kmem_cache_cpu *slots;   /* an owned class: its struct usl_oslot slots | 1
	                                   (usl_malloc_owned) */
	uintptr_t secret;
};
/* Is this published slots pointer an owned class's (tagged with 1)? */
static inline bool usl_malloc_owned(const struct kmem_cache_cpu *slots)
{
	return (uintptr_t)slots & 1;
}
extern struct usl_malloc_class usl_malloc_classes[USL_MALLOC_TAB] USL_HIDDEN;
/* With hardening off (and no counters) the classes' slots are published here
 * instead, for malloc's second path, a pop with no marker to check
 * (usl_malloc_pop_plain); NULL otherwise. */
extern struct kmem_cache_cpu *usl_malloc_plain[USL_MALLOC_TAB] USL_HIDDEN;
/* A block popped from class c whose free marker is wrong: reported, kept out
 * of use, and another allocated (NULL with errno ENOMEM if none can be). */
USL_HIDDEN void *usl_malloc_refused(const struct usl_malloc_class *c, void *obj) USL_SLOW_PATH;
/* malloc's allocation from class c when its sheaf pop cannot be done (an empty
 * sheaf, a marked slot, locked mode): kmem_cache_alloc of the class, errno
 * ENOMEM if it fails. */
USL_HIDDEN void *usl_malloc_slow(const struct usl_malloc_class *c);
/* A malloc-family call (fn) for n bytes failed: errno ENOMEM, and with
 * USLAB_OOM a report (report) or a report and abort() (abort). n SIZE_MAX: a
 * size that overflows. */
USL_HIDDEN void usl_malloc_nomem(const char *fn, size_t n) USL_SLOW_PATH;

/* The class entry at table index i (for n <= 8 KiB, i = (n + 15) >> 4); its
 * slots are NULL until the class is published: not made yet, a debug class,
 * or a mode other than hardening alone (the caller then takes alloc_bytes). */
static USL_FAST_PATH const struct usl_malloc_class *usl_malloc_class(size_t i)
{
	const struct usl_malloc_class *c = &usl_malloc_classes[i];
	__asm__("" : "+r"(c));   /* one register for the entry: its fields as offsets from it */
	if (!c)
		__builtin_unreachable();
	return c;
}

/* malloc's fast path from class c, whose slots are published: the sheaf pop
 * and the check of the popped block's free marker (at word 0, and no "free on
 * its slab" flag at word 1: a malloc class is a two-word cache, freestate.h,
 * usl_two_word), with no load of the cache. */
static USL_FAST_PATH void *usl_malloc_pop(const struct usl_malloc_class *c,
                                          struct kmem_cache_cpu *slots)
{
	uintptr_t secret = __atomic_load_n(&c->secret, __ATOMIC_RELAXED);
	void *obj;

	USL_RSEQ_SHEAF_POP(slots, obj, slow);
	uintptr_t *at = obj, key = usl_key(secret, at);
	if (!usl_marker_check(at, key, obj, USL_MALLOC_FLAG))
		return usl_malloc_refused(c, obj);
	*at = 0;
	return obj;
slow:
	return usl_malloc_slow(c);
}

/* malloc's fast path from table entry i (n <= 8 KiB: (n + 15) >> 4) when its
 * class is published: the owned front end's tagged pop or the sheaf pop, its
 * block (or NULL, out of memory) in *out, and true; false (nothing done)
 * when no slots are published (the caller's other paths). */
static USL_FAST_PATH bool usl_malloc_fast(size_t i, void **out)
{
	const struct usl_malloc_class *c = usl_malloc_class(i);
	struct kmem_cache_cpu *slots = __atomic_load_n(&c->slots, __ATOMIC_ACQUIRE);
	if (usl_malloc_owned(slots)) {     /* the owned front end: a bit of the cursor word */
		*out = usl_owned_pop_tagged((uintptr_t)slots);
		return true;
	}
	if (usl_likely(slots != NULL)) {
		*out = usl_malloc_pop(c, slots);
		return true;
	}
	return false;
}

/* The same with hardening off: the pop alone (slots from usl_malloc_plain). */
static USL_FAST_PATH void *usl_malloc_pop_plain(const struct usl_malloc_class *c,
                                                struct kmem_cache_cpu *slots)
{
	void *obj;

	USL_RSEQ_SHEAF_POP(slots, obj, slow);
	return obj;
slow:
	return usl_malloc_slow(c);
}
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
/* A block of n bytes aligned to align (a power of two above 8): a
 * power-of-two class or page block, or an aligned mapping beyond the largest
 * block. NULL, unreported, when out of memory. */
USL_HIDDEN void *usl_kmalloc_aligned(size_t align, size_t n, gfp_t gfp);
/* block_size of p, or 0 with a report naming fn and p's cache. */
USL_HIDDEN size_t usl_block_size_named(const void *p, const char *fn);
/* The cache of the block p starts (usl_ksize_as said it is one); NULL for a
 * large block. And its name, "kmalloc (large block)" for one. */
USL_HIDDEN struct kmem_cache *usl_block_owner(const void *p);
USL_HIDDEN const char *usl_block_owner_name(const void *p);
/* ksize, with reports naming fn (0 for a pointer that starts no block). */
USL_HIDDEN size_t usl_ksize_as(const void *p, const char *fn);

#ifdef USLAB_HAVE_LIBURCU
/* Of kfree_rcu's batches (uslab_rcu_stats), those that were RCU sheaves
 * (rcu.c): for slabinfo's kfree_rcu line. */
USL_HIDDEN unsigned long usl_rcu_sheaves(void);
#endif

#endif /* USL_KMALLOC_H */
