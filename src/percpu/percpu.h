/* percpu.h - the per-CPU layer (src/percpu/): object arrays on the slot, as the
 * layers above see them, for both engines. SLUB: per CPU a main and a spare
 * sheaf (arrays of free object pointers), per node a barn of full and empty
 * sheaves; SLAB: the main sheaf is its array cache (array.c). The fast paths
 * are the sheaf sections of arch/rseq_x86.h (pop and push on the main sheaf),
 * and everything here runs when a section fails. It refills from and flushes to
 * the engines through engine/engine.h, and tells the layer above of its slow paths
 * through usl_percpu_slow_tick. Locks: a slot's sheaf_lock (locked mode), then
 * a barn's lock; neither is held across a call into the engine.
 * docs/ARCHITECTURE.md, "The per-CPU protocol" and "Sheaves and barns". */
#ifndef USL_PERCPU_H
#define USL_PERCPU_H

#include "../arch/arch.h"
#include "../freestate.h"
#include "../pages/pages.h"
#include "../types.h"

/* The zero-capacity sheaf a slot's main points at while no sheaf is installed:
 * both fast paths see it as empty and full, and need no NULL check. */
extern struct slab_sheaf usl_empty_sheaf USL_HIDDEN;

/* Hook: called at the end of each slow path that took a slot's sheaves private
 * (an allocation from an empty main, a free into a full one). The common layer
 * sets it to its decay tick; a no-op until then. */
extern void (*usl_percpu_slow_tick)(void) USL_HIDDEN;
/* Hook: an owned refill found no memory; true when the common layer gave
 * memory back and the refill should be tried once more (false until set). */
extern bool (*usl_percpu_oom)(void) USL_HIDDEN;

/* ---- set-up (prefill.c) ---- */
/* The kernel's calculate_sheaf_capacity: by object size (with delayed reuse,
 * 124 below 1 KiB: the delay's 32 waiting leave a pop or push the kernel's
 * sheaf and more between refills), at least what the creator asked for,
 * rounded up so the sheaf fills its size class; 0 if no class holds it. */
USL_HIDDEN unsigned int usl_sheaf_capacity_for(unsigned int object_size, unsigned int requested, bool delayed);
/* Sheaf structures come in USL_SHEAF_CLASSES sizes, each an internal cache of
 * the common layer: the class of a sheaf of this capacity (-1: none), and its
 * bytes. */
#define USL_SHEAF_CLASSES 16
/* Delayed reuse: the most objects a freed one waits behind (s->reuse_delay:
 * usl_reuse_delay_for). */
#define USL_REUSE_DELAY_MAX 32
/* The delay for sheaves of this capacity: 32, at most half of them (a pop
 * takes the oldest, and only while more than the delay wait: pcs.c). */
static inline unsigned int usl_reuse_delay_for(unsigned int capacity)
{
	return capacity / 2 < USL_REUSE_DELAY_MAX ? capacity / 2 : USL_REUSE_DELAY_MAX;
}
/* The largest sheaf (a prefilled one of its own): 512 KiB. */
#define USL_SHEAF_MAX_CAPACITY ((524288u - (unsigned int)offsetof(struct slab_sheaf, objects)) / 8u)
USL_HIDDEN int usl_sheaf_class(unsigned int capacity);
USL_HIDDEN unsigned int usl_sheaf_class_bytes(int cls);
/* Each class's cache once the common layer made it (NULL before): sheaves of
 * a capacity whose class has one come from it, the others are page blocks. */
extern struct kmem_cache *usl_sheaf_class_caches[USL_SHEAF_CLASSES] USL_HIDDEN;
/* The barn of s (s->sheaf_capacity and s->sheaf_cache set; the slots hold
 * usl_empty_sheaf as main from the id's assignment). */
USL_HIDDEN void usl_sheaf_cache_init(struct kmem_cache *s);

/* ---- the slow paths behind the sections (sheaf.c) ---- */
/* The pop section failed (empty main, marked slot, locked mode, no CPU). */
USL_HIDDEN void *usl_sheaf_alloc(struct kmem_cache *s, gfp_t gfp);
/* A sheaf pop's object without its free marker (usl_marker_pop, types.h): it
 * was pushed twice or the sheaf overwritten. Reported under fn; the caller
 * keeps it out of use and allocates another. */
USL_HIDDEN void usl_report_pop_refused(struct kmem_cache *s, const void *obj, const char *fn) USL_SLOW_PATH;
/* The push section failed (full main, marked slot, locked mode, no CPU); x is a
 * checked object of s. */
USL_HIDDEN void usl_sheaf_free(struct kmem_cache *s, void *x);
/* All or nothing: nr, or 0 with nothing kept (no zeroing); with hardening on
 * every object's marker word is cleared, as a pop leaves it. */
USL_HIDDEN int usl_sheaf_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);
/* p[0..nr) are checked objects of s (no NULLs). */
USL_HIDDEN void usl_sheaf_free_bulk(struct kmem_cache *s, size_t nr, void **p);

/* ---- kfree_rcu's sheaves (barn.c) ---- */
/* Can objects of s wait for a grace period in a sheaf of its own, which then
 * goes whole to the barn? SLUB with sheaves, no debugging, one node. */
static inline bool usl_sheaf_rcu_ok(const struct kmem_cache *s)
{
	return s->sheaf_capacity && s->engine == USL_ENGINE_SLUB && !(s->flags & USL_SLAB_DEBUG_FLAGS) &&
	       !(s->path & USL_PATH_NUMA) && s->path != USL_PATH_OWNED && usl_nr_nodes == 1;
}
/* An empty sheaf of s's capacity (the barn's, or new); NULL if no memory. */
USL_HIDDEN struct slab_sheaf *usl_sheaf_rcu_get(struct kmem_cache *s);
/* sh, from usl_sheaf_rcu_get, holds objects of s that are free now, each
 * with the free state a push leaves (freestate.h): to the barn if full,
 * else flushed to slabs. */
USL_HIDDEN void usl_sheaf_rcu_put(struct kmem_cache *s, struct slab_sheaf *sh);

/* ---- whole-cache work (sweep.c) ---- */
/* Every CPU's sheaves and the barn's to slabs, and the sheaves freed. */
USL_HIDDEN void usl_sheaf_flush_all(struct kmem_cache *s);
/* Before growth: full sheaves above the barn's level back to slabs. */
USL_HIDDEN void usl_sheaf_trim_barn(struct kmem_cache *s);
/* The decay sweep's part for one cache (docs/ARCHITECTURE.md, "Decay").
 * Returns how many sheaves it sent back to slabs (0: nothing to give back now). */
USL_HIDDEN unsigned int usl_sheaf_decay(struct kmem_cache *s, uint64_t now);
/* Does the barn hold what a later sweep would give back (full sheaves, empties
 * above the kernel's ten)? An unlocked peek. */
USL_HIDDEN bool usl_sheaf_decay_pending(struct kmem_cache *s);
/* SLAB's cache_reap for one cache (array.c): every per-CPU array untouched
 * since the last reap drained by a fifth of its limit, then the engine's node
 * part (usl_slab_reap). What it gave back. */
USL_HIDDEN unsigned int usl_array_reap(struct kmem_cache *s, uint64_t now);
/* fork(): the barn lock and, in locked mode, every slot's sheaf lock. */
USL_HIDDEN void usl_sheaf_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_sheaf_fork_unlock(struct kmem_cache *s);

/* ---- the owned front end (owned.c; docs/ARCHITECTURE.md, "The owned front end") ---- */
/* The word a slot's cursor points at when it has none: always 0, never
 * written (a pop commits only a word it found non-zero). */
extern uint64_t usl_zero_word USL_HIDDEN;
/* Is the owned front end this process's (USLAB_FRONT=owned, rseq mode, one
 * node, no counters, a CPU with BMI1)? Decided once, before the first cache. */
USL_HIDDEN bool usl_owned_front(void);
/* s's owned slots (usl_nr_cpus of them, in a metadata region); -1 if no memory. */
USL_HIDDEN int usl_owned_cache_init(struct kmem_cache *s);
USL_HIDDEN void usl_owned_cache_free(struct kmem_cache *s);
/* The pop section failed: the slot taken, the cursor moved or refilled (the
 * inbox merged, the avail stack, an orphan adopted, a new slab), one object
 * taken; the node's orphans when the slot cannot be taken. NULL: no memory. */
USL_HIDDEN void *usl_owned_alloc_slow(struct usl_oslot *slots);
/* The same for a malloc class (the tagged pop): a failure also goes to
 * usl_percpu_malloc_nomem, the malloc layer's hook (USLAB_OOM). */
USL_HIDDEN void *usl_owned_alloc_slow_malloc(struct usl_oslot *slots);
extern void (*usl_percpu_malloc_nomem)(struct kmem_cache *s) USL_HIDDEN;
/* free of x, whose chunk-map entry is not 0, when the local section did not
 * end it: again from the chunk map, then a remote or orphan free, or a report
 * under fn (a double free, not an object start, a slab given up). */
USL_HIDDEN void usl_owned_free_slow(void *x, const char *fn);
/* The first free bit of an unlisted owned slab, set by its owner's free:
 * the slab to its owner's inbox (listed at the owner's next refill). */
USL_HIDDEN void usl_owned_list(struct usl_oslab *h);
/* A double free the owner's section saw (the bit set): reported under fn. */
USL_HIDDEN void usl_owned_double(struct usl_oslab *h, const void *x, const char *fn) USL_SLOW_PATH;
/* nr objects of s into p (all or nothing: true), and nr objects freed by
 * pointer (each checked: an object of s, or of any owned cache with s NULL;
 * anything else reported under fn, NULLs skipped). */
USL_HIDDEN bool usl_owned_alloc_bulk(struct kmem_cache *s, size_t nr, void **p);
USL_HIDDEN void usl_owned_free_bulk(struct kmem_cache *s, size_t nr, void **p, const char *fn);
/* Every slot of s given up (mark + membarrier): its slabs orphaned, wholly
 * free ones discarded (shrink, malloc_trim, destroy). */
USL_HIDDEN void usl_owned_flush_all(struct kmem_cache *s);
/* The decay sweep's part for s: slots idle for two sweeps give their slabs
 * up (orphans; wholly free ones discarded while the node keeps another),
 * busy ones keep at most one wholly free slab. How many slots gave
 * something up; *pending set if a slot will be idle long enough at a later
 * sweep (the decay thread keeps sweeping for it). */
USL_HIDDEN unsigned int usl_owned_decay(struct kmem_cache *s, bool *pending);
/* fork(): every slot of s marked (once its taker, if any, released it), so
 * no slot is taken in the child; and unmarked in both processes after. */
USL_HIDDEN void usl_owned_fork_lock_global(void);    /* the flushers' mutex, first */
USL_HIDDEN void usl_owned_fork_unlock_global(void);
USL_HIDDEN void usl_owned_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_owned_fork_unlock(struct kmem_cache *s);

/* kmem_cache_alloc's fast path in the owned front end (and malloc's, with
 * the class table's tagged slots: usl_owned_pop_tagged): the lowest free bit
 * of the cursor word; the block is never touched. */
static USL_FAST_PATH void *usl_owned_pop(struct usl_oslot *slots)
{
	void *obj;

	USL_RSEQ_OWNED_POP(slots, "0", obj, slow);
	return obj;
slow:
	return usl_owned_alloc_slow(slots);
}

static USL_FAST_PATH void *usl_owned_pop_tagged(uintptr_t tagged)
{
	void *obj;

	USL_RSEQ_OWNED_POP(tagged, "1", obj, slow);
	return obj;
slow:
	return usl_owned_alloc_slow_malloc((struct usl_oslot *)(tagged - 1));
}

/* free's fast path for x (at offset off in the range), whose chunk-map
 * entry read e (not 0): the object
 * index from the slab's metadata line, then the local section (this CPU owns
 * the slab: one bit set, a double free found there); anything else to
 * usl_owned_free_slow. */
static USL_FAST_PATH void usl_owned_free_at(void *x, uintptr_t off, uint64_t e,
                                            const char *fn)
{
	struct usl_oslab *h = (struct usl_oslab *)(uintptr_t)e;
	uint32_t idx = usl_obj_index((uint32_t)off - h->start_off, h->div_inv, h->div_shift);
	if (usl_unlikely(idx >= h->objects))
		goto slow;
	USL_RSEQ_OWNED_FREE(h, idx, slow, dbl, first);
	return;
first:
	if (!__atomic_load_n(&h->listed, __ATOMIC_RELAXED))
		usl_owned_list(h);
	return;
dbl:                                         /* seen free by its owner: reported as it is */
	usl_owned_double(h, x, fn);
	return;
slow:
	usl_owned_free_slow(x, fn);
}

#endif /* USL_PERCPU_H */
