/* meta.c - metadata regions: uslab's own structures (cache structures, the
 * slabs of its own caches, oversize sheaves) live in whole regions of the range
 * (one largest block each), never beside a user block. A region's first and
 * last pages are PROT_NONE guards, so a linear overflow out of a user block in
 * the neighbouring region faults before it reaches them. Inside, blocks of 2^k
 * pages are placed first-fit by a bitmap of used pages; a freed block's pages
 * go back to the OS at once (these come and go rarely: a cache destroyed, an
 * internal slab emptied). Regions are kept once made. Locks: meta_lock
 * (pages_lock inside it, through usl_pages_alloc and usl_pages_head). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "pages.h"

#define META_PAGES ((size_t)1 << USL_MAX_ORDER)
#define META_WORDS (META_PAGES / 64)
/* Regions at most: 1 GiB of address space for uslab's own structures, which
 * are a few hundred KiB in a program with a hundred caches. */
#define META_MAX 256
/* Between the guards, 1022 pages: a naturally aligned block of up to a quarter
 * region fits (a half would cover a guard), an unaligned one of half. */
#define META_ALIGNED_MAX (META_PAGES / 4)
#define META_RUN_MAX (META_PAGES / 2)
#define META_MIN_ORDER 6

struct meta_region {
	uintptr_t base;
	unsigned int pages;          /* META_PAGES, or fewer where the limit allows no more */
	unsigned int free_pages;
	uint64_t used[META_WORDS];   /* a bit per page: in a block, a guard, or beyond pages */
};
static size_t meta_bytes;            /* atomic: the regions' bytes */
static struct meta_region regions[META_MAX];
static unsigned int nr_meta;
static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static bool guard_failed;

/* The bits of [p, p + n) one word at a time: any set (test), or set/clear them. */
static bool run_used(const uint64_t *used, size_t p, size_t n)
{
	while (n) {
		size_t b = p % 64, k = 64 - b < n ? 64 - b : n;
		uint64_t m = (k == 64 ? ~0ULL : ((1ULL << k) - 1)) << b;
		if (used[p / 64] & m)
			return true;
		p += k;
		n -= k;
	}
	return false;
}

static void run_mark(uint64_t *used, size_t p, size_t n, bool set)
{
	while (n) {
		size_t b = p % 64, k = 64 - b < n ? 64 - b : n;
		uint64_t m = (k == 64 ? ~0ULL : ((1ULL << k) - 1)) << b;
		used[p / 64] = set ? used[p / 64] | m : used[p / 64] & ~m;
		p += k;
		n -= k;
	}
}

/* A new region from the page provider, guarded at both ends. Under meta_lock. */
static struct meta_region *region_add(void)
{
	usl_assert_held(&meta_lock);
	if (nr_meta == META_MAX)
		return NULL;
	/* A largest block; where RLIMIT_AS leaves less (the page provider maps
	 * regions in pieces), 64 pages: a 16-page block fits aligned inside
	 * its guards. */
	unsigned int order = usl_pages_pieces() ? META_MIN_ORDER : USL_MAX_ORDER;
	char *base = usl_pages_alloc(order, USL_PAGE_INTERNAL, 0);
	if (!base && order > META_MIN_ORDER && usl_pages_pieces())   /* refused just now */
		base = usl_pages_alloc(order = META_MIN_ORDER, USL_PAGE_INTERNAL, 0);
	if (!base)
		return NULL;
	size_t pages = (size_t)1 << order;
	int saved_errno = errno;
	if (mprotect(base, USL_PAGE_SIZE, PROT_NONE) != 0 ||
	    mprotect(base + (pages << USL_PAGE_SHIFT) - USL_PAGE_SIZE, USL_PAGE_SIZE, PROT_NONE) != 0) {
		/* (vm.max_map_count reached: the split mappings are refused.) */
		if (!guard_failed) {
			guard_failed = true;
			usl_report(USLAB_ERR_NOMEM, "cannot place guard pages around a metadata region (%s); "
			           "it is used unguarded", strerror(errno));
		}
	}
	errno = saved_errno;
	struct meta_region *r = &regions[nr_meta];
	memset(r->used, 0, sizeof(r->used));
	run_mark(r->used, 0, 1, true);
	run_mark(r->used, pages - 1, META_PAGES - (pages - 1), true);
	r->pages = (unsigned int)pages;
	r->free_pages = (unsigned int)pages - 2;
	__atomic_fetch_add(&meta_bytes, pages << USL_PAGE_SHIFT, __ATOMIC_RELAXED);
	__atomic_store_n(&r->base, (uintptr_t)base, __ATOMIC_RELEASE);
	__atomic_store_n(&nr_meta, nr_meta + 1, __ATOMIC_RELEASE);
	return r;
}

static long find_run(const struct meta_region *r, size_t n, size_t align)
{
	if (r->free_pages < n)
		return -1;
	for (size_t p = align == 1 ? 1 : 0; p + n <= META_PAGES; p += align)
		if (!run_used(r->used, p, n))
			return (long)p;
	return -1;
}

void *usl_meta_block(unsigned int order, bool aligned, enum usl_page_kind kind)
{
	size_t n = (size_t)1 << order;
	if (order > USL_MAX_ORDER || n > (aligned ? META_ALIGNED_MAX : META_RUN_MAX))
		return NULL;
	usl_ensure_init();
	usl_lock(&meta_lock);
	struct meta_region *r = NULL;
	long p = -1;
	for (unsigned int i = 0; i < nr_meta && p < 0; i++)
		p = find_run(r = &regions[i], n, aligned ? n : 1);
	if (p < 0 && (r = region_add()))
		p = find_run(r, n, aligned ? n : 1);
	if (p < 0) {
		usl_unlock(&meta_lock);
		return NULL;
	}
	run_mark(r->used, (size_t)p, n, true);
	r->free_pages -= (unsigned int)n;
	void *addr = (void *)(r->base + ((size_t)p << USL_PAGE_SHIFT));
	usl_pages_head(addr, order, kind);
	usl_unlock(&meta_lock);
	return addr;
}

/* The region holding addr, or NULL. */
static struct meta_region *region_of(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	unsigned int n = __atomic_load_n(&nr_meta, __ATOMIC_ACQUIRE);
	for (unsigned int i = 0; i < n; i++) {
		uintptr_t base = __atomic_load_n(&regions[i].base, __ATOMIC_ACQUIRE);
		if (a >= base && a < base + ((uintptr_t)regions[i].pages << USL_PAGE_SHIFT))
			return &regions[i];
	}
	return NULL;
}

void usl_meta_free(void *addr)
{
	usl_lock(&meta_lock);
	struct meta_region *r = region_of(addr);
	struct slab *e = r ? usl_virt_to_slab(addr) : NULL;
	if (!e || e->addr != addr || (e->kind != USL_PAGE_SLAB && e->kind != USL_PAGE_INTERNAL)) {
		usl_unlock(&meta_lock);
		usl_report(USLAB_ERR_FOREIGN, "internal: %p is not a metadata block", addr);
		return;
	}
	size_t n = (size_t)1 << e->order, p = ((uintptr_t)addr - r->base) >> USL_PAGE_SHIFT;
	usl_pages_unhead(addr, (void *)r->base);
	int saved_errno = errno;
	madvise(addr, n << USL_PAGE_SHIFT, MADV_DONTNEED);
	errno = saved_errno;
	run_mark(r->used, p, n, false);
	r->free_pages += (unsigned int)n;
	usl_unlock(&meta_lock);
}

void *usl_meta_alloc(size_t size)
{
	void *p = usl_meta_block(usl_bytes_order(size), false, USL_PAGE_INTERNAL);
	if (p)
		memset(p, 0, size);
	return p;
}

size_t usl_meta_reserved(void)
{
	return __atomic_load_n(&meta_bytes, __ATOMIC_RELAXED);
}

void usl_meta_fork_lock(void) { usl_lock(&meta_lock); }
void usl_meta_fork_unlock(void) { usl_unlock(&meta_lock); }
