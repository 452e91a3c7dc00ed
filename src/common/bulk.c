/* bulk.c - kmem_cache_alloc_bulk, kmem_cache_free_bulk and kfree_bulk:
 * with sheaves, whole runs copied out of and into this CPU's sheaves after
 * every pointer is checked (range, cache, object start, duplicate, free
 * marker); without, the engine's bulk allocation and detached freelists.
 * Calls this small take the single-object paths. Takes no lock of its own. */
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
 * Bulk
 */

/* Bulk calls this small take the single-object paths (sheaves): their fixed
 * cost is lower than a bulk call's. In rseq mode, for a cache of the usual
 * kind the paths are inlined here (alloc_bulk_small up to SMALL_BULK_ALLOC
 * objects, free_bulk_small), and for a cache without sheaves up to
 * SMALL_BULK_CPU (alloc_bulk_small_cpu, free_bulk_small_cpu); others call
 * kmem_cache_alloc and kmem_cache_free. (Larger bulk frees of sheaves read
 * every marker, so a double free among them is reported at once.) */
#define SMALL_BULK 3
#define SMALL_BULK_ALLOC 4
#define SMALL_BULK_CPU 8
#define SMALL_BULK_OWNED 4       /* the owned front end: its single paths below this */

static USL_SLOW_PATH int alloc_bulk_failed(struct kmem_cache *s, gfp_t gfp, size_t got, size_t nr)
{
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; none kept",
		           s->name, got, nr);
	return 0;
}

static USL_OUT_OF_LINE int alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);

/* alloc_bulk_small's way out at p[i]: a popped object without its marker
 * (refused: reported and kept out of use), or a pop that cannot be done (an
 * empty sheaf, a marked slot, locked mode, a destroyed cache). The rest take
 * alloc_bulk; if that fails, what was popped goes back. */
static USL_OUT_OF_LINE int alloc_bulk_small_rest(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p,
                                                 size_t i, void *refused)
{
	if (refused)
		usl_report_pop_refused(s, refused, "kmem_cache_alloc_bulk");
	if (alloc_bulk(s, gfp, nr - i, p + i))
		return (int)nr;
	for (size_t j = 0; j < i; j++)
		kmem_cache_free(s, p[j]);
	return 0;
}

/* A small bulk allocation from a cache of the usual kind (sheaves, hardening,
 * a two-word cache): a pop and a marker check an object, as kmem_cache_alloc's
 * fast path, without its call and checks per object. Calls nothing but its
 * way out (a tail call), so it needs no stack frame. */
static USL_FAST_PATH int alloc_bulk_small(struct kmem_cache *s, gfp_t gfp, size_t nr,
                                          void **p)
{
	size_t i;
	for (i = 0; i < nr; i++) {
		void *obj;
		USL_RSEQ_SHEAF_POP(s->cpu_slab, obj, rest);
		if (usl_unlikely(!usl_pop_ok(s, obj, true)))
			return alloc_bulk_small_rest(s, gfp, nr, p, i, obj);
		p[i] = obj;
	}
	return (int)nr;
rest:
	/* (Nothing the section outputs is used here: on this path it is unset.) */
	return alloc_bulk_small_rest(s, gfp, nr, p, i, NULL);
}

/* The same for a cache without sheaves (the cpu slab is its fast path; not a
 * debug cache, whose checked path records its caller's address): pops of
 * this CPU's freelist, each object's free pointer cleared, up to
 * SMALL_BULK_CPU objects; the detached freelists' fixed cost is paid from
 * there on. */
static USL_FAST_PATH int alloc_bulk_small_cpu(struct kmem_cache *s, gfp_t gfp, size_t nr,
                                              void **p)
{
	size_t i;
	for (i = 0; i < nr; i++) {
		void *obj;
		USL_RSEQ_ALLOC(s, obj);
		p[i] = usl_marker_clear(obj, s->offset);
	}
	return (int)nr;
slow:
	/* (Nothing the section outputs is used here: on this path it is unset.) */
	return alloc_bulk_small_rest(s, gfp, nr, p, i, NULL);
}

/* A few objects of an owned cache: the pop section inlined per object;
 * an empty cursor word takes the slow path for that one. */
static USL_FAST_PATH int alloc_bulk_small_owned(struct kmem_cache *s, gfp_t gfp, size_t nr,
                                                void **p)
{
	/* One section takes what the cursor word has of them. */
	for (size_t i = usl_rseq_owned_pop_bulk(s->oslots, nr, p); i < nr; i++)
		if (!(p[i] = usl_owned_alloc_slow(s->oslots))) {
			usl_owned_free_bulk(s, i, p, "kmem_cache_alloc_bulk");
			return alloc_bulk_failed(s, gfp, i, nr);
		}
	return (int)nr;
}

/* A few objects of an owned cache: those of the first one's local word in
 * one section (a mask), the rest by free's owned path. */
static USL_FAST_PATH void free_bulk_small_owned(struct kmem_cache *s, size_t nr, void **p)
{
	const uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)p[0] - usl_base;
	uint64_t e = off < top ? __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE) : 0;
	struct usl_oslab *h = (struct usl_oslab *)(uintptr_t)e;
	size_t done = 0;
	if (usl_likely(e && h->slots == s->oslots)) {
		uint32_t idx = usl_obj_index((uint32_t)off - h->start_off, h->div_inv, h->div_shift);
		uint64_t mask = idx < h->objects ? 1UL << (idx & 63) : 0;
		size_t j = 1;
		for (; mask && j < nr; j++) {
			uintptr_t o2 = (uintptr_t)p[j] - usl_base;
			uint32_t i2 = usl_obj_index((uint32_t)o2 - h->start_off, h->div_inv, h->div_shift);
			if (o2 >= top || __atomic_load_n(&usl_ochunk[o2 >> USL_OCHUNK_SHIFT], __ATOMIC_RELAXED) != e ||
			    i2 >= h->objects || i2 >> 6 != idx >> 6 || (mask & (1UL << (i2 & 63))))
				break;
			mask |= 1UL << (i2 & 63);
		}
		uint64_t was;
		if (mask && usl_rseq_owned_free_mask(h, &h->local[idx >> 6], mask, &was) == USL_RS_OK) {
			if (!was && !__atomic_load_n(&h->listed, __ATOMIC_RELAXED))
				usl_owned_list(h);
			done = j;
		}
	}
	for (size_t i = done; i < nr; i++)
		if (p[i])
			kmem_cache_free(s, p[i]);       /* checked and reported there */
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
	if (s->path == USL_PATH_OWNED && !(gfp & __GFP_ZERO)) {
		if (nr <= SMALL_BULK_OWNED)      /* the single pop, inlined, is cheaper */
			return alloc_bulk_small_owned(s, gfp, nr, p);
		if (usl_owned_alloc_bulk(s, nr, p))
			return (int)nr;
		return alloc_bulk_failed(s, gfp, 0, nr);
	}
	/* (In locked mode every section fails at once: the general paths.) */
	if (usl_rseq_mode && !(gfp & __GFP_ZERO)) {
		if (nr <= SMALL_BULK_ALLOC && s->path == USL_PATH_SHEAF)
			return alloc_bulk_small(s, gfp, nr, p);
		if (nr <= SMALL_BULK_CPU && s->path == USL_PATH_CPU_SLAB && !(s->flags & USL_SLAB_DEBUG_FLAGS))
			return alloc_bulk_small_cpu(s, gfp, nr, p);
	}
	return alloc_bulk(s, gfp, nr, p);
}

/* kmem_cache_alloc_bulk on a node: NUMA_NO_NODE is kmem_cache_alloc_bulk; a
 * node that does not exist is reported once and the local node serves; else
 * each object by kmem_cache_alloc_node (the CPU's node through its sheaves,
 * another straight from that node's slabs), all or nothing. */
int uslab_alloc_bulk_node(struct kmem_cache *s, gfp_t gfp, int node, size_t nr, void **p)
{
	if (node == NUMA_NO_NODE || !s || (!p && nr) || nr > (size_t)INT32_MAX || !nr)
		return kmem_cache_alloc_bulk(s, gfp, nr, p);
	if (!usl_node_valid(node)) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_alloc_bulk_node(%s): node %d does not exist (node ids 0-%u); "
		           "allocated on the local node", s->name, node, usl_nr_nodes - 1);
		return kmem_cache_alloc_bulk(s, gfp, nr, p);
	}
	for (size_t i = 0; i < nr; i++)
		if (!(p[i] = kmem_cache_alloc_node(s, gfp | __GFP_NOWARN, node))) {
			kmem_cache_free_bulk(s, i, p);
			if (!(gfp & __GFP_NOWARN))
				usl_report(USLAB_ERR_NOMEM, "uslab_alloc_bulk_node(%s): out of memory on node %d after %zu of %zu "
				           "objects; none allocated", s->name, node, i, nr);
			return 0;
		}
	return (int)nr;
}

/* The rest of kmem_cache_alloc_bulk, its arguments checked (nr > 0). */
static int alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
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
	if (s->oslots) {                     /* __GFP_ZERO, or a dead cache: checked here */
		if (!usl_owned_alloc_bulk(s, nr, p))
			return alloc_bulk_failed(s, gfp, 0, nr);
		if (gfp & __GFP_ZERO)
			for (size_t i = 0; i < nr; i++)
				memset(p[i], 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
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
				usl_marker_clear(p[i], s->offset);
	}
	if (gfp & __GFP_ZERO)
		for (size_t i = 0; i < nr; i++)
			memset(p[i], 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return (int)nr;
}

/* More than one node: the objects of p[0..nr) of another node's slabs, checked
 * and marked, go back to their slabs (the engine's bulk free), not into this
 * CPU's sheaves; the rest are compacted to the front. How many are left. */
static size_t remote_out(struct kmem_cache *s, size_t nr, void **p)
{
	unsigned int here = usl_this_node();
	size_t k = 0, r = 0;
	void *remote[64];
	for (size_t i = 0; i < nr; i++) {
		if (usl_addr_node(p[i]) == here) {
			p[k++] = p[i];
			continue;
		}
		remote[r++] = p[i];
		if (r == 64) {
			usl_engine_free_bulk(s, r, remote);
			r = 0;
		}
	}
	if (r)
		usl_engine_free_bulk(s, r, remote);
	return k;
}

/* Sheaves: check every pointer (reported and left out when bad, as is an entry
 * equal to the one before it), compact, and copy them into the sheaves. */
static void sheaf_free_bulk_checked(struct kmem_cache *s, size_t nr, void **p)
{
	/* usl_pm_is_object with everything it reads hoisted out of the loop (the range
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
		if (usl_opt.harden && usl_unlikely(!usl_marker_take(x, s->offset, s->fp_secret, blk)))
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
		if (usl_unlikely(!usl_pm_is_object(s, x))) {
			if (!usl_pm_is_slot(s, x)) {
				usl_report_bad_free("kmem_cache_free_bulk", s, x, usl_virt_to_slab(x));
				continue;
			}
			if (!usl_uncarved_check(s, x, "kmem_cache_free_bulk"))
				continue;
		}
		if (usl_unlikely((uintptr_t)x == prev)) {
			usl_refuse_twice_in_array("kmem_cache_free_bulk", s->name, x);
			continue;
		}
		if (usl_opt.harden && usl_unlikely(!usl_marker_take((uintptr_t)x, s->offset, s->fp_secret, blk))) {
			usl_marker_double_free(s, x, "kmem_cache_free_bulk");
			continue;
		}
		p[k++] = x;
		prev = (uintptr_t)x;
	}
	if (usl_unlikely(usl_nr_nodes > 1))
		k = remote_out(s, k, p);
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
		if (p[i] && usl_pm_is_object(s, p[i]) && usl_unlikely(!usl_marker_take((uintptr_t)p[i], s->offset, s->fp_secret, blk))) {
			usl_marker_double_free(s, p[i], fn);
			p[i] = NULL;
		}
}

static USL_OUT_OF_LINE void free_bulk(struct kmem_cache *s, size_t nr, void **p);

/* free_bulk_small's way out at p[i], whose marker is written: its push found
 * it on top already (a double free) or could not be done (a full main, a
 * marked slot, locked mode); then the rest as the small path would. */
static USL_OUT_OF_LINE void free_bulk_small_rest(struct kmem_cache *s, size_t nr, void **p, size_t i,
                                                 int r)
{
	if (r == USL_RS_OTHER)
		usl_report_double_free(s, p[i], "kmem_cache_free_bulk");
	else
		usl_sheaf_free(s, p[i]);
	for (i++; i < nr; i++)
		kmem_cache_free(s, p[i]);
}

/* A small bulk free to a cache of the usual kind: each pointer checked as
 * kmem_cache_free checks it, its marker written blindly and the object pushed,
 * without a call and checks per object. From the first pointer that is not
 * simply an object of s (NULL, another cache's, a destroyed cache's) the rest
 * take free_bulk, which reports. Calls nothing but its ways out (tail calls). */
static USL_FAST_PATH void free_bulk_small(struct kmem_cache *s, size_t nr, void **p)
{
	for (size_t i = 0; i < nr; i++) {
		void *x = p[i];
		if (usl_unlikely(!usl_pm_is_object(s, x))) {
			free_bulk(s, nr - i, p + i);
			return;
		}
		int r = usl_push(s, x, true);
		if (usl_unlikely(r != USL_RS_OK)) {
			free_bulk_small_rest(s, nr, p, i, r);
			return;
		}
	}
}

/* free_bulk_small_cpu's way out at p[i]: its marker said it is free already
 * (r = -1: reported, not freed), or its push onto the cpu slab could not be
 * done (r, the section's code: the engine's slow path frees it); then the
 * rest one by one. */
static USL_OUT_OF_LINE void free_bulk_small_cpu_rest(struct kmem_cache *s, size_t nr, void **p, size_t i,
                                                     int r)
{
	if (r < 0)
		usl_marker_double_free(s, p[i], "kmem_cache_free_bulk");
	else
		usl_slub_free_slow(s, usl_virt_to_slab(p[i]), p[i], r, "kmem_cache_free_bulk");
	for (i++; i < nr; i++)
		kmem_cache_free(s, p[i]);
}

/* The same for a cache without sheaves: each pointer checked, its marker
 * read and written (a one-word cache: a double free is reported at once),
 * and the object pushed onto this CPU's freelist when its slab is the cpu
 * slab. */
static USL_FAST_PATH void free_bulk_small_cpu(struct kmem_cache *s, size_t nr, void **p)
{
	uint32_t blk = (uint32_t)__builtin_ctzl(s->fp_mask);
	for (size_t i = 0; i < nr; i++) {
		void *x = p[i];
		if (usl_unlikely(!usl_pm_is_object(s, x))) {
			free_bulk(s, nr - i, p + i);
			return;
		}
		if (usl_opt.harden && usl_unlikely(!usl_marker_take((uintptr_t)x, s->offset, s->fp_secret, blk))) {
			free_bulk_small_cpu_rest(s, nr, p, i, -1);
			return;
		}
		int r = usl_rseq_free(s, usl_virt_to_slab(x), x);
		if (usl_unlikely(r != USL_RS_OK)) {
			free_bulk_small_cpu_rest(s, nr, p, i, r);
			return;
		}
	}
}

void kmem_cache_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	if (s && p && s->path == USL_PATH_OWNED) {
		if (nr <= SMALL_BULK_OWNED) {
			if (nr)
				free_bulk_small_owned(s, nr, p);
			return;
		}
		usl_owned_free_bulk(s, nr, p, "kmem_cache_free_bulk");
		return;
	}
	if (usl_rseq_mode && s && p && nr <= SMALL_BULK_CPU) {
		if (nr <= SMALL_BULK && s->path == USL_PATH_SHEAF) {
			free_bulk_small(s, nr, p);
			return;
		}
		if (s->path == USL_PATH_CPU_SLAB && !(s->flags & USL_SLAB_DEBUG_FLAGS)) {
			free_bulk_small_cpu(s, nr, p);
			return;
		}
	}
	free_bulk(s, nr, p);
}

static void free_bulk(struct kmem_cache *s, size_t nr, void **p)
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
			if (s && (usl_is_slab(s) || s->oslots)) {   /* SLAB, owned: through the per-CPU paths, as kfree */
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
				if (p[i] && usl_flagged(s) && usl_pm_is_object(s, p[i]) && !usl_flag_enter_slab(s, p[i])) {
					usl_report_flag_enter(s, p[i], "kfree_bulk");
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
