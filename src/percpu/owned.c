/* owned.c - the owned front end's per-CPU side: per CPU and cache a slot that
 * owns slabs whose free state is a bitmap outside the blocks (engine/slub/oslab.c).
 * Here: choosing the front end, the slots, the slow path behind the pop
 * section (take the slot, merge the inbox, move the cursor, the avail stack,
 * adopt or make a slab), the slow path behind the free section (remote and
 * orphan frees, reports), giving every slot up (mark + membarrier) and the
 * fork quiescence. Locks: owned_flush_mutex (one flusher), then a node's
 * list_lock (in oslab.c); a slot's taken state is held only across its own
 * refill, never across a lock wait. docs/ARCHITECTURE.md, "The owned front
 * end". */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/engine.h"
#include "percpu.h"

uint64_t usl_zero_word;

static int owned_state = -1;         /* -1 undecided, 0 off, 1 on */

bool usl_owned_front(void)
{
	int st = __atomic_load_n(&owned_state, __ATOMIC_ACQUIRE);
	if (usl_likely(st >= 0))
		return st;
	bool on = false;
	if (usl_opt.front == USL_FRONT_OWNED) {
		const char *why = NULL;
		__builtin_cpu_init();
		if (!usl_rseq_mode)
			why = "locked mode (no rseq)";
		else if (usl_nr_nodes > 1)
			why = "more than one NUMA node";
		else if (usl_opt.stats)
			why = "USLAB_STATS";
		else if (!__builtin_cpu_supports("bmi"))
			why = "a CPU without BMI1";
		else if (usl_opt.harden >= 2)
			why = "USLAB_HARDEN=2 (its random order is the sheaves')";
		if (why)
			usl_report(USLAB_ERR_OPTION, "USLAB_FRONT=owned: not available with %s; using sheaves", why);
		on = !why;
	}
	__atomic_store_n(&owned_state, on, __ATOMIC_RELEASE);
	return on;
}

/* The slots, with two sentinel slots below slot 0 (cpu_id -1 and -2: no
 * rseq registration, a vfork child), marked for good. */
#define SENTINELS 2
int usl_owned_cache_init(struct kmem_cache *s)
{
	struct usl_oslot *o = usl_meta_alloc((size_t)(usl_nr_cpus + SENTINELS) * sizeof(struct usl_oslot));
	if (!o)
		return -1;
	for (unsigned int i = 0; i < usl_nr_cpus + SENTINELS; i++) {
		o[i].wp = &usl_zero_word;
		o[i].size = s->size;
		o[i].me = i < SENTINELS ? 0 : i - SENTINELS + 1;
		o[i].lock = i < SENTINELS;
		o[i].cache = s;
	}
	s->oslots = o + SENTINELS;
	return 0;
}

void usl_owned_cache_free(struct kmem_cache *s)
{
	if (s->oslots)
		usl_meta_free(s->oslots - SENTINELS);
	s->oslots = NULL;
}

/* ===========================================================================
 * Taking a slot. A section on the slot's CPU commits lock = 2; the taker
 * works on the slot's slabs and cursor with plain stores (every section
 * tests the lock first) and releases it with a store, from any CPU. fork()
 * marks every slot (waiting for its taker to finish), so no slot is taken in
 * the child.
 */
static void slot_release(struct usl_oslot *o)
{
	__atomic_store_n(&o->lock, 0, __ATOMIC_RELEASE);
	usl_report_release();
}

/* This CPU's slot of slots, taken: USL_RS_OK with *o, or the section's
 * refusal (USL_RS_MARKED: marked or taken; USL_RS_NOCPU). A taken slot counts
 * as a lock held (reports wait for its release; fork knows of it). */
static int slot_take(struct usl_oslot *slots, struct usl_oslot **o)
{
	usl_report_hold();               /* before: a signal never finds it taken and not counted */
	int r = usl_rseq_oslot_take(slots, o);
	if (r != USL_RS_OK)
		usl_report_release();
	return r;
}

/* One flusher at a time (shrink, trim, destroy, the decay's orphaning):
 * taken before any mark it sets. fork takes it too. */
static pthread_mutex_t owned_flush_mutex = PTHREAD_MUTEX_INITIALIZER;

void usl_owned_fork_lock_global(void) { usl_lock(&owned_flush_mutex); }
void usl_owned_fork_unlock_global(void) { usl_unlock(&owned_flush_mutex); }

/* Mark every slot of s (lock 0 -> 1), each once its taker released it. */
static void slots_mark(struct kmem_cache *s)
{
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		int z = 0;
		while (!__atomic_compare_exchange_n(&s->oslots[i].lock, &z, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			z = 0;
			sched_yield();
		}
	}
}

static void slots_unmark(struct kmem_cache *s)
{
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		__atomic_store_n(&s->oslots[i].lock, 0, __ATOMIC_RELEASE);
}

void usl_owned_fork_lock(struct kmem_cache *s)
{
	if (s->oslots)
		slots_mark(s);
}

void usl_owned_fork_unlock(struct kmem_cache *s)
{
	if (s->oslots)
		slots_unmark(s);
}

/* ===========================================================================
 * The cursor and the refill (the slot taken)
 */

/* The cursor at h's lowest local word with a free bit; false if none. */
static bool cursor_set(struct usl_oslot *o, struct usl_oslab *h)
{
	for (unsigned int k = 0; k < h->nwords; k++)
		if (h->local[k]) {
			o->wp = &h->local[k];
			o->wbase = h->start + (size_t)k * 64 * o->size;
			return true;
		}
	return false;
}

/* The slabs other CPUs announced: their remote bits merged; those with free
 * bits and not listed go on the avail stack. A slab this slot gave up meanwhile
 * goes to its orphan list or its new owner. */
static void inbox_drain(struct usl_oslot *o)
{
	struct usl_oslab *h = __atomic_exchange_n(&o->inbox, NULL, __ATOMIC_ACQUIRE);
	while (h) {
		struct usl_oslab *next = h->inbox_next;
		__atomic_store_n(&h->pending, 0, __ATOMIC_SEQ_CST);   /* before the merge: later bits announce again */
		if (h->owner != o->me)
			usl_oslab_reannounce(h);
		else if (usl_oslab_merge(h) && !h->listed) {
			h->listed = 1;
			h->avail_next = o->avail;
			o->avail = h;
		}
		h = next;
	}
}

static bool refill(struct kmem_cache *s, struct usl_oslot *o)
{
	o->slow++;
	if (__atomic_load_n(&o->inbox, __ATOMIC_RELAXED))
		inbox_drain(o);
	struct usl_oslab *h = o->cur;
	if (h && cursor_set(o, h))
		return true;
	if (h) {
		h->listed = 0;
		o->cur = NULL;
	}
	while ((h = o->avail)) {
		o->avail = h->avail_next;
		if (cursor_set(o, h)) {
			o->cur = h;
			return true;
		}
		h->listed = 0;
	}
	o->wp = &usl_zero_word;
	h = usl_oslab_adopt(s, 0, (unsigned int)o->me);
	if (!h)
		h = usl_oslab_new(s, 0, (unsigned int)o->me);
	if (!h)
		return false;
	h->listed = 1;
	o->cur = h;
	return cursor_set(o, h);
}

/* No memory for a refill: once, the common layer gives back what uslab
 * holds free (usl_percpu_oom) and the caller tries again. */
static bool oom_retry(bool *retried)
{
	if (*retried || !__atomic_load_n(&usl_percpu_oom, __ATOMIC_ACQUIRE)())
		return false;
	*retried = true;
	return true;
}

void *usl_owned_alloc_slow(struct usl_oslot *slots)
{
	struct kmem_cache *s = slots->cache;
	bool retried = false;
	for (int tries = 0;; tries++) {
		struct usl_oslot *o;
		int r = slot_take(slots, &o);
		if (usl_likely(r == USL_RS_OK)) {
			void *obj = NULL;
			if (refill(s, o)) {
				uint64_t w = *o->wp;
				*o->wp = w & (w - 1);
				obj = o->wbase + (size_t)__builtin_ctzl(w) * o->size;
			}
			slot_release(o);
			__atomic_load_n(&usl_percpu_slow_tick, __ATOMIC_ACQUIRE)();
			if (usl_unlikely(!obj)) {
				if (oom_retry(&retried)) {
					tries = 0;
					continue;
				}
				errno = ENOMEM;
			}
			return obj;
		}
		if (usl_rseq_cpu() < 0 || tries >= 8) {   /* no rseq here, or the slot stays busy */
			void *obj = usl_oslab_alloc_orphan(s, 0);
			__atomic_load_n(&usl_percpu_slow_tick, __ATOMIC_ACQUIRE)();
			if (usl_unlikely(!obj)) {
				if (oom_retry(&retried))
					continue;
				errno = ENOMEM;
			}
			return obj;
		}
		sched_yield();           /* another thread of this CPU refills, or a flusher */
	}
}

static void no_nomem(struct kmem_cache *s) { (void)s; }
void (*usl_percpu_malloc_nomem)(struct kmem_cache *s) = no_nomem;

void *usl_owned_alloc_slow_malloc(struct usl_oslot *slots)
{
	void *obj = usl_owned_alloc_slow(slots);
	if (usl_unlikely(!obj))
		__atomic_load_n(&usl_percpu_malloc_nomem, __ATOMIC_ACQUIRE)(slots->cache);
	return obj;
}

/* ===========================================================================
 * Frees the local section did not end
 */
void usl_owned_list(struct usl_oslab *h)
{
	unsigned int owner = __atomic_load_n(&h->owner, __ATOMIC_RELAXED);
	if (owner && owner != 0xffff)        /* given up since: the orphaning saw the bit */
		usl_oslab_announce(h, owner);
	/* A slab's first free since it filled: the frees of a working set
	 * going away tick the decay clock, as the sheaves' slow paths do. */
	__atomic_load_n(&usl_percpu_slow_tick, __ATOMIC_ACQUIRE)();
}

void usl_owned_double(struct usl_oslab *h, const void *x, const char *fn)
{
	usl_oslab_report_double(h, x, fn);
}

void usl_owned_free_slow(void *x, const char *fn)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	const uint64_t *ce = &usl_ochunk[off >> USL_OCHUNK_SHIFT];
	for (;;) {
		uint64_t e = __atomic_load_n(ce, __ATOMIC_ACQUIRE);
		struct usl_oslab *h = (struct usl_oslab *)(uintptr_t)e;
		if (!e) {
			usl_refuse_not_object(fn, NULL, x, "is not an allocated block (its slab was freed: a double free?)");
			return;
		}
		uint32_t idx = usl_obj_index((uint32_t)off - h->start_off, h->div_inv, h->div_shift);
		if (idx >= h->objects) {
			usl_refuse_not_object(fn, h->cache->name, x, "is not the start of an object (inside one?)");
			return;
		}
		unsigned int owner = __atomic_load_n(&h->owner, __ATOMIC_ACQUIRE);
		if (owner == 0) {
			if (usl_oslab_free_orphan(h, idx, x, fn) == 0)
				return;
			continue;
		}
		if (owner == 0xffff) {
			usl_oslab_report_double(h, x, fn);
			return;
		}
		USL_RSEQ_OWNED_FREE(h, idx, other, dbl, first);
		return;
first:
		if (!__atomic_load_n(&h->listed, __ATOMIC_RELAXED))
			usl_owned_list(h);
		return;
dbl:
		usl_oslab_report_double(h, x, fn);
		return;
other:
		if (__atomic_load_n(ce, __ATOMIC_ACQUIRE) != e || __atomic_load_n(&h->owner, __ATOMIC_ACQUIRE) != owner)
			continue;            /* given up, adopted or remade meanwhile: again */
		usl_oslab_free_remote(h, idx, owner, x, fn);
		return;
	}
}

/* ===========================================================================
 * Giving every slot up (shrink, malloc_trim, destroy): mark each slot (a
 * taken one once its taker releases it), one membarrier aborts every section
 * in flight, then the flusher owns the slots: each slab they own becomes an
 * orphan (wholly free ones are discarded), and the marks are cleared.
 */

static void orphan_cb(struct kmem_cache *s, struct usl_oslab *h, void *arg)
{
	usl_oslab_orphan(s, h, *(bool *)arg);
}

/* Slot o, held (marked after membarrier): every slab it owns given up. */
static void slot_orphan(struct kmem_cache *s, struct usl_oslot *o, bool discard_all)
{
	inbox_drain(o);
	o->cur = NULL;
	o->avail = NULL;
	o->wp = &usl_zero_word;
	o->wbase = NULL;
	o->idle = 0;
	usl_oslab_each_owned(s, (unsigned int)o->me, orphan_cb, &discard_all);
}

void usl_owned_flush_all(struct kmem_cache *s)
{
	if (!s->oslots)
		return;
	usl_lock(&owned_flush_mutex);
	slots_mark(s);
	if (usl_membarrier_rseq() != 0) {
		slots_unmark(s);
		usl_unlock(&owned_flush_mutex);
		usl_report(USLAB_ERR_NONE, "flush of %s skipped: membarrier failed", s->name);
		return;
	}
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		slot_orphan(s, &s->oslots[i], true);
	slots_unmark(s);
	usl_unlock(&owned_flush_mutex);
	usl_oslab_discard_empty(s);
}

/* A slot held (marked after membarrier) keeps one wholly free slab: the
 * others on its avail stack are given up (discarded). How many. */
static unsigned int slot_trim_empty(struct kmem_cache *s, struct usl_oslot *o)
{
	unsigned int gone = 0;
	bool kept = o->cur && usl_oslab_free_count(o->cur) == o->cur->objects;
	for (struct usl_oslab **pp = &o->avail, *h; (h = *pp);) {
		if (usl_oslab_free_count(h) == h->objects && !__atomic_load_n(&h->pending, __ATOMIC_ACQUIRE)) {
			if (kept) {
				*pp = h->avail_next;
				usl_oslab_orphan(s, h, true);
				gone++;
				continue;
			}
			kept = true;
		}
		pp = &h->avail_next;
	}
	return gone;
}

/* The decay sweep's part (every decay interval): a slot that holds slabs and
 * took no slow path for two sweeps in a row (a CPU that stopped allocating
 * from this cache, or went offline) gives them up, so its free objects are
 * not stranded there; a busy slot with slabs on its avail stack keeps one
 * wholly free slab and gives the others up. The slots marked together (a
 * taken one is left for the next sweep), one membarrier, each done,
 * unmarked. */
#define IDLE_SWEEPS 2
unsigned int usl_owned_decay(struct kmem_cache *s, bool *pending)
{
	if (!s->oslots)
		return 0;
	unsigned int want = 0;
	bool visit[usl_nr_cpus];
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct usl_oslot *o = &s->oslots[i];
		uint32_t slow = __atomic_load_n(&o->slow, __ATOMIC_RELAXED);
		bool avail = __atomic_load_n(&o->avail, __ATOMIC_RELAXED) != NULL;
		bool holds = avail || __atomic_load_n(&o->cur, __ATOMIC_RELAXED) || __atomic_load_n(&o->inbox, __ATOMIC_RELAXED);
		o->idle = holds && slow == o->slow_seen ? o->idle + 1 : 0;
		o->slow_seen = slow;
		visit[i] = o->idle >= IDLE_SWEEPS || avail;
		want += visit[i];
		*pending |= o->idle && o->idle < IDLE_SWEEPS;   /* a later sweep gives it up */
	}
	if (!want)
		return 0;
	usl_lock(&owned_flush_mutex);
	bool marked[usl_nr_cpus];
	unsigned int n = 0, done = 0;
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		int z = 0;
		marked[i] = visit[i] &&
		            __atomic_compare_exchange_n(&s->oslots[i].lock, &z, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
		n += marked[i];
	}
	if (n && usl_membarrier_rseq() == 0)
		for (unsigned int i = 0; i < usl_nr_cpus; i++) {
			if (!marked[i])
				continue;
			if (s->oslots[i].idle >= IDLE_SWEEPS) {
				slot_orphan(s, &s->oslots[i], false);
				done++;
			} else {
				done += slot_trim_empty(s, &s->oslots[i]) != 0;
			}
		}
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		if (marked[i])
			__atomic_store_n(&s->oslots[i].lock, 0, __ATOMIC_RELEASE);
	usl_unlock(&owned_flush_mutex);
	return done;
}

/* ===========================================================================
 * Many objects: kmem_cache_alloc_bulk takes a cursor word's bits in one
 * section; kmem_cache_free_bulk gathers the bits of consecutive objects in
 * one local word and frees them in one section; anything else takes the
 * single paths (which report).
 */
bool usl_owned_alloc_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	size_t got = 0;
	while (got < nr) {
		unsigned long k = usl_rseq_owned_pop_bulk(s->oslots, nr - got, p + got);
		if (k) {
			got += k;
			continue;
		}
		if (!(p[got] = usl_owned_alloc_slow(s->oslots))) {
			usl_owned_free_bulk(NULL, got, p, "kmem_cache_alloc_bulk");
			return false;
		}
		got++;
	}
	return true;
}

/* x is no object of an owned slab of s (or of any, s NULL): why, reported. */
static USL_SLOW_PATH void free_bulk_bad(struct kmem_cache *s, void *x, const char *fn)
{
	uintptr_t off = (uintptr_t)x - usl_base;
	uint64_t e = off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)
	           ? __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE) : 0;
	if (off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))
		usl_refuse_foreign(fn, s ? s->name : NULL, x, false);
	else if (e && s)
		usl_refuse_wrong_cache(fn, s->name, x, ((struct usl_oslab *)(uintptr_t)e)->cache->name);
	else if (s)
		usl_refuse_not_object(fn, s->name, x, NULL);
	else
		usl_refuse_not_object(fn, NULL, x, "is not an object of an owned cache");
}

void usl_owned_free_bulk(struct kmem_cache *s, size_t nr, void **p, const char *fn)
{
	const uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	size_t i = 0;
	while (i < nr) {
		void *x = p[i];
		uintptr_t off = (uintptr_t)x - usl_base;
		uint64_t e = off < top ? __atomic_load_n(&usl_ochunk[off >> USL_OCHUNK_SHIFT], __ATOMIC_ACQUIRE) : 0;
		struct usl_oslab *h = (struct usl_oslab *)(uintptr_t)e;
		if (!e || (s && h->slots != s->oslots)) {
			if (x)
				free_bulk_bad(s, x, fn);
			i++;
			continue;
		}
		uint32_t idx = usl_obj_index((uint32_t)off - h->start_off, h->div_inv, h->div_shift);
		if (idx >= h->objects) {
			usl_owned_free_slow(x, fn);
			i++;
			continue;
		}
		/* The run of objects after x in the same local word. */
		uint64_t mask = 1UL << (idx & 63);
		size_t j = i + 1;
		for (; j < nr; j++) {
			uintptr_t o2 = (uintptr_t)p[j] - usl_base;
			if (o2 >= top || __atomic_load_n(&usl_ochunk[o2 >> USL_OCHUNK_SHIFT], __ATOMIC_RELAXED) != e)
				break;
			uint32_t i2 = usl_obj_index((uint32_t)o2 - h->start_off, h->div_inv, h->div_shift);
			if (i2 >= h->objects || i2 >> 6 != idx >> 6 || (mask & (1UL << (i2 & 63))))
				break;
			mask |= 1UL << (i2 & 63);
		}
		uint64_t was;
		int r = usl_rseq_owned_free_mask(h, &h->local[idx >> 6], mask, &was);
		if (r == USL_RS_OK) {
			if (!was && !__atomic_load_n(&h->listed, __ATOMIC_RELAXED))
				usl_owned_list(h);
		} else {
			for (size_t k = i; k < j; k++)   /* one by one: remote, or a double free reported */
				usl_owned_free_slow(p[k], fn);
		}
		i = j;
	}
}
