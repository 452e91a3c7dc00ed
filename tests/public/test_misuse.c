/* test_misuse.c - what a user gets for mistakes outside the free checks, with
 * the public API alone: a destroyed cache (destroyed again, allocated from,
 * freed to, shrunk, sized, named, used in bulk) is reported as such and never
 * used; kmalloc of an impossible size is reported unless __GFP_NOWARN; and
 * what include/uslab.h promises about creation, constructors, destroy, shrink
 * and kfree of cache objects. Run with and without sheaves, in both per-CPU
 * modes. */
#include <stdint.h>

#include "../harness.h"   /* uslab.h only */

static bool last_says(const char *what)
{
	return strstr(last_report, what) != NULL;
}

static void destroyed_cache(void)
{
	struct kmem_cache *s = kmem_cache_create("misuse", 96, 0, SLAB_NO_MERGE, NULL);
	CHECK(s != NULL);
	void *keep = kmem_cache_alloc(s, GFP_KERNEL);   /* an object freed before the destroy */
	CHECK(keep != NULL);
	kmem_cache_free(s, keep);
	kmem_cache_destroy(s);
	CHECK_EQ(reports_all(), 0);

	/* Each use names the call and says the cache is not live; nothing else
	 * is reported (no double free in uslab's own caches), and nothing is
	 * handed out. No cache is made in between, so the structure's memory
	 * and id are not reused. */
	unsigned long before = uslab_error_count();
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 1);
	CHECK(last_says("kmem_cache_destroy(") && last_says("not a live cache"));
	CHECK(kmem_cache_alloc(s, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 2);
	CHECK(last_says("kmem_cache_alloc(") && last_says("not a live cache"));
	CHECK(kmem_cache_zalloc(s, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 3);
	void *p[8] = { 0 };
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 8, p), 0);
	CHECK(p[0] == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 4);
	CHECK(last_says("kmem_cache_alloc_bulk("));
	kmem_cache_free(s, keep);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 5);
	CHECK(last_says("kmem_cache_free(") && last_says("not a live cache"));
	void *q[2] = { keep, keep };
	kmem_cache_free_bulk(s, 2, q);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 6);
	CHECK_EQ(kmem_cache_shrink(s), -1);
	CHECK_EQ(kmem_cache_size(s), 0);
	CHECK(kmem_cache_name(s) == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 9);
	CHECK_EQ(reports_all(), 9);                  /* only those */
	CHECK_EQ(uslab_error_count() - before, 9);   /* and each counts as an error */

	/* The library is unharmed: a new cache works. */
	struct kmem_cache *t = kmem_cache_create("misuse-2", 96, 0, SLAB_NO_MERGE, NULL);
	void *o = kmem_cache_alloc(t, GFP_KERNEL);
	CHECK(o != NULL);
	kmem_cache_free(t, o);
	kmem_cache_destroy(t);
	CHECK_EQ(reports_all(), 9);
}

static void impossible_kmalloc(void)
{
	unsigned long before = reports(USLAB_ERR_NOMEM);
	CHECK(kmalloc((size_t)PTRDIFF_MAX + 1, GFP_KERNEL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), before + 1);
	CHECK(last_says("kmalloc:") && last_says("PTRDIFF_MAX"));
	CHECK(kmalloc((size_t)PTRDIFF_MAX + 1, GFP_KERNEL | __GFP_NOWARN) == NULL);
	CHECK_EQ(reports(USLAB_ERR_NOMEM), before + 1);
	/* 1 TiB: a direct mapping the kernel refuses under the default overcommit
	 * rules (more than memory and swap); if it was granted, nothing to check. */
	void *huge = kmalloc((size_t)1 << 40, GFP_KERNEL);
	if (huge) {
		printf("1 TiB mapping granted (overcommit): its message is not checked\n");
		kfree(huge);
	} else {
		CHECK_EQ(reports(USLAB_ERR_NOMEM), before + 2);
		CHECK(last_says("kmalloc: out of memory"));
		CHECK(kmalloc((size_t)1 << 40, GFP_KERNEL | __GFP_NOWARN) == NULL);
		CHECK_EQ(reports(USLAB_ERR_NOMEM), before + 2);
	}
}

/* kmem_cache_create's limits: each bad argument is NULL and one BAD_ARG report. */
static void create_limits(void)
{
	static const struct {
		const char *name;
		unsigned int size, align;
		slab_flags_t flags;
	} bad[] = {
		{ NULL, 64, 0, 0 },   { "", 64, 0, 0 },          { "zero", 0, 0, 0 },
		{ "align3", 64, 3, 0 }, { "align-2page", 64, 2u * 65536, 0 },
		{ "huge", (2u << 20) + 1, 0, 0 }, { "flags", 64, 0, 0x80000000u },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned long before = reports(USLAB_ERR_BAD_ARG);
		CHECK(kmem_cache_create(bad[i].name, bad[i].size, bad[i].align, bad[i].flags, NULL) == NULL);
		CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 1);
		CHECK(last_says("kmem_cache_create("));
	}
	/* The largest object is allowed, and a long name is kept to 47 bytes. */
	char name[80];
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	struct kmem_cache *s = kmem_cache_create(name, 2u << 20, 0, SLAB_NO_MERGE, NULL);
	CHECK(s != NULL);
	CHECK_EQ(strlen(kmem_cache_name(s)), 47);
	CHECK_EQ(kmem_cache_size(s), 2u << 20);
	void *o = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(o != NULL);
	kmem_cache_free(s, o);
	kmem_cache_destroy(s);
	/* Alignment: at least 8, and what was asked for. */
	s = kmem_cache_create("aligned", 24, 256, SLAB_NO_MERGE, NULL);
	void *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a && b && ((uintptr_t)a & 255) == 0 && ((uintptr_t)b & 255) == 0);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_NONE), 0);
}

/* The constructor runs when a slab is made, once per object, not at each
 * allocation; an object freed in its constructed state comes back in it. */
static unsigned long ctor_calls;
static void ctor(void *p)
{
	ctor_calls++;
	memset(p, 0x5a, 40);
}

static void constructor(void)
{
	struct kmem_cache *s = kmem_cache_create("ctor", 40, 0, 0, ctor);
	CHECK(s != NULL);
	void *o = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long made = ctor_calls;
	CHECK(made >= 1);
	unsigned char *c = o;
	int intact = 1;
	for (int i = 0; i < 40; i++)
		intact &= c[i] == 0x5a;
	CHECK(intact);
	for (int round = 0; round < 100; round++) {   /* free and take it again */
		kmem_cache_free(s, o);
		o = kmem_cache_alloc(s, GFP_KERNEL);
		c = o;
		for (int i = 0; i < 40; i++)
			intact &= c[i] == 0x5a;
	}
	CHECK(intact);                       /* no free-list pointer written in it */
	CHECK_EQ(ctor_calls, made);          /* no new slab, no new constructor call */
	kmem_cache_free(s, o);
	kmem_cache_destroy(s);
}

/* destroy with live objects keeps the cache; shrink says 1, then 0; kfree
 * takes a cache's object. */
static void destroy_shrink_kfree(void)
{
	struct kmem_cache *s = kmem_cache_create("shrink", 200, 0, SLAB_NO_MERGE, NULL);
	void *o = kmem_cache_alloc(s, GFP_KERNEL), *k = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(o && k);
	unsigned long leaks = reports(USLAB_ERR_LEAK);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), leaks + 1);
	CHECK(last_says("Objects remaining: 2"));
	CHECK_EQ(kmem_cache_shrink(s), 1);   /* kept, and still holding two */
	kmem_cache_free(s, o);
	kfree(k);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	unsigned long all = reports_all();
	kmem_cache_destroy(s);
	kmem_cache_destroy(NULL);
	struct kmem_cache *t = kmem_cache_create("bulk0", 32, 0, SLAB_NO_MERGE, NULL);
	void *none[1];
	CHECK_EQ(kmem_cache_alloc_bulk(t, GFP_KERNEL, 0, none), 0);
	kmem_cache_destroy(t);
	CHECK_EQ(reports_all(), all);
	CHECK_EQ(kmem_cache_shrink(NULL), -1);
}

int main(void)
{
	capture_reports();
	destroyed_cache();
	impossible_kmalloc();
	create_limits();
	constructor();
	destroy_shrink_kfree();
	uslab_set_report_handler(NULL, NULL);
	return test_summary();
}
