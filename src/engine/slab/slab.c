/* slab.c - the SLAB engine's slabs and node lists: a slab's free-index array
 * (get and put an object), growing a slab (placement of the array, colour,
 * constructor), the kernel's cache_alloc_refill, cache_flusharray and
 * free_block, the shared array, alien arrays, the node part of cache_reap,
 * shrink, counts and the fork locks.
 *
 * Slab lists (docs/ARCHITECTURE.md, "SLAB: the second engine"), per node, under its list_lock:
 *   free     active == 0            slabs_free   (free_slabs counts them)
 *   partial  0 < active < objects   partial
 *   full     active == objects      slabs_full
 * A slab's list is kept in slab->node_partial (USL_SLAB_LIST_*); a new slab is
 * on none until its grower adds it. free_objects counts the free objects on
 * the three lists; free_block frees free slabs while it exceeds free_limit.
 *
 * The struct slab fields SLAB uses: freelist (the index array), counters
 * (active as inuse, objects, and as "uncarved" the objects never handed out:
 * the page map counts the others, so a free of one never handed out is
 * refused), slab_list, unused (s_mem, the first object: the block's start plus
 * the colour), nid (the node).
 *
 * Locks: a node's list_lock (the slab lists, free_objects, the shared array,
 * colour_next with USLAB_SLAB_COLOUR=2); an alien array's lock before
 * the remote node's list_lock; the page provider's inside. No lock is held
 * across a constructor or a report. */
#define _GNU_SOURCE
#include <string.h>

#include "../../arch/arch.h"
#include "../../pages/pages.h"
#include "../../platform/platform.h"
#include "../own.h"
#include "slab.h"

#define USL_SLAB_LIST_NONE 0
#define USL_SLAB_LIST_FREE 1
#define USL_SLAB_LIST_PARTIAL 2
#define USL_SLAB_LIST_FULL 3

/* Counts written under a lock and peeked at without it (refill's unlocked
 * test, the reap's): whole stores. */
static inline void set_count_ul(unsigned long *at, unsigned long v) { __atomic_store_n(at, v, __ATOMIC_RELAXED); }
static inline void set_count_u32(uint32_t *at, uint32_t v) { __atomic_store_n(at, v, __ATOMIC_RELAXED); }

/* ===========================================================================
 * The free-index array: positions [active, objects) hold the free objects'
 * indices; a get takes position active, a put writes position active - 1.
 */

static inline char *s_mem(const struct slab *slab) { return slab->unused; }
static inline unsigned int slab_active(const struct slab *slab) { return usl_counters_inuse(slab->counters); }
static inline unsigned int slab_num(const struct slab *slab) { return usl_counters_objects(slab->counters); }

static inline unsigned int idx_get(const struct kmem_cache *s, const struct slab *slab, unsigned int pos)
{
	if (s->mgmt & USL_MGMT_IDX2)
		return ((const uint16_t *)slab->freelist)[pos];
	return ((const uint8_t *)slab->freelist)[pos];
}

static inline void idx_set(const struct kmem_cache *s, struct slab *slab, unsigned int pos, unsigned int idx)
{
	if (s->mgmt & USL_MGMT_IDX2)
		((uint16_t *)slab->freelist)[pos] = (uint16_t)idx;
	else
		((uint8_t *)slab->freelist)[pos] = (uint8_t)idx;
}

static inline unsigned int obj_index(const struct kmem_cache *s, const struct slab *slab, const void *obj)
{
	return usl_obj_index((uint32_t)((const char *)obj - s_mem(slab)), s->div_inv, s->div_shift);
}

/* The page map counts the objects handed out at least once: indices below
 * the high-water mark (positions past it still hold their first values, the
 * identity, so objects are first handed out in order). */
static void set_pm_count(const struct slab *slab, unsigned int handed)
{
	struct usl_pagemap_entry *e = &usl_pagemap[usl_slab_pfn(slab)];
	for (size_t i = 0; i < ((size_t)1 << slab->order); i++)
		usl_pm_set_count(&e[i], handed);
}

static USL_SLOW_PATH void written_after_free(struct kmem_cache *s, const void *obj)
{
	usl_report(USLAB_ERR_CORRUPT, "%s: free object %p was written after it was freed (its free marker is gone); "
	           "nothing it holds is used", s->name, obj);
}

/* An object of the shared array without its marker: a copy a second free
 * left (another copy took the marker), or written after its free. Left out
 * (under list_lock: the report is queued until the lock is dropped). */
static USL_SLOW_PATH void shared_refused(struct kmem_cache *s, const void *obj)
{
	usl_refuse_pop("cache_alloc_refill", s->name, obj, "freed twice, or written after its free");
}

/* A two-word cache's object made free on its slab at its creation: its M
 * (as every object free on a SLAB slab carries) and its F. */
static inline void tw_on_slab(const struct kmem_cache *s, void *obj)
{
	usl_marker_set(s, obj);
	usl_flag_carved(s, obj);
}

/* Take up to want objects from slab into out[] (the kernel's alloc_block);
 * under list_lock, or privately for a new slab. How many; *taken adds how
 * many left the slab (a two-word cache's refused ones too). */
static unsigned int alloc_block(struct kmem_cache *s, struct slab *slab, void **out, unsigned int want,
                                unsigned int *taken)
{
	unsigned long c = slab->counters;
	unsigned int active = usl_counters_inuse(c), num = usl_counters_objects(c);
	unsigned int handed = num - usl_counters_uncarved(c), k = 0;
	char *base = s_mem(slab);

	bool tw = usl_flagged(s);
	while (active < num && k < want) {
		unsigned int idx = idx_get(s, slab, active++);
		char *obj = base + (size_t)idx * s->size;
		if (tw) {
			/* A two-word cache's object leaves with its F, or not at
			 * all (its marker is checked as below); a fresh one's flag
			 * is cleared (reused memory may hold an old F). */
			if (idx < handed) {
				if (usl_unlikely(!usl_flag_leave_slab(s, obj))) {
					usl_flag_refused(s, obj);   /* (queued until list_lock is dropped) */
					continue;
				}
				if (usl_unlikely(!usl_marker_pop(s, obj)))
					written_after_free(s, obj);
			} else {
				usl_flag_fresh(s, obj);
			}
		} else if (usl_opt.harden && idx < handed && usl_unlikely(!usl_marker_pop(s, obj))) {
			/* An object freed before carries its free marker: one
			 * without it was written after its free. Nothing here
			 * follows what it holds, so it is only reported. */
			written_after_free(s, obj);
		}
		out[k++] = obj;
	}
	*taken += active - usl_counters_inuse(c);
	if ((s->mgmt & USL_MGMT_PLACE) == USL_MGMT_OBJ && active == num)
		slab->freelist = NULL;               /* the array's object was the last one */
	if (active > handed) {
		set_pm_count(slab, active);          /* before any of them leaves */
		handed = active;
	}
	__atomic_store_n(&slab->counters, usl_counters_set_uncarved(usl_counters_make(active, num, false), num - handed),
	                 __ATOMIC_RELEASE);
	return k;
}

static void put_obj(struct kmem_cache *s, struct slab *slab, void *obj)
{
	unsigned long c = slab->counters;
	unsigned int active = usl_counters_inuse(c) - 1;
	if (!slab->freelist)                         /* OBJFREELIST: the first free object holds it */
		slab->freelist = (char *)obj + s->mgmt_off;
	idx_set(s, slab, active, obj_index(s, slab, obj));
	__atomic_store_n(&slab->counters, usl_counters_remake(c, active, false), __ATOMIC_RELEASE);
}

static inline void list_to(struct kmem_cache_node *n, struct slab *slab, unsigned int which)
{
	struct usl_list *h = which == USL_SLAB_LIST_FREE ? &n->slabs_free
	                   : which == USL_SLAB_LIST_FULL ? &n->full : &n->partial;
	if (which == USL_SLAB_LIST_PARTIAL)
		usl_list_add_tail(&slab->slab_list, h);
	else
		usl_list_add_head(&slab->slab_list, h);
	slab->node_partial = (uint8_t)which;
}

/* After objects were taken: a slab goes to full or partial (the kernel's
 * fixup_slab_list). Under list_lock. */
static void fixup_slab_list(struct kmem_cache_node *n, struct slab *slab)
{
	usl_assert_held(&n->list_lock);
	usl_list_del(&slab->slab_list);
	if (slab_active(slab) == slab_num(slab)) {
		usl_list_add_head(&slab->slab_list, &n->full);
		slab->node_partial = USL_SLAB_LIST_FULL;
	} else {
		usl_list_add_head(&slab->slab_list, &n->partial);
		slab->node_partial = USL_SLAB_LIST_PARTIAL;
	}
}

/* ===========================================================================
 * Nodes
 */

static inline struct kmem_cache_node *slab_node(struct kmem_cache *s, const struct slab *slab)
{
	return s->node[slab->nid];
}

/* ===========================================================================
 * Growing and destroying slabs
 */

/* The next slab's colour offset: the node's colour_next, advanced without
 * the node lock (two growers may take the same colour; the value is checked
 * against the range after it is read, so it is never outside), or under it
 * with USLAB_SLAB_COLOUR=2; 0 with USLAB_SLAB_COLOUR=0. */
static unsigned int next_colour(struct kmem_cache *s, struct kmem_cache_node *n)
{
	unsigned int colour = s->colour, off;
	if (usl_unlikely(usl_opt.slab_colour == 2)) {
		/* As the kernel did before: the lock taken whatever the colours. */
		usl_lock(&n->list_lock);
		off = n->colour_next + 1;
		if (off >= colour)
			off = 0;
		n->colour_next = off;
		usl_unlock(&n->list_lock);
		return off * s->colour_off;
	}
	if (colour <= 1 || !usl_opt.slab_colour)
		return 0;
	off = __atomic_load_n(&n->colour_next, __ATOMIC_RELAXED) + 1;
	if (off >= colour)
		off = 0;
	__atomic_store_n(&n->colour_next, off, __ATOMIC_RELAXED);
	off = __atomic_load_n(&n->colour_next, __ATOMIC_RELAXED);
	if (off >= colour)
		off = 0;
	return off * s->colour_off;
}

static void set_owner(struct kmem_cache *s, struct slab *slab, const char *first)
{
	struct usl_pagemap_entry *e = &usl_pagemap[usl_slab_pfn(slab)];
	uint32_t start = (uint32_t)((uintptr_t)first - usl_base);
	for (size_t i = 0; i < ((size_t)1 << slab->order); i++)
		usl_pm_write(&e[i], start, 0, s ? s->id : 0);
}

/* An unpredictable layout (s->random): the free-index array in a random
 * order (the kernel's CONFIG_SLAB_FREELIST_RANDOM, shuffle_freelist), so
 * consecutive allocations are rarely neighbours; an OBJFREELIST slab keeps
 * the object that holds the array last. */
static void shuffle(struct kmem_cache *s, struct slab *slab, unsigned int num)
{
	for (unsigned int i = num - 1; i > 0; i--) {
		unsigned int j = usl_rand_below((uint32_t)usl_rand64(), i + 1);
		unsigned int a = idx_get(s, slab, i), b = idx_get(s, slab, j);
		idx_set(s, slab, i, b);
		idx_set(s, slab, j, a);
	}
	if ((s->mgmt & USL_MGMT_PLACE) == USL_MGMT_OBJ)
		for (unsigned int i = 0; i + 1 < num; i++)
			if (idx_get(s, slab, i) == num - 1) {
				idx_set(s, slab, i, idx_get(s, slab, num - 1));
				idx_set(s, slab, num - 1, num - 1);
				break;
			}
}

/* A new slab for node nid (the kernel's cache_grow_begin): on no list, no
 * object handed out; NULL when out of memory. */
static struct slab *cache_grow(struct kmem_cache *s, unsigned int nid, gfp_t gfp)
{
	struct kmem_cache_node *n = s->node[nid];
	unsigned int num = s->objects, order = s->order;
	void *addr = usl_pages_alloc(order, USL_PAGE_SLAB, nid);
	if (!addr)
		return NULL;
	struct slab *slab = usl_virt_to_slab(addr);
	size_t bytes = usl_order_bytes(order);
	char *first = (char *)addr + next_colour(s, n);
	void *fl;
	switch (s->mgmt & USL_MGMT_PLACE) {
	case USL_MGMT_OFF:
		fl = usl_own_alloc(s->freelist_cache, gfp | __GFP_NOWARN);
		if (!fl) {
			usl_pages_free(addr);
			return NULL;
		}
		break;
	case USL_MGMT_OBJ:
		fl = first + (size_t)(num - 1) * s->size + s->mgmt_off;
		break;
	default:
		fl = (char *)addr + bytes - s->freelist_size;
		break;
	}
	slab->freelist = fl;
	slab->unused = first;
	slab->nid = (uint8_t)nid;
	slab->node_partial = USL_SLAB_LIST_NONE;
	for (unsigned int i = 0; i < num; i++)
		idx_set(s, slab, i, i);
	if (s->ctor)
		for (unsigned int i = 0; i < num; i++)
			s->ctor(first + (size_t)i * s->size);
	unsigned int uncarved = num;
	if (s->random && num > 1) {
		shuffle(s, slab, num);
		/* Not handed out in order now: every object carries its free
		 * marker from the start (a free of one never handed out is then
		 * a double free), and the page map counts them all. */
		if (usl_flagged(s))
			for (unsigned int i = 0; i < num; i++)
				tw_on_slab(s, first + (size_t)i * s->size);
		else if (usl_opt.harden)
			for (unsigned int i = 0; i < num; i++)
				usl_marker_set(s, first + (size_t)i * s->size);
		uncarved = 0;
	}
	slab->counters = usl_counters_set_uncarved(usl_counters_make(0, num, false), uncarved);
	__atomic_store_n(&slab->slab_cache, s, __ATOMIC_RELEASE);
	set_owner(s, slab, first);
	if (!uncarved)
		set_pm_count(slab, num);
	return slab;
}

/* The grower's slab onto its node's lists (the kernel's cache_grow_end). */
static void cache_grow_end(struct kmem_cache *s, struct slab *slab)
{
	struct kmem_cache_node *n = slab_node(s, slab);
	usl_lock(&n->list_lock);
	unsigned int active = slab_active(slab);
	if (!active) {
		list_to(n, slab, USL_SLAB_LIST_FREE);
		n->free_slabs++;
	} else {
		list_to(n, slab, active == slab_num(slab) ? USL_SLAB_LIST_FULL : USL_SLAB_LIST_PARTIAL);
	}
	set_count_ul(&n->free_objects, n->free_objects + (slab_num(slab) - active));
	/* In the node's counts from here, with its free objects (as the
	 * kernel's total_slabs++ in cache_grow_end). */
	__atomic_fetch_add(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->total_objects, slab_num(slab), __ATOMIC_RELAXED);
	usl_unlock(&n->list_lock);
}

/* A free slab off slabs_free onto list, to be destroyed once the lock is
 * dropped: it leaves the node's counts now, under the lock (as the kernel's
 * total_slabs--), so a count taken meanwhile does not see its objects as in
 * use. Under n's list_lock. */
static void slab_to_destroy(struct kmem_cache_node *n, struct slab *slab, struct usl_list *list)
{
	usl_assert_held(&n->list_lock);
	set_count_ul(&n->free_objects, n->free_objects - slab_num(slab));
	n->free_slabs--;
	usl_list_del(&slab->slab_list);
	slab->node_partial = USL_SLAB_LIST_NONE;
	usl_list_add_head(&slab->slab_list, list);
	__atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&n->total_objects, slab_num(slab), __ATOMIC_RELAXED);
}

static void slab_destroy(struct kmem_cache *s, struct slab *slab)
{
	if ((s->mgmt & USL_MGMT_PLACE) == USL_MGMT_OFF)
		usl_own_free(s->freelist_cache, slab->freelist);
	slab->freelist = NULL;
	slab->unused = NULL;
	__atomic_store_n(&slab->slab_cache, NULL, __ATOMIC_RELEASE);
	void *addr = usl_slab_address(slab);
	set_owner(NULL, slab, addr);
	if (s->flags & SLAB_TYPESAFE_BY_RCU)   /* readers may still read it: after a grace period */
		usl_free_slab_after_gp(slab);
	else
		usl_pages_free(addr);
}

static void slabs_destroy(struct kmem_cache *s, struct usl_list *list)
{
	while (!usl_list_empty(list)) {
		struct slab *slab = usl_container_of(list->next, struct slab, slab_list);
		usl_list_del(&slab->slab_list);
		slab_destroy(s, slab);
	}
}

/* ===========================================================================
 * free_block, refill, flush
 */

/* The kernel's free_block: objects of node n's slabs back on them, then free
 * slabs beyond free_limit onto list (destroyed by the caller, unlocked).
 * Under n's list_lock. */
static void free_block(struct kmem_cache *s, struct kmem_cache_node *n, void **objs, unsigned int nr,
                       struct usl_list *list)
{
	usl_assert_held(&n->list_lock);
	bool tw = usl_flagged(s);
	unsigned int freed = nr;
	for (unsigned int i = 0; i < nr; i++) {
		struct slab *slab = usl_virt_to_slab(objs[i]);
		if (tw) {                            /* with its M, and not free on the slab already */
			if (usl_unlikely(!usl_flag_enter_slab(s, objs[i]))) {
				usl_report_flag_enter(s, objs[i], "free_block");
				freed--;
				continue;
			}
		} else if (usl_opt.harden) {         /* free objects on slabs carry it too */
			usl_marker_set(s, objs[i]);
		}
		usl_list_del(&slab->slab_list);
		put_obj(s, slab, objs[i]);
		if (!slab_active(slab)) {
			list_to(n, slab, USL_SLAB_LIST_FREE);
			n->free_slabs++;
		} else {
			list_to(n, slab, USL_SLAB_LIST_PARTIAL);
		}
	}
	set_count_ul(&n->free_objects, n->free_objects + (freed));
	while (n->free_objects > __atomic_load_n(&n->free_limit, __ATOMIC_RELAXED) && !usl_list_empty(&n->slabs_free))
		slab_to_destroy(n, usl_container_of(n->slabs_free.prev, struct slab, slab_list), list);
}

unsigned int usl_slab_refill(struct kmem_cache *s, void **out, unsigned int batch, gfp_t gfp)
{
	return usl_slab_refill_node(s, usl_this_node(), out, batch, gfp);
}

unsigned int usl_slab_refill_node(struct kmem_cache *s, unsigned int nid, void **out, unsigned int batch, gfp_t gfp)
{
	unsigned int got = 0, taken = 0;
	struct kmem_cache_node *n = s->node[nid];

	if (!batch)
		batch = 1;
	/* An unlocked peek, as the kernel's: a shared array that tuning has
	 * just replaced and freed reads harmlessly (metadata blocks stay
	 * mapped), and everything is read again under the lock. */
	struct slab_sheaf *shared = __atomic_load_n(&n->shared, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&n->free_objects, __ATOMIC_RELAXED) ||
	    (shared && __atomic_load_n(&shared->size, __ATOMIC_RELAXED))) {
		usl_lock(&n->list_lock);
		shared = n->shared;
		if (shared && shared->size) {        /* the kernel's transfer_objects */
			got = shared->size < batch ? shared->size : batch;
			set_count_u32(&shared->size, shared->size - (got));
			memcpy(out, &shared->objects[shared->size], got * sizeof(void *));
			shared->ac.touched = 1;
			/* They leave an array as a pop takes them: with their marker
			 * (a copy a second free left, whose marker another copy took,
			 * is reported and left out). Cleared: the caller hands them
			 * out or marks them again. */
			if (usl_opt.harden)
				got = (unsigned int)usl_markers_pop(s, out, got, shared_refused);
		} else {
			while (got < batch) {
				struct slab *slab;
				if (!usl_list_empty(&n->partial)) {
					slab = usl_container_of(n->partial.next, struct slab, slab_list);
				} else if (!usl_list_empty(&n->slabs_free)) {
					slab = usl_container_of(n->slabs_free.next, struct slab, slab_list);
					n->free_touched = 1;
					n->free_slabs--;
				} else {
					break;
				}
				got += alloc_block(s, slab, out + got, batch - got, &taken);
				fixup_slab_list(n, slab);
			}
			set_count_ul(&n->free_objects, n->free_objects - (taken));
		}
		usl_unlock(&n->list_lock);
	}
	if (!got) {
		struct slab *slab = cache_grow(s, nid, gfp);
		if (!slab)
			return 0;
		got = alloc_block(s, slab, out, batch, &taken);
		cache_grow_end(s, slab);
	}
	return got;
}

/* Objects of other nodes' slabs out of objs[0..n) into their alien arrays
 * (the kernel's __cache_free_alien, here when they leave a per-CPU array);
 * the rest compacted to the front. How many are left. */
static unsigned int route_alien(struct kmem_cache *s, unsigned int nid, void **objs, unsigned int nr)
{
	struct kmem_cache_node *n = s->node[nid];
	unsigned int k = 0;
	for (unsigned int i = 0; i < nr; i++) {
		struct slab *slab = usl_virt_to_slab(objs[i]);
		unsigned int other = slab->nid;
		if (other == nid) {
			objs[k++] = objs[i];
			continue;
		}
		struct usl_alien *al = &n->alien[other];
		struct usl_list list;
		usl_list_init(&list);
		usl_spin_lock(&al->lock);
		struct slab_sheaf *ac = al->ac;
		if (!ac) {                           /* none (no memory for it): straight to the node */
			usl_spin_unlock(&al->lock);
			struct kmem_cache_node *rn = s->node[other];
			usl_lock(&rn->list_lock);
			free_block(s, rn, &objs[i], 1, &list);
			usl_unlock(&rn->list_lock);
			slabs_destroy(s, &list);
			continue;
		}
		if (ac->size == ac->capacity) {      /* the kernel's __drain_alien_cache */
			struct kmem_cache_node *rn = s->node[other];
			usl_lock(&rn->list_lock);
			struct slab_sheaf *sh = rn->shared;
			if (sh) {
				unsigned int room = sh->capacity - sh->size, t = ac->size < room ? ac->size : room;
				memcpy(&sh->objects[sh->size], &ac->objects[ac->size - t], t * sizeof(void *));
				set_count_u32(&sh->size, sh->size + (t));
				set_count_u32(&ac->size, ac->size - (t));
			}
			free_block(s, rn, ac->objects, ac->size, &list);
			set_count_u32(&ac->size, 0);
			usl_unlock(&rn->list_lock);
		}
		ac->objects[ac->size] = objs[i];
		set_count_u32(&ac->size, ac->size + 1);
		usl_spin_unlock(&al->lock);
		slabs_destroy(s, &list);
	}
	return k;
}

void usl_slab_free_remote(struct kmem_cache *s, void *x)
{
	route_alien(s, usl_this_node(), &x, 1);
}

unsigned int usl_slab_flush_array(struct kmem_cache *s, void **objs, unsigned int nr)
{
	unsigned int nid = usl_this_node();
	struct kmem_cache_node *n = s->node[nid];
	struct usl_list list;
	unsigned int taken = nr;

	usl_list_init(&list);
	if (usl_unlikely(usl_nr_nodes > 1)) {
		/* Route the alien ones first; the local ones go as usual, and the
		 * caller's array loses them all. */
		unsigned int k = route_alien(s, nid, objs, nr);
		if (k < nr) {
			usl_lock(&n->list_lock);
			free_block(s, n, objs, k, &list);
			usl_unlock(&n->list_lock);
			slabs_destroy(s, &list);
			return nr;
		}
	}
	usl_lock(&n->list_lock);
	struct slab_sheaf *sh = n->shared;
	if (sh && sh->size < sh->capacity) {
		unsigned int room = sh->capacity - sh->size;
		if (taken > room)
			taken = room;
		memcpy(&sh->objects[sh->size], objs, taken * sizeof(void *));
		set_count_u32(&sh->size, sh->size + (taken));
	} else {
		free_block(s, n, objs, nr, &list);
	}
	usl_unlock(&n->list_lock);
	slabs_destroy(s, &list);
	return taken;
}

/* nr objects to their slabs, whatever their nodes: free_block on each run of
 * one node's objects. */
void usl_slab_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	struct usl_list list;
	usl_list_init(&list);
	size_t i = 0;
	while (i < nr) {
		unsigned int nid = usl_virt_to_slab(p[i])->nid;
		size_t j = i + 1;
		while (j < nr && usl_virt_to_slab(p[j])->nid == nid && j - i < 1024)
			j++;
		struct kmem_cache_node *n = s->node[nid];
		usl_lock(&n->list_lock);
		free_block(s, n, p + i, (unsigned int)(j - i), &list);
		usl_unlock(&n->list_lock);
		i = j;
	}
	slabs_destroy(s, &list);
}

/* Objects handed out by the engine itself (not through a per-CPU array):
 * the word a free marker sits in cleared (docs/ARCHITECTURE.md, "Hardening"). */
static inline void clear_markers(struct kmem_cache *s, size_t nr, void **p)
{
	if (usl_opt.harden)
		for (size_t i = 0; i < nr; i++)
			*(uintptr_t *)((char *)p[i] + s->offset) = 0;
}

int usl_slab_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	size_t i = 0;
	while (i < nr) {
		size_t want = nr - i > 65535 ? 65535 : nr - i;
		unsigned int k = usl_slab_refill(s, p + i, (unsigned int)want, gfp);
		if (!k) {
			if (usl_flagged(s))   /* back as freed objects go: with their M */
				for (size_t j = 0; j < i; j++)
					usl_marker_set(s, p[j]);
			usl_slab_free_bulk(s, i, p);
			if (!(gfp & __GFP_NOWARN))
				usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; "
				           "none kept", s->name, i, nr);
			return 0;
		}
		i += k;
	}
	clear_markers(s, nr, p);
	return (int)nr;
}

void *usl_slab_alloc(struct kmem_cache *s, gfp_t gfp)
{
	void *x;
	if (usl_slab_alloc_bulk(s, gfp | __GFP_NOWARN, 1, &x))
		return x;
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc(%s): out of memory (object size %u, order %u)", s->name,
		           s->object_size, s->order);
	return NULL;
}

void usl_slab_free(struct kmem_cache *s, void *x)
{
	usl_slab_free_bulk(s, 1, &x);
}

/* ===========================================================================
 * Reap, shrink, counts
 */

/* The shared array's oldest tofree objects to their slabs. Under list_lock. */
static unsigned int drain_shared_locked(struct kmem_cache *s, struct kmem_cache_node *n, unsigned int tofree,
                                        struct usl_list *list)
{
	usl_assert_held(&n->list_lock);
	struct slab_sheaf *sh = n->shared;
	if (!sh || !sh->size)
		return 0;
	if (tofree > sh->size)
		tofree = sh->size;
	free_block(s, n, sh->objects, tofree, list);
	set_count_u32(&sh->size, sh->size - (tofree));
	memmove(sh->objects, &sh->objects[tofree], sh->size * sizeof(void *));
	return tofree;
}

/* Every alien array of node nid drained to its node. */
static unsigned int drain_aliens(struct kmem_cache *s, unsigned int nid)
{
	unsigned int done = 0;
	if (!s->node[nid]->alien)
		return 0;
	for (unsigned int o = 0; o < usl_nr_nodes; o++) {
		struct usl_alien *al = &s->node[nid]->alien[o];
		if (o == nid || !al->ac || !__atomic_load_n(&al->ac->size, __ATOMIC_RELAXED))
			continue;
		struct usl_list list;
		usl_list_init(&list);
		usl_spin_lock(&al->lock);
		struct kmem_cache_node *rn = s->node[o];
		usl_lock(&rn->list_lock);
		done += al->ac->size;
		free_block(s, rn, al->ac->objects, al->ac->size, &list);
		set_count_u32(&al->ac->size, 0);
		usl_unlock(&rn->list_lock);
		usl_spin_unlock(&al->lock);
		slabs_destroy(s, &list);
	}
	return done;
}

/* A node's shared array and free slabs are reaped at most once a decay sweep
 * (every USLAB_DECAY_MS / 2: the kernel reaped the arrays every 2 s and a
 * node every 4 s; here the pace is uslab's decay, as SLUB's). */
unsigned int usl_slab_reap(struct kmem_cache *s, uint64_t now)
{
	unsigned int done = 0;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		struct usl_list list;
		usl_list_init(&list);
		done += drain_aliens(s, nid);
		usl_lock(&n->list_lock);
		if (now < n->next_reap) {
			usl_unlock(&n->list_lock);
			continue;
		}
		n->next_reap = now + usl_opt.decay_ms / 2;
		struct slab_sheaf *sh = n->shared;
		if (sh && sh->ac.touched)
			sh->ac.touched = 0;
		else if (sh)
			done += drain_shared_locked(s, n, (sh->capacity + 4) / 5, &list);
		if (n->free_touched) {
			n->free_touched = 0;
		} else {
			/* The kernel's drain_freelist: a fifth of free_limit's worth of slabs. */
			unsigned long num = s->objects ? s->objects : 1;
			unsigned long tofree = (n->free_limit + 5 * num - 1) / (5 * num);
			while (tofree-- && !usl_list_empty(&n->slabs_free)) {
				slab_to_destroy(n, usl_container_of(n->slabs_free.prev, struct slab, slab_list), &list);
				done++;
			}
		}
		usl_unlock(&n->list_lock);
		slabs_destroy(s, &list);
	}
	return done;
}

/* Node nid's shared array drained and its free slabs freed (its alien
 * arrays first, by the caller); true if it has slabs left. */
static bool release_node(struct kmem_cache *s, unsigned int nid)
{
	struct kmem_cache_node *n = s->node[nid];
	struct usl_list list;
	usl_list_init(&list);
	usl_lock(&n->list_lock);
	drain_shared_locked(s, n, ~0u, &list);
	while (!usl_list_empty(&n->slabs_free))
		slab_to_destroy(n, usl_container_of(n->slabs_free.next, struct slab, slab_list), &list);
	bool left = !usl_list_empty(&n->partial) || !usl_list_empty(&n->full);
	usl_unlock(&n->list_lock);
	slabs_destroy(s, &list);
	return left;
}

bool usl_slab_release(struct kmem_cache *s)
{
	bool left = false;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		drain_aliens(s, nid);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		left |= release_node(s, nid);
	return left;
}

/* Every node's alien arrays first: node nid's objects freed on another
 * node's CPU wait in that node's array for nid, and keep their slabs. */
bool usl_slab_release_node(struct kmem_cache *s, unsigned int nid)
{
	for (unsigned int o = 0; o < usl_nr_nodes; o++)
		drain_aliens(s, o);
	return release_node(s, nid);
}

void usl_slab_counts(struct kmem_cache *s, int only, struct usl_slab_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		if (only >= 0 && nid != (unsigned int)only)
			continue;
		struct kmem_cache_node *n = s->node[nid];
		usl_lock(&n->list_lock);
		out->total_slabs += __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
		out->total_objects += __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
		out->free_slabs += n->free_slabs;
		set_count_ul(&out->free_objects, out->free_objects + (n->free_objects));
		out->free_limit += n->free_limit;
		for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
			out->partial_slabs++;
			out->partial_inuse += slab_active(usl_container_of(it, struct slab, slab_list));
		}
		for (struct usl_list *it = n->full.next; it != &n->full; it = it->next)
			out->full_slabs++;
		if (n->shared)
			out->shared_avail += n->shared->size;
		usl_unlock(&n->list_lock);
		for (unsigned int o = 0; n->alien && o < usl_nr_nodes; o++) {
			struct usl_alien *al = &n->alien[o];
			if (!al->ac)
				continue;
			usl_spin_lock(&al->lock);
			out->alien_avail += al->ac->size;
			usl_spin_unlock(&al->lock);
		}
	}
}

unsigned long usl_slab_objects_in_use(struct kmem_cache *s)
{
	struct usl_slab_counts c;
	usl_slab_counts(s, -1, &c);
	return c.total_objects - c.free_objects - c.shared_avail - c.alien_avail;
}

unsigned int usl_slab_check_lists(struct kmem_cache *s)
{
	unsigned int bad = 0;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		unsigned long free_objs = 0, free_slabs = 0, slabs = 0;
		const struct { struct usl_list *h; unsigned int which; } lists[] = {
			{ &n->slabs_free, USL_SLAB_LIST_FREE }, { &n->partial, USL_SLAB_LIST_PARTIAL },
			{ &n->full, USL_SLAB_LIST_FULL } };
		usl_lock(&n->list_lock);
		for (int l = 0; l < 3; l++)
			for (struct usl_list *it = lists[l].h->next; it != lists[l].h; it = it->next) {
				struct slab *slab = usl_container_of(it, struct slab, slab_list);
				unsigned int a = slab_active(slab), num = slab_num(slab);
				unsigned int want = !a ? USL_SLAB_LIST_FREE : a == num ? USL_SLAB_LIST_FULL : USL_SLAB_LIST_PARTIAL;
				bad += slab->node_partial != lists[l].which || want != lists[l].which || slab->nid != nid ||
				       slab->slab_cache != s;
				free_objs += num - a;
				free_slabs += !a;
				slabs++;
			}
		bad += free_objs != n->free_objects;
		bad += free_slabs != n->free_slabs;
		bad += slabs > __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
		usl_unlock(&n->list_lock);
	}
	return bad;
}

void usl_slab_fork_lock(struct kmem_cache *s)
{
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		for (unsigned int o = 0; s->node[nid]->alien && o < usl_nr_nodes; o++)
			usl_spin_lock(&s->node[nid]->alien[o].lock);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		usl_lock(&s->node[nid]->list_lock);
}

void usl_slab_fork_unlock(struct kmem_cache *s)
{
	for (unsigned int nid = usl_nr_nodes; nid-- > 0;)
		usl_unlock(&s->node[nid]->list_lock);
	for (unsigned int nid = usl_nr_nodes; nid-- > 0;)
		for (unsigned int o = usl_nr_nodes; s->node[nid]->alien && o-- > 0;)
			usl_spin_unlock(&s->node[nid]->alien[o].lock);
}
