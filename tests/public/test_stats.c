/* test_stats.c - statistics: the CONFIG_SLUB_STATS counters against a
 * hand-counted single-threaded workload (sheaves on, or off with
 * USLAB_SHEAVES=0; both per-CPU modes), the sysfs attributes' text and
 * writes, /proc/slabinfo's format agreeing with the attributes, and
 * USLAB_STATS=<path> writing slabinfo at exit (a forked child's). Run with
 * USLAB_STATS set to a path; "nostats" (USLAB_STATS unset): counters are
 * refused, the rest works. No decay thread: it would move objects on its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/wait.h>

#include "../harness.h"

static unsigned long long attr_num(struct kmem_cache *s, const char *name)
{
	char buf[512];
	if (uslab_cache_attr(s, name, buf, sizeof(buf)) < 0)
		return ~0ULL;
	return strtoull(buf, NULL, 10);
}

/* A counter's text is "sum C<cpu>=<n> ...": the parts add up to the sum. */
static bool counter_consistent(struct kmem_cache *s, const char *name)
{
	char buf[1024];
	if (uslab_cache_attr(s, name, buf, sizeof(buf)) < 0)
		return false;
	char *p;
	unsigned long long sum = strtoull(buf, &p, 10), parts = 0;
	while (*p == ' ') {
		unsigned int cpu;
		unsigned long long v;
		int used;
		if (sscanf(p, " C%u=%llu%n", &cpu, &v, &used) != 2)
			return false;
		parts += v;
		p += used;
	}
	return *p == '\n' && !p[1] && (parts == sum || (sum == 0 && parts == 0));
}

#define STAT(s, name) attr_num(s, name)

/* Sheaves on: every allocation is one alloc_cpu_sheaf and every free one
 * free_cpu_sheaf; three sheaves' worth comes from one sheaf refilled three
 * times from slabs; the frees fill it, a new one, and a third while the first
 * full one goes to the barn; shrink flushes and frees them all. */
static void counted_sheaves(struct kmem_cache *s)
{
	unsigned int cap = uslab_sheaf_capacity(s), objs = (unsigned int)STAT(s, "objs_per_slab");
	unsigned int n = 3 * cap;
	void **p = calloc(n, sizeof(void *));

	for (unsigned int i = 0; i < n; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(STAT(s, "alloc_cpu_sheaf"), n);
	CHECK_EQ(STAT(s, "sheaf_alloc"), 1);
	CHECK_EQ(STAT(s, "sheaf_refill"), n);
	CHECK_EQ(STAT(s, "barn_get_fail"), 3);
	CHECK_EQ(STAT(s, "barn_get"), 0);
	CHECK_EQ(STAT(s, "alloc_slab"), (n + objs - 1) / objs);
	CHECK_EQ(STAT(s, "alloc_fastpath") + STAT(s, "alloc_slowpath"), n);   /* the refills' objects */
	for (unsigned int i = 0; i < n; i++)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(STAT(s, "free_cpu_sheaf"), n);
	CHECK_EQ(STAT(s, "sheaf_alloc"), 3);
	CHECK_EQ(STAT(s, "barn_put"), 1);
	CHECK_EQ(STAT(s, "free_slab"), 0);
	CHECK_EQ(STAT(s, "sheaf_flush"), 0);
	/* Every object is in a sheaf: all count as in use to the slabs. */
	CHECK_EQ(STAT(s, "objects"), STAT(s, "total_objects"));

	CHECK_EQ(kmem_cache_shrink(s), 0);
	CHECK_EQ(STAT(s, "sheaf_flush"), n);
	CHECK_EQ(STAT(s, "sheaf_free"), 3);
	CHECK_EQ(STAT(s, "free_slab"), STAT(s, "alloc_slab"));
	CHECK_EQ(STAT(s, "slabs"), 0);
	CHECK_EQ(STAT(s, "objects"), 0);
	free(p);
}

/* Sheaves off: each allocation is one alloc_fastpath or one alloc_slowpath;
 * a slow one takes a new slab or carves more of the cpu slab (alloc_refill);
 * a used-up cpu slab is dropped (deactivate_bypass). Freed in order, the full
 * slabs' first frees put them on the CPU's partial list; the last slab's are
 * fast frees to the cpu slab. */
static void counted_cpu_slab(struct kmem_cache *s)
{
	unsigned int objs = (unsigned int)STAT(s, "objs_per_slab");
	unsigned int n = 2 * objs + 1;
	void **p = calloc(n, sizeof(void *));

	for (unsigned int i = 0; i < n; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long long slabs = STAT(s, "alloc_slab");
	CHECK_EQ(slabs, 3);
	CHECK_EQ(STAT(s, "alloc_fastpath") + STAT(s, "alloc_slowpath"), n);
	CHECK_EQ(STAT(s, "alloc_slowpath"), slabs + STAT(s, "alloc_refill"));
	CHECK_EQ(STAT(s, "deactivate_bypass"), slabs - 1);
	CHECK_EQ(STAT(s, "alloc_cpu_sheaf"), 0);
	CHECK_EQ(STAT(s, "objects"), slabs * objs);    /* the cpu slab's free objects count as in use */
	CHECK_EQ(STAT(s, "cpu_slabs"), 1);
	for (unsigned int i = 0; i < n; i++)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(STAT(s, "free_fastpath") + STAT(s, "free_slowpath"), n);
	CHECK_EQ(STAT(s, "free_fastpath"), n - (slabs - 1) * objs);
	/* uslab's own: each slow free is at least one slab CAS (one thread: none
	 * failed); the frees took no list_lock (full slabs go to the CPU's
	 * partial list), the flush below does. */
	CHECK(STAT(s, "cmpxchg_double") >= STAT(s, "free_slowpath"));
	CHECK_EQ(STAT(s, "cmpxchg_double_fail"), 0);
	unsigned long long locks = STAT(s, "list_lock");
	CHECK_EQ(STAT(s, "cpu_partial_free"), slabs - 1);
	CHECK_EQ(STAT(s, "free_cpu_sheaf"), 0);
	CHECK_EQ(STAT(s, "free_slab"), 0);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	CHECK_EQ(STAT(s, "cpuslab_flush"), 1);
	CHECK_EQ(STAT(s, "free_slab"), slabs);
	CHECK(STAT(s, "list_lock") > locks);
	CHECK_EQ(STAT(s, "slabs"), 0);
	free(p);
}

/* Every counter back to 0 ("0" written, as to sysfs). */
static void reset_counters(struct kmem_cache *s)
{
	int n = 0;
	for (const char *const *a = uslab_cache_attrs(); *a; a++)
		if (strcmp(*a, "min_partial") && strcmp(*a, "cpu_partial") && uslab_cache_attr_write(s, *a, "0") == 0)
			n++;
	CHECK_EQ(n, 45);
	CHECK_EQ(STAT(s, "alloc_fastpath"), 0);
}

/* Bulk calls count per object: each of the 100 comes from a sheaf or from
 * the cpu slab; with sheaves, each goes back into one. */
static void counted_bulk(struct kmem_cache *s)
{
	void *p[100];
	reset_counters(s);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, p), 100);
	CHECK_EQ(STAT(s, "alloc_cpu_sheaf") + STAT(s, "alloc_fastpath") + STAT(s, "alloc_slowpath"), 100);
	kmem_cache_free_bulk(s, 100, p);
	if (uslab_sheaf_capacity(s))
		CHECK_EQ(STAT(s, "free_cpu_sheaf"), 100);
	else
		CHECK(STAT(s, "free_fastpath") + STAT(s, "free_slowpath") >= 1);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	CHECK_EQ(STAT(s, "slabs"), 0);
}

/* The attributes' text and writes. */
static void attributes(struct kmem_cache *s, bool stats)
{
	char buf[256];
	CHECK_EQ(uslab_cache_attr(s, "object_size", buf, sizeof(buf)), 4);
	CHECK(!strcmp(buf, "200\n"));
	CHECK_EQ(STAT(s, "slab_size") % 8, 0);
	CHECK(STAT(s, "slab_size") >= 200);
	CHECK_EQ(STAT(s, "objs_per_slab"), (4096UL << STAT(s, "order")) / STAT(s, "slab_size"));
	CHECK_EQ(STAT(s, "sheaf_capacity"), uslab_sheaf_capacity(s));
	CHECK_EQ(STAT(s, "aliases"), 0);
	CHECK_EQ(STAT(s, "poison"), 0);
	CHECK_EQ(uslab_cache_attr(s, "ctor", buf, sizeof(buf)), 0);     /* none: empty, as sysfs */
	/* Cut to the buffer, the whole length returned (as snprintf). */
	CHECK_EQ(uslab_cache_attr(s, "object_size", buf, 2), 4);
	CHECK(!strcmp(buf, "2"));
	CHECK_EQ(uslab_cache_attr(s, "object_size", NULL, 0), 4);

	/* Writable ones. */
	CHECK_EQ(uslab_cache_attr_write(s, "min_partial", "7\n"), 0);
	CHECK_EQ(STAT(s, "min_partial"), 7);
	CHECK_EQ(uslab_cache_attr_write(s, "min_partial", "seven"), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_cache_attr_write(s, "min_partial", "-1"), -1);
	CHECK_EQ(STAT(s, "min_partial"), 7);
	CHECK_EQ(uslab_cache_attr_write(s, "cpu_partial", "30"), 0);
	CHECK_EQ(STAT(s, "cpu_partial"), 30);
	CHECK_EQ(uslab_cache_attr_write(s, "object_size", "8"), -1);
	CHECK_EQ(errno, EACCES);
	CHECK_EQ(uslab_cache_attr_write(s, "no_such_thing", "1"), -1);
	CHECK_EQ(errno, ENOENT);
	CHECK_EQ(uslab_cache_attr(s, "no_such_thing", buf, sizeof(buf)), -1);
	CHECK_EQ(errno, ENOENT);
	CHECK_EQ(uslab_cache_attr_write(s, "validate", "1"), -1);   /* not a debug cache */
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_cache_attr_write(s, "shrink", "1"), 0);
	if (stats) {
		CHECK_EQ(uslab_cache_attr_write(s, "alloc_fastpath", "5"), -1);   /* only "0" */
		CHECK_EQ(errno, EINVAL);
		CHECK_EQ(uslab_cache_attr_write(s, "list_lock", "5"), -1);        /* uslab's own too */
		CHECK_EQ(errno, EINVAL);
		CHECK_EQ(uslab_cache_attr_write(s, "cmpxchg_double", "-1"), -1);
		CHECK_EQ(errno, EINVAL);
		for (const char *const *a = uslab_cache_attrs(); *a; a++)
			if (!strcmp(*a, "alloc_fastpath") || !strcmp(*a, "free_cpu_sheaf") || !strcmp(*a, "barn_put") ||
			    !strcmp(*a, "cmpxchg_double") || !strcmp(*a, "list_lock"))
				CHECK(counter_consistent(s, *a));
	} else {
		CHECK_EQ(uslab_cache_attr(s, "alloc_fastpath", buf, sizeof(buf)), -1);
		CHECK_EQ(errno, EOPNOTSUPP);
		CHECK_EQ(uslab_cache_attr_write(s, "alloc_fastpath", "0"), -1);
		CHECK_EQ(errno, EOPNOTSUPP);
	}
	/* Bad caches, names and values. */
	capture_reports();
	CHECK_EQ(uslab_cache_attr(NULL, "order", buf, sizeof(buf)), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 1);
	CHECK_EQ(uslab_cache_attr_write(NULL, "shrink", "1"), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 2);
	struct kmem_cache *gone = kmem_cache_create("stat-gone", 64, 0, SLAB_NO_MERGE, NULL);
	kmem_cache_destroy(gone);
	CHECK_EQ(uslab_cache_attr(gone, "order", buf, sizeof(buf)), -1);   /* destroyed */
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 3);
	CHECK(uslab_cache_find("stat-gone") == NULL);
	CHECK_EQ(uslab_cache_attr(s, NULL, buf, sizeof(buf)), -1);
	CHECK_EQ(errno, ENOENT);
	CHECK_EQ(uslab_cache_attr_write(s, "min_partial", NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_cache_attr_write(s, "cpu_partial", "99999999999999999999"), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_cache_attr_write(s, "shrink", "0"), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK(uslab_cache_find(NULL) == NULL);
	CHECK_EQ(uslab_for_each_cache(NULL, NULL), 0);
	uslab_slabinfo(NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 4);
	CHECK(strstr(last_report, "uslab_slabinfo: NULL stream") != NULL);
	uslab_set_report_handler(NULL, NULL);
}

/* slabinfo: the kernel's header, and a row per cache that parses with the
 * kernel's format and agrees with the attributes. */
static void slabinfo(struct kmem_cache *s)
{
	void *keep[10];
	for (int i = 0; i < 10; i++)
		keep[i] = kmem_cache_alloc(s, GFP_KERNEL);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	uslab_slabinfo(f);
	fclose(f);
	CHECK(!strncmp(text, "slabinfo - version: 2.1\n# name            <active_objs> <num_objs> <objsize> "
	                     "<objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata "
	                     "<active_slabs> <num_slabs> <sharedavail>\n", 200));
	int rows = 0, found = 0;
	for (char *line = strchr(text, '\n') + 1, *next; *line; line = next) {
		next = strchr(line, '\n');
		*next++ = 0;
		if (line[0] == '#')
			continue;
		char name[64];
		unsigned long active, num, aslabs, nslabs, shared;
		unsigned int objsize, per, pages, l, b, sf;
		int end = 0;
		int k = sscanf(line, "%63s %lu %lu %u %u %u : tunables %u %u %u : slabdata %lu %lu %lu%n", name, &active, &num,
		               &objsize, &per, &pages, &l, &b, &sf, &aslabs, &nslabs, &shared, &end);
		CHECK_EQ(k, 12);
		CHECK_EQ(line[end], 0);
		CHECK(strlen(name) > 17 || line[17] == ' ');             /* %-17s */
		CHECK(active <= num && l == 0 && b == 0 && sf == 0 && shared == 0 && aslabs == nslabs);
		rows++;
		if (!strcmp(name, kmem_cache_name(s))) {
			found++;
			CHECK_EQ(active, STAT(s, "objects"));
			CHECK_EQ(num, STAT(s, "total_objects"));
			CHECK_EQ(objsize, STAT(s, "slab_size"));
			CHECK_EQ(per, STAT(s, "objs_per_slab"));
			CHECK_EQ(pages, 1u << STAT(s, "order"));
			CHECK_EQ(nslabs, STAT(s, "slabs"));
			CHECK(active >= 10);
			/* The same row as numbers (no allocation in between). */
			struct uslab_slabinfo si;
			CHECK_EQ(uslab_cache_slabinfo(s, &si), 0);
			CHECK(si.active_objs == active && si.num_objs == num && si.objsize == objsize &&
			      si.objperslab == per && si.pagesperslab == pages && si.limit == l && si.batchcount == b &&
			      si.sharedfactor == sf && si.active_slabs == aslabs && si.num_slabs == nslabs &&
			      si.sharedavail == shared);
		}
	}
	CHECK_EQ(found, 1);
	CHECK(rows >= 2);      /* ours and "kmem_cache" at least */
	unsigned long bad = uslab_error_count();
	struct uslab_slabinfo si;
	errno = 0;
	CHECK_EQ(uslab_cache_slabinfo(NULL, &si), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_cache_slabinfo(s, NULL), -1);
	CHECK_EQ(uslab_error_count(), bad + 2);
	free(text);
	for (int i = 0; i < 10; i++)
		kmem_cache_free(s, keep[i]);
}

/* malloc_info's objects total is what the attributes add up to (active
 * objects times their size, the program's caches: not uslab's own). */
static int add_objects(struct kmem_cache *c, void *arg)
{
	const char *name = kmem_cache_name(c);
	if (strcmp(name, "kmem_cache") && strncmp(name, "uslab-", 6))
		*(unsigned long long *)arg += attr_num(c, "objects") * attr_num(c, "slab_size");
	return 0;
}

static void malloc_totals(void)
{
	static char xml[4096];
	FILE *f = fmemopen(xml, sizeof(xml), "w");
	fputs("x", f);                 /* stdio's own buffer now, not during the reading */
	rewind(f);
	unsigned long long before = 0, after = 0, objects = 0;
	uslab_for_each_cache(add_objects, &before);
	int r = malloc_info(0, f);
	uslab_for_each_cache(add_objects, &after);
	fputc(0, f);
	fclose(f);
	CHECK_EQ(r, 0);
	if (strncmp(xml, "<malloc version=\"uslab-1\">", 26))
		return;                        /* not the override's malloc */
	static const char key[] = "<total type=\"objects\" size=\"";
	const char *o = strstr(xml, key);
	CHECK(o != NULL);
	if (o)
		objects = strtoull(o + sizeof(key) - 1, NULL, 10);
	CHECK_EQ(before, after);
	CHECK_EQ(objects, before);
	if (objects != before)
		fprintf(stderr, "malloc_info said:\n%s\n", xml);
	CHECK(before > 0);
}

/* USLAB_STATS=<path>: a child's slabinfo is in the file when it exits. */
static void at_exit(void)
{
	const char *path = getenv("USLAB_STATS");
	if (!path || !strchr(path, '/'))
		return;
	unlink(path);
	pid_t pid = fork();
	if (pid == 0) {
		struct kmem_cache *c = kmem_cache_create("stat-child", 64, 0, SLAB_NO_MERGE, NULL);
		for (int i = 0; i < 5; i++)
			(void)kmem_cache_alloc(c, GFP_KERNEL);
		exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char child_path[600];
	snprintf(child_path, sizeof(child_path), "%s.%ld", path, (long)pid);   /* a child's, beside the parent's */
	FILE *f = fopen(child_path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	char line[512];
	int header = 0, child = 0;
	while (fgets(line, sizeof(line), f)) {
		header += !strcmp(line, "slabinfo - version: 2.1\n");
		unsigned long active;
		if (!strncmp(line, "stat-child ", 11) && sscanf(line + 17, "%lu", &active) == 1)
			child += active >= 5;
	}
	fclose(f);
	unlink(child_path);
	CHECK_EQ(header, 1);
	CHECK_EQ(child, 1);
}

int main(int argc, char **argv)
{
	bool stats = !(argc > 1 && !strcmp(argv[1], "nostats"));
	/* Before the first uslab call reads the options: without USLAB_STATS.
	 * With it the library's constructor reads them before main (the test's
	 * environment sets USLAB_BACKGROUND=0 then). */
	setenv("USLAB_BACKGROUND", "0", 1);
	CHECK_EQ(uslab_stats_enabled(), stats);
	/* (The kernel's order: the counts below are its sheaves'.) */
	struct kmem_cache *s = kmem_cache_create("stat-a", 200, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	CHECK(s != NULL);
	CHECK(uslab_cache_find("stat-a") == s);
	CHECK(uslab_cache_find("no-such-cache") == NULL);
	if (stats) {
		if (uslab_sheaf_capacity(s))
			counted_sheaves(s);
		else
			counted_cpu_slab(s);
		counted_bulk(s);
	}
	attributes(s, stats);
	slabinfo(s);
	malloc_totals();
	if (stats)
		at_exit();
	kmem_cache_destroy(s);
	return test_summary();
}
