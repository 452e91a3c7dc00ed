/* slab.h - the SLAB engine (src/engine/slab/), as the layers above see it: the
 * kernel's first slab allocator (mm/slab.c until Linux 6.8) behind the same
 * per-CPU arrays SLUB's sheaves use. Per node three slab lists (free, partial,
 * full) with free_objects and free_limit, a shared array and alien arrays;
 * per slab an array of free object indices (on the slab, off it, or in a free
 * object); colouring. The per-CPU array cache itself is the per-CPU layer's
 * (percpu/array.c): it calls the refill and flush here. Calls the pages,
 * arch and platform layers, and SLUB only for uslab's own caches (an off-slab
 * index array is an object of one). Locks (in order): an alien array's lock,
 * a node's list_lock, the page provider's. docs/ARCHITECTURE.md, "SLAB: the second engine". */
#ifndef USL_SLAB_H
#define USL_SLAB_H

#include "../../freestate.h"
#include "../../types.h"

/* Where a slab's free-index array lives (s->mgmt & USL_MGMT_PLACE). */
#define USL_MGMT_ON 0u        /* at the slab's end */
#define USL_MGMT_OFF 1u       /* an object of s->freelist_cache */
#define USL_MGMT_OBJ 2u       /* inside one of the slab's free objects (OBJFREELIST_SLAB) */
#define USL_MGMT_PLACE 3u
#define USL_MGMT_IDX2 4u      /* two-byte indices (else one) */

/* ---- sizing and tunables (sizing.c) ---- */
/* After SLUB's sizing set the stride, offset and alignment: SLAB's slab
 * order, index placement, colour, tunables (the kernel's enable_cpucache) and
 * node lists. -1 if no order fits. s->freelist_cache is the caller's to set
 * when the placement is USL_MGMT_OFF (usl_slab_freelist_bytes). */
USL_HIDDEN int usl_slab_cache_init(struct kmem_cache *s);
/* Another slab order (malloc's classes), before first use; -1: it cannot be. */
USL_HIDDEN int usl_slab_set_order(struct kmem_cache *s, unsigned int order);
/* Bytes an off-slab index array takes (the size of its cache's objects). */
USL_HIDDEN unsigned int usl_slab_freelist_bytes(const struct kmem_cache *s);
/* The kernel's enable_cpucache defaults for s: limit, batchcount, shared. */
USL_HIDDEN void usl_slab_default_tunables(const struct kmem_cache *s, unsigned int *limit, unsigned int *batch,
                                          unsigned int *shared);
/* New tunables (checked by the caller): the shared arrays resized (their
 * surplus freed to slabs) and free_limit set. Under slab_mutex, after the
 * per-CPU arrays were flushed. 0, or -ENOMEM with nothing changed. */
USL_HIDDEN int usl_slab_tune(struct kmem_cache *s, unsigned int limit, unsigned int batch, unsigned int shared);
/* Destroy: the shared and alien arrays freed (the slabs are gone). */
USL_HIDDEN void usl_slab_cache_free(struct kmem_cache *s);

/* ---- objects (slab.c) ---- */
/* The kernel's cache_alloc_refill: up to batch objects into out[] from this
 * node's shared array, else its partial and free slabs, else a new slab.
 * How many (0: no memory). */
USL_HIDDEN unsigned int usl_slab_refill(struct kmem_cache *s, void **out, unsigned int batch, gfp_t gfp);
/* The same from node nid's shared array and slabs (kmem_cache_alloc_node). */
USL_HIDDEN unsigned int usl_slab_refill_node(struct kmem_cache *s, unsigned int nid, void **out, unsigned int batch,
                                             gfp_t gfp);
/* x, checked, of another node's slab, freed on this CPU's node: to this
 * node's alien array for its node (the kernel's cache_free_alien). */
USL_HIDDEN void usl_slab_free_remote(struct kmem_cache *s, void *x);
/* The kernel's cache_flusharray: the n objects of objs[] (a per-CPU array's
 * oldest) to this node's shared array if it has room for some, else to their
 * slabs; objects of another node's slabs go to its alien array. How many
 * were taken from the front of objs[] (all but those the shared array had
 * no room for). */
USL_HIDDEN unsigned int usl_slab_flush_array(struct kmem_cache *s, void **objs, unsigned int n);
/* All or nothing: nr objects (no zeroing, no free markers), or 0. */
USL_HIDDEN int usl_slab_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);
/* nr checked objects of s back to their slabs (free_block), past any array. */
USL_HIDDEN void usl_slab_free_bulk(struct kmem_cache *s, size_t nr, void **p);
USL_HIDDEN void *usl_slab_alloc(struct kmem_cache *s, gfp_t gfp);
USL_HIDDEN void usl_slab_free(struct kmem_cache *s, void *x);

/* ---- whole cache (slab.c) ---- */
/* The node part of the kernel's cache_reap (from the decay sweep): alien
 * arrays drained, and, once the node's reap time has come, its shared array
 * drained by a fifth of its limit unless touched and its free slabs freed by
 * a fifth of free_limit unless a refill took one. Returns slabs freed plus
 * objects drained. */
USL_HIDDEN unsigned int usl_slab_reap(struct kmem_cache *s, uint64_t now);
/* Shrink and destroy: shared and alien arrays drained, every free slab freed;
 * true if slabs remain (objects in use). */
USL_HIDDEN bool usl_slab_release(struct kmem_cache *s);
USL_HIDDEN bool usl_slab_release_node(struct kmem_cache *s, unsigned int nid);
/* Objects handed out and not freed (the slabs' active counts). */
USL_HIDDEN unsigned long usl_slab_objects_in_use(struct kmem_cache *s);
/* Per node counts for statistics, summed: slabs, objects, free slabs, partial
 * slabs and their free objects, objects in the shared and alien arrays. */
struct usl_slab_counts {
	unsigned long total_slabs, total_objects, free_slabs, partial_slabs, full_slabs, free_objects;
	unsigned long shared_avail, alien_avail, free_limit;
	unsigned long partial_inuse;  /* objects handed out of the partial slabs */
};
USL_HIDDEN void usl_slab_counts(struct kmem_cache *s, int nid, struct usl_slab_counts *out);   /* nid < 0: all */
/* Each slab's list agrees with its active count, the lists' counts add up
 * (tests): the number of disagreements. */
USL_HIDDEN unsigned int usl_slab_check_lists(struct kmem_cache *s);
USL_HIDDEN void usl_slab_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_slab_fork_unlock(struct kmem_cache *s);

#endif /* USL_SLAB_H */
