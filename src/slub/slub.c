/* slub.c - the SLUB core: fast and slow paths, remote frees (slab_free_slow),
 * flush, shrink, sizing. Locks: flush_mutex, then the slot lock (locked mode),
 * then node list_lock; pages_lock is taken inside the page provider. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/rseq.h>

#include "../internal.h"
#include "rseq_x86.h"

/* Tunables next to their reasons (reference §1a, §8). */
#define MIN_PARTIAL 5   /* empty slabs kept per node before they are freed ... */
#define MAX_PARTIAL 10  /* ... and at most this many for large objects */

static pthread_mutex_t flush_mutex = PTHREAD_MUTEX_INITIALIZER;
static __thread int cpu_hint __attribute__((tls_model("initial-exec"))) = -1;

/* ===========================================================================
 * Object and slab helpers
 */

static inline void *get_freepointer(const struct kmem_cache *s, void *obj)
{
	return *(void **)((char *)obj + s->offset);
}

static inline void set_freepointer(const struct kmem_cache *s, void *obj, void *fp)
{
	*(void **)((char *)obj + s->offset) = fp;
}

/* Read a free pointer that another thread may be overwriting (locked-mode fast
 * path: the object may have been allocated since we read it; the cmpxchg16b on
 * {tid, freelist} then fails and the value is dropped, as in the kernel). The
 * memory is always mapped inside the range. A plain asm load: the race is by
 * design, and sanitizers must not see it as a program access. */
static inline void *get_freepointer_safe(const struct kmem_cache *s, void *obj)
{
	void *fp;
	__asm__ __volatile__("movq (%1), %0" : "=r"(fp) : "r"((char *)obj + s->offset) : "memory");
	return fp;
}

static inline struct kmem_cache_node *get_node(struct kmem_cache *s, struct slab *slab)
{
	(void)slab;
	return s->node[0];
}

/* Is x the start of an object of this slab? Divisibility by s->size without a
 * division: for size = d0 << k (d0 odd), x is at index off/size exactly when
 * ror32(off * d0^-1, k) is below the object count (Granlund-Montgomery). */
static inline uint32_t obj_index(uint32_t off, uint32_t div_inv, uint32_t div_shift)
{
	uint32_t q = off * div_inv;
	return (q >> div_shift) | (q << ((32 - div_shift) & 31));
}

static inline bool obj_index_at(const struct kmem_cache *s, const struct slab *slab, uint32_t off, unsigned int *idx)
{
	uint32_t q = obj_index(off, s->div_inv, s->div_shift);
	*idx = q;
	/* objects sits in bits 16..30 of counters: one 16-bit load (little endian). */
	return q < (__atomic_load_n((const uint16_t *)&slab->counters + 1, __ATOMIC_RELAXED) & USL_OBJECTS_MASK);
}

/* The same with the object count from the page map (no struct slab access). */
static inline bool obj_index_in(const struct kmem_cache *s, uint32_t off, unsigned int objects)
{
	return obj_index(off, s->div_inv, s->div_shift) < objects;
}

/* Record a slab's cache and object count in the page map entries of its pages
 * (0: not a slab any more). */
static void set_owner(struct slab *slab, unsigned int order, struct kmem_cache *s, unsigned int objects)
{
	size_t pfn = usl_slab_pfn(slab);
	struct usl_pagemap_entry *e = &usl_pagemap[pfn];
	uint32_t start = (uint32_t)(pfn << usl_page_shift);
	unsigned int tag = s ? objects | (s->flags & USL_SLAB_INTERNAL ? USL_PM_INTERNAL : 0) : 0;
	for (size_t i = 0; i < ((size_t)1 << order); i++)
		usl_pm_write(&e[i], start, tag, s ? s->id : 0);
}

static inline bool slab_update_freelist(struct slab *slab, void *old_fl, unsigned long old_c,
                                        void *new_fl, unsigned long new_c)
{
	return usl_cas16(&slab->freelist, (unsigned long)old_fl, old_c, (unsigned long)new_fl, new_c);
}

static inline void slab_snapshot(struct slab *slab, void **fl, unsigned long *c)
{
	/* Racy read of the pair; every use is validated by the CAS. */
	*fl = usl_load_ptr(&slab->freelist);
	*c = usl_load(&slab->counters);
}

/* ===========================================================================
 * Node partial lists (under list_lock)
 */

static void add_partial(struct kmem_cache_node *n, struct slab *slab, bool tail)
{
	if (tail)
		usl_list_add_tail(&slab->slab_list, &n->partial);
	else
		usl_list_add_head(&slab->slab_list, &n->partial);
	slab->node_partial = 1;
	__atomic_store_n(&n->nr_partial, n->nr_partial + 1, __ATOMIC_RELAXED);  /* peeked unlocked */
}

static void remove_partial(struct kmem_cache_node *n, struct slab *slab)
{
	usl_list_del(&slab->slab_list);
	slab->node_partial = 0;
	__atomic_store_n(&n->nr_partial, n->nr_partial - 1, __ATOMIC_RELAXED);
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
	unsigned int k = (unsigned int)(usl_page_size / s->size);
	if (k == 0)
		k = 1;
	return k < uncarved ? k : uncarved;
}

static inline char *carve_start(const struct kmem_cache *s, const struct slab *slab, unsigned long c)
{
	return slab->addr + (size_t)(usl_counters_objects(c) - usl_counters_uncarved(c)) * s->size;
}

/* Link k objects from p on; the last one's free pointer is NULL. */
static void link_objects(const struct kmem_cache *s, char *p, unsigned int k)
{
	for (unsigned int i = 0; i < k; i++, p += s->size)
		set_freepointer(s, p, i + 1 < k ? p + s->size : NULL);
}

/* For a slab whose freelist is empty and that has uncarved objects: link the
 * next chunk, and return it with its counters (uncarved lowered) in *nc. */
static void *carve_linked(const struct kmem_cache *s, const struct slab *slab, unsigned long c, unsigned long *nc)
{
	unsigned int u = usl_counters_uncarved(c), k = carve_chunk(s, u);
	char *head = carve_start(s, slab, c);

	link_objects(s, head, k);
	*nc = usl_counters_set_uncarved(*nc, u - k);
	return head;
}

/* ===========================================================================
 * New and discarded slabs
 */

static struct slab *new_slab(struct kmem_cache *s, void **freelist)
{
	unsigned int order = s->order;
	/* Before the range grows, take back the barns' surplus: their objects
	 * may empty whole slabs whose pages can serve this one. Not for the sheaf
	 * structures' own caches: they grow because barns park sheaves. */
	if (!(s->flags & USL_SLAB_INTERNAL) && usl_pages_short(order))
		usl_cache_reclaim();
	void *addr = usl_pages_alloc(order, USL_PAGE_SLAB);

	if (!addr && s->min_order < order) {
		order = s->min_order;          /* the kernel's ORDER_FALLBACK */
		addr = usl_pages_alloc(order, USL_PAGE_SLAB);
	}
	if (!addr)
		return NULL;
	struct slab *slab = usl_virt_to_slab(addr);
	unsigned int objects = (unsigned int)(usl_order_bytes(order) / s->size);
	if (objects > USL_MAX_OBJS_PER_SLAB)
		objects = USL_MAX_OBJS_PER_SLAB;

	/* Nothing written: objects are carved as they are taken, a sheaf refill's
	 * without being read. A constructor runs when the slab is made, so such
	 * slabs are linked whole. */
	unsigned int linked = 0;
	if (s->ctor) {
		char *p = addr;
		for (unsigned int i = 0; i < objects; i++, p += s->size)
			s->ctor(p);
		linked = objects;
		link_objects(s, addr, linked);
	}
	slab->freelist = NULL;
	slab->counters = usl_counters_set_uncarved(usl_counters_make(objects, objects, true), objects - linked);
	slab->next = NULL;
	slab->slabs = 0;
	slab->node_partial = 0;
	struct kmem_cache_node *n = s->node[0];
	__atomic_fetch_add(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&n->total_objects, objects, __ATOMIC_RELAXED);
	__atomic_store_n(&slab->slab_cache, s, __ATOMIC_RELEASE);
	set_owner(slab, order, s, objects);
	*freelist = linked ? addr : NULL;
	return slab;
}

static void discard_slab(struct kmem_cache *s, struct slab *slab)
{
	struct kmem_cache_node *n = get_node(s, slab);
	unsigned int objects = usl_counters_objects(slab->counters);

	__atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&n->total_objects, objects, __ATOMIC_RELAXED);
	__atomic_store_n(&slab->slab_cache, NULL, __ATOMIC_RELEASE);
	set_owner(slab, slab->order, NULL, 0);
	usl_pages_free(usl_slab_address(slab));
}

/* ===========================================================================
 * Freezing and unfreezing (seed 001: only the cpu slab is frozen)
 */

/* Take a slab's whole freelist (or, if it is empty, a carved chunk) and freeze
 * it as a cpu slab. NULL if it has no free objects (then it is left as it was). */
static void *freeze_slab(const struct kmem_cache *s, struct slab *slab)
{
	void *fl, *head;
	unsigned long c, nc;

	do {
		slab_snapshot(slab, &fl, &c);
		nc = usl_counters_remake(c, usl_counters_objects(c), true);
		head = fl;
		if (!fl) {
			if (!usl_counters_uncarved(c))
				return NULL;
			head = carve_linked(s, slab, c, &nc);
		}
	} while (!slab_update_freelist(slab, fl, c, NULL, nc));
	return head;
}

/* The cpu slab's own freelist ran out: take what remote frees put on the slab,
 * else carve. With neither the slab is unfrozen in the same CAS: it is full, on
 * no list. */
static void *get_freelist(const struct kmem_cache *s, struct slab *slab)
{
	void *fl, *head;
	unsigned long c, nc;

	do {
		slab_snapshot(slab, &fl, &c);
		head = fl;
		nc = usl_counters_remake(c, usl_counters_objects(c), fl || usl_counters_uncarved(c));
		if (!fl && usl_counters_uncarved(c))
			head = carve_linked(s, slab, c, &nc);
	} while (!slab_update_freelist(slab, fl, c, NULL, nc));
	return head;
}

/* Up to nr uncarved objects of a frozen slab (ours) straight into p, untouched:
 * sheaf refills hand them out without reading them. 0 if the slab has a
 * freelist (remote frees; get_freelist takes it) or nothing uncarved. */
static unsigned int carve_array(const struct kmem_cache *s, struct slab *slab, size_t nr, void **p)
{
	void *fl;
	unsigned long c;
	unsigned int u, k;

	do {
		slab_snapshot(slab, &fl, &c);
		u = usl_counters_uncarved(c);
		if (fl || !u)
			return 0;
		k = nr < u ? (unsigned int)nr : u;
	} while (!slab_update_freelist(slab, NULL, c, NULL, usl_counters_set_uncarved(c, u - k)));
	char *q = carve_start(s, slab, c);
	for (unsigned int i = 0; i < k; i++, q += s->size)
		p[i] = q;
	return k;
}

/* Unfreeze a cpu slab, merging the private freelist fl back into it (one CAS
 * loop). Returns the slab's counters after it; *remote_frees says whether frees
 * from other CPUs were waiting on it, *has_free whether it has free objects. */
static unsigned long unfreeze_slab(struct kmem_cache *s, struct slab *slab, void *fl, bool *remote_frees,
                                   bool *has_free)
{
	void *tail = NULL, *old_fl, *new_fl;
	unsigned int cnt = 0, objects;
	unsigned long c, nc;

	c = usl_load(&slab->counters);
	objects = usl_counters_objects(c);
	for (void *p = fl; p; p = get_freepointer(s, p)) {
		tail = p;
		if (usl_unlikely(++cnt > objects)) {
			/* More free objects than the slab has: the chain loops, as a
			 * double free the fast path could not see (the object was not
			 * at the head) makes it. Walking on would never end and
			 * linking it would hand objects out twice: the slab stays
			 * frozen and nobody's, its free objects lost. */
			usl_report(USLAB_ERR_DOUBLE_FREE, "%s: the free list of slab %p loops (an object freed twice?); "
			           "the slab is abandoned: its %u objects are not reused", s->name, slab->addr, objects);
			*remote_frees = *has_free = false;
			return c;
		}
	}
	*remote_frees = usl_load_ptr(&slab->freelist) != NULL;
	do {
		slab_snapshot(slab, &old_fl, &c);
		if (tail) {
			set_freepointer(s, tail, old_fl);
			new_fl = fl;
		} else {
			new_fl = old_fl;
		}
		/* Uncarved objects were counted in use while frozen. */
		nc = usl_counters_remake(c, usl_counters_inuse(c) - cnt - usl_counters_uncarved(c), false);
	} while (!slab_update_freelist(slab, old_fl, c, new_fl, nc));
	*has_free = new_fl || usl_counters_uncarved(nc);
	return nc;
}

/* Unfreeze a cpu slab and put it where it belongs: freed when empty beyond
 * min_partial; node partial when it has free objects (tail if remote frees were
 * waiting, else head: the kernel's DEACTIVATE_TO_TAIL / TO_HEAD); nowhere when full. */
static void deactivate_slab(struct kmem_cache *s, struct slab *slab, void *fl)
{
	struct kmem_cache_node *n = get_node(s, slab);
	bool remote_frees, has_free;
	unsigned long nc = unfreeze_slab(s, slab, fl, &remote_frees, &has_free);

	if (usl_counters_frozen(nc))         /* abandoned: its free list loops */
		return;
	if (usl_counters_inuse(nc) == 0 && __atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED) >= s->min_partial) {
		discard_slab(s, slab);
	} else if (has_free) {
		pthread_mutex_lock(&n->list_lock);
		add_partial(n, slab, remote_frees);
		pthread_mutex_unlock(&n->list_lock);
	}
	/* else: full, on no list; the next free finds it (was_full) */
}

/* Move a chain of cpu partial slabs (unfrozen, on no list) to the node lists. */
static void put_partials(struct kmem_cache *s, struct slab *chain)
{
	struct slab *discard = NULL;
	struct kmem_cache_node *n = NULL;

	while (chain) {
		struct slab *slab = chain;
		struct kmem_cache_node *sn = get_node(s, slab);
		chain = slab->next;
		if (sn != n) {     /* one lock hold for consecutive slabs of a node */
			if (n)
				pthread_mutex_unlock(&n->list_lock);
			n = sn;
			pthread_mutex_lock(&n->list_lock);
		}
		/* Under list_lock inuse == 0 is final: nobody can allocate from a slab on
		 * no list, and a free that empties it takes list_lock before its CAS. */
		if (usl_counters_inuse(usl_load(&slab->counters)) == 0 && n->nr_partial >= s->min_partial) {
			slab->next = discard;
			discard = slab;
		} else {
			add_partial(n, slab, true);
		}
	}
	if (n)
		pthread_mutex_unlock(&n->list_lock);
	while (discard) {
		struct slab *slab = discard;
		discard = slab->next;
		discard_slab(s, slab);
	}
}

/* ===========================================================================
 * The per-CPU slot, in both modes. Locked mode: `tid` and `freelist` change with
 * cmpxchg16b; `slab` and `partial` only under c->lock. rseq mode: see rseq_x86.h.
 */

/* tid starts at the slot number and steps by a power of two >= the slot count,
 * so a tid names both the slot and the generation (the kernel's TID_STEP). */
static unsigned long tid_step_v = 1;
static inline unsigned long tid_step(void) { return __atomic_load_n(&tid_step_v, __ATOMIC_RELAXED); }

static inline struct kmem_cache_cpu *hint_slot(struct kmem_cache *s)
{
	int h = cpu_hint;
	if (usl_unlikely(h < 0 || (unsigned int)h >= usl_nr_cpus))
		h = cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
	return &s->cpu_slab[h];
}

struct kmem_cache_cpu *usl_slub_hint_slot(struct kmem_cache *s)
{
	return hint_slot(s);
}

/* The hint re-read from the CPU the thread runs on now (slow paths). */
struct kmem_cache_cpu *usl_slub_hint_refresh(struct kmem_cache *s)
{
	cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
	return &s->cpu_slab[cpu_hint];
}

/* locked mode, under c->lock: take the freelist and the slab out of the slot.
 * The slab pointer is cleared first so fast frees that see the new tid go slow. */
static void locked_detach(struct kmem_cache_cpu *c, void **fl, struct slab **slab)
{
	unsigned long tid;
	void *old;

	*slab = c->slab;
	__atomic_store_n(&c->slab, NULL, __ATOMIC_RELEASE);
	do {
		tid = usl_load(&c->tid);
		old = usl_load_ptr(&c->freelist);
	} while (!usl_cas16(c, tid, (unsigned long)old, tid + tid_step(), 0));
	*fl = old;
}

/* locked mode, under c->lock, slot empty: install a freelist, then its slab. */
static void locked_install(struct kmem_cache_cpu *c, void *fl, struct slab *slab)
{
	unsigned long tid;

	do {
		tid = usl_load(&c->tid);
	} while (!usl_cas16(c, tid, 0, tid + tid_step(), (unsigned long)fl));
	__atomic_store_n(&c->slab, slab, __ATOMIC_RELEASE);
}

static void wait_flush(struct kmem_cache *s)
{
	(void)s;
	/* A flusher holds this CPU's slot; it finishes quickly. */
	sched_yield();
}

/* Put a slab that just stopped being full on this CPU's partial chain; drain the
 * chain to the node when it is at its limit (the kernel's put_cpu_partial). */
static void put_cpu_partial(struct kmem_cache *s, struct slab *slab)
{
	if (usl_rseq_mode) {
		for (;;) {
			int r = usl_rseq_partial_push(s, slab, s->cpu_partial_slabs);
			if (r == USL_RS_OK)
				return;
			if (r == USL_RS_MARKED) {
				wait_flush(s);
				continue;
			}
			if (r == USL_RS_NOCPU)
				break;
			struct slab *chain;
			r = usl_rseq_partial_take(s, &chain, 1);
			if (r == USL_RS_OK)
				put_partials(s, chain);
			else if (r == USL_RS_MARKED)
				wait_flush(s);
			else if (r == USL_RS_NOCPU)
				break;
		}
		slab->next = NULL;
		put_partials(s, slab);
		return;
	}

	struct kmem_cache_cpu *c = hint_slot(s);
	struct slab *drain = NULL;
	usl_spin_lock(&c->lock);
	struct slab *head = c->partial;
	unsigned int cnt = head ? head->slabs + 1 : 1;
	if (cnt > s->cpu_partial_slabs) {
		drain = head;
		head = NULL;
		cnt = 1;
	}
	slab->next = head;
	slab->slabs = cnt;
	c->partial = slab;
	usl_spin_unlock(&c->lock);
	if (drain)
		put_partials(s, drain);
}

/* Is x among slab's uncarved objects? Those are free and were never handed out;
 * freeing one would make carving hand it out twice. */
static bool never_handed_out(const struct kmem_cache *s, const struct slab *slab, unsigned long c, const void *x)
{
	return (const char *)x >= carve_start(s, slab, c);
}

/* ===========================================================================
 * Freeing to a slab: the kernel's __slab_free. One 16-byte CAS; list_lock only
 * when the slab changes list. head..tail is a chain of cnt objects of slab.
 */
static __attribute__((noinline)) void slab_free_slow(struct kmem_cache *s, struct slab *slab, void *head, void *tail,
                                                     unsigned int cnt)
{
	struct kmem_cache_node *n = NULL;
	bool was_frozen, had_free = false, on_node_partial = false;
	bool has_cpu_partial = s->cpu_partial_slabs > 0;
	void *prior;
	unsigned long c, nc;

	do {
		if (usl_unlikely(n)) {
			pthread_mutex_unlock(&n->list_lock);
			n = NULL;
		}
		slab_snapshot(slab, &prior, &c);
		if (usl_unlikely(cnt == 1 && prior == head)) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "kmem_cache_free(%s): double free of %p (already free); not freed",
			           s->name, head);
			return;
		}
		if (usl_unlikely(usl_counters_inuse(c) < cnt)) {
			/* More frees than objects in use: a double free that was not at
			 * the freelist head. Refuse it rather than wrap the counter. */
			if (n)
				pthread_mutex_unlock(&n->list_lock);
			usl_report(USLAB_ERR_DOUBLE_FREE, "kmem_cache_free(%s): double free of %p (slab has %u objects in use); not freed",
			           s->name, head, usl_counters_inuse(c));
			return;
		}
		if (usl_unlikely(cnt == 1 && usl_counters_uncarved(c) && never_handed_out(s, slab, c, head))) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "kmem_cache_free(%s): double free of %p (never allocated); not freed", s->name,
			           head);
			return;
		}
		was_frozen = usl_counters_frozen(c);
		had_free = prior || usl_counters_uncarved(c);   /* else it was full */
		set_freepointer(s, tail, prior);
		nc = usl_counters_remake(c, usl_counters_inuse(c) - cnt, was_frozen);
		if ((usl_counters_inuse(nc) == 0 || !had_free) && !was_frozen) {
			if (!has_cpu_partial || had_free) {
				/* May need list changes: lock before the CAS so that a
				 * concurrent put_partials sees a consistent inuse. */
				n = get_node(s, slab);
				pthread_mutex_lock(&n->list_lock);
				on_node_partial = slab->node_partial;
			}
		}
	} while (!slab_update_freelist(slab, prior, c, head, nc));

	if (usl_likely(!n)) {
		if (!was_frozen && has_cpu_partial && !had_free)
			put_cpu_partial(s, slab);   /* was full: now ours to place */
		return;
	}
	if (had_free && !on_node_partial) {
		/* cpu partial, or isolated by an allocating thread */
		pthread_mutex_unlock(&n->list_lock);
		return;
	}
	if (usl_counters_inuse(nc) == 0 && n->nr_partial >= s->min_partial) {
		if (had_free)
			remove_partial(n, slab);
		pthread_mutex_unlock(&n->list_lock);
		discard_slab(s, slab);
		return;
	}
	if (!had_free)
		add_partial(n, slab, true);  /* was full, no cpu partial lists */
	pthread_mutex_unlock(&n->list_lock);
}

/* ===========================================================================
 * Allocation slow path
 */

/* Take one slab off the node partial list to become the cpu slab, and up to
 * cpu_partial_slabs / 2 + 1 more for this CPU's partial chain (returned in *extra,
 * in list order). Nothing is frozen under list_lock (seed 001). */
static struct slab *get_partial_node(struct kmem_cache *s, struct kmem_cache_node *n, struct slab **extra)
{
	struct slab *first = NULL, *chain = NULL, **link = &chain;
	unsigned int taken = 0;

	*extra = NULL;
	if (!__atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&n->list_lock);
	while (!usl_list_empty(&n->partial)) {
		struct slab *slab = usl_container_of(n->partial.next, struct slab, slab_list);
		remove_partial(n, slab);
		if (!first) {
			first = slab;
			if (!s->cpu_partial_slabs)
				break;
		} else {
			slab->next = NULL;
			*link = slab;
			link = &slab->next;
			if (++taken > s->cpu_partial_slabs / 2)
				break;
		}
	}
	pthread_mutex_unlock(&n->list_lock);
	*extra = chain;
	return first;
}

/* One object of a slab with freelist fl and counters c, for alloc_direct: the
 * freelist's head, else the first uncarved one (nothing to link). *next is the
 * freelist after it, *nc the counters after it (inuse, unfrozen). */
static void *take_one(const struct kmem_cache *s, const struct slab *slab, void *fl, unsigned long c,
                      unsigned int inuse, void **next, unsigned long *nc)
{
	unsigned int u = usl_counters_uncarved(c);
	void *obj = fl;

	if (fl) {
		*next = get_freepointer(s, fl);
	} else {
		obj = carve_start(s, slab, c);
		*next = NULL;
		u--;
	}
	*nc = usl_counters_set_uncarved(usl_counters_remake(c, inuse, false), u);
	return obj;
}

/* No per-CPU slot for this thread (rseq not registered for it): take one object
 * straight from a node partial slab under list_lock, as the 7.0 kernel does. */
static void *alloc_direct(struct kmem_cache *s)
{
	struct kmem_cache_node *n = s->node[0];
	void *fl, *obj, *next;
	unsigned long c, nc;
	struct slab *slab;

	pthread_mutex_lock(&n->list_lock);
	while (!usl_list_empty(&n->partial)) {
		slab = usl_container_of(n->partial.next, struct slab, slab_list);
		slab_snapshot(slab, &fl, &c);
		if (!fl && !usl_counters_uncarved(c)) {   /* cannot happen: listed slabs have free objects */
			remove_partial(n, slab);
			continue;
		}
		obj = take_one(s, slab, fl, c, usl_counters_inuse(c) + 1, &next, &nc);
		/* Taking the last object makes the slab full: isolate it first, so a
		 * free that then sees it full may place it without list_lock. */
		bool full = !next && !usl_counters_uncarved(nc);
		if (full)
			remove_partial(n, slab);
		if (slab_update_freelist(slab, fl, c, next, nc)) {
			pthread_mutex_unlock(&n->list_lock);
			return obj;
		}
		if (full)
			add_partial(n, slab, false);
	}
	pthread_mutex_unlock(&n->list_lock);

	slab = new_slab(s, &fl);
	if (!slab)
		return NULL;
	obj = take_one(s, slab, fl, slab->counters, 1, &next, &nc);
	slab->freelist = next;
	slab->counters = nc;
	if (next || usl_counters_uncarved(nc)) {
		pthread_mutex_lock(&n->list_lock);
		add_partial(n, slab, false);
		pthread_mutex_unlock(&n->list_lock);
	}
	return obj;
}

/* Find a new cpu slab: cpu partial, then node partial, then a new slab. Returns
 * the slab (frozen) and its linked objects in *fl (none for a new slab: all
 * uncarved). Locked mode (lc): called and returns
 * with lc->lock held, but drops it in between. */
static struct slab *refill(struct kmem_cache *s, struct kmem_cache_cpu *lc, void **fl)
{
	struct slab *slab, *extra;

	for (;;) {
		if (lc) {
			slab = lc->partial;
			if (slab)
				lc->partial = slab->next;
		} else {
			int r = usl_rseq_partial_take(s, &slab, 0);
			if (r == USL_RS_MARKED) {
				wait_flush(s);
				continue;
			}
			if (r != USL_RS_OK)
				slab = NULL;
		}
		if (!slab)
			break;
		*fl = freeze_slab(s, slab);
		if (*fl)
			return slab;
		/* No free objects (cannot happen for a slab that reached a partial
		 * list through a free); it is full and on no list. */
	}

	/* Locked mode: drop the slot lock for the node list and the page provider,
	 * as the kernel drops its per-CPU lock around new_slab: a constructor may
	 * allocate, and mprotect/madvise must not run under a spin lock. */
	if (lc)
		usl_spin_unlock(&lc->lock);
	slab = get_partial_node(s, s->node[0], &extra);
	if (slab) {
		*fl = freeze_slab(s, slab);
		if (!*fl)
			slab = NULL;  /* full after all: it stays off the list */
	}
	if (!slab)
		slab = new_slab(s, fl);
	if (lc)
		usl_spin_lock(&lc->lock);
	while (extra) {
		struct slab *e = extra;
		extra = e->next;
		/* Pushed in list order, so the last one taken is used first, and
		 * never drained here (the kernel's put_cpu_partial(drain=0)). */
		if (lc) {
			e->next = lc->partial;
			e->slabs = lc->partial ? lc->partial->slabs + 1 : 1;
			lc->partial = e;
		} else {
			int r;
			while ((r = usl_rseq_partial_push(s, e, ~0u)) == USL_RS_MARKED)
				wait_flush(s);
			if (r != USL_RS_OK) {       /* no CPU: to the node list */
				e->next = NULL;
				put_partials(s, e);
			}
		}
	}
	return slab;
}

/* A slot's state, taken private by an allocation slow path (the kernel disables
 * interrupts; here the slot is detached once and installed once). */
struct private_slot {
	struct kmem_cache_cpu *lc;   /* locked mode: the slot, its lock held */
	void *fl;
	struct slab *slab;
};

/* Take this CPU's slot. False: this thread has no slot (rseq not registered). */
static bool slot_take(struct kmem_cache *s, struct private_slot *b)
{
	b->lc = NULL;
	if (!usl_rseq_mode) {
		cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
		b->lc = &s->cpu_slab[cpu_hint];
		usl_spin_lock(&b->lc->lock);
		locked_detach(b->lc, &b->fl, &b->slab);
		return true;
	}
	for (;;) {
		int r = usl_rseq_detach(s, &b->fl, &b->slab);
		if (r == USL_RS_OK)
			return true;
		if (r == USL_RS_NOCPU)
			return false;
		wait_flush(s);
	}
}

/* More objects: what remote frees left on the slab, else a new cpu slab. With
 * link, b->fl is not empty after it; without, a new slab may come with b->fl
 * empty and everything uncarved (for carve_array). */
static bool slot_refill(struct kmem_cache *s, struct private_slot *b, bool link)
{
	if (b->slab) {
		b->fl = get_freelist(s, b->slab);   /* NULL: the slab is full and unfrozen */
		if (b->fl)
			return true;
		b->slab = NULL;
	}
	b->slab = refill(s, b->lc, &b->fl);
	if (b->slab && !b->fl && link)
		b->fl = get_freelist(s, b->slab);   /* a new slab: carve a linked chunk */
	return b->slab != NULL;
}

/* Give the slot back: install what is left, or return it to the slab. */
static void slot_put(struct kmem_cache *s, struct private_slot *b)
{
	if (b->lc) {
		if (b->slab && !b->lc->slab) {
			locked_install(b->lc, b->fl, b->slab);
			b->slab = NULL;
		}
		usl_spin_unlock(&b->lc->lock);
		if (b->slab)           /* another thread filled the slot meanwhile */
			deactivate_slab(s, b->slab, b->fl);
		return;
	}
	if (!b->slab)
		return;
	for (;;) {
		int r = usl_rseq_install(s, b->fl, b->slab);
		if (r == USL_RS_MARKED) {
			wait_flush(s);
			continue;
		}
		if (r != USL_RS_OK)
			deactivate_slab(s, b->slab, b->fl);
		return;
	}
}

static __attribute__((noinline)) void *slab_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	struct private_slot b;
	void *obj;

	if (!slot_take(s, &b)) {
		obj = alloc_direct(s);
		if (!obj)
			goto nomem;
		return obj;
	}
	/* The slot is empty and what it held is ours. */
	if (!b.fl && !slot_refill(s, &b, true)) {
		slot_put(s, &b);
		goto nomem;
	}
	obj = b.fl;
	b.fl = get_freepointer(s, obj);
	slot_put(s, &b);   /* installs, or gives back if the slot was filled meanwhile */
	return obj;

nomem:
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc(%s): out of memory (object size %u, order %u)",
		           s->name, s->object_size, s->order);
	return NULL;
}

/* ===========================================================================
 * Fast paths and the public entry points
 */

static __attribute__((noinline)) void *alloc_fast_locked(struct kmem_cache *s)
{
	struct kmem_cache_cpu *c = hint_slot(s);
	unsigned long tid;
	void *obj;

	do {
		tid = usl_load(&c->tid);
		obj = usl_load_ptr(&c->freelist);
		if (usl_unlikely(!obj))
			return NULL;
	} while (!usl_cas16(c, tid, (unsigned long)obj, tid + tid_step(),
	                    (unsigned long)get_freepointer_safe(s, obj)));
	return obj;
}

/* Everything but the common case: NULL cache, empty freelist, __GFP_ZERO. */
static __attribute__((noinline, cold)) void *alloc_tail(struct kmem_cache *s, gfp_t gfp, void *obj)
{
	if (usl_unlikely(!s)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc: NULL cache");
		return NULL;
	}
	if (!obj && !s->sheaf_capacity)
		obj = slab_alloc_slow(s, gfp);
	if ((gfp & __GFP_ZERO) && obj)
		memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return obj;
}

/* The cpu-slab layer's allocation (no zeroing): the section, then the slow path. */
void *usl_slub_alloc(struct kmem_cache *s, gfp_t gfp)
{
	void *obj;

	USL_RSEQ_ALLOC(s, obj);
	return obj;
slow:
	obj = usl_rseq_mode ? NULL : alloc_fast_locked(s);
	return obj ? obj : slab_alloc_slow(s, gfp);
}

/* The slow paths of kmem_cache_alloc, each reached by a tail call so the fast
 * paths need no stack frame. */
static __attribute__((noinline)) void *sheaf_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	void *obj = usl_sheaf_alloc(s, gfp);
	if ((gfp & __GFP_ZERO) && obj)
		memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return obj;
}

static __attribute__((noinline)) void *cpu_slab_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	void *obj = usl_rseq_mode ? NULL : alloc_fast_locked(s);
	return alloc_tail(s, gfp, obj);
}

void *kmem_cache_alloc(struct kmem_cache *s, gfp_t gfp)
{
	void *obj;

	if (usl_unlikely(!s))
		return alloc_tail(s, gfp, NULL);
	if (s->sheaf_capacity) {
		/* Sheaves: pop this CPU's main sheaf. */
		USL_RSEQ_SHEAF_POP(s->cpu_slab, obj, sheaf_slow);
		if (usl_unlikely(gfp & __GFP_ZERO))
			return alloc_tail(s, gfp, obj);
		return obj;
sheaf_slow:
		return sheaf_alloc_slow(s, gfp);
	}
	/* One section serves both modes: in locked mode it jumps to `slow` at once. */
	USL_RSEQ_ALLOC(s, obj);
	if (usl_unlikely(gfp & __GFP_ZERO))
		return alloc_tail(s, gfp, obj);
	return obj;
slow:
	return cpu_slab_alloc_slow(s, gfp);
}

/* malloc's allocation from its class s: kmem_cache_alloc(s, GFP_KERNEL |
 * __GFP_NOWARN) that sets errno to ENOMEM when it fails. The sheaf pop is
 * inlined so that malloc is a table load and a jump here. */
static __attribute__((noinline)) void *malloc_slow(struct kmem_cache *s)
{
	void *obj = s->sheaf_capacity ? sheaf_alloc_slow(s, GFP_KERNEL | __GFP_NOWARN)
	                              : kmem_cache_alloc(s, GFP_KERNEL | __GFP_NOWARN);
	if (usl_unlikely(!obj))
		errno = ENOMEM;
	return obj;
}

void *usl_slub_malloc(struct kmem_cache_cpu *slots, size_t i)
{
	void *obj;

	USL_RSEQ_SHEAF_POP(slots, obj, slow);
	return obj;
slow:   /* the class was published before its slots (kmalloc.c) */
	return malloc_slow(__atomic_load_n(&usl_malloc_tab[i], __ATOMIC_ACQUIRE));
}

void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t gfp, int node)
{
	/* One node until NUMA placement lands: every node id is a hint. */
	(void)node;
	return kmem_cache_alloc(s, gfp);
}

void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t gfp)
{
	return kmem_cache_alloc(s, gfp | __GFP_ZERO);
}

/* Why x cannot be freed to s (reported, not freed). */
/* Why x cannot be freed (reported, not freed). fn names the entry point; s is the
 * cache the caller named, or NULL for kfree_bulk (any cache). */
static void __attribute__((noinline, cold)) report_bad_free_in(const char *fn, struct kmem_cache *s, const void *x,
                                                            struct slab *slab)
{
	const char *name = s ? s->name : "any cache";

	/* A pointer into never-used or purged memory finds a zeroed page-map
	 * entry, which leads to some other block: not x's. */
	if (slab && (uintptr_t)x - (uintptr_t)usl_slab_address(slab) >= usl_order_bytes(slab->order)) {
		usl_report(USLAB_ERR_NOT_OBJECT, "%s(%s): %p is not in a slab; not freed", fn, name, x);
		return;
	}
	if (!slab) {
		usl_report(USLAB_ERR_FOREIGN, "%s(%s): %p is not a uslab pointer; not freed", fn, name, x);
		return;
	}
	struct kmem_cache *owner = __atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE);
	if (!owner) {
		usl_report(USLAB_ERR_NOT_OBJECT, "%s(%s): %p is not in a slab; not freed", fn, name, x);
	} else if (s && owner != s) {
		usl_report(USLAB_ERR_WRONG_CACHE, "%s(%s): %p belongs to cache %s; not freed", fn, name, x, owner->name);
	} else {
		usl_report(USLAB_ERR_NOT_OBJECT, "%s(%s): %p is not the start of an object (offset %lu in its slab); not freed",
		           fn, owner->name, x, (unsigned long)((uintptr_t)x - (uintptr_t)usl_slab_address(slab)));
	}
}

static void __attribute__((noinline, cold)) report_bad_free(struct kmem_cache *s, const void *x, struct slab *slab)
{
	report_bad_free_in("kmem_cache_free", s, x, slab);
}

__attribute__((noinline)) void usl_report_double_free(struct kmem_cache *s, void *x, const char *fn)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (already free); not freed", fn, s->name, x);
}

/* Not this CPU's slab: check it is s's before freeing to the slab. */
static __attribute__((noinline)) void free_checked_slow(struct kmem_cache *s, struct slab *slab, void *x)
{
	if (usl_unlikely(__atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE) != s)) {
		report_bad_free(s, x, slab);
		return;
	}
	slab_free_slow(s, slab, x, x, 1);
}

/* locked mode: push the chain head..tail of slab onto the hinted slot's freelist
 * if slab is its cpu slab. The same return codes as usl_rseq_free_chain. */
static inline __attribute__((always_inline)) int locked_push_chain(struct kmem_cache *s, struct slab *slab, void *head,
                                                                  void *tail)
{
	struct kmem_cache_cpu *c = hint_slot(s);

	for (;;) {
		unsigned long tid = usl_load(&c->tid);
		if (__atomic_load_n(&c->slab, __ATOMIC_ACQUIRE) != slab)
			return USL_RS_OTHER;
		void *fl = usl_load_ptr(&c->freelist);
		if (usl_unlikely(fl == head))
			return USL_RS_DOUBLE;
		if (usl_unlikely(fl == tail))
			return USL_RS_DOUBLE_TAIL;
		set_freepointer(s, tail, fl);
		if (usl_cas16(c, tid, (unsigned long)fl, tid + tid_step(), (unsigned long)head))
			return USL_RS_OK;
	}
}

/* A single object whose section (usl_rseq_free, result r) did not push it:
 * a double free, the locked-mode push, or a slab that is not this CPU's. */
static __attribute__((noinline)) void free_one_slow(struct kmem_cache *s, struct slab *slab, void *x, int r,
                                                  const char *fn)
{
	if (r == USL_RS_OTHER) {
		usl_report_double_free(s, x, fn);
		return;
	}
	if (!usl_rseq_mode) {
		r = locked_push_chain(s, slab, x, x);
		if (r == USL_RS_OK)
			return;
		if (r != USL_RS_OTHER) {
			usl_report_double_free(s, x, fn);
			return;
		}
	}
	free_checked_slow(s, slab, x);
}

/* Is x an object of s? The page map gives its slab's start, cache and object
 * count: one 8-byte entry, no struct slab (the slab itself is found only on
 * the paths that need it). */
static inline __attribute__((always_inline)) bool obj_check(struct kmem_cache *s, void *x)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)))
		return false;
	struct usl_pagemap_entry e = usl_pm_read(&usl_pagemap[off >> usl_page_shift]);
	return e.cache == s->id && obj_index_in(s, (uint32_t)off - e.start, USL_PM_OBJECTS(e));
}

/* kmalloc.c's ksize/krealloc: x is the start of an object of s (the free check). */
bool usl_slub_obj_ok(struct kmem_cache *s, const void *x)
{
	return obj_check(s, (void *)x);
}

/* Every 256th kfree/free of a thread marks its cache used, for the decay
 * sweep's idea of idle, and ticks the decay clock, so a program whose frees
 * all take fast paths still gives memory back. (kmem_cache_free does not: its
 * pair with kmem_cache_alloc is the leanest path; a user cache's CPU slots are
 * never flushed by the sweep.) */
static __thread unsigned int free_calls;

static __attribute__((noinline)) void free_sample(struct kmem_cache *s)
{
	__atomic_store_n(&s->recent_use, 1, __ATOMIC_RELAXED);
	usl_decay_tick();
}

/* free_sample for usl_slub_kfree_or's fast path, which has only the id. */
static __attribute__((noinline)) void free_sample_id(unsigned int id)
{
	struct kmem_cache *s = __atomic_load_n(&usl_caches[id], __ATOMIC_ACQUIRE);
	if (s)
		free_sample(s);
}

/* Counts a kfree/free on this thread: true for every 256th. */
static inline __attribute__((always_inline)) bool sample_due(void)
{
	return usl_unlikely(!(++free_calls % 256));
}

/* Called last on each free path, so that it is a tail call and the fast path
 * saves no register. */
static inline __attribute__((always_inline)) void maybe_sample(struct kmem_cache *s, bool sample)
{
	if (sample && sample_due())
		free_sample(s);
}

/* A checked object x of s, to its sheaf or cpu slab; fn names reports. */
static inline __attribute__((always_inline)) void free_checked(struct kmem_cache *s, void *x, const char *fn,
                                                               bool sample)
{
	if (s->sheaf_capacity) {
		int r = usl_rseq_sheaf_push(s, x);
		if (usl_likely(r == USL_RS_OK)) {
			maybe_sample(s, sample);
			return;
		}
		if (r == USL_RS_OTHER)
			usl_report_double_free(s, x, fn);
		else
			usl_sheaf_free(s, x);   /* full main, marked slot, locked mode */
		maybe_sample(s, sample);
		return;
	}
	/* In locked mode the section fails at once (usl_rseq_nr == 0). */
	struct slab *slab = usl_virt_to_slab(x);
	int r = usl_rseq_free(s, slab, x);
	if (usl_likely(r == USL_RS_OK)) {
		maybe_sample(s, sample);
		return;
	}
	free_one_slow(s, slab, x, r, fn);
	maybe_sample(s, sample);
}

void kmem_cache_free(struct kmem_cache *s, void *x)
{
	if (usl_unlikely(!x))
		return;
	if (usl_unlikely(!s)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_free: NULL cache for %p; not freed", x);
		return;
	}
	if (usl_unlikely(!obj_check(s, x))) {
		report_bad_free(s, x, usl_virt_to_slab(x));
		return;
	}
	free_checked(s, x, "kmem_cache_free", false);
}

/* usl_slub_kfree_or's slow path, for x at offset off in the range: a slab
 * object of a user or kmalloc cache, its cache from the page map and the
 * object check kmem_cache_free's; anything else (a large block, uslab's own
 * object, a pointer into no slab) is other(x, fn)'s, a tail call. */
static __attribute__((noinline)) void kfree_slow(void *x, const char *fn, void (*other)(void *, const char *),
                                                  uintptr_t off)
{
	struct usl_pagemap_entry e = usl_pm_read(&usl_pagemap[off >> usl_page_shift]);
	struct kmem_cache *s = usl_pagemap_user_cache(e);
	if (usl_unlikely(!s)) {
		other(x, fn);
		return;
	}
	/* A user cache's entry: objects has no USL_PM_INTERNAL bit to mask. */
	if (usl_unlikely(!obj_index_in(s, (uint32_t)off - e.start, e.objects)))
		report_bad_free_in(fn, s, x, usl_virt_to_slab(x));
	else
		free_checked(s, x, fn, true);
}

/* The fast path needs no struct kmem_cache: the page map's id gives the
 * object check's divisor (usl_cache_div) and the slots (usl_id_slots), and a
 * push onto the CPU's main sheaf ends it. Everything else - no cache (id 0,
 * whose divisor fails the check), uslab's own caches, a bad pointer, a
 * double free on the sheaf's top, a full sheaf, a cache without sheaves -
 * goes to kfree_slow, which looks at the cache. */
void usl_slub_kfree_or(void *x, const char *fn, void (*other)(void *, const char *))
{
	uintptr_t off = (uintptr_t)x - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))) {
		other(x, fn);
		return;
	}
	uint64_t w = usl_pm_word(&usl_pagemap[off >> usl_page_shift]);
	unsigned int id = (unsigned int)(w >> 48);
	uint64_t d = __atomic_load_n(&usl_cache_div[id], __ATOMIC_RELAXED);
	/* An object of uslab's own caches (objects has USL_PM_INTERNAL) may pass
	 * the index test, but those caches have no sheaves: the push fails. */
	if (usl_likely(obj_index((uint32_t)off - (uint32_t)w, (uint32_t)d, (uint32_t)(d >> 32)) <
	               (uint16_t)(w >> 32)) &&
	    usl_likely(usl_rseq_sheaf_push_at(usl_id_slots(id), x) == USL_RS_OK)) {
		if (sample_due())
			free_sample_id(id);
		return;
	}
	kfree_slow(x, fn, other, off);
}

/* The cpu-slab layer's free of a checked object of s. */
void usl_slub_free(struct kmem_cache *s, struct slab *slab, void *x)
{
	int r = usl_rseq_free(s, slab, x);
	if (r != USL_RS_OK)
		free_one_slow(s, slab, x, r, "kmem_cache_free");
}

/* ===========================================================================
 * Bulk allocation and freeing (seed 000: detached freelists)
 */

#define BULK_SECTION_MAX 64

/* The cpu-slab layer's bulk allocation (no zeroing): all or nothing. */
int usl_slub_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	struct private_slot b;
	size_t i = 0;

	/* Most calls are served by this CPU's freelist in one section. The section
	 * is capped, so a restart (preemption, a signal) repeats little work; the
	 * rest takes the slot private below (slot_take). */
	int st;
	i = usl_rseq_alloc_bulk(s, nr < BULK_SECTION_MAX ? nr : BULK_SECTION_MAX, p, &st);
	if (i == nr)
		return (int)nr;
	if (!slot_take(s, &b)) {
		/* No per-CPU slot for this thread: one object at a time. */
		for (; i < nr; i++)
			if (!(p[i] = alloc_direct(s)))
				goto fail;
	} else {
		while (i < nr) {
			if (usl_unlikely(!b.fl)) {
				unsigned int k = b.slab ? carve_array(s, b.slab, nr - i, p + i) : 0;
				if (k) {
					i += k;
					continue;
				}
				if (!slot_refill(s, &b, false)) {
					slot_put(s, &b);
					goto fail;
				}
				continue;       /* a new slab comes uncarved */
			}
			p[i++] = b.fl;
			b.fl = get_freepointer(s, b.fl);
		}
		slot_put(s, &b);
	}
	return (int)nr;

fail:
	/* All or nothing: give back what we got. */
	usl_slub_free_bulk(s, i, p);
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; none kept",
		           s->name, i, nr);
	return 0;
}

/* Bulk calls this small take the single-object paths (sheaves): their fixed
 * cost is lower than a bulk call's. */
#define SMALL_BULK 3

static __attribute__((noinline, cold)) int alloc_bulk_failed(struct kmem_cache *s, gfp_t gfp, size_t got, size_t nr)
{
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; none kept",
		           s->name, got, nr);
	return 0;
}

int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	if (usl_unlikely(!s || (!p && nr) || nr > (size_t)INT32_MAX)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc_bulk(%s): %s (nr %zu)", s ? s->name : "NULL",
		           !s ? "NULL cache" : !p ? "NULL array" : "nr above INT_MAX", nr);
		return 0;
	}
	if (!nr)
		return 0;
	if (nr <= SMALL_BULK && s->sheaf_capacity) {
		/* The single-object path is cheaper for a few objects. */
		for (size_t i = 0; i < nr; i++)
			if (!(p[i] = kmem_cache_alloc(s, gfp | __GFP_NOWARN))) {
				for (size_t j = 0; j < i; j++)
					kmem_cache_free(s, p[j]);
				return alloc_bulk_failed(s, gfp, i, nr);
			}
		return (int)nr;
	}
	if (!(s->sheaf_capacity ? usl_sheaf_alloc_bulk(s, gfp, nr, p) : usl_slub_alloc_bulk(s, gfp, nr, p)))
		return 0;
	if (gfp & __GFP_ZERO)
		for (size_t i = 0; i < nr; i++)
			memset(p[i], 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return (int)nr;
}

/* The objects of one slab gathered from a bulk-free array: the range objs[0..n)
 * of the array (NULL where an entry was dropped), and a bitmap of their object
 * indexes. Nothing is written into the objects until they are handed over. */
struct detached_freelist {
	struct kmem_cache *s;
	struct slab *slab;
	void **objs;
	size_t n;
	void *first;        /* the object the list was started with */
	unsigned int cnt;   /* objects still in it */
	void *head, *tail;  /* after linking */
	void *head_fp;      /* the head's free pointer before it was linked */
	uint64_t *map;
	bool map_ready;
	unsigned int first_idx;
};

#define BULK_MAP_WORDS ((USL_MAX_OBJS_PER_SLAB + 64) / 64)

/* The slab and object index of x, or NULL with the reason reported. s: the cache
 * x must belong to, or NULL for any. */
static struct slab *bulk_check(const char *fn, struct kmem_cache *s, void *x, unsigned int *idx)
{
	struct slab *slab = usl_virt_to_slab(x);
	struct kmem_cache *owner = slab ? __atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE) : NULL;

	if (usl_unlikely(!owner || (s && owner != s) ||
	                 !obj_index_at(owner, slab, (uint32_t)((uintptr_t)x - (uintptr_t)slab->addr), idx))) {
		report_bad_free_in(fn, s, x, slab);
		return NULL;
	}
	return slab;
}

static void df_map_init(struct detached_freelist *df, unsigned int objects)
{
	/* A plain loop: a memset here costs more than the few words. */
	for (volatile uint64_t *w = df->map; w < df->map + (objects + 63) / 64; w++)
		*w = 0;
	df->map[df->first_idx / 64] |= 1ULL << (df->first_idx % 64);
	df->map_ready = true;
}

/* Gather one slab's objects from the end of p[0..size): take the last object,
 * then every object of the same slab found before it, stopping after three
 * objects of other slabs in a row (the look-ahead of seed 000). Gathered entries
 * are swapped to the end, so p[0..return) is what is left. NULL entries are
 * skipped; bad pointers and duplicates are reported and dropped. df->slab is NULL
 * when nothing was gathered. */
static size_t build_detached_freelist(const char *fn, struct kmem_cache *s, size_t size, void **p,
                                      struct detached_freelist *df)
{
	unsigned int lookahead = 3, idx;
	size_t same, end;
	void *object = NULL;

	df->slab = NULL;
	while (size && !object)
		object = p[--size];
	if (!object || !(df->slab = bulk_check(fn, s, object, &idx)))
		return size;
	end = size + 1;
	df->s = df->slab->slab_cache;
	df->first = object;
	df->cnt = 1;
	df->first_idx = idx;
	df->map_ready = false;

	/* The scan: one page-map lookup per object; index and duplicate checks with
	 * the cache's parameters at hand. */
	struct slab *slab = df->slab;
	const struct kmem_cache *ds = df->s;
	const uintptr_t base = usl_base, top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	const unsigned int objects = usl_counters_objects(usl_load(&slab->counters));
	const uintptr_t saddr = (uintptr_t)slab->addr, soff = saddr - base;
	uint64_t *map = df->map;

	same = size;
	while (size) {
		object = p[--size];
		uintptr_t off = (uintptr_t)object - base;
		if (off >= top || usl_block_offset(off) != soff) {
			if (object && !--lookahead)
				break;
			continue;
		}
		same--;
		if (size != same) {
			void *t = p[size];
			p[size] = p[same];
			p[same] = t;
		}
		unsigned int q;
		if (usl_unlikely(!obj_index_at(ds, slab, (uint32_t)((uintptr_t)object - saddr), &q))) {
			report_bad_free_in(fn, s, object, slab);
			p[same] = NULL;
			continue;
		}
		if (!df->map_ready)
			df_map_init(df, objects);
		if (usl_unlikely(map[q / 64] & (1ULL << (q % 64)))) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p appears twice in the array; freed once",
			           fn, ds->name, object);
			p[same] = NULL;
			continue;
		}
		map[q / 64] |= 1ULL << (q % 64);
		df->cnt++;
	}
	df->objs = p + same;
	df->n = end - same;
	return same;
}

/* Drop x from the gathered objects: it is free already. */
static void df_drop(struct detached_freelist *df, void *x, unsigned int idx, const char *fn)
{
	for (size_t i = 0; i < df->n; i++)
		if (df->objs[i] == x) {
			df->objs[i] = NULL;
			df->map[idx / 64] &= ~(1ULL << (idx % 64));
			df->cnt--;
			usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (already free); not freed", fn,
			           df->s->name, x);
			return;
		}
}

/* If x is one of the gathered objects, drop it. */
static void df_drop_if_member(struct detached_freelist *df, void *x, const char *fn)
{
	unsigned int q;
	uintptr_t off = (uintptr_t)x - (uintptr_t)df->slab->addr;

	if (x && off < usl_order_bytes(df->slab->order) && obj_index_at(df->s, df->slab, (uint32_t)off, &q) &&
	    (df->map[q / 64] & (1ULL << (q % 64))))
		df_drop(df, x, q, fn);
}

/* Before anything is written into the gathered objects: leave out those that are
 * free already, where that is cheap to see. An object heading this CPU's freelist
 * or the slab's freelist, or among its uncarved objects, is dropped; if the slab
 * has fewer objects in use than are being freed, its freelist is walked to find
 * the free ones. */
static bool df_precheck(struct detached_freelist *df, const char *fn)
{
	struct kmem_cache *s = df->s;
	struct slab *slab = df->slab;
	unsigned int objects = usl_counters_objects(usl_load(&slab->counters));

	if (usl_rseq_mode) {
		const struct rseq *rs = (const struct rseq *)((char *)__builtin_thread_pointer() + usl_rseq_off);
		unsigned int cpu = __atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
		if (cpu < usl_rseq_nr && __atomic_load_n(&s->cpu_slab[cpu].slab, __ATOMIC_RELAXED) == slab)
			df_drop_if_member(df, __atomic_load_n(&s->cpu_slab[cpu].freelist, __ATOMIC_RELAXED), fn);
	} else {
		struct kmem_cache_cpu *c = hint_slot(s);
		if (__atomic_load_n(&c->slab, __ATOMIC_RELAXED) == slab)
			df_drop_if_member(df, usl_load_ptr(&c->freelist), fn);
	}
	df_drop_if_member(df, usl_load_ptr(&slab->freelist), fn);
	/* Uncarved objects only become fewer: one seen uncarved was never handed out. */
	unsigned long c0 = usl_load(&slab->counters);
	if (usl_counters_uncarved(c0))
		for (size_t i = 0; i < df->n; i++)
			if (df->objs[i] && never_handed_out(s, slab, c0, df->objs[i]))
				df_drop(df, df->objs[i],
				        obj_index((uint32_t)((char *)df->objs[i] - slab->addr), s->div_inv, s->div_shift), fn);

	unsigned long c = usl_load(&slab->counters);
	if (!usl_counters_frozen(c) && usl_counters_inuse(c) < df->cnt) {
		/* Some are free already: find them on the slab's freelist (bounded,
		 * and stopping at anything that is not an object of this slab). */
		unsigned int steps = 0;
		for (void *x = usl_load_ptr(&slab->freelist); x && steps < objects; steps++) {
			uintptr_t off = (uintptr_t)x - (uintptr_t)slab->addr;
			if (off >= usl_order_bytes(slab->order))
				break;
			void *next = get_freepointer_safe(s, x);
			df_drop_if_member(df, x, fn);
			x = next;
		}
		if (usl_counters_inuse(usl_load(&slab->counters)) < df->cnt) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %u objects of one slab freed but only %u in use; none of them freed",
			           fn, s->name, df->cnt, usl_counters_inuse(usl_load(&slab->counters)));
			return false;
		}
	}
	return df->cnt != 0;
}

/* Link the gathered objects through their free pointers: head ... tail. */
static void df_link(struct detached_freelist *df)
{
	void *prev = NULL;

	df->head = df->tail = NULL;
	for (size_t i = 0; i < df->n; i++) {
		void *x = df->objs[i];
		if (!x)
			continue;
		if (!prev) {
			df->tail = x;       /* its free pointer is written at handover */
		} else {
			df->head_fp = get_freepointer(df->s, x);
			set_freepointer(df->s, x, prev);
		}
		prev = x;
	}
	df->head = prev;
	if (df->head == df->tail)
		df->head_fp = NULL;
}

/* One validated object: the single-object free path, which checks for a double
 * free before it writes into the object. */
static void free_object_checked(struct kmem_cache *s, struct slab *slab, void *x, const char *fn)
{
	int r = usl_rseq_free(s, slab, x);
	if (r != USL_RS_OK)
		free_one_slow(s, slab, x, r, fn);
}

/* A race: since the pre-check, the linked head started heading a freelist.
 * Put back its free pointer, report it, keep the rest. */
static bool drop_double_head(struct detached_freelist *df, const char *fn)
{
	void *next = get_freepointer(df->s, df->head);

	set_freepointer(df->s, df->head, df->head_fp);
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (already free); not freed", fn, df->s->name,
	           df->head);
	df->head = next;
	df->head_fp = NULL;
	return --df->cnt != 0;
}

/* The same for the tail, whose free pointer was never written. */
static bool drop_double_tail(struct detached_freelist *df, const char *fn)
{
	void *pred = df->head;

	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (already free); not freed", fn, df->s->name,
	           df->tail);
	for (unsigned int i = 2; i < df->cnt; i++)
		pred = get_freepointer(df->s, pred);
	df->tail = pred;
	return --df->cnt != 0;
}

/* A chain for a slab that is not this CPU's slab: one CAS in slab_free_slow. */
static void slab_free_chain(struct detached_freelist *df, const char *fn)
{
	for (;;) {
		void *prior = usl_load_ptr(&df->slab->freelist);
		if (df->cnt > 1 && prior == df->head) {
			if (!drop_double_head(df, fn))
				return;
		} else if (df->cnt > 1 && prior == df->tail) {
			if (!drop_double_tail(df, fn))
				return;
		} else {
			break;
		}
	}
	if (df->cnt == 1)
		free_object_checked(df->s, df->slab, df->head, fn);
	else
		slab_free_slow(df->s, df->slab, df->head, df->tail, df->cnt);
}

/* Hand the gathered objects over: onto this CPU's freelist if their slab is the
 * cpu slab, else to the slab with one 16-byte CAS. A single object takes the
 * single-object path. */
static void free_detached(struct detached_freelist *df, const char *fn)
{
	struct kmem_cache *s = df->s;

	if (df->cnt == 1) {
		free_object_checked(s, df->slab, df->first, fn);
		return;
	}
	if (!df_precheck(df, fn))
		return;
	df_link(df);
	if (df->cnt == 1) {
		free_object_checked(s, df->slab, df->head, fn);
		return;
	}
	for (;;) {
		int r = usl_rseq_mode ? usl_rseq_free_chain(s, df->slab, df->head, df->tail)
		                      : locked_push_chain(s, df->slab, df->head, df->tail);
		if (r == USL_RS_OK)
			return;
		if (r == USL_RS_DOUBLE) {
			if (!drop_double_head(df, fn))
				return;
		} else if (r == USL_RS_DOUBLE_TAIL) {
			if (!drop_double_tail(df, fn))
				return;
		} else {
			break;          /* not this CPU's slab */
		}
		if (df->cnt == 1)
			break;
	}
	slab_free_chain(df, fn);   /* one object left takes the single path there */
}

static void free_bulk(const char *fn, struct kmem_cache *s, size_t nr, void **p)
{
	uint64_t map[BULK_MAP_WORDS];
	struct detached_freelist df;

	if (usl_unlikely(!p && nr)) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL array of %zu objects", fn, nr);
		return;
	}
	if (nr == 1) {                 /* nothing to gather: the single-object path */
		unsigned int idx;
		struct slab *slab;
		if (p[0] && (slab = bulk_check(fn, s, p[0], &idx)))
			free_object_checked(slab->slab_cache, slab, p[0], fn);
		return;
	}
	df.map = map;
	while (nr) {
		nr = build_detached_freelist(fn, s, nr, p, &df);
		if (df.slab)
			free_detached(&df, fn);
	}
}

/* The cpu-slab layer's bulk free (detached freelists). */
void usl_slub_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	free_bulk("kmem_cache_free_bulk", s, nr, p);
}

/* Sheaves: check every pointer (reported and left out when bad, as is an entry
 * equal to the one before it), compact, and copy them into the sheaves. */
static void sheaf_free_bulk_checked(struct kmem_cache *s, size_t nr, void **p)
{
	/* obj_check with everything it reads hoisted out of the loop (the range
	 * only grows, and every object in p[] was handed out before this call). */
	const uintptr_t base = usl_base, top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	const struct usl_pagemap_entry *pm = usl_pagemap;
	const uint32_t inv = s->div_inv, ds = s->div_shift, id = s->id;
	size_t i, k;
	uintptr_t prev = 0;

	/* The common case: every entry good. No stores; NULL fails the range
	 * check (NULL - base wraps). The page map entry is read once per run of
	 * pointers into one page (arrays from kmem_cache_alloc_bulk mostly are).
	 * The first entry that is not simply good sends the rest through the
	 * compacting loop below, which reports. */
	uintptr_t last_pg = ~(uintptr_t)0;
	uint32_t start = 0, objects = 0;
	for (i = 0; i < nr; i++) {
		uintptr_t x = (uintptr_t)p[i];
		uintptr_t off = x - base;
		if (usl_unlikely(off >= top))
			break;
		uintptr_t pg = off >> usl_page_shift;
		if (pg != last_pg) {
			struct usl_pagemap_entry e = usl_pm_read(&pm[pg]);
			if (usl_unlikely(e.cache != id))
				break;
			start = e.start;
			objects = USL_PM_OBJECTS(e);
			last_pg = pg;
		}
		if (usl_unlikely(obj_index((uint32_t)off - start, inv, ds) >= objects || x == prev))
			break;
		prev = x;
	}
	/* The rare case: from the first entry that was not simply good, each one
	 * checked on its own, reported if bad, and the good ones compacted. */
	k = i;
	for (; i < nr; i++) {
		void *x = p[i];
		if (!x)
			continue;
		if (usl_unlikely(!obj_check(s, x))) {
			report_bad_free_in("kmem_cache_free_bulk", s, x, usl_virt_to_slab(x));
			continue;
		}
		if (usl_unlikely((uintptr_t)x == prev)) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "kmem_cache_free_bulk(%s): %p appears twice in the array; freed once",
			           s->name, x);
			continue;
		}
		p[k++] = x;
		prev = (uintptr_t)x;
	}
	if (k)
		usl_sheaf_free_bulk(s, k, p);
}

void kmem_cache_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	if (s && s->sheaf_capacity && p) {
		if (nr <= SMALL_BULK) {
			for (size_t i = 0; i < nr; i++)
				if (p[i])
					kmem_cache_free(s, p[i]);
			return;
		}
		sheaf_free_bulk_checked(s, nr, p);
		return;
	}
	if (!s) {
		kfree_bulk(nr, p);
		return;
	}
	free_bulk("kmem_cache_free_bulk", s, nr, p);
}

void kfree_bulk(size_t nr, void **p)
{
	if (p)
		usl_kfree_bulk_nonslab(nr, p);
	free_bulk("kfree_bulk", NULL, nr, p);
}

/* ===========================================================================
 * Flushing every CPU (shrink, destroy): the kernel's flush_all.
 *
 * rseq mode: mark every slot (c->lock = 1), then one membarrier(PRIVATE_EXPEDITED_
 * RSEQ) aborts every section in flight; sections check the mark after their start,
 * so from then on no section commits to a marked slot and the flusher owns them.
 * locked mode: take each slot's lock.
 */
static void flush_cpu_slabs(struct kmem_cache *s);

/* Sheaves first (flushed and freed): their objects may land on this CPU's cpu
 * slab, flushed next. */
void usl_slub_flush_all(struct kmem_cache *s)
{
	usl_sheaf_flush_all(s);
	flush_cpu_slabs(s);
}

static void flush_cpu_slabs(struct kmem_cache *s)
{
	struct slab *chain = NULL;

	if (!usl_slub_hold_slots(s))
		return;
	/* While a slot is held, only take its state and unfreeze its cpu slab (CAS
	 * work); lists and the page provider wait until every slot is released. */
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		void *fl;
		struct slab *slab, *partial;
		bool remote, has_free;

		if (usl_rseq_mode) {
			fl = c->freelist;
			slab = c->slab;
			partial = c->partial;
			c->freelist = NULL;
			c->slab = NULL;
			c->partial = NULL;
		} else {
			usl_spin_lock(&c->lock);
			locked_detach(c, &fl, &slab);
			partial = c->partial;
			c->partial = NULL;
		}
		/* An unfrozen slab with free objects is placed like a cpu partial
		 * slab (put_partials); a full one stays on no list. */
		if (slab) {
			unfreeze_slab(s, slab, fl, &remote, &has_free);
			if (!has_free)
				slab = NULL;
		}
		usl_spin_unlock(&c->lock);
		if (slab) {
			slab->next = chain;
			chain = slab;
		}
		while (partial) {
			struct slab *p = partial;
			partial = p->next;
			p->next = chain;
			chain = p;
		}
	}
	pthread_mutex_unlock(&flush_mutex);   /* each slot's mark was cleared as it was done */
	put_partials(s, chain);
}

/* Hold every slot of s with the protocol above (rseq: marks and membarrier;
 * locked mode: flush_mutex only, the caller takes the slot locks it needs).
 * False if the slots cannot be held (membarrier failed). */
bool usl_slub_hold_slots(struct kmem_cache *s)
{
	pthread_mutex_lock(&flush_mutex);
	if (!usl_rseq_mode)
		return true;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		__atomic_store_n(&s->cpu_slab[i].lock, 1, __ATOMIC_SEQ_CST);
	if (usl_membarrier_rseq() == 0)
		return true;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		__atomic_store_n(&s->cpu_slab[i].lock, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&flush_mutex);
	usl_report(USLAB_ERR_NONE, "flush of %s skipped: membarrier failed", s->name);
	return false;
}

void usl_slub_release_slots(struct kmem_cache *s)
{
	if (usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			__atomic_store_n(&s->cpu_slab[i].lock, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&flush_mutex);
}

/* fork(): the prepare handler takes every lock of the cache (slot locks in
 * locked mode, then list_lock) after flush_mutex, so the child inherits none
 * held and no flush marks. */
void usl_slub_fork_lock_global(void) { pthread_mutex_lock(&flush_mutex); }
void usl_slub_fork_unlock_global(void) { pthread_mutex_unlock(&flush_mutex); }

void usl_slub_fork_lock(struct kmem_cache *s)
{
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_lock(&s->cpu_slab[i].lock);
	pthread_mutex_lock(&s->node[0]->list_lock);
}

void usl_slub_fork_unlock(struct kmem_cache *s)
{
	pthread_mutex_unlock(&s->node[0]->list_lock);
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_unlock(&s->cpu_slab[i].lock);
}

/* Objects allocated and not freed (after a flush this is exact when quiescent). */
unsigned long usl_slub_objects_in_use(struct kmem_cache *s)
{
	struct kmem_cache_node *n = s->node[0];
	unsigned long total, free_objs = 0;

	pthread_mutex_lock(&n->list_lock);
	total = __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
	for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
		struct slab *slab = usl_container_of(it, struct slab, slab_list);
		unsigned long c = usl_load(&slab->counters);
		free_objs += usl_counters_objects(c) - usl_counters_inuse(c);
	}
	pthread_mutex_unlock(&n->list_lock);
	return total - free_objs;
}

/* kmem_cache_shrink on one node: free every empty partial slab, and move the
 * slabs with at most SHRINK_PROMOTE_MAX free objects to the head, fewest free
 * first, so allocations fill them and the emptier ones can drain (the kernel's
 * __kmem_cache_do_shrink). Returns true if the node still has slabs. */
#define SHRINK_PROMOTE_MAX 32
static bool shrink_node(struct kmem_cache *s, struct kmem_cache_node *n)
{
	struct slab *discard = NULL;
	struct usl_list promote[SHRINK_PROMOTE_MAX];

	for (int i = 0; i < SHRINK_PROMOTE_MAX; i++)
		usl_list_init(&promote[i]);
	pthread_mutex_lock(&n->list_lock);
	struct usl_list *it = n->partial.next;
	while (it != &n->partial) {
		struct slab *slab = usl_container_of(it, struct slab, slab_list);
		unsigned long c = usl_load(&slab->counters);
		unsigned int free_objs = usl_counters_objects(c) - usl_counters_inuse(c);
		it = it->next;
		if (free_objs == usl_counters_objects(c)) {
			remove_partial(n, slab);
			slab->next = discard;
			discard = slab;
		} else if (free_objs <= SHRINK_PROMOTE_MAX) {
			usl_list_del(&slab->slab_list);
			usl_list_add_head(&slab->slab_list, &promote[free_objs - 1]);
		}
	}
	for (int i = SHRINK_PROMOTE_MAX - 1; i >= 0; i--) {
		while (!usl_list_empty(&promote[i])) {
			struct usl_list *last = promote[i].prev;
			usl_list_del(last);
			usl_list_add_head(last, &n->partial);
		}
	}
	pthread_mutex_unlock(&n->list_lock);
	while (discard) {
		struct slab *slab = discard;
		discard = slab->next;
		discard_slab(s, slab);
	}
	return __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED) != 0;
}

/* 0 when every slab was released, 1 when some remain (slabs with live objects). */
int usl_slub_shrink(struct kmem_cache *s)
{
	bool left;

	usl_slub_flush_all(s);
	left = shrink_node(s, s->node[0]);
	usl_pages_purge(true);
	return left ? 1 : 0;
}

void usl_slub_release(struct kmem_cache *s)
{
	shrink_node(s, s->node[0]);
}

void usl_slub_state_counts(struct kmem_cache *s, struct usl_state_counts *out)
{
	struct kmem_cache_node *n = s->node[0];

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		if (c->slab)
			out->cpu_slabs++;
		for (struct slab *p = c->partial; p; p = p->next)
			out->cpu_partial++;
	}
	pthread_mutex_lock(&n->list_lock);
	out->node_partial = n->nr_partial;
	for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
		struct slab *slab = usl_container_of(it, struct slab, slab_list);
		if (usl_counters_inuse(usl_load(&slab->counters)) == 0)
			out->empty_node_partial++;
	}
	pthread_mutex_unlock(&n->list_lock);
	out->total = __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
	out->full = out->total - out->cpu_slabs - out->cpu_partial - out->node_partial;
}

/* ===========================================================================
 * Sizing (reference §8): order, min_partial, cpu_partial.
 */

static unsigned int calc_slab_order(unsigned int size, unsigned int min_order, unsigned int max_order,
                                    unsigned int fract)
{
	unsigned int order;
	for (order = min_order; order <= max_order; order++) {
		size_t slab_size = usl_order_bytes(order);
		if (slab_size % size <= slab_size / fract)
			break;
	}
	return order;
}

static unsigned int fls_u(unsigned int x) { return x ? 32u - (unsigned int)__builtin_clz(x) : 0; }

unsigned int usl_calculate_order(unsigned int size)
{
	unsigned int min_objects, max_objects, min_order, order;
	unsigned int max_order = (unsigned int)usl_opt.max_order;

	min_objects = usl_opt.min_objects ? (unsigned int)usl_opt.min_objects : 4 * (fls_u(usl_online_cpus) + 1);
	max_objects = (unsigned int)(usl_order_bytes(max_order) / size);
	if (max_objects < min_objects)
		min_objects = max_objects ? max_objects : 1;
	min_order = usl_bytes_order((size_t)min_objects * size);
	if (min_order < (unsigned int)usl_opt.min_order)
		min_order = (unsigned int)usl_opt.min_order;
	if (usl_order_bytes(min_order) / size > USL_MAX_OBJS_PER_SLAB)
		return usl_bytes_order((size_t)size * USL_MAX_OBJS_PER_SLAB) - 1;
	for (unsigned int fract = 16; fract > 1; fract /= 2) {
		order = calc_slab_order(size, min_order, max_order, fract);
		if (order <= max_order)
			return order;
	}
	order = usl_bytes_order(size);
	return order <= USL_MAX_ORDER ? order : ~0u;
}

static uint32_t inverse_mod32(uint32_t d)
{
	uint32_t x = d;                 /* correct to 3 bits for odd d */
	for (int i = 0; i < 5; i++)
		x *= 2 - d * x;             /* each step doubles the correct bits */
	return x;
}

/* The alignment a cache gets (the kernel's calculate_alignment): at least a
 * word; with SLAB_HWCACHE_ALIGN a cache line, halved while the object fits in
 * half of it. Cache merging asks it of a cache it has not made yet. */
unsigned int usl_slub_alignment(slab_flags_t flags, unsigned int align, unsigned int object_size)
{
	if (flags & SLAB_HWCACHE_ALIGN) {
		unsigned int ralign = USL_CACHELINE;
		while (object_size <= ralign / 2)
			ralign /= 2;
		if (ralign > align)
			align = ralign;
	}
	return align < sizeof(void *) ? (unsigned int)sizeof(void *) : align;
}

static void set_cpu_partial_slabs(struct kmem_cache *s)
{
	s->cpu_partial_slabs = (s->cpu_partial * 2 + s->objects - 1) / s->objects;
}

/* The slab order of s (its size set): the calculated one at creation, or the
 * malloc classes' own, set before the class is published. */
int usl_slub_set_order(struct kmem_cache *s, unsigned int order)
{
	unsigned int size = s->size;
	if (order > USL_MAX_ORDER || usl_order_bytes(order) < size)
		return -1;
	s->order = order;
	s->objects = (unsigned int)(usl_order_bytes(order) / size);
	if (s->objects > USL_MAX_OBJS_PER_SLAB)
		s->objects = USL_MAX_OBJS_PER_SLAB;
	s->min_order = usl_bytes_order(size);
	if (s->min_order > s->order)
		s->min_order = s->order;
	if (s->cpu_partial)
		set_cpu_partial_slabs(s);
	return 0;
}

int usl_slub_cache_init(struct kmem_cache *s, const struct kmem_cache_args *args)
{
	unsigned int size = USL_ALIGN(s->object_size, (unsigned int)sizeof(void *));
	unsigned int align = s->align;

	s->inuse = size;
	if (args && args->use_freeptr_offset) {
		/* The creator keeps the free pointer inside the object (checked by
		 * the caller: word aligned, within object_size). */
		s->offset = args->freeptr_offset;
	} else if (s->ctor) {
		/* Constructed state must survive a free: keep the pointer after it. */
		s->offset = size;
		size += sizeof(void *);
	} else {
		s->offset = (s->object_size / 2) & ~(unsigned int)(sizeof(void *) - 1);
	}
	align = usl_slub_alignment(s->flags, align, s->object_size);
	s->align = align;
	size = USL_ALIGN(size, align);
	s->size = size;

	if (usl_slub_set_order(s, usl_calculate_order(size)) != 0)
		return -1;
	s->div_shift = (uint32_t)__builtin_ctz(size);
	s->div_inv = inverse_mod32(size >> s->div_shift);
	__atomic_store_n(&usl_cache_div[s->id], s->div_inv | (uint64_t)s->div_shift << 32, __ATOMIC_RELAXED);

	unsigned int lg = 31u - (unsigned int)__builtin_clz(size);
	s->min_partial = lg / 2 < MIN_PARTIAL ? MIN_PARTIAL : (lg / 2 > MAX_PARTIAL ? MAX_PARTIAL : lg / 2);
	if (size >= usl_page_size)
		s->cpu_partial = 6;
	else if (size >= 1024)
		s->cpu_partial = 24;
	else if (size >= 256)
		s->cpu_partial = 52;
	else
		s->cpu_partial = 120;
	set_cpu_partial_slabs(s);

	unsigned long step = 1;
	while (step < usl_nr_cpus)
		step <<= 1;
	/* The same value for every cache (the slot count is fixed at start-up):
	 * written once, so later creations do not race with readers. */
	if (__atomic_load_n(&tid_step_v, __ATOMIC_RELAXED) != step)
		__atomic_store_n(&tid_step_v, step, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		s->cpu_slab[i].tid = i & (step - 1);
	pthread_mutex_init(&s->node[0]->list_lock, NULL);
	usl_list_init(&s->node[0]->partial);
	return 0;
}
