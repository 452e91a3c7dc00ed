/* test_misuse.c - what a user gets for mistakes outside the free checks, with
 * the public API alone: a destroyed cache (destroyed again, allocated from,
 * freed to, shrunk, sized, named, used in bulk) is reported as such and never
 * used; kmalloc of an impossible size is reported unless __GFP_NOWARN. Run with
 * and without sheaves, in both per-CPU modes. */
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

int main(void)
{
	capture_reports();
	destroyed_cache();
	impossible_kmalloc();
	uslab_set_report_handler(NULL, NULL);
	return test_summary();
}
