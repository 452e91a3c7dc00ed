/* engine.h - the engine layer's one header for the layers above: two
 * engines, SLUB (slub/slub.h) and SLAB (slab/slab.h), below the per-CPU
 * arrays they share. A cache is on one of them for its life (s->engine, set
 * at creation from USLAB_ALLOCATOR; uslab's own caches and debug caches are
 * always SLUB's); the calls here go to its engine. What only one engine has
 * (SLUB's cpu slab and debug caches, SLAB's refill and flush of the per-CPU
 * arrays) is called by its own name. docs/ARCHITECTURE.md, "Layers". */
#ifndef USL_ENGINE_H
#define USL_ENGINE_H

#include "slab/slab.h"
#include "slub/slub.h"

static inline bool usl_is_slab(const struct kmem_cache *s) { return s->engine == USL_ENGINE_SLAB; }

/* All or nothing: nr objects (no zeroing, no free markers), or 0. */
static inline int usl_engine_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	return usl_is_slab(s) ? usl_slab_alloc_bulk(s, gfp, nr, p) : usl_slub_alloc_bulk(s, gfp, nr, p);
}
/* nr checked objects of s (no NULLs) back to their slabs. */
static inline void usl_engine_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	if (usl_is_slab(s))
		usl_slab_free_bulk(s, nr, p);
	else
		usl_slub_free_bulk(s, nr, p);
}
/* One object past the per-CPU arrays (a thread without a slot, no memory
 * for an array). */
static inline void *usl_engine_alloc(struct kmem_cache *s, gfp_t gfp)
{
	return usl_is_slab(s) ? usl_slab_alloc(s, gfp) : usl_slub_alloc(s, gfp);
}
/* One object from a slab of node nid (kmem_cache_alloc_node for a node
 * other than the CPU's; not a debug cache): SLUB's straight from the node's
 * lists, SLAB's from its shared array or slabs. */
static inline void *usl_engine_alloc_node(struct kmem_cache *s, gfp_t gfp, unsigned int nid)
{
	if (!usl_is_slab(s))
		return usl_slub_alloc_node(s, gfp, nid);
	void *obj;
	return usl_slab_refill_node(s, nid, &obj, 1, gfp) ? obj : NULL;
}
/* A checked object of another node's slab freed on this node: SLUB's to its
 * slab (past the sheaves, which keep this node's objects), SLAB's through
 * the alien arrays. */
static inline void usl_engine_free_remote(struct kmem_cache *s, struct slab *slab, void *x)
{
	if (usl_is_slab(s))
		usl_slab_free_remote(s, x);
	else
		usl_slub_free(s, slab, x);
}
static inline void usl_engine_free(struct kmem_cache *s, struct slab *slab, void *x)
{
	if (usl_is_slab(s))
		usl_slab_free(s, x);
	else
		usl_slub_free(s, slab, x);
}
/* SLUB: every CPU's cpu slab and cpu partial slabs to the node lists. SLAB
 * keeps nothing per CPU below the arrays. */
static inline void usl_engine_flush_cpus(struct kmem_cache *s)
{
	if (!usl_is_slab(s))
		usl_slub_flush_cpus(s);
}
/* Shrink: free the empty slabs (SLAB: its shared and alien arrays drained
 * first); true if slabs remain. */
static inline bool usl_engine_release(struct kmem_cache *s)
{
	return usl_is_slab(s) ? usl_slab_release(s) : s->oslots ? usl_oslab_release(s) : usl_slub_release(s);
}
static inline unsigned long usl_engine_objects_in_use(struct kmem_cache *s)
{
	return usl_is_slab(s) ? usl_slab_objects_in_use(s) : s->oslots ? usl_oslab_in_use(s) : usl_slub_objects_in_use(s);
}
static inline int usl_engine_set_order(struct kmem_cache *s, unsigned int order)
{
	return usl_is_slab(s) ? usl_slab_set_order(s, order) : usl_slub_set_order(s, order);
}
/* Statistics' node counts (a snapshot under each list_lock) of node nid, or
 * of all nodes summed with nid < 0. SLAB: its partial list, and as
 * "partial_free" every free object on its slabs (those of free slabs too:
 * what the objects attribute subtracts). */
static inline void usl_engine_node_counts(struct kmem_cache *s, int nid, struct usl_node_counts *out)
{
	if (!usl_is_slab(s)) {
		if (nid >= 0) {
			usl_slub_node_counts(s, (unsigned int)nid, out);
			return;
		}
		struct usl_node_counts one;
		__builtin_memset(out, 0, sizeof(*out));
		for (unsigned int i = 0; i < usl_nr_nodes; i++) {
			usl_slub_node_counts(s, i, &one);
			usl_node_counts_add(out, &one);
		}
		return;
	}
	struct usl_slab_counts c;
	usl_slab_counts(s, nid, &c);
	out->nr_slabs = c.total_slabs;
	out->total_objects = c.total_objects;
	out->nr_partial = c.partial_slabs;
	out->partial_free = c.free_objects;
	out->partial_inuse = c.partial_inuse;
}
/* Shrink one node: SLUB its partial list, SLAB its arrays and free slabs;
 * true if the node has slabs left. */
static inline bool usl_engine_release_node(struct kmem_cache *s, unsigned int nid)
{
	return usl_is_slab(s) ? usl_slab_release_node(s, nid) : usl_slub_release_node(s, nid);
}
static inline void usl_engine_fork_lock(struct kmem_cache *s)
{
	if (usl_is_slab(s))
		usl_slab_fork_lock(s);
	else
		usl_slub_fork_lock(s);
}
static inline void usl_engine_fork_unlock(struct kmem_cache *s)
{
	if (usl_is_slab(s))
		usl_slab_fork_unlock(s);
	else
		usl_slub_fork_unlock(s);
}

#endif /* USL_ENGINE_H */
