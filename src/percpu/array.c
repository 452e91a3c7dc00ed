/* array.c - a slot's sheaf as SLAB's per-CPU array cache (the kernel's
 * struct array_cache: avail is the sheaf's size, limit its capacity): the
 * same sections pop and push it, the same take and put (pcs.c) reach it from
 * a slow path; what differs is here. An empty array is refilled with
 * batchcount objects (usl_slab_refill: the node's shared array, its slabs, a
 * new slab); a full one gives its batchcount oldest objects to the engine
 * (usl_slab_flush_array) and keeps the rest. There is no spare and no barn.
 * The periodic reap (the kernel's cache_reap, from the decay sweep) drains a
 * fifth of the limit from each array no slow path touched since the last one.
 * Locks: the slots' flush marks (usl_slub_hold_slots) or, in locked mode,
 * each slot's sheaf_lock, while the reap moves pointers; none across a call
 * into the engine. */
#define _GNU_SOURCE
#include <string.h>

#include "sheaf.h"

/* The kernel's BATCHREFILL_LIMIT: an array not used since the last reap
 * refills at most this many. */
#define BATCHREFILL_LIMIT 16

/* b's array, made if the slot had none (NULL: no memory). An array of an
 * old limit (tuned since it was made) is emptied and replaced. */
static struct slab_sheaf *array_get(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	if (!b->main) {
		b->main = b->spare;
		b->spare = NULL;
	}
	unsigned int limit = __atomic_load_n(&s->limit, __ATOMIC_RELAXED);
	if (b->main && b->main->capacity != limit) {
		usl_sheaf_flush(s, b->main);
		usl_sheaf_dispose(s, b->main);
		b->main = NULL;
	}
	if (!b->main && (b->main = usl_sheaf_new(s, limit, gfp))) {
		b->main->ac.touched = 0;
		b->main->ac.reap_size = 0;
	}
	return b->main;
}

bool usl_array_refill(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	struct slab_sheaf *ac = array_get(s, b, gfp);
	if (!ac)
		return false;
	if (ac->size)
		return true;
	unsigned int batch = __atomic_load_n(&s->batchcount, __ATOMIC_RELAXED);
	if (!ac->ac.touched && batch > BATCHREFILL_LIMIT)
		batch = BATCHREFILL_LIMIT;
	if (batch > ac->capacity)
		batch = ac->capacity;
	unsigned int n = usl_slab_refill(s, ac->objects, batch, gfp);
	if (!n)
		return false;
	usl_sheaf_reverse(ac->objects, n);
	/* Every object in an array carries its free marker (a pop checks it). */
	if (usl_opt.harden)
		for (unsigned int i = 0; i < n; i++)
			usl_marker_set(s, ac->objects[i]);
	usl_stat_add(s, USL_SHEAF_REFILL, n);
	ac->size = n;
	ac->ac.touched = 1;
	return true;
}

bool usl_array_make_room(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	struct slab_sheaf *ac = array_get(s, b, gfp);
	if (!ac)
		return false;
	if (ac->size < ac->capacity)
		return true;
	unsigned int batch = __atomic_load_n(&s->batchcount, __ATOMIC_RELAXED);
	if (batch > ac->size)
		batch = ac->size;
	unsigned int taken = usl_slab_flush_array(s, ac->objects, batch);
	usl_stat_add(s, USL_SHEAF_FLUSH, taken);
	ac->size -= taken;
	memmove(ac->objects, &ac->objects[taken], ac->size * sizeof(void *));
	return true;
}

/* One slot's part of the reap, with the slot held: up to room of its oldest
 * objects into out[] if its array went untouched (no slow path, and the same
 * size as at the last reap); how many. */
static unsigned int reap_slot(struct kmem_cache *s, struct kmem_cache_cpu *c, void **out, unsigned int room)
{
	struct slab_sheaf *ac = c->main;
	if (ac == &usl_empty_sheaf)
		return 0;
	unsigned int avail = (unsigned int)c->main_size;
	if (ac->ac.touched || avail != ac->ac.reap_size || !avail) {
		ac->ac.touched = 0;
		ac->ac.reap_size = avail;
		return 0;
	}
	unsigned int tofree = (ac->capacity + 4) / 5;
	if (tofree > avail)
		tofree = (avail + 1) / 2;
	if (tofree > room)
		tofree = room;
	memcpy(out, ac->objects, tofree * sizeof(void *));
	memmove(ac->objects, &ac->objects[tofree], (avail - tofree) * sizeof(void *));
	c->main_size = avail - tofree;
	ac->ac.reap_size = avail - tofree;
	(void)s;
	return tofree;
}

/* Does any slot's array hold objects? As sweep.c's peek: unlocked in rseq
 * mode, under each slot's sheaf_lock in locked mode. */
static bool arrays_hold(struct kmem_cache *s)
{
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		unsigned long n;
		if (usl_rseq_mode) {
			n = __atomic_load_n(&c->main_size, __ATOMIC_RELAXED);
		} else {
			usl_spin_lock_leaf(&c->sheaf_lock);
			n = c->main_size;
			usl_spin_unlock_leaf(&c->sheaf_lock);
		}
		if (n)
			return true;
	}
	return false;
}

#define REAP_CHUNK 256

unsigned int usl_array_reap(struct kmem_cache *s, uint64_t now)
{
	unsigned int done = 0;
	void *buf[REAP_CHUNK];

	/* As often as the node's reap: once a decay sweep. */
	if (usl_opt.decay_ms && now >= __atomic_load_n(&s->node[0]->next_reap, __ATOMIC_RELAXED) && arrays_hold(s)) {
		unsigned int cpu = 0;
		while (cpu < usl_nr_cpus) {
			unsigned int k = 0;
			if (!usl_slub_hold_slots(s))
				break;
			for (; cpu < usl_nr_cpus && k < REAP_CHUNK; cpu++) {
				struct kmem_cache_cpu *c = &s->cpu_slab[cpu];
				if (!usl_rseq_mode)
					usl_spin_lock_leaf(&c->sheaf_lock);
				k += reap_slot(s, c, buf + k, REAP_CHUNK - k);
				if (!usl_rseq_mode)
					usl_spin_unlock_leaf(&c->sheaf_lock);
			}
			usl_slub_release_slots(s);
			if (k)
				usl_slab_free_bulk(s, k, buf);
			done += k;
		}
	}
	return done + usl_slab_reap(s, now);
}
