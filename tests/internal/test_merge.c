/* test_merge.c - cache merging (the kernel's find_mergeable): which caches
 * become aliases of which, the alias's name, size and zeroing, references on
 * destroy, kmalloc classes never targets and never destroyed, and
 * USLAB_NOMERGE=1 (argument "nomerge") turning it all off. */
#include "../harness.h"
#include "platform/platform.h"
#include "testing.h"

static bool merging;

/* x and y are the same cache exactly when merging is on (and should merge). */
#define CHECK_MERGED(x, y) CHECK(merging ? (x) == (y) : (x) != (y))

static void ctor(void *p) { *(int *)p = 7; }

int main(int argc, char **argv)
{
	/* ctest sets USLAB_NOMERGE to match the argument (setenv here would be too
	 * late: it allocates, and with the malloc override that starts uslab). */
	merging = !(argc > 1 && !strcmp(argv[1], "nomerge"));
	capture_reports();

	struct kmem_cache *a = kmem_cache_create("m-a", 64, 0, 0, NULL);
	struct kmem_cache *b = kmem_cache_create("m-b", 60, 0, 0, NULL);      /* 64 after word rounding */
	struct kmem_cache *h = kmem_cache_create("m-h", 64, 0, SLAB_HWCACHE_ALIGN, NULL);
	CHECK(a && b && h);
	CHECK_EQ(usl_opt.nomerge, merging ? 0 : 1);   /* options are read by the first call */
	CHECK_MERGED(a, b);
	CHECK_MERGED(a, h);
	CHECK_EQ(a->refcount, merging ? 3 : 1);
	/* An alias keeps the original's name, as the kernel's does. */
	CHECK(!strcmp(kmem_cache_name(b), merging ? "m-a" : "m-b"));

	/* Not merged: a word or more of waste, a constructor, SLAB_NO_MERGE, debug
	 * flags, layout arguments, a stricter alignment. */
	struct kmem_cache *c = kmem_cache_create("m-c", 56, 0, 0, NULL);
	struct kmem_cache *d = kmem_cache_create("m-d", 64, 0, 0, ctor);
	struct kmem_cache *e = kmem_cache_create("m-e", 64, 0, SLAB_NO_MERGE, NULL);
	struct kmem_cache *f = kmem_cache_create("m-f", 64, 0, SLAB_POISON, NULL);
	struct kmem_cache_args cap = { .sheaf_capacity = 40 }, fp = { .use_freeptr_offset = true, .freeptr_offset = 8 };
	struct kmem_cache *g = kmem_cache_create("m-g", 64, &cap, 0);
	struct kmem_cache *i = kmem_cache_create("m-i", 64, &fp, 0);
	struct kmem_cache *j = kmem_cache_create("m-j", 64, 128, 0, NULL);
	struct kmem_cache *all[] = { c, d, e, f, g, i, j };
	for (unsigned k = 0; k < sizeof(all) / sizeof(all[0]); k++)
		CHECK(all[k] && all[k] != a && all[k] != b);
	CHECK(c != d && d != e && e != f && f != g && g != i && i != j);
	int *o = kmem_cache_alloc(d, GFP_KERNEL);
	CHECK(o && *o == 7);                      /* d kept its constructor */
	kmem_cache_free(d, o);

	/* Objects go back through either name; the larger object size is what
	 * kmem_cache_size reports and what zeroing clears. */
	struct kmem_cache *x = kmem_cache_create("m-x", 36, 0, 0, NULL);
	struct kmem_cache *y = kmem_cache_create("m-y", 40, 0, 0, NULL);
	CHECK_MERGED(x, y);
	CHECK_EQ(kmem_cache_size(x), merging ? 40 : 36);
	unsigned char *p = kmem_cache_alloc(x, GFP_KERNEL);
	memset(p, 0xff, 40);
	kmem_cache_free(y == x ? y : x, p);
	unsigned char *q = kmem_cache_zalloc(y, GFP_KERNEL);
	bool zero = true;
	for (int k = 0; k < 40; k++)
		zero &= q[k] == 0;
	CHECK(zero);
	kmem_cache_free(y, q);
	void *pa = kmem_cache_alloc(b, GFP_KERNEL);
	kmem_cache_free(a, pa);                   /* merged: the same cache, no report */
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), merging ? 0 : 1);
	if (!merging)
		kmem_cache_free(b, pa);               /* refused above: give it back */

	/* Destroying an alias drops a reference; the cache lives on. */
	kmem_cache_destroy(b);
	kmem_cache_destroy(h);
	if (merging)
		CHECK_EQ(a->refcount, 1);
	void *pb = kmem_cache_alloc(a, GFP_KERNEL);
	CHECK(pb != NULL);
	kmem_cache_free(a, pb);
	kmem_cache_destroy(a);

	/* kmalloc classes are never targets (the kernel's rule with hardened
	 * usercopy), and are never destroyed: a cache of a class's exact size and
	 * one shaped as the kernel's maple_node (256 bytes aligned to 256) stay
	 * caches of their own, under their own names. */
	kfree(kmalloc(150, GFP_KERNEL));          /* the classes exist now */
	struct kmem_cache *k192 = usl_kmalloc_cache_for(192);
	struct kmem_cache *u = kmem_cache_create("m-u", 192, 0, 0, NULL);
	CHECK(u != k192);
	CHECK(!strcmp(kmem_cache_name(u), "m-u"));
	struct kmem_cache *mn = kmem_cache_create("m-maple", 256, 256, 0, NULL);
	CHECK(mn != usl_kmalloc_cache_for(256));
	CHECK(!strcmp(kmem_cache_name(mn), "m-maple"));
	struct kmem_cache *u2 = kmem_cache_create("m-u2", 192, 0, 0, NULL);
	CHECK_MERGED(u2, u);                      /* user caches still merge */
	kmem_cache_destroy(u2);
	kmem_cache_destroy(mn);
	void *pu = kmem_cache_alloc(u, GFP_KERNEL);
	kfree(pu);                                /* kfree takes any cache's object */
	unsigned long ba = reports(USLAB_ERR_BAD_ARG);
	kmem_cache_destroy(u);
	kmem_cache_destroy(k192);                 /* refused: a kmalloc cache */
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 1);
	void *pk = kmalloc(190, GFP_KERNEL);
	CHECK(pk && ksize(pk) == 192);
	kfree(pk);

	struct kmem_cache *rest[] = { c, d, e, f, g, i, j, x };
	for (unsigned k = 0; k < sizeof(rest) / sizeof(rest[0]); k++)
		kmem_cache_destroy(rest[k]);
	if (!merging)
		kmem_cache_destroy(y);
	CHECK_EQ(reports(USLAB_ERR_LEAK), 0);
	uslab_set_report_handler(NULL, NULL);
	return test_summary();
}
