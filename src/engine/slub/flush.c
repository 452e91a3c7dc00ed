/* flush.c - the SLUB engine's whole-cache operations: flushing every CPU's cpu
 * slab and cpu partial slabs (the kernel's flush_all), holding every slot with
 * the mark + membarrier protocol (also for the per-CPU layer's flush), the fork
 * locks, shrinking a node, and counts. Locks: flush_mutex (one flusher at a
 * time: the marks are shared), then each slot's lock (locked mode), then
 * list_lock. */
#define _GNU_SOURCE
#include <string.h>

#include "../../testing.h"
#include "internal.h"
#include "slot.h"
#include "slub.h"

/* ===========================================================================
 * Flushing every CPU (shrink, destroy): the kernel's flush_all.
 *
 * rseq mode: mark every slot (c->lock = 1), then one membarrier(PRIVATE_EXPEDITED_
 * RSEQ) aborts every section in flight; sections check the mark after their start,
 * so from then on no section commits to a marked slot and the flusher owns them.
 * locked mode: take each slot's lock.
 */
static pthread_mutex_t flush_mutex = PTHREAD_MUTEX_INITIALIZER;

void usl_slub_flush_cpus(struct kmem_cache *s)
{
	struct slab *chain = NULL, *looped = NULL;

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
			__atomic_store_n(&c->partial, NULL, __ATOMIC_RELAXED);
		} else {
			usl_spin_lock(&c->lock);
			usl_locked_detach(c, &fl, &slab);
			partial = c->partial;
			__atomic_store_n(&c->partial, NULL, __ATOMIC_RELAXED);
		}
		/* An unfrozen slab with free objects is placed like a cpu partial
		 * slab (put_partials); a full one stays on no list. */
		if (slab) {
			usl_stat(s, USL_CPUSLAB_FLUSH);
			unsigned long nc = usl_unfreeze_slab(s, slab, fl, &remote, &has_free);
			if (usl_counters_frozen(nc)) {   /* abandoned: on no list, next is ours */
				slab->next = looped;
				looped = slab;
			}
			if (!has_free)
				slab = NULL;
		}
		if (usl_rseq_mode)
			__atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE);   /* the mark */
		else
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
	usl_unlock(&flush_mutex);   /* each slot's mark was cleared as it was done */
	usl_put_partials(s, chain);
	for (; looped; looped = looped->next)    /* reported with no slot held */
		usl_report_loop(s, looped);
}

/* Hold every slot of s with the protocol above (rseq: marks and membarrier;
 * locked mode: flush_mutex only, the caller takes the slot locks it needs).
 * False if the slots cannot be held (membarrier failed). */
bool usl_slub_hold_slots(struct kmem_cache *s)
{
	usl_lock(&flush_mutex);
	if (!usl_rseq_mode)
		return true;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		__atomic_store_n(&s->cpu_slab[i].lock, 1, __ATOMIC_SEQ_CST);
	if (usl_membarrier_rseq() == 0)
		return true;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		__atomic_store_n(&s->cpu_slab[i].lock, 0, __ATOMIC_RELEASE);
	usl_unlock(&flush_mutex);
	usl_report(USLAB_ERR_NONE, "flush of %s skipped: membarrier failed", s->name);
	return false;
}

void usl_slub_release_slots(struct kmem_cache *s)
{
	if (usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			__atomic_store_n(&s->cpu_slab[i].lock, 0, __ATOMIC_RELEASE);
	usl_unlock(&flush_mutex);
}

/* fork(): the prepare handler takes every lock of the cache (slot locks in
 * locked mode, then list_lock) after flush_mutex, so the child inherits none
 * held and no flush marks. */
void usl_slub_fork_lock_global(void) { usl_lock(&flush_mutex); }
void usl_slub_fork_unlock_global(void) { usl_unlock(&flush_mutex); }

void usl_slub_fork_lock(struct kmem_cache *s)
{
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_lock(&s->cpu_slab[i].lock);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		usl_lock(&s->node[nid]->list_lock);
	usl_spin_lock_leaf(&s->virt_lock);
}

void usl_slub_fork_unlock(struct kmem_cache *s)
{
	usl_spin_unlock_leaf(&s->virt_lock);
	for (unsigned int nid = usl_nr_nodes; nid-- > 0;)
		usl_unlock(&s->node[nid]->list_lock);
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_unlock(&s->cpu_slab[i].lock);
}

/* Objects allocated and not freed (after a flush this is exact when quiescent). */
unsigned long usl_slub_objects_in_use(struct kmem_cache *s)
{
	unsigned long total = 0, free_objs = 0;

	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		usl_lock(&n->list_lock);
		total += __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
		for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
			struct slab *slab = usl_container_of(it, struct slab, slab_list);
			unsigned long c = usl_load(&slab->counters);
			free_objs += usl_counters_objects(c) - usl_counters_inuse(c);
		}
		usl_unlock(&n->list_lock);
	}
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
	usl_lock(&n->list_lock);
	struct usl_list *it = n->partial.next;
	while (it != &n->partial) {
		struct slab *slab = usl_container_of(it, struct slab, slab_list);
		unsigned long c = usl_load(&slab->counters);
		unsigned int free_objs = usl_counters_objects(c) - usl_counters_inuse(c);
		it = it->next;
		if (free_objs == usl_counters_objects(c)) {
			usl_remove_partial(n, slab);
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
	usl_unlock(&n->list_lock);
	while (discard) {
		struct slab *slab = discard;
		discard = slab->next;
		usl_discard_slab(s, slab);
	}
	return __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED) != 0;
}

bool usl_slub_release_node(struct kmem_cache *s, unsigned int nid)
{
	return shrink_node(s, s->node[nid]);
}

bool usl_slub_release(struct kmem_cache *s)
{
	bool left = false;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		left |= shrink_node(s, s->node[nid]);
	return left;
}

void usl_slub_node_counts(struct kmem_cache *s, unsigned int nid, struct usl_node_counts *out)
{
	struct kmem_cache_node *n = s->node[nid];

	memset(out, 0, sizeof(*out));
	if (s->oslots) {
		usl_oslab_node_counts(s, nid, out);
		return;
	}
	usl_lock(&n->list_lock);
	out->nr_partial = n->nr_partial;
	for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
		struct slab *slab = usl_container_of(it, struct slab, slab_list);
		unsigned long c = usl_load(&slab->counters);
		out->partial_free += usl_counters_objects(c) - usl_counters_inuse(c);
		out->partial_inuse += usl_counters_inuse(c);
	}
	out->nr_slabs = __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
	out->total_objects = __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
	usl_unlock(&n->list_lock);
}

void usl_slub_cpu_counts(struct kmem_cache *s, unsigned int cpu, bool *has_slab, unsigned int *partial_slabs)
{
	struct kmem_cache_cpu *c = &s->cpu_slab[cpu];
	/* Racy reads, as the kernel's: a slab is never freed under a reader
	 * (struct slab entries are permanent), and the chain's head holds its
	 * length. */
	/* In locked mode the slot's lock guards the chain: held for the two
	 * reads (a head that left the chain has its count overwritten by a
	 * list link). */
	bool locked = !usl_rseq_mode;
	if (locked)
		usl_spin_lock(&c->lock);
	*has_slab = __atomic_load_n(&c->slab, __ATOMIC_RELAXED) != NULL;
	struct slab *p = __atomic_load_n(&c->partial, __ATOMIC_RELAXED);
	*partial_slabs = p ? __atomic_load_n(&p->slabs, __ATOMIC_RELAXED) : 0;
	if (locked)
		usl_spin_unlock(&c->lock);
}

void usl_slub_state_counts(struct kmem_cache *s, struct usl_state_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		if (c->slab)
			out->cpu_slabs++;
		for (struct slab *p = c->partial; p; p = p->next)
			out->cpu_partial++;
	}
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		usl_lock(&n->list_lock);
		out->node_partial += n->nr_partial;
		for (struct usl_list *it = n->partial.next; it != &n->partial; it = it->next) {
			struct slab *slab = usl_container_of(it, struct slab, slab_list);
			if (usl_counters_inuse(usl_load(&slab->counters)) == 0)
				out->empty_node_partial++;
		}
		usl_unlock(&n->list_lock);
		out->total += __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
	}
	out->full = out->total - out->cpu_slabs - out->cpu_partial - out->node_partial;
}
