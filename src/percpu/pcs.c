/* pcs.c - a slot's sheaves (the kernel's per-CPU sheaves): taken private by a
 * slow path and put back, in both per-CPU modes, and the slow paths behind
 * the sheaf sections: an empty main refilled or replaced, a full main
 * replaced, and bulk copies between an array and the sheaves. Locks: a slot's
 * sheaf_lock (locked mode; held for a copy or a swap, never across a call
 * out); the barn's through barn.c. */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "percpu.h"
#include "sheaf.h"

static void no_tick(void) {}
void (*usl_percpu_slow_tick)(void) = no_tick;
static bool no_oom(void) { return false; }
bool (*usl_percpu_oom)(void) = no_oom;

/* ===========================================================================
 * The slot's sheaves, taken private by a slow path (struct usl_pcs, internal.h)
 */

bool usl_pcs_take(struct kmem_cache *s, struct usl_pcs *b)
{
	b->lc = NULL;
	if (!usl_rseq_mode) {
		struct kmem_cache_cpu *c = usl_slub_hint_refresh(s);
		usl_spin_lock_leaf(&c->sheaf_lock);
		b->main = usl_slot_main_detach(c);
		b->spare = c->spare;
		c->spare = NULL;
		usl_spin_unlock_leaf(&c->sheaf_lock);
		b->lc = c;
	} else {
		unsigned long size;
		for (;;) {
			int r = usl_rseq_sheaf_take(s, &usl_empty_sheaf, &b->main, &size);
			if (r == USL_RS_OK)
				break;
			if (r == USL_RS_NOCPU)
				return false;
			sched_yield();     /* a flusher holds the slot */
		}
		if (b->main != &usl_empty_sheaf)
			b->main->size = (uint32_t)size;
		/* A section of its own: meanwhile another thread on this CPU may
		 * take the spare (then we have none), or we may migrate (then it
		 * is this CPU's: a sheaf of s all the same). */
		while (usl_rseq_spare_take(s, &b->spare) == USL_RS_MARKED)
			sched_yield();
	}
	if (b->main == &usl_empty_sheaf)  /* another thread on this CPU has it */
		b->main = NULL;
	return true;
}

void usl_pcs_put(struct kmem_cache *s, struct usl_pcs *b)
{
	bool main_done = !b->main, spare_done = !b->spare;

	if (b->lc) {
		struct kmem_cache_cpu *c = b->lc;
		usl_spin_lock_leaf(&c->sheaf_lock);
		usl_assert(!b->main || b->main->size <= b->main->capacity);
		if (!main_done && c->main == &usl_empty_sheaf) {
			c->main_size = b->main->size;
			c->main_cap = b->main->capacity;
			c->main = b->main;
			main_done = true;
		}
		if (!spare_done && !c->spare) {
			c->spare = b->spare;
			spare_done = true;
		}
		usl_spin_unlock_leaf(&c->sheaf_lock);
	} else {
		int r;   /* each waits out a flusher's mark; OTHER: the place is taken */
		if (!main_done) {
			usl_assert(b->main->size <= b->main->capacity);
			while ((r = usl_rseq_sheaf_install(s, &usl_empty_sheaf, b->main, b->main->size)) == USL_RS_MARKED)
				sched_yield();
			main_done = r == USL_RS_OK;
		}
		if (!spare_done) {
			while ((r = usl_rseq_spare_install(s, b->spare)) == USL_RS_MARKED)
				sched_yield();
			spare_done = r == USL_RS_OK;
		}
	}
	/* The slot was filled meanwhile (or we migrated): keep its sheaves,
	 * give ours back. */
	if (!main_done)
		usl_sheaf_give_back(s, b->main);
	if (!spare_done)
		usl_sheaf_give_back(s, b->spare);
}

static inline void swap_sheaves(struct usl_pcs *b)
{
	struct slab_sheaf *t = b->main;
	b->main = b->spare;
	b->spare = t;
}

/* Make b->main non-empty: the spare, a full sheaf from the barn, a packed one
 * unpacked, or a refill from slabs (filling the empty main, the spare, a barn
 * empty, or a new sheaf).
 * False when out of memory. */
static bool replace_empty_main(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	if (b->main && b->main->size)
		return true;
	if (usl_is_slab(s))
		return usl_array_refill(s, b, gfp);
	if (b->spare && b->spare->size) {
		swap_sheaves(b);
		return true;
	}
	if (__atomic_load_n(&usl_get_barn(s)->nr_full, __ATOMIC_RELAXED)) {
		/* One barn visit: our empty main (unless it can be the spare) for a
		 * full one. */
		struct slab_sheaf *give = b->main && b->spare ? b->main : NULL;
		struct slab_sheaf *full = usl_barn_visit(s, give, 1);
		if (give)
			b->main = NULL;
		if (b->main)
			b->spare = b->main;
		if (full) {
			b->main = full;
			return true;
		}
		b->main = NULL;                 /* raced: fill an empty one */
	}
	/* No full sheaf in the barn (a packed one counts as one). */
	if (!b->main) {
		if (b->spare && !b->spare->size) {   /* empty: fill it */
			b->main = b->spare;
			b->spare = NULL;
		} else if (!(b->main = usl_barn_get(s, false)) &&
		           !(b->main = usl_sheaf_new(s, s->sheaf_capacity, gfp))) {
			return false;
		}
	}
	/* The barn's packed sheaves, into the empty main. */
	if (usl_barn_unpack(s, b->main))
		return true;
	usl_stat(s, USL_BARN_GET_FAIL);
	/* After a sweep found the class running on its CPUs' own sheaves and
	 * flushed them, refills start small and double each time (jemalloc's
	 * adaptive tcache fill): a class in light use holds a few objects per CPU,
	 * not a sheaf of them, and a busy one is back to full sheaves after
	 * three refills. */
	usl_barn_dry_refill(s);
	unsigned int want = b->main->capacity;
	struct usl_barn *barn = usl_get_barn(s);
	unsigned int shift = __atomic_load_n(&barn->refill_shift, __ATOMIC_RELAXED);
	if (usl_unlikely(shift)) {
		want = want >> shift ? want >> shift : 1;
		__atomic_store_n(&barn->refill_shift, shift - 1, __ATOMIC_RELAXED);
	}
	return usl_sheaf_refill(s, b->main, want, gfp) == 0;
}

/* Make room in b->main: the spare if it has room, else an empty sheaf for main,
 * the full one kept as the spare, or the full spare put in the barn (the
 * kernel flushes the spare when the barn holds ten; here the barn packs it,
 * docs/ARCHITECTURE.md, "Sheaves and barns"). */
static bool replace_full_main(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	if (b->main && b->main->size < b->main->capacity)
		return true;
	if (usl_is_slab(s))
		return usl_array_make_room(s, b, gfp);
	if (b->spare && b->spare->size < b->spare->capacity) {
		swap_sheaves(b);
		return true;
	}
	if (b->main && !b->spare) {             /* full: keep it as the spare */
		b->spare = b->main;
		b->main = NULL;
		usl_barn_pack_prefetch(s, b->spare);
	} else if (b->main) {
		/* Both full: the spare goes to the barn and the main becomes the
		 * spare. If the barn packs the sheaf it gets, the lines it writes
		 * were fetched when that sheaf became the spare, a sheaf of frees
		 * ago; start the new spare's now. */
		struct slab_sheaf *t = b->spare;
		b->spare = b->main;
		b->main = t;
		usl_barn_pack_prefetch(s, b->spare);
	}
	/* One barn visit: the full main (if any) for an empty sheaf. */
	b->main = usl_barn_visit(s, b->main, 0);
	if (!b->main)
		b->main = usl_sheaf_new(s, s->sheaf_capacity, gfp);
	return b->main != NULL;
}

/* ===========================================================================
 * Single objects
 */

void usl_report_pop_refused(struct kmem_cache *s, const void *obj, const char *fn)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p is not free any more (freed twice, freed while free on its slab, "
	           "or written after its free); not handed out again", fn, s->name, obj);
}

/* A popped object that does not carry its free marker: reported and kept out
 * of use (someone may hold it). */
static bool pop_ok(struct kmem_cache *s, void *obj)
{
	if (!usl_opt.harden || usl_marker_pop(s, obj))
		return true;
	usl_report_pop_refused(s, obj, "kmem_cache_alloc");
	return false;
}

/* The pop section failed (empty main, marked slot, locked mode, no CPU). */
void *usl_sheaf_alloc(struct kmem_cache *s, gfp_t gfp)
{
	struct usl_pcs b;
	void *obj;
	bool popped;

again:
	if (!usl_rseq_mode) {
		/* Locked mode's fast path: pop under the slot's sheaf lock. */
		struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
		usl_spin_lock_leaf(&c->sheaf_lock);
		obj = c->main_size ? c->main->objects[--c->main_size] : NULL;
		usl_spin_unlock_leaf(&c->sheaf_lock);
		if (obj) {
			if (!pop_ok(s, obj))
				goto again;
			usl_stat(s, USL_ALLOC_PCS);
			return obj;
		}
	}
	if (!usl_pcs_take(s, &b))
		return usl_engine_alloc(s, gfp);
	if ((popped = replace_empty_main(s, &b, gfp))) {
		obj = b.main->objects[--b.main->size];
	} else {
		/* No memory for a whole sheaf: try for one object. */
		obj = usl_engine_alloc(s, gfp);
	}
	usl_pcs_put(s, &b);
	__atomic_load_n(&usl_percpu_slow_tick, __ATOMIC_ACQUIRE)();
	if (popped && !pop_ok(s, obj))
		goto again;
	if (popped)
		usl_stat(s, USL_ALLOC_PCS);
	return obj;
}

/* The push section failed with USL_RS_MARKED (full main, marked slot, locked
 * mode, no CPU). x is a checked object of s. */
void usl_sheaf_free(struct kmem_cache *s, void *x)
{
	struct usl_pcs b;

	if (!usl_rseq_mode) {
		struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
		int r = USL_RS_MARKED;
		usl_spin_lock_leaf(&c->sheaf_lock);
		struct slab_sheaf *m = c->main;
		if (c->main_size < m->capacity) {
			if (c->main_size && m->objects[c->main_size - 1] == x) {
				r = USL_RS_OTHER;
			} else {
				m->objects[c->main_size++] = x;
				r = USL_RS_OK;
			}
		}
		usl_spin_unlock_leaf(&c->sheaf_lock);
		if (r == USL_RS_OK) {
			usl_stat(s, USL_FREE_PCS);
			return;
		}
		if (r == USL_RS_OTHER) {
			usl_report_double_free(s, x, "kmem_cache_free");
			return;
		}
	}
	if (!usl_pcs_take(s, &b)) {
		usl_engine_free(s, usl_virt_to_slab(x), x);
		return;
	}
	if (b.main && b.main->size && b.main->objects[b.main->size - 1] == x) {
		usl_pcs_put(s, &b);
		usl_report_double_free(s, x, "kmem_cache_free");
		return;
	}
	if (replace_full_main(s, &b, GFP_NOWAIT)) {
		b.main->objects[b.main->size++] = x;
		usl_stat(s, USL_FREE_PCS);
	} else
		usl_engine_free(s, usl_virt_to_slab(x), x);   /* no memory for a sheaf: straight to the slab */
	usl_pcs_put(s, &b);
	__atomic_load_n(&usl_percpu_slow_tick, __ATOMIC_ACQUIRE)();
}

/* ===========================================================================
 * Bulk: runs of pointers copied between the array and the sheaves
 */

/* A section copies at most this many pointers, so a restart repeats little. */
#define SHEAF_SECTION_MAX 64

/* Move up to n pointers between p[] and this CPU's main sheaf: pop (push false)
 * from its top into p[], or push p[] onto it. Returns how many moved. rseq:
 * sections of at most SHEAF_SECTION_MAX; locked mode: under the slot's
 * sheaf_lock. */
static inline __attribute__((always_inline)) size_t move_bulk_fast(struct kmem_cache *s, size_t n, void **p,
                                                                  bool push)
{
	if (usl_rseq_mode) {
		int st;
		size_t done = 0, k;
		do {
			size_t want = n - done < SHEAF_SECTION_MAX ? n - done : SHEAF_SECTION_MAX;
			k = push ? usl_rseq_sheaf_push_bulk(s, want, p + done, &st)
			         : usl_rseq_sheaf_pop_bulk(s, want, p + done, &st);
			done += k;
		} while (k == SHEAF_SECTION_MAX && done < n);
		usl_stat_add(s, push ? USL_FREE_PCS : USL_ALLOC_PCS, done);
		return done;
	}
	struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
	usl_spin_lock_leaf(&c->sheaf_lock);
	struct slab_sheaf *m = c->main;
	size_t k = push ? m->capacity - c->main_size : c->main_size;
	if (k > n)
		k = n;
	if (k && push) {      /* never a store to usl_empty_sheaf, which all slots share */
		memcpy(&m->objects[c->main_size], p, k * sizeof(void *));
		c->main_size += k;
	} else if (k) {
		c->main_size -= k;
		memcpy(p, &m->objects[c->main_size], k * sizeof(void *));
	}
	usl_spin_unlock_leaf(&c->sheaf_lock);
	usl_stat_add(s, push ? USL_FREE_PCS : USL_ALLOC_PCS, k);
	return k;
}

static __attribute__((noinline, cold)) void bulk_pop_refused(struct kmem_cache *s, const void *obj)
{
	usl_report_pop_refused(s, obj, "kmem_cache_alloc_bulk");
}

/* All or nothing, like kmem_cache_alloc_bulk: nr, or 0 with nothing kept. */
int usl_sheaf_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	struct usl_pcs b;
	size_t i = move_bulk_fast(s, nr, p, false);

	if (i < nr && usl_pcs_take(s, &b)) {
		/* Whole sheaves first (main, spare, the barn's full ones) ... */
		while (i < nr) {
			if (!(b.main && b.main->size) && !(b.spare && b.spare->size) && !usl_barn_has_full(s))
				break;
			if (!replace_empty_main(s, &b, gfp))
				break;
			size_t k = nr - i < b.main->size ? nr - i : b.main->size;
			b.main->size -= (uint32_t)k;
			memcpy(p + i, &b.main->objects[b.main->size], k * sizeof(void *));
			usl_stat_add(s, USL_ALLOC_PCS, k);
			i += k;
		}
		usl_pcs_put(s, &b);
	}
	/* What the sheaves gave leaves them as a pop does: with its marker,
	 * which is cleared (a copy a second free left, whose marker the first
	 * copy took, is reported and left out: the slabs make up for it). */
	if (usl_opt.harden)
		i = usl_markers_pop(s, p, i, bulk_pop_refused);
	/* ... then the rest from slabs, in one bulk call, their free pointers
	 * cleared as the sheaves' markers were. */
	if (i < nr) {
		if (!usl_engine_alloc_bulk(s, gfp, nr - i, p + i)) {
			if (usl_opt.harden)              /* back as freed objects go */
				for (size_t j = 0; j < i; j++)
					usl_marker_set(s, p[j]);
			usl_sheaf_free_bulk(s, i, p);
			return 0;
		}
		if (usl_opt.harden)
			for (size_t j = i; j < nr; j++)
				*(uintptr_t *)((char *)p[j] + s->offset) = 0;
	}
	return (int)nr;
}

/* p[0..nr) are checked objects of s (no NULLs). */
void usl_sheaf_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	struct usl_pcs b;
	size_t i = move_bulk_fast(s, nr, p, true);

	if (i == nr)
		return;
	if (!usl_pcs_take(s, &b)) {
		usl_engine_free_bulk(s, nr - i, p + i);
		return;
	}
	while (i < nr) {
		if (!replace_full_main(s, &b, GFP_NOWAIT)) {
			usl_engine_free_bulk(s, nr - i, p + i);
			break;
		}
		size_t room = b.main->capacity - b.main->size;
		size_t k = nr - i < room ? nr - i : room;
		memcpy(&b.main->objects[b.main->size], p + i, k * sizeof(void *));
		b.main->size += (uint32_t)k;
		usl_stat_add(s, USL_FREE_PCS, k);
		i += k;
	}
	usl_pcs_put(s, &b);
}
