/* pcs.c - a slot's sheaves (the kernel's per-CPU sheaves): taken private by a
 * slow path and put back, in both per-CPU modes, and the slow paths behind
 * the sheaf sections: an empty main refilled or replaced, a full main
 * replaced, and bulk copies between an array and the sheaves; with delayed
 * reuse each keeps the main a queue whose last frees wait behind the rest
 * (docs/ARCHITECTURE.md, "Hardening"). Locks: a slot's
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
		unsigned long word;
		for (;;) {
			int r = usl_rseq_sheaf_take(s, &usl_empty_sheaf, &b->main, &word);
			if (r == USL_RS_OK)
				break;
			if (r == USL_RS_NOCPU)
				return false;
			sched_yield();     /* a flusher holds the slot */
		}
		if (b->main != &usl_empty_sheaf)
			usl_sheaf_detached(b->main, (uint16_t)word, (uint16_t)(word >> 16));
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

/* Delayed reuse: a sheaf that found its place in the slot taken holds this
 * CPU's frees, the last ones too, which their slabs would hand out again in
 * any order (a full one goes to the barn, where it waits behind others): its
 * objects onto the slot's main, behind what waits there, as far as it has
 * room; the rest filled up from slabs, in front of them, for the barn. */
static void hand_over(struct kmem_cache *s, struct kmem_cache_cpu *lc, struct slab_sheaf *sh)
{
	unsigned int done = 0;
	if (!s->reuse_delay || !sh->size || sh->size == sh->capacity)
		return;
	if (lc) {
		usl_spin_lock_leaf(&lc->sheaf_lock);
		if (lc->main != &usl_empty_sheaf) {
			unsigned int room = (unsigned int)lc->main_cap - lc->main_size;
			done = room < sh->size ? room : sh->size;
			for (unsigned int i = 0; i < done; i++)
				lc->main->objects[usl_slot_place(lc, lc->main_size + i)] = sh->objects[i];
			lc->main_size += done;
		}
		usl_spin_unlock_leaf(&lc->sheaf_lock);
	} else {
		while (done < sh->size) {
			int st;
			unsigned int want = sh->size - done < 64 ? sh->size - done : 64;
			unsigned long k = usl_rseq_sheaf_push_bulk(s, want, sh->objects + done, &st);
			if (!k)
				break;
			done += (unsigned int)k;
		}
	}
	memmove(sh->objects, sh->objects + done, (sh->size - done) * sizeof(void *));
	sh->size -= done;
	unsigned int late = sh->size;
	if (!late || usl_sheaf_refill(s, sh, sh->capacity, GFP_NOWAIT) != 0)
		return;                     /* (no memory: their slabs after all) */
	usl_sheaf_rotate(sh->objects, sh->size, late);   /* the new ones first */
}

void usl_pcs_put(struct kmem_cache *s, struct usl_pcs *b)
{
	bool main_done = !b->main, spare_done = !b->spare;

	if (b->lc) {
		struct kmem_cache_cpu *c = b->lc;
		usl_spin_lock_leaf(&c->sheaf_lock);
		usl_assert(!b->main || b->main->size <= b->main->capacity);
		if (!main_done && c->main == &usl_empty_sheaf) {
			c->main_size = (uint16_t)b->main->size;
			c->main_lo = 0;
			c->main_cap = (uint16_t)b->main->capacity;
			c->main_delay = (uint16_t)s->reuse_delay;
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
	if (!main_done) {
		hand_over(s, b->lc, b->main);
		usl_sheaf_give_back(s, b->main);
	}
	if (!spare_done) {
		hand_over(s, b->lc, b->spare);
		usl_sheaf_give_back(s, b->spare);
	}
}

static inline void swap_sheaves(struct usl_pcs *b)
{
	struct slab_sheaf *t = b->main;
	b->main = b->spare;
	b->spare = t;
}

/* A refill from slabs of up to room objects: the barn's dry-refill count
 * moves on, and after a sweep's flush refills start small (refill_shift). */
static unsigned int refill_size(struct kmem_cache *s, unsigned int room)
{
	usl_barn_dry_refill(s);
	struct usl_barn *barn = usl_get_barn(s);
	unsigned int shift = __atomic_load_n(&barn->refill_shift, __ATOMIC_RELAXED);
	if (usl_unlikely(shift)) {
		room = room >> shift ? room >> shift : 1;
		__atomic_store_n(&barn->refill_shift, shift - 1, __ATOMIC_RELAXED);
	}
	return room;
}

/* Make b->main (empty or NULL) non-empty: the spare, a full sheaf from the
 * barn, a packed one unpacked, or a refill from slabs (filling the empty
 * main, the spare, a barn empty, or a new sheaf). False when out of memory. */
static bool fill_empty_main(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
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
	return usl_sheaf_refill(s, b->main, refill_size(s, b->main->capacity), gfp) == 0;
}

/* Delayed reuse (s->reuse_delay > 0): b->main holds no more than delay
 * objects, the last freed on this CPU, which a pop may not take yet. The
 * objects found go in front of them, main = [found, then them], copied from
 * the front of the spare, of a full barn sheaf (which becomes the spare), of
 * a packed one unpacked into the spare, or refilled from slabs. What does not
 * fit stays in the spare, to come out after them: an object may wait longer
 * than in a queue, never less. So an object freed here is handed out only
 * after every object queued ahead of it when it was freed, at least delay of
 * them. False when out of memory (main keeps them). */
static bool fill_behind(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp, unsigned int limit)
{
	struct slab_sheaf *m = b->main;
	unsigned int late = m->size, front = 0, d = s->reuse_delay;
	usl_assert(late <= d && d <= USL_REUSE_DELAY_MAX && d < limit && limit <= m->capacity);
	struct usl_barn *barn = usl_get_barn(s);
	/* Until more than the delay wait (a push then has that many ahead of it). */
	for (int tries = 0; front + late <= d && tries < 4; tries++) {
		struct slab_sheaf *src = NULL;
		if (b->spare && b->spare->size) {
			src = b->spare;
		} else if (__atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED)) {
			b->spare = usl_barn_visit(s, b->spare, 1);   /* our empty spare for a full one */
			src = b->spare;
		} else if (usl_barn_has_full(s)) {
			/* The barn's packed sheaves, into the empty spare. */
			if (!b->spare && !(b->spare = usl_barn_get(s, false)))
				b->spare = usl_sheaf_new(s, s->sheaf_capacity, GFP_NOWAIT);
			if (b->spare && usl_barn_unpack(s, b->spare))
				src = b->spare;
		}
		if (!src)
			break;
		unsigned int room = limit - late - front, k = src->size < room ? src->size : room;
		memmove(m->objects + front + k, m->objects + front, late * sizeof(void *));
		memcpy(m->objects + front, src->objects, k * sizeof(void *));
		memmove(src->objects, src->objects + k, (src->size - k) * sizeof(void *));
		src->size -= k;
		front += k;
		m->size = front + late;
	}
	if (front + late > d)
		return true;
	usl_stat(s, USL_BARN_GET_FAIL);
	/* From slabs, as fill_empty_main refills (small after a sweep's flush,
	 * but enough for the delay). */
	unsigned int room = limit - late - front, want = refill_size(s, room);
	if (front + want + late <= d)
		want = d + 1 - late - front < room ? d + 1 - late - front : room;
	void *held[USL_REUSE_DELAY_MAX];
	memcpy(held, m->objects + front, late * sizeof(void *));
	m->size = front;
	bool ok = usl_sheaf_refill(s, m, front + want, gfp) == 0;
	if (!ok)
		m->size = front;
	memcpy(m->objects + m->size, held, late * sizeof(void *));
	m->size += late;
	return ok || front;
}

/* Make b->main hold an object a pop may take: more than s->reuse_delay. */
static bool replace_empty_main(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	if (b->main && b->main->size > s->reuse_delay)
		return true;
	if (usl_is_slab(s))
		return usl_array_refill(s, b, gfp);
	if (s->reuse_delay) {
		/* (No main: another thread of this CPU has it; an empty one of
		 * our own, filled the same way.) */
		if (!b->main && !(b->main = usl_barn_get(s, false)) &&
		    !(b->main = usl_sheaf_new(s, s->sheaf_capacity, gfp)))
			return false;
		return fill_behind(s, b, gfp, b->main->capacity);
	}
	return fill_empty_main(s, b, gfp);
}

/* Delayed reuse: a main that takes frees holds more than the delay ahead of
 * them (fill_behind): up to that, the spare's oldest objects go into it,
 * behind its own, with room left for the free. */
static void hold_ahead(struct kmem_cache *s, struct usl_pcs *b)
{
	struct slab_sheaf *m = b->main, *sp = b->spare;
	unsigned int d = s->reuse_delay;
	if (!d || !m || !sp || !sp->size || m->size > d)
		return;
	unsigned int k = d + 1 - m->size;
	if (k > sp->size)
		k = sp->size;
	if (k > m->capacity - 1 - m->size)
		k = m->capacity - 1 - m->size;
	memcpy(m->objects + m->size, sp->objects, k * sizeof(void *));
	memmove(sp->objects, sp->objects + k, (sp->size - k) * sizeof(void *));
	sp->size -= k;
	m->size += k;
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
		hold_ahead(s, b);
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
	hold_ahead(s, b);
	return b->main != NULL;
}

/* The same for a free: room for it, and with delayed reuse more than the
 * delay ahead of it (what hold_ahead could not give, fill_behind finds: the
 * main's few go behind it, which only delays them more). */
static bool make_room(struct kmem_cache *s, struct usl_pcs *b, gfp_t gfp)
{
	if (!replace_full_main(s, b, gfp))
		return false;
	unsigned int d = s->reuse_delay;
	if (d && b->main->size <= d && !usl_is_slab(s))
		fill_behind(s, b, gfp, d + 1);
	return true;
}

/* ===========================================================================
 * Single objects
 */

void usl_report_pop_refused(struct kmem_cache *s, const void *obj, const char *fn)
{
	usl_refuse_pop(fn, s->name, obj, "freed twice, freed while free on its slab, or written after its free");
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

/* The object a pop takes from a private sheaf: the newest, or with delayed
 * reuse the oldest. */
static void *sheaf_take_one(struct kmem_cache *s, struct slab_sheaf *m)
{
	if (!s->reuse_delay)
		return m->objects[--m->size];
	void *obj = m->objects[0];
	memmove(m->objects, m->objects + 1, --m->size * sizeof(void *));
	return obj;
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
		if (!c->main_delay) {
			obj = c->main_size ? c->main->objects[--c->main_size] : NULL;
		} else if (c->main_size > c->main_delay) {
			obj = c->main->objects[c->main_lo];
			c->main_lo = (uint16_t)usl_slot_place(c, 1);
			c->main_size--;
		} else {
			obj = NULL;
		}
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
		obj = sheaf_take_one(s, b.main);
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
			unsigned int at = usl_slot_place(c, c->main_size);
			if (c->main_size && m->objects[at ? at - 1 : m->capacity - 1] == x) {
				r = USL_RS_OTHER;
			} else {
				m->objects[at] = x;
				c->main_size++;
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
	if (make_room(s, &b, GFP_NOWAIT)) {
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
static USL_FAST_PATH size_t move_bulk_fast(struct kmem_cache *s, size_t n, void **p,
                                           bool push)
{
	if (usl_rseq_mode) {
		int st;
		size_t done = 0, k;
		do {
			size_t want = n - done < SHEAF_SECTION_MAX ? n - done : SHEAF_SECTION_MAX;
			k = push ? usl_rseq_sheaf_push_bulk(s, want, p + done, &st)
			    : s->reuse_delay ? usl_rseq_sheaf_pop_bulk_oldest(s, want, p + done, &st)
			                     : usl_rseq_sheaf_pop_bulk(s, want, p + done, &st);
			done += k;
		} while (k && done < n);   /* (a push or pop stops at the ring's end) */
		usl_stat_add(s, push ? USL_FREE_PCS : USL_ALLOC_PCS, done);
		return done;
	}
	struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
	usl_spin_lock_leaf(&c->sheaf_lock);
	struct slab_sheaf *m = c->main;
	unsigned int waiting = c->main_size;
	size_t k = push ? m->capacity - c->main_size : waiting > c->main_delay ? waiting - c->main_delay : 0;
	if (k > n)
		k = n;
	if (k && push) {      /* never a store to usl_empty_sheaf, which all slots share */
		for (size_t i = 0; i < k; i++)
			m->objects[usl_slot_place(c, c->main_size + (unsigned int)i)] = p[i];
		c->main_size += k;
	} else if (k && c->main_delay) {
		for (size_t i = 0; i < k; i++)
			p[i] = m->objects[usl_slot_place(c, (unsigned int)i)];
		c->main_lo = (uint16_t)usl_slot_place(c, (unsigned int)k);
		c->main_size -= k;
	} else if (k) {
		c->main_size -= k;
		memcpy(p, &m->objects[c->main_size], k * sizeof(void *));
	}
	usl_spin_unlock_leaf(&c->sheaf_lock);
	usl_stat_add(s, push ? USL_FREE_PCS : USL_ALLOC_PCS, k);
	return k;
}

static USL_SLOW_PATH void bulk_pop_refused(struct kmem_cache *s, const void *obj)
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
		unsigned int d = s->reuse_delay;
		while (i < nr) {
			if (!(b.main && b.main->size > d) && !(b.spare && b.spare->size) && !usl_barn_has_full(s))
				break;
			if (!replace_empty_main(s, &b, gfp) || b.main->size <= d)
				break;
			size_t k = nr - i < b.main->size - d ? nr - i : b.main->size - d;
			if (d) {          /* the oldest, as pops take them */
				memcpy(p + i, b.main->objects, k * sizeof(void *));
				memmove(b.main->objects, b.main->objects + k, (b.main->size - k) * sizeof(void *));
				b.main->size -= (uint32_t)k;
			} else {
				b.main->size -= (uint32_t)k;
				memcpy(p + i, &b.main->objects[b.main->size], k * sizeof(void *));
			}
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
		if (!make_room(s, &b, GFP_NOWAIT)) {
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
