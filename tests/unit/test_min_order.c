/* test_min_order.c - USLAB_MIN_ORDER / USLAB_MAX_ORDER move every cache's order
 * (CTest sets USLAB_MIN_ORDER=2 USLAB_MAX_ORDER=4). */
#include "../harness.h"
#include "pages/pages.h"
#include "testing.h"

int main(void)
{
	unsigned int sizes[] = { 8, 64, 256, 1000, 4096, 20000 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct kmem_cache *s = kmem_cache_create("mo", sizes[i], 0, 0, NULL);
		CHECK(s != NULL);
		CHECK(s->order >= 2 && s->order <= 4);
		void *p = kmem_cache_alloc(s, GFP_KERNEL);
		struct slab *slab = usl_virt_to_slab(p);
		CHECK(slab->order == s->order);
		kmem_cache_free(s, p);
		kmem_cache_destroy(s);
	}
	return test_summary();
}
