/* test_bulk.c - kmem_cache_alloc_bulk / kmem_cache_free_bulk / kfree_bulk: sizes
 * 0..10000, arrays mixing many slabs, caches and CPUs in random order (so detached
 * freelists interleave), NULL entries, bad pointers and duplicates, all-or-nothing
 * allocation under a failing page provider, and __GFP_ZERO. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>

#include "../harness.h"
#include "common/common.h"
#include "pages/pages.h"
#include "engine/engine.h"
#include "testing.h"

static uint64_t seed = 12345;
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

static void shuffle(void **p, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rnd() % i;
		void *t = p[i - 1];
		p[i - 1] = p[j];
		p[j] = t;
	}
}

static unsigned long in_use(struct kmem_cache *s)
{
	usl_cache_flush_all(s);
	return usl_engine_objects_in_use(s);
}

/* Objects are distinct, writable and tagged; the tags survive until the free. */
static int tag_all(void **p, size_t n, unsigned int size)
{
	int dup = 0;
	for (size_t i = 0; i < n; i++)
		memset(p[i], (int)(i & 0xff), size);
	for (size_t i = 0; i < n; i++)
		dup += ((unsigned char *)p[i])[size - 1] != (unsigned char)(i & 0xff);
	return dup;
}

static void test_sizes(void)
{
	struct kmem_cache *s = kmem_cache_create("bulk-232", 232, 0, SLAB_HWCACHE_ALIGN, NULL);
	static void *p[10000];
	size_t sizes[] = { 0, 1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250, 1000, 10000 };
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		for (int round = 0; round < 3; round++) {
			CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, n, p), (int)n);
			CHECK_EQ(tag_all(p, n, 232), 0);
			if (round == 1)
				shuffle(p, n);
			kmem_cache_free_bulk(s, n, p);
		}
		CHECK_EQ(in_use(s), 0);
	}
	/* Bulk and single calls mix freely. */
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 500, p), 500);
	for (int i = 0; i < 250; i++)
		kmem_cache_free(s, p[i]);
	for (int i = 0; i < 250; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(tag_all(p, 500, 232), 0);
	kmem_cache_free_bulk(s, 500, p);
	CHECK_EQ(in_use(s), 0);
	kmem_cache_destroy(s);
}

static void test_mixed_kfree_bulk(void)
{
	struct kmem_cache *c[3] = {
		kmem_cache_create("mix-16", 16, 0, 0, NULL),
		kmem_cache_create("mix-200", 200, 0, 0, NULL),
		kmem_cache_create("mix-3000", 3000, 0, 0, NULL),
	};
	enum { N = 6000 };
	static void *p[N + 600];
	size_t n = 0;
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(kmem_cache_alloc_bulk(c[k], GFP_KERNEL, N / 3, p + n), N / 3);
		n += N / 3;
	}
	/* Free some singly, so slabs are partly free, then reallocate them. */
	for (size_t i = 0; i < n; i += 7) {
		kmem_cache_free(c[i / (N / 3)], p[i]);
		p[i] = kmem_cache_alloc(c[i / (N / 3)], GFP_KERNEL);
	}
	for (int i = 0; i < 600; i++)
		p[n++] = NULL;            /* NULL entries are skipped */
	shuffle(p, n);
	kfree_bulk(n, p);
	for (int k = 0; k < 3; k++) {
		CHECK_EQ(in_use(c[k]), 0);
		kmem_cache_destroy(c[k]);
	}
	kfree_bulk(0, NULL);
	kmem_cache_free_bulk(NULL, 0, NULL);
}

/* Double frees that only the cpu-slab layer sees: an object heading a freelist,
 * or found on its slab's freelist before anything is written. */
static void bad_entries_cpu_slab(struct kmem_cache *s)
{
	/* A bulk free of an object that is already free (it heads the freelist). */
	void *a = kmem_cache_alloc(s, GFP_KERNEL);
	void *b = kmem_cache_alloc(s, GFP_KERNEL);
	void *q[2] = { b, a };
	kmem_cache_free(s, a);
	kmem_cache_free_bulk(s, 2, q);   /* a again (the list's tail), and b */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 3);
	CHECK_EQ(in_use(s), 0);
	a = kmem_cache_alloc(s, GFP_KERNEL);
	b = kmem_cache_alloc(s, GFP_KERNEL);
	q[0] = a;
	q[1] = b;
	kmem_cache_free(s, a);
	kmem_cache_free_bulk(s, 2, q);   /* a again (the list's head), and b */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 4);
	CHECK_EQ(in_use(s), 0);
	/* An object already free in the middle of a whole slab's worth of objects:
	 * found on the slab's freelist before anything is written, reported, and
	 * the rest freed. */
	{
		unsigned int n = s->objects;
		void **o = malloc((n + 1) * sizeof(*o));   /* the owned front's slabs hold 1024 */
		CHECK(o != NULL);
		if (!o)
			return;
		for (unsigned int i = 0; i < n + 1; i++)   /* one full slab, one more */
			o[i] = kmem_cache_alloc(s, GFP_KERNEL);
		if (!s->oslots) {                  /* (an owned slab has no struct slab) */
			struct slab *full = usl_virt_to_slab(o[0]);
			int same_slab = 1;
			for (unsigned int i = 0; i < n; i++)
				same_slab &= usl_virt_to_slab(o[i]) == full;
			CHECK(same_slab);
		}
		kmem_cache_free(s, o[n / 3]);
		unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
		kmem_cache_free_bulk(s, n, o);       /* o[n/3] again */
		CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
		CHECK(strstr(last_report, "double free") != NULL);
		kmem_cache_free(s, o[n]);
		CHECK_EQ(in_use(s), 0);
		free(o);
	}
}

static void test_bad_entries(void)
{
	capture_reports();
	/* Two caches, whatever exists already (merged, both would be kmalloc-64). */
	struct kmem_cache *s = kmem_cache_create("bad-64", 64, 0, SLAB_NO_MERGE, NULL);
	struct kmem_cache *t = kmem_cache_create("other-64", 64, 0, SLAB_NO_MERGE, NULL);
	void *p[64], *theirs;
	int local;

	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 40, p), 40);
	theirs = kmem_cache_alloc(t, GFP_KERNEL);
	char *keep = p[10];
	p[40] = theirs;                  /* another cache's object */
	p[41] = &local;                  /* foreign */
	p[42] = keep + 8;                /* inside a slab, not an object */
	if (uslab_sheaf_capacity(s)) {
		/* Sheaves copy pointers without looking into the slabs (as the
		 * kernel's do): only an entry equal to the one before it is seen. */
		p[43] = p[39];
		p[44] = NULL;
	} else {
		p[43] = p[5];            /* duplicate, close by */
		p[44] = p[30];           /* duplicate */
	}
	p[45] = NULL;
	kmem_cache_free_bulk(s, 46, p);
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), 1);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), 1);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), uslab_sheaf_capacity(s) ? 1 : 2);
	/* The 40 good objects were freed, the other cache's object was not. */
	CHECK_EQ(in_use(s), 0);
	CHECK_EQ(in_use(t), 1);
	kmem_cache_free(t, theirs);
	if (!uslab_sheaf_capacity(s))
		bad_entries_cpu_slab(s);
	/* Nothing is handed out twice afterwards. */
	void *r[100];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, r), 100);
	CHECK_EQ(tag_all(r, 100, 64), 0);
	int same = 0;
	for (int i = 0; i < 100; i++)
		for (int j = i + 1; j < 100; j++)
			same += r[i] == r[j];
	CHECK_EQ(same, 0);
	kmem_cache_free_bulk(s, 100, r);

	/* Bad arguments. */
	CHECK_EQ(kmem_cache_alloc_bulk(NULL, GFP_KERNEL, 4, r), 0);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 4, NULL), 0);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, (size_t)1 << 40, r), 0);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 0, r), 0);
	kmem_cache_free_bulk(s, 3, NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 4);
	/* kfree_bulk of objects of any cache, with a foreign pointer among them. */
	void *u[3];
	u[0] = kmem_cache_alloc(s, GFP_KERNEL);
	u[1] = &local;
	u[2] = kmem_cache_alloc(t, GFP_KERNEL);
	kfree_bulk(3, u);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), 2);
	CHECK_EQ(in_use(s), 0);
	CHECK_EQ(in_use(t), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(t);
	uslab_set_report_handler(NULL, NULL);
}

static void test_all_or_nothing(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("aon-512", 512, 0, 0, NULL);
	static void *p[50000];  /* room for every nr asked below */
	for (long budget = 0; budget < 6; budget++) {
		usl_pages_fail_after(budget);
		int got = kmem_cache_alloc_bulk(s, GFP_KERNEL, 5000, p);
		usl_pages_fail_after(-1);
		CHECK_EQ(got, 0);
		CHECK_EQ(in_use(s), 0);       /* nothing is held */
	}
	CHECK_EQ(reports(USLAB_ERR_NOMEM), 6);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 5000, p), 5000);
	kmem_cache_free_bulk(s, 5000, p);
	usl_pages_fail_after(0);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL | __GFP_NOWARN, 50000, p), 0);
	usl_pages_fail_after(-1);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), 6);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

static void test_zero(void)
{
	struct kmem_cache *s = kmem_cache_create("zero-100", 100, 0, 0, NULL);
	void *p[300];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 300, p), 300);
	for (int i = 0; i < 300; i++)
		memset(p[i], 0xee, 100);
	kmem_cache_free_bulk(s, 300, p);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL | __GFP_ZERO, 300, p), 300);
	int nz = 0;
	for (int i = 0; i < 300; i++)
		for (int b = 0; b < 100; b++)
			nz += ((unsigned char *)p[i])[b] != 0;
	CHECK_EQ(nz, 0);
	kmem_cache_free_bulk(s, 300, p);
	kmem_cache_destroy(s);
}

/* Objects allocated on other threads (other CPUs), freed in bulk here. */
#define XT 6
#define XN 3000
static struct kmem_cache *xs;
static void *xobjs[XT][XN];
static void *xalloc(void *arg)
{
	long id = (long)arg;
	if (kmem_cache_alloc_bulk(xs, GFP_KERNEL, XN / 2, xobjs[id]) != XN / 2)
		return (void *)1;
	for (int i = XN / 2; i < XN; i++)
		xobjs[id][i] = kmem_cache_alloc(xs, GFP_KERNEL);
	return NULL;
}

static void test_cross_thread(void)
{
	pthread_t t[XT];
	void *rv;
	int failed = 0;
	xs = kmem_cache_create("xthread", 96, 0, 0, NULL);
	for (long i = 0; i < XT; i++)
		pthread_create(&t[i], NULL, xalloc, (void *)i);
	for (int i = 0; i < XT; i++) {
		pthread_join(t[i], &rv);
		failed += rv != NULL;
	}
	CHECK_EQ(failed, 0);
	CHECK_EQ(in_use(xs), XT * XN);
	shuffle(&xobjs[0][0], XT * XN);
	kmem_cache_free_bulk(xs, XT * XN, &xobjs[0][0]);
	CHECK_EQ(in_use(xs), 0);
	kmem_cache_destroy(xs);
}

/* The detached freelists' look-ahead (USLAB_BULK_LOOKAHEAD, default 3): an
 * array alternating between objects of two slabs gathers several objects of a
 * slab per list when the scan may pass objects of the other slab, one per list
 * when it stops at the first (1). Without sheaves only: with them, bulk frees
 * go to the sheaves (and on the owned front each is a single free). */
static void test_lookahead(void)
{
	struct kmem_cache *s = kmem_cache_create("bulk-la", 256, 0, SLAB_NO_MERGE, NULL);
	enum { M = 12, ALL = 600 };
	static void *all[ALL], *p[2 * M];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, ALL, all), ALL);
	if (s->sheaf_capacity || s->oslots) {   /* owned: a loop of single frees */
		kmem_cache_free_bulk(s, ALL, all);
		kmem_cache_destroy(s);
		return;
	}
	/* Two slabs holding M objects each among those handed out. */
	struct slab *sa = usl_virt_to_slab(all[0]), *sb = NULL;
	int na = 0, nb = 0;
	for (int i = 0; i < ALL; i++) {
		struct slab *x = usl_virt_to_slab(all[i]);
		if (x == sa && na < M) {
			p[2 * na++] = all[i];
			all[i] = NULL;
		} else if (x != sa && (!sb || x == sb) && nb < M) {
			sb = x;
			p[2 * nb++ + 1] = all[i];
			all[i] = NULL;
		}
	}
	CHECK(na == M && nb == M);
	unsigned long before = usl_bulk_lists;
	kmem_cache_free_bulk(s, 2 * M, p);
	unsigned long lists = usl_bulk_lists - before;
	if (usl_opt.bulk_lookahead == 1)
		CHECK_EQ(lists, 2 * M);              /* one object each */
	else
		CHECK(lists <= M);                   /* (3 per list and the tails) */
	kmem_cache_free_bulk(s, ALL, all);       /* NULL entries skipped */
	CHECK_EQ(in_use(s), 0);
	kmem_cache_destroy(s);
}

int main(void)
{
	test_lookahead();
	printf("per-CPU mode: %s\n", uslab_percpu_mode());
	test_sizes();
	test_mixed_kfree_bulk();
	test_bad_entries();
	test_all_or_nothing();
	test_zero();
	test_cross_thread();
	/* bad entries: 1 wrong cache + 2 foreign + 1 not an object + 5 double + 4 bad
	 * arguments; all-or-nothing: 6 out of memory. With sheaves, 4 of the double
	 * frees are not looked for (bad_entries_cpu_slab, one duplicate). */
	struct kmem_cache *probe = kmem_cache_create("probe", 64, 0, 0, NULL);
	int sheaves = uslab_sheaf_capacity(probe) != 0;
	kmem_cache_destroy(probe);
	CHECK_EQ(uslab_error_count(), 13 + 6 - (sheaves ? 4 : 0));
	return test_summary();
}
