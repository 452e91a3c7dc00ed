/* slub.c - the SLUB engine's state machine (the design of Linux 6.8-6.17: only
 * the cpu slab is frozen): freezing and unfreezing, cpu partial and node
 * partial lists, freeing to a slab (the kernel's __slab_free), the allocation
 * slow path with the slot taken private, and the single-object free paths and
 * their reports. New and discarded slabs and carving are newslab.c's.
 *
 * Slab states (docs/ARCHITECTURE.md, "Slab states"):
 *   cpu slab      frozen, a slot's c->slab, its free objects on c->freelist
 *   cpu partial   unfrozen, on a slot's c->partial chain (slab->next)
 *   node partial  unfrozen, on n->partial (slab->node_partial), under list_lock
 *   full          unfrozen, on no list; the first free puts it on a cpu partial chain
 * A slab's {freelist, counters} change together by one 16-byte CAS.
 *
 * Lock order: flush_mutex (flush.c) -> a slot's lock (locked mode; a
 * spin-then-yield lock, dropped around node refill and new_slab) -> a node's
 * list_lock -> the page provider's locks; a cache's virt_lock (SLAB_VIRTUAL's
 * kept blocks) is a leaf. No lock on the fast paths (the rseq sections,
 * arch/rseq_x86.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "slot.h"
#include "slub.h"


/* ===========================================================================
 * Freezing and unfreezing (only the cpu slab is frozen)
 */

/* Take a slab's whole freelist (or, if it is empty, a carved chunk) and freeze
 * it as a cpu slab. NULL if it has no free objects (then it is left as it was). */
static void *freeze_slab(const struct kmem_cache *s, struct slab *slab)
{
	void *fl, *head;
	unsigned long c, nc;

	usl_assert(!slab->node_partial);
	do {
		usl_slab_snapshot(slab, &fl, &c);
		usl_assert(!usl_counters_frozen(c));     /* only its taker freezes it */
		nc = usl_counters_remake(c, usl_counters_objects(c), true);
		head = fl;
		if (!fl) {
			if (!usl_counters_uncarved(c))
				return NULL;
			head = usl_carve_linked(s, slab, c, &nc);
		}
	} while (!usl_slab_cas(s, slab, fl, c, NULL, nc));
	if (usl_counters_uncarved(nc) != usl_counters_uncarved(c))
		usl_slab_carved(s, slab, nc);
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
		usl_slab_snapshot(slab, &fl, &c);
		usl_assert(usl_counters_frozen(c));      /* the cpu slab's: ours */
		head = fl;
		nc = usl_counters_remake(c, usl_counters_objects(c), fl || usl_counters_uncarved(c));
		if (!fl && usl_counters_uncarved(c))
			head = usl_carve_linked(s, slab, c, &nc);
	} while (!usl_slab_cas(s, slab, fl, c, NULL, nc));
	if (usl_counters_uncarved(nc) != usl_counters_uncarved(c))
		usl_slab_carved(s, slab, nc);
	return head;
}

USL_SLOW_PATH void usl_report_loop(struct kmem_cache *s, const struct slab *slab)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s: the free list of slab %p loops (an object freed twice?); "
	           "the slab is abandoned: its %u objects are not reused", s->name, slab->addr,
	           usl_counters_objects(usl_load(&slab->counters)));
}

/* Unfreeze a cpu slab, merging the private freelist fl back into it (one CAS
 * loop). Returns the slab's counters after it; *remote_frees says whether frees
 * from other CPUs were waiting on it, *has_free whether it has free objects. */
unsigned long usl_unfreeze_slab(struct kmem_cache *s, struct slab *slab, void *fl, bool *remote_frees,
                                bool *has_free)
{
	void *tail = NULL, *old_fl, *new_fl;
	unsigned int cnt = 0, objects;
	unsigned long c, nc;

	c = usl_load(&slab->counters);
	usl_assert(usl_counters_frozen(c) && !slab->node_partial);   /* a cpu slab, on no list */
	objects = usl_counters_objects(c);
	for (void *p = fl; p; p = usl_get_freepointer(s, p)) {
		tail = p;
		if (usl_unlikely(++cnt > objects)) {
			/* More free objects than the slab has: the chain loops, as a
			 * double free the fast path could not see (the object was not
			 * at the head) makes it. Walking on would never end and
			 * linking it would hand objects out twice: the slab stays
			 * frozen and nobody's, its free objects lost. The caller
			 * reports it (usl_report_loop) once it holds no slot. */
			*remote_frees = *has_free = false;
			return c;
		}
	}
	*remote_frees = usl_load_ptr(&slab->freelist) != NULL;
	do {
		usl_slab_snapshot(slab, &old_fl, &c);
		if (tail) {
			usl_set_freepointer(s, tail, old_fl);
			new_fl = fl;
		} else {
			new_fl = old_fl;
		}
		/* Uncarved objects were counted in use while frozen. */
		nc = usl_counters_remake(c, usl_counters_inuse(c) - cnt - usl_counters_uncarved(c), false);
	} while (!usl_slab_cas(s, slab, old_fl, c, new_fl, nc));
	*has_free = new_fl || usl_counters_uncarved(nc);
	return nc;
}

/* Unfreeze a cpu slab and put it where it belongs: freed when empty beyond
 * min_partial; node partial when it has free objects (tail if remote frees were
 * waiting, else head: the kernel's DEACTIVATE_TO_TAIL / TO_HEAD); nowhere when full. */
static void deactivate_slab(struct kmem_cache *s, struct slab *slab, void *fl)
{
	struct kmem_cache_node *n = usl_get_node(s, slab);
	bool remote_frees, has_free;
	unsigned long nc = usl_unfreeze_slab(s, slab, fl, &remote_frees, &has_free);

	if (usl_counters_frozen(nc)) {       /* abandoned: its free list loops */
		usl_report_loop(s, slab);
		return;
	}
	if (remote_frees)
		usl_stat(s, USL_DEACTIVATE_REMOTE_FREES);
	if (usl_counters_inuse(nc) == 0 && __atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED) >= s->min_partial) {
		usl_stat(s, USL_DEACTIVATE_EMPTY);
		usl_discard_slab(s, slab);
	} else if (has_free) {
		usl_stat(s, remote_frees ? USL_DEACTIVATE_TO_TAIL : USL_DEACTIVATE_TO_HEAD);
		usl_list_lock(s, n);
		usl_add_partial(n, slab, remote_frees);
		usl_unlock(&n->list_lock);
	} else {
		usl_stat(s, USL_DEACTIVATE_FULL);
	}
	/* else: full, on no list; the next free finds it (was_full) */
}

/* Move a chain of cpu partial slabs (unfrozen, on no list) to the node lists. */
void usl_put_partials(struct kmem_cache *s, struct slab *chain)
{
	struct slab *discard = NULL;
	struct kmem_cache_node *n = NULL;

	while (chain) {
		struct slab *slab = chain;
		struct kmem_cache_node *sn = usl_get_node(s, slab);
		usl_assert(!usl_counters_frozen(usl_load(&slab->counters)) && !slab->node_partial);
		chain = slab->next;
		if (sn != n) {     /* one lock hold for consecutive slabs of a node */
			if (n)
				usl_unlock(&n->list_lock);
			n = sn;
			usl_list_lock(s, n);
		}
		/* Under list_lock inuse == 0 is final: nobody can allocate from a slab on
		 * no list, and a free that empties it takes list_lock before its CAS. */
		if (usl_counters_inuse(usl_load(&slab->counters)) == 0 && n->nr_partial >= s->min_partial) {
			slab->next = discard;
			discard = slab;
		} else {
			usl_add_partial(n, slab, true);
		}
	}
	if (n)
		usl_unlock(&n->list_lock);
	while (discard) {
		struct slab *slab = discard;
		discard = slab->next;
		usl_discard_slab(s, slab);
	}
}
/* ===========================================================================
 * The per-CPU slot's slow paths (locked mode's helpers: slot.c)
 */

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
	usl_assert(!slab->node_partial);     /* was full: on no list */
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
			if (r == USL_RS_OK) {
				usl_stat(s, USL_CPU_PARTIAL_DRAIN);
				usl_put_partials(s, chain);
			}
			else if (r == USL_RS_MARKED)
				wait_flush(s);
			else if (r == USL_RS_NOCPU)
				break;
		}
		slab->next = NULL;
		usl_put_partials(s, slab);
		return;
	}

	struct kmem_cache_cpu *c = usl_hint_slot(s);
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
	__atomic_store_n(&slab->slabs, cnt, __ATOMIC_RELAXED);
	/* Read racily by the statistics (usl_slub_cpu_counts): atomic stores. */
	__atomic_store_n(&c->partial, slab, __ATOMIC_RELEASE);
	usl_spin_unlock(&c->lock);
	if (drain) {
		usl_stat(s, USL_CPU_PARTIAL_DRAIN);
		usl_put_partials(s, drain);
	}
}

/* ===========================================================================
 * Freeing to a slab: the kernel's __slab_free. One 16-byte CAS; list_lock only
 * when the slab changes list. head..tail is a chain of cnt objects of slab.
 */
USL_OUT_OF_LINE void usl_slab_free_slow(struct kmem_cache *s, struct slab *slab, void *head, void *tail,
                                        unsigned int cnt)
{
	struct kmem_cache_node *n = NULL;
	bool was_frozen, had_free = false, on_node_partial = false;
	bool has_cpu_partial = s->cpu_partial_slabs > 0;
	void *prior;
	unsigned long c, nc;

	usl_stat(s, USL_FREE_SLOWPATH);
	do {
		if (usl_unlikely(n)) {
			usl_unlock(&n->list_lock);
			n = NULL;
		}
		usl_slab_snapshot(slab, &prior, &c);
		if (usl_unlikely(cnt == 1 && prior == head)) {
			usl_refuse_double_free("kmem_cache_free", s->name, head, NULL);
			return;
		}
		if (usl_unlikely(usl_counters_inuse(c) < cnt)) {
			/* More frees than objects in use: a double free that was not at
			 * the freelist head. Refuse it rather than wrap the counter. */
			if (n)
				usl_unlock(&n->list_lock);
			usl_refuse_double_free("kmem_cache_free", s->name, head, "more frees than objects in use");
			return;
		}
		if (usl_unlikely(cnt == 1 && usl_counters_uncarved(c) && usl_never_handed_out(s, slab, c, head))) {
			usl_refuse_double_free("kmem_cache_free", s->name, head, "never allocated");
			return;
		}
		was_frozen = usl_counters_frozen(c);
		had_free = prior || usl_counters_uncarved(c);   /* else it was full */
		usl_set_freepointer(s, tail, prior);
		nc = usl_counters_remake(c, usl_counters_inuse(c) - cnt, was_frozen);
		if ((usl_counters_inuse(nc) == 0 || !had_free) && !was_frozen) {
			if (!has_cpu_partial || had_free) {
				/* May need list changes: lock before the CAS so that a
				 * concurrent put_partials sees a consistent inuse. */
				n = usl_get_node(s, slab);
				usl_list_lock(s, n);
				on_node_partial = slab->node_partial;
			}
		}
	} while (!usl_slab_cas(s, slab, prior, c, head, nc));

	if (usl_likely(!n)) {
		if (was_frozen)
			usl_stat(s, USL_FREE_FROZEN);
		else if (has_cpu_partial && !had_free) {
			usl_stat(s, USL_CPU_PARTIAL_FREE);
			put_cpu_partial(s, slab);   /* was full: now ours to place */
		}
		return;
	}
	if (had_free && !on_node_partial) {
		/* cpu partial, or isolated by an allocating thread */
		usl_unlock(&n->list_lock);
		return;
	}
	if (usl_counters_inuse(nc) == 0 && n->nr_partial >= s->min_partial) {
		if (had_free) {
			usl_remove_partial(n, slab);
			usl_stat(s, USL_FREE_REMOVE_PARTIAL);
		}
		usl_unlock(&n->list_lock);
		usl_discard_slab(s, slab);
		return;
	}
	if (!had_free) {
		usl_add_partial(n, slab, true);  /* was full, no cpu partial lists */
		usl_stat(s, USL_FREE_ADD_PARTIAL);
	}
	usl_unlock(&n->list_lock);
}
/* ===========================================================================
 * Allocation slow path
 */

/* Take one slab off the node partial list to become the cpu slab, and up to
 * cpu_partial_slabs / 2 + 1 more for this CPU's partial chain (returned in *extra,
 * in list order). Nothing is frozen under list_lock (docs/ARCHITECTURE.md, "Slab states"). */
static struct slab *get_partial_node(struct kmem_cache *s, struct kmem_cache_node *n, struct slab **extra)
{
	struct slab *first = NULL, *chain = NULL, **link = &chain;
	unsigned int taken = 0;

	*extra = NULL;
	if (!__atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED))
		return NULL;
	usl_list_lock(s, n);
	while (!usl_list_empty(&n->partial)) {
		struct slab *slab = usl_container_of(n->partial.next, struct slab, slab_list);
		usl_remove_partial(n, slab);
		usl_assert(!usl_counters_frozen(usl_load(&slab->counters)));   /* listed: unfrozen */
		if (!first) {
			first = slab;
			if (!s->cpu_partial_slabs)
				break;
		} else {
			slab->next = NULL;
			*link = slab;
			link = &slab->next;
			usl_stat(s, USL_CPU_PARTIAL_NODE);
			if (++taken > s->cpu_partial_slabs / 2)
				break;
		}
	}
	usl_unlock(&n->list_lock);
	*extra = chain;
	return first;
}

/* A partial slab for a CPU of the node: from the node's list, else, with
 * more than one node, from another node's list that holds more than
 * min_partial slabs (the kernel's get_any_partial: memory another node does
 * not need is used before the range grows). */
static struct slab *get_partial(struct kmem_cache *s, unsigned int node, struct slab **extra)
{
	struct slab *slab = get_partial_node(s, s->node[node], extra);
	for (unsigned int i = 1; !slab && i < usl_nr_nodes; i++) {
		struct kmem_cache_node *n = s->node[(node + i) % usl_nr_nodes];
		if (__atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED) > s->min_partial)
			slab = get_partial_node(s, n, extra);
	}
	return slab;
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
		*next = usl_get_freepointer(s, fl);
	} else {
		obj = usl_carve_start(s, slab, c);
		*next = NULL;
		u--;
		if (usl_flagged(s))      /* as if carved onto the list: the caller takes its F */
			usl_flag_carved(s, obj);
	}
	*nc = usl_counters_set_uncarved(usl_counters_remake(c, inuse, false), u);
	return obj;
}

/* No per-CPU slot for this thread (rseq not registered for it): take one object
 * straight from a node partial slab under list_lock, as the 7.0 kernel does. */
void *usl_alloc_direct(struct kmem_cache *s, unsigned int node)
{
	struct kmem_cache_node *n = s->node[node];
	void *fl, *obj, *next;
	unsigned long c, nc;
	struct slab *slab;

	usl_list_lock(s, n);
	while (!usl_list_empty(&n->partial)) {
		slab = usl_container_of(n->partial.next, struct slab, slab_list);
		usl_slab_snapshot(slab, &fl, &c);
		if (!fl && !usl_counters_uncarved(c)) {   /* cannot happen: listed slabs have free objects */
			usl_remove_partial(n, slab);
			continue;
		}
		obj = take_one(s, slab, fl, c, usl_counters_inuse(c) + 1, &next, &nc);
		/* Taking the last object makes the slab full: isolate it first, so a
		 * free that then sees it full may place it without list_lock. */
		bool full = !next && !usl_counters_uncarved(nc);
		if (full)
			usl_remove_partial(n, slab);
		if (usl_slab_cas(s, slab, fl, c, next, nc)) {
			if (!fl)
				usl_slab_carved(s, slab, nc);
			usl_unlock(&n->list_lock);
			return obj;
		}
		if (full)
			usl_add_partial(n, slab, false);
	}
	usl_unlock(&n->list_lock);

	slab = usl_new_slab(s, &fl, node);
	if (!slab)
		return NULL;
	n = usl_get_node(s, slab);
	obj = take_one(s, slab, fl, slab->counters, 1, &next, &nc);
	slab->freelist = next;
	slab->counters = nc;
	if (!fl)
		usl_slab_carved(s, slab, nc);
	if (next || usl_counters_uncarved(nc)) {
		usl_list_lock(s, n);
		usl_add_partial(n, slab, false);
		usl_unlock(&n->list_lock);
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
				__atomic_store_n(&lc->partial, slab->next, __ATOMIC_RELAXED);
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
		if (*fl) {
			usl_stat(s, USL_CPU_PARTIAL_ALLOC);
			return slab;
		}
		/* No free objects (cannot happen for a slab that reached a partial
		 * list through a free); it is full and on no list. */
	}

	/* Locked mode: drop the slot lock for the node list and the page provider,
	 * as the kernel drops its per-CPU lock around new_slab: a constructor may
	 * allocate, and mprotect/madvise must not run under a spin lock. */
	if (lc)
		usl_spin_unlock(&lc->lock);
	unsigned int node = usl_slub_local_node(s);
	slab = get_partial(s, node, &extra);
	if (slab) {
		*fl = freeze_slab(s, slab);
		if (!*fl)
			slab = NULL;  /* full after all: it stays off the list */
		else
			usl_stat(s, USL_ALLOC_FROM_PARTIAL);
	}
	if (!slab)
		slab = usl_new_slab(s, fl, node);
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
			__atomic_store_n(&lc->partial, e, __ATOMIC_RELEASE);
		} else {
			int r;
			while ((r = usl_rseq_partial_push(s, e, ~0u)) == USL_RS_MARKED)
				wait_flush(s);
			if (r != USL_RS_OK) {       /* no CPU: to the node list */
				e->next = NULL;
				usl_put_partials(s, e);
			}
		}
	}
	return slab;
}

/* Take this CPU's slot. False: this thread has no slot (rseq not registered). */
bool usl_slot_take(struct kmem_cache *s, struct usl_private_slot *b)
{
	b->lc = NULL;
	if (!usl_rseq_mode) {
		usl_cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
		b->lc = &s->cpu_slab[usl_cpu_hint];
		usl_spin_lock(&b->lc->lock);
		usl_locked_detach(b->lc, &b->fl, &b->slab);
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
bool usl_slot_refill(struct kmem_cache *s, struct usl_private_slot *b, bool link)
{
	if (b->slab) {
		b->fl = get_freelist(s, b->slab);   /* NULL: the slab is full and unfrozen */
		if (b->fl) {
			usl_stat(s, USL_ALLOC_REFILL);
			return true;
		}
		usl_stat(s, USL_DEACTIVATE_BYPASS);
		b->slab = NULL;
	}
	b->slab = refill(s, b->lc, &b->fl);
	if (b->slab && !b->fl && link)
		b->fl = get_freelist(s, b->slab);   /* a new slab: carve a linked chunk */
	return b->slab != NULL;
}

/* Give the slot back: install what is left, or return it to the slab. */
void usl_slot_put(struct kmem_cache *s, struct usl_private_slot *b)
{
	if (b->lc) {
		if (b->slab && !b->lc->slab) {
			usl_locked_install(b->lc, b->fl, b->slab);
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

USL_OUT_OF_LINE void *usl_slub_alloc_slow(struct kmem_cache *s, gfp_t gfp)
{
	struct usl_private_slot b;
	void *obj;

	usl_stat(s, USL_ALLOC_SLOWPATH);
	if (!usl_slot_take(s, &b)) {
		obj = usl_alloc_direct(s, usl_slub_local_node(s));
		if (!obj)
			goto nomem;
		return obj;
	}
	/* The slot is empty and what it held is ours. */
	if (!b.fl && !usl_slot_refill(s, &b, true)) {
		usl_slot_put(s, &b);
		goto nomem;
	}
	obj = b.fl;
	b.fl = usl_get_freepointer(s, obj);
	usl_slot_put(s, &b);   /* installs, or gives back if the slot was filled meanwhile */
	return obj;

nomem:
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc(%s): out of memory (object size %u, order %u)",
		           s->name, s->object_size, s->order);
	return NULL;
}
/* ===========================================================================
 * The cpu-slab fast path's other halves: locked mode's pop, and the section
 * with its slow path for the layers above
 */

USL_OUT_OF_LINE void *usl_slub_alloc_fast_locked(struct kmem_cache *s)
{
	struct kmem_cache_cpu *c = usl_hint_slot(s);
	unsigned long tid;
	void *obj;

	bool ok;
	void *next;

	for (;;) {
		tid = usl_load(&c->tid);
		obj = usl_load_ptr(&c->freelist);
		if (usl_unlikely(!obj))
			return NULL;
		next = usl_get_freepointer_safe(s, obj, &ok);
		if (usl_unlikely(!ok))
			return NULL;    /* the slow path reads it again under the slot's lock */
		if (usl_cas16(c, tid, (unsigned long)obj, tid + usl_tid_step(), (unsigned long)next))
			break;
		usl_stat(s, USL_CMPXCHG_DOUBLE_CPU_FAIL);
	}
	usl_stat(s, USL_ALLOC_FASTPATH);
	return obj;
}

static USL_FAST_PATH void *alloc_one(struct kmem_cache *s, gfp_t gfp)
{
	void *obj;

	USL_RSEQ_ALLOC(s, obj);
	usl_stat(s, USL_ALLOC_FASTPATH);
	return obj;
slow:
	obj = usl_rseq_mode ? NULL : usl_slub_alloc_fast_locked(s);
	return obj ? obj : usl_slub_alloc_slow(s, gfp);
}


/* The cpu-slab layer's allocation (no zeroing): the section, then the slow
 * path; a two-word cache's object leaves with its F, or another is taken. */
void *usl_slub_alloc(struct kmem_cache *s, gfp_t gfp)
{
	void *obj = alloc_one(s, gfp);
	while (usl_unlikely(obj && usl_flagged(s)) && usl_unlikely(!usl_flag_leave_slab(s, obj))) {
		usl_flag_refused(s, obj);
		obj = alloc_one(s, gfp);
	}
	return obj;
}

/* An object from a slab of the node, for kmem_cache_alloc_node when the
 * node is not the CPU's: straight from the node's partial list or a new
 * slab of it, under its list_lock (no cpu slab changes hands: the kernel
 * gives up its cpu slab here, counted as alloc_node_mismatch, which counts
 * this). A two-word cache's object leaves with its F. */
void *usl_slub_alloc_node(struct kmem_cache *s, gfp_t gfp, unsigned int node)
{
	usl_stat(s, USL_ALLOC_NODE_MISMATCH);
	for (;;) {
		void *obj = usl_alloc_direct(s, node);
		if (!obj) {
			if (!(gfp & __GFP_NOWARN))
				usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_node(%s): out of memory on node %u (object size %u, order %u)",
				           s->name, node, s->object_size, s->order);
			return NULL;
		}
		if (!usl_flagged(s) || usl_flag_leave_slab(s, obj))
			return obj;
		usl_flag_refused(s, obj);
	}
}

/* ===========================================================================
 * Freeing single objects, and reports
 */

/* Why x cannot be freed (reported, not freed). fn names the entry point; s is the
 * cache the caller named, or NULL for kfree_bulk (any cache). */
USL_SLOW_PATH void usl_report_bad_free(const char *fn, struct kmem_cache *s, const void *x,
                                       struct slab *slab)
{
	const char *name = s ? s->name : "any cache";

	/* A pointer into never-used or purged memory finds a zeroed page-map
	 * entry, which leads to some other block: not x's. */
	if (!slab) {
		usl_refuse_foreign(fn, name, x, false);
		return;
	}
	struct kmem_cache *owner = __atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE);
	if (!owner || (uintptr_t)x - (uintptr_t)usl_slab_address(slab) >= usl_order_bytes(slab->order))
		usl_refuse_not_object(fn, name, x, "is not in a slab");
	else if (s && owner != s)
		usl_refuse_wrong_cache(fn, name, x, owner->name);
	else
		usl_refuse_inside(fn, owner->name, x, (unsigned long)((uintptr_t)x - (uintptr_t)usl_slab_address(slab)));
}

/* x, an object start of s beyond its page map count: was it handed out? (The
 * count can lag the slab's carving point, never lead it: carving is published
 * by the counters' CAS before an object leaves the engine.) */
bool usl_slub_handed_out(struct kmem_cache *s, const void *x)
{
	struct slab *slab = usl_virt_to_slab(x);
	unsigned long c = __atomic_load_n(&slab->counters, __ATOMIC_ACQUIRE);
	return !(usl_counters_uncarved(c) && usl_never_handed_out(s, slab, c, x));
}

USL_OUT_OF_LINE void usl_report_double_free(struct kmem_cache *s, void *x, const char *fn)
{
	usl_refuse_double_free(fn, s->name, x, NULL);
}


/* Not this CPU's slab: check it is s's before freeing to the slab. */
static USL_OUT_OF_LINE void free_checked_slow(struct kmem_cache *s, struct slab *slab, void *x)
{
	if (usl_unlikely(__atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE) != s)) {
		usl_report_bad_free("kmem_cache_free", s, x, slab);
		return;
	}
	usl_slab_free_slow(s, slab, x, x, 1);
}

/* A single object whose section (usl_rseq_free, result r) did not push it:
 * a double free, the locked-mode push, or a slab that is not this CPU's. */
USL_OUT_OF_LINE void usl_slub_free_slow(struct kmem_cache *s, struct slab *slab, void *x, int r,
                                        const char *fn)
{
	if (r == USL_RS_OTHER) {
		usl_report_double_free(s, x, fn);
		return;
	}
	if (!usl_rseq_mode) {
		r = usl_locked_push_chain(s, slab, x, x);
		if (r == USL_RS_OK) {
			usl_stat(s, USL_FREE_FASTPATH);
			return;
		}
		if (r != USL_RS_OTHER) {
			usl_report_double_free(s, x, fn);
			return;
		}
	}
	free_checked_slow(s, slab, x);
}

/* The cpu-slab layer's free of a checked object of s (a two-word cache's
 * with its M, and on no free list already). */
void usl_slub_free(struct kmem_cache *s, struct slab *slab, void *x)
{
	if (usl_flagged(s) && usl_unlikely(!usl_flag_enter_slab(s, x))) {
		usl_report_flag_enter(s, x, "kmem_cache_free");
		return;
	}
	int r = usl_rseq_free(s, slab, x);
	if (r != USL_RS_OK)
		usl_slub_free_slow(s, slab, x, r, "kmem_cache_free");
	else
		usl_stat(s, USL_FREE_FASTPATH);
}
