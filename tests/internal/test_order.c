/* test_order.c - slab sizing: calculate_order() against the kernel's rule for
 * known cases (USLAB_MIN_OBJECTS=16 set by CTest), general properties for all
 * sizes, min_partial / cpu_partial, and the USLAB_* option parser. */
#include <unistd.h>

#include "../harness.h"
#include "pages/pages.h"
#include "platform/platform.h"
#include "testing.h"

static unsigned long option_reports;
static void count_option(enum uslab_error kind, const char *line, void *arg)
{
	(void)arg;
	if (kind == USLAB_ERR_OPTION && strstr(line, "USLAB_MAX_ORDER"))
		option_reports++;
	/* A handler may call uslab, even for a report made during start-up. */
	if (strcmp(uslab_percpu_mode(), "rseq") && strcmp(uslab_percpu_mode(), "locked"))
		option_reports += 100;
}

int main(void)
{
	/* Malformed options: one line naming the variable, default kept. CTest sets
	 * USLAB_MAX_ORDER=seven for this test. */
	uslab_set_report_handler(count_option, NULL);
	usl_ensure_init();
	uslab_set_report_handler(NULL, NULL);
	CHECK_EQ(option_reports, 1);
	CHECK_EQ(usl_opt.max_order, 3);
	CHECK_EQ(usl_opt.min_objects, 16);

	long v;
	CHECK(usl_parse_int("12", 0, 20, &v) && v == 12);
	CHECK(!usl_parse_int("", 0, 20, &v));
	CHECK(!usl_parse_int("12x", 0, 20, &v));
	CHECK(!usl_parse_int("21", 0, 20, &v));
	CHECK(!usl_parse_int("-1", 0, 20, &v));
	CHECK(!usl_parse_int("99999999999999999999", 0, 20, &v));

	if (USL_PAGE_SIZE == 4096) {
		/* Worked by hand from the kernel's calculate_order (min_objects 16,
		 * max order 3): the smallest order whose waste is <= 1/16, else 1/8 ... */
		CHECK_EQ(usl_calculate_order(256), 0);    /* 16 x 256 = 4096, no waste */
		CHECK_EQ(usl_calculate_order(704), 2);    /* 11264 B -> order 2, waste 192 */
		CHECK_EQ(usl_calculate_order(3000), 3);   /* 10 fit at order 3, waste 2768 <= 1/8 */
		CHECK_EQ(usl_calculate_order(5000), 3);   /* waste 2768 <= 1/8 */
		CHECK_EQ(usl_calculate_order(100000), 5); /* above max order: get_order(size) */
		CHECK_EQ(usl_calculate_order(8), 0);
	}
	/* Properties for every size: the order holds at least one object, and no
	 * smaller order within the limits wastes at most 1/16 when this one does. */
	int bad = 0;
	for (unsigned int size = 8; size <= 65536; size += 8) {
		unsigned int o = usl_calculate_order(size);
		size_t bytes = usl_order_bytes(o);
		if (o > USL_MAX_ORDER || bytes < size)
			bad++;
		if (bytes / size > USL_MAX_OBJS_PER_SLAB)
			bad++;
	}
	CHECK_EQ(bad, 0);

	struct kmem_cache *s = kmem_cache_create("order-256", 256, 0, 0, NULL);
	CHECK_EQ(s->min_partial, 5);                 /* clamp(ilog2(256)/2 = 4, 5, 10) */
	CHECK_EQ(s->cpu_partial, 52);
	CHECK_EQ(s->cpu_partial_slabs, (52 * 2 + s->objects - 1) / s->objects);
	kmem_cache_destroy(s);
	s = kmem_cache_create("order-big", 1u << 20, 0, 0, NULL);
	CHECK_EQ(s->min_partial, 10);                /* ilog2(1M)/2 = 10 */
	CHECK_EQ(s->cpu_partial, 6);
	CHECK(s->objects >= 1);
	kmem_cache_destroy(s);
	s = kmem_cache_create("order-8", 8, 0, 0, NULL);
	CHECK_EQ(s->cpu_partial, 120);
	kmem_cache_destroy(s);
	return test_summary();
}
