/* test_min_order.c - USLAB_MIN_ORDER / USLAB_MAX_ORDER move every cache's order
 * (CTest sets USLAB_MIN_ORDER=2 USLAB_MAX_ORDER=4); the owned front's own rule
 * for its slabs when it runs. */
#include "../harness.h"
#include "pages/pages.h"
#include "testing.h"

int main(void)
{
	unsigned int sizes[] = { 8, 64, 256, 1000, 4096, 20000 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct kmem_cache *s = kmem_cache_create("mo", sizes[i], 0, 0, NULL);
		CHECK(s != NULL);
		if (s->oslots) {
			/* The owned front's slabs: at least 64 KiB and 32 objects,
			 * the smallest order that holds both (above USLAB_MIN_ORDER,
			 * whatever USLAB_MAX_ORDER says). */
			CHECK(s->order >= 4 && usl_order_bytes(s->order) >= 65536);
			CHECK(s->objects >= 32);
			CHECK(s->order == 4 || usl_order_bytes(s->order - 1) / s->size < 32);
		} else {
			CHECK(s->order >= 2 && s->order <= 4);
		}
		void *p = kmem_cache_alloc(s, GFP_KERNEL);
		struct slab *slab = usl_virt_to_slab(p);
		CHECK(slab->order == s->order);
		kmem_cache_free(s, p);
		kmem_cache_destroy(s);
	}
	return test_summary();
}
