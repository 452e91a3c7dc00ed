/* options.c - the USLAB_* environment variables, read once at start-up without
 * allocating; a malformed value gets one line naming the variable and the
 * default is kept. No locks (start-up holds init_lock). */
#define _GNU_SOURCE
#include <string.h>
#include <errno.h>
#include <stdlib.h>

#include "../testing.h"
#include "platform.h"

struct usl_options usl_opt = { .min_objects = 0, .min_order = 0, .max_order = 3, .rseq = -1, .sheaves = -1,
                               .decay_ms = 1000, .background = 1, .harden = 1, .random = 1,
                               .slab_colour = 1, .bulk_lookahead = 3, .stack_depth = USL_STACK_MAX,
                               .rcu_max = 1 << 19 };


bool usl_parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return false;
	int saved = errno;               /* the first malloc must not change errno */
	errno = 0;
	v = strtol(s, &end, 10);
	bool bad = errno || *end || end == s || v < lo || v > hi;
	errno = saved;
	if (bad)
		return false;
	*out = v;
	return true;
}

/* The options, with the words docs/GUIDE.md, "Options", uses for a default that is not a plain
 * number (NULL: the number in *dst at start-up). */
struct option {
	const char *name;
	int *dst;
	long lo, hi;
	const char *dflt;
};

static int decay_opt = 1000;
static const struct option options[] = {
	{ "USLAB_MIN_OBJECTS", &usl_opt.min_objects, 1, USL_MAX_OBJS_PER_SLAB, "automatic: 4 * (fls(CPUs) + 1)" },
	{ "USLAB_MIN_ORDER", &usl_opt.min_order, 0, USL_MAX_ORDER, NULL },
	{ "USLAB_MAX_ORDER", &usl_opt.max_order, 0, USL_MAX_ORDER, NULL },
	{ "USLAB_RSEQ", &usl_opt.rseq, 0, 1, "automatic" },
	{ "USLAB_SHEAVES", &usl_opt.sheaves, 0, 1, "1" },
	{ "USLAB_NOMERGE", &usl_opt.nomerge, 0, 1, NULL },
	{ "USLAB_DECAY_MS", &decay_opt, 0, 3600 * 1000, NULL },
	{ "USLAB_BACKGROUND", &usl_opt.background, 0, 1, NULL },
	{ "USLAB_HARDEN", &usl_opt.harden, 0, 2, NULL },
	/* An unpredictable layout: random order, delayed reuse (0: the kernel's
	 * lowest-address-first, last-freed-first order, for benchmarks). */
	{ "USLAB_RANDOM", &usl_opt.random, 0, 1, NULL },
	/* A fake NUMA topology of that many nodes (tests on a one-node machine;
	 * 1 turns a NUMA machine into one node); unset: the machine's. */
	{ "USLAB_NODES", &usl_opt.nodes, 1, USL_MAX_NODES, "the machine's" },
	/* SLAB's colour: off (0), advanced without the node lock (1, the
	 * default) or under it (2). */
	{ "USLAB_SLAB_COLOUR", &usl_opt.slab_colour, 0, 2, NULL },
	/* SLUB's bulk free: how many objects of other slabs a detached
	 * freelist's scan passes; 1 gathers consecutive objects of one slab only. */
	{ "USLAB_BULK_LOOKAHEAD", &usl_opt.bulk_lookahead, 1, 64, NULL },
	/* Frames of the call stack a debug cache's owner track keeps (U, T);
	 * 0: the caller's address alone, with no unwinding. */
	{ "USLAB_STACK_DEPTH", &usl_opt.stack_depth, 0, USL_STACK_MAX, NULL },
	/* kfree_rcu: objects waiting for a grace period, at most (a caller
	 * outside a read-side section waits past it). */
	{ "USLAB_RCU_MAX", &usl_opt.rcu_max, 1024, 1 << 30, NULL },
};
#define NR_OPTIONS (sizeof(options) / sizeof(options[0]))
/* Options whose value is not a number, parsed by their own files. */
static const char *const text_options[] = { "USLAB_DEBUG", "USLAB_QUARANTINE", "USLAB_STATS", "USLAB_ALLOCATOR",
                                            "USLAB_FRONT", "USLAB_OOM" };
#define NR_TEXT_OPTIONS (sizeof(text_options) / sizeof(text_options[0]))

static void option_int(const struct option *o)
{
	const char *v = getenv(o->name);
	long x;

	if (!v)
		return;
	if (usl_parse_int(v, o->lo, o->hi, &x)) {
		*o->dst = (int)x;
		return;
	}
	if (o->dflt)
		usl_report(USLAB_ERR_OPTION, "%s='%s' is not a whole number in [%ld, %ld]; keeping the default (%s)",
		           o->name, v, o->lo, o->hi, o->dflt);
	else
		usl_report(USLAB_ERR_OPTION, "%s='%s' is not a whole number in [%ld, %ld]; keeping the default (%d)",
		           o->name, v, o->lo, o->hi, *o->dst);
}

/* Name every USLAB_* variable that is not an option (a typo, or an option of
 * another version), once: it would otherwise be ignored without a word. */
static void unknown_options(void)
{
	extern char **environ;

	for (char **e = environ; e && *e; e++) {
		const char *v = *e;
		if (v[0] != 'U' || v[1] != 'S' || v[2] != 'L' || v[3] != 'A' || v[4] != 'B' || v[5] != '_')
			continue;
		size_t len = 0;
		while (v[len] && v[len] != '=')
			len++;
		bool known = false;
		for (size_t i = 0; i < NR_OPTIONS + NR_TEXT_OPTIONS && !known; i++) {
			const char *n = i < NR_OPTIONS ? options[i].name : text_options[i - NR_OPTIONS];
			size_t k = 0;
			while (k < len && n[k] == v[k])
				k++;
			known = k == len && !n[k];
		}
		if (!known) {
			char names[(NR_OPTIONS + NR_TEXT_OPTIONS) * 24];   /* "A, B, ... and Z", from the tables */
			size_t n = 0, all = NR_OPTIONS + NR_TEXT_OPTIONS;
			for (size_t i = 0; i < all; i++) {
				const char *sep = i == 0 ? "" : i + 1 == all ? " and " : ", ";
				for (const char *c = sep; *c && n + 1 < sizeof(names); c++)
					names[n++] = *c;
				for (const char *c = i < NR_OPTIONS ? options[i].name : text_options[i - NR_OPTIONS];
				     *c && n + 1 < sizeof(names); c++)
					names[n++] = *c;
			}
			names[n] = 0;
			usl_report(USLAB_ERR_OPTION, "unknown option %.*s (this version reads %s); ignored",
			           (int)(len > 64 ? 64 : len), v, names);
		}
	}
}

/* USLAB_STATS: 0 (off), 1 (counters, slabinfo on stderr at exit) or a path
 * with a '/' (counters, slabinfo written there at exit). */
static char stats_path[512];

/* A value as a report shows it: its first 64 characters, printable, then
 * "..." if it goes on. buf: 68 bytes. */
static const char *shown_value(char *buf, const char *v)
{
	size_t k = 0;
	for (; k < 64 && v[k]; k++)
		buf[k] = v[k] >= ' ' && v[k] < 0x7f ? v[k] : '?';
	if (v[k])
		buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
	buf[k] = 0;
	return buf;
}

void usl_stats_parse(const char *v)
{
	usl_opt.stats = 0;
	usl_opt.stats_out = NULL;
	if (!v || (v[0] == '0' && !v[1]))
		return;
	if (v[0] == '1' && !v[1]) {
		usl_opt.stats = 1;
		usl_opt.stats_out = "";
		return;
	}
	size_t n = 0;
	bool slash = false;
	while (v[n] && n < sizeof(stats_path)) {
		slash |= v[n] == '/';
		n++;
	}
	if (!slash || n >= sizeof(stats_path)) {
		char shown[68];
		usl_report(USLAB_ERR_OPTION, "USLAB_STATS='%s' is neither 0, 1 nor a path (with a '/', under %zu bytes); "
		           "statistics stay off", shown_value(shown, v), sizeof(stats_path));
		return;
	}
	for (size_t i = 0; i <= n; i++)
		stats_path[i] = v[i];
	usl_opt.stats = 1;
	usl_opt.stats_out = stats_path;
}

/* USLAB_ALLOCATOR: slub (the default) or slab, the engine every cache but
 * uslab's own and debug caches runs on. */
void usl_allocator_parse(const char *v)
{
	usl_opt.allocator = USL_ENGINE_SLUB;
	if (!v)
		return;
	if (v[0] == 's' && v[1] == 'l' && v[2] == 'a' && v[3] == 'b' && !v[4]) {
		usl_opt.allocator = USL_ENGINE_SLAB;
		return;
	}
	if (v[0] == 's' && v[1] == 'l' && v[2] == 'u' && v[3] == 'b' && !v[4])
		return;
	char shown[68];
	usl_report(USLAB_ERR_OPTION, "USLAB_ALLOCATOR='%s' is neither slub nor slab; keeping the default (slub)",
	           shown_value(shown, v));
}

void usl_front_parse(const char *v)
{
	static const char *const names[] = { "sheaves", "cpuslab", "owned" };
	usl_opt.front = usl_opt.sheaves == 0 ? USL_FRONT_CPUSLAB : USL_FRONT_SHEAVES;
	if (!v)
		return;
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i])) {
			usl_opt.front = i;
			if (i == USL_FRONT_CPUSLAB)
				usl_opt.sheaves = 0;          /* USLAB_SHEAVES=0 is its alias */
			else if (usl_opt.sheaves == 0)
				usl_report(USLAB_ERR_OPTION, "USLAB_FRONT=%s and USLAB_SHEAVES=0: the caches the %s front "
				           "end does not serve have no sheaves", v, v);
			return;
		}
	char shown[68];
	usl_report(USLAB_ERR_OPTION, "USLAB_FRONT='%s' is none of owned, sheaves and cpuslab; keeping the default (%s)",
	           shown_value(shown, v), names[usl_opt.front]);
}

void usl_oom_parse(const char *v)
{
	static const char *const names[] = { "null", "report", "abort" };
	usl_opt.oom = USL_OOM_NULL;
	if (!v)
		return;
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, names[i])) {
			usl_opt.oom = i;
			return;
		}
	char shown[68];
	usl_report(USLAB_ERR_OPTION, "USLAB_OOM='%s' is none of null, report and abort; keeping the default (null)",
	           shown_value(shown, v));
}

void usl_read_options(void)
{
	decay_opt = (int)usl_opt.decay_ms;
	for (size_t i = 0; i < NR_OPTIONS; i++)
		option_int(&options[i]);
	usl_opt.decay_ms = (unsigned int)decay_opt;
	usl_opt.max_order_given = getenv("USLAB_MAX_ORDER") != NULL;
	if (usl_opt.min_order > usl_opt.max_order) {
		usl_report(USLAB_ERR_OPTION, "USLAB_MIN_ORDER=%d is above USLAB_MAX_ORDER=%d; raising the maximum",
		           usl_opt.min_order, usl_opt.max_order);
		usl_opt.max_order = usl_opt.min_order;
	}
	usl_debug_parse(getenv("USLAB_DEBUG"));
	usl_quarantine_parse(getenv("USLAB_QUARANTINE"));
	usl_stats_parse(getenv("USLAB_STATS"));
	usl_allocator_parse(getenv("USLAB_ALLOCATOR"));
	usl_front_parse(getenv("USLAB_FRONT"));
	usl_oom_parse(getenv("USLAB_OOM"));
	usl_opt.mode = (usl_opt.harden ? USL_MODE_HARDEN : 0) | (usl_opt.stats ? USL_MODE_STATS : 0) |
	                    (!usl_opt.background && usl_opt.decay_ms ? USL_MODE_TICK : 0);   /* common/decay.c */
	unknown_options();
}
