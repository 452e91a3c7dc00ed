/* slub.h - the SLUB engine (src/engine/slub/), as the layers above see it: the slab
 * state machine behind the per-CPU slot's cpu slab (cpu slab -> cpu partial ->
 * node partial -> new slab), remote frees, detached-freelist bulk, flush and
 * shrink, sizing. It calls the pages, arch and platform layers only; what it
 * must tell the layers above goes through usl_slub_before_grow. Locks (in
 * order): flush_mutex, a slot's lock (locked mode), a node's list_lock; the
 * page provider's locks inside them. docs/ARCHITECTURE.md, "Slab states". */
#ifndef USL_SLUB_H
#define USL_SLUB_H

#include "../../freestate.h"
#include "../../types.h"
#include "stat.h"

/* Hook: called by new_slab, for a cache that is not uslab's own, when the page
 * provider has no free block of the slab's order (it would grow the range).
 * The common layer sets it to take back the barns' surplus first; a no-op
 * until then. */
extern void (*usl_slub_before_grow)(void) USL_HIDDEN;

/* A thread that takes objects out of reach (sheaves off a barn, on their way
 * back to slabs) says so around it: a new slab that cannot be had while
 * another thread holds such objects waits for them (up to a second) and tries
 * again, so a range at its limit does not fail an allocation that their
 * slabs can serve. */
USL_HIDDEN void usl_slub_flush_begin(void);
USL_HIDDEN void usl_slub_flush_end(void);

/* ---- sizing (sizing.c) ---- */
/* Sizes, free pointer offset, alignment, slab order, the object-index divisor,
 * partial limits, the slots' tids and the node; -1 if no slab order fits. */
USL_HIDDEN int usl_slub_cache_init(struct kmem_cache *s, const struct kmem_cache_args *args);
/* Another slab order for s (malloc's classes), before its first use. */
USL_HIDDEN int usl_slub_set_order(struct kmem_cache *s, unsigned int order);
/* The cpu partial lists' aim in objects (sysfs cpu_partial), and the slab
 * count it gives (the kernel's slub_set_cpu_partial). */
USL_HIDDEN void usl_slub_set_cpu_partial(struct kmem_cache *s, unsigned int objects);
/* The alignment a cache gets (the kernel's calculate_alignment). */
USL_HIDDEN unsigned int usl_slub_alignment(slab_flags_t flags, unsigned int align, unsigned int object_size);

/* ---- single objects (slub.c) ---- */
/* The cpu-slab path (no zeroing): the freelist section, then the slow path. */
USL_HIDDEN void *usl_slub_alloc(struct kmem_cache *s, gfp_t gfp);
/* One object from a slab of the node (not a debug cache, nor one of uslab's
 * own: those keep to node 0). */
USL_HIDDEN void *usl_slub_alloc_node(struct kmem_cache *s, gfp_t gfp, unsigned int node);
/* After the freelist section failed: locked mode's pop (NULL when empty), and
 * the slow path (a new cpu slab; NULL with a report unless __GFP_NOWARN). */
USL_HIDDEN void *usl_slub_alloc_fast_locked(struct kmem_cache *s);
USL_HIDDEN void *usl_slub_alloc_slow(struct kmem_cache *s, gfp_t gfp);
/* Free x, a checked object of s in slab: the free section, then r's cases. */
USL_HIDDEN void usl_slub_free(struct kmem_cache *s, struct slab *slab, void *x);
/* The free section (usl_rseq_free) returned r != USL_RS_OK for x: a double
 * free (reported under fn), locked mode's push, or a slab not this CPU's. */
USL_HIDDEN void usl_slub_free_slow(struct kmem_cache *s, struct slab *slab, void *x, int r, const char *fn);
USL_HIDDEN void usl_report_double_free(struct kmem_cache *s, void *x, const char *fn);
/* x is an object start of s beyond its page map count (pages/pages.h): false
 * if it was never handed out (a free of it must be refused). */
USL_HIDDEN bool usl_slub_handed_out(struct kmem_cache *s, const void *x);
/* Why x cannot be freed to s (NULL: any cache), reported under fn. */
USL_HIDDEN void usl_report_bad_free(const char *fn, struct kmem_cache *s, const void *x, struct slab *slab)
	USL_SLOW_PATH;
/* Locked mode: the slot this thread uses (a CPU hint), and the hint re-read. */
USL_HIDDEN struct kmem_cache_cpu *usl_slub_hint_slot(struct kmem_cache *s);
USL_HIDDEN struct kmem_cache_cpu *usl_slub_hint_refresh(struct kmem_cache *s);

/* ---- counts for statistics (flush.c) ---- */
/* The node: its slabs and objects, its partial slabs and their free and
 * in-use objects (under list_lock: a snapshot). */
struct usl_node_counts {
	unsigned long nr_slabs, total_objects, nr_partial, partial_free, partial_inuse;
};
USL_HIDDEN void usl_slub_node_counts(struct kmem_cache *s, unsigned int nid, struct usl_node_counts *out);
/* One node's counts added into a sum. */
static inline void usl_node_counts_add(struct usl_node_counts *sum, const struct usl_node_counts *one)
{
	sum->nr_slabs += one->nr_slabs;
	sum->total_objects += one->total_objects;
	sum->nr_partial += one->nr_partial;
	sum->partial_free += one->partial_free;
	sum->partial_inuse += one->partial_inuse;
}
/* One CPU's slot: whether it has a cpu slab, and its cpu partial slabs (racy
 * reads, as the kernel's sysfs files make). */
USL_HIDDEN void usl_slub_cpu_counts(struct kmem_cache *s, unsigned int cpu, bool *has_slab,
                                    unsigned int *partial_slabs);

/* ---- debug caches (debug.c) ---- */
/* The layout of a debug cache (object_size, align, flags and ctor set): red
 * zones, free pointer, tracks, padding; its stride. creator_fp: the creator
 * placed the free pointer (kmem_cache_args.freeptr_offset). */
USL_HIDDEN unsigned int usl_debug_layout(struct kmem_cache *s, bool creator_fp);
/* Allocation and free of a debug cache's object, checked: orig is the size the
 * caller asked for (kmalloc, malloc; 0: the object size), caller the address
 * the allocator's entry point was called from (the owner track). */
USL_HIDDEN void *usl_debug_alloc(struct kmem_cache *s, gfp_t gfp, size_t orig, uintptr_t caller);
USL_HIDDEN void usl_debug_free(struct kmem_cache *s, void *x, const char *fn, uintptr_t caller);
/* Every slab checked; the number of reports made. */
USL_HIDDEN int usl_debug_validate(struct kmem_cache *s);
/* The quarantine's objects of s back on their slabs (destroy, shrink). */
USL_HIDDEN void usl_debug_quarantine_flush(struct kmem_cache *s);
USL_HIDDEN void usl_debug_fork_lock(void);      /* objmap_lock and the quarantine's q_lock */
USL_HIDDEN void usl_debug_fork_unlock(void);
/* kmem_cache_destroy found objects in use: each one reported with its owner. */
USL_HIDDEN void usl_debug_leaks(struct kmem_cache *s);
/* The usable bytes of x, an allocated object of a debug kmalloc cache (its
 * requested size when kept), and a new requested size for it (krealloc in
 * place: the kmalloc red zone follows). */
USL_HIDDEN size_t usl_debug_ksize(struct kmem_cache *s, void *x);
USL_HIDDEN bool usl_debug_is_object(struct kmem_cache *s, const void *x);   /* an object start of s? */
/* A sized free (free_sized, sized operator delete) of x with size: reported,
 * with x's owner, when it is not the size x was allocated with (kept for
 * kmalloc and malloc classes with U; else more than the object). */
USL_HIDDEN void usl_debug_check_size(struct kmem_cache *s, void *x, size_t size, const char *fn);
USL_HIDDEN void usl_debug_resize(struct kmem_cache *s, void *x, size_t n);
/* The owner summaries (the kernel's alloc_calls, free_calls, alloc_traces,
 * free_traces): the tracks of the objects in use, grouped by call site
 * (by_stack: and call stack), with their counts, ages (ms), pids, CPUs and
 * nodes. In a mapping of its own (list->bytes; no malloc: it is made under
 * list_lock), given back with usl_debug_locations_free. 0, or -ENOMEM. */
#define USL_LOC_CPUS 1024           /* CPUs beyond these are counted as the last */
struct usl_location {
	uintptr_t addr;                  /* the call site; 0: none recorded */
	uint32_t handle;                 /* its stack in the depot (by_stack), or 0 */
	uint32_t waste;                  /* kmalloc: bytes of the object beyond the request */
	unsigned long count;
	uint64_t sum_age, min_age, max_age;
	int32_t min_pid, max_pid;
	uint64_t nodes;                  /* a bit per node id (0..63) */
	uint64_t cpus[USL_LOC_CPUS / 64];
};
struct usl_loc_list {
	struct usl_location *loc;
	size_t n, bytes;
};
USL_HIDDEN int usl_debug_locations(struct kmem_cache *s, bool free_track, bool by_stack, struct usl_loc_list *list);
USL_HIDDEN void usl_debug_locations_free(struct usl_loc_list *list);

/* ---- bulk (bulk.c) ---- */
/* All or nothing (no zeroing): nr, or 0 with nothing kept. */
USL_HIDDEN int usl_slub_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);
/* Detached freelists: every entry checked (bad ones and duplicates reported
 * under fn and left out), NULLs skipped; s NULL: objects of any cache. */
USL_HIDDEN void usl_slub_free_bulk_as(const char *fn, struct kmem_cache *s, size_t nr, void **p);
USL_HIDDEN void usl_slub_free_bulk(struct kmem_cache *s, size_t nr, void **p);

/* ---- flush and shrink (flush.c) ---- */
/* Hold every slot of s (rseq: marks and one membarrier; locked mode: only
 * flush_mutex, the caller takes the slot locks it needs); false, with a
 * report, when membarrier fails. */
USL_HIDDEN bool usl_slub_hold_slots(struct kmem_cache *s);
USL_HIDDEN void usl_slub_release_slots(struct kmem_cache *s);
/* Every CPU's cpu slab and cpu partial slabs to the node lists. */
USL_HIDDEN void usl_slub_flush_cpus(struct kmem_cache *s);
/* Free every empty node partial slab and order the rest for reuse (the
 * kernel's __kmem_cache_do_shrink); true if slabs remain. */
USL_HIDDEN bool usl_slub_release(struct kmem_cache *s);
/* The same for one node's partial list; true if the node has slabs left. */
USL_HIDDEN bool usl_slub_release_node(struct kmem_cache *s, unsigned int nid);
/* Objects allocated and not freed, counted from the slabs (exact when the
 * cache is quiescent and its CPUs flushed). */
USL_HIDDEN unsigned long usl_slub_objects_in_use(struct kmem_cache *s);
/* fork(): flush_mutex, and one cache's slot locks and list_lock. */
USL_HIDDEN void usl_slub_fork_lock_global(void);
USL_HIDDEN void usl_slub_fork_unlock_global(void);
USL_HIDDEN void usl_slub_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_slub_fork_unlock(struct kmem_cache *s);

/* ---- the owned front end's slabs (oslab.c) ---- */
/* A new owned slab of s on node for owner (CPU + 1; 0: an orphan): its local
 * words all free, its chunk-map entries written; NULL if no memory. */
USL_HIDDEN struct usl_oslab *usl_oslab_new(struct kmem_cache *s, unsigned int node, unsigned int owner);
/* A wholly free slab nobody can reach any more: its pages back, its
 * metadata kept for the cache's next slab (a late announce may touch it). */
USL_HIDDEN void usl_oslab_discard(struct kmem_cache *s, struct usl_oslab *h);
/* Destroy: the kept metadata of s's discarded slabs freed. */
USL_HIDDEN void usl_oslab_free_retired(struct kmem_cache *s);
/* h's owner (CPU + 1, 0 an orphan, 0xffff given up). */
USL_HIDDEN void usl_oslab_set_owner(struct usl_oslab *h, unsigned int owner);
/* Remote bits into local ones (a bit in both: a double free, reported);
 * true if any local bit is set. For the holder of h's local words. */
USL_HIDDEN bool usl_oslab_merge(struct usl_oslab *h);
USL_HIDDEN unsigned int usl_oslab_free_count(const struct usl_oslab *h);
USL_HIDDEN void *usl_oslab_take_one(struct usl_oslab *h);
/* A free of object idx (x) of h from a CPU that does not own it: one locked
 * bit set (a bit set already, here or in the local word: a double free,
 * reported), then the owner told (usl_oslab_announce). */
USL_HIDDEN void usl_oslab_free_remote(struct usl_oslab *h, unsigned int idx, unsigned int owner, const void *x,
                                      const char *fn);
USL_HIDDEN void usl_oslab_announce(struct usl_oslab *h, unsigned int owner);
USL_HIDDEN void usl_oslab_reannounce(struct usl_oslab *h);
USL_HIDDEN void usl_oslab_report_double(const struct usl_oslab *h, const void *x, const char *fn);
/* A free into an orphan, under list_lock: 0 done (or reported), -1 it is
 * owned again (the caller starts again). */
USL_HIDDEN int usl_oslab_free_orphan(struct usl_oslab *h, unsigned int idx, const void *x, const char *fn);
/* One object from the node's orphans, or a new orphan slab (threads with no
 * slot to use); NULL if no memory. */
USL_HIDDEN void *usl_oslab_alloc_orphan(struct kmem_cache *s, unsigned int node);
/* An orphan with free objects of the node, now owner's (merged); NULL if none. */
USL_HIDDEN struct usl_oslab *usl_oslab_adopt(struct kmem_cache *s, unsigned int node, unsigned int owner);
/* h (its slot held by the caller) given up: an orphan, or discarded if
 * wholly free and discard_all or the node has enough orphans. */
USL_HIDDEN void usl_oslab_orphan(struct kmem_cache *s, struct usl_oslab *h, bool discard_all);
USL_HIDDEN void usl_oslab_each_owned(struct kmem_cache *s, unsigned int owner,
                                     void (*fn)(struct kmem_cache *, struct usl_oslab *, void *), void *arg);
USL_HIDDEN void usl_oslab_discard_empty(struct kmem_cache *s);
/* The wholly free orphans discarded; true if slabs remain (shrink's answer). */
USL_HIDDEN bool usl_oslab_release(struct kmem_cache *s);
struct usl_node_counts;
/* The node's counts for statistics (flush.c's usl_slub_node_counts). */
USL_HIDDEN void usl_oslab_node_counts(struct kmem_cache *s, unsigned int nid, struct usl_node_counts *out);
/* Objects handed out and not freed (local and remote bits). */
USL_HIDDEN unsigned long usl_oslab_in_use(struct kmem_cache *s);

#endif /* USL_SLUB_H */
