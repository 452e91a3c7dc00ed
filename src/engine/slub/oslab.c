/* oslab.c - the owned front end's slabs, SLUB's slab life cycle under them:
 * a new owned slab (usl_new_slab's pages, page map and node counts, then its
 * bitmap metadata and chunk-map entries), its owner changes (adopt, orphan),
 * the merge of remote bits, frees from other CPUs (one locked bit set, then
 * an inbox push once per merge), orphans (a node list under list_lock, frees
 * and allocations there), discard, and the counts. The per-CPU side (slots,
 * cursor, refill) is percpu/owned.c. Locks: a node's list_lock (orphans, the
 * node's lists, owner changes); the page provider's inside it is never taken
 * here while it is held. docs/ARCHITECTURE.md, "The owned front end". */
#define _GNU_SOURCE
#include <string.h>

#include "../../arch/arch.h"
#include "../../pages/pages.h"
#include "internal.h"
#include "slub.h"

/* Orphans with free objects a node keeps before a wholly free one is
 * discarded: SLUB keeps min_partial partial slabs, but an owned slab is 64
 * KiB or more (the next slot to need one adopts it). */
#define ORPHANS_KEPT 1

static void retire(struct kmem_cache_node *n, struct usl_oslab *h);
static void orphan_list(struct kmem_cache_node *n, struct usl_oslab *h);
static struct usl_oslab *retired_take(struct kmem_cache *s, unsigned int node);

/* Write h's chunk-map entries: h, or 0 once it is given up. */
static void chunks_write(struct usl_oslab *h, uint64_t v)
{
	size_t first = ((uintptr_t)h->start - usl_base) >> USL_OCHUNK_SHIFT;
	size_t n = usl_order_bytes(h->slab->order) >> USL_OCHUNK_SHIFT;
	for (size_t i = 0; i < n; i++)
		__atomic_store_n(&usl_ochunk[first + i], v, __ATOMIC_RELEASE);
}

void usl_oslab_set_owner(struct usl_oslab *h, unsigned int owner)
{
	__atomic_store_n(&h->owner, (uint16_t)owner, __ATOMIC_RELEASE);
}

struct usl_oslab *usl_oslab_new(struct kmem_cache *s, unsigned int node, unsigned int owner)
{
	struct kmem_cache *mc = s->oslab_cache;   /* made with the cache (common/cache.c) */
	struct usl_oslab *h = retired_take(s, node);
	if (!h) {
		/* uslab's own caches run on the cpu slab: their paths are the
		 * engine's. */
		if (!(h = usl_slub_alloc(mc, GFP_KERNEL | __GFP_NOWARN)))
			return NULL;
		h->pending = 0;
		h->inbox_next = NULL;
		h->owner = 0xffff;
		h->slots = s->oslots;
		h->cache = s;
	}
	void *fl;
	struct slab *slab = usl_new_slab(s, &fl, node);
	if (!slab) {
		retire(s->node[node], h);
		return NULL;
	}
	/* Every object is in use as far as SLUB's counters know (nothing of
	 * SLUB's takes from or frees to an owned slab); the page map counts
	 * them all, for the object checks of ksize and kmem_cache_free. */
	unsigned int objects = usl_counters_objects(slab->counters);
	slab->counters = usl_counters_make(objects, objects, true);
	usl_slab_carved(s, slab, slab->counters);
	slab->unused = h;
	/* A retired block keeps what a late announce of its old life reads
	 * (retire): pending and the inbox link, its slots and cache (the same
	 * cache's), and owner 0xffff, which a drain passes by, until the new
	 * owner is stored last, under list_lock. */
	h->listed = 0;
	h->orphan_listed = 0;
	h->avail_next = NULL;
	h->start = usl_slab_address(slab);
	h->start_off = (uint32_t)((uintptr_t)h->start - usl_base);
	h->div_inv = s->div_inv;
	h->div_shift = s->div_shift;
	h->objects = objects;
	h->nwords = (objects + 63) / 64;
	h->roff = (uint32_t)USL_ALIGN((size_t)h->nwords * 8, USL_CACHELINE);
	h->slab = slab;
	usl_list_init(&h->all);
	usl_list_init(&h->orphans);
	for (unsigned int k = 0; k < h->nwords; k++) {
		h->local[k] = objects - k * 64 >= 64 ? ~0UL : (1UL << (objects - k * 64)) - 1;
		__atomic_store_n(&usl_oslab_remote(h)[k], 0, __ATOMIC_RELAXED);
	}
	/* The chunk map first (owner 0xffff: a stale free finding it is
	 * refused), then the lists and the owner: a new orphan is on the list,
	 * where another thread may adopt it or take its objects, only once
	 * frees can find it. */
	chunks_write(h, (uintptr_t)h);
	struct kmem_cache_node *n = usl_get_node(s, slab);
	usl_lock(&n->list_lock);
	usl_list_add_tail(&h->all, &n->owned);
	n->nr_owned++;
	if (!owner)                          /* a new orphan: listed where its owner is stored */
		orphan_list(n, h);
	usl_oslab_set_owner(h, owner);
	usl_unlock(&n->list_lock);
	return h;
}

unsigned int usl_oslab_free_count(const struct usl_oslab *h)
{
	unsigned int c = 0;
	for (unsigned int k = 0; k < h->nwords; k++)
		c += (unsigned int)__builtin_popcountl(h->local[k]);
	return c;
}

void usl_oslab_discard(struct kmem_cache *s, struct usl_oslab *h)
{
	struct slab *slab = h->slab;
	struct kmem_cache_node *n = usl_get_node(s, slab);
	chunks_write(h, 0);
	usl_lock(&n->list_lock);
	usl_list_del(&h->all);
	n->nr_owned--;
	if (h->orphan_listed) {
		usl_list_del(&h->orphans);
		h->orphan_listed = 0;
		n->nr_orphans--;
	}
	usl_unlock(&n->list_lock);
	slab->unused = NULL;
	usl_discard_slab(s, slab);
	retire(n, h);
}

/* Metadata blocks outlive their slabs: a remote free sets its bit and then
 * announces the slab (pending, the inbox), and the bit may make the slab
 * wholly free and discarded before the announce runs. So a discarded slab's
 * metadata is kept on its node's retired list (owner 0xffff: a drain that
 * meets it passes it by) and serves the cache's next new slab once no
 * announce holds it (pending clear); only destroy frees it. Type-stable, as
 * SLAB_TYPESAFE_BY_RCU objects are: at most the cache's peak slab count. */
static void retire(struct kmem_cache_node *n, struct usl_oslab *h)
{
	__atomic_store_n(&h->owner, 0xffff, __ATOMIC_RELEASE);
	usl_lock(&n->list_lock);
	usl_list_add_tail(&h->all, &n->retired);
	n->nr_retired++;
	usl_unlock(&n->list_lock);
}

static struct usl_oslab *retired_take(struct kmem_cache *s, unsigned int node)
{
	struct kmem_cache_node *n = s->node[node];
	struct usl_oslab *h = NULL;
	if (!__atomic_load_n(&n->nr_retired, __ATOMIC_RELAXED))
		return NULL;
	usl_lock(&n->list_lock);
	for (struct usl_list *it = n->retired.next; it != &n->retired; it = it->next) {
		struct usl_oslab *c = usl_container_of(it, struct usl_oslab, all);
		if (!__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE)) {
			usl_list_del(&c->all);
			n->nr_retired--;
			h = c;
			break;
		}
	}
	usl_unlock(&n->list_lock);
	return h;
}

void usl_oslab_free_retired(struct kmem_cache *s)
{
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		while (!usl_list_empty(&n->retired)) {
			struct usl_oslab *h = usl_container_of(n->retired.next, struct usl_oslab, all);
			usl_list_del(&h->all);
			n->nr_retired--;
			usl_slub_free(s->oslab_cache, usl_virt_to_slab(h), h);
		}
	}
}

/* h has no object in use and may be discarded: every bit set, and on no
 * slot's inbox (pending: a slot that gave it up may still hold it there; a
 * later merge discards it). Under list_lock, h an orphan. */
static bool wholly_free(struct usl_oslab *h)
{
	usl_assert_held(&usl_get_node(h->cache, usl_virt_to_slab(h->start))->list_lock);
	return !__atomic_load_n(&h->pending, __ATOMIC_ACQUIRE) && usl_oslab_free_count(h) == h->objects;
}

/* The object at bit `bit` of word k of h, for reports. */
static void *obj_at(const struct usl_oslab *h, unsigned int k, unsigned int bit)
{
	return h->start + ((size_t)k * 64 + bit) * h->cache->size;
}

void usl_oslab_report_double(const struct usl_oslab *h, const void *x, const char *fn)
{
	usl_refuse_double_free(fn, h->cache->name, x, NULL);
}

bool usl_oslab_merge(struct usl_oslab *h)
{
	uint64_t *remote = usl_oslab_remote(h), any = 0;
	for (unsigned int k = 0; k < h->nwords; k++) {
		uint64_t r = __atomic_load_n(&remote[k], __ATOMIC_RELAXED);
		if (r)
			r = __atomic_exchange_n(&remote[k], 0, __ATOMIC_ACQ_REL);
		uint64_t both = r & h->local[k];
		while (usl_unlikely(both)) {
			/* Freed here and on another CPU at once: one copy is kept. */
			usl_oslab_report_double(h, obj_at(h, k, (unsigned int)__builtin_ctzl(both)), "free");
			both &= both - 1;
		}
		h->local[k] |= r;
		any |= h->local[k];
	}
	return any != 0;
}

/* Tell h's owner (owner, as the chunk map gave it) that h has remote bits:
 * once per merge (pending), on its slot's inbox. */
void usl_oslab_announce(struct usl_oslab *h, unsigned int owner)
{
	if (__atomic_load_n(&h->pending, __ATOMIC_RELAXED) || __atomic_exchange_n(&h->pending, 1, __ATOMIC_SEQ_CST))
		return;
	struct usl_oslot *o = &h->slots[owner - 1];
	struct usl_oslab *head = __atomic_load_n(&o->inbox, __ATOMIC_RELAXED);
	do
		h->inbox_next = head;
	while (!__atomic_compare_exchange_n(&o->inbox, &head, h, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

void usl_oslab_free_remote(struct usl_oslab *h, unsigned int idx, unsigned int owner, const void *x, const char *fn)
{
	unsigned int k = idx >> 6;
	uint64_t b = 1UL << (idx & 63);
	if (__atomic_load_n(&h->local[k], __ATOMIC_RELAXED) & b) {
		usl_oslab_report_double(h, x, fn);
		return;
	}
	if (__atomic_fetch_or(&usl_oslab_remote(h)[k], b, __ATOMIC_SEQ_CST) & b) {
		usl_oslab_report_double(h, x, fn);
		return;
	}
	usl_oslab_announce(h, owner);
}

/* Put h, an orphan with free objects, on its node's orphan list. */
static void orphan_list(struct kmem_cache_node *n, struct usl_oslab *h)
{
	if (!h->orphan_listed) {
		usl_list_add_tail(&h->orphans, &n->orphans);
		h->orphan_listed = 1;
		n->nr_orphans++;
	}
}

static void orphan_unlist(struct kmem_cache_node *n, struct usl_oslab *h)
{
	if (h->orphan_listed) {
		usl_list_del(&h->orphans);
		h->orphan_listed = 0;
		n->nr_orphans--;
	}
}

int usl_oslab_free_orphan(struct usl_oslab *h, unsigned int idx, const void *x, const char *fn)
{
	struct kmem_cache *s = h->cache;
	struct kmem_cache_node *n = usl_get_node(s, h->slab);
	unsigned int k = idx >> 6;
	uint64_t b = 1UL << (idx & 63);
	bool discard = false;

	usl_lock(&n->list_lock);
	if (h->owner != 0) {
		usl_unlock(&n->list_lock);
		return -1;                   /* adopted (or given up) meanwhile: again */
	}
	if ((h->local[k] | __atomic_load_n(&usl_oslab_remote(h)[k], __ATOMIC_RELAXED)) & b) {
		usl_unlock(&n->list_lock);
		usl_oslab_report_double(h, x, fn);
		return 0;
	}
	h->local[k] |= b;
	orphan_list(n, h);
	if (n->nr_orphans > ORPHANS_KEPT && wholly_free(h)) {
		orphan_unlist(n, h);
		h->owner = 0xffff;           /* nobody's: on its way out */
		chunks_write(h, 0);
		discard = true;
	}
	usl_unlock(&n->list_lock);
	if (discard)
		usl_oslab_discard(s, h);
	return 0;
}

/* The first free object of h (its bit cleared), or NULL; for the holder of
 * h's local words. */
void *usl_oslab_take_one(struct usl_oslab *h)
{
	for (unsigned int k = 0; k < h->nwords; k++) {
		uint64_t w = h->local[k];
		if (w) {
			h->local[k] = w & (w - 1);
			return obj_at(h, k, (unsigned int)__builtin_ctzl(w));
		}
	}
	return NULL;
}

void *usl_oslab_alloc_orphan(struct kmem_cache *s, unsigned int node)
{
	struct kmem_cache_node *n = s->node[node];
	void *obj = NULL;

	/* A new orphan goes on the list with its owner (usl_oslab_new) and is
	 * found there: a shrink may discard it meanwhile, so a few rounds. */
	for (int round = 0; round < 4 && !obj; round++) {
		usl_lock(&n->list_lock);
		while (!obj && !usl_list_empty(&n->orphans)) {
			struct usl_oslab *h = usl_container_of(n->orphans.next, struct usl_oslab, orphans);
			usl_oslab_merge(h);
			obj = usl_oslab_take_one(h);
			if (!obj || !usl_oslab_free_count(h))
				orphan_unlist(n, h);
		}
		usl_unlock(&n->list_lock);
		if (!obj && !usl_oslab_new(s, node, 0))
			return NULL;
	}
	return obj;
}

struct usl_oslab *usl_oslab_adopt(struct kmem_cache *s, unsigned int node, unsigned int owner)
{
	struct kmem_cache_node *n = s->node[node];
	struct usl_oslab *h = NULL;

	usl_lock(&n->list_lock);
	while (!usl_list_empty(&n->orphans)) {
		h = usl_container_of(n->orphans.next, struct usl_oslab, orphans);
		orphan_unlist(n, h);
		usl_oslab_set_owner(h, owner);
		if (usl_oslab_merge(h))
			break;
		usl_oslab_set_owner(h, 0);   /* nothing free after all: a full orphan */
		h = NULL;
	}
	usl_unlock(&n->list_lock);
	return h;
}

/* h, owned until now (the caller holds its slot), becomes an orphan: its
 * remote bits merged, on the node's orphan list if it has free objects;
 * discarded if wholly free and discard allows (or the node keeps enough). */
void usl_oslab_orphan(struct kmem_cache *s, struct usl_oslab *h, bool discard_all)
{
	struct kmem_cache_node *n = usl_get_node(s, h->slab);
	bool discard = false;

	usl_lock(&n->list_lock);
	usl_oslab_set_owner(h, 0);
	h->listed = 0;
	if (usl_oslab_merge(h)) {
		if (wholly_free(h) && (discard_all || n->nr_orphans >= ORPHANS_KEPT)) {
			h->owner = 0xffff;
			chunks_write(h, 0);
			discard = true;
		} else {
			orphan_list(n, h);
		}
	}
	usl_unlock(&n->list_lock);
	if (discard)
		usl_oslab_discard(s, h);
}

/* A slab announced on a slot that does not own it any more: merged here if
 * it is an orphan, else announced to its owner now. */
void usl_oslab_reannounce(struct usl_oslab *h)
{
	struct kmem_cache_node *n = usl_get_node(h->cache, h->slab);
	usl_lock(&n->list_lock);
	unsigned int owner = h->owner;
	if (owner == 0) {
		if (usl_oslab_merge(h))
			orphan_list(n, h);
	} else if (owner != 0xffff) {
		usl_oslab_announce(h, owner);
	}
	usl_unlock(&n->list_lock);
}

/* Every owned slab of s owned by `owner`, for fn (with no lock held; fn may
 * orphan it). The list is walked under list_lock and the slabs collected
 * first. */
void usl_oslab_each_owned(struct kmem_cache *s, unsigned int owner, void (*fn)(struct kmem_cache *, struct usl_oslab *, void *),
                          void *arg)
{
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		for (;;) {
			struct usl_oslab *batch[64];
			unsigned int cnt = 0;
			usl_lock(&n->list_lock);
			for (struct usl_list *it = n->owned.next; it != &n->owned && cnt < 64; it = it->next) {
				struct usl_oslab *h = usl_container_of(it, struct usl_oslab, all);
				if (h->owner == owner)
					batch[cnt++] = h;
			}
			usl_unlock(&n->list_lock);
			for (unsigned int i = 0; i < cnt; i++)
				fn(s, batch[i], arg);
			if (cnt < 64)
				break;
		}
	}
}

/* Orphans of s that are wholly free: discarded (shrink, trim, destroy). */
void usl_oslab_discard_empty(struct kmem_cache *s)
{
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		for (;;) {
			struct usl_oslab *h = NULL;
			usl_lock(&n->list_lock);
			for (struct usl_list *it = n->orphans.next; it != &n->orphans; it = it->next) {
				struct usl_oslab *c = usl_container_of(it, struct usl_oslab, orphans);
				usl_oslab_merge(c);
				if (wholly_free(c)) {
					h = c;
					orphan_unlist(n, h);
					h->owner = 0xffff;
					chunks_write(h, 0);
					break;
				}
			}
			usl_unlock(&n->list_lock);
			if (!h)
				break;
			usl_oslab_discard(s, h);
		}
	}
}

unsigned long usl_oslab_in_use(struct kmem_cache *s)
{
	unsigned long used = 0;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct kmem_cache_node *n = s->node[nid];
		usl_lock(&n->list_lock);
		for (struct usl_list *it = n->owned.next; it != &n->owned; it = it->next) {
			struct usl_oslab *h = usl_container_of(it, struct usl_oslab, all);
			unsigned int fr = 0;
			uint64_t *remote = usl_oslab_remote(h);
			for (unsigned int k = 0; k < h->nwords; k++)
				fr += (unsigned int)__builtin_popcountl(__atomic_load_n(&h->local[k], __ATOMIC_RELAXED) |
				                                        __atomic_load_n(&remote[k], __ATOMIC_RELAXED));
			used += h->objects - fr;
		}
		usl_unlock(&n->list_lock);
	}
	return used;
}

bool usl_oslab_release(struct kmem_cache *s)
{
	usl_oslab_discard_empty(s);
	unsigned long left = 0;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		left += __atomic_load_n(&s->node[nid]->nr_owned, __ATOMIC_RELAXED);
	return left != 0;
}

/* The owned front end's node counts, as SLUB's for slabinfo: an owned slab
 * counts as active with all its objects (the kernel's frozen cpu slabs do
 * too); orphans with free objects are the partial slabs. */
void usl_oslab_node_counts(struct kmem_cache *s, unsigned int nid, struct usl_node_counts *out)
{
	struct kmem_cache_node *n = s->node[nid];
	usl_lock(&n->list_lock);
	out->nr_partial = n->nr_orphans;
	for (struct usl_list *it = n->orphans.next; it != &n->orphans; it = it->next) {
		struct usl_oslab *h = usl_container_of(it, struct usl_oslab, orphans);
		unsigned int fr = usl_oslab_free_count(h);
		out->partial_free += fr;
		out->partial_inuse += h->objects - fr;
	}
	out->nr_slabs = __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
	out->total_objects = __atomic_load_n(&n->total_objects, __ATOMIC_RELAXED);
	usl_unlock(&n->list_lock);
}
