/* sheaf.c - per-CPU sheaves and per-node barns (reference section 3): the slow
 * paths behind the sheaf sections, bulk through sheaves, flushing, prefilled
 * sheaves. Locks: a slot's sheaf_lock (locked mode, never held across a call out),
 * the barn lock (innermost here); refills and flushes call the SLUB bulk paths
 * with no lock of this file held. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "../internal.h"
#include "rseq_x86.h"

struct slab_sheaf usl_empty_sheaf;

/* ===========================================================================
 * Sheaf structures: from one internal cache per size class (a sheaf fills its
 * class exactly, as the kernel rounds sheaves up to a kmalloc bucket). A sheaf
 * larger than the cache's capacity (a prefilled "oversize" sheaf) is a block of
 * its own.
 */

static const unsigned int sheaf_classes[] = { 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192,
                                              16384, 32768, 65536, 131072, 262144, 524288 };
#define NR_SHEAF_CLASSES (sizeof(sheaf_classes) / sizeof(sheaf_classes[0]))
#define SHEAF_HEADER ((unsigned int)offsetof(struct slab_sheaf, objects))
#define SHEAF_MAX_CAPACITY ((524288u - SHEAF_HEADER) / 8u)

static pthread_mutex_t sheaf_classes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kmem_cache *sheaf_class_cache[NR_SHEAF_CLASSES];

static inline unsigned int sheaf_bytes(unsigned int capacity) { return SHEAF_HEADER + 8u * capacity; }

/* A one-off sheaf: larger than the cache's capacity, or of a cache without
 * sheaves (prefilled sheaves work on every cache). */
static bool sheaf_is_oversize(struct kmem_cache *s, struct slab_sheaf *sh)
{
	return !s->sheaf_capacity || sh->capacity != s->sheaf_capacity;
}

static struct slab_sheaf *sheaf_new(struct kmem_cache *s, unsigned int capacity, gfp_t gfp)
{
	struct slab_sheaf *sh;

	if (capacity == s->sheaf_capacity && s->sheaf_cache)
		sh = kmem_cache_alloc(s->sheaf_cache, gfp | __GFP_NOWARN);
	else
		sh = usl_meta_alloc(sheaf_bytes(capacity));
	if (!sh)
		return NULL;
	usl_list_init(&sh->barn_list);
	sh->size = 0;
	sh->capacity = capacity;
	sh->cache = s;
	return sh;
}

static void sheaf_free(struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (sheaf_is_oversize(s, sh))
		usl_meta_free(sh);
	else
		kmem_cache_free(s->sheaf_cache, sh);
}

/* ===========================================================================
 * Refill and flush: the bulk paths of the cpu-slab layer (detached freelists).
 */

/* Fill sh up to want objects. All or nothing: 0, or -ENOMEM with sh unchanged. */
static int sheaf_refill(struct kmem_cache *s, struct slab_sheaf *sh, unsigned int want, gfp_t gfp)
{
	if (sh->size >= want)
		return 0;
	if (!usl_slub_alloc_bulk(s, gfp | __GFP_NOWARN, want - sh->size, &sh->objects[sh->size]))
		return -ENOMEM;
	sh->size = want;
	return 0;
}

/* Give every object of sh back to its slab (detached freelists: objects of one
 * slab within the look-ahead become one chain). The pointers were checked when
 * they were pushed. */
static void sheaf_flush(struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (sh->size)
		usl_slub_free_bulk(s, sh->size, sh->objects);
	sh->size = 0;
}

/* ===========================================================================
 * The barn: full and empty sheaves of one node, under barn->lock.
 *
 * Limits. Empty sheaves: barn_max_empty (the kernel's 10), or as many as the barn
 * held full sheaves since the last decay check; more are freed. Full sheaves: barn_max_full (the kernel's 10) is the level the barn returns to,
 * not a wall. A burst of frees may park more full sheaves; the surplus that stays
 * unused for a whole decay interval (USLAB_DECAY_MS, the page provider's) is
 * flushed to slabs: the barn tracks the fewest full sheaves it held since the
 * last check (a low-water mark), and sheaves above max_full that were never taken
 * in that interval go back. With USLAB_DECAY_MS=0 the limit is exact. Why: with
 * the kernel's wall every free beyond ten sheaves goes to a slab (a cmpxchg16b
 * and a cache miss per object), which made random frees of 10k objects 3x
 * mimalloc; with the decaying surplus they are near it (numbers in the note of
 * issue 4). kmem_cache_shrink and uslab_release_free_memory flush it at once.
 */

static struct usl_barn *get_barn(struct kmem_cache *s)
{
	return &s->node[0]->barn;
}

static void barn_set(unsigned int *counter, unsigned int v)
{
	__atomic_store_n(counter, v, __ATOMIC_RELAXED);   /* peeked unlocked */
}

/* Under barn->lock: pop a sheaf. */
static struct slab_sheaf *barn_take_locked(struct usl_barn *barn, bool full)
{
	struct slab_sheaf **top = full ? &barn->full : &barn->empty;
	struct slab_sheaf *sh = *top;

	if (!sh)
		return NULL;
	*top = sh->next;
	/* The stacks live long enough to leave the cache. The next visit will
	 * take the new top: start its misses now (header; a full one's top
	 * objects, where the pops begin). */
	if (sh->next) {
		__builtin_prefetch(sh->next, 1);
		if (full)
			__builtin_prefetch(&sh->next->objects[sh->next->capacity - 1], 0);
	}
	if (full) {
		barn_set(&barn->nr_full, barn->nr_full - 1);
		if (barn->nr_full < barn->low_full)
			barn->low_full = barn->nr_full;
	} else {
		barn_set(&barn->nr_empty, barn->nr_empty - 1);
	}
	return sh;
}

/* Under barn->lock: move up to n full sheaves to the private list *out. */
static void barn_take_full_locked(struct usl_barn *barn, unsigned int n, struct usl_list *out)
{
	for (; n && barn->full; n--) {
		struct slab_sheaf *sh = barn->full;
		barn->full = sh->next;
		barn_set(&barn->nr_full, barn->nr_full - 1);
		usl_list_add_tail(&sh->barn_list, out);
	}
}

/* Under barn->lock: the full sheaves above max_full that stayed unused for a
 * decay interval, moved to *out. The count is what the low-
 * water mark says; which sheaves go does not matter (a stack keeps a push or pop
 * to the one sheaf it moves), so they are taken from the top. max: how many to
 * move at most (the rest at the next check). */
static void barn_decay_due_locked(struct kmem_cache *s, struct usl_barn *barn, uint64_t now, unsigned int max,
                                  struct usl_list *out)
{
	if (now < barn->last_decay + usl_opt.decay_ms)   /* (last_decay may be after now) */
		return;
	unsigned int low = barn->low_full < barn->nr_full ? barn->low_full : barn->nr_full;
	unsigned int excess = low > s->barn_max_full ? low - s->barn_max_full : 0;
	if (excess > max)
		excess = max;
	else
		barn->last_decay = now;
	barn_take_full_locked(barn, excess, out);
	barn->low_full = barn->high_full = barn->nr_full;
}

static void barn_decay_locked(struct kmem_cache *s, struct usl_barn *barn, struct usl_list *out)
{
	if (usl_opt.decay_ms == 0) {
		barn_take_full_locked(barn, barn->nr_full - s->barn_max_full, out);
		barn->low_full = barn->high_full = barn->nr_full;
		return;
	}
	if (++barn->puts % 16)
		return;          /* read the clock every 16 puts above the level */
	barn_decay_due_locked(s, barn, usl_now_ms(), 64, out);   /* bounded: a put pays for it */
}

static void flush_list(struct kmem_cache *s, struct usl_list *list);

/* One barn visit: give `give` (full or empty, may be NULL) and take a sheaf of
 * the kind `want` says (1 full, 0 empty, -1 none). Returns what was taken, or
 * NULL. An empty sheaf the barn has no room for is freed here; decayed full
 * sheaves are flushed here, after the lock is dropped. */
static struct slab_sheaf *barn_visit(struct kmem_cache *s, struct slab_sheaf *give, int want)
{
	struct usl_barn *barn = get_barn(s);
	struct slab_sheaf *got = NULL, *drop = NULL;
	struct usl_list decayed;

	usl_list_init(&decayed);
	if (!give && want >= 0 &&
	    !__atomic_load_n(want ? &barn->nr_full : &barn->nr_empty, __ATOMIC_RELAXED))
		return NULL;        /* peeked unlocked: a miss costs only a refill */
	usl_spin_lock(&barn->lock);
	barn->visits++;
	if (want >= 0)
		got = barn_take_locked(barn, want == 1);
	if (give && give->size) {
		give->next = barn->full;
		barn->full = give;
		barn_set(&barn->nr_full, barn->nr_full + 1);
		if (barn->nr_full > barn->high_full)
			barn->high_full = barn->nr_full;
		if (barn->nr_full > s->barn_max_full)
			barn_decay_locked(s, barn, &decayed);
	} else if (give) {
		/* Empties: the kernel's limit, or as many as the barn held full
		 * sheaves lately (a burst of frees will want them back). */
		unsigned int limit = s->barn_max_empty > barn->high_full ? s->barn_max_empty : barn->high_full;
		if (barn->nr_empty < limit) {
			give->next = barn->empty;
			barn->empty = give;
			barn_set(&barn->nr_empty, barn->nr_empty + 1);
		} else {
			drop = give;
		}
	}
	usl_spin_unlock(&barn->lock);
	if (drop)
		sheaf_free(s, drop);
	if (!usl_list_empty(&decayed))
		flush_list(s, &decayed);
	return got;
}

static struct slab_sheaf *barn_get(struct kmem_cache *s, bool full)
{
	return barn_visit(s, NULL, full ? 1 : 0);
}

/* Flush every sheaf of a private list to slabs and keep or free the empties. */
static void flush_list(struct kmem_cache *s, struct usl_list *list)
{
	while (!usl_list_empty(list)) {
		struct slab_sheaf *sh = usl_container_of(list->next, struct slab_sheaf, barn_list);
		usl_list_del(&sh->barn_list);
		sheaf_flush(s, sh);
		barn_visit(s, sh, -1);
	}
}

/* A sheaf we cannot keep (an install lost a race, a returned prefilled sheaf):
 * full ones to the barn, the rest flushed to slabs. */
static void give_back(struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (!sh || sh == &usl_empty_sheaf)
		return;
	if (sh->size != sh->capacity)
		sheaf_flush(s, sh);
	barn_visit(s, sh, -1);
}

/* ===========================================================================
 * The slot's sheaves, taken private by a slow path: one take, one put, in both
 * modes (rseq: a section for {main_size, main}, one 16-byte store, and one for
 * the spare; locked: under the slot's sheaf_lock). A taken main gets its count
 * back from main_size; a put one gives it to main_size.
 */
struct pcs {
	struct kmem_cache_cpu *lc;   /* locked mode: the slot */
	struct slab_sheaf *main, *spare;
};

/* A slot's main taken out by a holder of its sheaf_lock (locked mode) or its
 * flush mark: the sheaf gets its count back from main_size, and the slot is
 * left {0, usl_empty_sheaf}. */
static struct slab_sheaf *slot_main_detach(struct kmem_cache_cpu *c)
{
	struct slab_sheaf *m = c->main;
	if (m != &usl_empty_sheaf)
		m->size = (uint32_t)c->main_size;
	c->main_size = 0;
	c->main = &usl_empty_sheaf;
	return m;
}

/* False: this thread has no slot (rseq not registered); use the cpu-slab paths. */
static bool pcs_take(struct kmem_cache *s, struct pcs *b)
{
	b->lc = NULL;
	if (!usl_rseq_mode) {
		struct kmem_cache_cpu *c = usl_slub_hint_refresh(s);
		usl_spin_lock(&c->sheaf_lock);
		b->main = slot_main_detach(c);
		b->spare = c->spare;
		c->spare = NULL;
		usl_spin_unlock(&c->sheaf_lock);
		b->lc = c;
	} else {
		unsigned long size;
		for (;;) {
			int r = usl_rseq_sheaf_take(s, &b->main, &size);
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

static void pcs_put(struct kmem_cache *s, struct pcs *b)
{
	bool main_done = !b->main, spare_done = !b->spare;

	if (b->lc) {
		struct kmem_cache_cpu *c = b->lc;
		usl_spin_lock(&c->sheaf_lock);
		if (!main_done && c->main == &usl_empty_sheaf) {
			c->main_size = b->main->size;
			c->main = b->main;
			main_done = true;
		}
		if (!spare_done && !c->spare) {
			c->spare = b->spare;
			spare_done = true;
		}
		usl_spin_unlock(&c->sheaf_lock);
	} else {
		int r;   /* each waits out a flusher's mark; OTHER: the place is taken */
		if (!main_done) {
			while ((r = usl_rseq_sheaf_install(s, b->main, b->main->size)) == USL_RS_MARKED)
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
		give_back(s, b->main);
	if (!spare_done)
		give_back(s, b->spare);
}

static inline void swap_sheaves(struct pcs *b)
{
	struct slab_sheaf *t = b->main;
	b->main = b->spare;
	b->spare = t;
}

/* Make b->main non-empty: the spare, a full sheaf from the barn, or a refill from
 * slabs (filling the empty main, the spare, a barn empty, or a new sheaf).
 * False when out of memory. */
static bool replace_empty_main(struct kmem_cache *s, struct pcs *b, gfp_t gfp)
{
	if (b->main && b->main->size)
		return true;
	if (b->spare && b->spare->size) {
		swap_sheaves(b);
		return true;
	}
	if (__atomic_load_n(&get_barn(s)->nr_full, __ATOMIC_RELAXED)) {
		/* One barn visit: our empty main (unless it can be the spare) for a
		 * full one. */
		struct slab_sheaf *give = b->main && b->spare ? b->main : NULL;
		struct slab_sheaf *full = barn_visit(s, give, 1);
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
	if (!b->main) {
		if (b->spare && !b->spare->size) {   /* empty: fill it */
			b->main = b->spare;
			b->spare = NULL;
		} else if (!(b->main = barn_get(s, false)) &&
		           !(b->main = sheaf_new(s, s->sheaf_capacity, gfp))) {
			return false;
		}
	}
	/* After a sweep found the class running on its CPUs' own sheaves and
	 * flushed them, refills start small and double each time (jemalloc's
	 * adaptive tcache fill): a class in light use holds a few objects per CPU,
	 * not a sheaf of them, and a busy one is back to full sheaves after
	 * three refills. */
	unsigned int want = b->main->capacity;
	struct usl_barn *barn = get_barn(s);
	unsigned int shift = __atomic_load_n(&barn->refill_shift, __ATOMIC_RELAXED);
	if (usl_unlikely(shift)) {
		want = want >> shift ? want >> shift : 1;
		__atomic_store_n(&barn->refill_shift, shift - 1, __ATOMIC_RELAXED);
	}
	return sheaf_refill(s, b->main, want, gfp) == 0;
}

/* Make room in b->main: the spare if it has room, else an empty sheaf for main,
 * the full one kept as the spare or put in the barn (the kernel flushes the
 * spare when the barn holds ten; here the barn's surplus decays instead). */
static bool replace_full_main(struct kmem_cache *s, struct pcs *b, gfp_t gfp)
{
	if (b->main && b->main->size < b->main->capacity)
		return true;
	if (b->spare && b->spare->size < b->spare->capacity) {
		swap_sheaves(b);
		return true;
	}
	if (b->main && !b->spare) {             /* full: keep it as the spare */
		b->spare = b->main;
		b->main = NULL;
	}
	/* One barn visit: the full main (if any) for an empty sheaf. */
	b->main = barn_visit(s, b->main, 0);
	if (!b->main)
		b->main = sheaf_new(s, s->sheaf_capacity, gfp);
	return b->main != NULL;
}

/* ===========================================================================
 * Single objects
 */

/* The pop section failed (empty main, marked slot, locked mode, no CPU). */
void *usl_sheaf_alloc(struct kmem_cache *s, gfp_t gfp)
{
	struct pcs b;
	void *obj;

	if (!usl_rseq_mode) {
		/* Locked mode's fast path: pop under the slot's sheaf lock. */
		struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
		usl_spin_lock(&c->sheaf_lock);
		obj = c->main_size ? c->main->objects[--c->main_size] : NULL;
		usl_spin_unlock(&c->sheaf_lock);
		if (obj)
			return obj;
	}
	if (!pcs_take(s, &b))
		return usl_slub_alloc(s, gfp);
	if (replace_empty_main(s, &b, gfp)) {
		obj = b.main->objects[--b.main->size];
	} else {
		/* No memory for a whole sheaf: try for one object. */
		obj = usl_slub_alloc(s, gfp);
	}
	pcs_put(s, &b);
	usl_decay_tick();
	return obj;
}

/* The push section failed with USL_RS_MARKED (full main, marked slot, locked
 * mode, no CPU). x is a checked object of s. */
void usl_sheaf_free(struct kmem_cache *s, void *x)
{
	struct pcs b;

	if (!usl_rseq_mode) {
		struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
		int r = USL_RS_MARKED;
		usl_spin_lock(&c->sheaf_lock);
		struct slab_sheaf *m = c->main;
		if (c->main_size < m->capacity) {
			if (c->main_size && m->objects[c->main_size - 1] == x) {
				r = USL_RS_OTHER;
			} else {
				m->objects[c->main_size++] = x;
				r = USL_RS_OK;
			}
		}
		usl_spin_unlock(&c->sheaf_lock);
		if (r == USL_RS_OK)
			return;
		if (r == USL_RS_OTHER) {
			usl_report_double_free(s, x, "kmem_cache_free");
			return;
		}
	}
	if (!pcs_take(s, &b)) {
		usl_slub_free(s, usl_virt_to_slab(x), x);
		return;
	}
	if (b.main && b.main->size && b.main->objects[b.main->size - 1] == x) {
		pcs_put(s, &b);
		usl_report_double_free(s, x, "kmem_cache_free");
		return;
	}
	if (replace_full_main(s, &b, GFP_NOWAIT))
		b.main->objects[b.main->size++] = x;
	else
		usl_slub_free(s, usl_virt_to_slab(x), x);   /* no memory for a sheaf: straight to the slab */
	pcs_put(s, &b);
	usl_decay_tick();
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
static size_t move_bulk_fast(struct kmem_cache *s, size_t n, void **p, bool push)
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
		return done;
	}
	struct kmem_cache_cpu *c = usl_slub_hint_slot(s);
	usl_spin_lock(&c->sheaf_lock);
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
	usl_spin_unlock(&c->sheaf_lock);
	return k;
}

/* All or nothing, like kmem_cache_alloc_bulk: nr, or 0 with nothing kept. */
int usl_sheaf_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	struct pcs b;
	size_t i = move_bulk_fast(s, nr, p, false);

	if (i == nr)
		return (int)nr;
	if (pcs_take(s, &b)) {
		/* Whole sheaves first (main, spare, the barn's full ones) ... */
		while (i < nr) {
			if (!(b.main && b.main->size) && !(b.spare && b.spare->size) &&
			    !__atomic_load_n(&get_barn(s)->nr_full, __ATOMIC_RELAXED))
				break;
			if (!replace_empty_main(s, &b, gfp))
				break;
			size_t k = nr - i < b.main->size ? nr - i : b.main->size;
			b.main->size -= (uint32_t)k;
			memcpy(p + i, &b.main->objects[b.main->size], k * sizeof(void *));
			i += k;
		}
		pcs_put(s, &b);
	}
	/* ... then the rest from slabs, in one bulk call. */
	if (i < nr && !usl_slub_alloc_bulk(s, gfp, nr - i, p + i)) {
		usl_sheaf_free_bulk(s, i, p);
		return 0;
	}
	return (int)nr;
}

/* p[0..nr) are checked objects of s (no NULLs). */
void usl_sheaf_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	struct pcs b;
	size_t i = move_bulk_fast(s, nr, p, true);

	if (i == nr)
		return;
	if (!pcs_take(s, &b)) {
		usl_slub_free_bulk(s, nr - i, p + i);
		return;
	}
	while (i < nr) {
		if (!replace_full_main(s, &b, GFP_NOWAIT)) {
			usl_slub_free_bulk(s, nr - i, p + i);
			break;
		}
		size_t room = b.main->capacity - b.main->size;
		size_t k = nr - i < room ? nr - i : room;
		memcpy(&b.main->objects[b.main->size], p + i, k * sizeof(void *));
		b.main->size += (uint32_t)k;
		i += k;
	}
	pcs_put(s, &b);
}

/* ===========================================================================
 * Flushing every CPU's sheaves and the barn (shrink, destroy). The slots are
 * reached with the flush protocol of usl_slub_flush_all: rseq mode marks every
 * slot and one membarrier(PRIVATE_EXPEDITED_RSEQ) aborts every section in
 * flight, so no section commits to a marked slot (each checks the mark after its
 * start); locked mode takes each slot's sheaf_lock. While the slots are held only
 * pointers move; objects go back to slabs after they are released, and every
 * sheaf, the barn's empty ones too, is freed (the kernel's barn_shrink): sheaf
 * structures are scattered over the range.
 */
void usl_sheaf_flush_all(struct kmem_cache *s)
{
	struct usl_list taken;
	struct usl_barn *barn = get_barn(s);

	if (!s->sheaf_capacity)
		return;
	usl_list_init(&taken);
	if (usl_slub_hold_slots(s)) {
		for (unsigned int i = 0; i < usl_nr_cpus; i++) {
			struct kmem_cache_cpu *c = &s->cpu_slab[i];
			if (!usl_rseq_mode)
				usl_spin_lock(&c->sheaf_lock);
			struct slab_sheaf *sh[2] = { slot_main_detach(c), c->spare };
			c->spare = NULL;
			if (!usl_rseq_mode)
				usl_spin_unlock(&c->sheaf_lock);
			for (int k = 0; k < 2; k++)
				if (sh[k] && sh[k] != &usl_empty_sheaf)
					usl_list_add_tail(&sh[k]->barn_list, &taken);
		}
		usl_slub_release_slots(s);
	}
	usl_spin_lock(&barn->lock);
	barn_take_full_locked(barn, ~0u, &taken);
	barn->low_full = barn->high_full = 0;
	struct slab_sheaf *e;
	while ((e = barn_take_locked(barn, false)))
		usl_list_add_tail(&e->barn_list, &taken);
	usl_spin_unlock(&barn->lock);

	while (!usl_list_empty(&taken)) {
		struct slab_sheaf *sh = usl_container_of(taken.next, struct slab_sheaf, barn_list);
		usl_list_del(&sh->barn_list);
		sheaf_flush(s, sh);
		sheaf_free(s, sh);
	}
}

/* Does any CPU slot of s hold objects (a sheaf with some, a cpu slab, cpu
 * partial slabs)? In rseq mode unlocked peeks (sheaves are objects of uslab's
 * caches, whose memory stays mapped, so a stale pointer reads harmlessly); in
 * locked mode under the slot's locks, one at a time (§5). */
static bool slot_sheaves_hold(struct kmem_cache_cpu *c)
{
	struct slab_sheaf *sp = __atomic_load_n(&c->spare, __ATOMIC_RELAXED);
	return __atomic_load_n(&c->main_size, __ATOMIC_RELAXED) ||
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
			usl_spin_lock(&c->sheaf_lock);
			some = slot_sheaves_hold(c);
			usl_spin_unlock(&c->sheaf_lock);
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

/* The periodic sweep (usl_decay_tick): the surplus that stayed unused for a
 * decay interval goes back to slabs even if this cache's barn is not visited.
 * A barn not visited since the previous sweep (at least a decay interval ago)
 * gives back all its full sheaves, and the slabs they empty go to the page
 * provider: the cache, if used at all, runs on the CPUs' own sheaves. For a
 * kmalloc or malloc class what every CPU holds of it goes back too, and its
 * next refills are small (a program that stopped using a size, or uses it a
 * few objects at a time, keeps a few objects of it). uslab's own caches (no
 * sheaves) give back the slabs on their CPUs' partial lists: the sheaf
 * structures of a burst, freed since, would keep them there for ever. */
void usl_sheaf_decay(struct kmem_cache *s, uint64_t now)
{
	struct usl_barn *barn = get_barn(s);
	struct usl_list out;

	if (!s->sheaf_capacity) {
		if (s->flags & USL_SLAB_INTERNAL) {
			if (!__atomic_load_n(&sweep_flush_off, __ATOMIC_RELAXED) && slots_hold_partials(s) &&
			    sweep_may_flush())
				usl_slub_flush_all(s);
			usl_slub_release(s);     /* and the empty ones frees put on the node list */
		}
		return;
	}
	usl_list_init(&out);
	usl_spin_lock(&barn->lock);
	/* Idle: no barn visit since the last sweep, and no free of it sampled by
	 * the tick (a cache used only through its main sheaves visits no barn). */
	bool used = __atomic_exchange_n(&s->recent_use, 0, __ATOMIC_RELAXED);
	bool unvisited = barn->visits == barn->visits_swept && now >= barn->last_decay + usl_opt.decay_ms;
	bool idle = !used && unvisited;
	barn->visits_swept = barn->visits;
	if (unvisited) {
		/* Idle, or used only through the CPUs' own sheaves: either way
		 * nobody needed the barn's full sheaves for an interval. The next
		 * such sweep is an interval later. */
		barn_take_full_locked(barn, barn->nr_full, &out);
		barn->low_full = barn->high_full = 0;
		barn->last_decay = now;
	} else if (barn->nr_full > s->barn_max_full) {
		barn_decay_due_locked(s, barn, now, UINT_MAX, &out);
	}
	usl_spin_unlock(&barn->lock);
	unsigned int own = 0;                    /* flush_list visits the barn once a sheaf */
	for (struct usl_list *it = out.next; it != &out; it = it->next)
		own++;
	flush_list(s, &out);
	if (own) {
		usl_spin_lock(&barn->lock);
		barn->visits_swept += own;           /* the sweep's own visits are not use */
		usl_spin_unlock(&barn->lock);
	}
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
			usl_slub_flush_all(s);
			flushed = true;
			__atomic_store_n(&barn->refill_shift, 3, __ATOMIC_RELAXED);
			usl_spin_lock(&barn->lock);
			barn->visits_swept = barn->visits;   /* the flush's visits are not use */
			usl_spin_unlock(&barn->lock);
		}
	}
	if (idle || (unvisited && (own || flushed)))
		usl_slub_release(s);                 /* the slabs the flushes emptied */
}

/* Memory is short (the page provider would grow): every full sheaf above the
 * barn's level goes back to slabs now, used recently or not. */
void usl_sheaf_trim_barn(struct kmem_cache *s)
{
	struct usl_barn *barn = get_barn(s);
	struct usl_list out;

	if (!s->sheaf_capacity || __atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED) <= s->barn_max_full)
		return;
	usl_list_init(&out);
	usl_spin_lock(&barn->lock);
	if (barn->nr_full > s->barn_max_full)     /* re-checked: peeked unlocked above */
		barn_take_full_locked(barn, barn->nr_full - s->barn_max_full, &out);
	barn->high_full = barn->nr_full;
	barn->low_full = barn->nr_full;
	usl_spin_unlock(&barn->lock);
	flush_list(s, &out);
}

/* fork(): the class-cache lock comes before slab_mutex (usl_sheaf_cache_init
 * holds it across usl_cache_create), so fork_prepare takes it first. */
void usl_sheaf_fork_lock_global(void) { pthread_mutex_lock(&sheaf_classes_lock); }
void usl_sheaf_fork_unlock_global(void) { pthread_mutex_unlock(&sheaf_classes_lock); }

/* fork(): the barn lock and, in locked mode, every slot's sheaf lock. */
void usl_sheaf_fork_lock(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return;
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_lock(&s->cpu_slab[i].sheaf_lock);
	usl_spin_lock(&get_barn(s)->lock);
}

void usl_sheaf_fork_unlock(struct kmem_cache *s)
{
	if (!s->sheaf_capacity)
		return;
	usl_spin_unlock(&get_barn(s)->lock);
	if (!usl_rseq_mode)
		for (unsigned int i = 0; i < usl_nr_cpus; i++)
			usl_spin_unlock(&s->cpu_slab[i].sheaf_lock);
}

void usl_sheaf_counts(struct kmem_cache *s, struct usl_sheaf_counts *out)
{
	struct usl_barn *barn = get_barn(s);

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *c = &s->cpu_slab[i];
		struct slab_sheaf *m = __atomic_load_n(&c->main, __ATOMIC_ACQUIRE);
		struct slab_sheaf *sp = __atomic_load_n(&c->spare, __ATOMIC_ACQUIRE);
		if (m && m != &usl_empty_sheaf) {
			out->cpu_sheaves++;
			out->cpu_objects += __atomic_load_n(&c->main_size, __ATOMIC_RELAXED);
		}
		if (sp) {
			out->cpu_sheaves++;
			out->cpu_objects += __atomic_load_n(&sp->size, __ATOMIC_RELAXED);
		}
	}
	usl_spin_lock(&barn->lock);
	out->barn_full = barn->nr_full;
	out->barn_empty = barn->nr_empty;
	for (struct slab_sheaf *sh = barn->full; sh; sh = sh->next)
		out->barn_objects += sh->size;
	usl_spin_unlock(&barn->lock);
}

/* ===========================================================================
 * Prefilled sheaves (the kernel's API for callers that must not fail later)
 */

static bool sheaf_arg_ok(const char *fn, struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL cache", fn);
		return false;
	}
	if (!sh) {
		usl_report(USLAB_ERR_BAD_ARG, "%s(%s): NULL sheaf", fn, s->name);
		return false;
	}
	if (sh->cache != s) {
		usl_report(USLAB_ERR_WRONG_CACHE, "%s(%s): sheaf %p belongs to another cache", fn, s->name, (void *)sh);
		return false;
	}
	return true;
}

struct slab_sheaf *kmem_cache_prefill_sheaf(struct kmem_cache *s, gfp_t gfp, unsigned int size)
{
	struct slab_sheaf *sh = NULL;
	struct pcs b;

	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_prefill_sheaf: NULL cache");
		return NULL;
	}
	if (!s->sheaf_capacity || size > s->sheaf_capacity) {
		/* Oversize (or a cache without sheaves): a one-off sheaf. */
		if (size > SHEAF_MAX_CAPACITY) {
			usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_prefill_sheaf(%s): %u objects is above the limit %u",
			           s->name, size, SHEAF_MAX_CAPACITY);
			return NULL;
		}
		sh = sheaf_new(s, size, gfp);
		if (sh && sheaf_refill(s, sh, size, gfp) != 0) {
			sheaf_free(s, sh);
			sh = NULL;
		}
		goto out;
	}
	/* The kernel's order: this CPU's spare, then the barn's full, then empty. */
	if (pcs_take(s, &b)) {
		if (b.spare && b.spare->size >= size) {
			sh = b.spare;
			b.spare = NULL;
		}
		pcs_put(s, &b);
	}
	if (!sh)
		sh = barn_get(s, true);
	if (!sh)
		sh = barn_get(s, false);
	if (!sh)
		sh = sheaf_new(s, s->sheaf_capacity, gfp);
	if (sh && sheaf_refill(s, sh, sh->capacity, gfp) != 0 && sheaf_refill(s, sh, size, gfp) != 0) {
		give_back(s, sh);
		sh = NULL;
	}
out:
	if (!sh && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_prefill_sheaf(%s): out of memory for %u objects", s->name, size);
	return sh;
}

void *kmem_cache_alloc_from_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sh)
{
	if (!sheaf_arg_ok("kmem_cache_alloc_from_sheaf", s, sh))
		return NULL;
	if (!sh->size) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc_from_sheaf(%s): the sheaf is empty", s->name);
		return NULL;
	}
	void *obj = sh->objects[--sh->size];
	if (gfp & __GFP_ZERO)
		memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return obj;
}

int kmem_cache_refill_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf **sheafp, unsigned int size)
{
	if (!sheafp) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_refill_sheaf(%s): NULL sheaf pointer", s ? s->name : "NULL");
		return -EINVAL;
	}
	struct slab_sheaf *sh = *sheafp;
	if (!sh) {
		*sheafp = kmem_cache_prefill_sheaf(s, gfp, size);
		return *sheafp ? 0 : -ENOMEM;
	}
	if (!sheaf_arg_ok("kmem_cache_refill_sheaf", s, sh))
		return -EINVAL;
	if (sh->size >= size)
		return 0;
	if (size <= sh->capacity) {
		/* Top it up, to full if memory allows. */
		if (sheaf_refill(s, sh, sh->capacity, gfp) == 0 || sheaf_refill(s, sh, size, gfp) == 0)
			return 0;
		if (!(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmem_cache_refill_sheaf(%s): out of memory for %u objects", s->name,
			           size);
		return -ENOMEM;
	}
	struct slab_sheaf *big = kmem_cache_prefill_sheaf(s, gfp, size);
	if (!big)
		return -ENOMEM;
	kmem_cache_return_sheaf(s, gfp, sh);
	*sheafp = big;
	return 0;
}

void kmem_cache_return_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sh)
{
	struct pcs b;

	if (!sheaf_arg_ok("kmem_cache_return_sheaf", s, sh))
		return;
	if (sheaf_is_oversize(s, sh)) {
		sheaf_flush(s, sh);
		sheaf_free(s, sh);
		return;
	}
	/* As this CPU's spare if it has none; else filled up into the barn; else
	 * its objects back to slabs. */
	if (pcs_take(s, &b)) {
		if (!b.spare) {
			b.spare = sh;
			sh = NULL;
		}
		pcs_put(s, &b);
		if (!sh)
			return;
	}
	if (sheaf_refill(s, sh, sh->capacity, gfp | __GFP_NOWARN) == 0) {
		barn_visit(s, sh, -1);
		return;
	}
	give_back(s, sh);
}

unsigned int kmem_cache_sheaf_size(struct slab_sheaf *sh)
{
	return sh ? sh->size : 0;
}

unsigned int uslab_sheaf_capacity(struct kmem_cache *s)
{
	return s ? s->sheaf_capacity : 0;
}

/* ===========================================================================
 * Set-up
 */

/* The kernel's calculate_sheaf_capacity: by object size, at least what the
 * creator asked for, rounded up so the sheaf fills its size class. */
unsigned int usl_sheaf_capacity_for(unsigned int size, unsigned int requested)
{
	unsigned int cap;

	if (size >= usl_page_size)
		cap = 4;
	else if (size >= 1024)
		cap = 12;
	else if (size >= 256)
		cap = 26;
	else
		cap = 60;
	if (requested > cap)
		cap = requested;
	if (cap > SHEAF_MAX_CAPACITY)
		return 0;
	for (unsigned int i = 0; i < NR_SHEAF_CLASSES; i++)
		if (sheaf_bytes(cap) <= sheaf_classes[i])
			return (sheaf_classes[i] - SHEAF_HEADER) / 8u;
	return 0;
}

/* Give s its sheaves (s->sheaf_capacity set): the class cache and the barn
 * (the slots already hold the empty main, from id_assign). -1 if the class
 * cache cannot be made. */
int usl_sheaf_cache_init(struct kmem_cache *s)
{
	struct usl_barn *barn = get_barn(s);
	unsigned int bytes = sheaf_bytes(s->sheaf_capacity), cls = 0;

	while (cls < NR_SHEAF_CLASSES && sheaf_classes[cls] < bytes)
		cls++;
	if (cls == NR_SHEAF_CLASSES)
		return -1;
	pthread_mutex_lock(&sheaf_classes_lock);
	if (!sheaf_class_cache[cls]) {
		char name[32];
		usl_name_number(name, sizeof(name), "uslab-sheaf-", sheaf_classes[cls]);
		sheaf_class_cache[cls] = usl_cache_create(name, sheaf_classes[cls], 64, SLAB_NO_MERGE, NULL, NULL,
		                                          USL_CACHE_INTERNAL, 0);
	}
	s->sheaf_cache = sheaf_class_cache[cls];
	pthread_mutex_unlock(&sheaf_classes_lock);
	if (!s->sheaf_cache)
		return -1;
	s->barn_max_full = 10;
	s->barn_max_empty = 10;
	barn->low_full = 0;
	barn->last_decay = usl_now_ms();
	barn->lock = 0;
	barn->full = barn->empty = NULL;
	return 0;
}
