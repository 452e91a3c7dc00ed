/* test_debugopt.c - the USLAB_DEBUG parser (the kernel's slub_debug= syntax,
 * mm/slub.c parse_slub_debug_flags and kmem_cache_flags): which flags each
 * cache name gets, and one report line per malformed part with the rest
 * still applied. Differences from the kernel, checked here: '*' matches
 * anywhere in a name (the kernel compares only up to the first '*'), and a
 * block whose list holds an empty or unprintable name is skipped whole. */
#include "../harness.h"
#include "platform/platform.h"
#include "testing.h"

#define F SLAB_CONSISTENCY_CHECKS
#define Z SLAB_RED_ZONE
#define P SLAB_POISON
#define U SLAB_STORE_USER
#define T SLAB_TRACE
#define ALL (F | Z | P | U)

static unsigned long reports_now(void)
{
	return uslab_error_count();
}

/* Parse v; the number of reports it made. */
static unsigned long parse(const char *v)
{
	unsigned long before = reports_now();
	usl_debug_parse(v);
	return reports_now() - before;
}

int main(void)
{
	capture_reports();

	/* Unset: nothing anywhere. */
	CHECK_EQ(parse(NULL), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), 0);

	/* No value: FZPU for every cache. */
	CHECK_EQ(parse(""), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), ALL);
	CHECK_EQ(usl_debug_flags_for("anything"), ALL);

	/* Letters alone: every cache; either case; T. */
	CHECK_EQ(parse("fz"), 0);
	CHECK_EQ(usl_debug_flags_for("x"), F | Z);
	CHECK_EQ(parse("PUT"), 0);
	CHECK_EQ(usl_debug_flags_for("x"), P | U | T);

	/* The example: a list per block, globs; unnamed caches get
	 * nothing (lists alone change only the caches they name). */
	CHECK_EQ(parse("FZPU,kmalloc-*,malloc-*;P,conn"), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), ALL);
	CHECK_EQ(usl_debug_flags_for("malloc-112"), ALL);
	CHECK_EQ(usl_debug_flags_for("conn"), P);
	CHECK_EQ(usl_debug_flags_for("conn2"), 0);      /* no '*': the whole name */
	CHECK_EQ(usl_debug_flags_for("con"), 0);
	CHECK_EQ(usl_debug_flags_for("dentry"), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc"), 0);     /* "kmalloc-*" needs the '-' */

	/* A global block and lists: unnamed caches get the global flags, named
	 * ones their block's only; the first block naming a cache wins. */
	CHECK_EQ(parse("Z;P,foo;U,foo,bar"), 0);
	CHECK_EQ(usl_debug_flags_for("foo"), P);
	CHECK_EQ(usl_debug_flags_for("bar"), U);
	CHECK_EQ(usl_debug_flags_for("baz"), Z);

	/* An empty letter part with a list: full debugging for those. */
	CHECK_EQ(parse(",conn,kmalloc-1*"), 0);
	CHECK_EQ(usl_debug_flags_for("conn"), ALL);
	CHECK_EQ(usl_debug_flags_for("kmalloc-128"), ALL);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), 0);

	/* '-' switches off what came before it in its block. */
	CHECK_EQ(parse("FZ-P"), 0);
	CHECK_EQ(usl_debug_flags_for("x"), P);
	CHECK_EQ(parse("-"), 0);
	CHECK_EQ(usl_debug_flags_for("x"), 0);

	/* '*' anywhere, and a lone '*'. */
	CHECK_EQ(parse("U,*-64;F,*"), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), U);
	CHECK_EQ(usl_debug_flags_for("malloc-64"), U);
	CHECK_EQ(usl_debug_flags_for("malloc-640"), F);
	CHECK_EQ(usl_debug_flags_for("x"), F);
	CHECK_EQ(parse("P,k*c-*8"), 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-128"), P);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), 0);

	/* 'O' is remembered; empty blocks are skipped. */
	CHECK_EQ(parse(";;FO;;"), 0);
	CHECK(usl_debug_order_off());
	CHECK_EQ(usl_debug_flags_for("x"), F);
	CHECK_EQ(parse("F"), 0);
	CHECK(!usl_debug_order_off());

	/* Unknown letters: one line each, the rest applies. */
	CHECK_EQ(parse("FQZ"), 1);
	CHECK(strstr(last_report, "USLAB_DEBUG: option 'Q' unknown; skipped") != NULL);
	CHECK_EQ(usl_debug_flags_for("x"), F | Z);
	CHECK_EQ(parse("A1,foo"), 2);                    /* failslab is not built */
	CHECK_EQ(usl_debug_flags_for("foo"), 0);
	CHECK_EQ(parse("F\x01"), 1);
	CHECK(strstr(last_report, "byte 0x01") != NULL);

	/* A malformed list skips its block, not the others. */
	CHECK_EQ(parse("P,foo,,bar;U,baz"), 1);
	CHECK(strstr(last_report, "empty cache name") != NULL);
	CHECK_EQ(usl_debug_flags_for("foo"), 0);
	CHECK_EQ(usl_debug_flags_for("baz"), U);
	CHECK_EQ(parse("P,foo bar;Z"), 1);
	CHECK(strstr(last_report, "cache list 'foo bar' holds byte 0x20") != NULL);
	CHECK_EQ(usl_debug_flags_for("foo"), Z);
	CHECK_EQ(parse("P,"), 1);                         /* a comma and no name */

	/* Too many blocks: the extra ones, reported once. */
	char many[1000] = "";
	for (int i = 0; i < 40; i++) {
		char b[24];
		snprintf(b, sizeof(b), "%sP,c%d", i ? ";" : "", i);
		strcat(many, b);
	}
	CHECK_EQ(parse(many), 1);
	CHECK_EQ(usl_debug_flags_for("c0"), P);
	CHECK_EQ(usl_debug_flags_for("c31"), P);
	CHECK_EQ(usl_debug_flags_for("c32"), 0);

	/* Too long: debugging stays off, one line. */
	char longv[1500];
	memset(longv, 'F', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = 0;
	CHECK_EQ(parse(longv), 1);
	CHECK_EQ(usl_debug_flags_for("x"), 0);

	/* Through the environment, as start-up reads it; an unknown USLAB_
	 * variable is still named, USLAB_DEBUG is not. */
	setenv("USLAB_DEBUG", "Z,kmalloc-32", 1);
	unsigned long before = reports_now();
	usl_read_options();
	CHECK_EQ(reports_now() - before, 0);
	CHECK_EQ(usl_debug_flags_for("kmalloc-32"), Z);
	CHECK_EQ(usl_debug_flags_for("kmalloc-64"), 0);
	unsetenv("USLAB_DEBUG");
	usl_read_options();
	CHECK_EQ(usl_debug_flags_for("kmalloc-32"), 0);
	return test_summary();
}
