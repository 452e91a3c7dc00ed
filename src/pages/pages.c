/* pages.c - the page provider: start-up, the reserved range, the struct slab
 * table and the page map, buddy blocks of 2^order pages, and giving free blocks
 * back to the OS (madvise); reserving the range is range.c's. Locks: start_lock (start-up), pages_lock (only
 * large.c's mappings_lock is taken inside it). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../testing.h"
#include "pages.h"

struct slab *usl_table;
struct usl_pagemap_entry *usl_pagemap;
uint64_t *usl_ochunk;
__thread bool usl_pages_aging;

static pthread_mutex_t pages_lock = PTHREAD_MUTEX_INITIALIZER;
uintptr_t usl_top;               /* bytes of the range carved so far */
static size_t limit_bytes;           /* RLIMIT_AS at start-up (0: none) */
static size_t free_dirty_pages, free_clean_pages;   /* under pages_lock; peeked by usl_pages_short */
static inline void count_add(size_t *c, long d) { __atomic_store_n(c, *c + (size_t)d, __ATOMIC_RELAXED); }
static size_t nr_free_blocks[USL_MAX_NODES][USL_MAX_ORDER + 1];    /* per node and order, under pages_lock; peeked */
static size_t nr_dirty_blocks[USL_MAX_NODES][USL_MAX_ORDER + 1];   /* per node and order, under pages_lock */
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
/* Per region, its bits (rbits: reserved for the whole range, committed as the
 * range grows) and its NUMA node (usl_region_node: a region's blocks all
 * belong to the node it was made for, and with binding its pages are placed
 * there). Per node and 64 regions, a summary word per order and map
 * (summary); per node and 64 summary words, a bit per order and map saying
 * which are non-zero (summary2), so a search over a range of a TiB (4096
 * summary words) reads a few words, and sees only its node's regions. Per
 * region, a bit if it has young blocks (young_regions: the epoch roll visits
 * those) and one if it has idle table pages (idle_regions: the purge visits
 * those). All but rbits in one zeroed block sized from the range and the
 * node count (index_block). */
static struct region_bits *rbits;
typedef uint64_t usl_sumword[USL_MAX_ORDER + 1][2];   /* [order][MAP_FREE or MAP_DIRTY] */
static usl_sumword *summary;     /* [node][region / 64] */
static usl_sumword *summary2;    /* [node][region / 4096] */
static size_t nsum, nsum2;       /* words a node, of each */
static uint64_t *young_regions, *idle_regions;
uint8_t *usl_region_node;
static size_t node_regions[USL_MAX_NODES];   /* regions made for each node (under pages_lock) */
static inline usl_sumword *sum1(unsigned int node) { return summary + node * nsum; }
static inline usl_sumword *sum2(unsigned int node) { return summary2 + node * nsum2; }
static uint64_t epoch_start;     /* when young[0] began collecting */
static uintptr_t reserved_end;   /* the range's PROT_NONE reservation ends here (offset); beyond, regions are mapped */

static inline size_t nr_regions(void) { return usl_top >> (USL_PAGE_SHIFT + USL_MAX_ORDER); }
static inline size_t rb_bit(size_t pfn, unsigned int k) { return RB_OFF(k) + ((pfn & (RB_BLOCKS - 1)) >> k); }
static inline bool bit_test(const uint64_t *w, size_t b) { return (w[b / 64] >> (b % 64)) & 1; }
static inline void bit_set(uint64_t *w, size_t b) { w[b / 64] |= 1ULL << (b % 64); }
static inline void bit_clear(uint64_t *w, size_t b) { w[b / 64] &= ~(1ULL << (b % 64)); }

/* The region's table page (0..RB_TABLE_PAGES-1) holding the head entry of the
 * block at pfn. */
static inline size_t table_page(size_t pfn)
{
	return ((usl_table_index(pfn) & (RB_BLOCKS - 1)) * sizeof(struct slab)) >> USL_PAGE_SHIFT;
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
		bit_set(idle_regions, pfn >> USL_MAX_ORDER);
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

/* The region has (some) or has no blocks of order k in the map: its summary
 * bit, and its summary word's bit in summary2. */
static void summary_set(size_t region, unsigned int k, int map, bool some)
{
	size_t sw = region / 64;
	unsigned int node = usl_region_node[region];
	uint64_t *w = &sum1(node)[sw][k][map], *w2 = &sum2(node)[sw / 64][k][map];
	if (some) {
		*w |= 1ULL << (region % 64);
		*w2 |= 1ULL << (sw % 64);
	} else if (*w && !(*w &= ~(1ULL << (region % 64)))) {
		*w2 &= ~(1ULL << (sw % 64));
	}
}

static void summary_update(size_t region, unsigned int k, int map)
{
	summary_set(region, k, map, slice_next(&rbits[region], map, k, 0) >= 0);
}

/* Mark the block of order k at pfn free; young: 0 none, 1 the previous epoch,
 * 2 the current one (dirty blocks only). */
static void mark_free(size_t pfn, unsigned int k, bool dirty, int young)
{
	size_t region = pfn >> USL_MAX_ORDER, b = rb_bit(pfn, k);
	struct region_bits *r = &rbits[region];
	bit_set(r->free, b);
	summary_set(region, k, MAP_FREE, true);
	count_add(&nr_free_blocks[usl_region_node[region]][k], 1);
	if (dirty) {
		bit_set(r->dirty, b);
		if (young) {
			bit_set(r->young[2 - young], b);
			bit_set(young_regions, region);
		}
		summary_set(region, k, MAP_DIRTY, true);
		nr_dirty_blocks[usl_region_node[region]][k]++;
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
	nr_dirty_blocks[usl_region_node[region]][k]--;
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
	count_add(&nr_free_blocks[usl_region_node[region]][k], -1);
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

/* The lowest block of order k in the map (MAP_FREE or MAP_DIRTY) among the
 * node's regions: its pfn, or -1. */
static long lowest_block(unsigned int k, int map, unsigned int node)
{
	size_t used2 = (nr_regions() + 4095) / 4096;
	usl_sumword *s1 = sum1(node), *s2w = sum2(node);
	for (size_t s2 = 0; s2 < used2; s2++)
		for (uint64_t m2 = s2w[s2][k][map]; m2; m2 &= m2 - 1) {
			size_t sw = s2 * 64 + (size_t)__builtin_ctzll(m2);
			uint64_t m = s1[sw][k][map];
			if (m) {
				size_t region = sw * 64 + (size_t)__builtin_ctzll(m);
				long i = slice_next(&rbits[region], map, k, 0);
				if (i >= 0)
					return (long)((region << USL_MAX_ORDER) + ((size_t)i << k));
			}
		}
	return -1;
}

/* The structures sized from the range: the table and the page map (PROT_NONE,
 * committed region by region in grow), the region bits (the same), and the
 * index block (summaries and region bit sets, zeroed, touched as used).
 * False, with nothing left mapped, if one cannot be reserved. */
static void *side_maps[5];
static size_t side_bytes[5];
static bool side_reserve(size_t range)
{
	size_t pages = range >> USL_PAGE_SHIFT, regions = range >> (USL_PAGE_SHIFT + USL_MAX_ORDER);
	nsum = (regions + 63) / 64;
	nsum2 = (nsum + 63) / 64;
	size_t index = (nsum + nsum2) * usl_nr_nodes * sizeof(usl_sumword) + 2 * nsum * sizeof(uint64_t) + regions;
	size_t bytes[5] = { pages * sizeof(struct slab), pages * sizeof(struct usl_pagemap_entry),
	                    regions * sizeof(struct region_bits), index,
	                    (range >> USL_OCHUNK_SHIFT) * sizeof(uint64_t) };
	for (int i = 0; i < 5; i++) {
		side_bytes[i] = USL_ALIGN(bytes[i], USL_PAGE_SIZE);
		side_maps[i] = usl_map_guarded(side_bytes[i], i >= 3 ? PROT_READ | PROT_WRITE : PROT_NONE);
		if (!side_maps[i]) {
			while (i--)
				usl_unmap_guarded(side_maps[i], side_bytes[i]);
			return false;
		}
	}
	usl_table = side_maps[0];
	usl_pagemap = side_maps[1];
	rbits = side_maps[2];
	summary = side_maps[3];
	summary2 = summary + nsum * usl_nr_nodes;
	young_regions = (uint64_t *)(summary2 + nsum2 * usl_nr_nodes);
	idle_regions = young_regions + nsum;
	usl_region_node = (uint8_t *)(idle_regions + nsum);
	usl_ochunk = side_maps[4];
	return true;
}

static void side_release(void)
{
	for (int i = 0; i < 5; i++)
		usl_unmap_guarded(side_maps[i], side_bytes[i]);
}

static int pages_init(void)
{
	long ps = (long)usl_os_page_size();

	if ((size_t)ps != USL_PAGE_SIZE)
		return -2;
	if (!usl_range_reserve(&limit_bytes, &reserved_end, side_reserve, side_release))
		return -1;
	epoch_start = last_decay_check = usl_now_ms();
	return 0;
}

int usl_inited;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void usl_init(void)
{
	usl_platform_init();
	usl_lock(&start_lock);
	if (!usl_inited) {
		int err = pages_init();
		if (err != 0) {
			usl_unlock(&start_lock);
			if (err == -2)
				usl_report(USLAB_ERR_NOMEM, "the OS page size is %zu bytes, not 4096; aborting",
				           usl_os_page_size());
			else
				usl_report(USLAB_ERR_NOMEM, "cannot reserve 256 MiB of address space; aborting");
			abort();
		}
		__atomic_store_n(&usl_inited, 1, __ATOMIC_RELEASE);
	}
	usl_unlock(&start_lock);
}

void usl_pages_fork_lock(void)
{
	usl_lock(&start_lock);
	usl_lock(&pages_lock);
}

void usl_pages_fork_unlock(void)
{
	usl_unlock(&pages_lock);
	usl_unlock(&start_lock);
}

void usl_pages_fail_after(long n)
{
	usl_lock(&pages_lock);
	fail_after = n;
	usl_unlock(&pages_lock);
}

/* Carve one more largest block from the reserved range: commit it and its table slice. */
static bool commit(void *from, void *to)
{
	uintptr_t s = (uintptr_t)from & ~(USL_PAGE_SIZE - 1), e = USL_ALIGN((uintptr_t)to, USL_PAGE_SIZE);
	return mprotect((void *)s, e - s, PROT_READ | PROT_WRITE) == 0;
}

/* Bind a new region's pages to its node (MPOL_PREFERRED: the kernel falls
 * back to another node when that one is full, rather than fail the fault).
 * A refusal (a kernel or a sandbox without mbind) leaves first touch. */
static void bind_region(void *at, size_t bytes, unsigned int node)
{
	if (__atomic_load_n(&usl_numa_bind, __ATOMIC_ACQUIRE))
		(void)usl_numa_bind_range(at, bytes, node);
}

/* Under RLIMIT_AS the kernel may refuse a whole region while smaller
 * mappings still fit: from then on the top region is mapped in pieces, each
 * as large as the block asked for (at least 64 KiB) and aligned to its size,
 * after smaller pieces that bring what is mapped to that alignment (so every
 * piece is a buddy block, and neighbours merge). top_mapped: the top region's
 * pages mapped so far, while top_partial. Under pages_lock. */
#define PIECE_MIN_ORDER 4
static bool top_partial, pieces;     /* pieces: a region was refused once (sticky) */
static size_t top_region_pfn, top_mapped;

static bool map_piece(unsigned int k)
{
	size_t n = (size_t)1 << k;
	void *at = (void *)(usl_base + ((top_region_pfn + top_mapped) << USL_PAGE_SHIFT));
	void *r = usl_map_anon(at, n << USL_PAGE_SHIFT, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
	if (r != at) {
		if (r)
			munmap(r, n << USL_PAGE_SHIFT);
		return false;
	}
	bind_region(at, n << USL_PAGE_SHIFT, usl_region_node[top_region_pfn >> USL_MAX_ORDER]);
	mark_free(top_region_pfn + top_mapped, k, false, 0);
	top_mapped += n;
	if (top_mapped == (size_t)1 << USL_MAX_ORDER)
		top_partial = false;             /* whole now: the next grow maps a region */
	return true;
}

static bool grow_piece(unsigned int order)
{
	unsigned int want = order < PIECE_MIN_ORDER ? PIECE_MIN_ORDER : order;
	if (want >= USL_MAX_ORDER)
		return false;                    /* a whole region was refused already */
	while (top_partial && top_mapped & (((size_t)1 << want) - 1))
		if (!map_piece((unsigned int)__builtin_ctzl(top_mapped)))
			return false;
	return top_partial ? map_piece(want) : true;
}

bool usl_pages_pieces(void)
{
	return __atomic_load_n(&pieces, __ATOMIC_RELAXED);
}

size_t usl_pages_limit(void)
{
	return limit_bytes;
}

static bool grow(unsigned int node, unsigned int order)
{
	size_t bytes = USL_PAGE_SIZE << USL_MAX_ORDER;
	size_t npages = (size_t)1 << USL_MAX_ORDER;
	size_t region = usl_top >> (USL_PAGE_SHIFT + USL_MAX_ORDER);
	struct slab *e;
	bool part = false;

	if (top_partial)
		return grow_piece(order);
	if (usl_top + bytes > usl_range)
		return false;
	/* Its bits, table and page-map slices first, then the region itself: a
	 * failure leaves nothing a retry would trip over (the slices may share OS
	 * pages with their neighbours: committed outwards). */
	size_t pfn = usl_top >> USL_PAGE_SHIFT;
	e = &usl_table[pfn];               /* a region's entries are its table slice (reordered) */
	if (!commit(&rbits[region], &rbits[region + 1]) || !commit(e, e + npages) ||
	    !commit(&usl_pagemap[pfn], &usl_pagemap[pfn + npages]))
		return false;
	void *at = (void *)(usl_base + usl_top);
	if (usl_top < reserved_end) {
		if (mprotect(at, bytes, PROT_READ | PROT_WRITE) != 0)
			return false;
	} else {
		/* Unreserved (under RLIMIT_AS): map it at the range's end, if the
		 * address is still free and the limit allows. */
		void *r = usl_map_anon(at, bytes, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
		if (r != at) {
			if (r) {                 /* elsewhere: the address is taken */
				munmap(r, bytes);
				return false;
			}
			if (errno == EEXIST)
				return false;
			/* Refused for its size (the limit): its first piece. */
			part = true;
			__atomic_store_n(&pieces, true, __ATOMIC_RELAXED);
			usl_region_node[region] = (uint8_t)node;
			top_region_pfn = pfn;
			top_mapped = 0;
			top_partial = true;
			if (!grow_piece(order)) {
				top_partial = false;
				return false;
			}
		}
	}
	/* Fresh pages read as zeros, the state of every entry of a free block: the
	 * slices are touched only as blocks are handed out, not 72 KiB at once. */
	if (!part)
		bind_region(at, bytes, node);
	usl_region_node[region] = (uint8_t)node;
	node_regions[node]++;
	__atomic_store_n(&usl_top, usl_top + bytes, __ATOMIC_RELEASE);
	if (!part)
		mark_free(pfn, USL_MAX_ORDER, false, 0);
	return true;
}

/* Make the 2^order pages at pfn a block of this kind: every page-map entry
 * points at its head, whose table entry is set up. Under pages_lock. */
static void *claim(size_t pfn, unsigned int order, enum usl_page_kind kind)
{
	usl_assert_held(&pages_lock);
	struct slab *e = &usl_table[usl_table_index(pfn)];
	size_t n = (size_t)1 << order;
	for (size_t i = 0; i < n; i++)
		usl_pm_write(&usl_pagemap[pfn + i], (uint32_t)(pfn << USL_PAGE_SHIFT), 0, 0);
	count_head(pfn, 1);
	e->slab_cache = NULL;
	e->kind = (uint8_t)kind;
	e->order = (uint8_t)order;
	e->addr = usl_slab_address(e);
	e->freelist = NULL;
	e->counters = 0;
	e->node_partial = 0;
	e->nid = usl_region_node[pfn >> USL_MAX_ORDER];
	e->next = NULL;
	e->slabs = 0;
	return e->addr;
}

void *usl_pages_alloc(unsigned int order, enum usl_page_kind kind, unsigned int node)
{
	return usl_pages_alloc_z(order, kind, node, NULL);
}

/* The block to split for an allocation of this order: the lowest dirty block of
 * the smallest order that fits (its pages are resident already), else the
 * lowest clean one; *k its order. -1 if there is none. */
static long find_block(unsigned int order, unsigned int *k, unsigned int node)
{
	for (int map = MAP_DIRTY; map >= MAP_FREE; map--)
		for (*k = order; *k <= USL_MAX_ORDER; (*k)++)
			if (map == MAP_DIRTY ? nr_dirty_blocks[node][*k] : nr_free_blocks[node][*k]) {
				long pfn = lowest_block(*k, map, node);
				if (pfn >= 0)
					return pfn;
			}
	return -1;
}

void *usl_pages_alloc_z(unsigned int order, enum usl_page_kind kind, unsigned int node, bool *zeroed)
{
	unsigned int k;
	long found;

	if (order > USL_MAX_ORDER)
		return NULL;
	if (node >= usl_nr_nodes)           /* the callers pass a valid node: a last guard */
		node = 0;
	usl_lock(&pages_lock);
	if (usl_unlikely(fail_after >= 0)) {
		if (fail_after == 0) {
			usl_unlock(&pages_lock);
			return NULL;
		}
		fail_after--;
	}
	while ((found = find_block(order, &k, node)) < 0)
		if (!grow(node, order)) {
			usl_unlock(&pages_lock);
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
	void *addr = claim(pfn, order, kind);
	usl_unlock(&pages_lock);
	return addr;
}

void usl_pages_head(void *addr, unsigned int order, enum usl_page_kind kind)
{
	usl_lock(&pages_lock);
	claim(((uintptr_t)addr - usl_base) >> USL_PAGE_SHIFT, order, kind);
	usl_unlock(&pages_lock);
}

void usl_pages_unhead(void *addr, const void *owner)
{
	size_t pfn = ((uintptr_t)addr - usl_base) >> USL_PAGE_SHIFT;
	struct slab *e = &usl_table[usl_table_index(pfn)];
	size_t n = (size_t)1 << e->order;
	uint32_t start = (uint32_t)((uintptr_t)owner - usl_base);

	usl_lock(&pages_lock);
	for (size_t i = 0; i < n; i++)
		usl_pm_write(&usl_pagemap[pfn + i], start, 0, 0);
	e->kind = USL_PAGE_UNUSED;
	e->slab_cache = NULL;
	count_head(pfn, -1);
	usl_unlock(&pages_lock);
}

/* madvise the whole OS pages of [from, to): they read as zeros afterwards. */
static void zero_pages(void *from, void *to)
{
	uintptr_t a = USL_ALIGN((uintptr_t)from, USL_PAGE_SIZE), b = (uintptr_t)to & ~(USL_PAGE_SIZE - 1);
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
	usl_assert_held(&pages_lock);
	size_t n = (size_t)1 << order;
	zero_pages(&usl_pagemap[pfn], &usl_pagemap[pfn + n]);
}

/* The region's table pages that hold no allocated block's head entry go back
 * to the OS at each purge: every entry on them is in the free state
 * (USL_PAGE_UNUSED, which zeros also mean). Not after a decay interval, as
 * blocks: purges come at most every decay/4, and a page that gets a head again
 * costs one fault (held, they kept RSS up: docs/PERFORMANCE.md). Under
 * pages_lock. */
static void release_tables(size_t region)
{
	usl_assert_held(&pages_lock);
	struct region_bits *r = &rbits[region];
	uint32_t m = r->tables_idle;
	r->tables_idle = 0;
	bit_clear(idle_regions, region);
	for (; m; m &= m - 1) {
		char *t = (char *)&usl_table[region << USL_MAX_ORDER] + ((size_t)__builtin_ctz(m) << USL_PAGE_SHIFT);
		madvise(t, USL_PAGE_SIZE, MADV_DONTNEED);
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
	size_t nwords = (nr_regions() + 63) / 64;
	for (size_t yw = 0; yw < nwords; yw++)
		for (uint64_t m = young_regions[yw]; m; m &= m - 1) {
			size_t region = yw * 64 + (size_t)__builtin_ctzll(m);
			struct region_bits *r = &rbits[region];
			uint64_t left = 0;
			for (size_t w = 0; w < RB_WORDS; w++) {
				uint64_t y0 = r->young[0][w];
				if (both ? y0 | r->young[1][w] : y0 != r->young[1][w])
					r->young[1][w] = both ? 0 : y0;
				if (y0)
					r->young[0][w] = 0;
				left |= r->young[1][w];
			}
			if (!left)                   /* nothing young left: off the list */
				bit_clear(young_regions, region);
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
	for (unsigned int node = 0; node < usl_nr_nodes; node++)
	for (unsigned int k = 0; k <= USL_MAX_ORDER; k++) {
		if (!nr_dirty_blocks[node][k])
			continue;
		size_t used2 = (nr_regions() + 4095) / 4096;
		for (size_t s2 = 0; s2 < used2; s2++)
		for (uint64_t m2 = sum2(node)[s2][k][MAP_DIRTY]; m2; m2 &= m2 - 1) {
			size_t sw = s2 * 64 + (size_t)__builtin_ctzll(m2);
			for (uint64_t m = sum1(node)[sw][k][MAP_DIRTY]; m; m &= m - 1) {
				size_t region = sw * 64 + (size_t)__builtin_ctzll(m);
				struct region_bits *r = &rbits[region];
				long i = -1;
				while ((i = slice_next(r, all ? MAP_DIRTY : MAP_OLD, k, (size_t)(i + 1))) >= 0) {
					size_t pfn = (region << USL_MAX_ORDER) + ((size_t)i << k), len = USL_PAGE_SIZE << k;
					if (madvise((void *)(usl_base + (pfn << USL_PAGE_SHIFT)), len, MADV_DONTNEED) != 0)
						continue;
					clear_dirty(pfn, k);
					count_add(&free_clean_pages, (long)(1UL << k));
					release_entries(pfn, k);
					bytes += len;
				}
			}
		}
	}
	size_t nwords = (nr_regions() + 63) / 64;
	for (size_t iw = 0; iw < nwords; iw++)
		for (uint64_t m = idle_regions[iw]; m; m &= m - 1)
			release_tables(iw * 64 + (size_t)__builtin_ctzll(m));
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

	usl_lock(&pages_lock);
	e = usl_virt_to_slab(addr);
	if (!e || (need_kind >= 0 && (e->kind != need_kind || e->addr != (char *)addr))) {
		usl_unlock(&pages_lock);
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
		usl_pm_write(&usl_pagemap[pfn + i], (uint32_t)((pfn + i) << USL_PAGE_SHIFT), 0, 0);
	e->kind = USL_PAGE_UNUSED;
	e->slab_cache = NULL;
	count_head(pfn, -1);
	/* Blocks the decay sweep frees held objects nobody used for an interval:
	 * they are old at once, so the sweep's purge returns them. */
	int young = dirty && !usl_pages_aging ? 2 : 0;
	/* Merge with free buddies of the same order. */
	while (order < USL_MAX_ORDER) {
		size_t bpfn = pfn ^ ((size_t)1 << order);
		if ((bpfn << USL_PAGE_SHIFT) >= usl_top || !is_free(bpfn, order))
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
	usl_unlock(&pages_lock);
	return true;
}

static bool free_block(void *addr, int need_kind)
{
	return free_block_as(addr, need_kind, true);
}

void (*usl_free_slab_after_gp)(struct slab *slab);

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
	usl_lock(&pages_lock);
	struct slab *e = usl_virt_to_slab(addr);
	if (!e || e->kind != USL_PAGE_LARGE || e->addr != (char *)addr) {
		usl_unlock(&pages_lock);
		return false;
	}
	size_t len = usl_order_bytes(e->order);
	if (len <= purge_at_free) {
		usl_unlock(&pages_lock);
		return free_block(addr, USL_PAGE_LARGE);   /* checks again: a racing free loses */
	}
	e->kind = USL_PAGE_INTERNAL;        /* ours now: a second free of addr is refused */
	usl_unlock(&pages_lock);
	int saved_errno = errno;
	bool clean = madvise(addr, len, MADV_DONTNEED) == 0;
	errno = saved_errno;
	if (clean) {
		usl_lock(&pages_lock);
		if (len > purge_at_free)
			purge_at_free = len;
		usl_unlock(&pages_lock);
	}
	return free_block_as(addr, -1, !clean);
}

size_t usl_pages_purge(bool all)
{
	size_t bytes;

	usl_lock(&pages_lock);
	bytes = purge_locked(all, usl_now_ms());
	usl_unlock(&pages_lock);
	return bytes;
}

void usl_pages_stats(size_t *committed, size_t *free_dirty, size_t *free_clean)
{
	usl_lock(&pages_lock);
	if (committed)                       /* (a region mapped in part: its mapped pages) */
		*committed = usl_top - (top_partial ? (((size_t)1 << USL_MAX_ORDER) - top_mapped) << USL_PAGE_SHIFT : 0);
	if (free_dirty)
		*free_dirty = free_dirty_pages << USL_PAGE_SHIFT;
	if (free_clean)
		*free_clean = free_clean_pages << USL_PAGE_SHIFT;
	usl_unlock(&pages_lock);
}

size_t usl_pages_node_bytes(unsigned int node)
{
	return node < USL_MAX_NODES ? __atomic_load_n(&node_regions[node], __ATOMIC_RELAXED) * (USL_PAGE_SIZE << USL_MAX_ORDER)
	                            : 0;
}

/* Would an allocation of this order have to grow the committed range (no free
 * block that large)? A racy peek at the per-order counts, for callers deciding
 * whether to reclaim first. */
bool usl_pages_short(unsigned int order, unsigned int node)
{
	for (unsigned int k = order; k <= USL_MAX_ORDER; k++)
		if (__atomic_load_n(&nr_free_blocks[node][k], __ATOMIC_RELAXED))
			return false;
	return true;
}

size_t usl_pages_release(void)
{
	usl_ensure_init();
	return usl_pages_purge(true);
}
