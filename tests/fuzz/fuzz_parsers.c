/* fuzz_parsers.c - libFuzzer target for what uslab parses from outside: the
 * USLAB_* environment options (every variable read from the input, as
 * NAME=VALUE lines, then usl_read_options), an option's number
 * (usl_parse_int), a sysfs CPU list (usl_cpu_list_parse) and USLAB_DEBUG's
 * blocks (usl_debug_parse, usl_debug_flags_for) and USLAB_STATS
 * (usl_stats_parse), USLAB_ALLOCATOR (usl_allocator_parse), USLAB_FRONT
 * (usl_front_parse) and USLAB_OOM (usl_oom_parse). Each result is
 * checked against what the parser promises; reports go to a handler that
 * checks they are one line. Built with clang -fsanitize=fuzzer,address in the
 * AddressSanitizer build (tests/CMakeLists.txt). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "testing.h"

static void one_line(enum uslab_error kind, const char *line, void *arg)
{
	(void)kind;
	(void)arg;
	if (strncmp(line, "uslab: ", 7) != 0 || strchr(line, '\n'))
		abort();
}

/* The library's defaults: usl_opt as it is at the first input (its
 * initializer's values, or the ctest environment's if start-up ran: no
 * copy of the defaults here to fall out of date). */
static struct usl_options defaults;
static bool defaults_taken;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!defaults_taken) {
		defaults = usl_opt;
		defaults_taken = true;
	}
	char buf[4096];
	size_t n = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	memcpy(buf, data, n);
	buf[n] = 0;

	uslab_set_report_handler(one_line, NULL);

	long max, count;
	if (usl_cpu_list_parse(buf, &max, &count) && (max < 0 || count < 1 || max > 1L << 20))
		abort();

	long v;
	if (usl_parse_int(buf, -1000, 1000, &v) && (v < -1000 || v > 1000))
		abort();

	/* The topology's sysfs texts: a node list (its mask holds only ids
	 * below 64, its highest id is what it named), a node's cpulist (every
	 * CPU's node stays a node id). */
	uint64_t mask;
	if (usl_topology_node_list(buf, &mask, &max) && (!mask || max < 0 || max > 1L << 20))
		abort();
	usl_topology_node_cpus(1, buf);
	for (unsigned int c = 0; c < USL_MAX_CPUS; c++)
		if (usl_cpu_node[c] >= USL_MAX_NODES)
			abort();

	/* The whole input as USLAB_DEBUG: only debug flags, for any name. */
	static const char *const cache_names[] = { "kmalloc-64", "malloc-112", "conn", "", "uslab-sheaf-64", "*" };
	const uint32_t debug = SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER | SLAB_TRACE;
	usl_debug_parse(buf);
	for (size_t i = 0; i < sizeof(cache_names) / sizeof(cache_names[0]); i++)
		if (usl_debug_flags_for(cache_names[i]) & ~debug)
			abort();
	if (usl_debug_flags_for(buf) & ~debug)
		abort();
	usl_debug_parse(NULL);
	if (usl_debug_flags_for("kmalloc-64"))
		abort();

	/* The whole input as USLAB_STATS: off, or on with stderr or a path. */
	usl_stats_parse(buf);
	if (usl_opt.stats != (usl_opt.stats_out != NULL) ||
	    (usl_opt.stats_out && usl_opt.stats_out[0] && !strchr(usl_opt.stats_out, '/')))
		abort();
	usl_stats_parse(NULL);
	if (usl_opt.stats)
		abort();

	/* The whole input as USLAB_ALLOCATOR: slab only for "slab". */
	usl_allocator_parse(buf);
	if (usl_opt.allocator != (strcmp(buf, "slab") == 0 ? USL_ENGINE_SLAB : USL_ENGINE_SLUB))
		abort();
	usl_allocator_parse(NULL);
	if (usl_opt.allocator != USL_ENGINE_SLUB)
		abort();

	/* The whole input as USLAB_FRONT: one of the three names, else the
	 * default (sheaves; cpuslab where USLAB_SHEAVES=0). */
	int sheaves = usl_opt.sheaves;
	usl_front_parse(buf);
	int want = strcmp(buf, "owned") == 0 ? USL_FRONT_OWNED : strcmp(buf, "cpuslab") == 0 ? USL_FRONT_CPUSLAB
	         : strcmp(buf, "sheaves") == 0 ? USL_FRONT_SHEAVES : sheaves == 0 ? USL_FRONT_CPUSLAB : USL_FRONT_SHEAVES;
	if (usl_opt.front != want || (want == USL_FRONT_CPUSLAB && usl_opt.sheaves != 0))
		abort();
	usl_opt.sheaves = sheaves;
	usl_front_parse(NULL);
	if (usl_opt.front != (sheaves == 0 ? USL_FRONT_CPUSLAB : USL_FRONT_SHEAVES))
		abort();

	/* The whole input as USLAB_OOM: one of the three names, else null. */
	usl_oom_parse(buf);
	int oom = strcmp(buf, "report") == 0 ? USL_OOM_REPORT : strcmp(buf, "abort") == 0 ? USL_OOM_ABORT : USL_OOM_NULL;
	if (usl_opt.oom != oom)
		abort();
	usl_oom_parse(NULL);
	if (usl_opt.oom != USL_OOM_NULL)
		abort();
	usl_opt.oom = USL_OOM_NULL;          /* (the lines below must not abort on a failed malloc) */

	/* NAME=VALUE lines into the environment, read as start-up reads them. */
	char *names[16];
	int k = 0;
	for (char *line = buf, *next; line && *line && k < 16; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *eq = strchr(line, '=');
		if (!eq || eq == line)
			continue;
		*eq = 0;
		char name[80] = "USLAB_";
		strncat(name, line, sizeof(name) - 7);
		if (setenv(name, eq + 1, 1) == 0)
			names[k++] = strdup(name);
	}
	usl_opt = defaults;
	usl_read_options();
	if (usl_opt.min_order > usl_opt.max_order || usl_opt.max_order > USL_MAX_ORDER || usl_opt.min_order < 0 ||
	    usl_opt.harden < 0 || usl_opt.harden > 2 || usl_opt.decay_ms > 3600u * 1000 ||
	    usl_opt.stats != (usl_opt.stats_out != NULL) ||
	    (usl_opt.allocator != USL_ENGINE_SLUB && usl_opt.allocator != USL_ENGINE_SLAB) ||
	    usl_opt.nodes < 0 || usl_opt.nodes > USL_MAX_NODES || usl_opt.slab_colour < 0 ||
	    usl_opt.slab_colour > 2 || usl_opt.bulk_lookahead < 1 || usl_opt.bulk_lookahead > 64 ||
	    usl_opt.front < USL_FRONT_SHEAVES || usl_opt.front > USL_FRONT_OWNED ||
	    (usl_opt.front == USL_FRONT_CPUSLAB && usl_opt.sheaves != 0))
		abort();
	for (int i = 0; i < k; i++) {
		unsetenv(names[i]);
		free(names[i]);
	}
	usl_opt = defaults;
	return 0;
}
