/* alloc.c - kmem_cache_alloc, kmem_cache_zalloc and kmem_cache_alloc_node:
 * the fast path pops this CPU's main sheaf (a section) and checks the popped
 * object's free marker, or, for a cache without sheaves, pops the cpu slab's
 * freelist; empty, marked or locked slots go to the per-CPU layer's or the
 * engine's slow paths, debug caches to the engine's checked path. Takes no
 * lock of its own. docs/ARCHITECTURE.md, "Follow a call", gives the steps. */
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
 * Allocation
 */

/* __GFP_ZERO's clearing of an allocated object. Out of line but not cold:
 * kmem_cache_zalloc and kzalloc are common, and a cold function's memset is
 * compiled for size, a byte-wise 'rep stosb', where libc's memset is wide. */
static USL_OUT_OF_LINE void *zero_object(struct kmem_cache *s, void *obj)
{
	return memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
}

/* Everything but the common case: NULL cache, empty freelist. */
static USL_SLOW_PATH void *alloc_tail(struct kmem_cache *s, gfp_t gfp, void *obj)
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
		if (s->flags & USL_SLAB_DEBUG_FLAGS) {
			uintptr_t caller = (uintptr_t)__builtin_return_address(0);
			void *o = usl_debug_alloc(s, gfp | __GFP_NOWARN, 0, caller);
			if (usl_unlikely(!o)) {
				usl_reclaim_for_retry();
				o = usl_debug_alloc(s, gfp, 0, caller);
			}
			return o;
		}
		obj = usl_slub_alloc_slow(s, gfp | __GFP_NOWARN);
		if (usl_unlikely(!obj)) {    /* once more, with what uslab held free given back */
			usl_reclaim_for_retry();
			obj = usl_slub_alloc_slow(s, gfp);
		}
	}
	usl_marker_clear(obj, s->offset);
	if ((gfp & __GFP_ZERO) && obj)
		return zero_object(s, obj);
	return obj;
}

/* The slow paths of kmem_cache_alloc, each reached by a tail call so the fast
 * paths need no stack frame. */
static USL_OUT_OF_LINE void *sheaf_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	/* A destroyed cache's slots are empty: its allocations come here. */
	if (usl_unlikely(!usl_cache_live(s))) {
		usl_report_dead_cache("kmem_cache_alloc", s, "no object");
		return NULL;
	}
	void *obj = usl_sheaf_alloc(s, gfp | __GFP_NOWARN);
	if (usl_unlikely(!obj)) {        /* once more, with what uslab held free given back */
		usl_reclaim_for_retry();
		obj = usl_sheaf_alloc(s, gfp);
	}
	obj = usl_marker_clear(obj, s->offset);
	if ((gfp & __GFP_ZERO) && obj)
		return zero_object(s, obj);
	return obj;
}

static USL_OUT_OF_LINE void *cpu_slab_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	void *obj = usl_rseq_mode ? NULL : usl_slub_alloc_fast_locked(s);
	return alloc_tail(s, gfp, obj);
}

/* A popped object without its marker: reported, never handed out (it is
 * lost: someone may hold it), and the allocation tried again. */
USL_SLOW_PATH void *usl_pop_refused(struct kmem_cache *s, gfp_t gfp, void *obj, const char *fn)
{
	usl_report_pop_refused(s, obj, fn);
	return kmem_cache_alloc(s, gfp);
}

/* The fast paths of kmem_cache_alloc: the sheaf section (sheaves) or the cpu
 * slab's, then its slow path; counted (USLAB_STATS) in alloc_counted's copy
 * only, so that the copy in kmem_cache_alloc tests nothing for it. */
static USL_FAST_PATH void *alloc_fast(struct kmem_cache *s, gfp_t gfp, bool sheaves,
                                      bool counted, bool harden)
{
	void *obj;

	if (sheaves) {
		/* Sheaves: pop this CPU's main sheaf. */
		USL_RSEQ_SHEAF_POP(s->cpu_slab, obj, sheaf_slow);
		if (usl_unlikely(!usl_pop_ok(s, obj, harden)))
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
	usl_marker_clear(obj, s->offset);
	if (counted)
		usl_stat_inc(s, USL_ALLOC_FASTPATH, 1);
	if (usl_unlikely(gfp & __GFP_ZERO))
		return zero_object(s, obj);
	return obj;
slow:
	return cpu_slab_alloc_slow(s, gfp);
}

static USL_OUT_OF_LINE void *alloc_counted(struct kmem_cache *s, gfp_t gfp)
{
	return s->sheaf_capacity ? alloc_fast(s, gfp, true, true, usl_opt.harden) : alloc_fast(s, gfp, false, true, false);
}

/* The fast paths other than the usual one: sheaves with hardening off or in a
 * one-word cache (whose pop checks the marker all the same), the cpu slab. */
static USL_OUT_OF_LINE void *alloc_other(struct kmem_cache *s, gfp_t gfp)
{
	unsigned int kind = s->path & ~USL_PATH_NUMA;   /* a CPU's sheaves hold its node's objects */

	if (kind == USL_PATH_SHEAF)
		return alloc_fast(s, gfp, true, false, true);
	if (kind == USL_PATH_SHEAF_OTHER)
		return alloc_fast(s, gfp, true, false, usl_opt.harden);
	return alloc_fast(s, gfp, false, false, false);
}

/* The owned front end's slow path: a refill (usl_owned_alloc_slow), the
 * report of a failure, __GFP_ZERO. A destroyed cache is refused here (its
 * slots are sentinels, always marked). */
static USL_OUT_OF_LINE void *owned_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	if (usl_unlikely(!usl_cache_live(s))) {
		usl_report_dead_cache("kmem_cache_alloc", s, "no object");
		return NULL;
	}
	void *obj = usl_owned_alloc_slow(s->oslots);
	if (usl_unlikely(!obj)) {
		if (!(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc(%s): out of memory (object size %u, order %u)",
			           s->name, s->size, s->order);
		return NULL;
	}
	if (gfp & __GFP_ZERO)
		return zero_object(s, obj);
	return obj;
}

void *kmem_cache_alloc(struct kmem_cache *s, gfp_t gfp)
{
	if (usl_unlikely(!s))
		return alloc_tail(s, gfp, NULL);
	if (usl_likely(s->path == USL_PATH_OWNED)) {
		/* The owned front end: the lowest free bit of this CPU's cursor
		 * word (the object is never read). */
		void *obj;
		USL_RSEQ_OWNED_POP(s->oslots, "0", obj, owned_slow);
		if (usl_unlikely(gfp & __GFP_ZERO))
			return zero_object(s, obj);
		return obj;
owned_slow:
		return owned_alloc_slow(s, gfp);
	}
	if (usl_likely(s->path == USL_PATH_SHEAF))
		return alloc_fast(s, gfp, true, false, true);
	if (usl_unlikely(s->path == USL_PATH_COUNTED))
		return alloc_counted(s, gfp);
	return alloc_other(s, gfp);
}

/* kmem_cache_alloc_node for a node other than NUMA_NO_NODE: the CPU's own
 * node takes the usual paths (the CPU's sheaves hold only its node's
 * objects); another node's object comes from that node's slabs
 * (usl_engine_alloc_node); a node that does not exist is reported and the
 * local node serves. Debug caches and dead ones take kmem_cache_alloc's
 * paths (a debug cache keeps to node 0). */
static USL_OUT_OF_LINE void *alloc_node_other(struct kmem_cache *s, gfp_t gfp, int node)
{
	if (usl_unlikely(!usl_node_valid(node))) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc_node(%s): node %d does not exist (node ids 0-%u, %d online); "
		           "allocated on the local node", s->name, node, usl_nr_nodes - 1,
		           __builtin_popcountll(usl_nodes_online));
		return kmem_cache_alloc(s, gfp);
	}
	if ((s->flags & (USL_SLAB_DEBUG_FLAGS | USL_SLAB_INTERNAL)) || !usl_cache_live(s))
		return kmem_cache_alloc(s, gfp);
	void *obj;
	if ((unsigned int)node == usl_this_node()) {
		/* The CPU's sheaf; a thread moved to another node's CPU between
		 * the test and the pop got that node's object: back it goes. */
		obj = kmem_cache_alloc(s, gfp);
		if (!obj || usl_addr_node(obj) == (unsigned int)node)
			return obj;
		kmem_cache_free(s, obj);
	}
	obj = usl_engine_alloc_node(s, gfp, (unsigned int)node);
	if (!obj)
		return NULL;
	usl_marker_clear(obj, s->offset);
	if (gfp & __GFP_ZERO)
		return zero_object(s, obj);
	return obj;
}

void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t gfp, int node)
{
	if (usl_likely(node == NUMA_NO_NODE) || usl_unlikely(!s))
		return kmem_cache_alloc(s, gfp);
	return alloc_node_other(s, gfp, node);
}

void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t gfp)
{
	return kmem_cache_alloc(s, gfp | __GFP_ZERO);
}
