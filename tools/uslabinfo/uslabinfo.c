/* uslabinfo.c - what a running uslab process holds, from outside: the kernel's
 * tools/mm/slabinfo for the live view a process publishes with USLAB_STATS
 * (/dev/shm/uslab.<pid>, src/stats/live.h), or for a file saved from it. The
 * same columns and reports as slabinfo where they apply; --top refreshes like
 * slabtop. Usage: uslabinfo --help. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "live_read.h"

static struct {
	bool aliases, activity_sort, activity_view, bytes, empty, inverted, loss, partial_sort, report, shrink, size,
	    totals, validate, zero, single_ref, top, numa;
	long lines;
	double delay;
	const char *file, *save;
	long pid;
	bool have_regex;
	regex_t regex;
} opt = { .lines = -1, .delay = 1.0, .pid = -1 };

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("uslabinfo: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(FILE *f)
{
	fprintf(f,
	        "uslabinfo: the caches of a running uslab process (it must run with USLAB_STATS set),\n"
	        "or of a file saved with --save. The columns are the kernel's slabinfo's.\n\n"
	        "uslabinfo -p PID [options] [cache-regexp]\n"
	        "uslabinfo -f FILE [options] [cache-regexp]\n\n"
	        "-a|--aliases           show the names merged into other caches\n"
	        "-A|--activity          most active caches first\n"
	        "-B|--Bytes             sizes in bytes (no K/M/G)\n"
	        "-D|--display-active    activity columns\n"
	        "-e|--empty             only caches with no slabs\n"
	        "-h|--help              this text\n"
	        "-i|--inverted          inverted order\n"
	        "-l|--slabs             the cache table (the default)\n"
	        "-L|--Loss              sort by loss (and show it)\n"
	        "-n|--numa              slabs per NUMA node (the kernel tool's view; with -r also\n"
	        "                       partial slabs per node)\n"
	        "-N|--lines=K           the first K caches\n"
	        "-P|--partial           sort by partial slabs\n"
	        "-r|--report            a detailed report of each cache (of the one matched: by default);\n"
	        "                       a cache with U also gets its owner summaries (asked of the process)\n"
	        "-s|--shrink            ask the process to shrink the caches matched (served at its next\n"
	        "                       allocator call)\n"
	        "-S|--Size              sort by size\n"
	        "-T|--Totals            totals\n"
	        "-v|--validate          ask the process to validate the debug caches matched\n"
	        "-z|--zero              include caches with no slabs\n"
	        "-1|--1ref              with -a: also caches with a single name\n"
	        "--top [--delay=S]      refresh every S seconds (default 1) until q or Ctrl-C\n"
	        "--save=FILE            write the snapshot to FILE (read it with -f)\n");
}

/* ===========================================================================
 * Where the data comes from
 */

static const void *map_base;
static size_t map_len;
static int map_fd = -1;
static bool map_live;

static void open_source(void)
{
	char path[64];
	const char *p = opt.file;
	/* Requests: shrink, validate, and a report's owner summaries. */
	bool need_write = opt.shrink || opt.validate || opt.report || opt.have_regex;

	if (!p) {
		snprintf(path, sizeof(path), "/dev/shm/uslab.%ld", opt.pid);
		p = path;
	}
	int fd = open(p, (need_write && !opt.file ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT && !opt.file) {
			if (kill((pid_t)opt.pid, 0) != 0 && errno == ESRCH)
				die("no process %ld", opt.pid);
			die("process %ld publishes no live view (%s does not exist): run it with "
			    "LD_PRELOAD=libuslab.so (or linked with uslab) and USLAB_STATS=1 or a path",
			    opt.pid, path);
		}
		if (errno == EACCES)
			die("%s: permission denied (a process's live view is readable by its own user only)", p);
		die("%s: %s", p, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("%s: %s", p, strerror(errno));
	if (!S_ISREG(st.st_mode))
		die("%s: not a regular file", p);
	if (!opt.file && st.st_uid != getuid() && getuid() != 0)
		die("%s belongs to user %u: uslabinfo reads your own processes only", p, (unsigned)st.st_uid);
	if (st.st_size == 0)
		die("%s is empty (truncated, or still being made)", p);
	map_len = (size_t)st.st_size;
	map_base = mmap(NULL, map_len, PROT_READ | (need_write && !opt.file ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	if (map_base == MAP_FAILED)
		die("%s: cannot map it: %s", p, strerror(errno));
	map_fd = fd;
	map_live = !opt.file;
}

/* A snapshot; for a process, also that it is the process the file is of. */
static void load(struct live_snapshot *s)
{
	char err[200];
	if (live_load(map_base, map_len, map_live, s, err, sizeof(err)) != 0)
		die("%s: %s", opt.file ? opt.file : "live view", err);
	if (!map_live)
		return;
	if (kill((pid_t)opt.pid, 0) != 0 && errno == ESRCH)
		die("process %ld has exited; /dev/shm/uslab.%ld is stale (the next uslab process with USLAB_STATS "
		    "removes it)", opt.pid, opt.pid);
	if (s->hdr.pid != opt.pid)
		die("/dev/shm/uslab.%ld names process %lld (a corrupt or foreign file)", opt.pid, (long long)s->hdr.pid);
	uint64_t now = usl_live_start_time(opt.pid);
	if (now && s->hdr.start_time && now != s->hdr.start_time)
		die("/dev/shm/uslab.%ld is stale: it was made by an earlier process with the same pid", opt.pid);
}

/* ===========================================================================
 * The kernel's slabinfo, over rows
 */

static unsigned long page_size;

static const struct usl_live_header *H;

static uint64_t stat_of(const struct usl_live_row *r, const char *name)
{
	for (uint32_t i = 0; i < H->nr_stats; i++)
		if (!strcmp(H->stat_names[i], name))
			return r->stats[i];
	return 0;
}

static unsigned long slab_bytes(const struct usl_live_row *r)
{
	return (unsigned long)r->slabs * (page_size << r->order);
}

static unsigned long loss_bytes(const struct usl_live_row *r)
{
	unsigned long used = (unsigned long)r->objects * r->object_size, all = slab_bytes(r);
	return all > used ? all - used : 0;
}

static unsigned long activity(const struct usl_live_row *r)
{
	return stat_of(r, "alloc_fastpath") + stat_of(r, "free_fastpath") + stat_of(r, "alloc_slowpath") +
	       stat_of(r, "free_slowpath") + stat_of(r, "alloc_cpu_sheaf") + stat_of(r, "free_cpu_sheaf");
}

/* The kernel tool's K/M/G with one decimal (or bytes with -B). */
static const char *size_str(char *b, size_t n, unsigned long v)
{
	if (opt.bytes || v <= 1000)
		snprintf(b, n, "%lu", v);
	else if (v > 1000000000UL)
		snprintf(b, n, "%lu.%luG", v / 1000000000UL, v / 100000000UL % 10);
	else if (v > 1000000UL)
		snprintf(b, n, "%lu.%luM", v / 1000000UL, v / 100000UL % 10);
	else
		snprintf(b, n, "%lu.%luK", v / 1000UL, v / 100UL % 10);
	return b;
}

static void flags_str(char *b, const struct usl_live_row *r)
{
	char *p = b;
	if (r->aliases)
		*p++ = '*';
	if (r->flags & USL_LIVE_F_HWCACHE)
		*p++ = 'A';
	if (r->flags & USL_LIVE_F_POISON)
		*p++ = 'P';
	if (r->flags & USL_LIVE_F_RED_ZONE)
		*p++ = 'Z';
	if (r->flags & USL_LIVE_F_CHECKS)
		*p++ = 'F';
	if (r->flags & USL_LIVE_F_STORE_USER)
		*p++ = 'U';
	if (r->flags & USL_LIVE_F_TRACE)
		*p++ = 'T';
	*p = 0;
}

static int cmp_rows(const void *a, const void *b)
{
	const struct usl_live_row *x = a, *y = b;
	int r;
	unsigned long u, v;
	if (opt.size || opt.top) {
		u = slab_bytes(x);
		v = slab_bytes(y);
	} else if (opt.activity_sort) {
		u = activity(x);
		v = activity(y);
	} else if (opt.loss) {
		u = loss_bytes(x);
		v = loss_bytes(y);
	} else if (opt.partial_sort) {
		u = x->partial;
		v = y->partial;
	} else {
		u = v = 0;
	}
	r = u != v ? (u < v ? 1 : -1) : strcasecmp(x->name, y->name);
	return opt.inverted ? -r : r;
}

static bool wanted(const struct usl_live_row *r)
{
	if (opt.have_regex && regexec(&opt.regex, r->name, 0, NULL, 0))
		return false;
	return true;
}

static void print_header(FILE *f)
{
	if (opt.activity_view)
		fprintf(f, "Name                   Objects      Alloc       Free   %%Fast Fallb O CmpX   UL\n");
	else
		fprintf(f, "Name                   Objects Objsize           %s Slabs/Part/Cpu  O/S O %%Fr %%Ef Flg\n",
		        opt.loss ? " Loss" : "Space");
}

static void print_row(FILE *f, const struct usl_live_row *r)
{
	char size[32], dist[64], flags[16];
	if (opt.activity_view) {
		unsigned long fa = stat_of(r, "alloc_fastpath") + stat_of(r, "alloc_cpu_sheaf");
		unsigned long ff = stat_of(r, "free_fastpath") + stat_of(r, "free_cpu_sheaf");
		unsigned long ta = fa + stat_of(r, "alloc_slowpath"), tf = ff + stat_of(r, "free_slowpath");
		fprintf(f, "%-21s %8lu %10lu %10lu %3lu %3lu %5lu %1u %4lu %4lu\n", r->name, (unsigned long)r->objects, ta,
		        tf, ta ? fa * 100 / ta : 0, tf ? ff * 100 / tf : 0, (unsigned long)stat_of(r, "order_fallback"),
		        r->order, (unsigned long)stat_of(r, "cmpxchg_double_fail"),
		        (unsigned long)stat_of(r, "cmpxchg_double_cpu_fail"));
		return;
	}
	size_str(size, sizeof(size), opt.loss ? loss_bytes(r) : slab_bytes(r));
	snprintf(dist, sizeof(dist), "%lu/%lu/%u", (unsigned long)(r->slabs > r->cpu_slabs ? r->slabs - r->cpu_slabs : 0),
	         (unsigned long)r->partial, r->cpu_slabs);
	flags_str(flags, r);
	fprintf(f, "%-21s %8lu %7u %15s %14s %4u %1u %3lu %3lu %s\n", r->name, (unsigned long)r->objects, r->object_size,
	        size, dist, r->objs_per_slab, r->order, r->slabs ? (unsigned long)(r->partial * 100 / r->slabs) : 100,
	        r->slabs ? (unsigned long)(r->objects * r->object_size * 100 / slab_bytes(r)) : 100, flags);
}

static const char *onoff(bool x)
{
	return x ? "On " : "Off";
}

/* The kernel tool's NUMA view: a header of node ids, then per cache its
 * slabs on each node; in a report (detail) also its partial slabs. One node:
 * "No NUMA information available", as the kernel's. */
static int numa_lines;

static void numa_view(FILE *f, const struct usl_live_row *r, bool detail)
{
	unsigned int nodes = H->nr_nodes < USL_LIVE_NODES ? H->nr_nodes : USL_LIVE_NODES;
	char b[32];
	if (nodes <= 1) {
		fprintf(f, "\n%s: No NUMA information available.\n", r->name);
		return;
	}
	if (!opt.zero && !r->slabs && !detail)
		return;
	if (!numa_lines++ || detail) {
		fprintf(f, "\n%-21s:", detail ? "NUMA nodes" : "Slab");
		for (unsigned int n = 0; n < nodes; n++)
			fprintf(f, " %4u", n);
		fprintf(f, "\n----------------------");
		for (unsigned int n = 0; n < nodes; n++)
			fprintf(f, "-----");
		fprintf(f, "\n");
	}
	fprintf(f, "%-21s ", detail ? "All slabs" : r->name);
	for (unsigned int n = 0; n < nodes; n++)
		fprintf(f, " %4s", size_str(b, sizeof(b), (unsigned long)r->node_slabs[n]));
	fprintf(f, "\n");
	if (detail) {
		fprintf(f, "%-21s ", "Partial slabs");
		for (unsigned int n = 0; n < nodes; n++)
			fprintf(f, " %4s", size_str(b, sizeof(b), (unsigned long)r->node_partial[n]));
		fprintf(f, "\n");
	}
}

/* The owner summaries of the caches with U (alloc_calls and free_calls, as
 * the kernel's sysfs files), fetched once for a report of a running process:
 * the reply file's text, sections headed "== <cache> <file>". */
static char *calls_text;
static int64_t request(uint32_t op, const char *name);

static void fetch_calls(const char *name)
{
	char path[96];
	if (request(USL_LIVE_CALLS, name) < 0)
		die("process %ld could not write its owner summaries in /dev/shm", opt.pid);
	snprintf(path, sizeof(path), "/dev/shm/uslab.%ld%s", opt.pid, USL_LIVE_CALLS_SUFFIX);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != getuid() && getuid() != 0))
		die("%s: cannot read the owner summaries: %s", path, fd < 0 ? strerror(errno) : "not the process's file");
	size_t n = (size_t)st.st_size, got = 0;
	calls_text = malloc(n + 1);
	if (!calls_text)
		die("out of memory");
	while (got < n) {
		ssize_t k = read(fd, calls_text + got, n - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	calls_text[got] = 0;
	close(fd);
	unlink(path);
}

/* The kernel tool's show_tracking. */
static void tracking(FILE *f, const char *name)
{
	static const char *const which[2] = { "alloc_calls", "free_calls" };
	static const char *const title[2] = { "allocation", "freeing" };
	for (int i = 0; i < 2; i++) {
		size_t len = 0;
		const char *t = live_calls_find(calls_text, name, which[i], &len);
		fprintf(f, "\n%s: Kernel object %s\n", name, title[i]);
		fprintf(f, "-----------------------------------------------------------------------%s\n", i ? "-" : "");
		if (t && len)
			fwrite(t, 1, len, f);
		else
			fprintf(f, "No Data\n");
	}
}

/* A row the report shows: wanted, and with slabs unless asked for (-z) or
 * the one matched. */
static bool reported(const struct usl_live_row *r, unsigned int matched)
{
	return wanted(r) && (opt.zero || r->slabs || matched == 1);
}

static void report(FILE *f, const struct usl_live_row *r)
{
	unsigned long slab = page_size << r->order;
	fprintf(f, "\nSlabcache: %-15s  Aliases: %2u Order : %2u Objects: %lu\n", r->name, r->aliases, r->order,
	        (unsigned long)r->objects);
	if (r->flags & USL_LIVE_F_HWCACHE)
		fprintf(f, "** Hardware cacheline aligned\n");
	if (r->flags & USL_LIVE_F_SLAB)
		fprintf(f, "** SLAB: per-CPU arrays of %u objects (limit)\n", r->sheaf_capacity);
	else if (r->sheaf_capacity)
		fprintf(f, "** Per-CPU sheaves of %u objects\n", r->sheaf_capacity);
	fprintf(f, "\nSizes (bytes)     Slabs              Debug                Memory\n");
	fprintf(f, "------------------------------------------------------------------------\n");
	fprintf(f, "Object : %7u  Total  : %7lu   Sanity Checks : %s  Total: %7lu\n", r->object_size,
	        (unsigned long)r->slabs, onoff(r->flags & USL_LIVE_F_CHECKS), slab_bytes(r));
	fprintf(f, "SlabObj: %7u  Full   : %7ld   Redzoning     : %s  Used : %7lu\n", r->slab_size,
	        (long)r->slabs - (long)r->partial - (long)r->cpu_slabs, onoff(r->flags & USL_LIVE_F_RED_ZONE),
	        (unsigned long)r->objects * r->object_size);
	fprintf(f, "SlabSiz: %7lu  Partial: %7lu   Poisoning     : %s  Loss : %7lu\n", slab, (unsigned long)r->partial,
	        onoff(r->flags & USL_LIVE_F_POISON), loss_bytes(r));
	fprintf(f, "Loss   : %7u  CpuSlab: %7u   Tracking      : %s  Lalig: %7lu\n", r->slab_size - r->object_size,
	        r->cpu_slabs, onoff(r->flags & USL_LIVE_F_STORE_USER),
	        (unsigned long)(r->slab_size - r->object_size) * (unsigned long)r->objects);
	fprintf(f, "Align  : %7u  Objects: %7u   Tracing       : %s  Lpadd: %7lu\n", r->align, r->objs_per_slab,
	        onoff(r->flags & USL_LIVE_F_TRACE),
	        (slab - (unsigned long)r->objs_per_slab * r->slab_size) * (unsigned long)r->slabs);
	if ((r->flags & USL_LIVE_F_STORE_USER) && calls_text)
		tracking(f, r->name);
	if (H->nr_nodes > 1)
		numa_view(f, r, true);
	if (!H->stats_on)
		return;
	/* The counters: the kernel tool's table, with the sheaves' rows. */
	unsigned long af = stat_of(r, "alloc_fastpath"), as = stat_of(r, "alloc_slowpath");
	unsigned long ff = stat_of(r, "free_fastpath"), fs = stat_of(r, "free_slowpath");
	unsigned long ash = stat_of(r, "alloc_cpu_sheaf"), fsh = stat_of(r, "free_cpu_sheaf");
	unsigned long ta = af + as + ash, tf = ff + fs + fsh;
	if (!ta)
		return;
#define PCT(x, t) ((t) ? (x) * 100 / (t) : 0)
	fprintf(f, "\nSlab Perf Counter       Alloc     Free %%Al %%Fr\n");
	fprintf(f, "--------------------------------------------------\n");
	fprintf(f, "Cpu sheaf            %8lu %8lu %3lu %3lu\n", ash, fsh, PCT(ash, ta), PCT(fsh, tf));
	fprintf(f, "Fastpath             %8lu %8lu %3lu %3lu\n", af, ff, PCT(af, ta), PCT(ff, tf));
	fprintf(f, "Slowpath             %8lu %8lu %3lu %3lu\n", as, fs, PCT(as, ta), PCT(fs, tf));
	unsigned long v1 = stat_of(r, "alloc_slab"), v2 = stat_of(r, "free_slab");
	fprintf(f, "Page Alloc           %8lu %8lu %3lu %3lu\n", v1, v2, PCT(v1, ta), PCT(v2, tf));
	v1 = stat_of(r, "deactivate_to_head") + stat_of(r, "deactivate_to_tail");
	v2 = stat_of(r, "free_add_partial");
	fprintf(f, "Add partial          %8lu %8lu %3lu %3lu\n", v1, v2, PCT(v1, ta), PCT(v2, tf));
	v1 = stat_of(r, "alloc_from_partial");
	v2 = stat_of(r, "free_remove_partial");
	fprintf(f, "Remove partial       %8lu %8lu %3lu %3lu\n", v1, v2, PCT(v1, ta), PCT(v2, tf));
	v1 = stat_of(r, "cpu_partial_alloc");
	v2 = stat_of(r, "cpu_partial_free");
	fprintf(f, "Cpu partial list     %8lu %8lu %3lu %3lu\n", v1, v2, PCT(v1, ta), PCT(v2, tf));
	v1 = stat_of(r, "deactivate_remote_frees");
	v2 = stat_of(r, "free_frozen");
	fprintf(f, "RemoteObj/SlabFrozen %8lu %8lu %3lu %3lu\n", v1, v2, PCT(v1, ta), PCT(v2, tf));
	fprintf(f, "Total                %8lu %8lu\n\n", ta, tf);
	if (stat_of(r, "cpuslab_flush"))
		fprintf(f, "Flushes %8lu\n", (unsigned long)stat_of(r, "cpuslab_flush"));
	unsigned long full = stat_of(r, "deactivate_full"), empty = stat_of(r, "deactivate_empty"),
	              head = stat_of(r, "deactivate_to_head"), tail = stat_of(r, "deactivate_to_tail"),
	              bypass = stat_of(r, "deactivate_bypass"), refill = stat_of(r, "alloc_refill");
	unsigned long total = full + empty + head + tail + bypass;
	if (total) {
		fprintf(f, "\nSlab Deactivation             Occurrences %%\n");
		fprintf(f, "-------------------------------------------------\n");
		fprintf(f, "Slab full                     %7lu  %3lu%%\n", full, full * 100 / total);
		fprintf(f, "Slab empty                    %7lu  %3lu%%\n", empty, empty * 100 / total);
		fprintf(f, "Moved to head of partial list %7lu  %3lu%%\n", head, head * 100 / total);
		fprintf(f, "Moved to tail of partial list %7lu  %3lu%%\n", tail, tail * 100 / total);
		fprintf(f, "Deactivation bypass           %7lu  %3lu%%\n", bypass, bypass * 100 / total);
		fprintf(f, "Refilled from foreign frees   %7lu  %3lu%%\n", refill, refill * 100 / total);
	}
	unsigned long sa = stat_of(r, "sheaf_alloc");
	if (sa || stat_of(r, "barn_get") || stat_of(r, "barn_put")) {
		fprintf(f, "\nSheaves and barn\n------------------------\n");
		fprintf(f, "Sheaves allocated/freed   %8lu %8lu\n", sa, (unsigned long)stat_of(r, "sheaf_free"));
		fprintf(f, "Objects refilled/flushed  %8lu %8lu\n", (unsigned long)stat_of(r, "sheaf_refill"),
		        (unsigned long)stat_of(r, "sheaf_flush"));
		fprintf(f, "Barn get/get failed       %8lu %8lu\n", (unsigned long)stat_of(r, "barn_get"),
		        (unsigned long)stat_of(r, "barn_get_fail"));
		fprintf(f, "Barn put/put failed       %8lu %8lu\n", (unsigned long)stat_of(r, "barn_put"),
		        (unsigned long)stat_of(r, "barn_put_fail"));
	}
	if (stat_of(r, "cmpxchg_double_fail") || stat_of(r, "cmpxchg_double_cpu_fail"))
		fprintf(f, "\nCmpxchg_double Looping\n------------------------\nLocked Cmpxchg Double redos   %lu\n"
		           "Unlocked Cmpxchg Double redos %lu\n",
		        (unsigned long)stat_of(r, "cmpxchg_double_fail"), (unsigned long)stat_of(r, "cmpxchg_double_cpu_fail"));
#undef PCT
}

static void totals(FILE *f, const struct usl_live_row *rows, unsigned int n)
{
	unsigned long caches = 0, used_caches = 0, objects = 0, partobj = 0, size = 0, loss = 0, used = 0, slabs = 0,
	              partial = 0;
	unsigned long min_obj = ~0UL, max_obj = 0, min_slabs = ~0UL, max_slabs = 0, min_size = ~0UL, max_size = 0;
	char b1[32], b2[32], b3[32], b4[32];
	for (unsigned int i = 0; i < n; i++) {
		const struct usl_live_row *r = &rows[i];
		caches++;
		if (!r->slabs || !r->objects)
			continue;
		used_caches++;
		unsigned long s = slab_bytes(r), u = (unsigned long)r->objects * r->object_size;
		objects += r->objects;
		partobj += r->objects_partial;
		size += s;
		used += u;
		loss += s > u ? s - u : 0;
		slabs += r->slabs;
		partial += r->partial;
		min_obj = r->objects < min_obj ? r->objects : min_obj;
		max_obj = r->objects > max_obj ? r->objects : max_obj;
		min_slabs = r->slabs < min_slabs ? r->slabs : min_slabs;
		max_slabs = r->slabs > max_slabs ? r->slabs : max_slabs;
		min_size = s < min_size ? s : min_size;
		max_size = s > max_size ? s : max_size;
	}
	if (!used_caches) {
		fprintf(f, "No objects\n");
		return;
	}
	unsigned long targets = 0;
	for (unsigned int i = 0; i < n; i++)
		targets += rows[i].aliases > 0;
	fprintf(f, "Slabcache Totals\n----------------\n");
	fprintf(f, "Slabcaches : %15lu   Aliases  : %11u->%-3lu  Active:    %3lu\n", caches, H->nr_aliases, targets,
	        used_caches);
	fprintf(f, "Memory used: %15s   # Loss   : %15s   MRatio:%6s%%\n", size_str(b1, 32, size), size_str(b2, 32, loss),
	        size_str(b3, 32, used ? loss * 100 / used : 0));
	fprintf(f, "# Objects  : %15s   # PartObj: %15s   ORatio:%6s%%\n", size_str(b1, 32, objects),
	        size_str(b2, 32, partobj), size_str(b3, 32, partobj * 100 / objects));
	fprintf(f, "\nPer Cache         Average              Min              Max            Total\n");
	fprintf(f, "----------------------------------------------------------------------------\n");
	fprintf(f, "#Objects  %15s  %15s  %15s  %15s\n", size_str(b1, 32, objects / used_caches), size_str(b2, 32, min_obj),
	        size_str(b3, 32, max_obj), size_str(b4, 32, objects));
	fprintf(f, "#Slabs    %15s  %15s  %15s  %15s\n", size_str(b1, 32, slabs / used_caches), size_str(b2, 32, min_slabs),
	        size_str(b3, 32, max_slabs), size_str(b4, 32, slabs));
	fprintf(f, "#PartSlab %15s  %15s  %15s  %15s\n", size_str(b1, 32, partial / used_caches), "-", "-",
	        size_str(b4, 32, partial));
	fprintf(f, "Memory    %15s  %15s  %15s  %15s\n", size_str(b1, 32, size / used_caches), size_str(b2, 32, min_size),
	        size_str(b3, 32, max_size), size_str(b4, 32, size));
	fprintf(f, "Used      %15s  %15s  %15s  %15s\n", size_str(b1, 32, used / used_caches), "-", "-",
	        size_str(b4, 32, used));
	fprintf(f, "Loss      %15s  %15s  %15s  %15s\n", size_str(b1, 32, loss / used_caches), "-", "-",
	        size_str(b4, 32, loss));
}

static void show_aliases(FILE *f, const struct live_snapshot *s)
{
	/* Grouped by the cache they merged into, as the kernel tool prints them. */
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++) {
		const struct usl_live_row *r = &s->rows[i];
		if (!wanted(r))
			continue;
		int n = 0;
		for (uint32_t k = 0; k < s->hdr.nr_aliases; k++) {
			if (strcmp(s->aliases[k].target, r->name))
				continue;
			if (n++)
				fprintf(f, " %s", s->aliases[k].name);
			else
				fprintf(f, "\n%-12s <- %s", r->name, s->aliases[k].name);
		}
		if (!n && opt.single_ref)
			fprintf(f, "\n%-12s <- %s", r->name, r->name);
	}
	fprintf(f, "\n");
}

static void table(FILE *f, struct live_snapshot *s, long max_lines)
{
	qsort(s->rows, s->hdr.nr_rows, sizeof(s->rows[0]), cmp_rows);
	long shown = 0;
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++) {
		const struct usl_live_row *r = &s->rows[i];
		if (!wanted(r))
			continue;
		if (!opt.zero && !opt.empty && !r->slabs)
			continue;
		if (opt.empty && r->slabs)
			continue;
		if (max_lines >= 0 && shown >= max_lines)
			break;
		if (!shown)
			print_header(f);
		print_row(f, r);
		shown++;
	}
}

/* ===========================================================================
 * Requests: shrink, validate, the owner summaries
 */

/* Asks the process for op on the named cache ("": every one) and waits for
 * its answer (req_result), at most 5 s. */
static int64_t request(uint32_t op, const char *name)
{
	struct usl_live_header *h = (struct usl_live_header *)(uintptr_t)map_base;
	uint32_t zero = 0, me = (uint32_t)getpid();
	for (int i = 0; !__atomic_compare_exchange_n(&h->req_claim, &zero, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	     i++) {
		if (i == 50)
			die("another uslabinfo's request to process %ld is pending", opt.pid);
		zero = 0;
		usleep(100000);
	}
	__atomic_store_n(&h->req_op, op, __ATOMIC_RELAXED);
	snprintf(h->req_name, sizeof(h->req_name), "%s", name ? name : "");
	uint64_t seq = __atomic_load_n(&h->req_seq, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&h->req_seq, seq, __ATOMIC_RELEASE);
	int i;
	for (i = 0; i < 100 && __atomic_load_n(&h->done_seq, __ATOMIC_ACQUIRE) != seq; i++)
		usleep(50000);
	bool done = __atomic_load_n(&h->done_seq, __ATOMIC_ACQUIRE) == seq;
	int64_t result = __atomic_load_n(&h->req_result, __ATOMIC_RELAXED);
	if (!done)       /* withdrawn: the process may still serve it later */
		__atomic_store_n(&h->done_seq, seq, __ATOMIC_RELEASE);
	__atomic_store_n(&h->req_claim, 0, __ATOMIC_RELEASE);
	const char *what = op == USL_LIVE_SHRINK ? "shrink" : op == USL_LIVE_VALIDATE ? "validate" : "owner summary";
	if (!done)
		die("process %ld did not take the %s request within 5 s (its decay thread serves requests within "
		    "200 ms; with USLAB_BACKGROUND=0 they wait for its next call to the allocator)", opt.pid, what);
	if (result == -1)
		die("process %ld has no cache %s", opt.pid, name && *name ? name : "(any)");
	return result;
}

static void request_shrink_validate(uint32_t op, const char *name)
{
	int64_t result = request(op, name);
	if (op == USL_LIVE_SHRINK)
		printf("process %ld: %lld cache%s shrunk\n", opt.pid, (long long)result, result == 1 ? "" : "s");
	else
		printf("process %ld: validation reported %lld problem%s (the reports are on its stderr)\n", opt.pid,
		       (long long)result, result == 1 ? "" : "s");
}

/* ===========================================================================
 * --top
 */

static volatile sig_atomic_t stop;
static struct termios saved_tty;
static bool tty_raw;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void tty_restore(void)
{
	if (tty_raw)
		tcsetattr(0, TCSANOW, &saved_tty);
	tty_raw = false;
}

static void top(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (isatty(0) && tcgetattr(0, &saved_tty) == 0) {
		struct termios raw = saved_tty;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(0, TCSANOW, &raw) == 0) {
			tty_raw = true;
			atexit(tty_restore);
		}
	}
	while (!stop) {
		struct live_snapshot s;
		struct winsize ws;
		long rows = 24;
		if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4)
			rows = ws.ws_row;
		load(&s);
		H = &s.hdr;
		page_size = s.hdr.page_size;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		double age = ((double)now.tv_sec * 1000 + (double)now.tv_nsec / 1e6 - (double)s.hdr.updated_ms) / 1000;
		unsigned long objects = 0, size = 0;
		for (uint32_t i = 0; i < s.hdr.nr_rows; i++) {
			objects += s.rows[i].objects;
			size += slab_bytes(&s.rows[i]);
		}
		char b1[32], b2[32];
		printf("\033[H\033[2J");
		printf("uslabinfo --top: process %lld (%s), %u caches, %s objects, %s in slabs; updated %.1f s ago; "
		       "q quits\n\n", (long long)s.hdr.pid, s.hdr.percpu_mode, s.hdr.nr_rows, size_str(b1, 32, objects),
		       size_str(b2, 32, size), age < 0 ? 0 : age);
		table(stdout, &s, opt.lines >= 0 && opt.lines < rows - 4 ? opt.lines : rows - 4);
		fflush(stdout);
		live_free(&s);
		struct pollfd p = { 0, POLLIN, 0 };
		int ms = (int)(opt.delay * 1000);
		if (poll(&p, 1, ms) > 0) {
			char c;
			if (read(0, &c, 1) == 1 && (c == 'q' || c == 'Q'))
				break;
		}
	}
	tty_restore();
	printf("\n");
}

/* ===========================================================================
 * main
 */

/* The options into opt: -1 to go on, else the exit status (0 after --help,
 * 2 after the usage). */
static int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "aliases", no_argument, NULL, 'a' },   { "activity", no_argument, NULL, 'A' },
		{ "Bytes", no_argument, NULL, 'B' },     { "display-active", no_argument, NULL, 'D' },
		{ "empty", no_argument, NULL, 'e' },     { "file", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },      { "inverted", no_argument, NULL, 'i' },
		{ "slabs", no_argument, NULL, 'l' },     { "Loss", no_argument, NULL, 'L' },
		{ "lines", required_argument, NULL, 'N' }, { "pid", required_argument, NULL, 'p' },
		{ "numa", no_argument, NULL, 'n' },
		{ "partial", no_argument, NULL, 'P' },   { "report", no_argument, NULL, 'r' },
		{ "shrink", no_argument, NULL, 's' },    { "Size", no_argument, NULL, 'S' },
		{ "Totals", no_argument, NULL, 'T' },    { "validate", no_argument, NULL, 'v' },
		{ "zero", no_argument, NULL, 'z' },      { "1ref", no_argument, NULL, '1' },
		{ "top", no_argument, NULL, 't' + 256 }, { "delay", required_argument, NULL, 'd' + 256 },
		{ "save", required_argument, NULL, 's' + 256 }, { NULL, 0, NULL, 0 },
	};
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "aABDef:hilLnN:p:PrsSTvz1", longopts, NULL)) != -1) {
		switch (c) {
		case 'a': opt.aliases = true; break;
		case 'A': opt.activity_sort = true; break;
		case 'B': opt.bytes = true; break;
		case 'D': opt.activity_view = true; break;
		case 'e': opt.empty = true; break;
		case 'f': opt.file = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'i': opt.inverted = true; break;
		case 'l': break;
		case 'L': opt.loss = true; break;
		case 'n': opt.numa = true; break;
		case 'N':
			opt.lines = strtol(optarg, &end, 10);
			if (*end || opt.lines < 0)
				die("-N wants a number of lines, not '%s'", optarg);
			break;
		case 'p':
			opt.pid = strtol(optarg, &end, 10);
			if (*end || opt.pid <= 0 || opt.pid > 0x7fffffff)
				die("-p wants a process id, not '%s'", optarg);
			break;
		case 'P': opt.partial_sort = true; break;
		case 'r': opt.report = true; break;
		case 's': opt.shrink = true; break;
		case 'S': opt.size = true; break;
		case 'T': opt.totals = true; break;
		case 'v': opt.validate = true; break;
		case 'z': opt.zero = true; break;
		case '1': opt.single_ref = true; break;
		case 't' + 256: opt.top = true; break;
		case 'd' + 256:
			opt.delay = strtod(optarg, &end);
			if (*end || !(opt.delay >= 0.1 && opt.delay <= 3600))
				die("--delay wants seconds from 0.1 to 3600, not '%s'", optarg);
			break;
		case 's' + 256: opt.save = optarg; break;
		default: usage(stderr); return 2;
		}
	}
	return -1;
}

/* The cache pattern (the one operand, if any) into opt.regex, and the options
 * checked against each other: -1 to go on, else the exit status. */
static int check_options(int argc, char **argv)
{
	if (optind < argc - 1) {
		usage(stderr);
		return 2;
	}
	if (optind == argc - 1) {
		int e = regcomp(&opt.regex, argv[optind], REG_EXTENDED | REG_NOSUB);
		if (e) {
			char msg[128];
			regerror(e, &opt.regex, msg, sizeof(msg));
			die("bad cache pattern '%s': %s", argv[optind], msg);
		}
		opt.have_regex = true;
	}
	if ((opt.pid > 0) == (opt.file != NULL))
		die("say which process (-p PID) or which saved file (-f FILE); --help tells more");
	if ((opt.shrink || opt.validate || opt.top) && opt.file)
		die("-s, -v and --top need a running process (-p PID), not a saved file");
	if (opt.size + opt.loss + opt.partial_sort + opt.activity_sort > 1)
		die("the sorting options (-S, -L, -P, -A) are mutually exclusive");
	return -1;
}

/* --save FILE: the snapshot as read, for -f FILE later. */
static void save(struct live_snapshot *s)
{
	size_t len;
	void *img = live_image(s, &len);
	FILE *f = img ? fopen(opt.save, "wb") : NULL;
	if (!f || fwrite(img, 1, len, f) != len || fclose(f) != 0)
		die("%s: cannot write it: %s", opt.save, strerror(errno));
	free(img);
	printf("saved %u caches of process %lld to %s\n", s->hdr.nr_rows, (long long)s->hdr.pid, opt.save);
}

/* -s, -v: one cache by name when the pattern names exactly one, else all
 * that match, one request each. */
static void shrink_validate(const struct live_snapshot *s)
{
	uint32_t op = opt.shrink ? USL_LIVE_SHRINK : USL_LIVE_VALIDATE;
	unsigned int matched = 0;
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++)
		if (wanted(&s->rows[i])) {
			if (!opt.have_regex) {
				matched = 1;
				request_shrink_validate(op, "");
				break;
			}
			request_shrink_validate(op, s->rows[i].name);
			matched++;
		}
	if (!matched)
		die("no cache of process %ld matches", opt.pid);
}

/* The caches the pattern matches: a report each with -r or when it matches
 * one (true), else nothing (false: the table is wanted). */
static bool report_matches(const struct live_snapshot *s)
{
	unsigned int matched = 0;
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++)
		matched += wanted(&s->rows[i]);
	if (opt.have_regex && !matched)
		die("no cache matches");
	if (!opt.report && !(opt.have_regex && matched == 1))
		return false;
	/* A running process's caches with U: their owner summaries, asked for
	 * once (by name when one cache is shown). */
	unsigned int tracked = 0;
	const struct usl_live_row *one = NULL;
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++)
		if (reported(&s->rows[i], matched) && (s->rows[i].flags & USL_LIVE_F_STORE_USER)) {
			tracked++;
			one = &s->rows[i];
		}
	if (tracked && map_live)
		fetch_calls(tracked == 1 ? one->name : "");
	for (uint32_t i = 0; i < s->hdr.nr_rows; i++)
		if (reported(&s->rows[i], matched))
			report(stdout, &s->rows[i]);
	return true;
}

/* What the options ask of snapshot s. */
static void show(struct live_snapshot *s)
{
	if (opt.save)
		save(s);
	else if (opt.shrink || opt.validate)
		shrink_validate(s);
	else if (opt.aliases)
		show_aliases(stdout, s);
	else if (opt.totals)
		totals(stdout, s->rows, s->hdr.nr_rows);
	else if (opt.numa && !opt.report) {
		for (uint32_t i = 0; i < s->hdr.nr_rows; i++)
			if (wanted(&s->rows[i]))
				numa_view(stdout, &s->rows[i], false);
	} else if (!report_matches(s))
		table(stdout, s, opt.lines);
}

int main(int argc, char **argv)
{
	int rc = parse_options(argc, argv);
	if (rc < 0)
		rc = check_options(argc, argv);
	if (rc >= 0)
		return rc;
	open_source();
	if (opt.top) {
		top();
		return 0;
	}
	struct live_snapshot s;
	load(&s);
	H = &s.hdr;
	page_size = s.hdr.page_size;
	show(&s);
	free(calls_text);
	live_free(&s);
	if (opt.have_regex)
		regfree(&opt.regex);
	return 0;
}
