/* sweep.c - the per-CPU layer's whole-cache work: flushing every CPU's
 * sheaves and the barn (shrink, destroy; with the engine's mark + membarrier
 * protocol), the decay sweep's part, trimming the barn before the page
 * provider grows, fork locks and counts. Locks: the barn's spin lock (barn.c's
 * usl_barn_*_locked helpers run under it), each slot's sheaf_lock in locked
 * mode; never held across a call out. */
#define _GNU_SOURCE
#include <limits.h>
#include <string.h>

#include "../testing.h"
#include "percpu.h"
#include "sheaf.h"

/* ===========================================================================
 * Flushing every CPU's sheaves and the barn (shrink, destroy). The slots are
 * reached with the engine's flush protocol (usl_slub_hold_slots): rseq mode marks every
 * slot and one membarrier(PRIVATE_EXPEDITED_RSEQ) aborts every section in
 * flight, so no section commits to a marked slot (each checks the mark after its
 * start); locked mode takes each slot's sheaf_lock. While the slots are held only
 * pointers move; objects go back to slabs after they are released, and every
 * sheaf, the barn's empty ones too, is freed (the kernel's barn_shrink): sheaf
 * structures are scattered over the range.
 */
static void sheaf_flush_all(struct kmem_cache *s)
{
	struct usl_list taken;

	usl_list_init(&taken);
	if (usl_slub_hold_slots(s)) {
		for (unsigned int i = 0; i < usl_nr_cpus; i++) {
			struct kmem_cache_cpu *c = &s->cpu_slab[i];
			if (!usl_rseq_mode)
				usl_spin_lock_leaf(&c->sheaf_lock);
			struct slab_sheaf *sh[2] = { usl_slot_main_detach(c), c->spare };
			c->spare = NULL;
			if (!usl_rseq_mode)
				usl_spin_unlock_leaf(&c->sheaf_lock);
			for (int k = 0; k < 2; k++)
				if (sh[k] && sh[k] != &usl_empty_sheaf)
					usl_list_add_tail(&sh[k]->barn_list, &taken);
		}
		usl_slub_release_slots(s);
	}
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct usl_barn *barn = usl_node_barn(s, nid);
		usl_spin_lock(&barn->lock);
		usl_barn_take_full_locked(barn, ~0u, &taken);
		barn->low_full = barn->high_full = 0;
		struct slab_sheaf *e;
		while ((e = usl_barn_take_locked(barn, false)))
			usl_list_add_tail(&e->barn_list, &taken);
		void **packed_old, **packed = usl_barn_take_packed_locked(barn, &packed_old);
		usl_spin_unlock(&barn->lock);
		usl_barn_flush_packed_all(s, barn, packed);
		usl_barn_flush_packed_all(s, barn, packed_old);
	}

	while (!usl_list_empty(&taken)) {
		struct slab_sheaf *sh = usl_container_of(taken.next, struct slab_sheaf, barn_list);
		usl_list_del(&sh->barn_list);
		usl_sheaf_flush(s, sh);
		usl_sheaf_dispose(s, sh);
	}
}

/* What it takes out of the slots and the barn is out of reach until it is
 * flushed (usl_slub_flush_begin). */
void usl_sheaf_flush_all(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return;
	usl_slub_flush_begin();
	sheaf_flush_all(s);
	usl_slub_flush_end();
}

/* Does any CPU slot of s hold objects (a sheaf with some, a cpu slab, cpu
 * partial slabs)? In rseq mode unlocked peeks (sheaves are objects of uslab's
 * caches, whose memory stays mapped, so a stale pointer reads harmlessly); in
 * locked mode under the slot's locks, one at a time (docs/ARCHITECTURE.md, "Locks, in order"). */
static bool slot_sheaves_hold(struct kmem_cache_cpu *c)
{
	struct slab_sheaf *sp = __atomic_load_n(&c->spare, __ATOMIC_RELAXED);
	return usl_slot_main_objects(c) ||
	       (sp && __atomic_load_n(&sp->size, __ATOMIC_RELAXED));
}

static bool slot_slabs_hold(struct kmem_cache_cpu *c)
{
	return __atomic_load_n(&c->slab, __ATOMIC_RELAXED) || __atomic_load_n(&c->partial, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&c->freelist, __ATOMIC_RELAXED);
}

/* Does any CPU slot of s hold cpu partial slabs? An unlocked peek in rseq
 * mode, under each slot's lock in locked mode (as slots_hold_objects). */
static bool slots_hold_partials(struct kmem_cache *s)
{
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		bool some;
		if (usl_rseq_mode) {
			some = __atomic_load_n(&c->partial, __ATOMIC_RELAXED) != NULL;
		} else {
			usl_spin_lock(&c->lock);
			some = c->partial != NULL;
			usl_spin_unlock(&c->lock);
		}
		if (some)
			return true;
	}
	return false;
}

/* The sweep flushes CPU slots only while membarrier works: a process that
 * forbids it later (a seccomp sandbox) gets no report and no failing call on
 * every sweep; shrink, destroy and malloc_trim still try and report. */
static bool sweep_flush_off;

static bool sweep_may_flush(void)
{
	if (usl_rseq_mode && usl_membarrier_rseq() != 0) {
		__atomic_store_n(&sweep_flush_off, true, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

static bool slots_hold_objects(struct kmem_cache *s)
{
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		bool some;
		if (usl_rseq_mode) {
			some = slot_sheaves_hold(c) || slot_slabs_hold(c);
		} else {
			usl_spin_lock_leaf(&c->sheaf_lock);
			some = slot_sheaves_hold(c);
			usl_spin_unlock_leaf(&c->sheaf_lock);
			if (!some) {
				usl_spin_lock(&c->lock);
				some = slot_slabs_hold(c);
				usl_spin_unlock(&c->lock);
			}
		}
		if (some)
			return true;
	}
	return false;
}

/* Every CPU's sheaves, then its cpu slab (the flushed objects may land on this
 * CPU's cpu slab), back to the slabs. */
static void flush_cpus(struct kmem_cache *s)
{
	usl_sheaf_flush_all(s);
	usl_engine_flush_cpus(s);
}

/* The periodic sweep (the common layer's decay tick): the surplus that stayed unused for a
 * decay interval goes back to slabs even if this cache's barn is not visited.
 * A barn not visited since the previous sweep (at least a decay interval ago)
 * gives back all its full sheaves, and the slabs they empty go to the page
 * provider: the cache, if used at all, runs on the CPUs' own sheaves. For a
 * kmalloc or malloc class what every CPU holds of it goes back too, and its
 * next refills are small (a program that stopped using a size, or uses it a
 * few objects at a time, keeps a few objects of it). uslab's own caches (no
 * sheaves) give back the slabs on their CPUs' partial lists: the sheaf
 * structures of a burst, freed since, would keep them there for ever. */
static unsigned int sheaf_decay(struct kmem_cache *s, uint64_t now);

unsigned int usl_sheaf_decay(struct kmem_cache *s, uint64_t now)
{
	if (!s->sheaf_capacity)
		return sheaf_decay(s, now);
	usl_slub_flush_begin();                  /* what it takes off the barn is out of reach */
	unsigned int r = sheaf_decay(s, now);
	usl_slub_flush_end();
	return r;
}

/* One node's barn in the sweep: its surplus empties, packed sheaves and, if
 * it was not visited for an interval, its full sheaves back to slabs. Adds
 * the sheaves it flushed (own), packed sheaves it gave back and empties it
 * freed; returns whether the barn went unvisited. */
static bool barn_sweep(struct kmem_cache *s, struct usl_barn *barn, uint64_t now, unsigned int *own_out,
                       unsigned int *packed_out, unsigned int *disposed_out)
{
	struct usl_list out;

	usl_list_init(&out);
	usl_spin_lock(&barn->lock);
	/* Empty sheaves above the kernel's ten that nobody took for a whole
	 * interval (a burst of frees left them, its objects since allocated)
	 * are freed: arrays waiting for a burst that does not come. */
	struct slab_sheaf *unused_empties = NULL;
	if (now >= barn->last_empty_check + usl_opt.decay_ms) {
		unsigned int low = barn->low_empty < barn->nr_empty ? barn->low_empty : barn->nr_empty;
		for (unsigned int n = low > s->barn_max_empty ? low - s->barn_max_empty : 0; n; n--) {
			struct slab_sheaf *e = usl_barn_take_locked(barn, false);
			e->next = unused_empties;
			unused_empties = e;
		}
		barn->low_empty = barn->nr_empty;
		barn->last_empty_check = now;
	}
	/* Unvisited: no barn visit since the last sweep (a cache used only
	 * through its main sheaves visits no barn). */
	bool unvisited = barn->visits == barn->visits_swept && now >= barn->last_decay + usl_opt.decay_ms;
	barn->visits_swept = barn->visits;
	/* Packed sheaves age by stacks: what is still on the old stack at an
	 * aging was not taken for a whole interval and goes back to slabs; the
	 * young stack becomes the old one. An unvisited barn gives back both. */
	void **packed = NULL, **packed_young = NULL;
	unsigned int nr_packed = 0;
	if (unvisited) {
		nr_packed = barn->nr_packed + barn->nr_packed_old;
		packed_young = usl_barn_take_packed_locked(barn, &packed);
		barn->last_packed_age = now;
	} else if (now >= barn->last_packed_age + usl_opt.decay_ms) {
		packed = barn->packed_old;
		nr_packed = barn->nr_packed_old;
		barn->packed_old = barn->packed;
		usl_barn_set(&barn->nr_packed_old, barn->nr_packed);
		barn->packed = NULL;
		usl_barn_set(&barn->nr_packed, 0);
		barn->last_packed_age = now;
	}
	if (unvisited) {
		/* Idle, or used only through the CPUs' own sheaves: either way
		 * nobody needed the barn's full sheaves for an interval. The next
		 * such sweep is an interval later. */
		usl_barn_take_full_locked(barn, barn->nr_full, &out);
		barn->low_full = barn->high_full = 0;
		barn->last_decay = now;
	} else if (barn->nr_full > s->barn_max_full) {
		usl_barn_decay_due_locked(s, barn, now, UINT_MAX, &out);
	}
	usl_spin_unlock(&barn->lock);
	while (unused_empties) {
		struct slab_sheaf *e = unused_empties;
		unused_empties = e->next;
		usl_sheaf_dispose(s, e);
		++*disposed_out;
	}
	usl_barn_flush_packed_all(s, barn, packed);
	usl_barn_flush_packed_all(s, barn, packed_young);
	unsigned int own = 0;                    /* usl_barn_flush_list visits the barn once a sheaf */
	for (struct usl_list *it = out.next; it != &out; it = it->next)
		own++;
	usl_barn_flush_list(s, barn, &out);
	if (own) {
		usl_spin_lock(&barn->lock);
		barn->visits_swept += own;           /* the sweep's own visits are not use */
		usl_spin_unlock(&barn->lock);
	}
	*own_out += own;
	*packed_out += nr_packed;
	return unvisited;
}

static unsigned int sheaf_decay(struct kmem_cache *s, uint64_t now)
{
	if (!s->sheaf_capacity) {
		if (s->flags & USL_SLAB_INTERNAL) {
			if (!__atomic_load_n(&sweep_flush_off, __ATOMIC_RELAXED) && slots_hold_partials(s) &&
			    sweep_may_flush())
				flush_cpus(s);
			usl_engine_release(s);     /* and the empty ones frees put on the node list */
		}
		return 0;
	}
	/* Idle: no barn visited since the last sweep, and no free of it
	 * sampled by the tick. */
	bool used = __atomic_exchange_n(&s->recent_use, 0, __ATOMIC_RELAXED);
	unsigned int own = 0, nr_packed = 0, disposed = 0;
	bool unvisited = true;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		unvisited &= barn_sweep(s, usl_node_barn(s, nid), now, &own, &nr_packed, &disposed);
	bool idle = !used && unvisited;
	bool flushed = false;
	if (unvisited) {
		/* What the CPUs hold goes back too: their sheaves and cpu slabs,
		 * reached with the flush protocol (one membarrier), only when a peek
		 * finds something there. The cache is idle, or runs on the CPUs'
		 * own sheaves alone: then what they hold, up to two sheaves a CPU,
		 * pins slabs scattered over everything the cache ever used, and a
		 * refill an interval costs nothing. Only for kmalloc and malloc
		 * classes, whose frees are sampled: a user cache used only through
		 * its main sheaves would look idle. */
		if ((s->flags & USL_SLAB_KMALLOC) && !__atomic_load_n(&sweep_flush_off, __ATOMIC_RELAXED) &&
		    slots_hold_objects(s) && sweep_may_flush()) {
			flush_cpus(s);
			flushed = true;
			for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
				struct usl_barn *barn = usl_node_barn(s, nid);
				__atomic_store_n(&barn->refill_shift, 3, __ATOMIC_RELAXED);
				usl_spin_lock(&barn->lock);
				barn->visits_swept = barn->visits;   /* the flush's visits are not use */
				usl_spin_unlock(&barn->lock);
			}
		}
	}
	if (idle || (unvisited && (own || flushed || nr_packed)))
		usl_engine_release(s);                 /* the slabs the flushes emptied */
	return own + nr_packed + disposed + (flushed ? 1 : 0);
}

bool usl_sheaf_decay_pending(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return false;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct usl_barn *barn = usl_node_barn(s, nid);
		if (__atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&barn->nr_empty, __ATOMIC_RELAXED) > s->barn_max_empty)
			return true;
	}
	return false;
}

/* Memory is short (the page provider would grow): every full sheaf above the
 * barn's level, and every packed one, goes back to slabs now, used recently
 * or not. */
static void sheaf_trim_barn(struct kmem_cache *s, struct usl_barn *barn);

void usl_sheaf_trim_barn(struct kmem_cache *s)
{
	usl_slub_flush_begin();                  /* what it takes off the barn is out of reach */
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		sheaf_trim_barn(s, usl_node_barn(s, nid));
	usl_slub_flush_end();
}

static void sheaf_trim_barn(struct kmem_cache *s, struct usl_barn *barn)
{
	struct usl_list out;

	if (!s->sheaf_capacity || (__atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED) <= s->barn_max_full &&
	                           !__atomic_load_n(&barn->nr_packed, __ATOMIC_RELAXED) &&
	                           !__atomic_load_n(&barn->nr_packed_old, __ATOMIC_RELAXED)))
		return;
	usl_list_init(&out);
	usl_spin_lock(&barn->lock);
	if (barn->nr_full > s->barn_max_full)     /* re-checked: peeked unlocked above */
		usl_barn_take_full_locked(barn, barn->nr_full - s->barn_max_full, &out);
	barn->high_full = barn->nr_full;
	barn->low_full = barn->nr_full;
	void **packed_old, **packed = usl_barn_take_packed_locked(barn, &packed_old);
	usl_spin_unlock(&barn->lock);
	usl_barn_flush_packed_all(s, barn, packed);
	usl_barn_flush_packed_all(s, barn, packed_old);
	usl_barn_flush_list(s, barn, &out);
}

/* fork(): the barn lock and, in locked mode, every slot's sheaf lock. */
void usl_sheaf_fork_lock(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return;
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_lock_leaf(&s->cpu_slab[i].sheaf_lock);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		usl_spin_lock(&usl_node_barn(s, nid)->lock);
}

void usl_sheaf_fork_unlock(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return;
	for (unsigned int nid = usl_nr_nodes; nid-- > 0;)
		usl_spin_unlock(&usl_node_barn(s, nid)->lock);
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_unlock_leaf(&s->cpu_slab[i].sheaf_lock);
}

void usl_sheaf_counts(struct kmem_cache *s, struct usl_sheaf_counts *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		struct slab_sheaf *m = __atomic_load_n(&c->main, __ATOMIC_ACQUIRE);
		struct slab_sheaf *sp = __atomic_load_n(&c->spare, __ATOMIC_ACQUIRE);
		if (m && m != &usl_empty_sheaf) {
			out->cpu_sheaves++;
			out->cpu_objects += usl_slot_main_objects(c);
		}
		if (sp) {
			out->cpu_sheaves++;
			out->cpu_objects += __atomic_load_n(&sp->size, __ATOMIC_RELAXED);
		}
	}
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct usl_barn *barn = usl_node_barn(s, nid);
		usl_spin_lock(&barn->lock);
		out->barn_full += barn->nr_full;
		out->barn_empty += barn->nr_empty;
		for (struct slab_sheaf *sh = barn->full; sh; sh = sh->next)
			out->barn_objects += sh->size;
		out->barn_packed += barn->nr_packed + barn->nr_packed_old;
		out->packed_objects += __atomic_load_n(&barn->packed_objects, __ATOMIC_RELAXED);
		usl_spin_unlock(&barn->lock);
	}
}
