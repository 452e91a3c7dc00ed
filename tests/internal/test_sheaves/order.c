/* order.c - test_sheaves: the order of a fresh cache's first objects. */
#include "sheaves.h"

/* A fresh cache's first allocations come out in rising addresses (the
 * refill's objects are laid in the sheaf so that its pops give them in the
 * order a fresh slab was carved), as from the cpu slab's freelist without
 * sheaves: a program walking its objects in the order it made them reads
 * forwards. On one CPU, so that one sheaf serves them all. The kernel's
 * order (SLAB_ORDERED; the random one is test_layout's). */
void test_rising_order(void)
{
	enum { K = 16 };
	void *p[K];
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	struct kmem_cache *s = kmem_cache_create("rising-64", 64, NULL, SLAB_NO_MERGE | SLAB_ORDERED);
	CHECK(s != NULL);
	bool rising = s != NULL;
	for (unsigned i = 0; s && i < K; i++) {
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(p[i] != NULL);
		if (i && (uintptr_t)p[i] <= (uintptr_t)p[i - 1]) {
			if (rising)
				fprintf(stderr, "  allocation %u at %p, after %p\n", i, p[i], p[i - 1]);
			rising = false;
		}
	}
	CHECK(rising);
	for (unsigned i = 0; s && i < K; i++)
		kmem_cache_free(s, p[i]);
	if (s)
		kmem_cache_destroy(s);
	if (pinned)
		unpin_cpu(&was);
}
