/* bad_input.c - test_sheaves: single-object bad input with sheaves, and an
 * object pushed twice. */
#include "sheaves.h"

void test_bad_free(void)
{
	struct kmem_cache_args a = { .sheaf_capacity = 16 };
	struct kmem_cache *s = kmem_cache_create("bad-sheaf-free", 64, &a, 0);
	struct kmem_cache *t = kmem_cache_create("bad-sheaf-other", 64, &a, 0);
	int local;
	void *x = kmem_cache_alloc(s, GFP_KERNEL), *y = kmem_cache_alloc(t, GFP_KERNEL);

	unsigned long df = reports(USLAB_ERR_DOUBLE_FREE), wc = reports(USLAB_ERR_WRONG_CACHE),
	              fo = reports(USLAB_ERR_FOREIGN), no = reports(USLAB_ERR_NOT_OBJECT);
	kmem_cache_free(s, y);                 /* t's object */
	kmem_cache_free(s, &local);            /* foreign */
	kmem_cache_free(s, (char *)x + 8);     /* not an object start */
	kmem_cache_free(s, x);
	kmem_cache_free(s, x);                 /* the sheaf's top object again */
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), wc + 1);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), df + 1);
	kmem_cache_free(t, y);
	/* Nothing was handed out twice. */
	void *a1 = kmem_cache_alloc(s, GFP_KERNEL), *a2 = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a1 != a2);
	kmem_cache_free(s, a1);
	kmem_cache_free(s, a2);
	CHECK_EQ(in_use(s), 0);
	CHECK_EQ(in_use(t), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(t);
}

/* Two threads freeing one object at the same instant both pass its free
 * marker check and push it: simulated by a second push that skips the check
 * (usl_sheaf_free). The pop that finds it a second time refuses it: it is
 * handed out once, and reported. */
void test_pushed_twice(void)
{
	if (!usl_opt.harden)
		return;
	struct kmem_cache_args args = { .sheaf_capacity = 32 };
	struct kmem_cache *s = kmem_cache_create("twice", 96, &args, SLAB_NO_MERGE | SLAB_ORDERED);
	CHECK(s != NULL && uslab_sheaf_capacity(s) != 0);
	void *keep[4], *x = kmem_cache_alloc(s, GFP_KERNEL), *y = kmem_cache_alloc(s, GFP_KERNEL);
	for (int i = 0; i < 4; i++)
		keep[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free(s, x);
	kmem_cache_free(s, y);
	usl_sheaf_free(s, x);          /* the racing second free (not at the top) */
	void *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	void *c = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a && b && c && a != b && b != c && a != c);
	CHECK((a == x) + (b == x) + (c == x) <= 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, c);
	for (int i = 0; i < 4; i++)
		kmem_cache_free(s, keep[i]);
}
