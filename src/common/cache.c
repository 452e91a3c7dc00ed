/* cache.c - the cache registry: kmem_cache_create checks and merging, the
 * cache ids and the slot area they index (usl_slots), the sheaf class caches,
 * destroy ("Objects remaining"), shrink, the decay sweep, malloc_trim's
 * release and the out-of-memory reclaim, and the fork handlers, which take
 * every lock of the library (C stdio's list lock first).
 * Locks: classes_lock (held by a layer above across its usl_cache_create
 * calls), sheaf_classes_lock and cache_cache_lock (held across the creation of
 * a sheaf class cache or of the kmem_cache cache), then slab_mutex; entry_lock
 * (the entries' fast_path flags and the mode) and reclaim_lock (the reclaim's
 * state, never held across it) are leaves. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../percpu/percpu.h"
#include "../testing.h"
#include "common.h"

/* Set by the kmalloc layer's uslab_rcu_init (src/kmalloc/rcu.c): waits for the
 * objects kfree_rcu queued, before a cache is destroyed. One of the calls that
 * run up (docs/ARCHITECTURE.md, "Layers"). */
void (*usl_rcu_destroy_wait)(void);

static pthread_mutex_t classes_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t slab_mutex = PTHREAD_MUTEX_INITIALIZER;
/* Walks of the caches (statistics) count themselves in `walkers` (under
 * walk_lock, which is not held while they call out: the callback may
 * allocate, and an allocation may create a class cache); a destroyed cache's
 * structure is freed only once no walk that may have seen it is running, and
 * fork waits for none to run. A mutex and a count rather than a read-write
 * lock: a forked child releases what its parent's prepare took, which a
 * read-write lock's writer check (glibc) does not allow. */
static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t walk_done = PTHREAD_COND_INITIALIZER;
static unsigned int walkers;         /* under walk_lock */

static __thread unsigned int walks_here;   /* this thread's walks in progress */

static void walks_wait(void)         /* walk_lock held: all but this thread's own */
{
	while (walkers > walks_here)
		pthread_cond_wait(&walk_done, &walk_lock);
}
static struct usl_list cache_list = { &cache_list, &cache_list };
static struct kmem_cache *cache_cache;          /* holds the other caches' structures */
static pthread_mutex_t cache_cache_lock = PTHREAD_MUTEX_INITIALIZER;   /* its creation */

#define SLAB_FLAGS_PERMITTED (SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON | SLAB_NO_MERGE | \
                              SLAB_HWCACHE_ALIGN | SLAB_STORE_USER | SLAB_PANIC | SLAB_TRACE | SLAB_ORDERED | \
                              SLAB_VIRTUAL | SLAB_TYPESAFE_BY_RCU)

static pthread_mutex_t sheaf_classes_lock = PTHREAD_MUTEX_INITIALIZER;   /* usl_sheaf_class_caches[] */

/* fork(): take every allocator lock in the documented order (classes_lock,
 * sheaf_classes_lock, cache_cache_lock, slab_mutex, flush_mutex, each cache's
 * sheaf locks and barn lock, its slot locks and list_lock, start_lock,
 * pages_lock, mappings_lock, then the platform's init_lock, report_lock and the
 * report queue's lock), so the child of a multithreaded parent finds them all
 * free.
 *
 * Two exceptions (docs/ARCHITECTURE.md, "fork"):
 * - C stdio's list lock comes first, as in glibc's own fork, which takes it
 *   before its malloc locks: a thread in fflush(NULL) holds it while it waits
 *   for a stream whose holder is inside malloc (getline), so a fork that held
 *   the allocator's locks while it waited for the list lock would close a
 *   circle. glibc resets the lock in the child of a multithreaded parent
 *   itself; otherwise the child handler lets go of it.
 * - A thread that forks while it holds a uslab lock (its signal handler
 *   interrupted an allocation) takes nothing: it cannot take what it holds,
 *   and the code it interrupted goes on in the parent and in the child alike,
 *   releasing what it holds. The decay thread is kept out of its sweeps
 *   meanwhile. glibc does the same for a process with one thread. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern char __libc_single_threaded __attribute__((weak));

static __thread bool fork_locks_held;   /* this fork takes nothing */
static __thread bool fork_stdio;        /* this fork took stdio's list lock */
static __thread bool fork_stdio_reset;  /* and glibc resets it in the child */

static void fork_prepare(void)
{
	fork_locks_held = usl_report_holds != 0;
	fork_stdio = false;
	/* The decay thread out of its sweep and publication first (bounded): a
	 * sweep may wait for a lock this thread holds, and a publication calls
	 * libc outside uslab's locks (opendir, file I/O), where an allocator
	 * other than uslab's (a sanitizer's) may not guard its own locks across
	 * fork. */
	usl_decay_fork_hold();
	if (fork_locks_held) {
		usl_mutex_fork_prepare();
		return;
	}
	if (_IO_list_lock && _IO_list_unlock && &__libc_single_threaded) {
		fork_stdio_reset = !__libc_single_threaded;   /* glibc's own test, made just after this */
		_IO_list_lock();
		fork_stdio = true;
	}
	usl_lock(&walk_lock);            /* and no walk in progress (a walk allocates) */
	walks_wait();
	usl_stack_fork_lock();         /* a symbolizing thread allocates under it */
	usl_lock(&classes_lock);
	usl_lock(&sheaf_classes_lock);
	usl_lock(&cache_cache_lock);
	usl_lock(&slab_mutex);
	/* Owned slots marked first (after the owned flushers' mutex: a flusher
	 * between its unmark and its unlock would leave it held in the child):
	 * a refill that holds one may take any cache's locks below (a new
	 * slab's bitmap comes from another cache). */
	usl_owned_fork_lock_global();
	for (struct usl_list *it = cache_list.next; it != &cache_list; it = it->next)
		usl_owned_fork_lock(usl_container_of(it, struct kmem_cache, list));
	usl_slub_fork_lock_global();
	usl_debug_fork_lock();
	for (struct usl_list *it = cache_list.next; it != &cache_list; it = it->next) {
		usl_sheaf_fork_lock(usl_container_of(it, struct kmem_cache, list));
		usl_engine_fork_lock(usl_container_of(it, struct kmem_cache, list));
	}
	usl_meta_fork_lock();
	usl_pages_fork_lock();
	usl_map_fork_lock();
	usl_platform_fork_lock();
}

static void fork_release(void)
{
	usl_platform_fork_unlock();
	usl_map_fork_unlock();
	usl_pages_fork_unlock();
	usl_meta_fork_unlock();
	for (struct usl_list *it = cache_list.prev; it != &cache_list; it = it->prev) {
		usl_engine_fork_unlock(usl_container_of(it, struct kmem_cache, list));
		usl_sheaf_fork_unlock(usl_container_of(it, struct kmem_cache, list));
	}
	usl_debug_fork_unlock();
	usl_slub_fork_unlock_global();
	for (struct usl_list *it = cache_list.prev; it != &cache_list; it = it->prev)
		usl_owned_fork_unlock(usl_container_of(it, struct kmem_cache, list));
	usl_owned_fork_unlock_global();
	usl_unlock(&slab_mutex);
	usl_unlock(&cache_cache_lock);
	usl_unlock(&sheaf_classes_lock);
	usl_unlock(&classes_lock);
	usl_stack_fork_unlock();
	usl_unlock(&walk_lock);
}

static void fork_release_parent(void)
{
	if (!fork_locks_held) {
		fork_release();
		if (fork_stdio)
			_IO_list_unlock();
	}
	usl_decay_fork_unhold();
}

static void entries_after_fork(void);
static void reclaim_after_fork(void);

/* The child has no decay thread (fork copies only the calling thread). */
static void fork_release_child(void)
{
	usl_random_fork_child();         /* a layout of its own (from a signal handler too) */
	if (fork_locks_held) {
		usl_decay_after_fork(true);
		return;
	}
	fork_release();
	if (fork_stdio && !fork_stdio_reset)
		_IO_list_unlock();
	entries_after_fork();
	reclaim_after_fork();
	usl_decay_after_fork(false);
}

/* Once, before the first cache exists: the fork handlers, and the hooks by
 * which the layers below reach this one (docs/ARCHITECTURE.md, "Layers"). */
static void reclaim_before_grow(void);
static pthread_once_t common_once = PTHREAD_ONCE_INIT;
static void common_init(void)
{
	pthread_atfork(fork_prepare, fork_release_parent, fork_release_child);
	usl_decay_init(usl_decay_sweep, usl_mode_tick);
	__atomic_store_n(&usl_slub_before_grow, reclaim_before_grow, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_percpu_slow_tick, usl_decay_tick, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_percpu_oom, usl_reclaim_for_retry, __ATOMIC_RELEASE);
}

__thread int usl_registry_held __attribute__((tls_model("initial-exec")));

static void cache_lock(void)
{
	usl_lock(&slab_mutex);
	usl_registry_held++;
}

static void cache_unlock(void)
{
	usl_registry_held--;
	usl_unlock(&slab_mutex);
}

void usl_cache_classes_lock(void)
{
	usl_lock(&classes_lock);
	usl_registry_held++;
}

void usl_cache_classes_unlock(void)
{
	usl_registry_held--;
	usl_unlock(&classes_lock);
}

static bool cache_trylock(void)
{
	if (!usl_trylock(&slab_mutex))
		return false;
	usl_registry_held++;
	return true;
}

/* Cache structures (each with its node and per-CPU slots: bytes) are objects
 * of one internal cache, "kmem_cache", as in the kernel; its own structure is
 * a page block. A page each cost a program with the ~60 malloc classes about
 * 230 KiB of RSS, and put the first line of every cache and every cache's
 * slot of a CPU in one L1 set (12 ways), so a mix of a few dozen classes
 * missed L1 on each call; packed, they spread over the sets. */
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
		usl_lock(&cache_cache_lock);
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
		usl_unlock(&cache_cache_lock);
		if (!cc)
			return NULL;
	}
	/* The engine's path: an internal cache has no sheaves. */
	struct kmem_cache *s = usl_slub_alloc(cc, GFP_KERNEL | __GFP_NOWARN);
	if (s)
		memset(s, 0, bytes);
	return s;
}

/* Cache ids: the page map names a slab's cache by a 16-bit id, so an entry is
 * 8 bytes (a pointer would make it 16). The lowest free id is given,
 * so usl_caches stays in its first page. Under slab_mutex. */
struct kmem_cache *usl_caches[USL_MAX_CACHES];
static uint64_t ids_used[USL_MAX_CACHES / 64] = { 1 };   /* id 0: no cache */
struct usl_free_entry usl_free_entries[USL_MAX_CACHES];
char *usl_slots;
size_t usl_slot_stride;
static size_t max_ids;               /* ids the slot area holds */
static unsigned int ids_end;         /* one past the highest id given (written under slab_mutex) */

/* The fast_path flags of usl_free_entries follow usl_opt.mode: both are written
 * under entry_lock, a leaf (nothing is taken under it; fork's child
 * re-initialises it and sets the flags again). */
static int entry_lock;

static void entry_fast_path_set(struct usl_free_entry *f, unsigned int mode)   /* entry_lock held */
{
	__atomic_store_n(&f->fast_path, (uint8_t)(f->blind && mode == USL_MODE_HARDEN), __ATOMIC_RELAXED);
}

static void entries_fast_path_set(unsigned int mode)                          /* entry_lock held */
{
	unsigned int end = __atomic_load_n(&ids_end, __ATOMIC_RELAXED);
	for (unsigned int id = 1; id < end; id++)
		entry_fast_path_set(&usl_free_entries[id], mode);
}

void usl_mode_tick(bool on)
{
	usl_spin_lock(&entry_lock);
	unsigned int mode = __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED);
	unsigned int want = on ? mode | USL_MODE_TICK : mode & ~USL_MODE_TICK;
	if (want != mode) {
		__atomic_store_n(&usl_opt.mode, want, __ATOMIC_RELAXED);
		entries_fast_path_set(want);
	}
	usl_spin_unlock(&entry_lock);
}

/* A thread of the parent may have held entry_lock, part-way through the flags. */
static void entries_after_fork(void)
{
	entry_lock = 0;
	entries_fast_path_set(__atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED));
}

/* The entry of s, before its divisor publishes it (uslab's own caches are
 * never fast: no marker is written into their objects). */
static void entry_set(struct kmem_cache *s)
{
	struct usl_free_entry *f = &usl_free_entries[s->id];
	f->slots = s->cpu_slab;
	f->secret = s->fp_secret;
	f->fp_offset = s->offset;
	f->blk_shift = (unsigned int)__builtin_ctzl(s->fp_mask);
	f->ksize = (uint32_t)usl_cache_ksize(s);
	usl_spin_lock(&entry_lock);
	f->blind = usl_flagged(s) && !(s->flags & USL_SLAB_INTERNAL);
	entry_fast_path_set(f, __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED));
	usl_spin_unlock(&entry_lock);
	__atomic_store_n(&f->div, s->div_inv | (uint64_t)s->div_shift << 32, __ATOMIC_RELEASE);
}

/* The slot area: every possible id's slots, reserved once (only the pages of
 * ids in use are touched, and ids are given lowest-first). Where address
 * space is short (ulimit -v) fewer ids fit: halved down to 256. Under
 * slab_mutex. */
static bool slots_map(void)
{
	if (usl_slots)
		return true;
	size_t lines = usl_nr_cpus;
	if (!(lines & 1))
		lines++;
	usl_slot_stride = lines * sizeof(struct kmem_cache_cpu);
	/* Under RLIMIT_AS at most a 64th of the limit, and the least where the
	 * limit leaves less than a region (the range grows in pieces). */
	size_t n = USL_MAX_CACHES, limit = usl_pages_limit();
	while (n > 256 && (usl_pages_pieces() || (limit && n * usl_slot_stride > limit / 64)))
		n /= 2;
	for (; n >= 256; n /= 2) {
		void *p = usl_map_guarded(USL_ALIGN(n * usl_slot_stride, USL_PAGE_SIZE), PROT_READ | PROT_WRITE);
		if (p) {
			usl_slots = p;
			max_ids = n;
			return true;
		}
	}
	return false;
}

/* The lowest free id for s, with its slots zeroed (an id is reused) and
 * s->cpu_slab pointing at them. */
static bool id_assign(struct kmem_cache *s)
{
	cache_lock();
	if (!slots_map()) {
		cache_unlock();
		return false;
	}
	for (size_t w = 0; w < max_ids / 64; w++) {
		if (~ids_used[w]) {
			unsigned int b = (unsigned int)__builtin_ctzll(~ids_used[w]);
			ids_used[w] |= 1ULL << b;
			s->id = (unsigned int)(w * 64 + b);
			s->cpu_slab = usl_id_slots(s->id);
			if (s->id >= ids_end)
				__atomic_store_n(&ids_end, s->id + 1, __ATOMIC_RELAXED);
			memset(s->cpu_slab, 0, usl_nr_cpus * sizeof(struct kmem_cache_cpu));
			for (unsigned int i = 0; i < usl_nr_cpus; i++)   /* the sections' "no sheaf" */
				s->cpu_slab[i].main = &usl_empty_sheaf;
			__atomic_store_n(&usl_caches[s->id], s, __ATOMIC_RELEASE);
			cache_unlock();
			return true;
		}
	}
	cache_unlock();
	return false;
}

static void cache_struct_free(struct kmem_cache *s)
{
	/* A destroyed owned cache's fast paths must not reach its freed owned
	 * slots: its kind becomes the cpu slab's, whose slots (by id) stay
	 * mapped and empty, so a use after destroy reaches a slow path that
	 * reports it. */
	if (s->oslots) {
		__atomic_store_n(&s->path, USL_PATH_CPU_SLAB, __ATOMIC_RELEASE);
		usl_oslab_free_retired(s);
		usl_owned_cache_free(s);
	}
	if (usl_is_slab(s))
		usl_slab_cache_free(s);
	for (unsigned int nid = 0; nid < USL_MAX_NODES && s->node[nid]; nid++)
		pthread_mutex_destroy(&s->node[nid]->list_lock);
	if (s->id) {                         /* no slab of s is left: nothing names it */
		cache_lock();
		__atomic_store_n(&usl_caches[s->id], NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&usl_free_entries[s->id].div, 0, __ATOMIC_RELAXED);
		ids_used[s->id / 64] &= ~(1ULL << (s->id % 64));
		cache_unlock();
		s->id = 0;
	}
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

/* Under slab_mutex (USLAB_NOMERGE checked by the caller). */
static struct kmem_cache *find_mergeable(unsigned int size, unsigned int align, slab_flags_t flags)
{
	usl_assert_held(&slab_mutex);
	size = USL_ALIGN(size, (unsigned int)sizeof(void *));
	align = usl_slub_alignment(flags, align, size);
	size = USL_ALIGN(size, align);
	for (struct usl_list *it = cache_list.prev; it != &cache_list; it = it->prev) {
		struct kmem_cache *s = usl_container_of(it, struct kmem_cache, list);
		if (cache_unmergeable(s) || size > s->size || (s->size & (align - 1)) ||
		    s->size - size >= sizeof(void *))
			continue;
		return s;
	}
	return NULL;
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
	cache_lock();
	for (unsigned int i = 0; i < nr_alias_names && !r; i++)
		r = fn(alias_names[i].name, alias_names[i].target, arg);
	cache_unlock();
	return r;
}

/* Under slab_mutex: s serves a new cache of size bytes too, under name. The
 * readers of object_size (zeroing) load it atomically. */
static void make_alias(struct kmem_cache *s, unsigned int size, const char *name)
{
	usl_assert_held(&slab_mutex);
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
	usl_lock(&sheaf_classes_lock);
	if (!usl_sheaf_class_caches[cls]) {
		char name[32];
		unsigned int bytes = usl_sheaf_class_bytes(cls);
		usl_name_number(name, sizeof(name), "uslab-sheaf-", bytes);
		__atomic_store_n(&usl_sheaf_class_caches[cls],
		                 usl_cache_create(name, bytes, 64, SLAB_NO_MERGE, NULL, NULL, USL_CACHE_INTERNAL, 0),
		                 __ATOMIC_RELEASE);
	}
	c = usl_sheaf_class_caches[cls];
	usl_unlock(&sheaf_classes_lock);
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
	usl_lock(&sheaf_classes_lock);
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
	usl_unlock(&sheaf_classes_lock);
	return c;
}

/* SLAB's off-slab index arrays: objects of internal caches of a power of two
 * bytes each (uslab-slab-idx-<bytes>), made on first use. */
static struct kmem_cache *slab_idx_cache[32];

static struct kmem_cache *slab_idx_cache_get(unsigned int bytes)
{
	unsigned int lg = 31u - (unsigned int)__builtin_clz(bytes);
	struct kmem_cache *c;
	usl_lock(&sheaf_classes_lock);
	if (!slab_idx_cache[lg]) {
		char name[32];
		usl_name_number(name, sizeof(name), "uslab-slab-idx-", bytes);
		slab_idx_cache[lg] = usl_cache_create(name, bytes, 16, SLAB_NO_MERGE, NULL, NULL, USL_CACHE_INTERNAL, 0);
	}
	c = slab_idx_cache[lg];
	usl_unlock(&sheaf_classes_lock);
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
	cache_lock();
	s = find_mergeable(size, align, flags);
	if (s)
		make_alias(s, size, name);
	cache_unlock();
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
	if (!id_assign(s)) {
		if (!usl_slots)
			step_failed(err, "no address space for the per-CPU slots (bytes for 256 ids)",
			            256 * usl_slot_stride);
		else
			step_failed(err, "no cache id left: live caches at the limit", max_ids - 1);
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
	                   !(s->flags & (SLAB_DEBUG_FLAGS | SLAB_VIRTUAL));   /* (SLAB_VIRTUAL: slub/slub.c) */
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
	entry_set(s);
	if (sheaf_capacity) {
		s->sheaf_capacity = sheaf_capacity;
		s->sheaf_cache = sheaf_class_cache_get(sheaf_capacity);
		if (!s->sheaf_cache)
			return step_failed(err, "out of memory for its sheaves", sheaf_capacity);
		usl_sheaf_cache_init(s);
	}
	s->path = s->stats ? USL_PATH_COUNTED
	        : (!s->sheaf_capacity ? USL_PATH_CPU_SLAB : usl_flagged(s) ? USL_PATH_SHEAF : USL_PATH_SHEAF_OTHER) |
	            (usl_nr_nodes > 1 ? USL_PATH_NUMA : 0);
	if (owned)
		s->path = USL_PATH_OWNED;
	return true;
}

/* Publish: on the list, where walks and merges see it. */
static void create_publish(struct kmem_cache *s)
{
	cache_lock();
	usl_list_add_tail(&s->list, &cache_list);
	__atomic_store_n(&s->published, 1, __ATOMIC_RELEASE);
	cache_unlock();
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
	usl_lock(&walk_lock);
	walkers++;
	walks_here++;
	usl_unlock(&walk_lock);
	/* Up to the highest id given, not the table's 64Ki entries (512 KiB a
	 * walk: most of a live-view publication's time); a cache made while
	 * the walk runs may be missed, as one made just after it. */
	for (size_t id = 1; id < __atomic_load_n(&ids_end, __ATOMIC_RELAXED) && !r; id++) {
		struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
		if (s && __atomic_load_n(&s->published, __ATOMIC_ACQUIRE))
			r = fn(s, arg);
	}
	usl_lock(&walk_lock);
	walks_here--;
	if (!--walkers)
		pthread_cond_broadcast(&walk_done);
	usl_unlock(&walk_lock);
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
	cache_lock();
	if (!usl_cache_live(s)) {
		cache_unlock();
		usl_report_dead_cache("kmem_cache_destroy", s, "nothing done");
		return;
	}
	if ((s->flags & USL_SLAB_KMALLOC) && s->refcount <= 1) {
		cache_unlock();
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_destroy(%s): a kmalloc cache (or a cache already destroyed "
		           "that was its alias); not destroyed", s->name);
		return;
	}
	if (--s->refcount > 0) {     /* an alias: drop one reference */
		alias_name_drop(s, false);
		cache_unlock();
		return;
	}
	usl_cache_flush_all(s);
	remaining = usl_engine_objects_in_use(s);
	if (remaining) {
		/* The kernel's "Objects remaining on __kmem_cache_shutdown()": the
		 * cache stays alive so nothing that still points into it breaks. */
		s->refcount = 1;
		cache_unlock();
		usl_report(USLAB_ERR_LEAK, "kmem_cache_destroy(%s): Objects remaining: %lu; cache not destroyed",
		           s->name, remaining);
		if (s->flags & USL_SLAB_DEBUG_FLAGS)
			usl_debug_leaks(s);      /* each object, with its owner */
		return;
	}
	usl_list_del(&s->list);
	alias_name_drop(s, true);
	__atomic_store_n(&s->published, 0, __ATOMIC_RELEASE);
	cache_unlock();
	/* No walk that may have seen it is still running (walk_lock). */
	usl_lock(&walk_lock);
	walks_wait();
	usl_unlock(&walk_lock);
	usl_engine_release(s);
	cache_struct_free(s);
	usl_pages_purge(false);
}

/* Sheaves first (flushed and freed): their objects may land on this CPU's cpu
 * slab, flushed next. */
void usl_cache_flush_all(struct kmem_cache *s)
{
	usl_owned_flush_all(s);
	usl_sheaf_flush_all(s);
	usl_engine_flush_cpus(s);
}

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
	cache_lock();
	int r = usl_slab_tune(s, limit, batch, shared);
	if (!r) {
		__atomic_store_n(&s->sheaf_cache, cls, __ATOMIC_RELAXED);
		__atomic_store_n(&s->sheaf_capacity, limit, __ATOMIC_RELAXED);
	}
	cache_unlock();
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

/* Before the page provider grows (the engine's hook): give back what caches
 * hold beyond need (the barns' surplus of full sheaves). Skipped if slab_mutex
 * is busy. */
static void reclaim_before_grow(void)
{
	if (!cache_trylock())
		return;
	for (struct usl_list *it = cache_list.next; it != &cache_list; it = it->next)
		usl_sheaf_trim_barn(usl_container_of(it, struct kmem_cache, list));
	cache_unlock();
}


/* fn(s, arg) on every cache, uslab's own caches last: the others' flushes free
 * their sheaves into them. Under slab_mutex. */
static void each_cache_own_last(void (*fn)(struct kmem_cache *, void *), void *arg)
{
	usl_assert_held(&slab_mutex);
	for (int internal = 0; internal < 2; internal++)
		for (struct usl_list *it = cache_list.next; it != &cache_list; it = it->next) {
			struct kmem_cache *s = usl_container_of(it, struct kmem_cache, list);
			if (!(s->flags & USL_SLAB_INTERNAL) == !internal)
				fn(s, arg);
		}
}

struct sweep {
	uint64_t now;
	unsigned int flushed;                /* sheaves sent back to slabs */
	bool pending;                        /* a barn still holds what a later sweep gives back */
};

static void decay_one(struct kmem_cache *s, void *arg)
{
	struct sweep *sw = arg;
	if (usl_is_slab(s)) {                /* SLAB's cache_reap */
		unsigned int done = usl_array_reap(s, sw->now);
		sw->flushed += done;
		sw->pending |= done != 0;
		return;
	}
	if (s->oslots) {                     /* the owned front end: idle slots give their slabs up */
		sw->flushed += usl_owned_decay(s, &sw->pending);
		return;
	}
	sw->flushed += usl_sheaf_decay(s, sw->now);
	sw->pending |= usl_sheaf_decay_pending(s);
}

/* A cache's part of malloc_trim: sheaves, barn and cpu slabs flushed, empty
 * slabs freed. */
static void release_one(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_cache_flush_all(s);
	usl_engine_release(s);
}

/* atomic, for tests: a sequence count, odd while a sweep runs, +2 a sweep */
unsigned long usl_decay_sweeps;

int usl_decay_sweep(uint64_t now)
{
	struct sweep sw = { now, 0, false };

	if (!cache_trylock())
		return -1;
	__atomic_fetch_add(&usl_decay_sweeps, 1, __ATOMIC_SEQ_CST);
	int saved_errno = errno;             /* free() keeps errno; the sweep makes system calls */
	usl_pages_aging = true;
	each_cache_own_last(decay_one, &sw);
	usl_pages_aging = false;
	cache_unlock();
	size_t purged = usl_pages_purge(false) + usl_map_purge(false);
	__atomic_fetch_add(&usl_decay_sweeps, 1, __ATOMIC_SEQ_CST);
	errno = saved_errno;
	return sw.flushed || purged || sw.pending;
}

/* An allocation found no memory: what uslab holds free goes back, as
 * malloc_trim gives it (every cache's per-CPU caches, barns and empty slabs,
 * the free page blocks, the kept mappings), and the caller tries once more.
 * Only with no uslab lock held on this thread (a nested allocation, or one
 * under a slot, cannot flush) and not from inside a reclaim. One thread at a
 * time; those that waited for it try again at once. True when the caller
 * should retry. */
static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;   /* a leaf */
static pthread_cond_t reclaim_done = PTHREAD_COND_INITIALIZER;
static bool reclaim_busy;            /* under reclaim_lock: a reclaim runs */
static unsigned long reclaims;       /* under reclaim_lock: reclaims done */
static __thread bool reclaiming;

bool usl_reclaim_for_retry(void)
{
	if (usl_report_holds || reclaiming || !__atomic_load_n(&usl_inited, __ATOMIC_ACQUIRE))
		return false;
	int saved_errno = errno;
	usl_lock(&reclaim_lock);
	unsigned long seen = reclaims;
	while (reclaim_busy && reclaims == seen)
		pthread_cond_wait(&reclaim_done, &reclaim_lock);
	if (reclaims == seen) {              /* else another thread's reclaim just ended */
		reclaim_busy = reclaiming = true;
		usl_unlock(&reclaim_lock);
		cache_lock();
		each_cache_own_last(release_one, NULL);
		cache_unlock();
		usl_pages_release();
		usl_map_purge(true);
		usl_lock(&reclaim_lock);
		reclaim_busy = reclaiming = false;
		reclaims++;
		pthread_cond_broadcast(&reclaim_done);
	}
	usl_unlock(&reclaim_lock);
	errno = saved_errno;
	return true;
}

/* A fork's child: no reclaim runs (its thread may have been another). */
static void reclaim_after_fork(void)
{
	pthread_mutex_init(&reclaim_lock, NULL);
	pthread_cond_init(&reclaim_done, NULL);
	reclaim_busy = false;
}

/* malloc_trim's job: every cache's sheaves, barns and cpu slabs flushed, its
 * empty slabs freed, then every free page returned to the OS. uslab's own
 * caches last, as in the decay sweep (shrunk first, a sheaf cache kept a page
 * of freed sheaves per capacity: 28 KiB of churn's 1.9 MB after its trim). */
size_t uslab_release_free_memory(void)
{
	usl_ensure_init();
	cache_lock();
	each_cache_own_last(release_one, NULL);
	cache_unlock();
	return usl_pages_release() + usl_map_purge(true);
}
