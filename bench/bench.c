/* bench.c - uslab-bench: the seed benchmarks, side by side with the peers.
 * Each scenario runs in child processes (this same program with --child), one per
 * allocator: uslab (kmem_cache_*) with sheaves and with the old cpu-slab fast path
 * (USLAB_SHEAVES=1/0), each in rseq and locked mode (USLAB_RSEQ=0), and
 * malloc/free from glibc, jemalloc, tcmalloc and mimalloc (loaded with
 * LD_PRELOAD). Runs are interleaved; the table shows medians and ratios against
 * the peers of the same run. A child that crashes or prints the wrong number of
 * values is reported on stderr and in the table, never read as a zero.
 * Usage: uslab-bench [single|nalloc|bulk|remote|random-free|all] [--runs N] [--quick]
 * Not a test: timings never decide pass or fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "uslab.h"

/* ---------------------------------------------------------------- helpers */

static inline uint64_t ticks(void) { return __rdtsc(); }
static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
#define ESCAPE(p) __asm__ __volatile__("" : : "r"(p) : "memory")

static int use_uslab;              /* child: kmem_cache_* instead of malloc */
static struct kmem_cache *cache;

typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);
/* Called through pointers so the compiler cannot pair up and drop malloc/free. */
static alloc_fn volatile sys_malloc = malloc;
static free_fn volatile sys_free = free;

/* A uslab child first prints "uslab <per-CPU mode> <sheaf capacity>" for its first
 * cache, before any number: the parent checks it against the variant's
 * environment, so a row labelled "sheaves (rseq)" is proven to have run that path. */
static void report_path(struct kmem_cache *c)
{
	static int done;
	if (done++)
		return;
	printf("uslab %s %u\n", uslab_percpu_mode(), uslab_sheaf_capacity(c));
}

/* ---------------------------------------------------------------- scenarios */

/* single: one 256-byte alloc+free pair, repeated in BATCHES batches; prints the
 * median batch's ns and ticks per pair (a long loop's mean mostly measures the
 * other tenants of a shared machine). */
#define BATCHES 21
static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void child_single(long iters)
{
	double ns[BATCHES], tk[BATCHES];
	long per = iters / BATCHES;
	alloc_fn m = sys_malloc;
	free_fn f = sys_free;

	if (use_uslab) {
		cache = kmem_cache_create("bench-256", 256, 0, 0, NULL);
		report_path(cache);
		for (int i = 0; i < 1000; i++)
			kmem_cache_free(cache, kmem_cache_alloc(cache, GFP_KERNEL));
	} else {
		for (int i = 0; i < 1000; i++)
			f(m(256));
	}
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		uint64_t k0 = ticks();
		if (use_uslab) {
			for (long i = 0; i < per; i++) {
				void *p = kmem_cache_alloc(cache, GFP_KERNEL);
				ESCAPE(p);
				kmem_cache_free(cache, p);
			}
		} else {
			for (long i = 0; i < per; i++) {
				void *p = m(256);
				ESCAPE(p);
				f(p);
			}
		}
		tk[b] = (double)(ticks() - k0) / (double)per;
		ns[b] = (now_ns() - t0) / (double)per;
	}
	qsort(ns, BATCHES, sizeof(double), cmp_d);
	qsort(tk, BATCHES, sizeof(double), cmp_d);
	printf("%.3f %.2f\n", ns[BATCHES / 2], tk[BATCHES / 2]);
}

/* nalloc (seed 003): for each size, N allocations each timed, then N frees each
 * timed; average ticks per alloc and per free. */
static const unsigned int nalloc_sizes[] = { 32, 64, 128, 256, 512, 1024, 2048, 4096 };
#define NSIZES (sizeof(nalloc_sizes) / sizeof(nalloc_sizes[0]))

static void child_nalloc(long n, int reps)
{
	void **v = calloc((size_t)n, sizeof(void *));
	for (unsigned s = 0; s < NSIZES; s++) {
		unsigned int size = nalloc_sizes[s];
		uint64_t ta = 0, tf = 0;
		struct kmem_cache *c = NULL;
		if (use_uslab) {
			char name[32];
			snprintf(name, sizeof(name), "nalloc-%u", size);
			c = kmem_cache_create(name, size, 0, 0, NULL);
			report_path(c);
		}
		for (int r = 0; r < reps; r++) {
			for (long i = 0; i < n; i++) {
				uint64_t a = ticks();
				v[i] = use_uslab ? kmem_cache_alloc(c, GFP_KERNEL) : sys_malloc(size);
				ta += ticks() - a;
				ESCAPE(v[i]);
			}
			for (long i = 0; i < n; i++) {
				uint64_t a = ticks();
				if (use_uslab)
					kmem_cache_free(c, v[i]);
				else
					sys_free(v[i]);
				tf += ticks() - a;
			}
		}
		printf("%.1f %.1f ", (double)ta / (double)(n * reps), (double)tf / (double)(n * reps));
	}
	printf("\n");
	free(v);
}

/* remote: one thread allocates, another frees, through a ring. ns per object. */
#define RING_SZ 1024
static void *volatile ring[RING_SZ];
static long remote_n;

static void *remote_consumer(void *arg)
{
	(void)arg;
	long got = 0;
	unsigned idx = 0;
	while (got < remote_n) {
		void *p = __atomic_load_n(&ring[idx], __ATOMIC_ACQUIRE);
		if (!p) {
			__builtin_ia32_pause();
			continue;
		}
		__atomic_store_n(&ring[idx], NULL, __ATOMIC_RELAXED);
		idx = (idx + 1) & (RING_SZ - 1);
		if (use_uslab)
			kmem_cache_free(cache, p);
		else
			sys_free(p);
		got++;
	}
	return NULL;
}

static void child_remote(long n)
{
	pthread_t t;
	unsigned idx = 0;
	remote_n = n;
	if (use_uslab) {
		cache = kmem_cache_create("remote-256", 256, 0, 0, NULL);
		report_path(cache);
	}
	double t0 = now_ns();
	pthread_create(&t, NULL, remote_consumer, NULL);
	for (long i = 0; i < n; i++) {
		void *p = use_uslab ? kmem_cache_alloc(cache, GFP_KERNEL) : sys_malloc(256);
		*(long *)p = i;
		while (__atomic_load_n(&ring[idx], __ATOMIC_ACQUIRE))
			__builtin_ia32_pause();
		__atomic_store_n(&ring[idx], p, __ATOMIC_RELEASE);
		idx = (idx + 1) & (RING_SZ - 1);
	}
	pthread_join(t, NULL);
	printf("%.3f\n", (now_ns() - t0) / (double)n);
}

/* bulk (seed 000): for each bulk size N, objects allocated N at a time and then
 * freed N at a time; "fallback" with single calls, "bulk" with the bulk API
 * (uslab only). Per object (one alloc + one free): ticks and ns, median of 5
 * batches. Prints 4 numbers per size for uslab, 2 for malloc. */
static const unsigned int bulk_sizes[] = { 1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250 };
#define NBULK (sizeof(bulk_sizes) / sizeof(bulk_sizes[0]))
#define BULK_BATCHES 5

static void child_bulk(long total)
{
	void *p[256];
	alloc_fn m = sys_malloc;
	free_fn f = sys_free;
	if (use_uslab) {
		cache = kmem_cache_create("bulk-256", 256, 0, SLAB_HWCACHE_ALIGN, NULL);
		report_path(cache);
	}
	for (unsigned k = 0; k < NBULK; k++) {
		unsigned int n = bulk_sizes[k];
		long loops = total / BULK_BATCHES / n;
		for (int mode = 0; mode < (use_uslab ? 2 : 1); mode++) {
			double tk[BULK_BATCHES], ns[BULK_BATCHES];
			for (int b = 0; b < BULK_BATCHES; b++) {
				double t0 = now_ns();
				uint64_t k0 = ticks();
				for (long l = 0; l < loops; l++) {
					if (mode == 1) {
						kmem_cache_alloc_bulk(cache, GFP_ATOMIC, n, p);
						ESCAPE(p[0]);
						kmem_cache_free_bulk(cache, n, p);
					} else if (use_uslab) {
						for (unsigned i = 0; i < n; i++)
							p[i] = kmem_cache_alloc(cache, GFP_ATOMIC);
						ESCAPE(p[0]);
						for (unsigned i = 0; i < n; i++)
							kmem_cache_free(cache, p[i]);
					} else {
						for (unsigned i = 0; i < n; i++)
							p[i] = m(256);
						ESCAPE(p[0]);
						for (unsigned i = 0; i < n; i++)
							f(p[i]);
					}
				}
				double objs = (double)loops * n;
				tk[b] = (double)(ticks() - k0) / objs;
				ns[b] = (now_ns() - t0) / objs;
			}
			qsort(tk, BULK_BATCHES, sizeof(double), cmp_d);
			qsort(ns, BULK_BATCHES, sizeof(double), cmp_d);
			printf("%.2f %.3f ", tk[BULK_BATCHES / 2], ns[BULK_BATCHES / 2]);
		}
	}
	printf("\n");
}

/* random-free: N live 256-byte objects, then rounds of "free all N in a random
 * order, allocate N again". Unlike the LIFO loops above, the frees land on
 * objects scattered over many slabs (pages), so this measures the slow paths
 * and the cache misses of a real working set. The shuffle (a fixed-seed
 * xorshift, the same sequence for every variant) is outside the timed region;
 * each object gets one store after allocation so that an allocator is not
 * rewarded for never touching its memory. Prints the median round's ns per
 * object (one free + one alloc). */
static uint64_t xorshift64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void child_random_free(long n, long rounds)
{
	void **v = calloc((size_t)n, sizeof(void *));
	double *ns = calloc((size_t)rounds, sizeof(double));
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	alloc_fn m = sys_malloc;
	free_fn f = sys_free;
	if (!v || !ns)
		exit(3);
	if (use_uslab) {
		cache = kmem_cache_create("rf-256", 256, 0, 0, NULL);
		report_path(cache);
	}
	for (long i = 0; i < n; i++) {
		v[i] = use_uslab ? kmem_cache_alloc(cache, GFP_KERNEL) : m(256);
		*(long *)v[i] = i;
	}
	for (long r = 0; r < rounds; r++) {
		for (long i = n - 1; i > 0; i--) {
			long j = (long)(xorshift64(&seed) % (uint64_t)(i + 1));
			void *t = v[i];
			v[i] = v[j];
			v[j] = t;
		}
		double t0 = now_ns();
		if (use_uslab) {
			for (long i = 0; i < n; i++)
				kmem_cache_free(cache, v[i]);
			for (long i = 0; i < n; i++) {
				v[i] = kmem_cache_alloc(cache, GFP_KERNEL);
				*(long *)v[i] = i;
			}
		} else {
			for (long i = 0; i < n; i++)
				f(v[i]);
			for (long i = 0; i < n; i++) {
				v[i] = m(256);
				*(long *)v[i] = i;
			}
		}
		ns[r] = (now_ns() - t0) / (double)n;
	}
	qsort(ns, (size_t)rounds, sizeof(double), cmp_d);
	printf("%.3f\n", ns[rounds / 2]);
}

/* ---------------------------------------------------------------- driver */

struct variant {
	const char *name;
	const char *preload;   /* NULL: none */
	int uslab;             /* 1: kmem_cache_* */
	const char *rseq;      /* USLAB_RSEQ value or NULL */
	int present;
};

static struct variant variants[] = {
	{ "uslab (rseq)", NULL, 1, NULL, 1 },
	{ "uslab (locked)", NULL, 1, "0", 1 },
	{ "glibc", NULL, 0, NULL, 1 },
	{ "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", 0, NULL, 1 },
	{ "tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", 0, NULL, 1 },
	{ "mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", 0, NULL, 1 },
};
#define NVAR (int)(sizeof(variants) / sizeof(variants[0]))
#define MAXVALS 64
#define MAXRUNS 31

static const char *self_path;

/* Run one child; parse up to MAXVALS numbers from its stdout. */
static int run_child(struct variant *v, const char *scenario, const char *arg, double *vals)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		if (v->preload)
			setenv("LD_PRELOAD", v->preload, 1);
		else
			unsetenv("LD_PRELOAD");
		if (v->rseq)
			setenv("USLAB_RSEQ", v->rseq, 1);
		else
			unsetenv("USLAB_RSEQ");
		execl(self_path, self_path, "--child", scenario, v->uslab ? "uslab" : "malloc", arg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char buf[4096];
	size_t len = 0;
	ssize_t r;
	while ((r = read(pfd[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	close(pfd[0]);
	buf[len] = 0;
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	int n = 0;
	char *p = buf, *end;
	while (n < MAXVALS) {
		double d = strtod(p, &end);
		if (end == p)
			break;
		vals[n++] = d;
		p = end;
	}
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* medians[v][k]: median over runs of value k of variant v. */
static double medians[NVAR][MAXVALS];
static int nvals[NVAR];

static void measure(const char *scenario, const char *arg, int runs)
{
	static double all[NVAR][MAXRUNS][MAXVALS];
	int got[NVAR] = { 0 };
	for (int r = 0; r < runs; r++)
		for (int v = 0; v < NVAR; v++) {
			if (!variants[v].present)
				continue;
			int n = run_child(&variants[v], scenario, arg, all[v][got[v]]);
			if (n > 0) {
				nvals[v] = n;
				got[v]++;
			}
		}
	for (int v = 0; v < NVAR; v++) {
		if (!got[v]) {
			if (variants[v].present)
				fprintf(stderr, "note: %s failed to run %s\n", variants[v].name, scenario);
			variants[v].present = 0;
			continue;
		}
		for (int k = 0; k < nvals[v]; k++) {
			double col[MAXRUNS];
			for (int r = 0; r < got[v]; r++)
				col[r] = all[v][r][k];
			qsort(col, (size_t)got[v], sizeof(double), cmp_double);
			medians[v][k] = col[got[v] / 2];
		}
	}
}

static void measure_n(const char *scenario, long n, int runs)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", n);
	measure(scenario, arg, runs);
}

static void ratios(double x, int k);

/* One row per allocator: its median value k and its ratios to each peer. */
static void print_rows(int k, const char *fmt)
{
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-16s ", variants[v].name);
		printf(fmt, medians[v][k], medians[v][k + 1]);
		ratios(medians[v][k], k);
		printf("\n");
	}
}

static int find_variant(const char *name)
{
	for (int v = 0; v < NVAR; v++)
		if (!strcmp(variants[v].name, name) && variants[v].present)
			return v;
	return -1;
}

static void ratio_header(void)
{
	printf("  %-10s %-10s %-10s %-10s", "/glibc", "/jemalloc", "/tcmalloc", "/mimalloc");
}

static void ratios(double x, int k)
{
	const char *peers[] = { "glibc", "jemalloc", "tcmalloc", "mimalloc" };
	for (int i = 0; i < 4; i++) {
		int p = find_variant(peers[i]);
		if (p < 0 || medians[p][k] <= 0)
			printf("  %-10s", "-");
		else
			printf("  %-10.2f", x / medians[p][k]);
	}
}

static void bench_single(int runs, long iters)
{
	measure_n("single", iters, runs);
	printf("\n== single: 256-byte alloc+free pair, %ld pairs in %d batches; median batch, median of %d runs ==\n", iters, BATCHES, runs);
	printf("uslab: kmem_cache_alloc/kmem_cache_free; peers: malloc(256)/free\n");
	printf("%-16s %9s %11s", "allocator", "ns/pair", "ticks/pair");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.2f %11.1f");
}

static void bench_nalloc(int runs, long n)
{
	measure_n("nalloc", n, runs);
	printf("\n== nalloc (seed 003): %ld allocations each timed, then %ld frees each timed; "
	       "ticks per op, median of %d runs ==\n", n, n, runs);
	printf("uslab: kmem_cache of that size; peers: malloc(size)/free. Ticks include rdtsc itself.\n");
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("-- %s\n", variants[v].name);
		for (unsigned s = 0; s < NSIZES; s++)
			printf("Kmalloc N*alloc N*free(%u): Average=%.0f/%.0f\n", nalloc_sizes[s],
			       medians[v][2 * s], medians[v][2 * s + 1]);
	}
	int tc = find_variant("tcmalloc");
	printf("\nratios against the best peer at each size (alloc / free):\n");
	printf("%-16s", "size");
	for (unsigned s = 0; s < NSIZES; s++)
		printf(" %11u", nalloc_sizes[s]);
	printf("\n");
	for (int v = 0; v < 2; v++) {
		if (!variants[v].present)
			continue;
		printf("%-16s", variants[v].name);
		for (unsigned s = 0; s < NSIZES; s++) {
			double ba = 1e30, bf = 1e30;
			for (int p = 2; p < NVAR; p++) {
				if (!variants[p].present)
					continue;
				if (medians[p][2 * s] < ba)
					ba = medians[p][2 * s];
				if (medians[p][2 * s + 1] < bf)
					bf = medians[p][2 * s + 1];
			}
			printf(" %5.2f/%-5.2f", medians[v][2 * s] / ba, medians[v][2 * s + 1] / bf);
		}
		printf("\n");
		if (tc >= 0) {
			printf("%-16s", "  vs tcmalloc");
			for (unsigned s = 0; s < NSIZES; s++)
				printf(" %5.2f/%-5.2f", medians[v][2 * s] / medians[tc][2 * s],
				       medians[v][2 * s + 1] / medians[tc][2 * s + 1]);
			printf("\n");
		}
	}
}

static void bench_bulk(int runs, long n)
{
	measure_n("bulk", n, runs);
	printf("\n== bulk (seed 000): 256-byte objects, N allocated then N freed, per object (alloc+free), "
	       "%ld objects per size, median of %d runs ==\n", n, runs);
	for (int v = 0; v < 2; v++) {
		if (!variants[v].present)
			continue;
		printf("-- %s: fallback = N x kmem_cache_alloc, N x kmem_cache_free; bulk = kmem_cache_alloc_bulk + kmem_cache_free_bulk\n",
		       variants[v].name);
		for (unsigned k = 0; k < NBULK; k++) {
			double ft = medians[v][4 * k], fn = medians[v][4 * k + 1];
			double bt = medians[v][4 * k + 2], bn = medians[v][4 * k + 3];
			printf("%3u - %4.0f cycles(tsc) %6.3f ns - %4.0f cycles(tsc) %6.3f ns - improved %5.1f%%\n",
			       bulk_sizes[k], ft, fn, bt, bn, 100.0 * (1.0 - bt / ft));
		}
	}
	printf("peers: N x malloc(256), N x free; ns per object, and uslab bulk / best peer\n");
	printf("%5s", "N");
	for (int v = 2; v < NVAR; v++)
		if (variants[v].present)
			printf(" %10s", variants[v].name);
	printf(" %12s %12s %12s\n", "bulk(rseq)", "/best peer", "bulk(locked)");
	for (unsigned k = 0; k < NBULK; k++) {
		double best = 1e30;
		printf("%5u", bulk_sizes[k]);
		for (int v = 2; v < NVAR; v++) {
			if (!variants[v].present)
				continue;
			printf(" %10.3f", medians[v][2 * k + 1]);
			if (medians[v][2 * k + 1] < best)
				best = medians[v][2 * k + 1];
		}
		printf(" %12.3f %12.2f %12.3f\n", medians[0][4 * k + 3], medians[0][4 * k + 3] / best,
		       medians[1][4 * k + 3]);
	}
}

static void bench_remote(int runs, long n)
{
	measure_n("remote", n, runs);
	printf("\n== remote: one thread allocates 256 bytes, another frees (ring), %ld objects, "
	       "median of %d runs ==\n", n, runs);
	printf("%-16s %9s", "allocator", "ns/object");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.2f");
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "--child")) {
		use_uslab = !strcmp(argv[3], "uslab");
		long n = atol(argv[4]);
		if (!strcmp(argv[2], "single"))
			child_single(n);
		else if (!strcmp(argv[2], "nalloc"))
			child_nalloc(n, 5);
		else if (!strcmp(argv[2], "remote"))
			child_remote(n);
		else if (!strcmp(argv[2], "bulk"))
			child_bulk(n);
		else
			return 2;
		return 0;
	}

	const char *what = "all";
	int runs = 7, quick = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (argv[i][0] != '-')
			what = argv[i];
		else {
			fprintf(stderr, "usage: uslab-bench [single|nalloc|bulk|remote|all] [--runs N] [--quick]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > MAXRUNS) {
		fprintf(stderr, "uslab-bench: --runs must be 1..%d\n", MAXRUNS);
		return 2;
	}
	self_path = "/proc/self/exe";
	static char exe[4096];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l > 0) {
		exe[l] = 0;
		self_path = exe;
	}
	for (int v = 0; v < NVAR; v++)
		if (variants[v].preload && access(variants[v].preload, R_OK) != 0) {
			fprintf(stderr, "note: %s not installed (%s); its column is skipped\n", variants[v].name,
			        variants[v].preload);
			variants[v].present = 0;
		}
	printf("uslab-bench: %ld CPUs online; per-CPU mode by default: %s\n", sysconf(_SC_NPROCESSORS_ONLN),
	       uslab_percpu_mode());
	int all = !strcmp(what, "all");
	if (all || !strcmp(what, "single"))
		bench_single(runs, quick ? 2000000 : 20000000);
	if (all || !strcmp(what, "nalloc"))
		bench_nalloc(runs, 10000);
	if (all || !strcmp(what, "bulk"))
		bench_bulk(runs, quick ? 1000000 : 10000000);
	if (all || !strcmp(what, "remote"))
		bench_remote(runs, quick ? 500000 : 4000000);
	return 0;
}
