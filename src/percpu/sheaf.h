/* sheaf.h - what the per-CPU layer's files share and nothing above sees:
 * sheaf structures and their refill and flush (sheaf.c), the barn visit
 * (barn.c), and a slot's sheaves taken private by a slow path (struct
 * usl_pcs, pcs.c). Locks as in percpu.h. */
#ifndef USL_PERCPU_SHEAF_H
#define USL_PERCPU_SHEAF_H

#include <string.h>

#include "../arch/arch.h"
#include "../pages/pages.h"
#include "../platform/platform.h"
#include "../engine/engine.h"
#include "percpu.h"

#define USL_SHEAF_HEADER ((unsigned int)offsetof(struct slab_sheaf, objects))
static inline unsigned int usl_sheaf_bytes(unsigned int capacity) { return USL_SHEAF_HEADER + 8u * capacity; }

/* Objects fresh from the engine, reversed where a sheaf or array takes them:
 * the pops (from the top) then hand them out in the order the engine gave
 * them, a fresh slab's carved in rising addresses as a bump allocator's, which
 * a program that walks its objects in the order it made them reads forwards
 * (taken as they lie, every batch would come out falling). */
static inline void usl_sheaf_reverse(void **objs, unsigned int n)
{
	for (unsigned int i = 0, j = n - 1; n && i < j; i++, j--) {
		void *t = objs[i];
		objs[i] = objs[j];
		objs[j] = t;
	}
}

/* ---- sheaf structures (sheaf.c) ---- */
/* A one-off sheaf: larger than the cache's capacity, or of a cache without
 * sheaves (prefilled sheaves work on every cache). */
static inline bool usl_sheaf_is_oversize(struct kmem_cache *s, struct slab_sheaf *sh)
{
	return !s->sheaf_capacity || sh->capacity != s->sheaf_capacity;
}
/* A sheaf of capacity for s: from s's sheaf class cache at its own capacity,
 * else a page block of its own; NULL when out of memory. */
USL_HIDDEN struct slab_sheaf *usl_sheaf_new(struct kmem_cache *s, unsigned int capacity, gfp_t gfp);
USL_HIDDEN void usl_sheaf_dispose(struct kmem_cache *s, struct slab_sheaf *sh);
/* Fill sh up to want objects from slabs. All or nothing: 0, or -ENOMEM. */
USL_HIDDEN int usl_sheaf_refill(struct kmem_cache *s, struct slab_sheaf *sh, unsigned int want, gfp_t gfp);
/* Every object of sh back to its slab. */
USL_HIDDEN void usl_sheaf_flush(struct kmem_cache *s, struct slab_sheaf *sh);

/* ---- the barn (barn.c) ---- */
/* Each node has its barn, shared by its CPUs: usl_get_barn is the calling
 * thread's node's (the one its CPU slot's sheaves are exchanged with; a
 * thread moved to another node meanwhile uses that node's). */
static inline struct usl_barn *usl_node_barn(struct kmem_cache *s, unsigned int nid)
{
	return &s->node[nid]->barn;
}
static inline struct usl_barn *usl_get_barn(struct kmem_cache *s)
{
	return usl_node_barn(s, usl_this_node());
}
/* One barn visit: give `give` (full or empty, may be NULL) and take a sheaf of
 * the kind `want` says (1 full, 0 empty, -1 none); what was taken, or NULL. */
USL_HIDDEN struct slab_sheaf *usl_barn_visit(struct kmem_cache *s, struct slab_sheaf *give, int want);
USL_HIDDEN struct slab_sheaf *usl_barn_get(struct kmem_cache *s, bool full);
/* A refill from slabs (the barn had no full sheaf): frees a few of the barn's
 * surplus empties once such refills keep coming. */
USL_HIDDEN void usl_barn_dry_refill(struct kmem_cache *s);
/* Fill the empty sheaf sh (of the cache's capacity) from a packed sheaf of
 * the barn; false if the barn has none. */
USL_HIDDEN bool usl_barn_unpack(struct kmem_cache *s, struct slab_sheaf *sh);
/* sh, full, is likely to be packed at the next barn visit: start the misses
 * on the objects packing writes (a sheaf's worth of frees ahead). */
USL_HIDDEN void usl_barn_pack_prefetch(struct kmem_cache *s, struct slab_sheaf *sh);
/* Does this node's barn hold full sheaves, as arrays or packed? An unlocked peek. */
static inline bool usl_barn_has_full(struct kmem_cache *s)
{
	struct usl_barn *barn = usl_get_barn(s);
	return __atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&barn->nr_packed, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&barn->nr_packed_old, __ATOMIC_RELAXED);
}
/* A sheaf we cannot keep: a full one to the barn, the rest flushed to slabs. */
USL_HIDDEN void usl_sheaf_give_back(struct kmem_cache *s, struct slab_sheaf *sh);

/* ---------------------------------------------------------------------------
 * The slot's sheaves, taken private by a slow path: one take, one put, in both
 * modes (rseq: a section for {main_size, main}, one 16-byte store, and one for
 * the spare; locked: under the slot's sheaf_lock). A taken main gets its count
 * back from main_size; a put one gives it to main_size.
 * (pcs.c)
 */
struct usl_pcs {
	struct kmem_cache_cpu *lc;   /* locked mode: the slot */
	struct slab_sheaf *main, *spare;
};

/* Rotate p[0..n) left by k: p[k] comes to p[0]. */
static inline void usl_sheaf_rotate(void **p, unsigned int n, unsigned int k)
{
	usl_sheaf_reverse(p, k);
	usl_sheaf_reverse(p + k, n - k);
	usl_sheaf_reverse(p, n);
}

/* A main taken out of its slot with count size and oldest object at lo (the
 * slot's main_size and main_lo: a ring, objects[(lo + i) mod capacity]): its
 * objects turned to objects[0..size), its size set, as every sheaf off a slot
 * is. */
static inline void usl_sheaf_detached(struct slab_sheaf *m, unsigned int size, unsigned int lo)
{
	unsigned int cap = m->capacity;
	usl_assert(size <= cap && (lo < cap || !lo));
	if (lo + size <= cap) {
		if (lo)
			memmove(m->objects, m->objects + lo, size * sizeof(void *));
	} else {                     /* wrapped: rotate the ring left by lo */
		usl_sheaf_rotate(m->objects, cap, lo);
	}
	m->size = size;
}

/* A slot's main taken out by a holder of its sheaf_lock (locked mode) or its
 * flush mark: the sheaf gets its count back from main_size, and the slot is
 * left {0, usl_empty_sheaf}. */
static inline struct slab_sheaf *usl_slot_main_detach(struct kmem_cache_cpu *c)
{
	struct slab_sheaf *m = c->main;
	usl_assert(usl_held(&c->sheaf_lock) || __atomic_load_n(&c->lock, __ATOMIC_RELAXED));
	usl_assert(m == &usl_empty_sheaf ? !c->main_size && !c->main_cap && !c->main_lo
	                                 : c->main_size <= m->capacity && c->main_cap == m->capacity);
	if (m != &usl_empty_sheaf)
		usl_sheaf_detached(m, c->main_size, c->main_lo);
	c->main_size = 0;
	c->main_lo = 0;
	c->main_cap = 0;
	c->main_delay = 0;
	c->main = &usl_empty_sheaf;
	return m;
}

/* Objects waiting in a slot's main (a racy read, for counts). */
static inline unsigned int usl_slot_main_objects(const struct kmem_cache_cpu *c)
{
	return __atomic_load_n(&c->main_size, __ATOMIC_RELAXED);
}

/* The ring's place i after main_lo in a slot's main (locked mode, under its
 * sheaf_lock). */
static inline unsigned int usl_slot_place(const struct kmem_cache_cpu *c, unsigned int i)
{
	unsigned int at = (unsigned int)c->main_lo + i;
	return at >= c->main_cap ? at - c->main_cap : at;
}

/* SLAB's array cache (array.c): b->main made non-empty by a refill of
 * batchcount, or given room by a flush of batchcount; false when out of
 * memory. */
USL_HIDDEN bool usl_array_refill(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp);
USL_HIDDEN bool usl_array_make_room(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp);

/* False: this thread has no slot (rseq not registered); use the cpu-slab paths. */
USL_HIDDEN bool usl_pcs_take(struct kmem_cache *s, struct usl_pcs *b);
/* Install what b holds where the slot's places are still empty; give the rest back. */
USL_HIDDEN void usl_pcs_put(struct kmem_cache *s, struct usl_pcs *b);

/* ---- the barn's helpers for the whole-cache work (barn.c, for sweep.c) ---- */
USL_HIDDEN void usl_barn_set(unsigned int *counter, unsigned int v);   /* a counter peeked unlocked */
/* Under barn->lock: pop a sheaf (full or empty); move up to n full sheaves to
 * the private list *out; the full sheaves above max_full unused for a decay
 * interval (at most max) to *out; both stacks of packed sheaves, detached
 * (the young one returned, the old one in *old). */
USL_HIDDEN struct slab_sheaf *usl_barn_take_locked(struct usl_barn *barn, bool full);
USL_HIDDEN void usl_barn_take_full_locked(struct usl_barn *barn, unsigned int n, struct usl_list *out);
USL_HIDDEN void usl_barn_decay_due_locked(struct kmem_cache *s, struct usl_barn *barn, uint64_t now, unsigned int max,
                                          struct usl_list *out);
USL_HIDDEN void **usl_barn_take_packed_locked(struct usl_barn *barn, void ***old);
/* With no lock held: every sheaf of a private list to slabs, the empties kept
 * in the barn or freed; a stack of packed sheaves to slabs, what could not be
 * flushed back on the barn's young stack. */
USL_HIDDEN void usl_barn_flush_list(struct kmem_cache *s, struct usl_barn *barn, struct usl_list *list);
USL_HIDDEN void usl_barn_flush_packed_all(struct kmem_cache *s, struct usl_barn *barn, void **head);

#endif /* USL_PERCPU_SHEAF_H */
