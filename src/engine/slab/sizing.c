/* sizing.c - SLAB's sizing as the kernel chose it: the slab order and where
 * each slab's free-index array lives (the kernel's calculate_slab_order,
 * set_objfreelist_slab_cache, set_off_slab_cache, set_on_slab_cache), the
 * colour, the per-CPU tunables (enable_cpucache) and each node's free_limit,
 * shared and alien arrays (setup_kmem_cache_node); run-time tuning. Locks: a
 * node's list_lock while tuning swaps its shared array. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "../../pages/pages.h"
#include "../../platform/platform.h"
#include "slab.h"

/* The kernel's slab_max_order (SLAB_MAX_ORDER_HI on machines with more than
 * 32 MiB): the order it stops at once objects fit with little waste. */
#define SLAB_MAX_ORDER 1
/* Alien arrays hold 12 objects (the kernel's alloc_alien_cache). */
#define ALIEN_LIMIT 12

static inline unsigned int idx_bytes(unsigned int mgmt) { return mgmt & USL_MGMT_IDX2 ? 2 : 1; }

/* The off-slab arrays' cache object size for a slab of num objects. */
static unsigned int freelist_cache_bytes(unsigned int bytes)
{
	unsigned int b = 16;
	while (b < bytes)
		b <<= 1;
	return b;
}

/* Objects of s in a slab of 2^order pages with this placement, and the bytes
 * left over (the kernel's cache_estimate). */
static unsigned int estimate(const struct kmem_cache *s, unsigned int order, unsigned int mgmt, size_t *left)
{
	size_t bytes = usl_order_bytes(order), per = s->size;
	if ((mgmt & USL_MGMT_PLACE) == USL_MGMT_ON)
		per += idx_bytes(mgmt);
	size_t num = bytes / per;
	if (num > USL_MAX_OBJS_PER_SLAB)
		num = USL_MAX_OBJS_PER_SLAB;
	*left = bytes - num * per;
	return (unsigned int)num;
}

/* An OBJFREELIST array goes beside the words a free object keeps (the free
 * marker's, and a two-word cache's flag next to it): before them if it fits
 * there, else after them; UINT32_MAX if it fits in neither place. */
static unsigned int obj_place(const struct kmem_cache *s, unsigned int bytes)
{
	unsigned int lo = s->offset < s->flag_off ? s->offset : s->flag_off;
	unsigned int hi = (s->offset > s->flag_off ? s->offset : s->flag_off) + (unsigned int)sizeof(void *);
	if (bytes <= lo)
		return 0;
	if (hi + bytes <= s->size)
		return hi;
	return UINT32_MAX;
}

/* The kernel's calculate_slab_order for one placement, at orders from lo up
 * to hi (a fixed order: lo == hi). Sets order, objects, mgmt, freelist_size;
 * returns the bytes left over, or -1 if no order works. */
static long slab_order(struct kmem_cache *s, unsigned int mgmt, unsigned int lo, unsigned int hi)
{
	long left_over = -1;
	for (unsigned int order = lo; order <= hi; order++) {
		size_t left;
		unsigned int m = mgmt, num = estimate(s, order, m, &left);
		if (num > 256) {                    /* indices of two bytes */
			m |= USL_MGMT_IDX2;
			num = estimate(s, order, m, &left);
		}
		if (!num)
			continue;
		unsigned int fl = num * idx_bytes(m);
		if ((m & USL_MGMT_PLACE) == USL_MGMT_OFF && freelist_cache_bytes(fl) > s->size / 2)
			continue;                       /* off-slab must pay for itself */
		s->order = order;
		s->objects = num;
		s->mgmt = m;
		s->freelist_size = fl;
		left_over = (long)left;
		if (order >= SLAB_MAX_ORDER && lo != hi)
			break;
		if (left * 8 <= usl_order_bytes(order))
			break;                          /* acceptable internal fragmentation */
	}
	return left_over;
}

/* The placements in the kernel's order (since 4.6): in a free object (no
 * constructor, and the array fits in one), off the slab (when its cache's
 * objects are at most half an object, slab_order's test, and the slab's
 * spare bytes cannot hold it), on it. Hardened, never in a free object: a
 * write after free would rewrite the indices the next allocations follow,
 * where hardening promises such a write is only reported (slab.c). */
static int layout(struct kmem_cache *s, unsigned int lo, unsigned int hi)
{
	long left;
	if (!usl_keeps_state(s) && !usl_opt.harden) {
		left = slab_order(s, USL_MGMT_OBJ, lo, hi);
		if (left >= 0 && (s->mgmt_off = obj_place(s, s->freelist_size)) != UINT32_MAX)
			goto done;
	}
	left = slab_order(s, USL_MGMT_OFF, lo, hi);
	if (left >= 0 && (unsigned long)left < s->freelist_size)
		goto done;
	left = slab_order(s, USL_MGMT_ON, lo, hi);
	if (left < 0)
		return -1;
done:
	if ((s->mgmt & USL_MGMT_PLACE) != USL_MGMT_OBJ)
		s->mgmt_off = 0;
	/* Colour: the spare bytes as offsets of a cache line (or the
	 * alignment), less than a page (the page map's first-object offset,
	 * pages/pages.h). */
	s->colour_off = s->align > USL_CACHELINE ? s->align : USL_CACHELINE;
	unsigned long colour = (unsigned long)left / s->colour_off;
	if (colour > USL_PAGE_SIZE / s->colour_off)
		colour = USL_PAGE_SIZE / s->colour_off;
	s->colour = (unsigned int)colour;
	s->fp_mask = ~(uintptr_t)(usl_order_bytes(s->order) - 1);
	s->min_order = s->order;
	return 0;
}

unsigned int usl_slab_freelist_bytes(const struct kmem_cache *s)
{
	return freelist_cache_bytes(s->freelist_size);
}

void usl_slab_default_tunables(const struct kmem_cache *s, unsigned int *limit, unsigned int *batch,
                               unsigned int *shared)
{
	unsigned int l;
	if (s->size > 131072)
		l = 1;
	else if (s->size > USL_PAGE_SIZE)
		l = 8;
	else if (s->size > 1024)
		l = 24;
	else if (s->size > 256)
		l = 54;
	else
		l = 120;
	*limit = l;
	*batch = (l + 1) / 2;
	*shared = s->size <= USL_PAGE_SIZE && usl_nr_cpus > 1 ? 8 : 0;
}

static void set_free_limit(struct kmem_cache *s)
{
	unsigned int nodes = usl_nr_nodes;
	unsigned int cpus = (usl_nr_cpus + nodes - 1) / nodes;
	for (unsigned int nid = 0; nid < nodes; nid++)
		__atomic_store_n(&s->node[nid]->free_limit, (unsigned long)(1 + cpus) * s->batchcount + s->objects,
		                 __ATOMIC_RELAXED);
}

static struct slab_sheaf *array_new(struct kmem_cache *s, unsigned int capacity)
{
	struct slab_sheaf *sh = usl_meta_alloc(offsetof(struct slab_sheaf, objects) + (size_t)capacity * sizeof(void *));
	if (!sh)
		return NULL;
	sh->size = 0;
	sh->capacity = capacity;
	sh->cache = s;
	return sh;
}

/* SLAB's part of a node structure (common/cache.c made its lock and lists);
 * with more than one node its alien arrays' slots, zeroed. */
static int node_init(struct kmem_cache_node *n)
{
	usl_list_init(&n->slabs_free);
	n->free_objects = n->free_slabs = 0;
	n->colour_next = 0;
	n->free_touched = 0;
	n->next_reap = 0;
	n->shared = NULL;
	n->alien = NULL;
	if (usl_nr_nodes > 1 && !(n->alien = usl_meta_alloc(usl_nr_nodes * sizeof(*n->alien))))
		return -1;
	return 0;
}

int usl_slab_cache_init(struct kmem_cache *s)
{
	unsigned int hi = USL_MAX_ORDER;
	if (usl_opt.max_order_given && (unsigned int)usl_opt.max_order < hi)
		hi = (unsigned int)usl_opt.max_order;
	s->engine = USL_ENGINE_SLAB;
	if (layout(s, (unsigned int)usl_opt.min_order, hi) != 0 && layout(s, 0, USL_MAX_ORDER) != 0)
		return -1;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		if (node_init(s->node[nid]) != 0) {
			usl_slab_cache_free(s);
			return -1;
		}
	unsigned int limit, batch, shared;
	usl_slab_default_tunables(s, &limit, &batch, &shared);
	s->limit = limit;
	s->batchcount = batch;
	s->shared = 0;
	if (usl_slab_tune(s, limit, batch, shared) != 0) {
		usl_slab_cache_free(s);
		return -1;
	}
	return 0;
}

int usl_slab_set_order(struct kmem_cache *s, unsigned int order)
{
	if (order > USL_MAX_ORDER || usl_order_bytes(order) < s->size)
		return -1;
	struct kmem_cache saved = *s;
	if (layout(s, order, order) != 0) {
		*s = saved;
		return -1;
	}
	set_free_limit(s);
	return 0;
}

int usl_slab_tune(struct kmem_cache *s, unsigned int limit, unsigned int batch, unsigned int shared)
{
	unsigned int nodes = usl_nr_nodes;
	/* The new arrays, made before any is published: fresh[nid] the shared
	 * array of node nid, alien[nid * nodes + o] its alien array for node o. */
	struct slab_sheaf *one[2] = { NULL, NULL }, **fresh = one, **alien = one + 1;
	if (nodes > 1) {
		if (!(fresh = usl_meta_alloc((size_t)(nodes + nodes * nodes) * sizeof(*fresh))))
			return -ENOMEM;
		alien = fresh + nodes;
	}
	for (unsigned int nid = 0; nid < nodes; nid++) {
		if (shared && !(fresh[nid] = array_new(s, shared * batch)))
			goto nomem;
		for (unsigned int o = 0; o < nodes; o++)
			if (o != nid && !s->node[nid]->alien[o].ac &&
			    !(alien[nid * nodes + o] = array_new(s, limit > 1 ? ALIEN_LIMIT : 1)))
				goto nomem;
	}
	__atomic_store_n(&s->limit, limit, __ATOMIC_RELAXED);
	__atomic_store_n(&s->batchcount, batch, __ATOMIC_RELAXED);
	__atomic_store_n(&s->shared, shared, __ATOMIC_RELAXED);
	set_free_limit(s);
	for (unsigned int nid = 0; nid < nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		for (unsigned int o = 0; o < nodes; o++)
			if (alien[nid * nodes + o]) {
				usl_spin_lock(&n->alien[o].lock);
				n->alien[o].ac = alien[nid * nodes + o];
				usl_spin_unlock(&n->alien[o].lock);
			}
		/* The old shared array's objects move to the new one as far as
		 * it holds them, in the same critical section that publishes it
		 * (once published, flushes fill it); the rest go to their slabs. */
		usl_lock(&n->list_lock);
		struct slab_sheaf *old = n->shared;
		if (old && fresh[nid]) {
			unsigned int k = old->size < fresh[nid]->capacity ? old->size : fresh[nid]->capacity;
			memcpy(fresh[nid]->objects, &old->objects[old->size - k], k * sizeof(void *));
			fresh[nid]->size = k;
			__atomic_store_n(&old->size, old->size - k, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&n->shared, fresh[nid], __ATOMIC_RELEASE);   /* its set-up before it */
		usl_unlock(&n->list_lock);
		if (old) {
			if (old->size)
				usl_slab_free_bulk(s, old->size, old->objects);
			usl_meta_free(old);
		}
	}
	if (fresh != one)
		usl_meta_free(fresh);
	return 0;
nomem:
	for (unsigned int nid = 0; nid < nodes; nid++) {
		if (fresh[nid])
			usl_meta_free(fresh[nid]);
		for (unsigned int o = 0; o < nodes; o++)
			if (alien[nid * nodes + o])
				usl_meta_free(alien[nid * nodes + o]);
	}
	if (fresh != one)
		usl_meta_free(fresh);
	return -ENOMEM;
}

/* The arrays (the node structures are the cache's: common/cache.c). */
void usl_slab_cache_free(struct kmem_cache *s)
{
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		if (!n)
			continue;
		if (n->shared)
			usl_meta_free(n->shared);
		n->shared = NULL;
		if (!n->alien)
			continue;
		for (unsigned int o = 0; o < usl_nr_nodes; o++)
			if (n->alien[o].ac)
				usl_meta_free(n->alien[o].ac);
		usl_meta_free(n->alien);
		n->alien = NULL;
	}
}
