/* bulk.c - the SLUB engine's bulk paths: allocation that takes the slot
 * private once and carves whole runs for sheaf refills, and freeing by the
 * kernel's detached freelists (one slab's objects gathered from the array,
 * checked, linked, and handed over with one section or one CAS). Locks: those
 * of the slow paths it calls (slub.c); none of its own. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/rseq.h>

#include "internal.h"
#include "slot.h"
#include "slub.h"
#include "../../testing.h"

/* ===========================================================================
 * Bulk allocation
 */

/* Up to nr uncarved objects of a frozen slab (ours) straight into p, untouched:
 * sheaf refills hand them out without reading them. 0 if the slab has a
 * freelist (remote frees; get_freelist takes it) or nothing uncarved. */
static unsigned int carve_array(const struct kmem_cache *s, struct slab *slab, size_t nr, void **p)
{
	void *fl;
	unsigned long c;
	unsigned int u, k;

	do {
		usl_slab_snapshot(slab, &fl, &c);
		u = usl_counters_uncarved(c);
		if (fl || !u)
			return 0;
		k = nr < u ? (unsigned int)nr : u;
	} while (!usl_slab_cas(s, slab, NULL, c, NULL, usl_counters_set_uncarved(c, u - k)));
	usl_slab_carved(s, slab, usl_counters_set_uncarved(c, u - k));
	char *q = usl_carve_start(s, slab, c);
	struct usl_carve_order o;
	usl_carve_order_init(&o, s, k);
	for (unsigned int i = 0; i < k; i++)
		p[i] = q + (size_t)usl_carve_order_next(&o) * s->size;
	if (usl_flagged(s))          /* never on a list: no F to take; an old one in reused memory cleared */
		for (unsigned int i = 0; i < k; i++)
			usl_flag_fresh(s, p[i]);
	return k;
}

#define BULK_SECTION_MAX 64

/* A two-word cache's objects p[from..to) taken from free lists: those with
 * their F kept (compacted), the others reported and left out. The new end. */
static size_t tw_leave(const struct kmem_cache *s, void **p, size_t from, size_t to)
{
	size_t k = from;
	for (size_t j = from; j < to; j++) {
		if (usl_unlikely(!usl_flag_leave_slab(s, p[j]))) {
			usl_flag_refused(s, p[j]);
			continue;
		}
		p[k++] = p[j];
	}
	return k;
}

/* The cpu-slab layer's bulk allocation (no zeroing): all or nothing. */
int usl_slub_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p)
{
	struct usl_private_slot b;
	size_t i = 0;
	bool tw = usl_flagged(s);

	/* Most calls are served by this CPU's freelist in one section. The section
	 * is capped, so a restart (preemption, a signal) repeats little work; the
	 * rest takes the slot private below (slot_take). */
	int st;
	i = usl_rseq_alloc_bulk(s, nr < BULK_SECTION_MAX ? nr : BULK_SECTION_MAX, p, &st);
	usl_stat_add(s, USL_ALLOC_FASTPATH, i);
	if (tw)
		i = tw_leave(s, p, 0, i);
	if (i == nr)
		return (int)nr;
	if (!usl_slot_take(s, &b)) {
		/* No per-CPU slot for this thread: one object at a time. */
		while (i < nr) {
			usl_stat(s, USL_ALLOC_SLOWPATH);
			if (!(p[i] = usl_alloc_direct(s, usl_slub_local_node(s))))
				goto fail;
			i = tw ? tw_leave(s, p, i, i + 1) : i + 1;
		}
	} else {
		while (i < nr) {
			if (usl_unlikely(!b.fl)) {
				unsigned int k = b.slab ? carve_array(s, b.slab, nr - i, p + i) : 0;
				if (k) {
					usl_stat_add(s, USL_ALLOC_FASTPATH, k);
					i += k;
					continue;
				}
				if (!usl_slot_refill(s, &b, false)) {
					usl_slot_put(s, &b);
					goto fail;
				}
				continue;       /* a new slab comes uncarved */
			}
			p[i] = b.fl;
			b.fl = usl_get_freepointer(s, b.fl);
			i = tw ? tw_leave(s, p, i, i + 1) : i + 1;
			usl_stat(s, USL_ALLOC_FASTPATH);
		}
		usl_slot_put(s, &b);
	}
	return (int)nr;

fail:
	/* All or nothing: give back what we got (a two-word cache's objects go
	 * back as freed ones do: with their M). */
	if (tw)
		for (size_t j = 0; j < i; j++)
			usl_marker_set(s, p[j]);
	usl_slub_free_bulk(s, i, p);
	if (!(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc_bulk(%s): out of memory after %zu of %zu objects; none kept",
		           s->name, i, nr);
	return 0;
}

/* ===========================================================================
 * Bulk freeing: detached freelists
 */

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
	uintptr_t head_fp;  /* the word at the head's free pointer before it was linked */
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
	                 !usl_obj_index_at(owner, slab, (uint32_t)((uintptr_t)x - (uintptr_t)slab->addr), idx))) {
		usl_report_bad_free(fn, s, x, slab);
		return NULL;
	}
	return slab;
}

__thread unsigned long usl_bulk_lists __attribute__((tls_model("initial-exec")));

static void df_map_init(struct detached_freelist *df, unsigned int objects)
{
	/* A plain loop: a memset here costs more than the few words. */
	for (volatile uint64_t *w = df->map; w < df->map + (objects + 63) / 64; w++)
		*w = 0;
	df->map[df->first_idx / 64] |= 1ULL << (df->first_idx % 64);
	df->map_ready = true;
}

/* Gather one slab's objects from the end of p[0..size): take the last object,
 * then every object of the same slab found before it, stopping at the third
 * object of another slab (the kernel's look-ahead of 3; USLAB_BULK_LOOKAHEAD:
 * 1 stops at the first, so only a run of consecutive objects is gathered). Gathered entries
 * are swapped to the end, so p[0..return) is what is left. NULL entries are
 * skipped; bad pointers and duplicates are reported and dropped. df->slab is NULL
 * when nothing was gathered. */
static size_t build_detached_freelist(const char *fn, struct kmem_cache *s, size_t size, void **p,
                                      struct detached_freelist *df)
{
	unsigned int lookahead = (unsigned int)usl_opt.bulk_lookahead, idx;
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
		if (usl_unlikely(!usl_obj_index_at(ds, slab, (uint32_t)((uintptr_t)object - saddr), &q))) {
			usl_report_bad_free(fn, s, object, slab);
			p[same] = NULL;
			continue;
		}
		if (!df->map_ready)
			df_map_init(df, objects);
		if (usl_unlikely(map[q / 64] & (1ULL << (q % 64)))) {
			usl_refuse_twice_in_array(fn, ds->name, object);
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
			usl_refuse_double_free(fn, df->s->name, x, NULL);
			return;
		}
}

/* If x is one of the gathered objects, drop it. */
static void df_drop_if_member(struct detached_freelist *df, void *x, const char *fn)
{
	unsigned int q;
	uintptr_t off = (uintptr_t)x - (uintptr_t)df->slab->addr;

	if (x && off < usl_order_bytes(df->slab->order) && usl_obj_index_at(df->s, df->slab, (uint32_t)off, &q) &&
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
		struct kmem_cache_cpu *c = usl_hint_slot(s);
		if (__atomic_load_n(&c->slab, __ATOMIC_RELAXED) == slab)
			df_drop_if_member(df, usl_load_ptr(&c->freelist), fn);
	}
	df_drop_if_member(df, usl_load_ptr(&slab->freelist), fn);
	/* Uncarved objects only become fewer: one seen uncarved was never handed out. */
	unsigned long c0 = usl_load(&slab->counters);
	if (usl_counters_uncarved(c0))
		for (size_t i = 0; i < df->n; i++)
			if (df->objs[i] && usl_never_handed_out(s, slab, c0, df->objs[i]))
				df_drop(df, df->objs[i],
				        usl_obj_index((uint32_t)((char *)df->objs[i] - slab->addr), s->div_inv, s->div_shift), fn);

	unsigned long c = usl_load(&slab->counters);
	if (!usl_counters_frozen(c) && usl_counters_inuse(c) < df->cnt) {
		/* Some are free already: find them on the slab's freelist (bounded,
		 * and stopping at anything that is not an object of this slab). */
		unsigned int steps = 0;
		for (void *x = usl_load_ptr(&slab->freelist); x && steps < objects; steps++) {
			uintptr_t off = (uintptr_t)x - (uintptr_t)slab->addr;
			if (off >= usl_order_bytes(slab->order))
				break;
			bool ok;
			void *next = usl_get_freepointer_safe(s, x, &ok);
			df_drop_if_member(df, x, fn);
			if (!ok)
				break;
			x = next;
		}
		if (usl_counters_inuse(usl_load(&slab->counters)) < df->cnt) {
			usl_refuse_overfree(fn, s->name, df->cnt, usl_counters_inuse(usl_load(&slab->counters)));
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
			df->head_fp = usl_fp_word(df->s, x);
			usl_set_freepointer(df->s, x, prev);
		}
		prev = x;
	}
	df->head = prev;
	if (df->head == df->tail)
		df->head_fp = 0;
}

/* One validated object: the single-object free path, which checks for a double
 * free before it writes into the object. */
static void bulk_free_one(struct kmem_cache *s, struct slab *slab, void *x, const char *fn)
{
	int r = usl_rseq_free(s, slab, x);
	if (r != USL_RS_OK)
		usl_slub_free_slow(s, slab, x, r, fn);
	else
		usl_stat(s, USL_FREE_FASTPATH);
}

/* A race: since the pre-check, the linked head started heading a freelist.
 * Put back its free pointer, report it, keep the rest. */
static bool drop_double_head(struct detached_freelist *df, const char *fn)
{
	void *next = usl_get_freepointer(df->s, df->head);

	usl_set_fp_word(df->s, df->head, df->head_fp);
	usl_refuse_double_free(fn, df->s->name, df->head, NULL);
	df->head = next;
	df->head_fp = 0;
	return --df->cnt != 0;
}

/* The same for the tail, whose free pointer was never written. */
static bool drop_double_tail(struct detached_freelist *df, const char *fn)
{
	void *pred = df->head;

	usl_refuse_double_free(fn, df->s->name, df->tail, NULL);
	for (unsigned int i = 2; i < df->cnt; i++)
		pred = usl_get_freepointer(df->s, pred);
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
		bulk_free_one(df->s, df->slab, df->head, fn);
	else
		usl_slab_free_slow(df->s, df->slab, df->head, df->tail, df->cnt);
}

/* Hand the gathered objects over: onto this CPU's freelist if their slab is the
 * cpu slab, else to the slab with one 16-byte CAS. A single object takes the
 * single-object path. */
static void free_detached(struct detached_freelist *df, const char *fn)
{
	struct kmem_cache *s = df->s;

	if (df->cnt == 1) {
		bulk_free_one(s, df->slab, df->first, fn);
		return;
	}
	if (!df_precheck(df, fn))
		return;
	df_link(df);
	if (df->cnt == 1) {
		bulk_free_one(s, df->slab, df->head, fn);
		return;
	}
	for (;;) {
		int r = usl_rseq_mode ? usl_rseq_free_chain(s, df->slab, df->head, df->tail)
		                      : usl_locked_push_chain(s, df->slab, df->head, df->tail);
		if (r == USL_RS_OK) {
			usl_stat_add(s, USL_FREE_FASTPATH, df->cnt);
			return;
		}
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

void usl_slub_free_bulk_as(const char *fn, struct kmem_cache *s, size_t nr, void **p)
{
	uint64_t map[BULK_MAP_WORDS];
	struct detached_freelist df;

	if (usl_unlikely(!p && nr)) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL array of %zu objects", fn, nr);
		return;
	}
	/* A two-word cache's objects go back with their M, and not onto a list
	 * they are on already (a copy of an object that is free: left out). The
	 * entries that are no objects of s are the gathering's to report. A NULL
	 * s (kfree_bulk) checked each of its entries before. */
	if (s && usl_flagged(s))
		for (size_t i = 0; i < nr; i++)
			if (p[i] && usl_pm_is_object(s, p[i]) && usl_unlikely(!usl_flag_enter_slab(s, p[i]))) {
				usl_report_flag_enter(s, p[i], fn);
				p[i] = NULL;
			}
	if (nr == 1) {                 /* nothing to gather: the single-object path */
		unsigned int idx;
		struct slab *slab;
		if (p[0] && (slab = bulk_check(fn, s, p[0], &idx)))
			bulk_free_one(slab->slab_cache, slab, p[0], fn);
		return;
	}
	df.map = map;
	while (nr) {
		nr = build_detached_freelist(fn, s, nr, p, &df);
		if (df.slab) {
			usl_bulk_lists++;
			free_detached(&df, fn);
		}
	}
}

/* The cpu-slab layer's bulk free of objects of s (detached freelists). */
void usl_slub_free_bulk(struct kmem_cache *s, size_t nr, void **p)
{
	usl_slub_free_bulk_as("kmem_cache_free_bulk", s, nr, p);
}
