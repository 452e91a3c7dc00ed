/* pages.c - the page provider: the reserved range, the struct slab table, buddy
 * blocks of 2^order pages, and giving free blocks back to the OS (madvise).
 * Locks: pages_lock, the innermost lock of the library. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define USL_RANGE_DEFAULT (64UL << 30)  /* 64 GiB of address space ... */
#define USL_RANGE_MIN (256UL << 20)     /* ... or at least 256 MiB */

uintptr_t usl_base;
uintptr_t usl_range;
struct slab *usl_table;
struct usl_pagemap_entry *usl_pagemap;
__thread bool usl_pages_aging;
unsigned int usl_page_shift;
size_t usl_page_size;

static pthread_mutex_t pages_lock = PTHREAD_MUTEX_INITIALIZER;
static struct usl_list free_area[USL_MAX_ORDER + 1];
uintptr_t usl_top;               /* bytes of the range carved so far */
static size_t free_dirty_pages, free_clean_pages;   /* under pages_lock; peeked by usl_pages_short */
static inline void count_add(size_t *c, long d) { __atomic_store_n(c, *c + (size_t)d, __ATOMIC_RELAXED); }
static size_t nr_free_blocks[USL_MAX_ORDER + 1];   /* per order, under pages_lock; peeked */
static uint64_t last_decay_check;
/* Purged free blocks of the largest order are kept off free_area[], by page
 * number on this stack, so that their whole table and page-map slices (80 KiB
 * per 4 MiB block) go back to the OS with them; taking one writes its entries
 * again (revive). They still count as free clean blocks. Under pages_lock. */
static uint32_t *clean_max;
static size_t nr_clean_max;
static long fail_after = -1;

static inline size_t pfn_of(const struct slab *e) { return (size_t)(e - usl_table); }

int usl_pages_init(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t max_block;
	void *r, *t, *pm = NULL;

	if (ps <= 0 || (ps & (ps - 1)))
		return -1;
	usl_page_size = (size_t)ps;
	usl_page_shift = (unsigned int)__builtin_ctzl((unsigned long)ps);
	max_block = usl_page_size << USL_MAX_ORDER;

	/* Reserve the range with room to align it to the largest block. Where
	 * address space is limited (valgrind, ulimit -v) take a smaller one. */
	for (usl_range = USL_RANGE_DEFAULT;; usl_range /= 4) {
		if (usl_range < USL_RANGE_MIN)
			return -1;
		r = mmap(NULL, usl_range + max_block, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED)
			continue;
		t = mmap(NULL, (usl_range >> usl_page_shift) * sizeof(struct slab), PROT_NONE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (t != MAP_FAILED) {
			pm = mmap(NULL, (usl_range >> usl_page_shift) * sizeof(struct usl_pagemap_entry), PROT_NONE,
			          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (pm != MAP_FAILED)
				break;
			munmap(t, (usl_range >> usl_page_shift) * sizeof(struct slab));
		}
		munmap(r, usl_range + max_block);
	}
	usl_base = USL_ALIGN((uintptr_t)r, max_block);
	if (usl_base > (uintptr_t)r)
		munmap(r, usl_base - (uintptr_t)r);
	munmap((void *)(usl_base + usl_range), (uintptr_t)r + max_block - usl_base);

	usl_table = t;
	usl_pagemap = pm;
	clean_max = mmap(NULL, (usl_range / max_block) * sizeof(uint32_t), PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (clean_max == MAP_FAILED)
		clean_max = NULL;             /* then purged blocks stay on the lists */
	for (int i = 0; i <= USL_MAX_ORDER; i++)
		usl_list_init(&free_area[i]);
	last_decay_check = usl_now_ms();
	return 0;
}

void usl_pages_fork_lock(void) { pthread_mutex_lock(&pages_lock); }
void usl_pages_fork_unlock(void) { pthread_mutex_unlock(&pages_lock); }

void usl_pages_fail_after(long n)
{
	pthread_mutex_lock(&pages_lock);
	fail_after = n;
	pthread_mutex_unlock(&pages_lock);
}

static void set_free_head(struct slab *e, unsigned int order, bool dirty, uint64_t when)
{
	e->kind = USL_PAGE_FREE;
	e->order = (uint8_t)order;
	e->dirty = dirty;
	e->counters = when;  /* free blocks keep the time they were freed here */
	usl_list_add_head(&e->slab_list, &free_area[order]);
	count_add(&nr_free_blocks[order], 1);
	if (dirty)
		count_add(&free_dirty_pages, (long)(1UL << order));
	else
		count_add(&free_clean_pages, (long)(1UL << order));
}

static void take_free_block(struct slab *e)
{
	usl_list_del(&e->slab_list);
	count_add(&nr_free_blocks[e->order], -1);
	if (e->dirty)
		count_add(&free_dirty_pages, -(long)(1UL << e->order));
	else
		count_add(&free_clean_pages, -(long)(1UL << e->order));
	e->kind = USL_PAGE_UNUSED;
}

/* A largest block from the clean stack back on its free list (its zeroed
 * entries are in their free state). */
static void revive(void)
{
	struct slab *e = &usl_table[clean_max[--nr_clean_max]];
	count_add(&nr_free_blocks[USL_MAX_ORDER], -1);       /* set_free_head counts it again */
	count_add(&free_clean_pages, -(long)(1UL << USL_MAX_ORDER));
	set_free_head(e, USL_MAX_ORDER, false, 0);
}

/* Carve one more largest block from the reserved range: commit it and its table slice. */
static bool grow(void)
{
	size_t bytes = usl_page_size << USL_MAX_ORDER;
	size_t npages = (size_t)1 << USL_MAX_ORDER;
	struct slab *e;

	if (usl_top + bytes > usl_range)
		return false;
	if (mprotect((void *)(usl_base + usl_top), bytes, PROT_READ | PROT_WRITE) != 0)
		return false;
	e = &usl_table[usl_top >> usl_page_shift];
	/* The table slice may share OS pages with the previous one: round outwards. */
	uintptr_t ts = (uintptr_t)e & ~(usl_page_size - 1);
	uintptr_t te = USL_ALIGN((uintptr_t)(e + npages), usl_page_size);
	if (mprotect((void *)ts, te - ts, PROT_READ | PROT_WRITE) != 0)
		return false;
	struct usl_pagemap_entry *m = &usl_pagemap[usl_top >> usl_page_shift];
	ts = (uintptr_t)m & ~(usl_page_size - 1);
	te = USL_ALIGN((uintptr_t)(m + npages), usl_page_size);
	if (mprotect((void *)ts, te - ts, PROT_READ | PROT_WRITE) != 0)
		return false;
	/* Fresh pages read as zeros, the free state of every entry but a free
	 * block's head (set below): the slices are touched only as blocks are
	 * handed out, not 80 KiB at once. */
	__atomic_store_n(&usl_top, usl_top + bytes, __ATOMIC_RELEASE);
	set_free_head(e, USL_MAX_ORDER, false, 0);
	return true;
}

void *usl_pages_alloc(unsigned int order, enum usl_page_kind kind)
{
	return usl_pages_alloc_z(order, kind, NULL);
}

void *usl_pages_alloc_z(unsigned int order, enum usl_page_kind kind, bool *zeroed)
{
	struct slab *e = NULL;
	unsigned int k;

	if (order > USL_MAX_ORDER)
		return NULL;
	pthread_mutex_lock(&pages_lock);
	if (usl_unlikely(fail_after >= 0)) {
		if (fail_after == 0) {
			pthread_mutex_unlock(&pages_lock);
			return NULL;
		}
		fail_after--;
	}
	for (;;) {
		for (k = order; k <= USL_MAX_ORDER; k++)
			if (!usl_list_empty(&free_area[k]))
				break;
		if (k <= USL_MAX_ORDER)
			break;
		if (nr_clean_max) {
			revive();
			continue;
		}
		if (!grow()) {
			pthread_mutex_unlock(&pages_lock);
			return NULL;
		}
	}
	e = usl_container_of(free_area[k].next, struct slab, slab_list);
	bool dirty = e->dirty;
	uint64_t when = e->counters;
	if (zeroed)
		*zeroed = !dirty;            /* never touched, or given back with madvise */
	take_free_block(e);
	/* Split: the upper halves go back on the free lists. */
	while (k > order) {
		k--;
		set_free_head(e + ((size_t)1 << k), k, dirty, when);
	}
	size_t n = (size_t)1 << order;
	for (size_t i = 0; i < n; i++) {
		usl_pagemap[pfn_of(e) + i].start = (uint32_t)(pfn_of(e) << usl_page_shift);
		e[i].head = e;
		e[i].kind = USL_PAGE_TAIL;
		e[i].slab_cache = NULL;
	}
	e->kind = (uint8_t)kind;
	e->order = (uint8_t)order;
	e->addr = usl_slab_address(e);
	e->dirty = 0;
	e->freelist = NULL;
	e->counters = 0;
	e->node_partial = 0;
	e->next = NULL;
	e->slabs = 0;
	pthread_mutex_unlock(&pages_lock);
	return usl_slab_address(e);
}

/* madvise the whole OS pages of [from, to): they read as zeros afterwards. */
static void zero_pages(void *from, void *to)
{
	uintptr_t a = USL_ALIGN((uintptr_t)from, usl_page_size), b = (uintptr_t)to & ~(usl_page_size - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/* A purged free block's table and page-map entries go back to the OS too (a
 * 4 MiB block has 64 KiB of table and 16 KiB of map). All but the head's are
 * in their free state, which zeros also mean (USL_PAGE_UNUSED, no owner): a
 * page map start of 0 only points a stray pointer's lookup at another block,
 * and the paths that take such pointers check the block they get (kind and
 * address). The table page holding the head entry stays: it is on a free
 * list. Its page-map entry is needed by nothing but stray lookups, so all of
 * the map's pages go. Under pages_lock. */
static void purge_entries(struct slab *e, unsigned int order, bool with_head)
{
	size_t pfn = pfn_of(e), n = (size_t)1 << order;
	zero_pages(e + (with_head ? 0 : 1), e + n);
	zero_pages(&usl_pagemap[pfn], &usl_pagemap[pfn + n]);
}

/* A clean free block e of order k (on its free list) gives back its entries:
 * a largest one moves to the clean stack with all of them, a smaller one keeps
 * the pages holding its head entry. Under pages_lock. */
static void release_entries(struct slab *e, unsigned int k)
{
	bool off_list = k == USL_MAX_ORDER && clean_max;
	if (off_list) {
		usl_list_del(&e->slab_list);       /* still counted as free */
		clean_max[nr_clean_max++] = (uint32_t)pfn_of(e);
	}
	purge_entries(e, k, off_list);
}

/* Keeps errno: free() may end here, and free must not change it. */
static size_t purge_locked(bool all, uint64_t now)
{
	size_t bytes = 0;
	int saved_errno = errno;

	for (int k = 0; k <= USL_MAX_ORDER; k++) {
		struct usl_list *it, *next;
		for (it = free_area[k].next; it != &free_area[k]; it = next) {
			struct slab *e = usl_container_of(it, struct slab, slab_list);
			next = it->next;
			if (!e->dirty || (!all && now - e->counters < usl_opt.decay_ms))
				continue;
			size_t len = usl_page_size << k;
			if (madvise(usl_slab_address(e), len, MADV_DONTNEED) == 0) {
				e->dirty = 0;
				count_add(&free_dirty_pages, -(long)(1UL << k));
				count_add(&free_clean_pages, (long)(1UL << k));
				bytes += len;
				release_entries(e, (unsigned int)k);
			}
		}
	}
	errno = saved_errno;
	return bytes;
}

/* Free the block at addr; with need_kind >= 0 only if addr starts a block of
 * that kind (checked under the lock). A clean block (madvised by the caller)
 * stays clean unless it merges with a dirty buddy. */
static bool free_block_as(void *addr, int need_kind, bool dirty)
{
	struct slab *e;
	unsigned int order;
	size_t pfn, n;
	uint64_t now = usl_now_ms();

	pthread_mutex_lock(&pages_lock);
	e = usl_virt_to_slab(addr);
	if (!e || (need_kind >= 0 && (e->kind != need_kind || e->addr != (char *)addr))) {
		pthread_mutex_unlock(&pages_lock);
		return false;
	}
	order = e->order;
	pfn = pfn_of(e);
	n = (size_t)1 << order;
	for (size_t i = 0; i < n; i++) {
		usl_pagemap[pfn + i].start = (uint32_t)((pfn + i) << usl_page_shift);
		__atomic_store_n(&usl_pagemap[pfn + i].objects, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&usl_pagemap[pfn + i].owner, 0, __ATOMIC_RELAXED);
		e[i].head = &e[i];
		e[i].kind = USL_PAGE_UNUSED;
		e[i].slab_cache = NULL;
	}
	/* Merge with free buddies of the same order. */
	while (order < USL_MAX_ORDER) {
		size_t bpfn = pfn ^ ((size_t)1 << order);
		struct slab *b = &usl_table[bpfn];
		if ((bpfn << usl_page_shift) >= usl_top || b->kind != USL_PAGE_FREE || b->order != order)
			break;
		dirty |= b->dirty;
		take_free_block(b);
		pfn &= ~((size_t)1 << order);
		order++;
	}
	/* Blocks the decay sweep frees held objects nobody used for an interval:
	 * they count as that old, so the sweep's purge returns them at once. */
	uint64_t when = usl_pages_aging && now >= usl_opt.decay_ms ? now - usl_opt.decay_ms : now;
	set_free_head(&usl_table[pfn], order, dirty, when);
	if (!dirty) {                        /* madvised by the caller: its entries go too */
		int saved_errno = errno;
		release_entries(&usl_table[pfn], order);
		errno = saved_errno;
	}
	if (now - last_decay_check >= usl_opt.decay_ms / 4 + 1) {
		last_decay_check = now;
		purge_locked(false, now);
	}
	pthread_mutex_unlock(&pages_lock);
	return true;
}

static bool free_block(void *addr, int need_kind)
{
	return free_block_as(addr, need_kind, true);
}

void usl_pages_free(void *addr)
{
	free_block(addr, -1);
}

/* A large block bigger than this (and than any freed before: glibc's dynamic
 * mmap threshold) is given back to the OS as it is freed, not after the decay
 * interval: a program growing a buffer or table step by step frees each old
 * one once, and waiting would hold them all at its peak. Repeated sizes stay
 * with the decay. Under pages_lock. */
static size_t purge_at_free = 256 * 1024;

bool usl_pages_free_large(void *addr)
{
	pthread_mutex_lock(&pages_lock);
	struct slab *e = usl_virt_to_slab(addr);
	if (!e || e->kind != USL_PAGE_LARGE || e->addr != (char *)addr) {
		pthread_mutex_unlock(&pages_lock);
		return false;
	}
	size_t len = usl_order_bytes(e->order);
	if (len <= purge_at_free) {
		pthread_mutex_unlock(&pages_lock);
		return free_block(addr, USL_PAGE_LARGE);   /* checks again: a racing free loses */
	}
	e->kind = USL_PAGE_INTERNAL;        /* ours now: a second free of addr is refused */
	pthread_mutex_unlock(&pages_lock);
	int saved_errno = errno;
	bool clean = madvise(addr, len, MADV_DONTNEED) == 0;
	errno = saved_errno;
	if (clean) {
		pthread_mutex_lock(&pages_lock);
		if (len > purge_at_free)
			purge_at_free = len;
		pthread_mutex_unlock(&pages_lock);
	}
	return free_block_as(addr, -1, !clean);
}

size_t usl_pages_purge(bool all)
{
	size_t bytes;

	pthread_mutex_lock(&pages_lock);
	bytes = purge_locked(all, usl_now_ms());
	pthread_mutex_unlock(&pages_lock);
	return bytes;
}

void usl_pages_stats(size_t *committed, size_t *free_dirty, size_t *free_clean)
{
	pthread_mutex_lock(&pages_lock);
	if (committed)
		*committed = usl_top;
	if (free_dirty)
		*free_dirty = free_dirty_pages << usl_page_shift;
	if (free_clean)
		*free_clean = free_clean_pages << usl_page_shift;
	pthread_mutex_unlock(&pages_lock);
}

/* Would an allocation of this order have to grow the committed range (no free
 * block that large)? A racy peek at the per-order counts, for callers deciding
 * whether to reclaim first. */
bool usl_pages_short(unsigned int order)
{
	for (unsigned int k = order; k <= USL_MAX_ORDER; k++)
		if (__atomic_load_n(&nr_free_blocks[k], __ATOMIC_RELAXED))
			return false;
	return true;
}

size_t usl_pages_release(void)
{
	usl_ensure_init();
	return usl_pages_purge(true);
}
