/* pages.c - the page provider: start-up, the reserved range, the struct slab
 * table and the page map, buddy blocks of 2^order pages, and giving free blocks
 * back to the OS (madvise). Locks: start_lock (start-up), pages_lock (only
 * large.c's map_lock is taken inside it). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../testing.h"
#include "pages.h"

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
uintptr_t usl_top;               /* bytes of the range carved so far */
static size_t free_dirty_pages, free_clean_pages;   /* under pages_lock; peeked by usl_pages_short */
static inline void count_add(size_t *c, long d) { __atomic_store_n(c, *c + (size_t)d, __ATOMIC_RELAXED); }
static size_t nr_free_blocks[USL_MAX_ORDER + 1];    /* per order, under pages_lock; peeked */
static size_t nr_dirty_blocks[USL_MAX_ORDER + 1];   /* per order, under pages_lock */
static uint64_t last_decay_check;
static long fail_after = -1;

/* Free blocks live in bitmaps, not in the table: every table and page-map
 * entry of a free block is in the free state (which zeros also mean), so
 * purging it gives back every whole page of them. Each region (one largest
 * block, 2^USL_MAX_ORDER pages) has, for every order k, one bit per naturally
 * aligned block of 2^k pages in each of four maps: free, dirty (free and touched since its last purge), and
 * young[0..1] (dirty and freed in the current or the previous decay epoch).
 * Order k's bits start at RB_OFF(k); 2^(USL_MAX_ORDER + 1) - 1 bits a map, 1 KiB
 * a region for all four. Per order and map (free, dirty), one summary bit per
 * region says whether it has such a block: an allocation takes the lowest
 * dirty block of the smallest order that fits, else the lowest clean one, so
 * live blocks pack towards the range's start. All under pages_lock. */
#define RB_BLOCKS ((size_t)1 << USL_MAX_ORDER)
#define RB_WORDS (2 * RB_BLOCKS / 64)
#define RB_OFF(k) (2 * RB_BLOCKS - ((2 * RB_BLOCKS) >> (k)))
#define RB_TABLE_PAGES ((sizeof(struct slab) << USL_MAX_ORDER) / 4096)  /* table pages a region, at most */
struct region_bits {
	uint64_t free[RB_WORDS];
	uint64_t dirty[RB_WORDS];
	uint64_t young[2][RB_WORDS];
	uint16_t heads[RB_TABLE_PAGES];   /* per table page: allocated blocks with their head entry there */
	uint32_t tables_idle;             /* table pages that had heads and have none now */
};
enum { MAP_FREE, MAP_DIRTY, MAP_OLD };  /* MAP_OLD: dirty, in no young map */
/* Regions of the largest range with the smallest page (usl_pages_init refuses
 * pages below 4 KiB), 64 a summary word. */
#define SUM_WORDS ((USL_RANGE_DEFAULT >> (12 + USL_MAX_ORDER)) / 64)
static struct region_bits *rbits;
static uint64_t summary[SUM_WORDS][USL_MAX_ORDER + 1][2];   /* [region / 64][order][MAP_FREE or MAP_DIRTY] */
static uint64_t epoch_start;     /* when young[0] began collecting */

static inline size_t nr_regions(void) { return usl_top >> (usl_page_shift + USL_MAX_ORDER); }
static inline size_t rb_bit(size_t pfn, unsigned int k) { return RB_OFF(k) + ((pfn & (RB_BLOCKS - 1)) >> k); }
static inline bool bit_test(const uint64_t *w, size_t b) { return (w[b / 64] >> (b % 64)) & 1; }
static inline void bit_set(uint64_t *w, size_t b) { w[b / 64] |= 1ULL << (b % 64); }
static inline void bit_clear(uint64_t *w, size_t b) { w[b / 64] &= ~(1ULL << (b % 64)); }

/* The region's table page (0..RB_TABLE_PAGES-1) holding the head entry of the
 * block at pfn. */
static inline size_t table_page(size_t pfn)
{
	return ((usl_table_index(pfn) & (RB_BLOCKS - 1)) * sizeof(struct slab)) >> usl_page_shift;
}

/* A block with its head at pfn was handed out (+1) or freed (-1). */
static void count_head(size_t pfn, int d)
{
	struct region_bits *r = &rbits[pfn >> USL_MAX_ORDER];
	size_t tp = table_page(pfn);
	if (d > 0) {
		r->heads[tp]++;
		r->tables_idle &= ~(1U << tp);
	} else if (--r->heads[tp] == 0) {
		r->tables_idle |= 1U << tp;
	}
}

static uint64_t map_word(const struct region_bits *r, int map, size_t w)
{
	switch (map) {
	case MAP_FREE: return r->free[w];
	case MAP_DIRTY: return r->dirty[w];
	default: return r->dirty[w] & ~r->young[0][w] & ~r->young[1][w];
	}
}

/* The index of the first block of order k at or after index from that is set in
 * the map, or -1. */
static long slice_next(const struct region_bits *r, int map, unsigned int k, size_t from)
{
	size_t s = RB_OFF(k), e = s + (RB_BLOCKS >> k);
	for (size_t b = s + from; b < e; b = (b | 63) + 1) {
		uint64_t m = map_word(r, map, b / 64) & (~0ULL << (b % 64));
		if (e < (b | 63) + 1)
			m &= (1ULL << (e % 64)) - 1;
		if (m)
			return (long)(b / 64 * 64 + (size_t)__builtin_ctzll(m) - s);
	}
	return -1;
}

static void summary_update(size_t region, unsigned int k, int map)
{
	uint64_t bit = 1ULL << (region % 64), *w = &summary[region / 64][k][map];
	if (slice_next(&rbits[region], map, k, 0) >= 0)
		*w |= bit;
	else
		*w &= ~bit;
}

/* Mark the block of order k at pfn free; young: 0 none, 1 the previous epoch,
 * 2 the current one (dirty blocks only). */
static void mark_free(size_t pfn, unsigned int k, bool dirty, int young)
{
	size_t region = pfn >> USL_MAX_ORDER, b = rb_bit(pfn, k);
	struct region_bits *r = &rbits[region];
	bit_set(r->free, b);
	summary[region / 64][k][MAP_FREE] |= 1ULL << (region % 64);
	count_add(&nr_free_blocks[k], 1);
	if (dirty) {
		bit_set(r->dirty, b);
		if (young)
			bit_set(r->young[2 - young], b);
		summary[region / 64][k][MAP_DIRTY] |= 1ULL << (region % 64);
		nr_dirty_blocks[k]++;
		count_add(&free_dirty_pages, (long)(1UL << k));
	} else {
		count_add(&free_clean_pages, (long)(1UL << k));
	}
}

/* The dirty free block of order k at pfn off the dirty and young maps (it
 * stays free). */
static void clear_dirty(size_t pfn, unsigned int k)
{
	size_t region = pfn >> USL_MAX_ORDER, b = rb_bit(pfn, k);
	struct region_bits *r = &rbits[region];
	bit_clear(r->dirty, b);
	bit_clear(r->young[0], b);
	bit_clear(r->young[1], b);
	summary_update(region, k, MAP_DIRTY);
	nr_dirty_blocks[k]--;
	count_add(&free_dirty_pages, -(long)(1UL << k));
}

/* Take the free block of order k at pfn off the maps; *young as for mark_free.
 * Returns whether it was dirty. */
static bool unmark_free(size_t pfn, unsigned int k, int *young)
{
	size_t region = pfn >> USL_MAX_ORDER, b = rb_bit(pfn, k);
	struct region_bits *r = &rbits[region];
	bool dirty = bit_test(r->dirty, b);
	*young = bit_test(r->young[0], b) ? 2 : bit_test(r->young[1], b) ? 1 : 0;
	bit_clear(r->free, b);
	summary_update(region, k, MAP_FREE);
	count_add(&nr_free_blocks[k], -1);
	if (dirty)
		clear_dirty(pfn, k);
	else
		count_add(&free_clean_pages, -(long)(1UL << k));
	return dirty;
}

static inline bool is_free(size_t pfn, unsigned int k)
{
	return bit_test(rbits[pfn >> USL_MAX_ORDER].free, rb_bit(pfn, k));
}

/* The lowest block of order k in the map (MAP_FREE or MAP_DIRTY): its pfn, or
 * -1. */
static long lowest_block(unsigned int k, int map)
{
	size_t nsum = (nr_regions() + 63) / 64;
	for (size_t sw = 0; sw < nsum; sw++) {
		uint64_t m = summary[sw][k][map];
		if (m) {
			size_t region = sw * 64 + (size_t)__builtin_ctzll(m);
			long i = slice_next(&rbits[region], map, k, 0);
			if (i >= 0)
				return (long)((region << USL_MAX_ORDER) + ((size_t)i << k));
		}
	}
	return -1;
}

static int pages_init(void)
{
	long ps = (long)usl_os_page_size();
	size_t max_block;
	void *r, *t, *pm = NULL;

	if (ps <= 0 || (ps & (ps - 1)) || ps < 4096)
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
			if (pm != MAP_FAILED) {
				rbits = mmap(NULL, (usl_range / max_block) * sizeof(struct region_bits), PROT_READ | PROT_WRITE,
				             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
				if (rbits != MAP_FAILED)
					break;
				munmap(pm, (usl_range >> usl_page_shift) * sizeof(struct usl_pagemap_entry));
			}
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
	epoch_start = last_decay_check = usl_now_ms();
	return 0;
}

int usl_inited;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void usl_init(void)
{
	usl_platform_init();
	pthread_mutex_lock(&start_lock);
	if (!usl_inited) {
		if (pages_init() != 0) {
			pthread_mutex_unlock(&start_lock);
			usl_report(USLAB_ERR_NOMEM, "cannot reserve 256 MiB of address space; aborting");
			abort();
		}
		__atomic_store_n(&usl_inited, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_lock);
}

void usl_pages_fork_lock(void) { pthread_mutex_lock(&pages_lock); }
void usl_pages_fork_unlock(void) { pthread_mutex_unlock(&pages_lock); }

void usl_pages_fail_after(long n)
{
	pthread_mutex_lock(&pages_lock);
	fail_after = n;
	pthread_mutex_unlock(&pages_lock);
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
	size_t pfn = usl_top >> usl_page_shift;
	e = &usl_table[pfn];               /* a region's entries are its table slice (reordered) */
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
	/* Fresh pages read as zeros, the state of every entry of a free block: the
	 * slices are touched only as blocks are handed out, not 72 KiB at once. */
	__atomic_store_n(&usl_top, usl_top + bytes, __ATOMIC_RELEASE);
	mark_free(pfn, USL_MAX_ORDER, false, 0);
	return true;
}

void *usl_pages_alloc(unsigned int order, enum usl_page_kind kind)
{
	return usl_pages_alloc_z(order, kind, NULL);
}

/* The block to split for an allocation of this order: the lowest dirty block of
 * the smallest order that fits (its pages are resident already), else the
 * lowest clean one; *k its order. -1 if there is none. */
static long find_block(unsigned int order, unsigned int *k)
{
	for (int map = MAP_DIRTY; map >= MAP_FREE; map--)
		for (*k = order; *k <= USL_MAX_ORDER; (*k)++)
			if (map == MAP_DIRTY ? nr_dirty_blocks[*k] : nr_free_blocks[*k]) {
				long pfn = lowest_block(*k, map);
				if (pfn >= 0)
					return pfn;
			}
	return -1;
}

void *usl_pages_alloc_z(unsigned int order, enum usl_page_kind kind, bool *zeroed)
{
	unsigned int k;
	long found;

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
	while ((found = find_block(order, &k)) < 0)
		if (!grow()) {
			pthread_mutex_unlock(&pages_lock);
			return NULL;
		}
	size_t pfn = (size_t)found;
	int young;
	bool dirty = unmark_free(pfn, k, &young);
	if (zeroed)
		*zeroed = !dirty;            /* never touched, or given back with madvise */
	/* Split: the upper halves stay free. */
	while (k > order) {
		k--;
		mark_free(pfn + ((size_t)1 << k), k, dirty, young);
	}
	struct slab *e = &usl_table[usl_table_index(pfn)];
	size_t n = (size_t)1 << order;
	for (size_t i = 0; i < n; i++)
		usl_pm_write(&usl_pagemap[pfn + i], (uint32_t)(pfn << usl_page_shift), 0, 0);
	count_head(pfn, 1);
	e->slab_cache = NULL;
	e->kind = (uint8_t)kind;
	e->order = (uint8_t)order;
	e->addr = usl_slab_address(e);
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

/* A purged free block's page-map entries go back to the OS too (8 KiB for a
 * largest block): they are all in their free state, which zeros also mean (no
 * cache). A start of 0 only points a stray pointer's lookup at another block,
 * and the paths that take such pointers check the block they get (kind and
 * address). Under pages_lock. */
static void release_entries(size_t pfn, unsigned int order)
{
	size_t n = (size_t)1 << order;
	zero_pages(&usl_pagemap[pfn], &usl_pagemap[pfn + n]);
}

/* The region's table pages that hold no allocated block's head entry go back
 * to the OS at each purge: every entry on them is in the free state
 * (USL_PAGE_UNUSED, which zeros also mean). Not after a decay interval, as
 * blocks: purges come at most every decay/4, and a page that gets a head again
 * costs one fault, while holding them kept churn's RSS after its frees 0.4 MB
 * up (1.06 of before -> 1.31). Under pages_lock. */
static void release_tables(size_t region)
{
	struct region_bits *r = &rbits[region];
	uint32_t m = r->tables_idle;
	r->tables_idle = 0;
	for (; m; m &= m - 1) {
		char *t = (char *)&usl_table[region << USL_MAX_ORDER] + ((size_t)__builtin_ctz(m) << usl_page_shift);
		madvise(t, usl_page_size, MADV_DONTNEED);
	}
}

/* Start a new decay epoch once half an interval has passed: the current young
 * map becomes the previous one, and blocks in neither are old. So a dirty block
 * turns old between half an interval and a whole one after its free. */
static void roll_epochs(uint64_t now)
{
	unsigned int half = usl_opt.decay_ms / 2;
	if (now - epoch_start < half)
		return;
	bool both = now - epoch_start >= 2 * (uint64_t)half;
	epoch_start = now;
	for (size_t region = 0; region < nr_regions(); region++) {
		struct region_bits *r = &rbits[region];
		for (size_t w = 0; w < RB_WORDS; w++) {
			uint64_t y0 = r->young[0][w];
			if (both ? y0 | r->young[1][w] : y0 != r->young[1][w])
				r->young[1][w] = both ? 0 : y0;
			if (y0)
				r->young[0][w] = 0;
		}
	}
}

/* madvise the old dirty free blocks (all of them with all), and their entries.
 * Keeps errno: free() may end here, and free must not change it. */
static size_t purge_locked(bool all, uint64_t now)
{
	size_t bytes = 0;
	int saved_errno = errno;

	if (usl_opt.decay_ms == 0)
		all = true;
	else
		roll_epochs(now);
	for (unsigned int k = 0; k <= USL_MAX_ORDER; k++) {
		if (!nr_dirty_blocks[k])
			continue;
		size_t nsum = (nr_regions() + 63) / 64;
		for (size_t sw = 0; sw < nsum; sw++) {
			for (uint64_t m = summary[sw][k][MAP_DIRTY]; m; m &= m - 1) {
				size_t region = sw * 64 + (size_t)__builtin_ctzll(m);
				struct region_bits *r = &rbits[region];
				long i = -1;
				while ((i = slice_next(r, all ? MAP_DIRTY : MAP_OLD, k, (size_t)(i + 1))) >= 0) {
					size_t pfn = (region << USL_MAX_ORDER) + ((size_t)i << k), len = usl_page_size << k;
					if (madvise((void *)(usl_base + (pfn << usl_page_shift)), len, MADV_DONTNEED) != 0)
						continue;
					clear_dirty(pfn, k);
					count_add(&free_clean_pages, (long)(1UL << k));
					release_entries(pfn, k);
					bytes += len;
				}
			}
		}
	}
	for (size_t region = 0; region < nr_regions(); region++)
		release_tables(region);
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
	pfn = usl_slab_pfn(e);
	/* A new epoch first, so what this free marks young stays young for it. */
	if (usl_opt.decay_ms)
		roll_epochs(now);
	n = (size_t)1 << order;
	/* Every entry to the free state: a page of its own, no cache, and the
	 * head unused (a purge turns this into zeros, which mean the same but for
	 * start). */
	for (size_t i = 0; i < n; i++)
		usl_pm_write(&usl_pagemap[pfn + i], (uint32_t)((pfn + i) << usl_page_shift), 0, 0);
	e->kind = USL_PAGE_UNUSED;
	e->slab_cache = NULL;
	count_head(pfn, -1);
	/* Blocks the decay sweep frees held objects nobody used for an interval:
	 * they are old at once, so the sweep's purge returns them. */
	int young = dirty && !usl_pages_aging ? 2 : 0;
	/* Merge with free buddies of the same order. */
	while (order < USL_MAX_ORDER) {
		size_t bpfn = pfn ^ ((size_t)1 << order);
		if ((bpfn << usl_page_shift) >= usl_top || !is_free(bpfn, order))
			break;
		int byoung;
		if (unmark_free(bpfn, order, &byoung)) {
			dirty = true;
			if (byoung > young)
				young = byoung;
		}
		pfn &= ~((size_t)1 << order);
		order++;
	}
	mark_free(pfn, order, dirty, young);
	if (!dirty) {                        /* madvised by the caller: its entries go too */
		int saved_errno = errno;
		release_entries(pfn, order);
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

void *usl_meta_alloc(size_t size)
{
	unsigned int order = usl_bytes_order(size);
	void *p;

	if (order > USL_MAX_ORDER)
		return NULL;
	p = usl_pages_alloc(order, USL_PAGE_INTERNAL);
	if (p)
		memset(p, 0, size);
	return p;
}

void usl_meta_free(void *p)
{
	usl_pages_free(p);
}
