/* test_sheaves - the sheaf layer: a million objects allocated on some threads
 * and freed on others each come back exactly once; barn limits hold; shrink
 * returns every empty slab; the prefilled-sheaf API cannot fail while it has
 * objects (the page provider failing meanwhile); kmem_cache_args; bad input.
 * Runs with sheaves on (default) and USLAB_SHEAVES=0 (".nosheaves").
 * main.c runs the parts: cross_thread.c, barn.c, args.c, bad_input.c,
 * order.c. */
#include "sheaves.h"

bool sheaves_default;

unsigned long in_use(struct kmem_cache *s)
{
	usl_cache_flush_all(s);
	return usl_engine_objects_in_use(s);
}

int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	/* The barn and decay counts here follow this thread's own slow-path
	 * sweeps; the decay thread (test_background) would sweep in between. */
	usl_opt.background = 0;
	const char *e = getenv("USLAB_SHEAVES");
	sheaves_default = !(e && strcmp(e, "0") == 0);
	printf("mode %s, sheaves %s by default\n", uslab_percpu_mode(), sheaves_default ? "on" : "off");
	capture_reports();
	test_args();
	test_bad_free();
	test_barn_and_shrink();
	test_empties_after_burst();
	test_packed_burst();
	test_reclaim_before_growth();
	test_million_cross_thread();
	test_pushed_twice();
	test_rising_order();
	return test_summary();
}
