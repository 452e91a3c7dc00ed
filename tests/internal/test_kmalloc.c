/* test_kmalloc.c - the kmalloc family: size classes and their alignment, large
 * blocks and direct mappings, krealloc, kstrdup/kmemdup, kfree_bulk of mixed
 * pointers, bad input reported and ignored, and threads (more than CPUs) that
 * kmalloc, krealloc and kfree each other's blocks with their contents checked. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "../harness.h"
#include "pages/pages.h"
#include "engine/engine.h"
#include "testing.h"

static const size_t classes[] = { 8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192 };

static size_t expected_class(size_t n)
{
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (n <= classes[i])
			return classes[i];
	return 0;
}

/* Objects of s in use, after its sheaves and cpu slabs are flushed. */
static unsigned long in_use(struct kmem_cache *s)
{
	kmem_cache_shrink(s);
	return usl_engine_objects_in_use(s);
}

static void test_classes(void)
{
	/* Every size up to 8 KiB lands in the kernel's class for it, named as the
	 * kernel names it; power-of-two classes are naturally aligned. */
	bool debug = getenv("USLAB_DEBUG") != NULL;   /* ksize is then the size asked for */
	for (size_t n = 1; n <= 8192; n += (n < 300 ? 1 : 61)) {
		void *p = kmalloc(n, GFP_KERNEL);
		size_t c = expected_class(n);
		CHECK(p != NULL);
		if (!p)
			continue;
		if (!debug && ksize(p) != c) {
			CHECK_EQ(ksize(p), c);
			fprintf(stderr, "  size %zu\n", n);
		}
		size_t a = (c & (c - 1)) ? 8 : c;
		if ((uintptr_t)p % a) {
			CHECK_EQ((uintptr_t)p % a, 0);
			fprintf(stderr, "  size %zu at %p\n", n, p);
		}
		memset(p, 0x5a, ksize(p));      /* the whole usable size is ours */
		kfree(p);
	}
	CHECK(strcmp(kmem_cache_name(usl_kmalloc_cache_for(96)), "kmalloc-96") == 0);
	CHECK(strcmp(kmem_cache_name(usl_kmalloc_cache_for(150)), "kmalloc-192") == 0);
	CHECK(strcmp(kmem_cache_name(usl_kmalloc_cache_for(1000)), "kmalloc-1k") == 0);
	CHECK(strcmp(kmem_cache_name(usl_kmalloc_cache_for(8192)), "kmalloc-8k") == 0);
	CHECK(usl_kmalloc_cache_for(8193) == NULL);

	/* Neighbours do not overlap: fill many, check each after all are filled. */
	enum { N = 500 };
	static void *v[N];
	for (int i = 0; i < N; i++) {
		size_t n = 1 + (size_t)(i * 37) % 3000;
		v[i] = kmalloc(n, GFP_KERNEL);
		memset(v[i], i & 0xff, n);
	}
	bool intact = true;
	for (int i = 0; i < N; i++)
		intact &= all_bytes(v[i], i & 0xff, 1 + (size_t)(i * 37) % 3000);
	CHECK(intact);
	for (int i = 0; i < N; i++)
		kfree(v[i]);

	/* kzalloc clears a reused object. */
	for (size_t n = 16; n <= 8192; n *= 2) {
		void *p = kmalloc(n, GFP_KERNEL);
		memset(p, 0xaa, n);
		kfree(p);
		p = kzalloc(n, GFP_KERNEL);
		CHECK(all_bytes(p, 0, ksize(p)));
		kfree(p);
	}
	void *z = kmalloc_node(100, GFP_KERNEL, NUMA_NO_NODE);
	CHECK(z && ksize(z) == (debug ? 100 : 128));
	kfree(z);
}

static void test_zero_and_overflow(void)
{
	unsigned long errs = uslab_error_count();
	CHECK(kmalloc(0, GFP_KERNEL) == ZERO_SIZE_PTR);
	CHECK(kzalloc(0, GFP_KERNEL) == ZERO_SIZE_PTR);
	CHECK(kcalloc(0, 8, GFP_KERNEL) == ZERO_SIZE_PTR);
	kfree(NULL);
	kfree(ZERO_SIZE_PTR);
	CHECK_EQ(ksize(NULL), 0);
	CHECK_EQ(ksize(ZERO_SIZE_PTR), 0);
	CHECK(ZERO_OR_NULL_PTR(NULL) && ZERO_OR_NULL_PTR(ZERO_SIZE_PTR));
	CHECK_EQ(uslab_error_count(), errs);       /* none of that is an error */

	CHECK(kmalloc_array(SIZE_MAX / 2, 3, GFP_KERNEL) == NULL);
	CHECK(kcalloc((size_t)1 << 40, (size_t)1 << 40, GFP_KERNEL) == NULL);
	CHECK(kmalloc(SIZE_MAX, GFP_KERNEL | __GFP_NOWARN) == NULL);
	CHECK(kmalloc((size_t)PTRDIFF_MAX + 1, GFP_KERNEL | __GFP_NOWARN) == NULL);
	int *a = kcalloc(1000, sizeof(int), GFP_KERNEL);
	CHECK(a && all_bytes(a, 0, 1000 * sizeof(int)));
	kfree(a);
	a = kmalloc_array(10, sizeof(int), GFP_KERNEL);
	CHECK(a && ksize(a) >= 40);
	kfree(a);
}

static void test_large(void)
{
	/* Page-provider blocks: page counts rounded to a power of two, naturally
	 * aligned; then direct mappings beyond the largest block. */
	size_t max_block = USL_PAGE_SIZE << USL_MAX_ORDER;
	const size_t sizes[] = { 8193, 12288, 16384, 100000, 1 << 20, max_block, max_block + 1, 3 * max_block + 5 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		char *p = kmalloc(n, GFP_KERNEL);
		CHECK(p != NULL);
		if (!p)
			continue;
		size_t ks = ksize(p);
		CHECK(ks >= n);
		if (n <= max_block) {
			CHECK((ks & (ks - 1)) == 0 && ks % USL_PAGE_SIZE == 0);
			CHECK_EQ((uintptr_t)p % ks, 0);
		} else {
			CHECK_EQ(ks, (n + USL_PAGE_SIZE - 1) / USL_PAGE_SIZE * USL_PAGE_SIZE);
			CHECK_EQ((uintptr_t)p % USL_PAGE_SIZE, 0);
		}
		memset(p, 0x33, ks);
		CHECK(all_bytes(p, 0x33, ks));
		kfree(p);
		p = kzalloc(n, GFP_KERNEL);
		CHECK(p && all_bytes(p, 0, n));
		kfree(p);
	}
}

static void test_krealloc(void)
{
	capture_reports();
	char *p = krealloc(NULL, 10, GFP_KERNEL);
	CHECK(p && ksize(p) == 16);
	memcpy(p, "abcdefghi", 10);
	char *q = krealloc(p, 16, GFP_KERNEL);     /* fits: in place */
	CHECK(q == p);
	q = krealloc(p, 100, GFP_KERNEL);          /* grows: moved, contents kept */
	CHECK(q && ksize(q) == 128 && memcmp(q, "abcdefghi", 10) == 0);
	p = q;
	memset(p, 'x', 128);
	q = krealloc(p, 50, GFP_KERNEL | __GFP_ZERO); /* shrink in place, the tail cleared */
	CHECK(q == p && all_bytes(q, 'x', 50) && all_bytes(q + 50, 0, 78));
	q = krealloc(p, 100000, GFP_KERNEL);       /* to a large block */
	CHECK(q && ksize(q) >= 100000 && all_bytes(q, 'x', 50));
	p = q;
	q = krealloc(p, 5000, GFP_KERNEL);         /* a large block that still fits */
	CHECK(q == p);
	q = krealloc(p, (USL_PAGE_SIZE << USL_MAX_ORDER) * 2, GFP_KERNEL);  /* to a direct mapping */
	CHECK(q && all_bytes(q, 'x', 50));
	p = q;
	q = krealloc(p, (USL_PAGE_SIZE << USL_MAX_ORDER) * 2 - 4096, GFP_KERNEL);  /* a mapping that fits */
	CHECK(q == p);
	q = krealloc(p, (USL_PAGE_SIZE << USL_MAX_ORDER) * 5, GFP_KERNEL);  /* a mapping grown */
	CHECK(q && all_bytes(q, 'x', 50));
	p = q;
	CHECK(krealloc(p, 0, GFP_KERNEL) == ZERO_SIZE_PTR);  /* frees */
	p = krealloc(ZERO_SIZE_PTR, 30, GFP_KERNEL);
	CHECK(p && ksize(p) == 32);
	kfree(p);

	/* A pointer that is not ours: reported, NULL, nothing freed. */
	char stack[64];
	unsigned long fo = reports(USLAB_ERR_FOREIGN);
	CHECK(krealloc(stack, 100, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_NOT_OBJECT), 0);
	uslab_set_report_handler(NULL, NULL);
}

static void test_dup(void)
{
	char *s = kstrdup("hello, slab", GFP_KERNEL);
	CHECK(s && strcmp(s, "hello, slab") == 0 && ksize(s) == 16);
	kfree(s);
	CHECK(kstrdup(NULL, GFP_KERNEL) == NULL);
	s = kstrdup("", GFP_KERNEL);
	CHECK(s && s[0] == 0);
	kfree(s);
	int src[300];
	for (int i = 0; i < 300; i++)
		src[i] = i * 7;
	int *d = kmemdup(src, sizeof(src), GFP_KERNEL);
	CHECK(d && memcmp(d, src, sizeof(src)) == 0);
	kfree(d);
	CHECK(kmemdup(src, 0, GFP_KERNEL) == ZERO_SIZE_PTR);
}

static void test_bad_input(void)
{
	capture_reports();
	char stack[64];
	unsigned long fo = reports(USLAB_ERR_FOREIGN), no = reports(USLAB_ERR_NOT_OBJECT),
	              df = reports(USLAB_ERR_DOUBLE_FREE);

	kfree(stack);                                   /* foreign */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	CHECK_EQ(ksize(stack), 0);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 2);

	struct kmem_cache *k64 = usl_kmalloc_cache_for(64);
	unsigned long before = in_use(k64);
	char *p = kmalloc(64, GFP_KERNEL);
	kfree(p + 8);                                   /* inside an object: not freed */
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK_EQ(ksize(p + 8), 0);                      /* nor sized, nor resized */
	CHECK(krealloc(p + 8, 200, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 3);
	no += 2;
	CHECK_EQ(in_use(k64), before + 1);
	kfree(p);
	kfree(p);                                       /* at once: caught */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), df + 1);
	CHECK_EQ(in_use(k64), before);

	char *l = kmalloc(50000, GFP_KERNEL);
	kfree(l + 4096);                                /* inside a large block */
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 2);
	memset(l, 1, 50000);                            /* still ours */
	kfree(l);
	kfree(l);                                       /* a large block twice */
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 3);

	size_t big = (USL_PAGE_SIZE << USL_MAX_ORDER) + 1;
	char *h = kmalloc(big, GFP_KERNEL);
	CHECK(h != NULL);
	kfree(h + USL_PAGE_SIZE);                       /* inside a direct mapping */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 3);
	h[big - 1] = 1;                                 /* still mapped */
	kfree(h);
	kfree(h);                                       /* unmapped: now foreign */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 4);

	/* A cache structure is an object of uslab's own cache: kfree of it (for
	 * kmem_cache_destroy) is reported and the cache keeps working. */
	struct kmem_cache *c = kmem_cache_create("kfree-me", 40, 0, SLAB_NO_MERGE, NULL);
	CHECK(c != NULL);
	void *o = kmem_cache_alloc(c, GFP_KERNEL);
	kfree(c);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 4);
	CHECK_EQ(ksize(c), 0);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 5);
	kmem_cache_free(c, o);
	kmem_cache_destroy(c);
	uslab_set_report_handler(NULL, NULL);
}

static void test_kfree_bulk(void)
{
	capture_reports();
	unsigned long errs = uslab_error_count();
	struct kmem_cache *k32 = usl_kmalloc_cache_for(32), *k1k = usl_kmalloc_cache_for(1000);
	unsigned long u32 = in_use(k32), u1k = in_use(k1k);
	void *p[64];
	int n = 0;
	for (int i = 0; i < 20; i++) {
		p[n++] = kmalloc(20, GFP_KERNEL);
		p[n++] = kmalloc(1000, GFP_KERNEL);
	}
	void *large = kmalloc(70000, GFP_KERNEL), *huge = kmalloc((USL_PAGE_SIZE << USL_MAX_ORDER) * 2, GFP_KERNEL);
	p[n++] = large;
	p[n++] = NULL;
	p[n++] = ZERO_SIZE_PTR;
	p[n++] = huge;
	CHECK_EQ(in_use(k32), u32 + 20);
	kfree_bulk((size_t)n, p);
	CHECK_EQ(uslab_error_count(), errs);            /* nothing was reported */
	CHECK_EQ(in_use(k32), u32);
	CHECK_EQ(in_use(k1k), u1k);
	/* The large block and the mapping are gone: freeing them again is reported. */
	unsigned long no = reports(USLAB_ERR_NOT_OBJECT), fo = reports(USLAB_ERR_FOREIGN);
	kfree(large);
	kfree(huge);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	/* Bad entries among good ones: each reported, the rest freed. */
	char stack[16];
	char *in = kmalloc(64, GFP_KERNEL);
	unsigned long fo2 = reports(USLAB_ERR_FOREIGN), no2 = reports(USLAB_ERR_NOT_OBJECT);
	p[0] = kmalloc(20, GFP_KERNEL);
	p[1] = stack;
	p[2] = in + 8;
	p[3] = kmalloc(20, GFP_KERNEL);
	kfree_bulk(4, p);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo2 + 1);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no2 + 1);
	CHECK_EQ(in_use(k32), u32);
	kfree(in);
	/* kmem_cache_free_bulk(NULL, ...) is kfree_bulk. */
	p[0] = kmalloc(20, GFP_KERNEL);
	p[1] = kmalloc(9000, GFP_KERNEL);
	kmem_cache_free_bulk(NULL, 2, p);
	CHECK_EQ(in_use(k32), u32);
	uslab_set_report_handler(NULL, NULL);
}

/* Threads: each owns slots of blocks filled with a pattern naming the block;
 * it replaces, resizes and frees them, and hands some to the next thread
 * through a mailbox, which checks and frees them. */
enum { THREADS = 8, SLOTS = 256, OPS = 60000 };
struct blk {
	unsigned char *p;
	size_t n;
};
static struct blk *mailbox[THREADS];
static int thread_failures;

static unsigned char pattern(const struct blk *b) { return (unsigned char)((uintptr_t)b->p >> 4 ^ b->n); }
static bool blk_ok(const struct blk *b) { return all_bytes(b->p, pattern(b), b->n); }
static void blk_fill(struct blk *b) { memset(b->p, pattern(b), b->n); }

static size_t pick_size(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	switch (*x % 16) {
	case 0:
		return 8193 + *x % 60000;       /* large */
	case 1:
		return 1 + *x % 8192;
	default:
		return 1 + *x % 512;
	}
}

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	struct blk slot[SLOTS] = { { 0 } };
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	int bad = 0;

	for (int op = 0; op < OPS; op++) {
		struct blk *b = &slot[op % SLOTS];
		if (b->p && !blk_ok(b))
			bad++;
		size_t n = pick_size(&x);
		if (b->p && (x & 3) == 0) {
			unsigned char *q = krealloc(b->p, n, GFP_KERNEL);
			if (!q) {
				bad++;
				continue;
			}
			/* The old contents survive up to the smaller size. */
			if (!all_bytes(q, pattern(b), n < b->n ? n : b->n))
				bad++;
			b->p = q;
			b->n = n;
			blk_fill(b);
			continue;
		}
		if (b->p && (x & 7) == 1) {
			/* Hand it to the next thread; free what was waiting there. */
			struct blk *mine = kmalloc(sizeof(*mine), GFP_KERNEL);
			*mine = *b;
			struct blk *old = __atomic_exchange_n(&mailbox[(id + 1) % THREADS], mine, __ATOMIC_ACQ_REL);
			if (old) {
				if (!blk_ok(old))
					bad++;
				kfree(old->p);
				kfree(old);
			}
			b->p = NULL;
		} else if (b->p) {
			kfree(b->p);
		}
		b->n = n;
		b->p = kmalloc(n, GFP_KERNEL);
		if (!b->p || ksize(b->p) < n) {
			bad++;
			b->p = NULL;
			continue;
		}
		blk_fill(b);
	}
	for (int i = 0; i < SLOTS; i++) {
		if (slot[i].p && !blk_ok(&slot[i]))
			bad++;
		kfree(slot[i].p);
	}
	__atomic_fetch_add(&thread_failures, bad, __ATOMIC_RELAXED);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	unsigned long errs = uslab_error_count();
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < THREADS; i++) {
		if (mailbox[i]) {
			if (!blk_ok(mailbox[i]))
				thread_failures++;
			kfree(mailbox[i]->p);
			kfree(mailbox[i]);
		}
	}
	CHECK_EQ(thread_failures, 0);
	CHECK_EQ(uslab_error_count(), errs);
	/* Every class is back to what it held before (nothing leaked or lost). */
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		unsigned long u = in_use(usl_kmalloc_cache_for(classes[i]));
		if (u) {
			CHECK_EQ(u, 0);
			fprintf(stderr, "  kmalloc class %zu\n", classes[i]);
		}
	}
}

/* Direct mappings from threads at once (more threads than CPUs): freed ones
 * are kept and taken again, split and merged under mappings_lock; each block's
 * pages hold its own mark until its free, and a kzalloc'd one reads zeros. */
enum { LARGE_THREADS = 6, LARGE_OPS = 40 };
static int large_failures;
static void *large_worker(void *arg)
{
	uint64_t x = 0x2545F4914F6CDD1Dull * (uint64_t)((intptr_t)arg + 1);
	size_t max_block = USL_PAGE_SIZE << USL_MAX_ORDER;
	unsigned char *held[2] = { NULL, NULL };
	size_t held_n[2] = { 0, 0 };
	int bad = 0;
	for (int op = 0; op < LARGE_OPS; op++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int k = op & 1;
		size_t n = max_block + 1 + x % (6 * max_block / 4);
		if (held[k]) {
			unsigned char m = (unsigned char)((uintptr_t)held[k] >> 12);
			for (size_t i = 0; i < held_n[k]; i += USL_PAGE_SIZE)
				bad += held[k][i] != m;
			kfree(held[k]);
		}
		bool zero = (x >> 20) % 3 == 0;
		unsigned char *p = zero ? kzalloc(n, GFP_KERNEL) : kmalloc(n, GFP_KERNEL);
		if (!p || ksize(p) < n) {
			bad++;
			held[k] = NULL;
			continue;
		}
		unsigned char m = (unsigned char)((uintptr_t)p >> 12);
		for (size_t i = 0; i < n; i += USL_PAGE_SIZE) {
			if (zero)
				bad += p[i] != 0;
			p[i] = m;
		}
		held[k] = p;
		held_n[k] = n;
	}
	for (int k = 0; k < 2; k++)
		kfree(held[k]);
	__atomic_fetch_add(&large_failures, bad, __ATOMIC_RELAXED);
	return NULL;
}

static void test_large_threads(void)
{
	pthread_t t[LARGE_THREADS];
	unsigned long errs = uslab_error_count();
	size_t maps = usl_map_count();
	for (int i = 0; i < LARGE_THREADS; i++)
		pthread_create(&t[i], NULL, large_worker, (void *)(intptr_t)i);
	for (int i = 0; i < LARGE_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(large_failures, 0);
	CHECK_EQ(uslab_error_count(), errs);
	CHECK_EQ(usl_map_count(), maps);             /* every block freed */
	CHECK(usl_map_kept_bytes() <= (64u << 20));
	uslab_release_free_memory();
	CHECK_EQ(usl_map_kept_bytes(), 0);
}

/* uslab_malloc: malloc's classes without malloc: every size to 9000 (and
 * large ones) 16-aligned, usable to its size, freed by kfree and
 * kfree_bulk, zeroed on request, and a class block again after its free. */
static void test_uslab_malloc(void)
{
	static void *v[9001];
	for (size_t n = 0; n <= 9000; n++) {
		char *p = v[n] = uslab_malloc(n, GFP_KERNEL);
		CHECK(p != NULL && (uintptr_t)p % 16 == 0 && ksize(p) >= (n ? n : 1));
		memset(p, 0x6b, n);
	}
	for (size_t n = 0; n <= 9000; n += 2)
		kfree(v[n]);
	for (size_t n = 0; n <= 9000; n += 2) {
		char *z = v[n] = uslab_malloc(n, GFP_KERNEL | __GFP_ZERO);
		CHECK(z && all_bytes(z, 0, n));
	}
	kfree_bulk(9001, v);
	char *big = uslab_malloc(5u << 20, GFP_KERNEL);
	CHECK(big && ksize(big) >= (5u << 20));
	memset(big, 1, 5u << 20);
	kfree(big);
	capture_reports();
	unsigned long nomem = reports(USLAB_ERR_NOMEM);
	CHECK(uslab_malloc(SIZE_MAX - 4096, GFP_KERNEL | __GFP_NOWARN) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), nomem);
}

/* uslab_aligned_alloc: every power of two from 1 to 2 MiB with sizes about
 * it, aligned, usable to its size, freed by kfree; bad alignments refused. */
static void test_aligned(void)
{
	static const size_t sizes[] = { 0, 1, 7, 24, 100, 4095, 5000, 70000, 5u << 20 };
	for (size_t align = 1; align <= (2u << 20); align <<= 1)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			char *p = uslab_aligned_alloc(align, n, GFP_KERNEL);
			CHECK(p != NULL);
			if (!p)
				continue;
			if (n || align > 8)
				CHECK_EQ((uintptr_t)p % align, 0);
			CHECK(ksize(p) >= n);
			memset(p, 0x5a, n);
			kfree(p);
		}
	char *z = uslab_aligned_alloc(256, 300, GFP_KERNEL | __GFP_ZERO);
	CHECK(z && all_bytes(z, 0, 300));
	kfree(z);
	capture_reports();
	unsigned long bad = reports(USLAB_ERR_BAD_ARG), nomem = reports(USLAB_ERR_NOMEM);
	CHECK(uslab_aligned_alloc(0, 64, GFP_KERNEL) == NULL);
	CHECK(uslab_aligned_alloc(48, 64, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), bad + 2);
	CHECK(uslab_aligned_alloc(64, SIZE_MAX - 8, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), nomem + 1);
	CHECK(uslab_aligned_alloc(64, SIZE_MAX - 8, GFP_KERNEL | __GFP_NOWARN) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), nomem + 1);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "classes")) {   /* (under USLAB_DEBUG: debug classes) */
		test_classes();
		return test_summary();
	}
	/* The very first uslab call a large kmalloc: the page size must be known. */
	void *first = kmalloc(100000, GFP_KERNEL);
	CHECK(first && ksize(first) >= 100000);
	kfree(first);
	test_classes();
	test_zero_and_overflow();
	test_large();
	test_krealloc();
	test_dup();
	test_bad_input();
	test_kfree_bulk();
	test_aligned();
	test_uslab_malloc();
	test_threads();
	test_large_threads();
	return test_summary();
}
