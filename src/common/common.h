/* common.h - the common layer (src/common/), as kmalloc and the malloc
 * override see it: the cache registry (ids, the caches by id, their slots and
 * object-check divisors), cache creation with merging, the object paths
 * (kmem_cache_alloc/free and their bulk forms, and freeing by pointer alone),
 * the decay sweep and memory release. It is to the layers below what the
 * kernel's mm/slab_common.c is to mm/slub.c. Locks (outermost first):
 * classes_lock (usl_cache_classes_lock: a layer above making and publishing
 * class caches), sheaf_classes_lock, cache_cache_lock, slab_mutex; then the
 * layers below. docs/ARCHITECTURE.md, "Layers" and "Locks, in order". */
#ifndef USL_COMMON_H
#define USL_COMMON_H

#include "../pages/pages.h"
#include "../platform/platform.h"
#include "../engine/engine.h"
#include "../freestate.h"
#include "../types.h"

/* ---- the registry (registry.c, cache.c) and the ids (path.c) ---- */
/* Caches by id: ids from 1, given at creation (the lowest free one, under
 * slab_mutex) and taken back when the structure is freed; usl_caches[0] is
 * NULL. Every cache's per-CPU slots, by id: cache id's usl_nr_cpus slots start
 * at usl_slots + id * usl_slot_stride (an odd number of 128-byte slots, so the
 * slots of one CPU spread over the L1 sets), mapped at the first cache's
 * creation. So malloc (from its table) and free (from the page map's id) reach
 * a CPU's slot without loading the cache. usl_free_entries[id] holds what free's
 * fast path needs of the cache, in one line: div_inv | div_shift << 32 for the
 * object check, the slots, and the free marker's secret, word offset and slab
 * block bits (free.c); and the usable size, for malloc_usable_size and
 * realloc; all 0 for no cache. */
struct usl_free_entry {
	uint64_t div;
	struct kmem_cache_cpu *slots;   /* s->cpu_slab */
	uintptr_t secret;            /* s->fp_secret */
	uint32_t fp_offset;          /* s->offset: the free marker's word */
	uint32_t blk_shift;          /* log2 of a slab block of the preferred order */
	uint32_t ksize;              /* an object's usable bytes (usl_cache_ksize) */
	uint8_t blind;               /* a two-word cache with hardening on: free writes the
	                                marker without reading it (usl_two_word) */
	uint8_t fast_path;           /* free's fast path takes the cache's objects: blind,
	                                not uslab's own, and the mode hardening alone
	                                (path.c's usl_path_set and usl_mode_tick keep it so) */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct usl_free_entry) == 64, "one entry: one line");
extern struct kmem_cache *usl_caches[USL_MAX_CACHES] USL_HIDDEN;
extern char *usl_slots USL_HIDDEN;
extern size_t usl_slot_stride USL_HIDDEN;
extern struct usl_free_entry usl_free_entries[USL_MAX_CACHES] USL_HIDDEN;
static inline struct kmem_cache_cpu *usl_id_slots(unsigned int id)
{
	return (struct kmem_cache_cpu *)(usl_slots + (size_t)id * usl_slot_stride);
}
/* The usable bytes of an object of s (ksize): all of its stride, unless the
 * free pointer lies beyond the object (a constructor's cache), then up to it.
 * A merge can raise inuse (make_alias), and usl_free_entries[id].ksize with it. */
static inline size_t usl_cache_ksize(const struct kmem_cache *s)
{
	unsigned int inuse = __atomic_load_n(&s->inuse, __ATOMIC_RELAXED);
	return s->offset >= inuse ? inuse : s->size;
}
/* The usable size of p if p starts an object of a user or kmalloc cache
 * without debugging (the page map and usl_free_entries, as free's fast path
 * checks it); 0 for anything else, which the caller's slow path sorts out. */
USL_HIDDEN size_t usl_obj_ksize(const void *p);
/* The cache whose slab holds the page of this entry, if kfree may free its
 * objects: NULL for a page that is not a slab, and for a slab of uslab's own
 * caches (cache structures, sheaves). */
static inline struct kmem_cache *usl_pagemap_user_cache(struct usl_pagemap_entry v)
{
	return v.objects & USL_PM_INTERNAL ? NULL : __atomic_load_n(&usl_caches[v.cache], __ATOMIC_ACQUIRE);
}
/* Is s a live cache? A destroyed cache's structure has id 0 (set before it is
 * freed), or its memory holds something else by now; either way usl_caches
 * does not name it. (Once its memory serves a new cache, it is that cache.)
 * Read on slow paths and by the calls that take a cache outside them. */
static inline bool usl_cache_live(const struct kmem_cache *s)
{
	unsigned int id = __atomic_load_n(&s->id, __ATOMIC_RELAXED);
	return id && id < USL_MAX_CACHES && __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE) == s;
}
/* Hook: with USLAB_STATS, called by every decay tick (the slow paths' and
 * counted frees', with no lock held; thread false) and by the decay thread
 * (thread true) whenever the last call's answer has passed: the milliseconds
 * until the statistics layer wants the next call (0: none wanted, and the
 * ticks' answers are not used). The statistics layer sets it to publish its
 * live view (stats/live.c); a no-op answering 0 until then. */
extern unsigned int (*usl_stats_tick)(bool thread) USL_HIDDEN;
/* fn(s, arg) for each published cache, by id, counted as a walk (a destroyed
 * cache is freed only when no walk runs; fn may allocate; it must not destroy
 * a cache); stops at the first non-zero result and returns it. */
USL_HIDDEN int usl_cache_for_each(int (*fn)(struct kmem_cache *s, void *arg), void *arg);
/* fn(name, target, arg) for each name a merged cache was created under, under
 * slab_mutex (fn must not allocate); stops at a non-zero result. */
USL_HIDDEN int usl_cache_aliases_each(int (*fn)(const char *name, struct kmem_cache *target, void *arg),
                                      void *arg);
/* "FN(P): not a live cache (destroyed already?)" and what was not done. */
USL_HIDDEN void usl_report_dead_cache(const char *fn, const struct kmem_cache *s, const char *what)
	USL_SLOW_PATH;
/* Is the object at offset off of a slab of s one of its object starts? */
static inline bool usl_obj_index_in(const struct kmem_cache *s, uint32_t off, unsigned int objects)
{
	return usl_obj_index(off, s->div_inv, s->div_shift) < objects;
}

/* Create a cache. kind: USL_CACHE_USER (may become an alias of a compatible
 * cache), USL_CACHE_KMALLOC (a kmalloc or malloc class: never destroyed, a
 * merge target) or USL_CACHE_INTERNAL (uslab's own: no sheaves, never merged).
 * slab_bytes: 0 for the calculated slab order, else the smallest order that
 * holds that many bytes (malloc's classes; bounded by USLAB_MAX_ORDER if
 * given). NULL with a report on bad arguments; SLAB_PANIC aborts. */
enum usl_cache_kind { USL_CACHE_USER, USL_CACHE_KMALLOC, USL_CACHE_INTERNAL };
USL_HIDDEN struct kmem_cache *usl_cache_create(const char *name, unsigned int size, unsigned int align,
                                               slab_flags_t flags, void (*ctor)(void *),
                                               const struct kmem_cache_args *args, enum usl_cache_kind kind,
                                               size_t slab_bytes);
/* The lock a layer above holds while it makes class caches and publishes
 * them (outermost: usl_cache_create takes the others inside it). */
USL_HIDDEN void usl_cache_classes_lock(void);
USL_HIDDEN void usl_cache_classes_unlock(void);
/* Non-zero while this thread holds slab_mutex or the classes lock: a report
 * handler that mallocs then must not make a malloc class (it would take them
 * again). */
extern __thread int usl_registry_held USL_HIDDEN;
/* Every CPU's sheaves and cpu slab, and the barn's sheaves, back to the slabs
 * (shrink, destroy, malloc_trim). */
USL_HIDDEN void usl_cache_flush_all(struct kmem_cache *s);
/* One sweep of every cache (barn and CPU decay) and of the page provider's
 * old free blocks. 1: it gave something back, or a barn still holds sheaves a
 * later sweep gives back; 0: nothing to give now or later; -1: the registry
 * was busy (try later). */
USL_HIDDEN int usl_decay_sweep(uint64_t now);

/* ---- the decay schedule and thread (decay.c) ---- */
/* The sweep it runs (the registry's usl_decay_sweep) and the switch of free's
 * count (usl_mode_tick, which keeps the entries' fast_path flags with the mode),
 * given once by common_init: the schedule sits above the registry. */
USL_HIDDEN void usl_decay_init(int (*sweep)(uint64_t now), void (*tick)(bool on));
/* Called by every 256th free by pointer on a thread, and by the per-CPU
 * layer's slow paths (its hook): every 16th call may start the decay thread
 * (with USLAB_STATS every call until it runs, and every call ticks the live
 * view); at most every half decay interval one caller wakes the thread's
 * sweeps, or, without the thread, sweeps every cache and the page provider
 * itself. */
USL_HIDDEN void usl_decay_tick(void);
/* An allocation that found no memory: what uslab holds free given back
 * (malloc_trim's release), unless this thread holds a uslab lock; true when
 * the caller should try once more (reclaim.c). */
USL_HIDDEN bool usl_reclaim_for_retry(void);
/* fork()'s child: no thread, and its first tick sweeps whatever the parent's
 * clock said. locks_held: the forking thread holds uslab locks (a signal
 * handler's fork), so the thread's lock is left as it is. */
USL_HIDDEN void usl_decay_after_fork(bool locks_held);
/* A fork whose thread holds uslab locks: the decay thread kept out of its
 * sweeps (bounded wait), and let go in the parent. */
USL_HIDDEN void usl_decay_fork_hold(void);
USL_HIDDEN void usl_decay_fork_unhold(void);
/* Start the decay thread now if it may run at all (USLAB_BACKGROUND, not a
 * vfork child, a thread not started yet); with USLAB_STATS whatever the
 * heap's size: the statistics layer's constructor, whose live view it keeps
 * current. */
USL_HIDDEN void usl_decay_thread_start(void);

/* SLAB's tunables of s set at run time (cache.c): 0, or -EINVAL (not a SLAB
 * cache, or limit < 1, batch outside [1, limit], too large) or -ENOMEM. */
USL_HIDDEN int usl_cache_tune(struct kmem_cache *s, unsigned int limit, unsigned int batch, unsigned int shared);

/* ---- the object paths (alloc.c, free.c, bulk.c) ---- */
/* x is the start of an object of s (the free check; ksize, krealloc). */
USL_HIDDEN bool usl_cache_obj_ok(struct kmem_cache *s, const void *x);
/* Free a slab object, a large block or a mapping known only by its pointer
 * (kfree, free); anything else is reported under fn and ignored. */
USL_HIDDEN void usl_free_ptr(void *x, const char *fn);
USL_HIDDEN void usl_free(void *x);   /* usl_free_ptr(x, "free") */
/* USL_MODE_TICK on or off in usl_opt.mode, and every cache's
 * usl_free_entries fast_path flag with it (path.c). */
USL_HIDDEN void usl_mode_tick(bool on);
/* The same for a free that names the block's size (free_sized, sized
 * operator delete): a debug cache's block is checked against it. */
USL_HIDDEN void usl_free_sized(void *x, size_t size, const char *fn);
/* A sheaf pop's object that does not carry its free marker: reported under
 * fn, kept out of use, and another allocated instead (alloc.c). */
USL_HIDDEN void *usl_pop_refused(struct kmem_cache *s, gfp_t gfp, void *obj, const char *fn) USL_SLOW_PATH;
/* The malloc override's start-up area: blocks there are never freed, and
 * usl_free_ptr ignores them. */
USL_HIDDEN void usl_free_ignore_area(const void *lo, size_t len);
/* "FN: P is not an allocated kmalloc block ...; ignored" or "... is not a
 * uslab pointer; ignored". */
USL_HIDDEN void usl_report_bad_ptr(const char *fn, const void *p) USL_SLOW_PATH;
/* A double free the free marker showed (x is free already, wherever it is;
 * free, the bulk frees, kfree_rcu): reported, naming fn; nothing freed. */
USL_HIDDEN void usl_marker_double_free(struct kmem_cache *s, void *x, const char *fn) USL_SLOW_PATH;
/* kmem_cache_destroy's wait for kfree_rcu's queued objects: NULL until
 * uslab_rcu_init (the kmalloc layer, src/kmalloc/rcu.c) sets it. */
extern void (*usl_rcu_destroy_wait)(void) USL_HIDDEN;

#endif /* USL_COMMON_H */
