/* test_malloc.c - the drop-in malloc, linked statically (-luslab puts the program
 * on uslab): glibc's rules for every entry point (malloc(0), errno, overflow,
 * alignment up to 1 GiB, posix_memalign's failures, realloc), foreign frees
 * reported and ignored, memory given back (malloc_trim, mallinfo2), fork while
 * other threads allocate, and threads that exit with blocks freed elsewhere. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "../../tools/rss.h"
#include "common/common.h"
#include "kmalloc/kmalloc.h"
#include "pages/pages.h"
#include "testing.h"

/* A block is uslab's when the page map or the mapping table knows it. */
static bool ours(void *p)
{
	return p && usl_ksize_as(p, "test") > 0;
}

/* Through a volatile pointer, so the compiler cannot fold malloc/free pairs
 * or reason about sizes. */
static void *(*volatile vmalloc)(size_t) = malloc;
static void *(*volatile vcalloc)(size_t, size_t) = calloc;
static void *(*volatile vrealloc)(void *, size_t) = realloc;
static void *(*volatile vreallocarray)(void *, size_t, size_t) = reallocarray;
static void (*volatile vfree)(void *) = free;

static void test_basics(void)
{
	unsigned long errs = uslab_error_count();
	void *a = vmalloc(0), *b = vmalloc(0);
	CHECK(a && b && a != b);               /* unique pointers */
	CHECK(ours(a) && ours(b));
	free(a);
	free(b);
	for (size_t n = 1; n <= 70000; n = n * 3 / 2 + 1) {
		char *p = vmalloc(n);
		CHECK(p && ((uintptr_t)p % 16) == 0);
		CHECK(malloc_usable_size(p) >= n);
		memset(p, 0x77, malloc_usable_size(p));
		free(p);
	}
	CHECK_EQ(malloc_usable_size(NULL), 0);

	/* malloc's classes: steps of 16 bytes to 128, 32 to 256, then eight a
	 * doubling, under an eighth (plus the 16-byte granule) of waste (kmalloc's
	 * own double); above 256 each is the largest multiple of 16 of which its
	 * slab holds that many. */
	bool fine = true, packed = true, one = true;
	for (size_t n = 1; n <= 8192; n++) {
		struct kmem_cache *c = usl_malloc_cache_for(n < 16 ? 16 : n);
		size_t sz = c ? kmem_cache_size(c) : 0;
		size_t slack = n <= 128 ? 15 : n <= 256 ? 31 : n / 8 + 16;
		if (sz < n || sz > (n < 16 ? 16 : n) + slack) {
			if (fine)
				fprintf(stderr, "  malloc(%zu): class %zu\n", n, sz);
			fine = false;
		}
		if (c && n > 256 && (sz & (sz - 1)) && (sz + 16) * c->objects <= usl_order_bytes(c->order)) {
			if (packed)
				fprintf(stderr, "  class %zu: its slab of order %u would hold %u of %zu bytes\n", sz,
				        c->order, c->objects, sz + 16);
			packed = false;
		}
		/* one cache a class: every entry of a class publishes the cache
		 * made for it (the classes are made above in the order the sizes
		 * of the loop before asked for them, from inside their runs) */
		if (c && usl_malloc_cache_for(sz) != c) {
			if (one)
				fprintf(stderr, "  malloc(%zu): cache %p, its class size %zu's %p\n", n, (void *)c, sz,
				        (void *)usl_malloc_cache_for(sz));
			one = false;
		}
	}
	/* and no class made twice (a second cache of a class's name would mean
	 * an entry of its run was left unpublished when the first was made) */
	for (size_t a = 1; a < USL_MAX_CACHES; a++) {
		struct kmem_cache *x = usl_caches[a];
		if (!x || strncmp(kmem_cache_name(x), "malloc-", 7))
			continue;
		for (size_t b = a + 1; b < USL_MAX_CACHES; b++)
			if (usl_caches[b] && !strcmp(kmem_cache_name(usl_caches[b]), kmem_cache_name(x))) {
				fprintf(stderr, "  %s made twice\n", kmem_cache_name(x));
				one = false;
			}
	}
	CHECK(fine);
	CHECK(packed);
	CHECK(one);
	CHECK(!strcmp(kmem_cache_name(usl_malloc_cache_for(4368)), "malloc-4368"));   /* 64 KiB / 15 */
	CHECK(!strcmp(kmem_cache_name(usl_malloc_cache_for(4369)), "malloc-4672"));
	CHECK(!strcmp(kmem_cache_name(usl_malloc_cache_for(100)), "malloc-112"));
	CHECK(!strcmp(kmem_cache_name(usl_malloc_cache_for(4096)), "kmalloc-4k"));
	void *m4 = vmalloc(4368);
	CHECK(malloc_usable_size(m4) == 4368);
	free(m4);

	/* free keeps errno; so does free(NULL). */
	errno = 1234;
	free(vmalloc(100));
	free(NULL);
	free(vmalloc(100000));                 /* a page block */
	free(vmalloc(64u << 20));              /* a mapping: munmap inside */
	CHECK_EQ(errno, 1234);

	/* calloc: zeroed, overflow is ENOMEM. */
	char *c = vmalloc(4000);
	memset(c, 0xee, 4000);
	free(c);
	c = calloc(1000, 4);
	CHECK(c && all_bytes(c, 0, 4000));
	free(c);
	/* every class's calloc clears what a freed block of its class held
	 * (the block just freed comes back: the sheaf is a stack) */
	static const size_t csz[] = { 0, 1, 16, 24, 40, 100, 256, 1000, 4096, 5000, 8192 };
	for (size_t k = 0; k < sizeof(csz) / sizeof(csz[0]); k++) {
		char *d = vmalloc(csz[k]);
		size_t u = malloc_usable_size(d);
		memset(d, 0xee, u);
		free(d);
		d = vcalloc(csz[k] ? csz[k] / 2 + csz[k] % 2 : 0, 2);
		CHECK(d != NULL && all_bytes(d, 0, csz[k]));
		free(d);
	}
	errno = 0;
	CHECK(vcalloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(vreallocarray(NULL, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(vmalloc(SIZE_MAX) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(vmalloc((size_t)PTRDIFF_MAX + 1) == NULL && errno == ENOMEM);
	CHECK_EQ(uslab_error_count(), errs);   /* failures are not reports */
}

static void test_realloc(void)
{
	char *p = realloc(NULL, 100);
	CHECK(p != NULL);
	memset(p, 'a', 100);
	char *q = realloc(p, 90);                /* shrink within the class: in place */
	CHECK(q == p);
	q = realloc(p, 5000);
	CHECK(q && all_bytes(q, 'a', 90));
	p = q;
	q = realloc(p, 4500);                    /* in place: more than half of 8 KiB used */
	CHECK(q == p);
	q = realloc(p, 100);                     /* far smaller: moves, memory given back */
	CHECK(q && all_bytes(q, 'a', 90) && malloc_usable_size(q) < 1000);
	p = q;
	q = realloc(p, 3u << 20);                /* to a large block and beyond */
	CHECK(q && all_bytes(q, 'a', 90));
	p = realloc(q, 9u << 20);
	CHECK(p && all_bytes(p, 'a', 90));
	errno = 0;
	CHECK(vrealloc(p, SIZE_MAX) == NULL && errno == ENOMEM);  /* p untouched */
	CHECK(all_bytes(p, 'a', 90));
	/* A big buffer grown step by step: mremap keeps it, contents and all. */
	unsigned char *g = vmalloc(5u << 20);
	bool kept = g != NULL;
	for (size_t i = 0; kept && i < (5u << 20); i += 4096)
		g[i] = (unsigned char)(i >> 12);
	for (size_t sz = 6u << 20; kept && sz <= (40u << 20); sz += 1u << 20) {
		unsigned char *h = vrealloc(g, sz);
		kept = h != NULL;
		if (!h)
			break;
		g = h;
		for (size_t i = 0; i < (5u << 20); i += 4096)
			kept &= g[i] == (unsigned char)(i >> 12);
		g[sz - 1] = 7;
		kept &= malloc_usable_size(g) == sz;
	}
	g = kept ? vrealloc(g, 5u << 20) : g;    /* and shrunk again */
	kept &= g && malloc_usable_size(g) == (5u << 20) && g[4096] == 1;
	CHECK(kept);
	free(g);
	CHECK(realloc(p, 0) == NULL);            /* glibc: frees */
	p = reallocarray(NULL, 10, 10);
	CHECK(p && malloc_usable_size(p) >= 100);
	free(p);
}

static void test_aligned(void)
{
	/* malloc's 16 bytes, every class (under USLAB_DEBUG too: the 96 and
	 * 192 classes, kmalloc's, once gave 8), a few blocks of each. */
	static void *blocks[8193][2];
	size_t misaligned = 0;
	for (size_t n = 1; n <= 8192; n++)
		for (int k = 0; k < 2; k++) {
			blocks[n][k] = malloc(n);
			misaligned += (uintptr_t)blocks[n][k] % 16 != 0;
		}
	CHECK_EQ(misaligned, 0);
	for (size_t n = 1; n <= 8192; n++)
		for (int k = 0; k < 2; k++)
			free(blocks[n][k]);
	for (size_t al = 1; al <= ((size_t)1 << 30); al <<= 1) {
		void *p = (void *)0x1;
		int r = posix_memalign(&p, al < sizeof(void *) ? sizeof(void *) : al, 100);
		size_t a = al < sizeof(void *) ? sizeof(void *) : al;
		CHECK(r == 0 && p && ((uintptr_t)p % a) == 0);
		if (!r) {
			memset(p, 1, 100);
			free(p);
		}
		void *q = aligned_alloc(al, al > 1000 ? 3 * al / 2 : 1000);
		CHECK(q && ((uintptr_t)q % al) == 0);
		free(q);
	}
	/* Alignments 32 .. 8 KiB once their power-of-two class is made (malloc's
	 * fast path then serves them): many blocks live at once, every one
	 * aligned, and each size asked for fits. */
	for (size_t al = 32; al <= 8192; al <<= 1) {
		enum { K = 100 };
		void *v[K];
		free(vmalloc(al));                   /* the class of al exists */
		for (int k = 0; k < K; k++) {
			size_t n = k % 3 == 0 ? al / 2 : k % 3 == 1 ? al : al + 1;
			CHECK(posix_memalign(&v[k], al, n) == 0 && ((uintptr_t)v[k] % al) == 0);
			CHECK(malloc_usable_size(v[k]) >= n);
			memset(v[k], 7, n);
		}
		for (int k = 0; k < K; k++)
			free(v[k]);
	}
	/* posix_memalign: EINVAL for a bad alignment, the pointer and errno
	 * left alone; ENOMEM for an impossible size, in errno too (glibc's).
	 * (Called through a pointer: gcc takes posix_memalign as keeping errno.) */
	int (*volatile vpm)(void **, size_t, size_t) = posix_memalign;
	void *keep = (void *)0x1234;
	errno = 77;
	CHECK_EQ(vpm(&keep, 24, 10), EINVAL);
	CHECK_EQ(vpm(&keep, 4, 10), EINVAL);
	CHECK_EQ(vpm(&keep, 0, 10), EINVAL);
	CHECK(keep == (void *)0x1234 && errno == 77);
	CHECK_EQ(vpm(&keep, 64, SIZE_MAX - 10), ENOMEM);
	CHECK(keep == (void *)0x1234 && errno == ENOMEM);
	errno = 0;
	CHECK(aligned_alloc(24, 48) == NULL && errno == EINVAL);
	void *m = memalign(48, 100);             /* glibc: rounded up to 64 */
	CHECK(m && ((uintptr_t)m % 64) == 0);
	free(m);
	long ps = sysconf(_SC_PAGESIZE);
	void *v = valloc(10), *pv = pvalloc(10);
	CHECK(v && pv && ((uintptr_t)v % (uintptr_t)ps) == 0 && ((uintptr_t)pv % (uintptr_t)ps) == 0);
	CHECK(malloc_usable_size(pv) >= (size_t)ps);
	free(v);
	free(pv);
}

/* Resident set in KiB. */
static void test_foreign_and_trim(void)
{
	capture_reports();
	char stack[32];
	unsigned long fo = reports(USLAB_ERR_FOREIGN), no = reports(USLAB_ERR_NOT_OBJECT);
	errno = 5;
	vfree(stack);                            /* reported once, ignored */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	CHECK(strstr(last_report, "free") != NULL);
	CHECK_EQ(errno, 5);
	char *p = vmalloc(64);
	vfree(p + 16);                           /* inside a block: not freed */
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK(vrealloc(p + 16, 200) == NULL);    /* nor resized */
	CHECK_EQ(malloc_usable_size(p + 16), 0);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 3);
	CHECK_EQ(malloc_usable_size(stack), 0);
	CHECK(vrealloc(stack, 10) == NULL);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 3);
	/* malloc_info takes options 0 and a stream; pvalloc's rounding overflows. */
	errno = 0;
	CHECK(malloc_info(1, stdout) == -1 && errno == EINVAL);
	CHECK(malloc_info(0, NULL) == -1);
	errno = 0;
	CHECK(pvalloc(SIZE_MAX - 10) == NULL && errno == ENOMEM);
	memset(p, 3, 64);
	free(p);
	uslab_set_report_handler(NULL, NULL);

	/* A large working set, freed: malloc_trim gives it back, and mallinfo2
	 * says so. */
	enum { N = 4000 };
	static void *v[N];
	for (int i = 0; i < N; i++) {
		v[i] = vmalloc(i % 2 ? 5000 : 300);
		memset(v[i], 1, i % 2 ? 5000 : 300);
	}
	struct mallinfo2 full = mallinfo2();
	for (int i = 0; i < N; i++)
		free(v[i]);
	CHECK_EQ(malloc_trim(0), 1);
	struct mallinfo2 after = mallinfo2();
	CHECK(full.uordblks > after.uordblks + 10u * 1000 * 1000);
	CHECK(after.keepcost > 10u * 1000 * 1000);   /* returned to the OS */
	CHECK_EQ(mallopt(M_ARENA_MAX, 1), 1);

	/* calloc of a clean page block (all free memory was just given back) does
	 * not write it: the resident set does not grow by its size, yet it reads
	 * as zeros; a dirty one is cleared. */
	malloc_trim(0);
	long r0 = rss_kib();
	unsigned char *z = vcalloc(1, 2u << 20);
	long r1 = rss_kib();
	CHECK(z && r1 - r0 < 512);
	CHECK(z && all_bytes(z, 0, 2u << 20));
	memset(z, 0x5a, 2u << 20);
	free(z);
	z = vcalloc(1, 2u << 20);                /* the same block, dirty now */
	CHECK(z && all_bytes(z, 0, 2u << 20));
	free(z);
}


/* A large block bigger than any freed before goes back to the OS as it is
 * freed (glibc's dynamic mmap threshold): no decay interval, no trim. A
 * second free of it is reported, and nothing else happens. */
static void test_large_free_at_once(void)
{
	size_t n = 3u << 20;                     /* a page block: up to 4 MiB */
	char *p = vmalloc(n);
	CHECK(p != NULL);
	memset(p, 1, n);
	long full = rss_kib();
	vfree(p);
	long after = rss_kib();
	if (full - after <= 2 * 1024)
		fprintf(stderr, "  rss %ld KiB with 3 MiB, %ld after its free\n", full, after);
	CHECK(full - after > 2 * 1024);
	unsigned long errs = uslab_error_count();
	free(p);
	CHECK_EQ(uslab_error_count(), errs + 1);
	char *q = vmalloc(n);                     /* the same block, clean */
	CHECK(q && all_bytes(q, 0, n));
	free(q);
}

/* A working set of about 64 MiB in mixed sizes, freed; then the resident set
 * must fall back: at once with malloc_trim(0), or (decay) within a few decay
 * intervals (ctest sets USLAB_DECAY_MS=100) of light malloc/free traffic. */
static void test_rss(bool decay)
{
	enum { N = 16000 };
	static void *v[N];
	long before = rss_kib();
	for (int i = 0; i < N; i++) {
		size_t n = 256 + (size_t)(i * 7919) % 8000;
		v[i] = vmalloc(n);
		memset(v[i], 1, n);
	}
	char *big = vmalloc(16u << 20);          /* a mapping: kept at its free */
	memset(big, 1, 16u << 20);
	long full = rss_kib();
	CHECK(full - before > 64 * 1024);
	for (int i = 0; i < N; i++)
		vfree(v[i]);
	vfree(big);
	CHECK(usl_map_kept_bytes() >= (16u << 20));
	long after;
	if (!decay) {
		malloc_trim(0);
		after = rss_kib();
	} else {
		/* No decay thread (USLAB_BACKGROUND=0): the program keeps calling,
		 * and its slow paths sweep. Up to 5 s. */
		for (int k = 0; k < 100; k++) {
			for (int j = 0; j < 20000; j++)
				vfree(vmalloc(64 + (size_t)j % 512));
			after = rss_kib();
			if (after - before < (full - before) / 10)
				break;
			usleep(50 * 1000);
		}
	}
	/* Within a tenth of the working set of where it started, the kept
	 * mapping unmapped. */
	if (after - before >= (full - before) / 10)
		fprintf(stderr, "  rss %ld KiB before, %ld full, %ld after\n", before, full, after);
	CHECK(after - before < (full - before) / 10);
	CHECK_EQ(usl_map_kept_bytes(), 0);
}

/* A freed direct mapping is kept for the next large block (its pages are
 * reused, not faulted in again): a smaller block takes its start, the rest
 * stays kept and joins it again at the free; a larger one grows it; calloc of
 * a kept one reads zeros; a second free is reported and changes nothing; the
 * set stays within its bounds (64 MiB); malloc_trim unmaps it. */
static void test_kept_mappings(void)
{
	malloc_trim(0);
	CHECK_EQ(usl_map_kept_bytes(), 0);
	size_t live = usl_map_count(), big = 20u << 20, small = 6u << 20;
	char *p = vmalloc(big);
	CHECK(p != NULL);
	memset(p, 7, big);
	vfree(p);
	CHECK_EQ(usl_map_kept_bytes(), big);
	CHECK_EQ(usl_map_count(), live);
	char *q = vmalloc(small);
	CHECK(q == p);                           /* its start */
	CHECK_EQ(malloc_usable_size(q), small);
	CHECK_EQ(usl_map_kept_bytes(), big - small);
	CHECK(q[0] == 7 && q[small - 1] == 7);    /* the same pages */
	vfree(q);
	CHECK_EQ(usl_map_kept_bytes(), big);      /* joined again */
	capture_reports();
	unsigned long errs = uslab_error_count();
	vfree(q);                                /* a second free */
	CHECK_EQ(uslab_error_count(), errs + 1);
	CHECK_EQ(usl_map_kept_bytes(), big);
	uslab_set_report_handler(NULL, NULL);
	unsigned char *z = vcalloc(1, big);      /* kept, so cleared */
	CHECK(z == (unsigned char *)p && all_bytes(z, 0, big));
	vfree(z);
	char *g = vmalloc(big + (4u << 20));     /* bigger: the kept one grows */
	CHECK(g != NULL && usl_map_kept_bytes() == 0);
	CHECK(g && g[0] == 0 && g[big + (4u << 20) - 1] == 0);
	memset(g, 2, big + (4u << 20));
	vfree(g);
	void *a = NULL;                          /* an alignment the kept one may lack */
	CHECK_EQ(posix_memalign(&a, 16u << 20, 5u << 20), 0);
	CHECK(a && ((uintptr_t)a & ((16u << 20) - 1)) == 0);
	free(a);
	/* Twelve of 10 MiB live at once, then freed: at most 64 MiB stays. */
	static char *m[12];
	for (int i = 0; i < 12; i++) {
		m[i] = vmalloc(10u << 20);
		CHECK(m[i] != NULL);
		if (m[i])
			memset(m[i], i, 10u << 20);
	}
	for (int i = 0; i < 12; i++) {
		CHECK(m[i] && m[i][(10u << 20) - 1] == (char)i);   /* none shares pages with another */
		vfree(m[i]);
	}
	CHECK(usl_map_kept_bytes() > 0 && usl_map_kept_bytes() <= (64u << 20));
	CHECK_EQ(usl_map_count(), live);
	malloc_trim(0);
	CHECK_EQ(usl_map_kept_bytes(), 0);
}

/* Threads allocate while the main thread forks; each child allocates and
 * frees with every size class and exits 0 if all went well. */
static volatile int stop_threads;
static void *churn(void *arg)
{
	unsigned x = (unsigned)(uintptr_t)arg;
	void *keep[64] = { 0 };
	while (!stop_threads) {
		x = x * 1103515245u + 12345u;
		unsigned i = (x >> 8) % 64;
		free(keep[i]);
		keep[i] = vmalloc((x >> 16) % 20000);
	}
	for (int i = 0; i < 64; i++)
		free(keep[i]);
	return NULL;
}

static void test_fork(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	int ok = 0;
	for (int k = 0; k < 100; k++) {
		pid_t pid = fork();
		if (pid == 0) {
			void *v[100];
			for (int i = 0; i < 100; i++)
				v[i] = vmalloc((size_t)i * 97);
			for (int i = 0; i < 100; i++)
				free(v[i]);
			pthread_t ct;
			pthread_create(&ct, NULL, churn, (void *)7);
			stop_threads = 1;
			pthread_join(ct, NULL);
			_exit(0);
		}
		int st;
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	stop_threads = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(ok, 100);
}

/* Threads allocate and exit; their blocks are freed by the main thread. */
static void *alloc_and_exit(void *arg)
{
	void **out = arg;
	for (int i = 0; i < 100; i++) {
		out[i] = vmalloc(16 + (size_t)i * 41);
		memset(out[i], i, 16);
	}
	return NULL;
}

static void test_thread_exit(void)
{
	static void *blocks[32][100];
	bool good = true;
	for (int r = 0; r < 4; r++) {
		pthread_t t[32];
		for (int i = 0; i < 32; i++)
			pthread_create(&t[i], NULL, alloc_and_exit, blocks[i]);
		for (int i = 0; i < 32; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 32; i++)
			for (int j = 0; j < 100; j++) {
				good &= all_bytes(blocks[i][j], j, 16);
				free(blocks[i][j]);
			}
	}
	CHECK(good);
}

/* A class is made by the first malloc of a size it serves: until then its
 * table entries are empty; then the entries it serves point at it, and the
 * next class's stay empty. */
static void test_lazy_classes(void)
{
	size_t n = 2900;                         /* asked for by nobody before */
	size_t i = (n + 15) >> 4;
	CHECK(usl_malloc_tab[i] == NULL);
	void *p = vmalloc(n);
	struct kmem_cache *c = usl_malloc_tab[i];
	CHECK(p && c && usl_virt_to_slab(p)->slab_cache == c);
	size_t top = kmem_cache_size(c) >> 4;    /* the entry of its own size */
	CHECK(usl_malloc_tab[top] == c);
	CHECK(top + 1 < USL_MALLOC_TAB && usl_malloc_tab[top + 1] == NULL);
	free(p);

	/* A thread holding the registry's locks (a report handler called from
	 * inside them) makes no class: it gets the kmalloc class. */
	size_t m = 1700, j = (m + 15) >> 4;
	CHECK(usl_malloc_tab[j] == NULL);
	usl_registry_held++;
	void *q = vmalloc(m);
	usl_registry_held--;
	CHECK(q && usl_malloc_tab[j] == NULL);
	CHECK(q && !strcmp(kmem_cache_name(usl_virt_to_slab(q)->slab_cache), "kmalloc-2k"));
	free(q);
}

/* malloc_trim takes every sheaf out of the slots and barns and frees it into
 * its sheaf cache, and shrinks those caches after: with no sheaf left anywhere,
 * a sheaf cache keeps no slab (shrunk before the classes, each kept the page
 * of sheaves the classes then freed into it). */
static void test_trim_sheaf_caches(void)
{
	static const size_t sizes[] = { 24, 200, 700, 1500, 3000, 6000 };
	enum { NS = sizeof(sizes) / sizeof(sizes[0]), PER = 300 };
	static void *v[NS][PER];
	struct kmem_cache *sc[NS];

	for (int k = 0; k < NS; k++)
		for (int i = 0; i < PER; i++)
			v[k][i] = vmalloc(sizes[k]);     /* full sheaves go to the barns */
	for (int k = 0; k < NS; k++) {
		for (int i = 0; i < PER; i++)
			vfree(v[k][i]);
		sc[k] = usl_malloc_tab[(sizes[k] + 15) >> 4]->sheaf_cache;
	}
	malloc_trim(0);
	for (int k = 0; k < NS; k++) {
		if (!sc[k])                      /* USLAB_SHEAVES=0 */
			continue;
		unsigned long objs = __atomic_load_n(&sc[k]->node[0]->total_objects, __ATOMIC_RELAXED);
		if (objs)
			fprintf(stderr, "  %s keeps %lu objects after malloc_trim\n", kmem_cache_name(sc[k]), objs);
		CHECK_EQ(objs, 0);
	}
}

/* A block whose free marker is gone when malloc pops it again (a write after
 * free of its first word, or a sheaf entry overwritten) is refused: reported,
 * never handed out, and malloc returns another block. On one CPU, so the pop
 * is of the sheaf the free pushed onto. Each size class its own. On the owned
 * front there is no marker: the write changes nothing. */
static void test_pop_refused(void)
{
	if (!usl_opt.harden)
		return;
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	capture_reports();
	static const size_t sizes[] = { 16, 40, 100, 256, 1000, 5000 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned long df = reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_CORRUPT);
		char *p = vmalloc(sizes[k]);
		vfree(p);
		memset(p, 0x5a, 8);               /* its first word: the marker */
		char *q = vmalloc(sizes[k]);
		if (usl_malloc_owned(usl_malloc_classes[(sizes[k] + 15) >> 4].slots)) {
			/* Owned: no marker in a freed block, its free state is a
			 * bit outside it. The write changes no allocation: nothing
			 * is reported, and the block (p again, or another) is
			 * handed out once. */
			char *r = vmalloc(sizes[k]);
			CHECK(q != NULL && r != NULL && q != r);
			CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_CORRUPT), df);
			vfree(r);
		} else {
			CHECK(q != NULL && q != p);
			/* With delayed reuse p waits behind others: refused (as
			 * corrupt) when malloc_trim gives the sheaves back to their
			 * slabs. */
			if (usl_opt.random)
				malloc_trim(0);
			if (pinned)
				CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_CORRUPT), df + 1);
		}
		vfree(q);
	}
	if (owned_front())
		CHECK_EQ(reports_all(), 0);
	uslab_set_report_handler(NULL, NULL);
	if (pinned)
		unpin_cpu(&was);
}

/* Each mode's table holds the class's slots: the checked pop's with hardening
 * alone on, the plain pop's with hardening off, neither with counters on; a
 * block from either pop comes back as the same block (LIFO) on one CPU. On
 * the owned front the first table holds its tagged slots in every mode. */
static void test_class_tables(void)
{
	void *p = vmalloc(200);
	CHECK(p != NULL);
	vfree(p);
	size_t i = (200 + 15) >> 4;
	struct kmem_cache *s = usl_malloc_tab[i];
	CHECK(s != NULL);
	if (!s)
		return;
	unsigned int mode = usl_opt.mode & 0xff & ~USL_MODE_NUMA;   /* nodes change neither pop */
	if (s->oslots) {
		/* Owned: the slots, tagged, in the one table whatever the mode
		 * (there is no marker to check or skip); a free sets a bit and
		 * the pop takes the cursor's next one: no LIFO. */
		CHECK_EQ(usl_malloc_classes[i].slots, (uintptr_t)s->oslots | 1);
		CHECK(usl_malloc_owned(usl_malloc_classes[i].slots));
		CHECK_EQ(usl_malloc_plain[i], NULL);
		void *a = vmalloc(200), *b = vmalloc(200);
		CHECK(a != NULL && b != NULL && a != b);
		vfree(a);
		vfree(b);
		return;
	}
	CHECK_EQ(usl_malloc_classes[i].slots, mode == USL_MODE_HARDEN ? s->cpu_slab : NULL);
	CHECK_EQ(usl_malloc_plain[i], mode == 0 ? s->cpu_slab : NULL);
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	void *a = vmalloc(200);
	vfree(a);
	void *b = vmalloc(200);
	if (pinned && usl_rseq_mode)
		CHECK(s->reuse_delay ? a != b : a == b);   /* (delayed reuse: a waits) */
	vfree(b);
	if (pinned)
		unpin_cpu(&was);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "decay")) {
		test_rss(true);
		return test_summary();
	}
	if (argc > 1 && !strcmp(argv[1], "aligned")) {   /* (under USLAB_DEBUG: debug classes) */
		test_aligned();
		return test_summary();
	}
	test_lazy_classes();                       /* first: no class made but those libc used */
	test_large_free_at_once();                 /* no large block freed before */
	unsigned long errs = uslab_error_count();
	test_basics();
	test_class_tables();
	test_realloc();
	test_aligned();
	test_fork();
	test_thread_exit();
	CHECK_EQ(uslab_error_count(), errs);       /* nothing so far was reported */
	test_foreign_and_trim();
	test_pop_refused();
	test_kept_mappings();
	test_trim_sheaf_caches();
	test_rss(false);
	return test_summary();
}
