/* internal.h - what the SLUB engine's files share and nothing above sees: free
 * pointer access, the slab pair's CAS, node list operations, carving facts,
 * and the cross-file paths of slub.c (state changes, freeing to a slab, taking
 * a slot private) that bulk.c and flush.c use. It names nothing that slub.c or
 * slot.c defines, so no file of the engine calls another in a loop. Locks as in slub.c's opening comment. */
#ifndef USL_SLUB_INTERNAL_H
#define USL_SLUB_INTERNAL_H

#include "../../arch/arch.h"
#include "../../pages/pages.h"
#include "../../platform/platform.h"
#include "../../freestate.h"
#include "stat.h"

/* ===========================================================================
 * Objects and slabs
 */

/* Free pointers are stored encoded (docs/ARCHITECTURE.md, "Hardening"): the word
 * at obj + s->offset holds next ^ s->fp_secret ^ bswap(its own address), so a
 * use-after-free write of an address decodes to noise, and a plain pointer is
 * never found in a freed object. A decoded pointer must be NULL or an object
 * start in the same slab block as obj (usl_fp_ok); one that is not is reported
 * and the list is cut there (usl_report_free_list returns NULL): never followed. */
static inline void *usl_fp_decode(const struct kmem_cache *s, void *obj, uintptr_t word)
{
	return (void *)(word ^ usl_cache_key(s, (char *)obj + s->offset));
}

/* next may follow obj on a free list of s: NULL, or in obj's slab block at a
 * whole number of strides from obj, and not obj itself (the link a free's
 * marker makes when it lands on an object free on its slab: a second free
 * that free's fast path wrote without reading; freestate.h, usl_two_word). */
static inline bool usl_fp_ok(const struct kmem_cache *s, const void *obj, const void *next)
{
	uintptr_t a = (uintptr_t)obj, b = (uintptr_t)next;
	if (!next)
		return true;
	if (((a ^ b) & s->fp_mask) || a == b)
		return false;
	uint32_t d = (uint32_t)(a > b ? a - b : b - a);
	return usl_obj_index(d, s->div_inv, s->div_shift) < s->objects;
}

static inline void *usl_get_freepointer(const struct kmem_cache *s, void *obj)
{
	void *next = usl_fp_decode(s, obj, *(uintptr_t *)((char *)obj + s->offset));
	if (usl_unlikely(!usl_fp_ok(s, obj, next)))
		return usl_report_free_list(s->name, obj, next);
	return next;
}

static inline void usl_set_freepointer(const struct kmem_cache *s, void *obj, void *fp)
{
	*(uintptr_t *)((char *)obj + s->offset) = (uintptr_t)fp ^ usl_cache_key(s, (char *)obj + s->offset);
}

/* The stored word itself, for code that saves and restores what a live
 * object held there (bulk free links live objects before handing them over). */
static inline uintptr_t usl_fp_word(const struct kmem_cache *s, const void *obj)
{
	return *(const uintptr_t *)((const char *)obj + s->offset);
}

static inline void usl_set_fp_word(const struct kmem_cache *s, void *obj, uintptr_t w)
{
	*(uintptr_t *)((char *)obj + s->offset) = w;
}

/* Read a free pointer that another thread may be overwriting (locked-mode fast
 * path: the object may have been allocated since we read it; the cmpxchg16b on
 * {tid, freelist} then fails and the value is dropped, as in the kernel). The
 * memory is always mapped inside the range. A plain asm load: the race is by
 * design, and sanitizers must not see it as a program access. *ok is false
 * when the decoded pointer fails usl_fp_ok (a race, or corruption: the caller
 * takes its slow path, which reads it again under the slot's lock). */
static inline void *usl_get_freepointer_safe(const struct kmem_cache *s, void *obj, bool *ok)
{
	uintptr_t w;
	__asm__ __volatile__("movq (%1), %0" : "=r"(w) : "r"((char *)obj + s->offset) : "memory");
	void *next = usl_fp_decode(s, obj, w);
	*ok = usl_fp_ok(s, obj, next);
	return next;
}

/* A slab's node structure: the node of its pages (slab->nid, set by the page
 * provider). */
static inline struct kmem_cache_node *usl_get_node(struct kmem_cache *s, struct slab *slab)
{
	return s->node[slab->nid];
}

/* The node this thread's refills take slabs from: its CPU's. uslab's own
 * caches (their slabs come from the metadata regions, node 0's) and debug
 * caches (one set of lists under one lock, engine/slub/debug.c) keep to node 0. */
static inline unsigned int usl_slub_local_node(const struct kmem_cache *s)
{
	return (s->flags & (USL_SLAB_INTERNAL | USL_SLAB_DEBUG_FLAGS)) ? 0 : usl_this_node();
}

static inline bool usl_obj_index_at(const struct kmem_cache *s, const struct slab *slab, uint32_t off, unsigned int *idx)
{
	uint32_t q = usl_obj_index(off, s->div_inv, s->div_shift);
	*idx = q;
	/* objects sits in bits 16..30 of counters: one 16-bit load (little endian). */
	return q < (__atomic_load_n((const uint16_t *)&slab->counters + 1, __ATOMIC_RELAXED) & USL_OBJECTS_MASK);
}

/* A failure counts as the kernel's CMPXCHG_DOUBLE_FAIL of s. */
static inline bool usl_slab_cas(const struct kmem_cache *s, struct slab *slab, void *old_fl, unsigned long old_c,
                                void *new_fl, unsigned long new_c)
{
	usl_stat(s, USL_CMPXCHG_DOUBLE);
	if (usl_likely(usl_cas16(&slab->freelist, (unsigned long)old_fl, old_c, (unsigned long)new_fl, new_c)))
		return true;
	usl_stat(s, USL_CMPXCHG_DOUBLE_FAIL);
	return false;
}

static inline void usl_slab_snapshot(struct slab *slab, void **fl, unsigned long *c)
{
	/* Racy read of the pair; every use is validated by the CAS. */
	*fl = usl_load_ptr(&slab->freelist);
	*c = usl_load(&slab->counters);
}

/* ===========================================================================
 * Node partial lists (under list_lock)
 */

/* n's list_lock, taken by an allocation or free path of s (counted:
 * USL_LIST_LOCK; counts, shrink and validation take it uncounted). */
static inline void usl_list_lock(const struct kmem_cache *s, struct kmem_cache_node *n)
{
	usl_stat(s, USL_LIST_LOCK);
	usl_lock(&n->list_lock);
}

/* A slab onto n's partial list: unfrozen (only the cpu slab is frozen), on no
 * list before (the kernel's add_partial, with its lockdep_assert_held). */
static inline void usl_add_partial(struct kmem_cache_node *n, struct slab *slab, bool tail)
{
	usl_assert_held(&n->list_lock);
	usl_assert(!slab->node_partial && !usl_counters_frozen(usl_load(&slab->counters)));
	if (tail)
		usl_list_add_tail(&slab->slab_list, &n->partial);
	else
		usl_list_add_head(&slab->slab_list, &n->partial);
	slab->node_partial = 1;
	__atomic_store_n(&n->nr_partial, n->nr_partial + 1, __ATOMIC_RELAXED);  /* peeked unlocked */
}

static inline void usl_remove_partial(struct kmem_cache_node *n, struct slab *slab)
{
	usl_assert_held(&n->list_lock);
	usl_assert(slab->node_partial);
	usl_list_del(&slab->slab_list);
	slab->node_partial = 0;
	__atomic_store_n(&n->nr_partial, n->nr_partial - 1, __ATOMIC_RELAXED);
}
/* ===========================================================================
 * Carving (newslab.c): a slab's uncarved objects are its last ones.
 */
static inline char *usl_carve_start(const struct kmem_cache *s, const struct slab *slab, unsigned long c)
{
	return slab->addr + (size_t)(usl_counters_objects(c) - usl_counters_uncarved(c)) * s->size;
}

/* Is x among slab's uncarved objects? Those are free and were never handed out;
 * freeing one would make carving hand it out twice. */
static inline bool usl_never_handed_out(const struct kmem_cache *s, const struct slab *slab, unsigned long c, const void *x)
{
	return (const char *)x >= usl_carve_start(s, slab, c);
}

/* An unpredictable layout (s->random): carving hands a chunk's objects out in
 * a random order, i -> (a * i + b) mod k with a prime to k drawn for each
 * chunk, so the next allocation is not the previous one's neighbour that an
 * overflow could count on (the kernel's CONFIG_SLAB_FREELIST_RANDOM, per
 * carved chunk here). Otherwise the order is the slab's. */
struct usl_carve_order {
	unsigned int a, x, k;        /* step, current index, chunk size */
};
USL_HIDDEN void usl_carve_order_init(struct usl_carve_order *o, const struct kmem_cache *s, unsigned int k);
/* The next index of the order (k calls give each of 0..k-1 once). */
static inline unsigned int usl_carve_order_next(struct usl_carve_order *o)
{
	unsigned int i = o->x;
	o->x += o->a;
	if (o->x >= o->k)
		o->x -= o->k;
	return i;
}

/* ===========================================================================
 * Paths of slub.c used by the engine's other files
 */

/* After a claim of uncarved objects (counters c after it): the page map's
 * count follows (pages/pages.h, usl_pm_set_count). */
USL_HIDDEN void usl_slab_carved(const struct kmem_cache *s, struct slab *slab, unsigned long c);

/* Freeing a chain head..tail of cnt objects of slab to the slab (the kernel's
 * __slab_free): one 16-byte CAS, list_lock only when the slab changes list. */
USL_HIDDEN void usl_slab_free_slow(struct kmem_cache *s, struct slab *slab, void *head, void *tail, unsigned int cnt);
/* Unfreeze a cpu slab, merging the private freelist fl; the counters after.
 * Still frozen after it: the free list loops and the slab is abandoned; the
 * caller reports that with usl_report_loop once it holds no slot, so a report
 * handler may allocate from the cache. */
USL_HIDDEN unsigned long usl_unfreeze_slab(struct kmem_cache *s, struct slab *slab, void *fl, bool *remote_frees,
                                           bool *has_free);
USL_HIDDEN void usl_report_loop(struct kmem_cache *s, const struct slab *slab);
/* A chain of cpu partial slabs (unfrozen, on no list) to the node lists. */
USL_HIDDEN void usl_put_partials(struct kmem_cache *s, struct slab *chain);
USL_HIDDEN void usl_discard_slab(struct kmem_cache *s, struct slab *slab);
/* A new slab of s on the node from the page provider (the kernel's
 * new_slab): its objects uncarved, or with a constructor linked whole into
 * *freelist. NULL if there is no memory. */
USL_HIDDEN struct slab *usl_new_slab(struct kmem_cache *s, void **freelist, unsigned int node);
/* One object from a partial slab of the node under its list_lock, else from
 * a new slab of the node (a thread without rseq; an allocation for a node
 * other than the CPU's). */
USL_HIDDEN void *usl_alloc_direct(struct kmem_cache *s, unsigned int node);

/* A slot's state, taken private by an allocation slow path (the kernel disables
 * interrupts; here the slot is detached once and installed once). */
struct usl_private_slot {
	struct kmem_cache_cpu *lc;   /* locked mode: the slot, its lock held */
	void *fl;
	struct slab *slab;
};

/* Take this CPU's slot private (false: this thread has no slot); get more
 * objects into it (remote frees on its slab, else a new cpu slab: with link,
 * b->fl is not empty after it; without, a new slab may come all uncarved);
 * give it back (installed, or returned to the slab if the slot was filled). */
USL_HIDDEN bool usl_slot_take(struct kmem_cache *s, struct usl_private_slot *b);
USL_HIDDEN bool usl_slot_refill(struct kmem_cache *s, struct usl_private_slot *b, bool link);
USL_HIDDEN void usl_slot_put(struct kmem_cache *s, struct usl_private_slot *b);

/* For a slab whose freelist is empty and that has uncarved objects: link the
 * next chunk, and return it with its counters (uncarved lowered) in *nc
 * (newslab.c). */
USL_HIDDEN void *usl_carve_linked(const struct kmem_cache *s, const struct slab *slab, unsigned long c,
                                  unsigned long *nc);

#endif /* USL_SLUB_INTERNAL_H */
