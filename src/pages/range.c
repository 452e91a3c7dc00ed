/* range.c - reserving the range at start-up: with no RLIMIT_AS the whole
 * range (PROT_NONE), else a range of up to the limit at a fixed address far
 * below the kernel's top-down mmap area, reserved one region at a time as it
 * grows (pages.c's grow); with it, the side structures sized from the range
 * (pages.c's, given as a function). Called once, under start_lock (pages.c). */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/resource.h>

#include "../platform/platform.h"
#include "range.h"

uintptr_t usl_base;
uintptr_t usl_range;

/* The range: with no RLIMIT_AS, 16 TiB of address space reserved (PROT_NONE,
 * nothing committed; smaller where the kernel refuses, dividing by four down
 * to 256 MiB). Under RLIMIT_AS, as much as the limit, not reserved: regions
 * are mapped at the range's end as it grows, from a start far below the
 * kernel's top-down mmap area (docs/ARCHITECTURE.md, "Memory and metadata"). ThreadSanitizer
 * allows mappings only in its application ranges: 64 GiB there. */
#ifdef USLAB_TSAN
#define USL_RANGE_MAX (64UL << 30)
#else
#define USL_RANGE_MAX (16UL << 40)
#endif
#define USL_RANGE_MIN (256UL << 20)
/* Where an unreserved range starts: tried in turn (16, 24, 32, 40 TiB). */
#define USL_HINT_FIRST (16UL << 40)
#define USL_HINT_STEP (8UL << 40)
#define USL_HINT_TRIES 4

/* An anonymous mapping (pages.h); pages.c maps regions with it too. */
void *usl_map_anon(void *at, size_t bytes, int prot, int flags)
{
	void *p = mmap(at, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | flags, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The soft RLIMIT_AS, rounded down to the largest block; 0 if there is none
 * (or it is beyond the largest range). */
static size_t as_limit(size_t max_block)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= USL_RANGE_MAX)
		return 0;
	size_t limit = (size_t)rl.rlim_cur / max_block * max_block;
	return limit ? limit : max_block;    /* a limit below one region: one, mapped in part */
}

/* Under RLIMIT_AS: a range of up to the limit, of which only the first
 * largest block is reserved; grow maps the rest at its end as needed. It
 * starts at one of a few fixed addresses far below the kernel's top-down mmap
 * area (which would otherwise take the addresses after it), checked free by
 * MAP_FIXED_NOREPLACE (kernels before 4.17 take it as a hint: a different
 * address is refused). */
static bool range_unreserved(size_t limit, size_t max_block, uintptr_t *reserved, bool (*side)(size_t),
                             void (*side_release)(void))
{
	if (!side(limit))
		return false;
	for (int i = 0; i < USL_HINT_TRIES; i++) {
		uintptr_t at = USL_HINT_FIRST + (uintptr_t)i * USL_HINT_STEP;
		void *r = usl_map_anon((void *)at, max_block, PROT_NONE, MAP_FIXED_NOREPLACE);
		if (r == (void *)at) {
			usl_base = at;
			usl_range = limit;
			*reserved = max_block;
			return true;
		}
		if (r)
			munmap(r, max_block);
		/* The limit leaves less than a region: the address checked free
		 * with one page, and the first region mapped in part (grow). */
		r = usl_map_anon((void *)at, USL_PAGE_SIZE, PROT_NONE, MAP_FIXED_NOREPLACE);
		if (r)
			munmap(r, USL_PAGE_SIZE);
		if (r == (void *)at) {
			usl_base = at;
			usl_range = limit;
			*reserved = 0;
			return true;
		}
	}
	side_release();
	return false;
}

/* With no limit: the whole range reserved, aligned to the largest block;
 * where the kernel refuses (valgrind, or a limit), a quarter, down to the
 * minimum. */
static bool range_reserved(size_t max_block, uintptr_t *reserved, bool (*side)(size_t))
{
	for (usl_range = USL_RANGE_MAX; usl_range >= USL_RANGE_MIN; usl_range /= 4) {
		void *r = usl_map_anon(NULL, usl_range + max_block, PROT_NONE, 0);
		if (!r)
			continue;
		if (side(usl_range)) {
			usl_base = USL_ALIGN((uintptr_t)r, max_block);
			if (usl_base > (uintptr_t)r)
				munmap(r, usl_base - (uintptr_t)r);
			munmap((void *)(usl_base + usl_range), (uintptr_t)r + max_block - usl_base);
			*reserved = usl_range;
			return true;
		}
		munmap(r, usl_range + max_block);
	}
	return false;
}

bool usl_range_reserve(size_t *limit, uintptr_t *reserved, bool (*side)(size_t range),
                       void (*side_release)(void))
{
	size_t max_block = USL_PAGE_SIZE << USL_MAX_ORDER;
	*limit = as_limit(max_block);
	return (*limit && range_unreserved(*limit, max_block, reserved, side, side_release)) ||
	       range_reserved(max_block, reserved, side);
}
