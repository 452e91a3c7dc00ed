/* objects.c - the common layer's object paths: kmem_cache_alloc and
 * kmem_cache_free with their bulk forms, and freeing by pointer alone (kfree,
 * free): the page map's cache id, the object check, then the per-CPU layer's
 * main sheaf (a section) or, for a cache without sheaves, the engine's cpu
 * slab; anything else goes to the slow paths below. Pointers that are not slab
 * objects go to the page provider (large blocks) or are reported. Takes no
 * lock of its own; every 256th free by pointer on a thread ticks the decay
 * clock (cache.c). docs/ARCHITECTURE.md section 2 follows these paths. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../arch/arch.h"
#include "../pages/pages.h"
#include "../percpu/percpu.h"
#include "../engine.h"
#include "common.h"

/* ===========================================================================
 * Free markers (docs/ARCHITECTURE.md section 11)
 *
 * A free object's word at the free pointer offset decodes (the word ^ its
 * cache's secret ^ bswap(the word's address)) to an address in the object's
 * own slab block or to NULL: to the object itself while it waits in a sheaf
 * or a packed sheaf (the marker every free writes, and carving for a refill),
 * to the next free object on a free list. Every allocation clears the word,
 * so a live object's decodes to noise (forging it takes the secret). A
 * checked free whose word decodes so is a double free, wherever the first
 * free left the object: refused before the object is pushed anywhere. free's
 * fast path writes a two-word cache's marker without reading it, and the
 * copies a second free leaves are refused where they are taken out (types.h,
 * usl_two_word). USLAB_HARDEN=0: nothing written, nothing checked.
 */

/* Check x and mark it free: false (nothing written) if it is free already. */
static inline __attribute__((always_inline)) bool marker_take(uintptr_t x, uint32_t off, uintptr_t secret,
                                                              uint32_t blk_shift)
{
	uintptr_t at = x + off, key = usl_key(secret, (const void *)at);
	uintptr_t dec = *(uintptr_t *)at ^ key;
	if (usl_unlikely(!((dec ^ x) >> blk_shift) || !dec))
		return false;
	*(uintptr_t *)at = x ^ key;
	return true;
}

/* An allocation's object: its marker (or free pointer) cleared. */
static inline __attribute__((always_inline)) void *marker_clear(void *obj, uint32_t off)
{
	if (usl_opt.harden && obj)
		*(uintptr_t *)((char *)obj + off) = 0;
	return obj;
}

/* ===========================================================================
 * Allocation
 */

/* __GFP_ZERO's clearing of an allocated object. Out of line but not cold:
 * kmem_cache_zalloc and kzalloc are common, and a cold function's memset is
 * compiled for size, a byte-wise 'rep stosb' that took 40 ns on 64 bytes
 * (libc's memset: a few). */
static __attribute__((noinline)) void *zero_object(struct kmem_cache *s, void *obj)
{
	return memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
}

/* Everything but the common case: NULL cache, empty freelist. */
static __attribute__((noinline, cold)) void *alloc_tail(struct kmem_cache *s, gfp_t gfp, void *obj)
{
	if (usl_unlikely(!s)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc: NULL cache");
		return NULL;
	}
	if (!obj && !s->sheaf_capacity) {
		if (usl_unlikely(!usl_cache_live(s))) {
			usl_report_dead_cache("kmem_cache_alloc", s, "no object");
			return NULL;
		}
		/* A debug cache has no cpu slab: every allocation comes here. Reached
		 * by tail calls from kmem_cache_alloc, so the return address is its
		 * caller's (the owner track). */
		if (s->flags & USL_SLAB_DEBUG_FLAGS)
			return usl_debug_alloc(s, gfp, 0, (uintptr_t)__builtin_return_address(0));
		obj = usl_slub_alloc_slow(s, gfp);
	}
	marker_clear(obj, s->offset);
	if ((gfp & __GFP_ZERO) && obj)
		return zero_object(s, obj);
	return obj;
}

/* The slow paths of kmem_cache_alloc, each reached by a tail call so the fast
 * paths need no stack frame. */
static __attribute__((noinline)) void *sheaf_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	/* A destroyed cache's slots are empty: its allocations come here. */
	if (usl_unlikely(!usl_cache_live(s))) {
		usl_report_dead_cache("kmem_cache_alloc", s, "no object");
		return NULL;
	}
	void *obj = marker_clear(usl_sheaf_alloc(s, gfp), s->offset);
	if ((gfp & __GFP_ZERO) && obj)
		return zero_object(s, obj);
	return obj;
}

static __attribute__((noinline)) void *cpu_slab_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	void *obj = usl_rseq_mode ? NULL : usl_slub_alloc_fast_locked(s);
	return alloc_tail(s, gfp, obj);
}

/* A popped object without its marker: reported, never handed out (it is
 * lost: someone may hold it), and the allocation tried again. */
__attribute__((noinline, cold)) void *usl_pop_refused(struct kmem_cache *s, gfp_t gfp, void *obj, const char *fn)
{
	usl_report_pop_refused(s, obj, fn);
	return kmem_cache_alloc(s, gfp);
}

/* The fast paths of kmem_cache_alloc: the sheaf section (sheaves) or the cpu
 * slab's, then its slow path; counted (USLAB_STATS) in alloc_counted's copy
 * only, so that the copy in kmem_cache_alloc tests nothing for it. */
static inline __attribute__((always_inline)) void *alloc_fast(struct kmem_cache *s, gfp_t gfp, bool sheaves,
                                                              bool counted, bool harden)
{
	void *obj;

	if (sheaves) {
		/* Sheaves: pop this CPU's main sheaf. */
		USL_RSEQ_SHEAF_POP(s->cpu_slab, obj, sheaf_slow);
		if (harden && usl_unlikely(!usl_marker_pop(s, obj)))
			return usl_pop_refused(s, gfp, obj, "kmem_cache_alloc");
		if (counted)
			usl_stat_inc(s, USL_ALLOC_PCS, 1);
		if (usl_unlikely(gfp & __GFP_ZERO))
			return zero_object(s, obj);
		return obj;
sheaf_slow:
		return sheaf_alloc_slow(s, gfp);
	}
	/* One section serves both modes: in locked mode it jumps to `slow` at once. */
	USL_RSEQ_ALLOC(s, obj);
	marker_clear(obj, s->offset);
	if (counted)
		usl_stat_inc(s, USL_ALLOC_FASTPATH, 1);
	if (usl_unlikely(gfp & __GFP_ZERO))
		return zero_object(s, obj);
	return obj;
slow:
	return cpu_slab_alloc_slow(s, gfp);
}

static __attribute__((noinline)) void *alloc_counted(struct kmem_cache *s, gfp_t gfp)
{
	return s->sheaf_capacity ? alloc_fast(s, gfp, true, true, usl_opt.harden) : alloc_fast(s, gfp, false, true, false);
}

/* The fast paths other than the usual one: sheaves with hardening off or in a
 * one-word cache (whose pop checks the marker all the same), the cpu slab. */
static __attribute__((noinline)) void *alloc_other(struct kmem_cache *s, gfp_t gfp)
{
	if (s->fast == USL_FAST_SHEAF_OTHER)
		return alloc_fast(s, gfp, true, false, usl_opt.harden);
	return alloc_fast(s, gfp, false, false, false);
}

void *kmem_cache_alloc(struct kmem_cache *s, gfp_t gfp)
{
	if (usl_unlikely(!s))
		return alloc_tail(s, gfp, NULL);
	if (usl_likely(s->fast == USL_FAST_SHEAF))
		return alloc_fast(s, gfp, true, false, true);
	if (usl_unlikely(s->fast == USL_FAST_COUNTED))
		return alloc_counted(s, gfp);
	return alloc_other(s, gfp);
}

void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t gfp, int node)
{
	/* One node until NUMA placement lands: every node id is a hint. */
	(void)node;
	return kmem_cache_alloc(s, gfp);
}

void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t gfp)
{
	return kmem_cache_alloc(s, gfp | __GFP_ZERO);
}

/* ===========================================================================
 * Freeing
 */

/* Is x an object of s? The page map gives its slab's start, cache and object
 * count: one 8-byte entry, no struct slab (the slab itself is found only on
 * the paths that need it). */
static inline __attribute__((always_inline)) bool obj_check(struct kmem_cache *s, void *x)
{
	/* The page map counts the objects carved so far: one beyond fails here
	 * (never handed out, or the count lags), and the caller's slow path asks. */
	return usl_pm_is_object(s, x);
}

/* obj_check failed for x, an object start of s beyond the page map's count:
 * true if it was handed out; else the free is refused with a report. */
static __attribute__((noinline)) bool uncarved_check(struct kmem_cache *s, void *x, const char *fn)
{
	if (!usl_is_slab(s) && usl_slub_handed_out(s, x))   /* SLAB's page map count is exact */
		return true;
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p was never allocated (free of an object not yet handed out); not freed",
	           fn, s->name, x);
	return false;
}

bool usl_cache_obj_ok(struct kmem_cache *s, const void *x)
{
	return usl_pm_is_object(s, x);
}

/* Every 256th kfree/free of a thread marks its cache used, for the decay
 * sweep's idea of idle, and ticks the decay clock, so a program whose frees
 * all take fast paths still gives memory back. (kmem_cache_free does not: its
 * pair with kmem_cache_alloc is the leanest path; a user cache's CPU slots are
 * never flushed by the sweep.) */
static __thread unsigned int free_calls __attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) void free_sample(struct kmem_cache *s)
{
	__atomic_store_n(&s->recent_use, 1, __ATOMIC_RELAXED);
	usl_decay_tick();
}

/* free_sample for usl_free_ptr's fast path, which has only the id. */
static __attribute__((noinline)) void free_sample_id(unsigned int id)
{
	struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
	if (s)
		free_sample(s);
}

/* Counts a kfree/free on this thread: true for every 256th. */
static inline __attribute__((always_inline)) bool sample_due(void)
{
	return usl_unlikely(!(++free_calls % 256));
}

/* Called last on each free path, so that it is a tail call and the fast path
 * saves no register. */
static inline __attribute__((always_inline)) void maybe_sample(struct kmem_cache *s, bool sample)
{
	if (sample && sample_due())
		free_sample(s);
}

/* A double free the marker showed (x is free already, wherever it is). */
static __attribute__((noinline, cold)) void marker_double_free(struct kmem_cache *s, void *x, const char *fn)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (already free); not freed", fn, s->name, x);
}

/* x, checked, to this CPU's sheaf (sheaves) or cpu slab, or their slow
 * paths; counted (USLAB_STATS) in free_counted's copy only. */
static inline __attribute__((always_inline)) void free_fast(struct kmem_cache *s, void *x, const char *fn,
                                                            bool sample, bool sheaves, bool counted)
{
	if (sheaves) {
		int r = usl_rseq_sheaf_push(s, x);
		if (usl_likely(r == USL_RS_OK)) {
			if (counted)
				usl_stat_inc(s, USL_FREE_PCS, 1);
			maybe_sample(s, sample);
			return;
		}
		if (r == USL_RS_OTHER)
			usl_report_double_free(s, x, fn);
		else
			usl_sheaf_free(s, x);   /* full main, marked slot, locked mode */
		maybe_sample(s, sample);
		return;
	}
	/* In locked mode the section fails at once (usl_rseq_nr == 0). */
	struct slab *slab = usl_virt_to_slab(x);
	int r = usl_rseq_free(s, slab, x);
	if (usl_likely(r == USL_RS_OK)) {
		if (counted)
			usl_stat_inc(s, USL_FREE_FASTPATH, 1);
		maybe_sample(s, sample);
		return;
	}
	usl_slub_free_slow(s, slab, x, r, fn);
	maybe_sample(s, sample);
}

static __attribute__((noinline)) void free_counted(struct kmem_cache *s, void *x, const char *fn, bool sample)
{
	if (s->sheaf_capacity)
		free_fast(s, x, fn, sample, true, true);
	else
		free_fast(s, x, fn, sample, false, true);
}

/* free_checked_as for every kind but the usual one: the marker written or,
 * in a one-word cache, checked first (hardening on), then the kind's path. */
static __attribute__((noinline)) void free_checked_other(struct kmem_cache *s, void *x, const char *fn,
                                                         bool sample, bool marked)
{
	if (usl_likely(usl_opt.harden) && !marked) {
		if (usl_likely(usl_two_word(s))) {
			usl_marker_set(s, x);
		} else if (usl_unlikely(!marker_take((uintptr_t)x, s->offset, s->fp_secret,
		                                     (uint32_t)__builtin_ctzl(s->fp_mask)))) {
			marker_double_free(s, x, fn);
			return;
		}
	}
	if (s->fast == USL_FAST_SHEAF_OTHER)
		free_fast(s, x, fn, sample, true, false);
	else if (usl_unlikely(s->fast == USL_FAST_COUNTED))
		free_counted(s, x, fn, sample);
	else
		free_fast(s, x, fn, sample, false, false);
}

/* A checked object x of s, to its sheaf or cpu slab; fn names reports.
 * marked: its free marker is written already (free's fast path). A two-word
 * cache's marker is written without reading the object (types.h,
 * usl_two_word); a one-word cache's is checked first. */
static inline __attribute__((always_inline)) void free_checked_as(struct kmem_cache *s, void *x, const char *fn,
                                                                  bool sample, bool marked)
{
	if (usl_likely(s->fast == USL_FAST_SHEAF)) {
		/* Hardening on, a two-word cache: the marker written blindly. */
		if (!marked)
			usl_marker_set(s, x);
		free_fast(s, x, fn, sample, true, false);
	} else {
		free_checked_other(s, x, fn, sample, marked);
	}
}

static inline __attribute__((always_inline)) void free_checked(struct kmem_cache *s, void *x, const char *fn,
                                                               bool sample)
{
	free_checked_as(s, x, fn, sample, false);
}

/* Why x cannot be freed to s: a destroyed cache (its id is 0, so no object
 * passes the check), or the engine's reasons. */
static __attribute__((noinline, cold)) void bad_free(struct kmem_cache *s, void *x, uintptr_t caller)
{
	if (s->flags & USL_SLAB_DEBUG_FLAGS)      /* no debug object passes obj_check */
		usl_debug_free(s, x, "kmem_cache_free", caller);
	else if (!usl_cache_live(s))
		usl_report_dead_cache("kmem_cache_free", s, "object not freed");
	else if (usl_pm_is_slot(s, x)) {       /* beyond the carved count */
		if (uncarved_check(s, x, "kmem_cache_free"))
			free_checked(s, x, "kmem_cache_free", false);
	} else
		usl_report_bad_free("kmem_cache_free", s, x, usl_virt_to_slab(x));
}

void kmem_cache_free(struct kmem_cache *s, void *x)
{
	if (usl_unlikely(!x))
		return;
	if (usl_unlikely(!s)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_free: NULL cache for %p; not freed", x);
		return;
	}
	if (usl_unlikely(!obj_check(s, x))) {
		bad_free(s, x, (uintptr_t)__builtin_return_address(0));
		return;
	}
	free_checked(s, x, "kmem_cache_free", false);
}

/* ===========================================================================
 * Freeing by pointer alone (kfree, free)
 */

/* The start-up area of the malloc override: its blocks are never freed, and a
 * free of one is no error. */
static uintptr_t ignored_lo;
static size_t ignored_len;

void usl_free_ignore_area(const void *lo, size_t len)
{
	__atomic_store_n(&ignored_lo, (uintptr_t)lo, __ATOMIC_RELAXED);
	__atomic_store_n(&ignored_len, len, __ATOMIC_RELAXED);
}

__attribute__((noinline, cold)) void usl_report_bad_ptr(const char *fn, const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))
		usl_report(USLAB_ERR_NOT_OBJECT, "%s: %p is not an allocated kmalloc block (free already, or inside one); ignored",
		           fn, p);
	else
		usl_report(USLAB_ERR_FOREIGN, "%s: %p is not a uslab pointer; ignored", fn, p);
}

/* A pointer that is no slab object of a user or kmalloc cache: NULL and
 * ZERO_SIZE_PTR are nothing, a large block (a page block or a mapping) is
 * freed, a block of the start-up area stays, and anything else (an object of
 * uslab's own caches too: a struct kmem_cache, a sheaf) is reported. Kept out
 * of line so the slab-object path saves no registers. */
static __attribute__((noinline)) void free_nonslab(void *x, const char *fn)
{
	if (ZERO_OR_NULL_PTR(x))
		return;
	if ((uintptr_t)x - __atomic_load_n(&ignored_lo, __ATOMIC_RELAXED) < __atomic_load_n(&ignored_len, __ATOMIC_RELAXED))
		return;
	if (usl_large_free(x))
		return;
	usl_report_bad_ptr(fn, x);
}

/* usl_free_ptr's slow path, for x at offset off in the range: a slab object of
 * a user or kmalloc cache, its cache from the page map and the object check
 * kmem_cache_free's; anything else is free_nonslab's, a tail call. */
static __attribute__((noinline)) void free_ptr_slow(void *x, const char *fn, bool marked)
{
	uintptr_t off = (uintptr_t)x - usl_base;   /* below usl_top: the caller checked */
	struct usl_pagemap_entry e = usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]);
	struct kmem_cache *s = usl_pagemap_user_cache(e);
	if (usl_unlikely(!s)) {
		free_nonslab(x, fn);
		return;
	}
	/* A debug cache's objects all come here (its page-map count is 0).
	 * Reached by tail calls from free and kfree: the return address is
	 * their caller's. */
	if (s->flags & USL_SLAB_DEBUG_FLAGS) {
		usl_debug_free(s, x, fn, (uintptr_t)__builtin_return_address(0));
		return;
	}
	/* A user cache's entry: objects has no USL_PM_INTERNAL bit to mask. */
	if (usl_likely(usl_obj_index_in(s, (uint32_t)off - e.start, e.objects)))
		free_checked_as(s, x, fn, true, marked);
	else if (!usl_pm_is_slot(s, x))
		usl_report_bad_free(fn, s, x, usl_virt_to_slab(x));
	else if (uncarved_check(s, x, fn))   /* beyond the carved count */
		free_checked_as(s, x, fn, true, marked);
}

/* free_sized and sized operator delete: a debug cache's block is checked
 * against the size given; then the free as usl_free_ptr (a tail call, so
 * the owner track's caller stays the program's). */
void usl_free_sized(void *x, size_t size, const char *fn)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)) {
		struct kmem_cache *s = usl_pagemap_user_cache(usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]));
		if (usl_unlikely(s && (s->flags & USL_SLAB_DEBUG_FLAGS)))
			usl_debug_check_size(s, x, size, fn);
	}
	usl_free_ptr(x, fn);
}

/* The marker said x is free already. */
static __attribute__((noinline, cold)) void free_ptr_slow_double(void *x, const char *fn, unsigned int id)
{
	struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
	if (s)
		marker_double_free(s, x, fn);
}

/* The usl_cache_fast entry of the cache whose object starts at off (an
 * offset in the range, below usl_top), *w the page-map word; NULL for no
 * cache (id 0, whose divisor fails the check), an offset that starts no
 * object handed out (the carved count) and a debug cache (its count is 0).
 * uslab's own caches pass (their count carries USL_PM_INTERNAL): their
 * entries are never fast, and the callers test w. The object check of
 * free's fast path and of usl_obj_ksize. (The divisor is read with acquire:
 * an id reused by a new cache publishes its entry's other fields before
 * it.) */
static inline __attribute__((always_inline)) const struct usl_cache_fast *fast_entry(uintptr_t off, uint64_t *w)
{
	*w = usl_pm_word(&usl_pagemap[off >> USL_PAGE_SHIFT]);
	const struct usl_cache_fast *f = &usl_cache_fast[(uint16_t)(*w >> 32)];
	__asm__("" : "+r"(f));   /* one register for the entry: its fields as offsets from it */
	if (!f)
		__builtin_unreachable();
	uint64_t d = __atomic_load_n(&f->div, __ATOMIC_ACQUIRE);
	if (usl_unlikely(usl_obj_index((uint32_t)off - (uint32_t)*w, (uint32_t)d, (uint32_t)(d >> 32)) >= *w >> 48))
		return NULL;
	return f;
}

/* usl_marker_set from a cache's entry: x's free marker, written blindly. */
static inline __attribute__((always_inline)) void fast_marker_set(const struct usl_cache_fast *f, void *x)
{
	uintptr_t at = (uintptr_t)x + f->fp_offset;
	*(uintptr_t *)at = (uintptr_t)x ^ usl_key(f->secret, (const void *)at);
}

static inline bool pm_internal(uint64_t w)
{
	return w & ((uint64_t)USL_PM_INTERNAL << 48);
}

/* free's path for x, an object of the cache whose entry is f, in the modes
 * other than the fast one: the marker (checked first in a one-word cache,
 * written blindly in a two-word one) if harden, the push, and, if sample,
 * the count toward the decay tick; anything else to free_ptr_slow. */
static inline __attribute__((always_inline)) void free_by_id(void *x, const char *fn, const struct usl_cache_fast *f,
                                                             unsigned int id, bool harden, bool sample)
{
	if (harden) {
		if (usl_likely(f->blind)) {
			fast_marker_set(f, x);
		} else if (usl_unlikely(!marker_take((uintptr_t)x, f->fp_offset, f->secret, f->blk_shift))) {
			free_ptr_slow_double(x, fn, id);
			return;
		}
	}
	if (usl_likely(usl_rseq_sheaf_push_at(f->slots, x) == USL_RS_OK)) {
		if (sample && sample_due())
			free_sample_id(id);
		return;
	}
	free_ptr_slow(x, fn, harden);
}

/* free of x, an object of a cache whose entry is not fast: uslab's own
 * caches, counters on (the cache's counting path, free_ptr_slow), hardening
 * off, a one-word cache, or frees counted toward the decay tick
 * (USL_MODE_SAMPLE: a large heap and no decay thread). */
static __attribute__((noinline)) void free_ptr_other(void *x, const char *fn, const struct usl_cache_fast *f,
                                                     uint64_t w)
{
	unsigned int mode = __atomic_load_n(&usl_opt.fast_mode, __ATOMIC_RELAXED);
	unsigned int id = (uint16_t)(w >> 32);
	/* Objects of uslab's own caches go slow too: no marker is written into
	 * them. */
	if (pm_internal(w) || (mode & USL_MODE_STATS))
		free_ptr_slow(x, fn, false);
	else if (mode & USL_MODE_HARDEN)
		free_by_id(x, fn, f, id, true, mode & USL_MODE_SAMPLE);
	else
		free_by_id(x, fn, f, id, false, mode & USL_MODE_SAMPLE);
}

/* free's fast path needs no struct kmem_cache: the page map's id gives the
 * cache's entry (usl_cache_fast), which holds the object check's divisor, the
 * free marker's key and the slots; in a fast entry's cache (a two-word cache,
 * hardening alone on) the marker is written blindly (a copy of an object free
 * already is refused where it is next taken out: types.h, usl_two_word) and a
 * push onto the CPU's main sheaf ends it. A pointer outside the range goes to
 * free_nonslab; one that fails the object check (no cache, a bad pointer, a
 * debug cache), a double free on the sheaf's top, a full sheaf or a cache
 * without sheaves to free_ptr_slow, which looks at the cache; any other
 * entry to free_ptr_other. */
static inline __attribute__((always_inline)) void free_ptr_fast(void *x, const char *fn)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))) {
		free_nonslab(x, fn);
		return;
	}
	uint64_t w;
	const struct usl_cache_fast *f = fast_entry(off, &w);
	if (usl_unlikely(!f)) {
		free_ptr_slow(x, fn, false);
		return;
	}
	if (usl_likely(__atomic_load_n(&f->fast, __ATOMIC_RELAXED))) {
		fast_marker_set(f, x);
		if (usl_likely(usl_rseq_sheaf_push_at(f->slots, x) == USL_RS_OK))
			return;
		free_ptr_slow(x, fn, true);
		return;
	}
	free_ptr_other(x, fn, f, w);
}

void usl_free_ptr(void *x, const char *fn)
{
	free_ptr_fast(x, fn);
}

void usl_free(void *x)
{
	free_ptr_fast(x, "free");
}

size_t usl_obj_ksize(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)))
		return 0;
	uint64_t w;
	const struct usl_cache_fast *f = fast_entry(off, &w);
	return f && !pm_internal(w) ? __atomic_load_n(&f->ksize, __ATOMIC_RELAXED) : 0;
}

/* ===========================================================================
 * Bulk
 */

/* Bulk calls this small take the single-object paths (sheaves): their fixed
 * cost is lower than a bulk call's. */
#define SMALL_BULK 3

static __attribute__((noinline, cold)) int alloc_bulk_failed(struct kmem_cache *s, gfp_t gfp, size_t got, size_t nr)
{
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; none kept",
		           s->name, got, nr);
	return 0;
}

int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	if (usl_unlikely(!s || (!p && nr) || nr > (size_t)INT32_MAX)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc_bulk(%s): %s (nr %zu)", s ? s->name : "NULL",
		           !s ? "NULL cache" : !p ? "NULL array" : "nr above INT_MAX", nr);
		return 0;
	}
	if (!nr)
		return 0;
	if (usl_unlikely(!usl_cache_live(s))) {
		usl_report_dead_cache("kmem_cache_alloc_bulk", s, "no object");
		return 0;
	}
	if (usl_unlikely(s->flags & USL_SLAB_DEBUG_FLAGS)) {
		/* Debug caches: one checked allocation at a time. */
		uintptr_t caller = (uintptr_t)__builtin_return_address(0);
		for (size_t i = 0; i < nr; i++)
			if (!(p[i] = usl_debug_alloc(s, gfp | __GFP_NOWARN, 0, caller))) {
				for (size_t j = 0; j < i; j++)
					usl_debug_free(s, p[j], "kmem_cache_alloc_bulk", caller);
				return alloc_bulk_failed(s, gfp, i, nr);
			}
		return (int)nr;
	}
	if (nr <= SMALL_BULK && s->sheaf_capacity) {
		/* The single-object path is cheaper for a few objects. */
		for (size_t i = 0; i < nr; i++)
			if (!(p[i] = kmem_cache_alloc(s, gfp | __GFP_NOWARN))) {
				for (size_t j = 0; j < i; j++)
					kmem_cache_free(s, p[j]);
				return alloc_bulk_failed(s, gfp, i, nr);
			}
		return (int)nr;
	}
	if (s->sheaf_capacity) {
		if (!usl_sheaf_alloc_bulk(s, gfp, nr, p))   /* every marker cleared */
			return 0;
	} else {
		if (!usl_slub_alloc_bulk(s, gfp, nr, p))
			return 0;
		if (usl_opt.harden)
			for (size_t i = 0; i < nr; i++)
				marker_clear(p[i], s->offset);
	}
	if (gfp & __GFP_ZERO)
		for (size_t i = 0; i < nr; i++)
			memset(p[i], 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return (int)nr;
}

/* Sheaves: check every pointer (reported and left out when bad, as is an entry
 * equal to the one before it), compact, and copy them into the sheaves. */
static void sheaf_free_bulk_checked(struct kmem_cache *s, size_t nr, void **p)
{
	/* obj_check with everything it reads hoisted out of the loop (the range
	 * only grows, and every object in p[] was handed out before this call). */
	const uintptr_t base = usl_base, top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	const struct usl_pagemap_entry *pm = usl_pagemap;
	const uint32_t inv = s->div_inv, ds = s->div_shift, id = s->id, blk = (uint32_t)__builtin_ctzl(s->fp_mask);
	size_t i, k;
	uintptr_t prev = 0;

	/* The common case: every entry good. No stores; NULL fails the range
	 * check (NULL - base wraps). The page map entry is read once per run of
	 * pointers into one page (arrays from kmem_cache_alloc_bulk mostly are).
	 * The first entry that is not simply good sends the rest through the
	 * compacting loop below, which reports. */
	uintptr_t last_pg = ~(uintptr_t)0;
	uint32_t start = 0, objects = 0;
	for (i = 0; i < nr; i++) {
		uintptr_t x = (uintptr_t)p[i];
		uintptr_t off = x - base;
		if (usl_unlikely(off >= top))
			break;
		uintptr_t pg = off >> USL_PAGE_SHIFT;
		if (pg != last_pg) {
			struct usl_pagemap_entry e = usl_pm_read(&pm[pg]);
			if (usl_unlikely(e.cache != id))
				break;
			start = e.start;
			objects = USL_PM_OBJECTS(e);
			last_pg = pg;
		}
		if (usl_unlikely(usl_obj_index((uint32_t)off - start, inv, ds) >= objects || x == prev))
			break;
		if (usl_opt.harden && usl_unlikely(!marker_take(x, s->offset, s->fp_secret, blk)))
			break;
		prev = x;
	}
	/* The rare case: from the first entry that was not simply good, each one
	 * checked on its own, reported if bad, and the good ones compacted. */
	k = i;
	for (; i < nr; i++) {
		void *x = p[i];
		if (!x)
			continue;
		if (usl_unlikely(!obj_check(s, x))) {
			if (!usl_pm_is_slot(s, x)) {
				usl_report_bad_free("kmem_cache_free_bulk", s, x, usl_virt_to_slab(x));
				continue;
			}
			if (!uncarved_check(s, x, "kmem_cache_free_bulk"))
				continue;
		}
		if (usl_unlikely((uintptr_t)x == prev)) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "kmem_cache_free_bulk(%s): %p appears twice in the array; freed once",
			           s->name, x);
			continue;
		}
		if (usl_opt.harden && usl_unlikely(!marker_take((uintptr_t)x, s->offset, s->fp_secret, blk))) {
			marker_double_free(s, x, "kmem_cache_free_bulk");
			continue;
		}
		p[k++] = x;
		prev = (uintptr_t)x;
	}
	if (k)
		usl_sheaf_free_bulk(s, k, p);
}

/* Before the engine's detached freelists (which go past any sheaf): each
 * object of s checked and marked; one free already is reported and its entry
 * cleared. Entries that are not objects of s are the engine's to report. */
static void bulk_markers_take(struct kmem_cache *s, size_t nr, void **p, const char *fn)
{
	uint32_t blk = (uint32_t)__builtin_ctzl(s->fp_mask);
	for (size_t i = 0; i < nr; i++)
		if (p[i] && usl_pm_is_object(s, p[i]) && usl_unlikely(!marker_take((uintptr_t)p[i], s->offset, s->fp_secret, blk))) {
			marker_double_free(s, p[i], fn);
			p[i] = NULL;
		}
}

void kmem_cache_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	if (usl_unlikely(s && !usl_cache_live(s))) {
		usl_report_dead_cache("kmem_cache_free_bulk", s, "nothing freed");
		return;
	}
	if (s && s->sheaf_capacity && p) {
		if (nr <= SMALL_BULK) {
			for (size_t i = 0; i < nr; i++)
				if (p[i])
					kmem_cache_free(s, p[i]);
			return;
		}
		sheaf_free_bulk_checked(s, nr, p);
		return;
	}
	if (!s) {
		kfree_bulk(nr, p);
		return;
	}
	if ((s->flags & USL_SLAB_DEBUG_FLAGS) && p) {
		uintptr_t caller = (uintptr_t)__builtin_return_address(0);
		for (size_t i = 0; i < nr; i++)
			if (p[i])       /* checked there: a pointer of another cache is reported */
				usl_debug_free(s, p[i], "kmem_cache_free_bulk", caller);
		return;
	}
	if (usl_opt.harden && p)
		bulk_markers_take(s, nr, p, "kmem_cache_free_bulk");
	usl_slub_free_bulk_as("kmem_cache_free_bulk", s, nr, p);
}

/* Entries that are not slab objects of a user or kmalloc cache (large blocks,
 * mappings, ZERO_SIZE_PTR, bad pointers) are freed or reported one by one, as
 * kfree does, and cleared; the rest go to the engine's detached freelists. */
void kfree_bulk(size_t nr, void **p)
{
	if (p) {
		const uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
		for (size_t i = 0; i < nr; i++) {
			if (!p[i])
				continue;
			uintptr_t off = (uintptr_t)p[i] - usl_base;
			struct kmem_cache *s = off < top ? usl_pagemap_user_cache(usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]))
			                                 : NULL;
			if (s && (s->flags & USL_SLAB_DEBUG_FLAGS)) {
				usl_debug_free(s, p[i], "kfree_bulk", (uintptr_t)__builtin_return_address(0));
				p[i] = NULL;
				continue;
			}
			if (s && usl_is_slab(s)) {      /* SLAB: through the per-CPU array, as kfree */
				usl_free_ptr(p[i], "kfree_bulk");
				p[i] = NULL;
				continue;
			}
			if (s) {
				/* To the engine's detached freelists, past any sheaf the
				 * object may sit in: the marker tells. */
				if (usl_opt.harden)
					bulk_markers_take(s, 1, &p[i], "kfree_bulk");
				/* A two-word cache's marker becomes F on the way in. */
				if (p[i] && usl_tw_on(s) && usl_pm_is_object(s, p[i]) && !usl_tw_enter_slab(s, p[i])) {
					usl_report_tw_enter(s, p[i], "kfree_bulk");
					p[i] = NULL;
				}
				continue;
			}
			usl_free_ptr(p[i], "kfree");
			p[i] = NULL;
		}
	}
	usl_slub_free_bulk_as("kfree_bulk", NULL, nr, p);
}
