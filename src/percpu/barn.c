/* barn.c - the per-node barn of full and empty sheaves, packed sheaves, and
 * kfree_rcu's sheaves; the whole-cache work over the barns (flushes, decay,
 * trim, fork, counts) is sweep.c's. Lock: the barn's spin
 * lock, held for a few list operations or to pack one sheaf (plain stores into
 * its objects), never across a call out. */
#define _GNU_SOURCE
#include <limits.h>
#include <string.h>

#include "../testing.h"
#include "percpu.h"
#include "sheaf.h"

/* ===========================================================================
 * The barn: full and empty sheaves of one node, under barn->lock.
 *
 * Limits. Empty sheaves: barn_max_empty (the kernel's 10), or as many as the
 * barn held full sheaves since the last decay check; more are freed. Full
 * sheaves: at most barn_max_full (the kernel's 10) as arrays; beyond that a
 * full sheaf is packed into its own objects (below) and its array kept as an
 * empty one, so a burst of frees costs no memory for arrays. Why not the
 * kernel's wall: every free beyond ten sheaves would go to its slab, a
 * cmpxchg16b on a cold slab per object; nor a surplus of arrays: 8 bytes an
 * object while a program only frees (docs/ARCHITECTURE.md, "Sheaves and barns"). Caches that cannot pack keep arrays
 * up to a 32nd of their slab memory. What stays unused for a whole decay
 * interval (USLAB_DECAY_MS) goes back to slabs; with USLAB_DECAY_MS=0 the
 * limit of ten is exact. kmem_cache_shrink and uslab_release_free_memory
 * flush it all at once.
 */

void usl_barn_set(unsigned int *counter, unsigned int v)
{
	__atomic_store_n(counter, v, __ATOMIC_RELAXED);   /* peeked unlocked */
}
static void barn_set_long(unsigned long *counter, unsigned long v)
{
	__atomic_store_n(counter, v, __ATOMIC_RELAXED);   /* read unlocked */
}

/* Under barn->lock: pop a sheaf. */
struct slab_sheaf *usl_barn_take_locked(struct usl_barn *barn, bool full)
{
	usl_assert_held(&barn->lock);
	struct slab_sheaf **top = full ? &barn->full : &barn->empty;
	struct slab_sheaf *sh = *top;

	if (!sh)
		return NULL;
	usl_assert(full ? barn->nr_full > 0 : barn->nr_empty > 0);
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
		usl_barn_set(&barn->nr_full, barn->nr_full - 1);
		if (barn->nr_full < barn->low_full)
			barn->low_full = barn->nr_full;
	} else {
		usl_barn_set(&barn->nr_empty, barn->nr_empty - 1);
		if (barn->nr_empty < barn->low_empty)
			barn->low_empty = barn->nr_empty;
	}
	return sh;
}

struct slab_sheaf *usl_test_barn_take_unlocked(struct kmem_cache *s)
{
	return usl_barn_take_locked(usl_get_barn(s), false);
}

/* Under barn->lock: move up to n full sheaves to the private list *out. */
void usl_barn_take_full_locked(struct usl_barn *barn, unsigned int n, struct usl_list *out)
{
	usl_assert_held(&barn->lock);
	for (; n && barn->full; n--) {
		struct slab_sheaf *sh = barn->full;
		barn->full = sh->next;
		usl_barn_set(&barn->nr_full, barn->nr_full - 1);
		usl_list_add_tail(&sh->barn_list, out);
	}
}

/* Under barn->lock: the full sheaves above max_full that stayed unused for a
 * decay interval, moved to *out. The count is what the low-
 * water mark says; which sheaves go does not matter (a stack keeps a push or pop
 * to the one sheaf it moves), so they are taken from the top. max: how many to
 * move at most (the rest at the next check). */
void usl_barn_decay_due_locked(struct kmem_cache *s, struct usl_barn *barn, uint64_t now, unsigned int max,
                               struct usl_list *out)
{
	usl_assert_held(&barn->lock);
	if (now < barn->last_decay + usl_opt.decay_ms)   /* (last_decay may be after now) */
		return;
	unsigned int low = barn->low_full < barn->nr_full ? barn->low_full : barn->nr_full;
	unsigned int excess = low > s->barn_max_full ? low - s->barn_max_full : 0;
	if (excess > max)
		excess = max;
	else
		barn->last_decay = now;
	usl_barn_take_full_locked(barn, excess, out);
	barn->low_full = barn->high_full = barn->nr_full;
}

static void barn_decay_locked(struct kmem_cache *s, struct usl_barn *barn, struct usl_list *out)
{
	if (usl_opt.decay_ms == 0) {
		usl_barn_take_full_locked(barn, barn->nr_full - s->barn_max_full, out);
		barn->low_full = barn->high_full = barn->nr_full;
		return;
	}
	if (++barn->puts % 16)
		return;          /* read the clock every 16 puts above the level */
	usl_barn_decay_due_locked(s, barn, usl_now_ms(), 64, out);   /* bounded: a put pays for it */
}

/* ===========================================================================
 * Packed sheaves: the surplus of a burst of frees, held in the freed objects
 * themselves (docs/ARCHITECTURE.md, "Sheaves and barns").
 *
 * A full sheaf the barn has no room for (it holds barn_max_full arrays) is
 * written into its own objects as a tree: with w = inuse / 8 - 1 words an
 * object (every word but the free marker's, below), object i of the sheaf
 * holds in its node word k the address of object i * w + k (those below n, the
 * sheaf's count). Object 0, the head, uses its node word 0 for the link to the
 * next packed sheaf on the barn's stack, with n in the top 16 bits (uslab's
 * ranges lie below 2^47: mmap without a hint never goes above); its children
 * are objects 1 .. w - 1. Only the first n / w objects are written, and a
 * refill reads the tree a level at a time, the objects of a level in parallel:
 * one read for a sheaf of 256-byte objects, five levels for 24-byte ones. The
 * sheaf's array is kept as the empty sheaf the freeing CPU wanted, so a burst
 * of frees of any length costs no memory for arrays. Caches with a
 * constructor keep their objects as constructed and are not packed; nor are
 * objects under 24 bytes (a node needs two words besides the marker), nor any
 * cache with USLAB_DECAY_MS=0
 * (no surplus: the barn's level is a wall).
 */

#define PACK_SHIFT 48

/* Every word of a packed sheaf is stored hidden by the cache's key (as free
 * pointers are), so a write after free cannot plant an address, and every
 * word is checked when read back: a head's link must name an object of the
 * cache (the page map), the others an address in the range (unpack_sheaf).
 * One that fails is reported and the sheaf cut there (its other objects
 * lost, never handed out). */
/* A node's words are all of the object's but the one at the free pointer
 * offset, which keeps the free marker (freestate.h: a double free of a
 * packed object is seen too): word k of the node is word pack_slot(k). */
static inline unsigned int pack_words(const struct kmem_cache *s)
{
	return s->inuse / 8 - (s->offset < s->inuse);
}

static inline unsigned int pack_slot(const struct kmem_cache *s, unsigned int k)
{
	return k + (k >= s->offset / 8);
}

static inline void pack_put(const struct kmem_cache *s, void **node, unsigned int k, uintptr_t v)
{
	void **at = &node[pack_slot(s, k)];
	*at = (void *)(v ^ usl_cache_key(s, at));
}

static inline uintptr_t pack_get(const struct kmem_cache *s, void **node, unsigned int k)
{
	void **at = &node[pack_slot(s, k)];
	return (uintptr_t)*at ^ usl_cache_key(s, at);
}

static USL_SLOW_PATH void pack_corrupt(const struct kmem_cache *s, void **node, uintptr_t v)
{
	usl_report(USLAB_ERR_CORRUPT, "%s: packed free objects corrupted: the free object %p holds %#lx, not an object "
	           "of this cache (a write after free?); the rest of that sheaf is dropped", s->name, (void *)node,
	           (unsigned long)v);
}

/* The head's word 0: the next packed sheaf on the stack and n, this one's count. */
static inline void pack_head_put(const struct kmem_cache *s, void **head, void **next, unsigned int n)
{
	pack_put(s, head, 0, ((uintptr_t)n << PACK_SHIFT) | (uintptr_t)next);
}

/* Read back: false (reported, and *next NULL, *n 1: the head alone) when the
 * word does not hold a count the cache's sheaves can have and a link to an
 * object of the cache or NULL. */
static bool pack_head_get(const struct kmem_cache *s, void **head, void ***next, unsigned int *n)
{
	uintptr_t w0 = pack_get(s, head, 0);
	void **link = (void **)(w0 & ((1ul << PACK_SHIFT) - 1));
	unsigned int cnt = (unsigned int)(w0 >> PACK_SHIFT);

	if (usl_likely(cnt && cnt <= s->sheaf_capacity && (!link || usl_pm_is_object(s, link)))) {
		*next = link;
		*n = cnt;
		return true;
	}
	pack_corrupt(s, head, w0);
	*next = NULL;
	*n = 1;
	return false;
}

static bool barn_packs(struct kmem_cache *s)
{
	/* (The range check holds for every range mmap places without a hint;
	 * it is the assumption the link word makes, checked.) */
	return !s->ctor && pack_words(s) >= 2 && usl_opt.decay_ms && s->sheaf_capacity < (1u << 16) &&
	       usl_base + usl_range <= (1ul << PACK_SHIFT);
}

/* Write sh's objects into themselves, the head linked to next; sh is left
 * empty. Returns the head. (Stores only: the lines are cold, and a load of
 * one would wait for it.) */
static void **pack_sheaf(struct kmem_cache *s, struct slab_sheaf *sh, void *next)
{
	unsigned int n = sh->size, w = pack_words(s);
	void **objs = sh->objects;

	/* The written objects: start their misses together (the stores then
	 * need not wait for each in turn). */
	for (unsigned int i = 0; i * w < n; i++)
		__builtin_prefetch(objs[i], 1);
	void **head = objs[0];
	pack_head_put(s, head, next, n);
	for (unsigned int i = 0; i * w + (i == 0) < n; i++) {
		void **node = objs[i];
		unsigned int k = i == 0, end = n - i * w < w ? n - i * w : w;
		for (; k < end; k++)
			pack_put(s, node, k, (uintptr_t)objs[i * w + k]);
	}
	sh->size = 0;
	return head;
}

void usl_barn_pack_prefetch(struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (!barn_packs(s) || __atomic_load_n(&usl_get_barn(s)->nr_full, __ATOMIC_RELAXED) < s->barn_max_full)
		return;
	unsigned int w = pack_words(s);
	for (unsigned int i = 0; i * w < sh->size; i++)
		__builtin_prefetch(sh->objects[i], 1);
}

/* The n objects of the packed sheaf head into out[] (room for n). Returns
 * how many: n, or fewer when a word is not an object of s (reported). */
static unsigned int unpack_sheaf(struct kmem_cache *s, void **head, unsigned int n, void **out)
{
	unsigned int w = pack_words(s);
	const uintptr_t range_top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);

	out[0] = head;
	for (unsigned int i = 0; i * w + (i == 0) < n; i++) {
		void **node = out[i];
		unsigned int k = i == 0, end = n - i * w < w ? n - i * w : w;
		for (; k < end; k++) {
			unsigned int c = i * w + k;
			uintptr_t v = pack_get(s, node, k);
			/* In the committed range and word aligned: a word decoded
			 * with the wrong key is noise and fails this (but for one in
			 * 2^23); the pop's marker check (freestate.h) refuses
			 * what slips through. No page-map load per object. */
			if (usl_unlikely(v - usl_base >= range_top || (v & 7))) {
				pack_corrupt(s, node, v);
				return c;    /* out[0 .. c) are good: they come first */
			}
			out[c] = (void *)v;
			if (c * w < n)
				__builtin_prefetch(out[c], 0);   /* a node of the next level */
		}
	}
	return n;
}

/* Every object of a stack of packed sheaves (linked through word 0 of their
 * heads) back to slabs: each unpacked into buf (a sheaf's worth), then freed
 * in bulk. A sheaf that finds no buffer (a capacity above the stack's and no
 * memory) is kept: *rest returns what was not flushed. */
static void **flush_packed(struct kmem_cache *s, struct usl_barn *barn, void **head)
{
	void *stack_buf[128], **buf = stack_buf;
	struct slab_sheaf *tmp = NULL;
	unsigned long total = 0;

	if (!head)
		return NULL;
	if (s->sheaf_capacity > 128) {
		tmp = usl_sheaf_new(s, s->sheaf_capacity, GFP_NOWAIT | __GFP_NOWARN);
		if (!tmp)
			return head;
		buf = tmp->objects;
	}
	while (head) {
		void **next;
		unsigned int n;
		bool whole = pack_head_get(s, head, &next, &n);
		if (next)
			__builtin_prefetch(next, 0);
		unsigned int got = unpack_sheaf(s, head, n, buf);
		usl_engine_free_bulk(s, got, buf);
		total += whole ? n : 0;   /* a bad head word: its count is unknown */
		head = next;
	}
	if (tmp)
		usl_sheaf_dispose(s, tmp);
	usl_spin_lock(&barn->lock);
	barn_set_long(&barn->packed_objects, barn->packed_objects - total);
	usl_spin_unlock(&barn->lock);
	return NULL;
}

/* flush_packed, and what it could not flush back on the barn's young stack. */
void usl_barn_flush_packed_all(struct kmem_cache *s, struct usl_barn *barn, void **head)
{
	void **rest = flush_packed(s, barn, head);

	while (rest) {
		void **next;
		unsigned int n;
		pack_head_get(s, rest, &next, &n);
		usl_spin_lock(&barn->lock);
		pack_head_put(s, rest, barn->packed, n);
		barn->packed = rest;
		usl_barn_set(&barn->nr_packed, barn->nr_packed + 1);
		usl_spin_unlock(&barn->lock);
		rest = next;
	}
}

/* Under barn->lock: both stacks of packed sheaves, detached: the young one
 * returned, the old one in *old. */
void **usl_barn_take_packed_locked(struct usl_barn *barn, void ***old)
{
	usl_assert_held(&barn->lock);
	void **young = barn->packed;

	*old = barn->packed_old;
	barn->packed = barn->packed_old = NULL;
	usl_barn_set(&barn->nr_packed, 0);
	usl_barn_set(&barn->nr_packed_old, 0);
	return young;
}

bool usl_barn_unpack(struct kmem_cache *s, struct slab_sheaf *sh)
{
	struct usl_barn *barn = usl_get_barn(s);
	void **head;

	if (!__atomic_load_n(&barn->nr_packed, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&barn->nr_packed_old, __ATOMIC_RELAXED))
		return false;        /* peeked unlocked: a miss costs only a refill */
	void **next;
	unsigned int n = 0;
	usl_spin_lock(&barn->lock);
	barn->visits++;
	if ((head = barn->packed)) {
		pack_head_get(s, head, &next, &n);
		barn->packed = next;
		usl_barn_set(&barn->nr_packed, next ? barn->nr_packed - 1 : 0);
	} else if ((head = barn->packed_old)) {
		pack_head_get(s, head, &next, &n);
		barn->packed_old = next;
		usl_barn_set(&barn->nr_packed_old, next ? barn->nr_packed_old - 1 : 0);
	}
	if (head)
		barn_set_long(&barn->packed_objects, barn->packed_objects - n);
	char *top = barn->packed ? barn->packed : barn->packed_old;
	usl_spin_unlock(&barn->lock);
	if (!head)
		return false;
	usl_stat(s, USL_BARN_GET);
	if (top) {                       /* the next refill's head, its first lines */
		unsigned int bytes = s->inuse < 8 * (s->sheaf_capacity + 1) ? s->inuse : 8 * (s->sheaf_capacity + 1);
		for (unsigned int off = 0; off < bytes && off < 512; off += 64)
			__builtin_prefetch(top + off, 0);
	}
	sh->size = unpack_sheaf(s, head, n, sh->objects);
	return true;
}


/* One barn visit: give `give` (full or empty, may be NULL) and take a sheaf of
 * the kind `want` says (1 full, 0 empty, -1 none). Returns what was taken, or
 * NULL. An empty sheaf the barn has no room for is freed here; decayed full
 * sheaves are flushed here, after the lock is dropped. */
/* Caches that cannot pack (a constructor, objects under 16 bytes) keep their
 * surplus as arrays, up to a budget: the kernel's level, or pointer arrays of
 * 1/32 of the cache's slab memory, whichever is more. A full sheaf beyond it
 * goes back to slabs. */
static bool barn_over_budget(struct kmem_cache *s, struct usl_barn *barn)
{
	unsigned int nr = __atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED);
	if (nr < s->barn_max_full)
		return false;
	const struct kmem_cache_node *n = usl_container_of(barn, struct kmem_cache_node, barn);
	unsigned long objects = __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
	return (unsigned long)nr * usl_sheaf_bytes(s->sheaf_capacity) >= objects * s->size / 32;
}

/* usl_barn_visit of a given barn (the sweeps visit every node's). */
static struct slab_sheaf *barn_visit(struct kmem_cache *s, struct usl_barn *barn, struct slab_sheaf *give, int want)
{
	struct slab_sheaf *got = NULL, *drop = NULL;
	struct usl_list decayed;

	usl_list_init(&decayed);
	if (!give && want >= 0 &&
	    !__atomic_load_n(want ? &barn->nr_full : &barn->nr_empty, __ATOMIC_RELAXED))
		return NULL;        /* peeked unlocked: a miss costs only a refill */
	if (give && give->size && !usl_sheaf_is_oversize(s, give) && barn_packs(s) &&
	    __atomic_load_n(&barn->nr_full, __ATOMIC_RELAXED) >= s->barn_max_full) {
		/* No room for another array: pack it (peeked unlocked; the level
		 * may be passed by a sheaf or two) and keep its array as the empty
		 * sheaf the caller wants, or as one for the barn. Packed under the
		 * lock: its stores go to cold lines, and the lock's exchange after
		 * them would wait for every one; the unlock is a plain store, which
		 * the others' view orders after them (x86 and the release order). */
		unsigned int n = give->size;
		usl_stat(s, USL_BARN_PUT);
		usl_spin_lock(&barn->lock);
		barn->packed = pack_sheaf(s, give, barn->packed);
		barn->visits++;
		barn->dry_refills = 0;
		usl_barn_set(&barn->nr_packed, barn->nr_packed + 1);
		barn_set_long(&barn->packed_objects, barn->packed_objects + n);   /* no locked add: it would wait for the stores above */
		if (want == 0) {
			usl_spin_unlock(&barn->lock);
			return give;
		}
	} else {
		if (give && give->size && !usl_sheaf_is_oversize(s, give) && usl_opt.decay_ms &&
		    barn_over_budget(s, barn)) {
			usl_stat(s, USL_BARN_PUT_FAIL);
			usl_sheaf_flush(s, give);   /* and on as an empty one */
		}
		usl_spin_lock(&barn->lock);
		barn->visits++;
	}
	if (want >= 0)
		got = usl_barn_take_locked(barn, want == 1);
	if (give && give->size) {
		usl_stat(s, USL_BARN_PUT);
		barn->dry_refills = 0;
		give->next = barn->full;
		barn->full = give;
		usl_barn_set(&barn->nr_full, barn->nr_full + 1);
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
			usl_barn_set(&barn->nr_empty, barn->nr_empty + 1);
		} else {
			drop = give;
		}
	}
	usl_spin_unlock(&barn->lock);
	if (got && want == 1)
		usl_stat(s, USL_BARN_GET);
	if (drop)
		usl_sheaf_dispose(s, drop);
	if (!usl_list_empty(&decayed))
		usl_barn_flush_list(s, barn, &decayed);
	return got;
}

struct slab_sheaf *usl_barn_visit(struct kmem_cache *s, struct slab_sheaf *give, int want)
{
	return barn_visit(s, usl_get_barn(s), give, want);
}

struct slab_sheaf *usl_barn_get(struct kmem_cache *s, bool full)
{
	return usl_barn_visit(s, NULL, full ? 1 : 0);
}

/* Refills from slabs this many times with no full sheaf put in between mean
 * the burst of frees that left the barn's empty sheaves is over: the program
 * allocates past what it freed (random-order rounds that free and take back
 * the same objects run dry only at their very end). */
#define DRY_REFILLS 32

/* A refill from slabs (the barn had no full sheaf): after DRY_REFILLS of them
 * with no full sheaf put in between, a few empties above the kernel's ten are
 * freed at each, so the arrays of a past burst do not stay while the program
 * grows. Peeked unlocked first: a refill with no surplus takes no lock. */
void usl_barn_dry_refill(struct kmem_cache *s)
{
	struct usl_barn *barn = usl_get_barn(s);
	struct slab_sheaf *drop = NULL;

	if (__atomic_load_n(&barn->nr_empty, __ATOMIC_RELAXED) <= s->barn_max_empty)
		return;
	usl_spin_lock(&barn->lock);
	if (++barn->dry_refills >= DRY_REFILLS)
		for (int n = 0; n < 8 && barn->nr_empty > s->barn_max_empty; n++) {
			struct slab_sheaf *e = usl_barn_take_locked(barn, false);
			e->next = drop;
			drop = e;
		}
	usl_spin_unlock(&barn->lock);
	while (drop) {
		struct slab_sheaf *e = drop;
		drop = e->next;
		usl_sheaf_dispose(s, e);
	}
}

/* Flush every sheaf of a private list to slabs and keep the empties in the
 * barn they came from, or free them. */
void usl_barn_flush_list(struct kmem_cache *s, struct usl_barn *barn, struct usl_list *list)
{
	while (!usl_list_empty(list)) {
		struct slab_sheaf *sh = usl_container_of(list->next, struct slab_sheaf, barn_list);
		usl_list_del(&sh->barn_list);
		usl_sheaf_flush(s, sh);
		barn_visit(s, barn, sh, -1);
	}
}

/* A sheaf we cannot keep (an install lost a race, a returned prefilled sheaf):
 * full ones to the barn, the rest flushed to slabs. */
void usl_sheaf_give_back(struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (!sh || sh == &usl_empty_sheaf)
		return;
	if (usl_is_slab(s) || sh->size != sh->capacity)
		usl_sheaf_flush(s, sh);
	if (usl_is_slab(s))                 /* SLAB has no barn */
		usl_sheaf_dispose(s, sh);
	else
		usl_barn_visit(s, sh, -1);
}
/* ===========================================================================
 * kfree_rcu's sheaves (the kmalloc layer's rcu.c, the kernel's rcu_free
 * sheaf): an empty sheaf that objects wait in for a grace period, and that
 * sheaf afterwards, its objects free, whole to the barn as any full sheaf.
 */
struct slab_sheaf *usl_sheaf_rcu_get(struct kmem_cache *s)
{
	struct slab_sheaf *sh = usl_barn_get(s, false);
	if (sh && usl_sheaf_is_oversize(s, sh)) {
		usl_sheaf_dispose(s, sh);
		sh = NULL;
	}
	if (!sh)
		sh = usl_sheaf_new(s, s->sheaf_capacity, GFP_NOWAIT);
	return sh;
}

void usl_sheaf_rcu_put(struct kmem_cache *s, struct slab_sheaf *sh)
{
	usl_assert(sh->size <= sh->capacity && !usl_sheaf_is_oversize(s, sh));
	usl_stat_add(s, USL_FREE_RCU_SHEAF, sh->size);
	usl_sheaf_give_back(s, sh);
}
