/* free.c - kmem_cache_free and freeing by pointer alone (kfree, free,
 * free_sized, and ksize's lookup): the page map's word gives the cache and the
 * object check, the cache's free entry (usl_free_entries) the slots and the
 * free marker's key; the marker is written and the object pushed onto this
 * CPU's main sheaf (a section), or, for a cache without sheaves, onto the cpu
 * slab. Anything else goes to the slow paths here; pointers that are not slab
 * objects go to the page provider (large blocks) or are reported. Takes no
 * lock of its own; every 256th free by pointer on a thread that ticks counts
 * toward the decay clock (decay.c). docs/ARCHITECTURE.md, "Follow a call",
 * gives the steps.
 *
 * The functions, by entry (the cache given, or the pointer alone) and stage:
 *
 *   stage     | cache_ (kmem_cache_free)      | ptr_ (kfree, free)
 *   ----------+-------------------------------+------------------------------
 *   fast      | kmem_cache_free itself        | ptr_free_fast, ptr_entry
 *   checked   | cache_free_checked            | ptr_free_by_entry
 *   other     | cache_free_other              | ptr_free_other,
 *             |                               | ptr_free_owned_ticked
 *   push      | cache_push, cache_push_counted| usl_push_entry (objects.h)
 *             | (both over usl_push)          |
 *   remote    | cache_free_remote             | (by the cache: ptr_free_slow)
 *   slow      | -                             | ptr_free_slow, ptr_free_nonslab
 *   refused   | cache_free_refused            | ptr_free_double,
 *             |                               | usl_report_bad_ptr
 *
 * tick_*: the count of frees toward the decay clock; a path's tick argument
 * says whether it counts. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../arch/arch.h"
#include "../pages/pages.h"
#include "../percpu/percpu.h"
#include "../engine/engine.h"
#include "../freestate.h"
#include "common.h"
#include "objects.h"

/* ===========================================================================
 * Freeing
 */

/* Is x an object of s? The page map gives its slab's start, cache and object
 * count: one 8-byte entry, no struct slab (the slab itself is found only on
 * the paths that need it). */
static USL_FAST_PATH bool obj_check(struct kmem_cache *s, void *x)
{
	/* The page map counts the objects carved so far: one beyond fails here
	 * (never handed out, or the count lags), and the caller's slow path asks. */
	return usl_pm_is_object(s, x);
}

USL_OUT_OF_LINE bool usl_uncarved_check(struct kmem_cache *s, void *x, const char *fn)
{
	if (!usl_is_slab(s) && usl_slub_handed_out(s, x))   /* SLAB's page map count is exact */
		return true;
	usl_refuse_never_allocated(fn, s->name, x);
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

static USL_OUT_OF_LINE void tick_cache(struct kmem_cache *s)
{
	__atomic_store_n(&s->recent_use, 1, __ATOMIC_RELAXED);
	usl_decay_tick();
}

/* tick_cache for usl_free_ptr's fast path, which has only the id. */
static USL_OUT_OF_LINE void tick_id(unsigned int id)
{
	struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
	if (s)
		tick_cache(s);
}

/* Counts a kfree/free on this thread: true for every 256th. */
static USL_FAST_PATH bool tick_due(void)
{
	return usl_unlikely(!(++free_calls % 256));
}

/* Called last on each free path, so that it is a tail call and the fast path
 * saves no register. */
static USL_FAST_PATH void tick_maybe(struct kmem_cache *s, bool tick)
{
	if (tick && tick_due())
		tick_cache(s);
}

/* A double free the marker showed (x is free already, wherever it is). */
void usl_marker_double_free(struct kmem_cache *s, void *x, const char *fn)
{
	usl_refuse_double_free(fn, s->name, x, NULL);
}

/* An object of another node's slab, freed on this node: back to its node
 * (usl_engine_free_remote), never into this CPU's sheaves, which so hand out
 * only this node's objects. */
static USL_OUT_OF_LINE void cache_free_remote(struct kmem_cache *s, void *x, bool tick)
{
	usl_engine_free_remote(s, usl_virt_to_slab(x), x);   /* counted there (SLUB: free_slowpath) */
	tick_maybe(s, tick);
}

/* x, checked, to this CPU's sheaf (sheaves) or cpu slab, or their slow
 * paths; counted (USLAB_STATS) in cache_push_counted's copy only, which also sends
 * another node's object back to its node (sheaves; a cpu slab takes only
 * its own slab's objects). */
static USL_FAST_PATH void cache_push(struct kmem_cache *s, void *x, const char *fn,
                                     bool tick, bool sheaves, bool counted, bool mark)
{
	if (sheaves) {
		if (counted && usl_nr_nodes > 1 && usl_addr_node(x) != usl_this_node()) {
			cache_free_remote(s, x, tick);
			return;
		}
		int r = usl_push(s, x, mark);
		if (usl_likely(r == USL_RS_OK)) {
			if (counted)
				usl_stat_inc(s, USL_FREE_PCS, 1);
			tick_maybe(s, tick);
			return;
		}
		if (r == USL_RS_OTHER)
			usl_report_double_free(s, x, fn);
		else
			usl_sheaf_free(s, x);   /* full main, marked slot, locked mode */
		tick_maybe(s, tick);
		return;
	}
	/* In locked mode the section fails at once (usl_rseq_nr == 0). */
	struct slab *slab = usl_virt_to_slab(x);
	int r = usl_rseq_free(s, slab, x);
	if (usl_likely(r == USL_RS_OK)) {
		if (counted)
			usl_stat_inc(s, USL_FREE_FASTPATH, 1);
		tick_maybe(s, tick);
		return;
	}
	usl_slub_free_slow(s, slab, x, r, fn);
	tick_maybe(s, tick);
}

static USL_OUT_OF_LINE void cache_push_counted(struct kmem_cache *s, void *x, const char *fn, bool tick)
{
	if (s->sheaf_capacity)
		cache_push(s, x, fn, tick, true, true, false);
	else
		cache_push(s, x, fn, tick, false, true, false);
}

/* cache_free_checked for every kind but the usual one: the marker written or,
 * in a one-word cache, checked first (hardening on), then the kind's path. */
static USL_OUT_OF_LINE void cache_free_other(struct kmem_cache *s, void *x, const char *fn,
                                             bool tick, bool marked)
{
	if (s->path == USL_PATH_OWNED) {     /* nothing is written into the block */
		uintptr_t off = (uintptr_t)x - usl_base;
		uint64_t e = __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE);
		if (usl_likely(e != 0))
			usl_owned_free_at(x, off, e, fn);
		else
			usl_owned_free_slow(x, fn);
		return;
	}
	if (usl_likely(usl_opt.harden) && !marked) {
		if (usl_likely(usl_two_word(s))) {
			usl_marker_set(s, x);
		} else if (usl_unlikely(!usl_marker_take((uintptr_t)x, s->offset, s->fp_secret,
		                                     (uint32_t)__builtin_ctzl(s->fp_mask)))) {
			usl_marker_double_free(s, x, fn);
			return;
		}
	}
	unsigned int kind = s->path;
	if (kind & USL_PATH_NUMA) {
		kind &= ~USL_PATH_NUMA;
		if (kind != USL_PATH_CPU_SLAB && usl_addr_node(x) != usl_this_node()) {
			cache_free_remote(s, x, tick);
			return;
		}
	}
	if (kind == USL_PATH_SHEAF || kind == USL_PATH_SHEAF_OTHER)
		cache_push(s, x, fn, tick, true, false, false);
	else if (usl_unlikely(kind == USL_PATH_COUNTED))
		cache_push_counted(s, x, fn, tick);
	else
		cache_push(s, x, fn, tick, false, false, false);
}

/* A checked object x of s, to its sheaf or cpu slab; fn names reports.
 * marked: its free marker is written already (free's fast path). A two-word
 * cache's marker is written without reading the object (freestate.h,
 * usl_two_word); a one-word cache's is checked first. */
static USL_FAST_PATH void cache_free_checked(struct kmem_cache *s, void *x, const char *fn,
                                             bool tick, bool marked)
{
	if (usl_likely(s->path == USL_PATH_SHEAF)) {
		/* Hardening on, a two-word cache: the marker written blindly. */
		cache_push(s, x, fn, tick, true, false, !marked);
	} else {
		cache_free_other(s, x, fn, tick, marked);
	}
}

/* Why x cannot be freed to s: a destroyed cache (its id is 0, so no object
 * passes the check), or the engine's reasons. */
static USL_SLOW_PATH void cache_free_refused(struct kmem_cache *s, void *x, uintptr_t caller)
{
	if (s->flags & USL_SLAB_DEBUG_FLAGS)      /* no debug object passes obj_check */
		usl_debug_free(s, x, "kmem_cache_free", caller);
	else if (!usl_cache_live(s))
		usl_report_dead_cache("kmem_cache_free", s, "object not freed");
	else if (usl_pm_is_slot(s, x)) {       /* beyond the carved count */
		if (usl_uncarved_check(s, x, "kmem_cache_free"))
			cache_free_checked(s, x, "kmem_cache_free", false, false);
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
	if (usl_likely(s->path == USL_PATH_OWNED)) {
		/* The owned front end: x's slab by the chunk map, s's by its
		 * slots; a bit set, the object never touched. */
		uintptr_t off = (uintptr_t)x - usl_base;
		if (usl_likely(off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))) {
			uint64_t e = __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE);
			if (usl_likely(e && ((struct usl_oslab *)(uintptr_t)e)->slots == s->oslots)) {
				usl_owned_free_at(x, off, e, "kmem_cache_free");
				return;
			}
		}
		cache_free_refused(s, x, (uintptr_t)__builtin_return_address(0));
		return;
	}
	if (usl_unlikely(!obj_check(s, x))) {
		cache_free_refused(s, x, (uintptr_t)__builtin_return_address(0));
		return;
	}
	cache_free_checked(s, x, "kmem_cache_free", false, false);
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

USL_SLOW_PATH void usl_report_bad_ptr(const char *fn, const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))
		usl_refuse_not_object(fn, NULL, p, "is not an allocated kmalloc block (free already, or inside one)");
	else
		usl_refuse_foreign(fn, NULL, p, true);
}

/* A pointer that is no slab object of a user or kmalloc cache: NULL and
 * ZERO_SIZE_PTR are nothing, a large block (a page block or a mapping) is
 * freed, a block of the start-up area stays, and anything else (an object of
 * uslab's own caches too: a struct kmem_cache, a sheaf) is reported. Kept out
 * of line so the slab-object path saves no registers. */
static USL_OUT_OF_LINE void ptr_free_nonslab(void *x, const char *fn)
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
 * kmem_cache_free's; anything else is ptr_free_nonslab's, a tail call. */
static USL_OUT_OF_LINE void ptr_free_slow(void *x, const char *fn, bool marked)
{
	uintptr_t off = (uintptr_t)x - usl_base;   /* below usl_top: the caller checked */
	struct usl_pagemap_entry e = usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]);
	struct kmem_cache *s = usl_pagemap_user_cache(e);
	if (usl_unlikely(!s)) {
		ptr_free_nonslab(x, fn);
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
		cache_free_checked(s, x, fn, true, marked);
	else if (!usl_pm_is_slot(s, x))
		usl_report_bad_free(fn, s, x, usl_virt_to_slab(x));
	else if (usl_uncarved_check(s, x, fn))   /* beyond the carved count */
		cache_free_checked(s, x, fn, true, marked);
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
static USL_SLOW_PATH void ptr_free_double(void *x, const char *fn, unsigned int id)
{
	struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
	if (s)
		usl_marker_double_free(s, x, fn);
}

/* The usl_free_entries entry of the cache whose object starts at off (an
 * offset in the range, below usl_top), *w the page-map word; NULL for no
 * cache (id 0, whose divisor fails the check), an offset that starts no
 * object handed out (the carved count) and a debug cache (its count is 0).
 * uslab's own caches pass (their count carries USL_PM_INTERNAL): their
 * entries are never fast, and the callers test w. The object check of
 * free's fast path and of usl_obj_ksize. (The divisor is read with acquire:
 * an id reused by a new cache publishes its entry's other fields before
 * it.) */
static USL_FAST_PATH const struct usl_free_entry *ptr_entry(uintptr_t off, uint64_t *w)
{
	*w = usl_pm_word(&usl_pagemap[off >> USL_PAGE_SHIFT]);
	const struct usl_free_entry *f = &usl_free_entries[(uint16_t)(*w >> 32)];
	__asm__("" : "+r"(f));   /* one register for the entry: its fields as offsets from it */
	if (!f)
		__builtin_unreachable();
	uint64_t d = __atomic_load_n(&f->div, __ATOMIC_ACQUIRE);
	if (usl_unlikely(usl_obj_index((uint32_t)off - (uint32_t)*w, (uint32_t)d, (uint32_t)(d >> 32)) >= *w >> 48))
		return NULL;
	return f;
}

static inline bool pm_internal(uint64_t w)
{
	return w & ((uint64_t)USL_PM_INTERNAL << 48);
}

/* An owned slab's object freed while frees count toward the decay tick. */
static USL_OUT_OF_LINE void ptr_free_owned_ticked(void *x, uintptr_t off, uint64_t e, const char *fn)
{
	usl_owned_free_at(x, off, e, fn);
	if (tick_due())
		tick_cache(((struct usl_oslab *)(uintptr_t)e)->cache);
}

/* free's path for x, an object of the cache whose entry is f, in the modes
 * other than the fast one: the marker (checked first in a one-word cache,
 * written blindly in a two-word one) if harden, the push, and, if tick,
 * the count toward the decay tick; anything else to ptr_free_slow. */
static USL_FAST_PATH void ptr_free_by_entry(void *x, const char *fn, const struct usl_free_entry *f,
                                            unsigned int id, bool harden, bool tick)
{
	if (harden && !f->blind &&
	    usl_unlikely(!usl_marker_take((uintptr_t)x, f->fp_offset, f->secret, f->blk_shift))) {
		ptr_free_double(x, fn, id);
		return;
	}
	if (usl_likely(usl_push_entry(f, x, harden && f->blind) == USL_RS_OK)) {
		if (tick && tick_due())
			tick_id(id);
		return;
	}
	ptr_free_slow(x, fn, harden);
}

/* free of x, an object of a cache whose entry is not fast: uslab's own
 * caches, counters on (the cache's counting path, ptr_free_slow), hardening
 * off, a one-word cache, or frees counted toward the decay tick
 * (USL_MODE_TICK: a large heap and no decay thread). */
static USL_OUT_OF_LINE void ptr_free_other(void *x, const char *fn, const struct usl_free_entry *f,
                                           uint64_t w)
{
	unsigned int mode = __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED);
	unsigned int id = (uint16_t)(w >> 32);
	/* Objects of uslab's own caches go slow too: no marker is written into
	 * them. */
	if (pm_internal(w) || (mode & USL_MODE_STATS) ||
	    ((mode & USL_MODE_NUMA) && usl_addr_node(x) != usl_this_node()))
		ptr_free_slow(x, fn, false);    /* another node's object: the cache's kind sends it home */
	else if (mode & USL_MODE_HARDEN)
		ptr_free_by_entry(x, fn, f, id, true, mode & USL_MODE_TICK);
	else
		ptr_free_by_entry(x, fn, f, id, false, mode & USL_MODE_TICK);
}

/* free's fast path needs no struct kmem_cache: the page map's id gives the
 * cache's entry (usl_free_entries), which holds the object check's divisor,
 * the free marker's key and the slots; where the entry's fast_path flag is
 * set (a two-word cache, hardening alone on) the marker is written blindly (a
 * copy of an object free already is refused where it is next taken out:
 * freestate.h, usl_two_word) and a push onto the CPU's main sheaf ends it. A pointer outside the range goes to
 * ptr_free_nonslab; one that fails the object check (no cache, a bad pointer, a
 * debug cache), a double free on the sheaf's top, a full sheaf or a cache
 * without sheaves to ptr_free_slow, which looks at the cache; any other
 * entry to ptr_free_other. */
static USL_FAST_PATH void ptr_free_fast(void *x, const char *fn)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))) {
		ptr_free_nonslab(x, fn);
		return;
	}
	/* An owned slab's object (the owned front end): its chunk-map entry;
	 * counted toward the decay tick while the heap is large and no decay
	 * thread runs (USL_MODE_TICK, one byte test). */
	uint64_t oe = __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE);
	if (oe) {
		/* testb on the mode's byte: one instruction (a C load would be two) */
		__asm__ goto("testb %[bit], %[mode]\n\tjnz %l[ticked]"
		             : : [mode] "m"(((const uint8_t *)&usl_opt.mode)[1]), [bit] "i"(USL_MODE_TICK >> 8)
		             : "cc" : ticked);
		usl_owned_free_at(x, off, oe, fn);
		return;
ticked:
		ptr_free_owned_ticked(x, off, oe, fn);
		return;
	}
	uint64_t w;
	const struct usl_free_entry *f = ptr_entry(off, &w);
	if (usl_unlikely(!f)) {
		ptr_free_slow(x, fn, false);
		return;
	}
	if (usl_likely(__atomic_load_n(&f->fast_path, __ATOMIC_RELAXED))) {
		if (usl_likely(usl_push_entry(f, x, true) == USL_RS_OK))
			return;
		ptr_free_slow(x, fn, true);
		return;
	}
	ptr_free_other(x, fn, f, w);
}

void usl_free_ptr(void *x, const char *fn)
{
	ptr_free_fast(x, fn);
}

void usl_free(void *x)
{
	ptr_free_fast(x, "free");
}

size_t usl_obj_ksize(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)))
		return 0;
	uint64_t w;
	const struct usl_free_entry *f = ptr_entry(off, &w);
	return f && !pm_internal(w) ? __atomic_load_n(&f->ksize, __ATOMIC_RELAXED) : 0;
}
