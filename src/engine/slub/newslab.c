/* newslab.c - a SLUB slab's start and end: a new slab (its block, the page
 * map's owner entry, its objects carved lazily in chunks, in the kernel's or
 * a random order), type isolation's kept blocks (SLAB_VIRTUAL), a discarded
 * slab, and the wait for another thread's flush when no pages are left.
 * Locks: a cache's virt_lock (its kept blocks; a leaf); the page provider's
 * locks below. No list_lock: a new slab is on no list yet, a discarded one
 * on none any more. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "slub.h"

static void no_hook(void) {}
void (*usl_slub_before_grow)(void) = no_hook;

static int flushing;                         /* threads holding objects out of reach */
static __thread int flushing_here;           /* ... this one among them (nested) */

void usl_slub_flush_begin(void)
{
	flushing_here++;
	__atomic_add_fetch(&flushing, 1, __ATOMIC_ACQ_REL);
}

void usl_slub_flush_end(void)
{
	__atomic_sub_fetch(&flushing, 1, __ATOMIC_ACQ_REL);
	flushing_here--;
}

/* new_slab found no pages: true after waiting for another thread's flush to
 * end (no lock is held here: the slow paths drop theirs around new_slab). The
 * sleep is the system call itself, not libc's nanosleep: an allocation is no
 * cancellation point. */
static USL_SLOW_PATH bool flush_wait(void)
{
	if (flushing_here || !__atomic_load_n(&flushing, __ATOMIC_ACQUIRE))
		return false;
	for (int i = 0; i < 1000 && __atomic_load_n(&flushing, __ATOMIC_ACQUIRE); i++) {
		struct timespec ts = { 0, 1000000 };
		syscall(SYS_nanosleep, &ts, NULL);
	}
	return true;
}

/* ===========================================================================
 * Slabs in the page map
 */

/* Record a slab's cache and object count in the page map entries of its pages
 * (0: not a slab any more). A user or kmalloc cache's entries count only the
 * objects carved so far (pages/pages.h): carved of them now. */
static void set_owner(struct slab *slab, unsigned int order, struct kmem_cache *s, unsigned int objects,
                      unsigned int carved)
{
	size_t pfn = usl_slab_pfn(slab);
	struct usl_pagemap_entry *e = &usl_pagemap[pfn];
	uint32_t start = (uint32_t)(pfn << USL_PAGE_SHIFT);
	unsigned int tag = 0;
	if (s)
		tag = s->flags & USL_SLAB_INTERNAL ? objects | USL_PM_INTERNAL : carved;
	for (size_t i = 0; i < ((size_t)1 << order); i++)
		usl_pm_write(&e[i], start, tag, s ? s->id : 0);
}

/* The slab's carver (its one taker) moved the carving point: the page map
 * counts the objects below it (counters c after the claim). */
void usl_slab_carved(const struct kmem_cache *s, struct slab *slab, unsigned long c)
{
	if (s->flags & USL_SLAB_INTERNAL)
		return;
	struct usl_pagemap_entry *e = &usl_pagemap[usl_slab_pfn(slab)];
	unsigned int carved = usl_counters_objects(c) - usl_counters_uncarved(c);
	for (size_t i = 0; i < ((size_t)1 << slab->order); i++)
		usl_pm_set_count(&e[i], carved);
}

/* ===========================================================================
 * Carving. A new slab's objects are all uncarved (the counters' uncarved
 * field): free, never written, so their pages are not touched until used.
 * Whoever takes objects from a slab (its cpu owner, or alloc_direct under
 * list_lock) carves more when the slab's freelist is empty: linked a page's
 * worth at a time, or as bare addresses for a sheaf refill (carve_array).
 * There is one taker at a time, so the links are written privately before the
 * CAS that claims them; a lost CAS leaves them unclaimed.
 */

static inline unsigned int carve_chunk(const struct kmem_cache *s, unsigned int uncarved)
{
	unsigned int k = (unsigned int)(USL_PAGE_SIZE / s->size);
	if (k == 0)
		k = 1;
	return k < uncarved ? k : uncarved;
}

void usl_carve_order_init(struct usl_carve_order *o, const struct kmem_cache *s, unsigned int k)
{
	o->k = k;
	o->a = 1;
	o->x = 0;
	if (!s->random || k < 2)
		return;
	uint64_t r = usl_rand64();
	/* A step prime to k, from a random start; not 1 or k - 1 once k
	 * allows (those keep neighbours next to each other). */
	unsigned int lo = k < 5 ? 1 : 2, span = k < 5 ? k - 1 : k - 3;
	unsigned int start = (unsigned int)((r >> 32) % span);
	for (unsigned int j = 0; j < span; j++) {
		unsigned int a = lo + (start + j) % span, g = k, b = a;
		while (b) {                                       /* gcd(a, k) */
			unsigned int m = g % b;
			g = b;
			b = m;
		}
		if (g == 1) {
			o->a = a;
			break;
		}
	}
	o->x = (unsigned int)(r % k);
}

/* Link k objects from p on, in the carving order; the last one's free
 * pointer is NULL. Returns the first. */
static void *link_objects(const struct kmem_cache *s, char *p, unsigned int k)
{
	struct usl_carve_order o;
	bool tw = usl_flagged(s);      /* a two-word cache's free objects carry their F */
	usl_carve_order_init(&o, s, k);
	char *first = p + (size_t)usl_carve_order_next(&o) * s->size, *cur = first;
	for (unsigned int i = 1; i < k; i++) {
		char *next = p + (size_t)usl_carve_order_next(&o) * s->size;
		usl_set_freepointer(s, cur, next);
		if (tw)
			usl_flag_carved(s, cur);
		cur = next;
	}
	usl_set_freepointer(s, cur, NULL);
	if (tw)
		usl_flag_carved(s, cur);
	return first;
}

/* For a slab whose freelist is empty and that has uncarved objects: link the
 * next chunk, and return it with its counters (uncarved lowered) in *nc. */
void *usl_carve_linked(const struct kmem_cache *s, const struct slab *slab, unsigned long c, unsigned long *nc)
{
	unsigned int u = usl_counters_uncarved(c), k = carve_chunk(s, u);
	void *head = link_objects(s, usl_carve_start(s, slab, c), k);

	*nc = usl_counters_set_uncarved(*nc, u - k);
	return head;
}
/* ===========================================================================
 * New and discarded slabs
 */

static void *slab_block(struct kmem_cache *s, unsigned int order, unsigned int node);

struct slab *usl_new_slab(struct kmem_cache *s, void **freelist, unsigned int node)
{
	/* uslab's own caches take their slabs from the metadata regions, apart
	 * from user blocks. */
	bool own = s->flags & USL_SLAB_INTERNAL;
	unsigned int order;
	void *addr;

	/* A second round only after waiting out another thread's flush: its
	 * objects emptied slabs, or the barns hold them again. */
	for (bool waited = false;; waited = true) {
		order = s->order;
		/* Before the range grows, take back the barns' surplus: their
		 * objects may empty whole slabs whose pages can serve this one. Not
		 * for the sheaf structures' own caches: they grow because barns
		 * park sheaves. */
		if (!own && (waited || usl_pages_short(order, node)))
			__atomic_load_n(&usl_slub_before_grow, __ATOMIC_ACQUIRE)();
		addr = own ? usl_meta_block(order, true, USL_PAGE_SLAB) : slab_block(s, order, node);
		if (!addr && s->min_order < order) {
			order = s->min_order;          /* the kernel's ORDER_FALLBACK */
			addr = own ? usl_meta_block(order, true, USL_PAGE_SLAB) : slab_block(s, order, node);
			if (addr)
				usl_stat(s, USL_ORDER_FALLBACK);
		}
		if (addr || own || waited || !flush_wait())
			break;
	}
	if (!addr)
		return NULL;
	usl_stat(s, USL_ALLOC_SLAB);
	struct slab *slab = usl_virt_to_slab(addr);
	unsigned int objects = (unsigned int)(usl_order_bytes(order) / s->size);
	if (objects > USL_MAX_OBJS_PER_SLAB)
		objects = USL_MAX_OBJS_PER_SLAB;

	/* Nothing written: objects are carved as they are taken, a sheaf refill's
	 * without being read. A constructor runs when the slab is made, so such
	 * slabs are linked whole. A debug cache's slab is set up by its caller
	 * (engine/slub/debug.c); its page-map count stays 0, so every free of its
	 * objects misses the fast paths' object test. */
	unsigned int linked = 0;
	void *head = NULL;
	if (s->ctor && !(s->flags & USL_SLAB_DEBUG_FLAGS)) {
		char *p = addr;
		for (unsigned int i = 0; i < objects; i++, p += s->size)
			s->ctor(p);
		linked = objects;
		head = link_objects(s, addr, linked);
	}
	slab->freelist = NULL;
	slab->counters = usl_counters_set_uncarved(usl_counters_make(objects, objects, true), objects - linked);
	slab->next = NULL;
	slab->slabs = 0;
	slab->node_partial = 0;
	struct kmem_cache_node *n = usl_get_node(s, slab);   /* the metadata regions' slabs: node 0 */
	__atomic_fetch_add(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->total_objects, objects, __ATOMIC_RELAXED);
	__atomic_store_n(&slab->slab_cache, s, __ATOMIC_RELEASE);
	set_owner(slab, order, s, objects, linked);
	*freelist = head;
	return slab;
}

/* ===========================================================================
 * Type isolation (SLAB_VIRTUAL): an empty slab's block keeps its address
 * range for its cache. Its pages go back to the OS at once (they read as
 * zeros when the cache takes the block again), its page-map entries say "no
 * cache" meanwhile (a free into it is refused as a pointer to no object), and
 * the block stays allocated in the page provider, so no other cache ever gets
 * it; after kmem_cache_destroy too (the list is dropped with the cache). */

static void virt_keep(struct kmem_cache *s, struct slab *slab)
{
	int saved = errno;
	madvise(usl_slab_address(slab), usl_order_bytes(slab->order), MADV_DONTNEED);
	errno = saved;
	usl_spin_lock_leaf(&s->virt_lock);
	slab->next = s->virt_free;
	s->virt_free = slab;
	usl_spin_unlock_leaf(&s->virt_lock);
}

/* A block of 2^order pages for a new slab of s: one it kept, else the page
 * provider's. */
static void *slab_block(struct kmem_cache *s, unsigned int order, unsigned int node)
{
	if (s->flags & SLAB_VIRTUAL) {
		struct slab *got = NULL;
		usl_spin_lock_leaf(&s->virt_lock);
		for (struct slab **pp = &s->virt_free; *pp; pp = &(*pp)->next)
			if ((*pp)->order == order) {
				got = *pp;
				*pp = got->next;
				break;
			}
		usl_spin_unlock_leaf(&s->virt_lock);
		if (got)
			return usl_slab_address(got);
	}
	return usl_pages_alloc(order, USL_PAGE_SLAB, node);
}

void usl_discard_slab(struct kmem_cache *s, struct slab *slab)
{
	struct kmem_cache_node *n = usl_get_node(s, slab);
	unsigned int objects = usl_counters_objects(slab->counters);

	usl_assert(!slab->node_partial);     /* off every list: nobody can reach it */
	usl_stat(s, USL_FREE_SLAB);
	__atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&n->total_objects, objects, __ATOMIC_RELAXED);
	__atomic_store_n(&slab->slab_cache, NULL, __ATOMIC_RELEASE);
	set_owner(slab, slab->order, NULL, 0, 0);
	if (s->flags & USL_SLAB_INTERNAL)
		usl_meta_free(usl_slab_address(slab));
	else if (s->flags & SLAB_VIRTUAL)
		virt_keep(s, slab);
	else if (s->flags & SLAB_TYPESAFE_BY_RCU)   /* readers may still read it: after a grace period */
		usl_free_slab_after_gp(slab);
	else
		usl_pages_free(usl_slab_address(slab));
}
