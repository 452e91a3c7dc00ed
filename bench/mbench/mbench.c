/* mbench.c - uslab-mbench: malloc workloads of the kind mimalloc-bench runs
 * (written here), and real programs, each run under uslab (LD_PRELOAD of
 * libuslab.so), glibc, jemalloc, gperftools (Debian's libtcmalloc-minimal4,
 * peers.h's GPERFTOOLS_NOTE) and mimalloc in one invocation:
 * wall time and peak RSS, medians of interleaved runs, ratios against the
 * best peer (time) and glibc (RSS). Each table's header gives the units and
 * which way is better; a summary at the end puts uslab against the best peer
 * of each workload (from the same medians). Progress goes to stderr, the
 * tables to stdout. --data FILE also appends every median, with the least and
 * greatest run, to FILE as tab-separated lines (the benchmark report's plots,
 * scripts/bench_report.py).
 * Usage: uslab-mbench [larson|larson2|larson16|xmalloc|scratch|churn|large|programs|all] [--runs N] [--quick] [--profile] [--data FILE]
 * Not a test: timings never decide pass or fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "peers.h"
#include "progress.h"
#include "spawn.h"
#include "stats.h"
#include "../../tools/rss.h"

/* Called through pointers, so no compiler folds a malloc/free pair. */
static void *(*volatile vmalloc)(size_t) = malloc;
static void (*volatile vfree)(void *) = free;
static void *(*volatile vrealloc)(void *, size_t) = realloc;

static int quick;
#define NTHREADS 4   /* more threads than this machine's 2 CPUs */

/* ---------------------------------------------------------------- larson */
/* Each thread replaces random slots of its array (free, then malloc of a
 * random size of 16..512 bytes, first bytes written); every ROUND operations
 * it swaps arrays with the shared exchange, so its next frees are of blocks
 * another thread allocated (larson's "server" handing connections over). */
enum { LARSON_SLOTS = 1000, LARSON_ROUND = 20000 };
#define LARSON_MAX_THREADS 16
static void **larson_exchange[LARSON_MAX_THREADS];
static long larson_ops;
static int larson_threads = NTHREADS;

static void *larson_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	void **slots = calloc(LARSON_SLOTS, sizeof(void *));
	for (long op = 0; op < larson_ops; op++) {
		size_t i = xorshift64(&x) % LARSON_SLOTS;
		vfree(slots[i]);
		size_t n = 16 + xorshift64(&x) % 497;
		char *p = vmalloc(n);
		p[0] = (char)op;
		p[n - 1] = (char)id;
		slots[i] = p;
		if (op % LARSON_ROUND == LARSON_ROUND - 1)
			slots = __atomic_exchange_n(&larson_exchange[(id + 1) % larson_threads], slots, __ATOMIC_ACQ_REL);
	}
	for (size_t i = 0; i < LARSON_SLOTS; i++)
		vfree(slots[i]);
	free(slots);
	return NULL;
}

/* Prints the ns per operation (a free and a malloc) of the threaded part:
 * uslab-dbench runs it with fewer operations (MBENCH_LARSON_OPS, per thread)
 * under slow debug allocators and compares per operation. */
static void larson(int threads)
{
	pthread_t t[LARSON_MAX_THREADS];
	const char *ops = getenv("MBENCH_LARSON_OPS");
	larson_threads = threads;
	/* The same operations in all, however many threads share them. */
	larson_ops = ops && atol(ops) > 0 ? atol(ops) : (quick ? 500000 : 2500000) * NTHREADS / threads;
	double t0 = now_s();
	for (int i = 0; i < threads; i++)
		larson_exchange[i] = calloc(LARSON_SLOTS, sizeof(void *));
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, larson_thread, (void *)(intptr_t)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double ns = (now_s() - t0) * 1e9 / ((double)larson_ops * threads);
	for (int i = 0; i < threads; i++) {
		for (size_t j = 0; j < LARSON_SLOTS; j++)
			vfree(larson_exchange[i][j]);
		free(larson_exchange[i]);
	}
	printf("%.2f\n", ns);
}

/* ---------------------------------------------------------------- xmalloc */
/* Producers allocate batches of 64 blocks (16..256 bytes, written) and push
 * them on a shared stack; consumers pop batches, read and free the blocks. */
enum { XM_BATCH = 64 };
struct xm_batch {
	struct xm_batch *next;
	void *b[XM_BATCH];
};
static struct xm_batch *xm_stack;
static pthread_mutex_t xm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t xm_cond = PTHREAD_COND_INITIALIZER;
static long xm_batches, xm_done_producers;
static unsigned long xm_sum;

static void *xm_producer(void *arg)
{
	uint64_t x = 0x2545f4914f6cdd1dull * (uint64_t)((intptr_t)arg + 1);
	for (long k = 0; k < xm_batches; k++) {
		struct xm_batch *bt = vmalloc(sizeof(*bt));
		for (int i = 0; i < XM_BATCH; i++) {
			size_t n = 16 + xorshift64(&x) % 241;
			unsigned char *p = vmalloc(n);
			p[0] = (unsigned char)i;
			bt->b[i] = p;
		}
		pthread_mutex_lock(&xm_lock);
		bt->next = xm_stack;
		xm_stack = bt;
		pthread_cond_signal(&xm_cond);
		pthread_mutex_unlock(&xm_lock);
	}
	pthread_mutex_lock(&xm_lock);
	xm_done_producers++;
	pthread_cond_broadcast(&xm_cond);
	pthread_mutex_unlock(&xm_lock);
	return NULL;
}

static void *xm_consumer(void *arg)
{
	unsigned long sum = 0;
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&xm_lock);
		while (!xm_stack && xm_done_producers < NTHREADS / 2)
			pthread_cond_wait(&xm_cond, &xm_lock);
		struct xm_batch *bt = xm_stack;
		if (bt)
			xm_stack = bt->next;
		pthread_mutex_unlock(&xm_lock);
		if (!bt)
			break;
		for (int i = 0; i < XM_BATCH; i++) {
			sum += *(unsigned char *)bt->b[i];
			vfree(bt->b[i]);
		}
		vfree(bt);
	}
	__atomic_fetch_add(&xm_sum, sum, __ATOMIC_RELAXED);
	return NULL;
}

static void xmalloc_test(void)
{
	pthread_t t[NTHREADS];
	xm_batches = quick ? 10000 : 60000;
	for (int i = 0; i < NTHREADS / 2; i++)
		pthread_create(&t[i], NULL, xm_producer, (void *)(intptr_t)i);
	for (int i = NTHREADS / 2; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, xm_consumer, NULL);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
}

/* ---------------------------------------------------------------- cache-scratch */
/* The main thread allocates one small block per thread (neighbours in memory);
 * each thread frees the one it was given, then repeatedly allocates a small
 * block and writes it many times. An allocator that hands neighbouring blocks
 * to different threads makes them share cache lines (false sharing). */
static void *scratch_given[NTHREADS];
static long scratch_iters;

static void *scratch_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	vfree(scratch_given[id]);
	for (long r = 0; r < scratch_iters; r++) {
		volatile char *p = vmalloc(8);
		for (int w = 0; w < 500; w++)
			for (int k = 0; k < 8; k++)
				p[k] = (char)(p[k] + 1);
		vfree((void *)p);
	}
	return NULL;
}

static void scratch(void)
{
	pthread_t t[NTHREADS];
	scratch_iters = quick ? 2000 : 10000;
	for (int i = 0; i < NTHREADS; i++)
		scratch_given[i] = vmalloc(8);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, scratch_thread, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
}

/* ---------------------------------------------------------------- churn */
/* One thread, a working set of slots with sizes spread evenly over the
 * logarithm from 8 bytes to 64 KiB: each operation frees, allocates or
 * reallocates (grow or shrink) a random slot. At the end everything is freed;
 * the child reports its RSS before the workload, after the frees plus a short
 * stretch of light malloc/free traffic (the allocator's own decay), and after
 * malloc_trim(0). */
static size_t log_size(uint64_t *x)
{
	unsigned int sh = 3 + (unsigned int)(xorshift64(x) % 14);        /* 8 .. 64 KiB */
	return ((size_t)1 << sh) + xorshift64(x) % ((size_t)1 << sh);
}

static void churn(long *rss_before, long *rss_after, long *rss_trim)
{
	enum { SLOTS = 8000 };
	static void *slot[SLOTS];
	static size_t len[SLOTS];
	uint64_t x = 88172645463325252ull;
	long ops = quick ? 400000 : 2000000;

	memset(slot, 0, sizeof(slot));       /* the bench's own arrays count before */
	memset(len, 0, sizeof(len));
	*rss_before = rss_kib();
	for (long op = 0; op < ops; op++) {
		size_t i = xorshift64(&x) % SLOTS;
		unsigned int what = (unsigned int)(xorshift64(&x) % 4);
		if (!slot[i]) {
			len[i] = log_size(&x);
			slot[i] = vmalloc(len[i]);
			memset(slot[i], (int)i, len[i] < 64 ? len[i] : 64);
		} else if (what == 0) {
			vfree(slot[i]);
			slot[i] = NULL;
		} else {
			size_t n = what == 1 ? len[i] * 2 + 1 : len[i] / 2 + 1;
			if (n > (1u << 17))
				n = 1u << 17;
			char *q = vrealloc(slot[i], n);
			if (q) {
				slot[i] = q;
				len[i] = n;
				q[n - 1] = 1;
			}
		}
	}
	for (size_t i = 0; i < SLOTS; i++) {
		vfree(slot[i]);
		slot[i] = NULL;
	}
	double end = now_s() + 1.5;       /* 1.5 s of light traffic */
	while (now_s() < end)
		for (int j = 0; j < 10000; j++)
			vfree(vmalloc(16 + (size_t)j % 256));
	*rss_after = rss_kib();
	malloc_trim(0);
	*rss_trim = rss_kib();
}

/* large: blocks of 5 to 25 MiB (each above any allocator's size classes),
 * zero-filled and freed one after the other, 2000 of them: what a program that
 * reads files or builds images into fresh buffers does. An allocator that maps
 * and unmaps each one faults every page in again. */
static void large(void)
{
	uint64_t x = 0x2545F4914F6CDD1Dull;
	int n = quick ? 300 : 2000;
	for (int i = 0; i < n; i++) {
		size_t len = ((size_t)5 << 20) + xorshift64(&x) % ((size_t)20 << 20);
		char *p = vmalloc(len);
		if (!p)
			exit(1);
		memset(p, 0, len);
		vfree(p);
	}
}

/* ---------------------------------------------------------------- driver */
struct alloc {
	const char *name;
	const char *preload;    /* NULL: glibc */
	int present;
	const char *engine;     /* uslab's rows: USLAB_ALLOCATOR (NULL: a peer) */
	const char *sheaves;    /* uslab's rows: USLAB_SHEAVES (NULL: the default, on) */
	const char *key;        /* --data's allocator name, NULL: name (gperftools keeps "tcmalloc") */
	const char *front;      /* uslab's rows: USLAB_FRONT (NULL: the default) */
	const char *random;     /* uslab's rows: USLAB_RANDOM (NULL: the default, on) */
};
/* uslab on its default engine first (the summary's row), the peers, then
 * uslab's other rows, never counted as peers: on SLAB, and on SLUB without
 * sheaves (the cpu slab's lockless freelist as the fast path, as SLUB was
 * built before sheaves: what the default's sheaves are measured against), and
 * with USLAB_RANDOM=0 (the kernel's order, no delayed reuse: what the
 * unpredictable heap costs). */
static struct alloc allocs[] = {
	{ "uslab", USLAB_SO_PATH, 1, "slub", NULL, NULL, NULL, NULL },
	{ "glibc", NULL, 1, NULL, NULL, NULL, NULL, NULL },
	{ "jemalloc", JEMALLOC_SO, 1, NULL, NULL, NULL, NULL, NULL },
	{ "gperftools", GPERFTOOLS_SO, 1, NULL, NULL, "tcmalloc", NULL, NULL },
	{ "mimalloc", MIMALLOC_SO, 1, NULL, NULL, NULL, NULL, NULL },
	{ "uslab-slab", USLAB_SO_PATH, 1, "slab", NULL, NULL, NULL, NULL },
	{ "uslab-nosheaves", USLAB_SO_PATH, 1, "slub", "0", NULL, NULL, NULL },
	{ "uslab-owned", USLAB_SO_PATH, 1, "slub", NULL, NULL, "owned", NULL },
	{ "uslab-ordered", USLAB_SO_PATH, 1, "slub", NULL, NULL, NULL, "0" },
};
static int is_peer(int a) { return allocs[a].engine == NULL; }
#define NALLOC (int)(sizeof(allocs) / sizeof(allocs[0]))
#define MAXRUNS 21


/* --data FILE: one line per number, "uslab-mbench, workload, allocator,
 * metric, (no x), median, least, greatest, runs", tab-separated; the
 * allocator is its key (its name, but "tcmalloc" for gperftools). */
static FILE *data_file;

/* v[0..n) sorted (bench_median sorts it). */
static void data_row(const char *workload, int a, const char *metric, double med, const double *v, int n)
{
	if (data_file && n > 0)
		fprintf(data_file, "uslab-mbench\t%s\t%s\t%s\t\t%.4f\t%.4f\t%.4f\t%d\n", workload,
		        allocs[a].key ? allocs[a].key : allocs[a].name, metric, med, v[0], v[n - 1], n);
}

/* Under a table that shows gperftools: what it is. */
static void gperftools_note(void)
{
	for (int a = 0; a < NALLOC; a++)
		if (allocs[a].present && !strcmp(allocs[a].name, "gperftools"))
			printf("%s\n", GPERFTOOLS_NOTE);
}

/* Progress on stderr, so that stdout holds only the tables: one line per
 * workload, "[2/8] xmalloc: 5 runs of <allocators>; run 1 2 ... done in 3.1 s". */


/* The summary after the last table, one row per workload, filled by measure()
 * from the medians its table prints: uslab's time and peak RSS over the best
 * peer's (the peer with the least of each). A peer index of -1: no peer ran,
 * -2: uslab did not. */
struct sum_row {
	const char *name;
	double time, rss;    /* uslab / best peer */
	int tpeer, rpeer;
};
#define MAXSUM 24   /* more than the workloads and programs */
static struct sum_row sums[MAXSUM];
static int nsums;

/* The medians of the last workload measured (the real programs' geomean). */
static int last_ok[NALLOC];
static double last_mt[NALLOC], last_mr[NALLOC];

/* --profile: every run under perf record (software clock), then the share of
 * its samples in the allocator's own code and in the kernel, so the time an
 * allocator costs a program is seen apart from the program's own time and the
 * machine's noise (which moves all of a run's samples together). Times of a
 * profiled run include perf's overhead: compare them only among themselves. */
static int profile;
static char perf_file[64];
static double prof_alloc[NALLOC][MAXRUNS], prof_kernel[NALLOC][MAXRUNS];
static double last_alloc_share[NALLOC];   /* the last workload's medians (the programs' table) */
#define PROF_TOP 8
static char prof_top[PROF_TOP][96];   /* uslab's functions by samples, its last run */

/* glibc's allocator is part of libc.so.6: its functions by name. */
static int glibc_malloc_sym(const char *sym)
{
	static const char *const parts[] = { "malloc", "free", "calloc", "realloc", "memalign", "tcache",
		                             "consolidate", "unlink_chunk", "_int_", "systrim", "arena" };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (strstr(sym, parts[i]))
			return 1;
	return 0;
}

/* The samples of the profiled run of allocator a (perf_file), into its
 * shares (percent); for uslab, its top functions too. 0 if perf gave none. */
static int profile_read(int a, double *alloc_pct, double *kernel_pct)
{
	char cmd[256], stem[64] = "", line[512];
	snprintf(cmd, sizeof(cmd), "perf report -i %s -n --stdio -q --sort dso,sym 2>/dev/null", perf_file);
	if (allocs[a].preload) {        /* the library's name up to ".so" */
		const char *b = strrchr(allocs[a].preload, '/');
		snprintf(stem, sizeof(stem), "%s", b ? b + 1 : allocs[a].preload);
		char *so = strstr(stem, ".so");
		if (so)
			so[3] = 0;
	}
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	double total = 0, mine = 0, kernel = 0;
	int top = 0;
	while (fgets(line, sizeof(line), f)) {
		double n;
		char dso[256], kind[8], sym[256];
		if (sscanf(line, " %*f%% %lf %255s %7s %255[^\n]", &n, dso, kind, sym) != 4)
			continue;
		total += n;
		if (!strcmp(dso, "[kernel.kallsyms]"))
			kernel += n;
		else if (stem[0] ? !strncmp(dso, stem, strlen(stem)) : !strcmp(dso, "libc.so.6") && glibc_malloc_sym(sym)) {
			mine += n;
			if (a == 0 && top < PROF_TOP)
				snprintf(prof_top[top++], sizeof(prof_top[0]), "%.80s %.0f", sym, n);
		}
	}
	pclose(f);
	if (a == 0)
		for (int i = top; i < PROF_TOP; i++)
			prof_top[i][0] = 0;
	unlink(perf_file);
	if (total <= 0)
		return 0;
	*alloc_pct = 100 * mine / total;
	*kernel_pct = 100 * kernel / total;
	return 1;
}

static void sum_cell(double r, int peer, const char *more, const char *less)
{
	char w[32], v[48];
	if (peer < 0) {
		printf("  %-10s %-10s %-22s", "-", "-", "no comparison");
		return;
	}
	if (r < 0.995 || r >= 1.005)
		snprintf(v, sizeof(v), "%s, %s", r < 1 ? "leads" : "trails", in_words(w, sizeof(w), r, more, less));
	else
		snprintf(v, sizeof(v), "even");
	printf("  %10.2f %-10s %-22s", r, allocs[peer].name, v);
}

static void print_summary(void)
{
	if (!nsums)
		return;
	printf("\n== summary: uslab against the best peer of each workload (the fastest, and the one with the least "
	       "peak RSS); uslab/best = uslab's median / the best peer's median, lower is better: below 1.00 uslab "
	       "leads, above 1.00 it trails ==\n");
	printf("%-14s  %10s %-10s %-22s  %10s %-10s %-22s\n", "", "time", "", "", "peak RSS", "", "");
	printf("%-14s  %10s %-10s %-22s  %10s %-10s %-22s\n", "workload", "uslab/best", "best peer", "uslab",
	       "uslab/best", "best peer", "uslab");
	for (int i = 0; i < nsums; i++) {
		printf("%-14s", sums[i].name);
		if (sums[i].tpeer == -2) {
			printf("  uslab FAILED\n");
			continue;
		}
		sum_cell(sums[i].time, sums[i].tpeer, "slower", "faster");
		sum_cell(sums[i].rss, sums[i].rpeer, "more", "less");
		printf("\n");
	}
	gperftools_note();
}

/* The child's side of run(): allocator a's environment, env added, then
 * argv (under perf record with --profile), its stdout into outfile if any. */
struct run_exec {
	int a;
	char *const *argv;
	const char *env, *outfile;
};

static void exec_run(void *p)
{
	const struct run_exec *x = p;
	const struct alloc *al = &allocs[x->a];
	if (x->outfile) {
		FILE *f = freopen(x->outfile, "w", stdout);
		(void)f;
	}
	env_set("LD_PRELOAD", al->preload);
	env_set("USLAB_ALLOCATOR", al->engine);
	env_set("USLAB_FRONT", al->front);
	env_set("USLAB_SHEAVES", al->sheaves);
	env_set("USLAB_RANDOM", al->random);
	if (x->env)
		putenv((char *)x->env);
	if (profile) {
		enum { PERF_ARGS = 10, PERF_ARGV = 24 };   /* perf's own words; the last stays NULL */
		char *pargv[PERF_ARGV] = { (char *)"perf", (char *)"record", (char *)"-q", (char *)"-e", (char *)"cpu-clock",
			                   (char *)"-F", (char *)"2000", (char *)"-o", perf_file, (char *)"--" };
		for (int i = 0; x->argv[i] && PERF_ARGS + i < PERF_ARGV - 1; i++)
			pargv[PERF_ARGS + i] = x->argv[i];
		execvp(pargv[0], pargv);
	} else {
		execvp(x->argv[0], x->argv);
	}
}

/* Run argv under allocator a, with env ("NAME=VALUE", or NULL) added: wall
 * seconds, peak RSS (KiB: the largest process of the run, as wait4 gives it),
 * and up to 3 numbers the child printed. Returns the count of numbers read, -1
 * on failure. */
static int run(int a, char *const argv[], const char *env, double *secs, long *maxrss, long vals[3],
               const char *outfile)
{
	struct run_exec x = { a, argv, env, outfile };
	struct spawn_result r;
	char buf[256];
	double t0 = now_s();
	if (spawn_capture(exec_run, &x, buf, sizeof(buf), &r) < 0)
		return -1;
	*secs = now_s() - t0;
	*maxrss = r.ru.ru_maxrss;
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
		progress_break();
		fprintf(stderr, "uslab-mbench: %s under %s failed (status %d)\n", argv[0], allocs[a].name, r.status);
		return -1;
	}
	return sscanf(buf, "%ld %ld %ld", &vals[0], &vals[1], &vals[2]) > 0 ? 3 : 0;
}


/* The summary row of a workload: uslab (allocs[0]) against the peers with the
 * least time and the least peak RSS, from the medians mt and mr. */
static void summary_add(const char *name, const int *ok, const double *mt, const double *mr)
{
	if (nsums == MAXSUM)
		return;
	struct sum_row *s = &sums[nsums++];
	s->name = name;
	s->tpeer = s->rpeer = ok[0] ? -1 : -2;
	for (int a = 1; a < NALLOC && ok[0]; a++) {
		if (!is_peer(a))
			continue;
		if (ok[a] && mt[a] > 0 && (s->tpeer < 0 || mt[a] < mt[s->tpeer]))
			s->tpeer = a;
		if (ok[a] && mr[a] > 0 && (s->rpeer < 0 || mr[a] < mr[s->rpeer]))
			s->rpeer = a;
	}
	s->time = s->tpeer >= 0 ? mt[0] / mt[s->tpeer] : 0;
	s->rss = s->rpeer >= 0 ? mr[0] / mr[s->rpeer] : 0;
}

/* --profile: the shares of each allocator's runs (medians), and uslab's
 * functions by samples in its last run. */
static void profile_table(const int *ok)
{
	printf("samples (perf record -e cpu-clock at 2000 Hz; the times above include perf's overhead): the share "
	       "in the allocator's own code (its library; glibc's: its malloc functions in libc) and in the "
	       "kernel, medians of the runs' shares; lower is better\n");
	printf("%-15s %12s %9s\n", "allocator", "allocator %", "kernel %");
	for (int a = 0; a < NALLOC; a++) {
		last_alloc_share[a] = 0;
		if (!allocs[a].present || !ok[a])
			continue;
		last_alloc_share[a] = bench_median(prof_alloc[a], ok[a]);
		printf("%-15s %12.1f %9.1f\n", allocs[a].name, last_alloc_share[a], bench_median(prof_kernel[a], ok[a]));
	}
	printf("uslab's functions by samples (its last run):");
	for (int i = 0; i < PROF_TOP && prof_top[i][0]; i++)
		printf("%s %s", i ? ";" : "", prof_top[i]);
	printf("\n");
}

/* One workload (a child mode of this program, or an external command): runs
 * interleaved over the allocators, then its table; name: its short name
 * (progress, summary). */
static void measure(const char *name, const char *title, char *const argv[], const char *env, int runs,
                    int with_rss_vals, const char *outfile)
{
	double t[NALLOC][MAXRUNS], r[NALLOC][MAXRUNS], v[NALLOC][3][MAXRUNS], q[NALLOC][2][MAXRUNS];
	int ok[NALLOC] = { 0 };
	const char *names[NALLOC];
	for (int a = 0; a < NALLOC; a++)
		names[a] = allocs[a].present ? allocs[a].name : NULL;
	progress_begin(name, runs, names, NALLOC);
	for (int k = 0; k < runs; k++) {
		progress_run(k);
		for (int a = 0; a < NALLOC; a++) {
			if (!allocs[a].present)
				continue;
			double secs;
			long maxrss, vals[3] = { 0, 0, 0 };
			if (run(a, argv, env, &secs, &maxrss, vals, outfile) < 0)
				continue;
			if (profile && !profile_read(a, &prof_alloc[a][ok[a]], &prof_kernel[a][ok[a]]))
				continue;
			t[a][ok[a]] = secs;
			r[a][ok[a]] = (double)maxrss / 1024.0;
			for (int j = 0; j < 3; j++)
				v[a][j][ok[a]] = (double)vals[j] / 1024.0;
			/* after/before within each run: the libraries' resident pages
			 * vary from run to run, and count in both */
			for (int j = 0; j < 2; j++)
				q[a][j][ok[a]] = vals[0] > 0 ? (double)vals[j + 1] / (double)vals[0] : 0;
			ok[a]++;
		}
	}
	progress_end();
	double mt[NALLOC], mr[NALLOC], mv[NALLOC][3], mq[NALLOC][2], best = 0;
	for (int a = 0; a < NALLOC; a++) {
		mt[a] = ok[a] ? bench_median(t[a], ok[a]) : 0;
		mr[a] = ok[a] ? bench_median(r[a], ok[a]) : 0;
		for (int j = 0; j < 3; j++)
			mv[a][j] = ok[a] ? bench_median(v[a][j], ok[a]) : 0;
		for (int j = 0; j < 2; j++)
			mq[a][j] = ok[a] ? bench_median(q[a][j], ok[a]) : 0;
		if (is_peer(a) && ok[a] && (best == 0 || mt[a] < best))
			best = mt[a];
	}
	printf("\n== %s; wall time (s) and peak RSS (MB), lower is better; median of %d run%s ==\n", title, runs,
	       runs == 1 ? "" : "s");
	printf("time s: the median run, (min..max): the fastest and the slowest run; /best: time / the best peer's "
	       "time; /glibc: peak RSS / glibc's (below 1.00: faster, or less memory; above 1.00: slower, or more)\n");
	if (with_rss_vals)
		printf("RSS before (the workload), after free+1.5s (all freed, then 1.5 s of light traffic), after trim "
		       "(malloc_trim(0)): MB, lower is better; /before: that RSS / RSS before, the median of each run's "
		       "own ratio (1.00: all given back)\n");
	printf("%-15s %9s %-16s %8s %11s %9s", "allocator", "time s", "(min..max)", "/best", "peak RSS MB", "/glibc");
	if (with_rss_vals)
		printf(" %12s %15s %7s %11s %7s", "RSS before", "after free+1.5s", "/before", "after trim", "/before");
	printf("\n");
	for (int a = 0; a < NALLOC; a++) {
		if (!allocs[a].present)
			continue;
		if (!ok[a]) {
			printf("%-15s FAILED\n", allocs[a].name);
			continue;
		}
		char range[48];
		snprintf(range, sizeof(range), "(%.3f..%.3f)", t[a][0], t[a][ok[a] - 1]);   /* sorted by bench_median */
		printf("%-15s %9.3f %-16s %8.2f %11.1f %9.2f", allocs[a].name, mt[a], range, best > 0 ? mt[a] / best : 0,
		       mr[a], mr[1] > 0 ? mr[a] / mr[1] : 0);
		if (with_rss_vals)
			printf(" %12.2f %15.2f %7.2f %11.2f %7.2f", mv[a][0], mv[a][1], mq[a][0], mv[a][2], mq[a][1]);
		printf("\n");
		data_row(name, a, "time s", mt[a], t[a], ok[a]);
		data_row(name, a, "peak RSS MB", mr[a], r[a], ok[a]);
		if (with_rss_vals) {
			data_row(name, a, "RSS before MB", mv[a][0], v[a][0], ok[a]);
			data_row(name, a, "RSS after free+1.5s MB", mv[a][1], v[a][1], ok[a]);
			data_row(name, a, "RSS after trim MB", mv[a][2], v[a][2], ok[a]);
		}
	}
	gperftools_note();
	if (profile)
		profile_table(ok);
	fflush(stdout);
	summary_add(name, ok, mt, mr);
	for (int a = 0; a < NALLOC; a++) {
		last_ok[a] = ok[a];
		last_mt[a] = mt[a];
		last_mr[a] = mr[a];
	}
}

static int child(const char *w)
{
	long b = 0, f = 0, tr = 0;
	if (!strcmp(w, "larson"))
		larson(NTHREADS);
	else if (!strcmp(w, "larson2"))
		larson(2);
	else if (!strcmp(w, "larson16"))
		larson(16);
	else if (!strcmp(w, "xmalloc"))
		xmalloc_test();
	else if (!strcmp(w, "scratch"))
		scratch();
	else if (!strcmp(w, "large"))
		large();
	else if (!strcmp(w, "churn")) {
		churn(&b, &f, &tr);
		printf("%ld %ld %ld\n", b, f, tr);
	} else
		return 2;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: uslab-mbench [larson|larson2|larson16|xmalloc|scratch|churn|large|programs|all] [--runs N] [--quick] "
	           "[--profile] [--data FILE] [--alloc LIST]\n"
	           "  --runs N     runs per allocator and workload, 1..%d (default 5); medians are printed\n"
	           "  --quick      smaller workloads\n"
	           "  --profile    every run under perf record: the share of its samples in the allocator and in the\n"
	           "               kernel (needs perf; times then include perf's overhead)\n"
	           "  --data FILE  also append every median, with the least and greatest run, to FILE (tab-separated:\n"
	           "               program, workload, allocator, metric, x (empty), median, min, max, runs;\n"
	           "               gperftools' rows have the allocator key tcmalloc)\n"
	           "  --alloc LIST only these rows, names separated by commas (uslab's is always run), e.g.\n"
	           "               uslab,uslab-ordered: the unpredictable heap against the kernel's order, paired\n",
	           MAXRUNS);
}

/* What every table has in common, printed once at the top. */
static void how_to_read(FILE *f)
{
	fprintf(f, "How to read: each number is a median over runs (a process per allocator per run); wall time (s) "
	           "and memory (MB): lower is better. A ratio a/b below 1.00 means a is faster (or uses less memory) "
	           "than b, above 1.00 slower (or more). The summary at the end compares uslab with the best peer of "
	           "each workload. Progress goes to stderr.\n");
}

/* ------------------------------------------------------------- programs */
/* Real programs from Debian, each doing a real job written for this bench (no
 * loop around malloc), under every allocator through LD_PRELOAD; then the
 * geomean over them of each allocator's time and peak RSS over glibc's. A
 * program that is not installed is skipped, and said so. */
struct program {
	const char *name, *title, *env;
	const char *needs;      /* the command that must be installed */
	char *argv[8];
};

static void programs_geomean(double lt[][NALLOC], double lr[][NALLOC], int np)
{
	printf("\n== real programs: geomean over the %d programs above of each allocator's median time and peak RSS "
	       "over glibc's (1.00: as glibc; lower is better) ==\n", np);
	printf("%-15s %10s %10s %8s\n", "allocator", "time", "peak RSS", "programs");
	double best = 0;
	double gt[NALLOC], gr[NALLOC];
	int gn[NALLOC];
	for (int a = 0; a < NALLOC; a++) {
		double st = 0, sr = 0;
		gn[a] = 0;
		for (int i = 0; i < np; i++)
			if (lt[i][a] > 0 && lt[i][1] > 0 && lr[i][a] > 0 && lr[i][1] > 0) {
				st += log(lt[i][a] / lt[i][1]);
				sr += log(lr[i][a] / lr[i][1]);
				gn[a]++;
			}
		gt[a] = gn[a] ? exp(st / gn[a]) : 0;
		gr[a] = gn[a] ? exp(sr / gn[a]) : 0;
		if (is_peer(a) && gn[a] == np && (best == 0 || gt[a] < best))
			best = gt[a];
	}
	for (int a = 0; a < NALLOC; a++) {
		if (!allocs[a].present)
			continue;
		printf("%-15s %10.3f %10.3f %5d/%d%s\n", allocs[a].name, gt[a], gr[a], gn[a], np,
		       gn[a] < np ? "  (not every program ran: not comparable)" : "");
		if (gn[a]) {
			data_row("programs geomean", a, "time /glibc", gt[a], &gt[a], 1);
			data_row("programs geomean", a, "peak RSS /glibc", gr[a], &gr[a], 1);
		}
	}
	if (best > 0 && gn[0] == np)
		printf("uslab's geomean time over the best peer's: %.3f (%s)\n", gt[0] / best,
		       gt[0] <= best ? "uslab leads" : "uslab trails");
	gperftools_note();
}

static int programs(int runs)
{
	char dir[] = "/tmp/uslab-mbench-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char script[8192], lines[4600], out[4200], cc[8192], requests[16];
	snprintf(lines, sizeof(lines), "%s/lines.txt", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(script, sizeof(script), "seq 1 %d | awk '{ print ($1 * 7919) %% 1000003, \"line\", $1 }' > %s",
	         quick ? 200000 : 1000000, lines);
	if (system(script) != 0)
		return 1;
	/* --quick: a quarter of each program's work (as in the titles). */
	int keys = quick ? 150000 : 600000, rows = quick ? 100000 : 400000;
	char pys[512], sqs[512], pls[256], t_py[96], t_pm[112], t_sq[96], t_pl[96], t_cc[96], t_rd[160];
	snprintf(pys, sizeof(pys), "d = {i: str(i) * (i %% 9) for i in range(%d)}\n"
	                           "l = sorted(d.values(), key=len)\n"
	                           "s = set(x[:3] for x in l)\n"
	                           "import json; j = json.loads(json.dumps([{'k': k, 'v': v} for k, v in "
	                           "list(d.items())[:%d]]))\n"
	                           "print(len(l), len(s), len(j))", keys, keys / 6);
	snprintf(sqs, sizeof(sqs), "create table t(a integer primary key, b text, c int);"
	                           "with recursive n(x) as (select 1 union all select x + 1 from n where x < %d)"
	                           " insert into t select x, hex(randomblob(16)) || x, x %% 97 from n;"
	                           "create index ic on t(c); create index ib on t(b);"
	                           "select c, count(*) from t where c < 3 group by c;", rows);
	snprintf(pls, sizeof(pls), "my %%h; $h{\"k$_\"} = \"v\" x ($_ %% 50) for 1..%d;"
	                           " my @s = sort keys %%h; print scalar(@s), \"\\n\"", keys);
	/* gcc: -O2 on some of uslab's own sources (cc1 and as run preloaded too). */
	snprintf(cc, sizeof(cc), "cd %s && exec gcc -O2 -c -I%s/include -I%s/src %s/src/slub/slub.c "
	                         "%s/src/common/free.c%s", dir, USLAB_SOURCE_DIR, USLAB_SOURCE_DIR,
	         USLAB_SOURCE_DIR, USLAB_SOURCE_DIR,
	         quick ? "" : " " USLAB_SOURCE_DIR "/src/percpu/barn.c " USLAB_SOURCE_DIR "/src/slab/slab.c "
	                      USLAB_SOURCE_DIR "/src/override/malloc.c " USLAB_SOURCE_DIR "/src/stats/attr.c");
	snprintf(requests, sizeof(requests), "%d", quick ? 20000 : 100000);
	snprintf(t_py, sizeof(t_py), "python3: dicts (%dk keys), sorting, sets, json", keys / 1000);
	snprintf(t_pm, sizeof(t_pm), "python3 with its object allocator off (PYTHONMALLOC=malloc): the same job");
	snprintf(t_sq, sizeof(t_sq), "sqlite3: %dk inserts, two indexes, a query", rows / 1000);
	snprintf(t_pl, sizeof(t_pl), "perl: a hash of %dk keys, sorted", keys / 1000);
	snprintf(t_cc, sizeof(t_cc), "gcc -O2 -c of %d of uslab's sources", quick ? 2 : 6);
	snprintf(t_rd, sizeof(t_rd), "redis-server under redis-benchmark on loopback: 13 commands x %s requests, "
	         "50 clients, pipelined by 16, 1M keys", requests);
	struct program progs[] = {
		{ "python3", t_py, NULL, "/usr/bin/python3", { (char *)"/usr/bin/python3", (char *)"-c", pys } },
		{ "python3-malloc", t_pm, "PYTHONMALLOC=malloc", "/usr/bin/python3",
		  { (char *)"/usr/bin/python3", (char *)"-c", pys } },
		{ "perl", t_pl, NULL, "perl", { (char *)"perl", (char *)"-e", pls } },
		{ "sqlite3", t_sq, NULL, "sqlite3", { (char *)"sqlite3", (char *)":memory:", sqs } },
		{ "gcc", t_cc, NULL, "gcc", { (char *)"/bin/sh", (char *)"-c", cc } },
		{ "redis", t_rd, NULL, "redis-server",
		  { (char *)"bash", (char *)USLAB_SOURCE_DIR "/bench/redis/redis_load.sh", (char *)GLIBC_SHIM_PATH,
		    requests } },
		{ "sort", quick ? "sort -n of a file of 200k lines" : "sort -n of a file of 1M lines", NULL, "sort",
		  { (char *)"sort", (char *)"-n", lines } },
	};
	enum { NPROG = sizeof(progs) / sizeof(progs[0]) };
	double lt[NPROG][NALLOC], lr[NPROG][NALLOC], ls[NPROG][NALLOC];
	const char *names[NPROG];
	int np = 0;
	for (int i = 0; i < NPROG; i++) {
		snprintf(script, sizeof(script), "command -v %s >/dev/null%s", progs[i].needs,
		         !strcmp(progs[i].name, "redis") ? " && command -v redis-benchmark >/dev/null && "
		                                           "command -v taskset >/dev/null" : "");
		if (system(script) != 0) {
			progress_begin(progs[i].name, 0, NULL, 0);
			progress_break();
			fprintf(stderr, "uslab-mbench: %s not installed (bash scripts/deps.sh bench); %s skipped\n",
			        progs[i].needs, progs[i].name);
			progress_end();
			continue;
		}
		measure(progs[i].name, progs[i].title, progs[i].argv, progs[i].env, runs, 0,
		        !strcmp(progs[i].name, "redis") ? NULL : out);
		for (int a = 0; a < NALLOC; a++) {
			lt[np][a] = last_ok[a] ? last_mt[a] : 0;
			lr[np][a] = last_ok[a] ? last_mr[a] : 0;
			ls[np][a] = last_ok[a] ? last_alloc_share[a] : -1;
		}
		names[np++] = progs[i].name;
	}
	if (np)
		programs_geomean(lt, lr, np);
	if (np && profile) {
		printf("\n== real programs: the share of each run's samples in the allocator's own code (perf "
		       "record -e cpu-clock; glibc: its malloc functions in libc), medians of the runs; lower is "
		       "better (redis: the samples of redis-benchmark, not preloaded, count in the total) ==\n");
		printf("%-15s", "program");
		for (int a = 0; a < NALLOC; a++)
			if (allocs[a].present)
				printf(" %15s", allocs[a].name);
		printf("\n");
		for (int i = 0; i < np; i++) {
			printf("%-15s", names[i]);
			for (int a = 0; a < NALLOC; a++) {
				if (!allocs[a].present)
					continue;
				if (ls[i][a] >= 0)
					printf(" %14.1f%%", ls[i][a]);
				else
					printf(" %15s", "-");
			}
			printf("\n");
		}
	}
	snprintf(script, sizeof(script), "rm -rf %s", dir);
	return system(script) != 0;
}

/* --alloc LIST: the rows named in LIST (commas between), uslab's always;
 * false, with a message, for a name no row has. */
static bool select_allocs(const char *list)
{
	int want[NALLOC] = { 1 };
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		int found = 0;
		for (int a = 0; a < NALLOC; a++)
			if (strlen(allocs[a].name) == n && !strncmp(allocs[a].name, p, n))
				want[a] = found = 1;
		if (!found) {
			fprintf(stderr, "uslab-mbench: --alloc: no row named '%.*s'\n", (int)n, p);
			return false;
		}
		p += n + (p[n] == ',');
	}
	for (int a = 0; a < NALLOC; a++)
		if (!want[a])
			allocs[a].present = 0;
	return true;
}

int main(int argc, char **argv)
{
	const char *what = "all";
	int runs = 5;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--child") && i + 1 < argc) {
			quick = getenv("MBENCH_QUICK") != NULL;
			return child(argv[i + 1]);
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else if (!strcmp(argv[i], "--profile")) {
			profile = 1;
		} else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
			if (!(data_file = fopen(argv[++i], "ae"))) {
				fprintf(stderr, "uslab-mbench: %s: %s\n", argv[i], strerror(errno));
				return 2;
			}
			setvbuf(data_file, NULL, _IOLBF, 0);
		} else if (!strcmp(argv[i], "--alloc") && i + 1 < argc) {
			if (!select_allocs(argv[++i]))
				return 2;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			how_to_read(stdout);
			return 0;
		} else if (argv[i][0] != '-') {
			what = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	static const char *const names[] = { "larson", "larson2", "larson16", "xmalloc", "scratch", "churn", "large",
		                                     "programs", "all" };
	int known = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		known |= !strcmp(what, names[i]);
	if (!known) {
		usage(stderr);
		return 2;
	}
	if (runs < 1 || runs > MAXRUNS)
		runs = 5;
	if (profile && system("perf --version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "uslab-mbench: --profile needs perf (Debian: linux-perf)\n");
		return 2;
	}
	snprintf(perf_file, sizeof(perf_file), "/tmp/uslab-mbench-%d.perf", (int)getpid());
	if (quick)
		setenv("MBENCH_QUICK", "1", 1);
	char exe[4096];
	if (self_exe(exe, sizeof(exe)) < 0)
		return 1;
	for (int a = 0; a < NALLOC; a++)
		if (allocs[a].present && allocs[a].preload && access(allocs[a].preload, R_OK) != 0) {
			allocs[a].present = 0;
			fprintf(stderr, "uslab-mbench: %s not found (%s); its rows are skipped\n", allocs[a].name,
			        allocs[a].preload);
		}
	if (!allocs[0].present)
		return 1;
	printf("uslab-mbench: %d threads where threaded, %s sizes; uslab = LD_PRELOAD=%s\n", NTHREADS,
	       quick ? "quick" : "full", USLAB_SO_PATH);
	gperftools_note();
	how_to_read(stdout);
	int all = !strcmp(what, "all");
	/* Progress steps: the seven workloads and the seven programs. */
	progress_total(all ? 14 : !strcmp(what, "programs") ? 7 : 1);
	struct {
		const char *name, *title;
	} w[] = {
		{ "larson", "larson-like: 4 threads replace random slots (16..512 B), arrays handed between threads" },
		{ "larson2", "larson-like with 2 threads (one per CPU), the same operations in all" },
		{ "larson16", "larson-like with 16 threads on this machine's CPUs, the same operations in all" },
		{ "xmalloc", "xmalloc-like: 2 producer threads, 2 consumer threads (16..256 B, batches of 64)" },
		{ "scratch", "cache-scratch: 4 threads free a neighbour block, then allocate and write 8-byte blocks" },
		{ "churn", "churn: 1 thread, 8000 slots, 8 B..64 KiB, malloc/free/realloc grow and shrink" },
		{ "large", "large: 2000 blocks of 5..25 MiB, each zero-filled and freed (300 in quick mode)" },
	};
	for (unsigned i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		if (!all && strcmp(what, w[i].name))
			continue;
		char *cargv[] = { exe, (char *)"--child", (char *)w[i].name, NULL };
		measure(w[i].name, w[i].title, cargv, NULL, runs, !strcmp(w[i].name, "churn"), NULL);
	}
	if (all || !strcmp(what, "programs"))
		if (programs(runs) != 0)
			return 1;
	print_summary();
	return 0;
}
