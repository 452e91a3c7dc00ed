/* memory.c - test_corners: errno, and running out of address space. */
#include "corners.h"

/* ===========================================================================
 * errno: every failed allocation says ENOMEM; free keeps errno
 */
static volatile size_t huge_size = (size_t)1 << 62;

void test_errno(void)
{
	const size_t huge = huge_size;
	void *p;

	errno = 0;
	CHECK(vmalloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(calloc(huge, 4) == NULL && errno == ENOMEM);      /* overflow */
	errno = 0;
	CHECK(calloc(1, huge) == NULL && errno == ENOMEM);
	p = vmalloc(10);
	errno = 0;
	CHECK(vrealloc(p, huge) == NULL && errno == ENOMEM);    /* p stays */
	vfree(p);
	errno = 0;
	CHECK(vposix_memalign(&p, 64, huge) == ENOMEM && errno == ENOMEM);
	errno = 0;
	CHECK(vposix_memalign(&p, 1 << 20, huge) == ENOMEM && errno == ENOMEM);
	errno = 0;
	CHECK(aligned_alloc(4096, huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(memalign(64, huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(valloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(pvalloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(reallocarray(NULL, huge, 8) == NULL && errno == ENOMEM);
	/* Bad arguments are EINVAL, not ENOMEM. */
	errno = 0;
	CHECK(posix_memalign(&p, 3, 10) == EINVAL);
	/* Success leaves errno as it was; free keeps it, for every kind of block. */
	size_t sizes[] = { 8, 100, 5000, 40000, 3 << 20, 40 << 20 };
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		errno = 1234;
		p = vmalloc(sizes[i]);
		CHECK(p != NULL && errno == 1234);
		memset(p, 1, sizes[i]);
		vfree(p);
		CHECK_EQ(errno, 1234);
	}
	errno = 1234;
	CHECK(vposix_memalign(&p, 4096, 100) == 0 && errno == 1234);
	free(p);
	malloc_trim(0);
	CHECK_EQ(errno, 1234);
}

/* ===========================================================================
 * aslimit and refill: running out of address space
 */
/* This process's address space now (/proc/self/statm's first field, pages),
 * read without stdio (which would allocate). */
static size_t vm_bytes(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (size_t)strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* Under the stress label the out-of-memory tests repeat for run_seconds,
 * under the limit set in their first round. */

static void as_limit(size_t extra)
{
	if (round_nr > 0)
		return;
	struct rlimit rl;
	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = vm_bytes() + extra;
	setrlimit(RLIMIT_AS, &rl);
}

/* Fill with size-byte blocks until NULL (at most max); the count. */
static size_t fill(void **p, size_t max, size_t size, int *err)
{
	size_t n = 0;
	errno = 0;
	while (n < max && (p[n] = vmalloc(size)))
		memset(p[n++], 0x5a, size < 64 ? size : 64);
	*err = errno;
	return n;
}

#define FILL_MAX (1u << 20)
static void *blocks[FILL_MAX];

void test_aslimit(void)
{
	/* Before anything allocates (stdio would): 2 MiB above what is mapped. */
	as_limit(2u << 20);
	int err = 0;
	size_t n = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(n * 4096 >= (512u << 10));     /* a good part of the 2 MiB */
	CHECK_EQ(err, ENOMEM);
	for (size_t i = 0; i < n; i++)
		vfree(blocks[i]);
	/* And again, with what was freed. */
	size_t again = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(again * 2 >= n);
	for (size_t i = 0; i < again; i++)
		vfree(blocks[i]);
	void *p = vmalloc(100);              /* the program goes on */
	CHECK(p != NULL);
	vfree(p);
	if (round_nr == 0)
		printf("aslimit: %zu blocks of 4 KiB, then %zu\n", n, again);
}

/* Less than 1 MiB left: every kind of request fails cleanly (NULL, ENOMEM),
 * silently unless USLAB_OOM asks for a report, and the program goes on. */
void test_lowmem(void)
{
	as_limit(768u << 10);                /* before uslab starts */
	const char *oom = getenv("USLAB_OOM");
	bool report = oom && !strcmp(oom, "report");
	size_t sizes[] = { 24, 700, 4096, 20000, 300000, 3000000 };
	size_t got[6];
	int errs[6];
	for (unsigned int k = 0; k < 6; k++) {
		got[k] = fill(blocks, FILL_MAX, sizes[k], &errs[k]);
		for (size_t i = 0; i < got[k]; i++)
			vfree(blocks[i]);
	}
	void *p;
	errno = 0;
	int pm = vposix_memalign(&p, 4096, 1u << 20);
	int pm_errno = errno;
	/* A cache of its own, asked without a warning: NULL, no report. */
	struct kmem_cache *c = kmem_cache_create("lowmem", 1000, 0, 0, NULL);
	size_t objs = 0;
	if (c) {
		while (objs < FILL_MAX && (blocks[objs] = kmem_cache_alloc(c, GFP_KERNEL | __GFP_NOWARN)))
			objs++;
		for (size_t i = 0; i < objs; i++)
			kmem_cache_free(c, blocks[i]);
		kmem_cache_destroy(c);
	}
	unsigned long reports = uslab_error_count();
	for (unsigned int k = 0; k < 6; k++) {
		CHECK_EQ(errs[k], ENOMEM);
		if (round_nr == 0)
			printf("lowmem: %zu blocks of %zu bytes\n", got[k], sizes[k]);
	}
	CHECK(pm == ENOMEM && pm_errno == ENOMEM);
	if (round_nr == 0)
		printf("lowmem: %zu objects of a cache (%s), %lu reports\n", objs, c ? "made" : "not made", reports);
	if (report)
		CHECK(reports >= 6);
	else
		CHECK_EQ(reports, 0);
}

/* After the rounds: the limit lifted, the program goes on. */
void lowmem_after(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_AS, &rl);
	void *p = vmalloc(100);
	CHECK(p != NULL);
	vfree(p);
}

void test_refill(void)
{
	as_limit(64u << 20);                 /* before uslab starts, as in aslimit */
	int err = 0;
	size_t n = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(n * 4096 >= (32u << 20));
	CHECK_EQ(err, ENOMEM);
	for (size_t i = 0; i < n; i++)
		vfree(blocks[i]);
	/* Blocks of 10 KB to 3 MB, each asked for at once after the frees: what
	 * uslab holds free must serve them (no decay here: it is off). */
	size_t sizes[] = { 10000, 30000, 100000, 300000, 1000000, 3000000 };
	size_t got = 0;
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = vmalloc(sizes[i]);
		CHECK(p != NULL);
		if (!p)
			fprintf(stderr, "refill: %zu bytes refused\n", sizes[i]);
		got += p != NULL;
		vfree(p);
	}
	/* Filled with large blocks now, then small ones again. */
	size_t big = fill(blocks, FILL_MAX, 300000, &err);
	CHECK(big * 300000 >= (16u << 20));
	for (size_t i = 0; i < big; i++)
		vfree(blocks[i]);
	size_t small = fill(blocks, FILL_MAX, 256, &err);
	CHECK(small * 256 >= (16u << 20));
	for (size_t i = 0; i < small; i++)
		vfree(blocks[i]);
	if (round_nr == 0)
		printf("refill: %zu pages, %zu of 6 sizes, %zu blocks of 300 KB, %zu of 256 B\n", n, got, big, small);
}
