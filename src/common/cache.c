/* cache.c - a cache's life: kmem_cache_create (checks, merging, the
 * structure, its layout, publication), the walks by id, the sheaf class
 * caches and uslab's other own caches, destroy ("Objects remaining"), shrink
 * and the small queries. The list and the locks are registry.c's; the ids
 * and the path a cache takes path.c's; fork's handlers fork.c's; giving
 * memory back across the caches reclaim.c's.
 * Locks: the registry's (registry.c): usl_sheaf_classes_lock and
 * usl_cache_cache_lock across the creation of a sheaf class cache or of the
 * kmem_cache cache, then slab_mutex (usl_registry_lock). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../percpu/percpu.h"
#include "../testing.h"
#include "common.h"
#include "registry.h"

/* Set by the kmalloc layer's uslab_rcu_init (src/kmalloc/rcu.c): waits for the
 * objects kfree_rcu queued, before a cache is destroyed. One of the calls that
 * run up (docs/ARCHITECTURE.md, "Calls that run up"). */
void (*usl_rcu_destroy_wait)(void);

static struct kmem_cache *cache_cache;          /* holds the other caches' structures */

#define SLAB_FLAGS_PERMITTED (SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON | SLAB_NO_MERGE | \
                              SLAB_HWCACHE_ALIGN | SLAB_STORE_USER | SLAB_PANIC | SLAB_TRACE | SLAB_ORDERED | \
                              SLAB_VIRTUAL | SLAB_TYPESAFE_BY_RCU)

/* Once, before the first cache exists: the fork handlers, and the hooks by
 * which the layers below reach this one (docs/ARCHITECTURE.md, "Calls that
 * run up"). */
static pthread_once_t common_once = PTHREAD_ONCE_INIT;
static void common_init(void)
{
	usl_fork_init();
	usl_decay_init(usl_decay_sweep, usl_mode_tick);
	__atomic_store_n(&usl_slub_before_grow, usl_reclaim_before_grow, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_percpu_slow_tick, usl_decay_tick, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_percpu_oom, usl_reclaim_for_retry, __ATOMIC_RELEASE);
}


/* Cache structures (each with its node and per-CPU slots: bytes) are objects
 * of one internal cache, "kmem_cache", as in the kernel; its own structure is
 * a page block. Packed, the structures spread over the L1 sets and cost little
 * RSS; a page each would put the first line of every cache in one set
 * (docs/PERFORMANCE.md has the numbers). */
static __thread bool making_cache_cache;

static struct kmem_cache *cache_struct_alloc(size_t bytes)
{
	struct kmem_cache *cc = __atomic_load_n(&cache_cache, __ATOMIC_ACQUIRE);
	if (usl_unlikely(!cc)) {
		if (making_cache_cache) {        /* "kmem_cache" itself */
			struct kmem_cache *s = usl_meta_alloc(bytes);
			if (s)
				s->meta = s;
			return s;
		}
		usl_lock(&usl_cache_cache_lock);
		if (!cache_cache) {
			making_cache_cache = true;
			/* 64 KiB slabs (113 structures): a program's classes, made
			 * as it first uses each size, sit in one or two slabs near
			 * the range's start instead of a slab every 14 caches wherever
			 * the heap had grown to (each pinning its table and page-map
			 * pages after the program frees the rest). Carving touches
			 * only the pages used. */
			cc = usl_cache_create("kmem_cache", (unsigned int)bytes, USL_CACHELINE, 0, NULL, NULL,
			                      USL_CACHE_INTERNAL, 64 * 1024);
			making_cache_cache = false;
			__atomic_store_n(&cache_cache, cc, __ATOMIC_RELEASE);
		}
		cc = cache_cache;
		usl_unlock(&usl_cache_cache_lock);
		if (!cc)
			return NULL;
	}
	/* The engine's path: an internal cache has no sheaves. */
	struct kmem_cache *s = usl_slub_alloc(cc, GFP_KERNEL | __GFP_NOWARN);
	if (s)
		memset(s, 0, bytes);
	return s;
}

static void cache_struct_free(struct kmem_cache *s)
{
	if (s->oslots) {                     /* its fast paths kept from its freed slots */
		usl_path_retire(s);
		usl_oslab_free_retired(s);
		usl_owned_cache_free(s);
	}
	if (usl_is_slab(s))
		usl_slab_cache_free(s);
	for (unsigned int nid = 0; nid < USL_MAX_NODES && s->node[nid]; nid++)
		pthread_mutex_destroy(&s->node[nid]->list_lock);
	if (s->id)                           /* no slab of s is left: nothing names it */
		usl_id_release(s);
	if (s->stats) {
		usl_meta_free(s->stats);
		s->stats = NULL;
	}
	if (s->meta)
		usl_meta_free(s->meta);
	else
		usl_slub_free(cache_cache, usl_virt_to_slab(s), s);
}

static struct kmem_cache *create_failed(const char *name, slab_flags_t flags, const char *why, unsigned long v)
{
	usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_create(%s): %s (%lu)", name ? name : "(null)", why, v);
	if (flags & SLAB_PANIC) {
		usl_report(USLAB_ERR_NONE, "SLAB_PANIC: aborting");
		abort();
	}
	return NULL;
}

#define SLAB_DEBUG_FLAGS USL_SLAB_DEBUG_FLAGS

/* Cache merging (the kernel's find_mergeable): a new cache without a
 * constructor, debug flags, SLAB_NO_MERGE or creator's layout arguments becomes
 * an alias of the newest compatible cache: one whose stride holds the new
 * object, fits its alignment and wastes less than a word on it. kmalloc
 * classes are never the target: the kernel gives them a usercopy region as wide
 * as the object, and with hardened usercopy (distributions' kernels) a cache
 * with one is unmergeable, so a program's caches never share slabs with
 * kmalloc's and malloc's objects (docs/ARCHITECTURE.md, "Merging"). */
#define SLAB_NEVER_MERGE (SLAB_DEBUG_FLAGS | SLAB_NO_MERGE | SLAB_ORDERED | SLAB_VIRTUAL | USL_SLAB_INTERNAL | \
                          SLAB_TYPESAFE_BY_RCU)

static bool cache_unmergeable(const struct kmem_cache *s)
{
	return (s->flags & (SLAB_NEVER_MERGE | USL_SLAB_KMALLOC)) || s->ctor || s->refcount <= 0;
}

struct merge_want {
	unsigned int size, align;
};

static bool mergeable(const struct kmem_cache *s, void *arg)
{
	const struct merge_want *w = arg;
	return !cache_unmergeable(s) && w->size <= s->size && !(s->size & (w->align - 1)) &&
	       s->size - w->size < sizeof(void *);
}

/* Under slab_mutex (USLAB_NOMERGE checked by the caller): the newest cache
 * that can serve. */
static struct kmem_cache *find_mergeable(unsigned int size, unsigned int align, slab_flags_t flags)
{
	usl_assert(usl_registry_is_held());
	size = USL_ALIGN(size, (unsigned int)sizeof(void *));
	align = usl_slub_alignment(flags, align, size);
	struct merge_want want = { USL_ALIGN(size, align), align };
	return usl_registry_find(mergeable, &want);
}

/* The names merged caches were created under (statistics show them as the
 * kernel's sysfs aliases), newest last; under slab_mutex. A destroy of an
 * alias drops the newest name of its cache (the caller's pointer is the
 * cache's own, so which name it was is not known); the cache's destroy, all. */
#define MAX_ALIAS_NAMES 1024
static struct {
	char name[USL_NAME_MAX];
	struct kmem_cache *target;
} alias_names[MAX_ALIAS_NAMES];
static unsigned int nr_alias_names;

static void alias_name_drop(const struct kmem_cache *s, bool all)
{
	for (unsigned int i = nr_alias_names; i-- > 0;) {
		if (alias_names[i].target != s)
			continue;
		memmove(&alias_names[i], &alias_names[i + 1], (nr_alias_names - i - 1) * sizeof(alias_names[0]));
		nr_alias_names--;
		if (!all)
			return;
	}
}

int usl_cache_aliases_each(int (*fn)(const char *name, struct kmem_cache *target, void *arg), void *arg)
{
	int r = 0;
	usl_registry_lock();
	for (unsigned int i = 0; i < nr_alias_names && !r; i++)
		r = fn(alias_names[i].name, alias_names[i].target, arg);
	usl_registry_unlock();
	return r;
}

/* Under slab_mutex: s serves a new cache of size bytes too, under name. The
 * readers of object_size (zeroing) load it atomically. */
static void make_alias(struct kmem_cache *s, unsigned int size, const char *name)
{
	usl_assert(usl_registry_is_held());
	s->refcount++;
	if (nr_alias_names < MAX_ALIAS_NAMES) {
		strncpy(alias_names[nr_alias_names].name, name, USL_NAME_MAX - 1);
		alias_names[nr_alias_names].name[USL_NAME_MAX - 1] = 0;
		alias_names[nr_alias_names++].target = s;
	}
	if (size > s->object_size)
		__atomic_store_n(&s->object_size, size, __ATOMIC_RELAXED);
	if (USL_ALIGN(size, (unsigned int)sizeof(void *)) > s->inuse)
		__atomic_store_n(&s->inuse, USL_ALIGN(size, (unsigned int)sizeof(void *)), __ATOMIC_RELAXED);
	__atomic_store_n(&usl_free_entries[s->id].ksize, (uint32_t)usl_cache_ksize(s), __ATOMIC_RELAXED);
}

/* The internal cache holding sheaves of this capacity (uslab-sheaf-<bytes>),
 * made on first use; NULL if it cannot be. */
static struct kmem_cache *sheaf_class_cache_get(unsigned int capacity)
{
	int cls = usl_sheaf_class(capacity);
	struct kmem_cache *c;

	if (cls < 0)
		return NULL;
	usl_lock(&usl_sheaf_classes_lock);
	if (!usl_sheaf_class_caches[cls]) {
		char name[32];
		unsigned int bytes = usl_sheaf_class_bytes(cls);
		usl_name_number(name, sizeof(name), "uslab-sheaf-", bytes);
		__atomic_store_n(&usl_sheaf_class_caches[cls],
		                 usl_cache_create(name, bytes, 64, SLAB_NO_MERGE, NULL, NULL, USL_CACHE_INTERNAL, 0),
		                 __ATOMIC_RELEASE);
	}
	c = usl_sheaf_class_caches[cls];
	usl_unlock(&usl_sheaf_classes_lock);
	return c;
}

/* The internal caches of the owned front end's bitmap metadata
 * (uslab-bitmap-<bytes>), one per size, made on first use. */
static struct {
	size_t bytes;
	struct kmem_cache *cache;
} oslab_classes[24];

static struct kmem_cache *oslab_cache_get(size_t bytes)
{
	struct kmem_cache *c = NULL;
	usl_lock(&usl_sheaf_classes_lock);
	for (size_t i = 0; i < sizeof(oslab_classes) / sizeof(oslab_classes[0]); i++) {
		if (oslab_classes[i].bytes == bytes) {
			c = oslab_classes[i].cache;
			break;
		}
		if (!oslab_classes[i].bytes) {
			char name[40];
			usl_name_number(name, sizeof(name), "uslab-bitmap-", (unsigned int)bytes);
			c = usl_cache_create(name, (unsigned int)bytes, 64, SLAB_NO_MERGE, NULL, NULL, USL_CACHE_INTERNAL, 0);
			if (c) {
				oslab_classes[i].cache = c;
				oslab_classes[i].bytes = bytes;
			}
			break;
		}
	}
	usl_unlock(&usl_sheaf_classes_lock);
	return c;
}

/* SLAB's off-slab index arrays: objects of internal caches of a power of two
 * bytes each (uslab-slab-idx-<bytes>), made on first use. */
static struct kmem_cache *slab_idx_cache[32];

static struct kmem_cache *slab_idx_cache_get(unsigned int bytes)
{
	unsigned int lg = 31u - (unsigned int)__builtin_clz(bytes);
	struct kmem_cache *c;
	usl_lock(&usl_sheaf_classes_lock);
	if (!slab_idx_cache[lg]) {
		char name[32];
		usl_name_number(name, sizeof(name), "uslab-slab-idx-", bytes);
		slab_idx_cache[lg] = usl_cache_create(name, bytes, 16, SLAB_NO_MERGE, NULL, NULL, USL_CACHE_INTERNAL, 0);
	}
	c = slab_idx_cache[lg];
	usl_unlock(&usl_sheaf_classes_lock);
	return c;
}

/* Where s keeps its flag word (a two-word cache, freestate.h usl_two_word: free's
 * fast path writes the marker without reading it): beside the free pointer,
 * for a cache with per-CPU sheaves, no constructor, no debugging and no free
 * pointer placed by its creator whose objects hold both words; else offset
 * (none). */
static unsigned int flag_word(const struct kmem_cache *s, bool sheaves)
{
	if (!sheaves || usl_keeps_state(s) || (s->flags & (SLAB_DEBUG_FLAGS | USL_SLAB_INTERNAL)) || s->offset >= s->inuse)
		return s->offset;
	if (s->offset + 2 * sizeof(void *) <= s->inuse)
		return s->offset + (unsigned int)sizeof(void *);
	if (s->offset >= sizeof(void *))
		return s->offset - (unsigned int)sizeof(void *);
	return s->offset;
}

/* A step of usl_cache_create that failed: what it says, and the number it
 * gives (create_failed). */
struct create_err {
	const char *why;
	unsigned long val;
};

static bool step_failed(struct create_err *err, const char *why, unsigned long val)
{
	err->why = why;
	err->val = val;
	return false;
}

/* The creator's arguments, checked. */
static bool create_check(const char *name, unsigned int size, unsigned int align, slab_flags_t flags,
                         const struct kmem_cache_args *args, struct create_err *err)
{
	if (!name || !*name)
		return step_failed(err, "a cache needs a name", 0);
	if (size == 0)
		return step_failed(err, "object size is 0", size);
	if (size > usl_order_bytes(USL_MAX_ORDER) / 2)
		return step_failed(err, "object size above the largest slab object", size);
	if (align & (align - 1))
		return step_failed(err, "alignment is not a power of two", align);
	if (align > USL_PAGE_SIZE)
		return step_failed(err, "alignment above the page size", align);
	if (flags & ~SLAB_FLAGS_PERMITTED)
		return step_failed(err, "unknown flags", flags & ~SLAB_FLAGS_PERMITTED);
	if ((flags & SLAB_TYPESAFE_BY_RCU) && !__atomic_load_n(&usl_free_slab_after_gp, __ATOMIC_ACQUIRE))
		return step_failed(err, "SLAB_TYPESAFE_BY_RCU before uslab_rcu_init (whose grace periods would it wait for?)",
		                   0);
	if ((flags & SLAB_TYPESAFE_BY_RCU) && (flags & SLAB_VIRTUAL))
		return step_failed(err, "SLAB_TYPESAFE_BY_RCU with SLAB_VIRTUAL (not supported yet)", 0);
	if (args) {
		if (args->useroffset > size || args->usersize > size - args->useroffset)
			return step_failed(err, "useroffset + usersize above the object size",
			                   (unsigned long)args->useroffset + args->usersize);
		if (args->use_freeptr_offset &&
		    (args->freeptr_offset % sizeof(void *) || args->freeptr_offset > size - sizeof(void *) ||
		     size < sizeof(void *)))
			return step_failed(err, "freeptr_offset is not a word-aligned offset inside the object",
			                   args->freeptr_offset);
	}
	return true;
}

/* Merge: an existing cache s can serve this one (the kernel's find_mergeable;
 * an alias with one more reference), or NULL. */
static struct kmem_cache *create_merge(const char *name, unsigned int size, unsigned int align, slab_flags_t flags,
                                       void (*ctor)(void *), enum usl_cache_kind kind)
{
	struct kmem_cache *s;

	if (kind != USL_CACHE_USER || ctor || (flags & SLAB_NEVER_MERGE) || usl_opt.nomerge == 1)
		return NULL;
	usl_registry_lock();
	s = find_mergeable(size, align, flags);
	if (s)
		make_alias(s, size, name);
	usl_registry_unlock();
	return s;
}

/* The cache structure (with a node structure for every node id, after it)
 * and its id, and the counters' rows with USLAB_STATS. */
static struct kmem_cache *create_struct(struct create_err *err)
{
	size_t head = USL_ALIGN(sizeof(struct kmem_cache), (size_t)USL_CACHELINE);
	/* An odd number of cache lines: packed structures then start in different
	 * L1 sets (512 bytes apart, every eighth would share one). */
	size_t bytes = USL_ALIGN(head + usl_nr_nodes * sizeof(struct kmem_cache_node), (size_t)USL_CACHELINE);
	if (!((bytes / USL_CACHELINE) & 1))
		bytes += USL_CACHELINE;
	struct kmem_cache *s = cache_struct_alloc(bytes);
	if (!s) {
		step_failed(err, "out of memory for the cache structure", bytes);
		return NULL;
	}
	if (!usl_id_assign(s)) {
		if (!usl_slots)
			step_failed(err, "no address space for the per-CPU slots (bytes for 256 ids)",
			            256 * usl_slot_stride);
		else
			step_failed(err, "no cache id left: live caches at the limit", usl_ids_max() - 1);
		cache_struct_free(s);
		return NULL;
	}
	if (usl_opt.stats) {                 /* the event counters: a row per CPU */
		size_t rows = (size_t)usl_nr_cpus * USL_STAT_STRIDE * sizeof(uint64_t);
		if (!(s->stats = usl_meta_alloc(rows))) {
			step_failed(err, "out of memory for its counters (USLAB_STATS)", rows);
			cache_struct_free(s);
			return NULL;
		}
	}
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = (struct kmem_cache_node *)((char *)s + head) + nid;
		pthread_mutex_init(&n->list_lock, NULL);
		usl_list_init(&n->partial);
		usl_list_init(&n->full);
		usl_list_init(&n->owned);
		usl_list_init(&n->orphans);
		usl_list_init(&n->retired);
		s->node[nid] = n;
	}
	return s;
}

/* The owned front end for s (percpu/owned.c): slabs of at least 64 KiB (the
 * chunk map's grain) and 32 objects, no order fallback below that, the
 * slots and the bitmap cache. */
static bool owned_setup(struct kmem_cache *s, struct create_err *err)
{
	unsigned int order = s->order;
	while (order < USL_MAX_ORDER &&
	       (order < USL_OSLAB_MIN_ORDER || usl_order_bytes(order) / s->size < 32))
		order++;
	if (order < USL_OSLAB_MIN_ORDER || usl_engine_set_order(s, order) != 0 || s->order < USL_OSLAB_MIN_ORDER)
		return step_failed(err, "no owned slab order fits the object size", s->size);
	s->min_order = s->order;
	if (!(s->oslab_cache = oslab_cache_get(usl_oslab_bytes((s->objects + 63) / 64))))
		return step_failed(err, "out of memory for its bitmaps' cache", s->objects);
	if (usl_owned_cache_init(s) != 0)
		return step_failed(err, "out of memory for its owned slots", usl_nr_cpus);
	return true;
}

/* Layout: the engine's sizing of s (SLUB's, or SLAB's with
 * USLAB_ALLOCATOR=slab), USLAB_DEBUG's 'O', the flag word, the slab order
 * asked for, and the sheaves. */
static bool create_layout(struct kmem_cache *s, const struct kmem_cache_args *args, slab_flags_t env_debug,
                          unsigned int sheaf_capacity, size_t slab_bytes, struct create_err *err)
{
	bool internal = s->flags & USL_SLAB_INTERNAL;

	if (usl_slub_cache_init(s, args) != 0)
		return step_failed(err, "no slab order fits the object size", s->object_size);
	/* USLAB_DEBUG's 'O': no red zones, poison or tracks from it where they
	 * would raise the slab order an object needs (the kernel's
	 * disable_higher_order_debug). */
	if ((env_debug & (SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER)) && usl_debug_order_off() &&
	    usl_bytes_order(s->size) > usl_bytes_order(s->object_size)) {
		s->flags &= ~(env_debug & (SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER));
		usl_slub_cache_init(s, args);    /* a smaller stride fits where the larger did */
	}
	/* USLAB_ALLOCATOR=slab: SLAB's slabs for every cache but debug caches
	 * and uslab's own (docs/ARCHITECTURE.md, "SLAB: the second engine"). */
	bool slab_engine = usl_opt.allocator == USL_ENGINE_SLAB && !internal &&
	                   !(s->flags & (SLAB_DEBUG_FLAGS | SLAB_VIRTUAL));   /* (SLAB_VIRTUAL: engine/slub/newslab.c) */
	/* (A creator that placed the free pointer chose the one word uslab may
	 * write in a free object: one word.) Before SLAB places its arrays. */
	s->flag_off = flag_word(s, (sheaf_capacity || slab_engine) && !(args && args->use_freeptr_offset));
	if (slab_engine && usl_slab_cache_init(s) != 0)
		return step_failed(err, "no slab order fits the object size (SLAB) or no memory for its arrays",
		                   s->object_size);
	if (slab_bytes) {                    /* before the cache is on the list */
		unsigned int order = usl_bytes_order(slab_bytes);
		if (order > USL_MAX_ORDER)
			order = USL_MAX_ORDER;
		if (usl_opt.max_order_given && order > (unsigned int)usl_opt.max_order)
			order = (unsigned int)usl_opt.max_order;
		usl_engine_set_order(s, order);  /* keeps the calculated one if this cannot be */
	}
	if (usl_is_slab(s) && (s->mgmt & USL_MGMT_PLACE) == USL_MGMT_OFF &&
	    !(s->freelist_cache = slab_idx_cache_get(usl_slab_freelist_bytes(s))))
		return step_failed(err, "out of memory for its index arrays' cache", usl_slab_freelist_bytes(s));
	if (usl_is_slab(s)) {
		/* SLAB's per-CPU arrays are its sheaves, always: capacity = limit
		 * (at least what the creator asked). */
		unsigned int want = args ? args->sheaf_capacity : 0;
		if (want > s->limit && want <= USL_SHEAF_MAX_CAPACITY) {
			s->limit = want;
			s->batchcount = (want + 1) / 2;
			usl_slab_tune(s, s->limit, s->batchcount, s->shared);
		}
		sheaf_capacity = s->limit;
	}
	/* The owned front end (USLAB_FRONT=owned): every cache of a user or of
	 * kmalloc but debug caches, SLAB's and caches whose creator asked for
	 * sheaves. */
	bool owned = !internal && !slab_engine &&
	             !(s->flags & (USL_SLAB_DEBUG_FLAGS | SLAB_VIRTUAL | SLAB_TYPESAFE_BY_RCU)) && !s->stats &&
	             !(args && args->sheaf_capacity) && usl_owned_front();
	if (owned) {
		if (!owned_setup(s, err))
			return false;
		sheaf_capacity = 0;
	}
	/* An unpredictable layout (docs/ARCHITECTURE.md, "Hardening"): a random
	 * carving and refill order, and delayed reuse in SLUB's sheaves. Not in
	 * uslab's own caches, nor in debug caches (their frees are checked, and
	 * a quarantine is theirs to ask for). */
	s->random = usl_opt.random && !internal && !(s->flags & (SLAB_ORDERED | USL_SLAB_DEBUG_FLAGS));
	s->reuse_delay = s->random && !slab_engine && sheaf_capacity
	                 ? usl_reuse_delay_for(sheaf_capacity) : 0;
	if (sheaf_capacity) {
		s->sheaf_capacity = sheaf_capacity;
		s->sheaf_cache = sheaf_class_cache_get(sheaf_capacity);
		if (!s->sheaf_cache)
			return step_failed(err, "out of memory for its sheaves", sheaf_capacity);
		usl_sheaf_cache_init(s);
	}
	usl_path_set(s, owned);
	return true;
}

/* Publish: on the list, where walks and merges see it. */
static void create_publish(struct kmem_cache *s)
{
	usl_registry_lock();
	usl_registry_add(s);
	__atomic_store_n(&s->published, 1, __ATOMIC_RELEASE);
	usl_registry_unlock();
}

/* The kernel's create_cache, in steps: check the arguments, merge into an
 * existing cache where one can serve, else a structure, its layout and
 * publication. Every failure is reported once, naming the step's reason. */
struct kmem_cache *usl_cache_create(const char *name, unsigned int size, unsigned int align, slab_flags_t flags,
                                    void (*ctor)(void *), const struct kmem_cache_args *args,
                                    enum usl_cache_kind kind, size_t slab_bytes)
{
	bool internal = kind == USL_CACHE_INTERNAL;
	struct create_err err = { NULL, 0 };
	struct kmem_cache *s;
	unsigned int sheaf_capacity = 0;

	usl_ensure_init();
	pthread_once(&common_once, common_init);
	if (!create_check(name, size, align, flags, args, &err))
		goto fail;
	/* USLAB_DEBUG's letters for this name (debug caches are never merged). */
	slab_flags_t env_debug = internal ? 0 : usl_debug_flags_for(name) & ~flags;
	flags |= env_debug;
	/* Layout the creator chose (user-copy window, free pointer place, sheaf
	 * capacity) keeps a cache to itself, as in the kernel (7.0: an explicit
	 * sheaf capacity sets SLAB_NO_MERGE). */
	if (args && (args->usersize || args->use_freeptr_offset || args->sheaf_capacity))
		flags |= SLAB_NO_MERGE;
	if ((s = create_merge(name, size, align, flags, ctor, kind)))
		return s;
	/* Sheaves (docs/ARCHITECTURE.md, "Sheaves and barns"): never for debug
	 * caches or our own; the creator's sheaf_capacity, else USLAB_SHEAVES
	 * (default on). */
	if (!internal && !(flags & SLAB_DEBUG_FLAGS)) {
		unsigned int want = args ? args->sheaf_capacity : 0;
		bool delayed = usl_opt.random && !(flags & SLAB_ORDERED) && usl_opt.allocator != USL_ENGINE_SLAB;
		if ((want || usl_opt.sheaves != 0) && !(sheaf_capacity = usl_sheaf_capacity_for(size, want, delayed))) {
			step_failed(&err, "sheaf_capacity too large", want);
			goto fail;
		}
	}
	if (!(s = create_struct(&err)))
		goto fail;
	s->object_size = size;
	s->align = align;
	s->flags = flags | (internal ? USL_SLAB_INTERNAL : 0) | (kind == USL_CACHE_KMALLOC ? USL_SLAB_KMALLOC : 0);
	s->ctor = ctor;
	s->refcount = 1;
	strncpy(s->name, name, sizeof(s->name) - 1);
	if (!create_layout(s, args, env_debug, sheaf_capacity, slab_bytes, &err)) {
		cache_struct_free(s);
		goto fail;
	}
	create_publish(s);
	return s;
fail:
	return create_failed(name, flags, err.why, err.val);
}


int usl_cache_for_each(int (*fn)(struct kmem_cache *s, void *arg), void *arg)
{
	int r = 0;
	usl_registry_walk_begin();
	/* Up to the highest id given, not the table's 64Ki entries; a cache
	 * made while the walk runs may be missed, as one made just after it. */
	for (size_t id = 1; id < __atomic_load_n(&usl_ids_end, __ATOMIC_RELAXED) && !r; id++) {
		struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
		if (s && __atomic_load_n(&s->published, __ATOMIC_ACQUIRE))
			r = fn(s, arg);
	}
	usl_registry_walk_end();
	return r;
}

/* The name in parentheses: uslab.h also defines kmem_cache_create as a macro
 * choosing between this and the arguments form. */
struct kmem_cache *(kmem_cache_create)(const char *name, unsigned int size, unsigned int align,
                                       slab_flags_t flags, void (*ctor)(void *))
{
	if (flags & USL_SLAB_DEBUG_FLAGS)
		usl_stack_init();        /* its owner tracks' stacks and names; no lock held */
	return usl_cache_create(name, size, align, flags, ctor, NULL, USL_CACHE_USER, 0);
}

struct kmem_cache *uslab_kmem_cache_create_args(const char *name, unsigned int size,
                                                struct kmem_cache_args *args, slab_flags_t flags)
{
	if (flags & USL_SLAB_DEBUG_FLAGS)
		usl_stack_init();
	if (!args)
		return usl_cache_create(name, size, 0, flags, NULL, NULL, USL_CACHE_USER, 0);
	return usl_cache_create(name, size, args->align, flags, args->ctor, args, USL_CACHE_USER, 0);
}

USL_SLOW_PATH void usl_report_dead_cache(const char *fn, const struct kmem_cache *s,
                                         const char *what)
{
	usl_report(USLAB_ERR_BAD_ARG, "%s(%p): not a live cache (destroyed already?); %s", fn, (const void *)s, what);
}

void kmem_cache_destroy(struct kmem_cache *s)
{
	unsigned long remaining;

	if (!s)
		return;
	/* Objects kfree_rcu queued are freed first (the kmalloc layer's hook,
	 * set by uslab_rcu_init: kvfree_rcu_barrier), as the kernel's destroy
	 * waits for them: they are not objects remaining. */
	void (*rcu_wait)(void) = __atomic_load_n(&usl_rcu_destroy_wait, __ATOMIC_ACQUIRE);
	if (rcu_wait && usl_cache_live(s))
		rcu_wait();
	/* A debug cache's quarantined objects go back first, with no lock held
	 * (their release may report). */
	if (s && usl_cache_live(s) && (s->flags & USL_SLAB_DEBUG_FLAGS))
		usl_debug_quarantine_flush(s);
	usl_registry_lock();
	if (!usl_cache_live(s)) {
		usl_registry_unlock();
		usl_report_dead_cache("kmem_cache_destroy", s, "nothing done");
		return;
	}
	if ((s->flags & USL_SLAB_KMALLOC) && s->refcount <= 1) {
		usl_registry_unlock();
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_destroy(%s): a kmalloc cache (or a cache already destroyed "
		           "that was its alias); not destroyed", s->name);
		return;
	}
	if (--s->refcount > 0) {     /* an alias: drop one reference */
		alias_name_drop(s, false);
		usl_registry_unlock();
		return;
	}
	usl_cache_flush_all(s);
	remaining = usl_engine_objects_in_use(s);
	if (remaining) {
		/* The kernel's "Objects remaining on __kmem_cache_shutdown()": the
		 * cache stays alive so nothing that still points into it breaks. */
		s->refcount = 1;
		usl_registry_unlock();
		usl_report(USLAB_ERR_LEAK, "kmem_cache_destroy(%s): Objects remaining: %lu; cache not destroyed",
		           s->name, remaining);
		if (s->flags & USL_SLAB_DEBUG_FLAGS)
			usl_debug_leaks(s);      /* each object, with its owner */
		return;
	}
	usl_registry_del(s);
	alias_name_drop(s, true);
	__atomic_store_n(&s->published, 0, __ATOMIC_RELEASE);
	usl_registry_unlock();
	usl_registry_walks_wait();        /* no walk that may have seen it still runs */
	usl_engine_release(s);
	cache_struct_free(s);
	usl_pages_purge(false);
}

/* Sheaves first (flushed and freed): their objects may land on this CPU's cpu
 * slab, flushed next. */

/* SLAB's tunables (the kernel's slabinfo write, do_tune_cpucache): checked,
 * then the node arrays resized and every CPU's array flushed, so the next
 * refill makes one of the new limit. 0, or -EINVAL / -ENOMEM with nothing
 * changed. */
int usl_cache_tune(struct kmem_cache *s, unsigned int limit, unsigned int batch, unsigned int shared)
{
	if (!usl_is_slab(s))
		return -EINVAL;
	if (limit < 1 || batch < 1 || batch > limit || limit > USL_SHEAF_MAX_CAPACITY ||
	    (unsigned long)shared * batch > USL_SHEAF_MAX_CAPACITY)
		return -EINVAL;
	struct kmem_cache *cls = usl_sheaf_class(limit) >= 0 ? sheaf_class_cache_get(limit) : NULL;
	if (usl_sheaf_class(limit) >= 0 && !cls)
		return -ENOMEM;
	usl_registry_lock();
	int r = usl_slab_tune(s, limit, batch, shared);
	if (!r) {
		__atomic_store_n(&s->sheaf_cache, cls, __ATOMIC_RELAXED);
		__atomic_store_n(&s->sheaf_capacity, limit, __ATOMIC_RELAXED);
	}
	usl_registry_unlock();
	if (!r)
		usl_sheaf_flush_all(s);
	return r;
}

const char *uslab_front(void)
{
	usl_ensure_init();
	if (usl_opt.allocator == USL_ENGINE_SLAB)
		return "arrays";                 /* SLAB's array caches, whatever USLAB_FRONT says */
	if (usl_owned_front())
		return "owned";
	return usl_opt.sheaves == 0 ? "cpuslab" : "sheaves";
}

const char *uslab_allocator(void)
{
	usl_ensure_init();
	return usl_opt.allocator == USL_ENGINE_SLAB ? "slab" : "slub";
}

/* 0 when every slab was released, 1 when some remain (slabs with live
 * objects), -1 for a NULL or destroyed cache. */
/* A cache argument of fn that is NULL or destroyed: reported, false. */
static bool cache_arg_ok(struct kmem_cache *s, const char *fn)
{
	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL cache", fn);
		return false;
	}
	if (!usl_cache_live(s)) {
		usl_report_dead_cache(fn, s, "nothing done");
		return false;
	}
	return true;
}

int kmem_cache_shrink(struct kmem_cache *s)
{
	if (!cache_arg_ok(s, "kmem_cache_shrink"))
		return -1;
	if (s->flags & USL_SLAB_DEBUG_FLAGS)
		usl_debug_quarantine_flush(s);
	usl_cache_flush_all(s);
	bool left = usl_engine_release(s);
	usl_pages_purge(true);
	return left ? 1 : 0;
}

int uslab_cache_shrink_node(struct kmem_cache *s, int node)
{
	if (!cache_arg_ok(s, "uslab_cache_shrink_node"))
		return -EINVAL;
	if (!usl_node_valid(node)) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_cache_shrink_node(%s): node %d does not exist (node ids 0-%u); "
		           "nothing done", s->name, node, usl_nr_nodes - 1);
		return -EINVAL;
	}
	if (s->flags & USL_SLAB_DEBUG_FLAGS)
		usl_debug_quarantine_flush(s);
	usl_cache_flush_all(s);
	bool left = usl_engine_release_node(s, (unsigned int)node);
	usl_pages_purge(true);
	return left ? 1 : 0;
}

int kmem_cache_validate(struct kmem_cache *s)
{
	if (!cache_arg_ok(s, "kmem_cache_validate"))
		return -1;
	if (!(s->flags & USL_SLAB_DEBUG_FLAGS))
		return -1;
	return usl_debug_validate(s);
}

unsigned int kmem_cache_size(struct kmem_cache *s)
{
	if (s && !usl_cache_live(s)) {
		usl_report_dead_cache("kmem_cache_size", s, "returning 0");
		return 0;
	}
	return s ? __atomic_load_n(&s->object_size, __ATOMIC_RELAXED) : 0;
}

const char *kmem_cache_name(struct kmem_cache *s)
{
	if (s && !usl_cache_live(s)) {
		usl_report_dead_cache("kmem_cache_name", s, "returning NULL");
		return NULL;
	}
	return s ? s->name : NULL;
}
