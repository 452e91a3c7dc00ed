/* bench.c - uslab-bench: the seed benchmarks, side by side with the peers.
 * Each scenario runs in child processes (this same program with --child), one per
 * allocator, each loaded the way its users load it: uslab's kmem_cache_* rows
 * with LD_PRELOAD=libuslab.so (this program does not link uslab: its uslab
 * calls are weak references that the preloaded library resolves, a call
 * through the PLT as in a program linked with -luslab), with sheaves and with
 * the old cpu-slab fast path (USLAB_SHEAVES=1/0), each in rseq and locked mode
 * (USLAB_RSEQ=0), and on SLAB; uslab's malloc (LD_PRELOAD=libuslab.so, called
 * as the peers are); malloc/free from glibc, jemalloc, tcmalloc and mimalloc
 * (LD_PRELOAD). One extra row, labelled, runs uslab-bench-static: this source
 * linked with the static library (-fno-plt). Runs are interleaved; the table
 * shows medians and ratios against the peers of the same run, its header the
 * unit and which way is better, and a summary at the end puts uslab against
 * the best peer of each row (from the same medians). Progress goes to stderr,
 * the tables to stdout. A child that crashes, prints the wrong number of
 * values, or runs another allocator than its row's is reported on stderr and
 * in the table, never read as a zero. --data FILE also appends every median,
 * with the least and greatest run, to FILE as tab-separated lines (the
 * benchmark report's plots, scripts/bench_report.py).
 * Usage: uslab-bench [single|nalloc|bulk|detached|remote|random-free|seed003|messaging|colour|all]
 *                    [--runs N] [--quick]
 *                    [--data FILE]
 * Not a test: timings never decide pass or fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "progress.h"
#include "uslab.h"

#ifndef USLAB_SO_PATH
#define USLAB_SO_PATH "libuslab.so"
#endif
#ifndef BENCH_STATIC
/* Resolved by the preloaded libuslab.so, NULL in the peers' children. */
#pragma weak kmem_cache_create
#pragma weak kmem_cache_destroy
#pragma weak kmem_cache_alloc
#pragma weak kmem_cache_free
#pragma weak kmem_cache_alloc_bulk
#pragma weak kmem_cache_free_bulk
#pragma weak kmalloc
#pragma weak kfree
#pragma weak uslab_percpu_mode
#pragma weak uslab_sheaf_capacity
#pragma weak uslab_allocator
#pragma weak uslab_for_each_cache
#pragma weak uslab_cache_find
#pragma weak kmem_cache_name
#pragma weak uslab_cache_attr
#define USLAB_LOADED (kmem_cache_create != NULL)
#else
#define USLAB_LOADED 1                 /* linked in (malloc stays glibc's) */
#endif

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

/* A uslab child first prints "uslab <per-CPU mode> <sheaf capacity> <engine>"
 * for its first cache, before any number: the parent checks it against the
 * variant's environment, so a row labelled "sheaves (rseq)" or "slab (rseq)" is
 * proven to have run that path. */
static void report_path(struct kmem_cache *c)
{
	static int done;
	if (done++)
		return;
	printf("uslab %s %u %s\n", uslab_percpu_mode(), uslab_sheaf_capacity(c), uslab_allocator());
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

/* BATCHES batches of per pairs: m/f through pointers, or (m NULL) the uslab
 * cache; the median batch's ns and ticks per pair. */
static void single_batches(alloc_fn m, free_fn f, long per, double *ns_med, double *tk_med)
{
	double ns[BATCHES], tk[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		uint64_t k0 = ticks();
		if (!m) {
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
	*ns_med = ns[BATCHES / 2];
	*tk_med = tk[BATCHES / 2];
}

static void child_single(long iters)
{
	double ns, tk;
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
	single_batches(use_uslab ? NULL : m, f, iters / BATCHES, &ns, &tk);
	printf("%.3f %.2f\n", ns, tk);
}

/* nalloc (seed 003): for each size, N allocations each timed, then N frees each
 * timed; average ticks per alloc and per free. */
static const unsigned int nalloc_sizes[] = { 32, 64, 128, 256, 512, 1024, 2048, 4096 };
#define NSIZES (sizeof(nalloc_sizes) / sizeof(nalloc_sizes[0]))
#define NALLOC_REPS 5   /* each size's N allocs + N frees, repeated */

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


/* seed003: seed 003's own measure, "Kmalloc N*alloc N*free(size)" with both
 * CPUs allocating at once (the seed's numbers come from concurrent runs): a
 * thread pinned to each of the first two CPUs does N timed kmalloc (peers:
 * malloc) of the size, then N timed frees, NALLOC_REPS times, started together
 * at each size. Prints per size the average ticks per allocation and per free
 * over both threads. */
struct conc_arg {
	int cpu;
	long n;
	unsigned int size;
	pthread_barrier_t *start;
	uint64_t ta, tf;
};

static void *conc_thread(void *p)
{
	struct conc_arg *a = p;
	void **v = calloc((size_t)a->n, sizeof(void *));
	if (a->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(a->cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	a->ta = a->tf = 0;
	for (int r = 0; r < NALLOC_REPS; r++) {
		pthread_barrier_wait(a->start);
		for (long i = 0; i < a->n; i++) {
			uint64_t t0 = ticks();
			v[i] = use_uslab ? kmalloc(a->size, GFP_KERNEL) : sys_malloc(a->size);
			a->ta += ticks() - t0;
			ESCAPE(v[i]);
		}
		for (long i = 0; i < a->n; i++) {
			uint64_t t0 = ticks();
			if (use_uslab)
				kfree(v[i]);
			else
				sys_free(v[i]);
			a->tf += ticks() - t0;
		}
	}
	free(v);
	return NULL;
}

static void child_seed003(long n)
{
	int two = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
	if (use_uslab) {
		void *x = kmalloc(32, GFP_KERNEL);   /* makes the classes: report the engine */
		kfree(x);
		struct kmem_cache *c = kmem_cache_create("seed003-probe", 32, 0, 0, NULL);
		report_path(c);
		kmem_cache_destroy(c);
	}
	for (unsigned s = 0; s < NSIZES; s++) {
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, 2);
		struct conc_arg a[2];
		pthread_t t[2];
		for (int i = 0; i < 2; i++) {
			a[i] = (struct conc_arg){ two ? i : -1, n, nalloc_sizes[s], &start, 0, 0 };
			pthread_create(&t[i], NULL, conc_thread, &a[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		double calls = (double)n * NALLOC_REPS * 2;
		printf("%.1f %.1f ", (double)(a[0].ta + a[1].ta) / calls, (double)(a[0].tf + a[1].tf) / calls);
	}
	printf("\n");
}

/* colour: what slab colouring buys. M objects of 3072 bytes (SLAB: order-1
 * slabs of two, 2 KiB spare, 32 colours), then the first cache line of each
 * read over and over: without colour every first object starts at the same
 * page offset, so the lines compete for the same cache sets. Prints ns per
 * read for each M. */
static const unsigned int colour_ms[] = { 16, 64, 256, 512, 1024, 4096 };
#define NCOLOUR (sizeof(colour_ms) / sizeof(colour_ms[0]))

/* detached: the bulk API at seed 000's second table's sizes, total objects per
 * size; per size the cycles (TSC) per object of one kmem_cache_alloc_bulk +
 * kmem_cache_free_bulk round, over the whole loop. */
static const unsigned int detached_sizes[] = { 16, 48, 144, 512, 2048 };
#define NDETACHED (sizeof(detached_sizes) / sizeof(detached_sizes[0]))
static void child_detached(long total)
{
	static void *p[2048];
	if (!use_uslab)
		return;
	struct kmem_cache *c = kmem_cache_create("detached-256", 256, 0, SLAB_HWCACHE_ALIGN, NULL);
	report_path(c);
	for (unsigned k = 0; k < NDETACHED; k++) {
		unsigned int n = detached_sizes[k];
		long loops = total / n;
		kmem_cache_alloc_bulk(c, GFP_KERNEL, n, p);     /* warm: slabs made */
		kmem_cache_free_bulk(c, n, p);
		uint64_t t0 = ticks();
		for (long l = 0; l < loops; l++) {
			kmem_cache_alloc_bulk(c, GFP_KERNEL, n, p);
			ESCAPE(p[0]);
			kmem_cache_free_bulk(c, n, p);
		}
		printf("%.2f ", (double)(ticks() - t0) / (double)(loops * n));
	}
	printf("\n");
}

/* messaging: seed 001's "perf bench sched messaging" in threads: G groups of
 * 20 senders and 20 receivers; each sender allocates a 100-byte message for
 * every receiver of its group, loops times, and writes its address into that
 * receiver's pipe; the receiver reads and frees it (uslab: kmalloc/kfree;
 * others: malloc/free), so nearly every message is freed on another thread than
 * its sender's, often on the other CPU. Prints the wall seconds and ns per
 * message, and with counters on (USLAB_STATS) the kmalloc caches' slab CAS
 * tried, list_lock taken, slow frees and slow allocations per 1000 messages. */
enum { MSG_GROUPS = 2, MSG_SIDE = 20, MSG_SIZE = 100 };
struct msg_arg {
	int *fds;           /* the group's receivers' pipes (write ends) */
	int fd;             /* a receiver's read end */
	long loops;
};

static void *msg_sender(void *p)
{
	struct msg_arg *a = p;
	for (long l = 0; l < a->loops; l++)
		for (int r = 0; r < MSG_SIDE; r++) {
			char *m = use_uslab ? kmalloc(MSG_SIZE, GFP_KERNEL) : sys_malloc(MSG_SIZE);
			m[0] = (char)l;
			m[MSG_SIZE - 1] = (char)r;
			if (write(a->fds[r], &m, sizeof(m)) != (ssize_t)sizeof(m))
				abort();
		}
	return NULL;
}

static void *msg_receiver(void *p)
{
	struct msg_arg *a = p;
	long want = a->loops * MSG_SIDE, got = 0;
	char *buf[64];
	while (got < want) {
		ssize_t n = read(a->fd, buf, sizeof(buf));
		if (n <= 0 || n % (ssize_t)sizeof(char *))
			abort();                     /* (pipe writes of 8 bytes are atomic) */
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(char *); i++) {
			if (use_uslab)
				kfree(buf[i]);
			else
				sys_free(buf[i]);
		}
		got += n / (ssize_t)sizeof(char *);
	}
	return NULL;
}

static unsigned long long msg_counter;   /* a counter summed over the kmalloc caches */
static int msg_sum(struct kmem_cache *s, void *name)
{
	char buf[64];
	const char *cn = kmem_cache_name(s);
	if (cn && !strncmp(cn, "kmalloc-", 8) && uslab_cache_attr(s, name, buf, sizeof(buf)) >= 0)
		msg_counter += strtoull(buf, NULL, 10);
	return 0;
}

static void child_messaging(long loops)
{
	static struct msg_arg snd[MSG_GROUPS][MSG_SIDE], rcv[MSG_GROUPS][MSG_SIDE];
	static int wfd[MSG_GROUPS][MSG_SIDE];
	static pthread_t ts[MSG_GROUPS][MSG_SIDE], tr[MSG_GROUPS][MSG_SIDE];
	if (use_uslab) {
		void *m = kmalloc(MSG_SIZE, GFP_KERNEL);
		report_path(uslab_cache_find("kmalloc-128"));   /* the messages' class */
		kfree(m);
	}
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int r = 0; r < MSG_SIDE; r++) {
			int fd[2];
			if (pipe(fd) != 0)
				abort();
			wfd[g][r] = fd[1];
			rcv[g][r] = (struct msg_arg){ NULL, fd[0], loops };
		}
	double t0 = now_ns();
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int i = 0; i < MSG_SIDE; i++) {
			pthread_create(&tr[g][i], NULL, msg_receiver, &rcv[g][i]);
			snd[g][i] = (struct msg_arg){ wfd[g], -1, loops };
			pthread_create(&ts[g][i], NULL, msg_sender, &snd[g][i]);
		}
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int i = 0; i < MSG_SIDE; i++) {
			pthread_join(ts[g][i], NULL);
			pthread_join(tr[g][i], NULL);
		}
	double secs = (now_ns() - t0) / 1e9, msgs = (double)MSG_GROUPS * MSG_SIDE * MSG_SIDE * (double)loops;
	printf("%.4f %.1f", secs, secs * 1e9 / msgs);
	if (use_uslab && getenv("USLAB_STATS")) {
		static const char *const names[] = { "cmpxchg_double", "list_lock", "free_slowpath", "alloc_slowpath" };
		for (unsigned i = 0; i < 4; i++) {
			msg_counter = 0;
			uslab_for_each_cache(msg_sum, (void *)names[i]);
			printf(" %.2f", (double)msg_counter * 1000.0 / msgs);
		}
	}
	printf("\n");
}

static void child_colour(long reads)
{
	struct kmem_cache *c = NULL;
	if (use_uslab) {
		c = kmem_cache_create("colour-3072", 3072, 0, SLAB_NO_MERGE, NULL);
		report_path(c);
	}
	for (unsigned k = 0; k < NCOLOUR; k++) {
		unsigned int m = colour_ms[k];
		void **v = calloc(m, sizeof(void *));
		for (unsigned int i = 0; i < m; i++) {
			v[i] = use_uslab ? kmem_cache_alloc(c, GFP_KERNEL) : sys_malloc(3072);
			memset(v[i], (int)i, 3072);
		}
		long rounds = reads / m;
		double best = 0;
		for (int b = 0; b < 5; b++) {
			uintptr_t sum = 0;
			double t0 = now_ns();
			for (long r = 0; r < rounds; r++)
				for (unsigned int i = 0; i < m; i++)
					sum += *(volatile uintptr_t *)v[i];
			double ns = (now_ns() - t0) / ((double)rounds * m);
			ESCAPE(sum);
			if (b == 0 || ns < best)
				best = ns;
		}
		printf("%.3f ", best);
		for (unsigned int i = 0; i < m; i++) {
			if (use_uslab)
				kmem_cache_free(c, v[i]);
			else
				sys_free(v[i]);
		}
		free(v);
	}
	printf("\n");
}

/* remote: one thread allocates, another frees, through a ring. ns per object. */
#define RING_SZ 1024
static void *volatile ring[RING_SZ];
static long remote_n;

/* A wait on the ring spins, then yields: on a 2-CPU machine with other tenants
 * the other thread may be off-CPU for a whole time slice, and pure spinning made
 * a run take minutes (microseconds per object) instead of a fraction of a second.
 * An unloaded run never waits this long after start-up. */
#define SPIN_YIELD 4096
static inline void ring_wait(unsigned *spins)
{
	if (++*spins % SPIN_YIELD == 0)
		sched_yield();
	else
		__builtin_ia32_pause();
}

static void *remote_consumer(void *arg)
{
	(void)arg;
	long got = 0;
	unsigned idx = 0, spins = 0;
	while (got < remote_n) {
		void *p = __atomic_load_n(&ring[idx], __ATOMIC_ACQUIRE);
		if (!p) {
			ring_wait(&spins);
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
	unsigned idx = 0, spins = 0;
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
			ring_wait(&spins);
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
	const char *tag;       /* short column heading */
	const char *preload;   /* NULL: none */
	int uslab;             /* 1: kmem_cache_* (else malloc) */
	int peer;              /* 1: one of the four peers (the ratios' columns, "best peer") */
	int exe;               /* 0: this program, 1: uslab-bench-static (an extra row) */
	const char *rseq;      /* USLAB_RSEQ value or NULL (default: rseq) */
	const char *sheaves;   /* USLAB_SHEAVES value or NULL (peers: irrelevant) */
	int present;           /* 0: peer library not installed */
	const char *engine;    /* USLAB_ALLOCATOR (uslab rows; NULL: slub) */
	const char *colour;    /* USLAB_SLAB_COLOUR or NULL */
	const char *only;      /* the scenarios it runs in (space-separated), NULL: all */
	const char *lookahead; /* USLAB_BULK_LOOKAHEAD or NULL (the default, 3) */
};

/* uslab: the four combinations of sheaves / cpu-slab and rseq / locked on SLUB,
 * and SLAB (USLAB_ALLOCATOR=slab: its arrays are always on) in both modes, each
 * chosen by its child's environment, which the library reads when it starts;
 * for seed 003's table SLAB with its colour under the node lock, and for the
 * colour table SLAB without colour; the static link (single and bulk only);
 * uslab's malloc on both engines. Then the peers. */
#define SO USLAB_SO_PATH
static struct variant variants[] = {
	{ "uslab sheaves (rseq)", "sheaves/rseq", SO, 1, 0, 0, NULL, "1", 1, NULL, NULL, NULL, NULL },
	{ "uslab cpu-slab (rseq)", "cpuslab/rseq", SO, 1, 0, 0, NULL, "0", 1, NULL, NULL, NULL, NULL },
	{ "uslab sheaves (locked)", "sheaves/locked", SO, 1, 0, 0, "0", "1", 1, NULL, NULL, NULL, NULL },
	{ "uslab cpu-slab (locked)", "cpuslab/locked", SO, 1, 0, 0, "0", "0", 1, NULL, NULL, NULL, NULL },
	{ "uslab slab (rseq)", "slab/rseq", SO, 1, 0, 0, NULL, "1", 1, "slab", NULL, NULL, NULL },
	{ "uslab slab (locked)", "slab/locked", SO, 1, 0, 0, "0", "1", 1, "slab", NULL, NULL, NULL },
	{ "uslab slab, colour locked", "slab/lockcol", SO, 1, 0, 0, NULL, "1", 1, "slab", "2", "seed003", NULL },
	{ "uslab slab, no colour", "slab/nocol", SO, 1, 0, 0, NULL, "1", 1, "slab", "0", "colour", NULL },
	{ "uslab static (extra)", "static/rseq", NULL, 1, 0, 1, NULL, "1", 1, NULL, NULL, "single bulk", NULL },
	{ "uslab sheaves, simple", "sheaves/simple", SO, 1, 0, 0, NULL, "1", 1, NULL, NULL, "detached", "1" },
	{ "uslab cpu-slab, simple", "cpuslab/simple", SO, 1, 0, 0, NULL, "0", 1, NULL, NULL, "detached", "1" },
	{ "uslab malloc", "uslab-malloc", SO, 0, 0, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL },
	{ "uslab malloc, slab", "slab-malloc", SO, 0, 0, 0, NULL, NULL, 1, "slab", NULL, NULL, NULL },
	{ "glibc", "glibc", NULL, 0, 1, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL },
	{ "jemalloc", "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", 0, 1, 0, NULL, NULL, 1, NULL, NULL,
	  NULL, NULL },
	{ "tcmalloc", "tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", 0, 1, 0, NULL, NULL, 1, NULL,
	  NULL, NULL, NULL },
	{ "mimalloc", "mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", 0, 1, 0, NULL, NULL, 1, NULL, NULL,
	  NULL, NULL },
};
#define NVAR (int)(sizeof(variants) / sizeof(variants[0]))
#define NAMEW 26   /* width of the allocator column: the longest name, plus one */
#define MAXVALS 64
#define MAXRUNS 31

static const char *self_path;
static char static_path[4200];      /* uslab-bench-static beside this program */

/* Progress on stderr, so that stdout holds only the tables: one line per
 * measured step, "[2/6] nalloc: 7 runs of <allocators>; run 1 2 ... done in 9.1 s". */

/* Per variant, for the scenario being printed: runs tried and failed (over all
 * its measure() calls), why the last failure happened, and the sheaf capacity
 * the uslab children reported. */
static int ntried[NVAR], nfail[NVAR];
static char fail_why[NVAR][128];
static unsigned int cap_seen[NVAR];

/* Run one child and parse exactly want numbers from its stdout into vals.
 * Returns want, or -1 after saying why on stderr: a crash, an exit status, the
 * wrong number of values, or a uslab child that ran a path other than its
 * variant's (per-CPU mode, sheaves or not). */
static int run_child(int vi, const char *scenario, const char *arg, int want, double *vals)
{
	struct variant *v = &variants[vi];
	char *why = fail_why[vi];
	int pfd[2];

	why[0] = 0;
	if (pipe(pfd) != 0) {
		snprintf(why, sizeof(fail_why[0]), "pipe: %s", strerror(errno));
		goto fail;
	}
	/* Nothing buffered may be duplicated into the child, and the parent's
	 * output must stay in order with the children's stderr. */
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		snprintf(why, sizeof(fail_why[0]), "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		/* The environment is in place before exec, hence before the
		 * library's start-up reads USLAB_RSEQ and USLAB_SHEAVES. */
		if (v->preload)
			setenv("LD_PRELOAD", v->preload, 1);
		else
			unsetenv("LD_PRELOAD");
		if (v->rseq)
			setenv("USLAB_RSEQ", v->rseq, 1);
		else
			unsetenv("USLAB_RSEQ");
		if (v->sheaves)
			setenv("USLAB_SHEAVES", v->sheaves, 1);
		else
			unsetenv("USLAB_SHEAVES");
		setenv("USLAB_ALLOCATOR", v->engine ? v->engine : "slub", 1);
		if (v->colour)
			setenv("USLAB_SLAB_COLOUR", v->colour, 1);
		else
			unsetenv("USLAB_SLAB_COLOUR");
		if (v->lookahead)
			setenv("USLAB_BULK_LOOKAHEAD", v->lookahead, 1);
		else
			unsetenv("USLAB_BULK_LOOKAHEAD");
		const char *exe = v->exe ? static_path : self_path;
		execl(exe, exe, "--child", scenario, v->uslab ? "uslab" : "malloc", arg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char buf[4096];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof(buf) - 1 && (r = read(pfd[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	close(pfd[0]);
	buf[len] = 0;
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status)) {
		snprintf(why, sizeof(fail_why[0]), "killed by signal %d (%s)", WTERMSIG(status),
		         strsignal(WTERMSIG(status)));
		goto fail;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, sizeof(fail_why[0]), "exit status %d", WEXITSTATUS(status));
		goto fail;
	}
	char *p = buf, *end;
	/* A malloc child says whether uslab served it (see child_main): uslab's
	 * malloc rows must, the peers' must not. */
	int want_um = !v->uslab && v->preload && !strcmp(v->preload, USLAB_SO_PATH);
	char um_mode[16], um_engine[16];
	int um_used = 0;
	if (!v->uslab && sscanf(p, "uslab-malloc %15s %15s%n", um_mode, um_engine, &um_used) == 2 && um_used) {
		p += um_used;
		if (!want_um) {
			snprintf(why, sizeof(fail_why[0]), "was served by uslab's malloc, not %s", v->name);
			goto fail;
		}
		if (strcmp(um_engine, v->engine ? v->engine : "slub") != 0) {
			snprintf(why, sizeof(fail_why[0]), "ran on %s, not %s", um_engine, v->engine ? v->engine : "slub");
			goto fail;
		}
	} else if (want_um) {
		snprintf(why, sizeof(fail_why[0]), "was not served by uslab's malloc (%s not preloaded?)", USLAB_SO_PATH);
		goto fail;
	}
	if (v->uslab) {
		char mode[16], engine[16];
		unsigned int cap;
		int used = 0;
		const char *want_mode = v->rseq && !strcmp(v->rseq, "0") ? "locked" : "rseq";
		int want_sheaves = v->sheaves && strcmp(v->sheaves, "0") != 0;
		if (sscanf(p, "uslab %15s %u %15s%n", mode, &cap, engine, &used) != 3 || !used) {
			snprintf(why, sizeof(fail_why[0]), "did not report its per-CPU mode, sheaf capacity and engine");
			goto fail;
		}
		if (strcmp(engine, v->engine ? v->engine : "slub") != 0) {
			snprintf(why, sizeof(fail_why[0]), "ran on %s, not %s", engine, v->engine ? v->engine : "slub");
			goto fail;
		}
		p += used;
		cap_seen[vi] = cap;
		if (strcmp(mode, want_mode) != 0) {
			snprintf(why, sizeof(fail_why[0]), "ran in %s mode, not %s", mode, want_mode);
			goto fail;
		}
		if ((cap > 0) != want_sheaves) {
			snprintf(why, sizeof(fail_why[0]), "ran with sheaf capacity %u (USLAB_SHEAVES=%s)", cap,
			         v->sheaves ? v->sheaves : "unset");
			goto fail;
		}
	}
	int n = 0;
	while (n < MAXVALS) {
		double d = strtod(p, &end);
		if (end == p)
			break;
		vals[n++] = d;
		p = end;
	}
	while (*p == ' ' || *p == '\n')
		p++;
	if (n != want || *p) {
		snprintf(why, sizeof(fail_why[0]), "printed %d values%s, expected %d", n, *p ? " and text" : "", want);
		goto fail;
	}
	return n;
fail:
	progress_break();
	fprintf(stderr, "uslab-bench: %s, %s %s: %s\n", v->name, scenario, arg, why);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* medians[v][k]: median over runs of value k of variant v, for the runs that
 * gave numbers (nran[v] of them) in the last measure(); lows, highs: the least
 * and the greatest of those runs. */
static double medians[NVAR][MAXVALS], lows[NVAR][MAXVALS], highs[NVAR][MAXVALS];
static int nran[NVAR];

/* Which variants a scenario shows: those installed, and not kept to other
 * scenarios (installed[] is set once at start-up). */
static int installed[NVAR];

static void begin_scenario_of(const char *name)
{
	for (int v = 0; v < NVAR; v++) {
		const char *o = variants[v].only;
		size_t len = strlen(name);
		int in = !o;
		for (const char *q = o; q && *q && !in; q += strcspn(q, " "), q += *q == ' ')
			in = !strncmp(q, name, len) && (q[len] == ' ' || !q[len]);
		variants[v].present = installed[v] && in;
	}
	memset(ntried, 0, sizeof(ntried));
	memset(nfail, 0, sizeof(nfail));
	memset(cap_seen, 0, sizeof(cap_seen));
}

static void begin_scenario(void)
{
	begin_scenario_of("");
}

/* want_uslab / want_malloc: how many values a uslab / malloc child prints;
 * what: the step's name in the progress line. */
static void measure(const char *what, const char *scenario, const char *arg, int runs, int want_uslab,
                    int want_malloc)
{
	static double all[NVAR][MAXRUNS][MAXVALS];
	memset(nran, 0, sizeof(nran));
	const char *names[NVAR];
	for (int v = 0; v < NVAR; v++)
		names[v] = variants[v].present ? variants[v].tag : NULL;
	progress_begin(what, runs, names, NVAR);
	for (int r = 0; r < runs; r++) {
		progress_run(r);
		for (int v = 0; v < NVAR; v++) {
			if (!variants[v].present)
				continue;
			int want = variants[v].uslab ? want_uslab : want_malloc;
			ntried[v]++;
			if (run_child(v, scenario, arg, want, all[v][nran[v]]) == want)
				nran[v]++;
			else
				nfail[v]++;
		}
	}
	progress_end();
	for (int v = 0; v < NVAR; v++) {
		int want = variants[v].uslab ? want_uslab : want_malloc;
		for (int k = 0; k < want && nran[v]; k++) {
			double col[MAXRUNS];
			for (int r = 0; r < nran[v]; r++)
				col[r] = all[v][r][k];
			qsort(col, (size_t)nran[v], sizeof(double), cmp_double);
			medians[v][k] = col[nran[v] / 2];
			lows[v][k] = col[0];
			highs[v][k] = col[nran[v] - 1];
		}
	}
}

static void measure_n(const char *scenario, long n, int runs, int want_uslab, int want_malloc)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", n);
	measure(scenario, scenario, arg, runs, want_uslab, want_malloc);
}

/* Numbers of the last measure() for variant v. */
static int ran(int v)
{
	return variants[v].present && nran[v] > 0;
}

/* --data FILE: one line per number a table shows, "uslab-bench, table,
 * allocator, metric, x (a size, a count N; empty for none), median, least,
 * greatest, runs", tab-separated, from the last measure(). */
static FILE *data_file;

static void data_row(const char *table, int v, const char *metric, const char *x, int k)
{
	if (!data_file || !ran(v))
		return;
	fprintf(data_file, "uslab-bench\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%d\n", table, variants[v].name, metric, x,
	        medians[v][k], lows[v][k], highs[v][k], nran[v]);
}

/* The same for value k of every variant that ran, with x a number (or none: -1). */
static void data_rows(const char *table, const char *metric, long x, int k)
{
	char xs[32] = "";
	if (x >= 0)
		snprintf(xs, sizeof(xs), "%ld", x);
	for (int v = 0; v < NVAR; v++)
		data_row(table, v, metric, xs, k);
}

/* Under each table: the sheaf capacity each uslab variant's children reported
 * (checked against the variant in run_child), and the failed child runs (their
 * reasons also went to stderr as they happened). */
static void print_footer(void)
{
	printf("uslab sheaf capacity reported by the children (their first cache):");
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && ntried[v] > nfail[v])
			printf(" %s %u;", variants[v].tag, cap_seen[v]);
	printf("\n");
	for (int v = 0; v < NVAR; v++)
		if (nfail[v])
			printf("FAILED: %s: %d of %d child runs (last: %s)%s\n", variants[v].name, nfail[v], ntried[v],
			       fail_why[v], nfail[v] == ntried[v] ? "" : "; medians of the others");
}

static void ratios(double x, int k);

/* One row per allocator: its median value k and its ratios to each peer. */
static void print_rows(int k, const char *fmt)
{
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-*s ", NAMEW, variants[v].name);
		if (!ran(v)) {
			printf("FAILED\n");
			continue;
		}
		printf(fmt, medians[v][k], medians[v][k + 1]);
		ratios(medians[v][k], k);
		printf("\n");
	}
}

static int find_variant(const char *name)
{
	for (int v = 0; v < NVAR; v++)
		if (!strcmp(variants[v].name, name) && ran(v))
			return v;
	return -1;
}

/* The peer with the smallest median value k among those that ran; -1 if none did. */
static int best_peer_v(int k)
{
	int best = -1;
	for (int v = 0; v < NVAR; v++)
		if (variants[v].peer && ran(v) && medians[v][k] > 0 && (best < 0 || medians[v][k] < medians[best][k]))
			best = v;
	return best;
}

/* The smallest median value k among the peers that ran; 0 if none did. */
static double best_peer(int k)
{
	int b = best_peer_v(k);
	return b < 0 ? 0 : medians[b][k];
}


/* The legend under a table header whose columns cols are ratios of unit. */
static void ratio_legend(const char *cols, const char *unit)
{
	printf("%s: this row's %s / the column's (below 1.00: this row is faster; above 1.00: slower)\n", cols,
	       unit);
}

/* ---------------------------------------------------------------- summary */
/* The summary after the last table: one line per workload, made while its
 * table is printed, from the same medians. It reports the first uslab variant
 * that ran (sheaves, rseq: what a program gets by default) against the best
 * peer of each row of the workload (a size, a bulk count N). */
struct sum_row {
	char at[16];        /* the row within the workload ("16" for N=16); "" for one row */
	double ratio;       /* uslab / best peer, median over median */
	const char *peer;   /* the best peer */
};
#define MAXSUM 16
#define SUMLEN 512
static char sum_lines[MAXSUM][SUMLEN];
static int nsum;

/* The first uslab variant that ran in the last measure(), -1 if none did. */
static int sum_variant(void)
{
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && ran(v))
			return v;
	return -1;
}

/* Row at of a summary line from the last measure(): variant uv's value ku over
 * the smallest value kp among the peers. 0 if either is missing. */
static int sum_row_from(struct sum_row *row, const char *at, int uv, int ku, int kp)
{
	int p = best_peer_v(kp);
	if (uv < 0 || p < 0 || medians[uv][ku] <= 0)
		return 0;
	snprintf(row->at, sizeof(row->at), "%s", at);
	row->ratio = medians[uv][ku] / medians[p][kp];
	row->peer = variants[p].name;
	return 1;
}

/* -1: uslab leads (below 1.00 as printed), 1: trails, 0: even. */
static int sum_side(double r)
{
	return r < 0.995 ? -1 : r >= 1.005 ? 1 : 0;
}

static void append(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(char *buf, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, SUMLEN - used, fmt, ap);
	va_end(ap);
}

/* The rows of one side, as "leads at N=8,16 (uslab/best 0.56..0.92; best peer
 * mimalloc)"; nothing if none, or "<word> nowhere" if must. */
static void sum_group(char *line, const char *word, int side, int must, const char *pre, const char *post,
                      const struct sum_row *rows, int n)
{
	const char *peers[NVAR];
	double lo = 0, hi = 0;
	int np = 0, cnt = 0;
	for (int i = 0; i < n; i++) {
		if (sum_side(rows[i].ratio) != side)
			continue;
		if (cnt)
			append(line, ",%s", rows[i].at);
		else
			append(line, "%s at %s%s", word, pre, rows[i].at);
		lo = cnt && lo < rows[i].ratio ? lo : rows[i].ratio;
		hi = cnt && hi > rows[i].ratio ? hi : rows[i].ratio;
		int seen = 0;
		for (int j = 0; j < np; j++)
			seen |= peers[j] == rows[i].peer;
		if (!seen)
			peers[np++] = rows[i].peer;
		cnt++;
	}
	if (!cnt) {
		if (must)
			append(line, "%s nowhere; ", word);
		return;
	}
	append(line, "%s (uslab/best %.2f", post, lo);
	if (hi > lo)
		append(line, "..%.2f", hi);
	append(line, "; best peer%s", np > 1 ? "s" : "");
	for (int j = 0; j < np; j++)
		append(line, "%s%s", j ? ", " : " ", peers[j]);
	append(line, "); ");
}

/* Adds the summary line of workload what (its unit in brackets) from n rows
 * of variant uv; pre and post frame the rows' names ("N=", " B"). */
static void summary_add(const char *what, int uv, const char *pre, const char *post, const struct sum_row *rows,
                        int n)
{
	char *line, words[32];
	if (nsum == MAXSUM)
		return;
	line = sum_lines[nsum++];
	snprintf(line, SUMLEN, "%-30s ", what);
	if (!n) {
		append(line, "no comparison: uslab or every peer FAILED");
		return;
	}
	if (n == 1 && !rows[0].at[0]) {
		int side = sum_side(rows[0].ratio);
		append(line, "uslab/best %.2f, best peer %s: ", rows[0].ratio, rows[0].peer);
		if (side)
			append(line, "uslab %s (%s)", side < 0 ? "leads" : "trails",
			       in_words(words, sizeof(words), rows[0].ratio, "slower", "faster"));
		else
			append(line, "even");
	} else {
		sum_group(line, "leads", -1, 1, pre, post, rows, n);
		sum_group(line, "even", 0, 0, pre, post, rows, n);
		sum_group(line, "trails", 1, 1, pre, post, rows, n);
		line[strlen(line) - 2] = 0;   /* the last "; " */
	}
	if (uv > 0)
		append(line, " [uslab = %s]", variants[uv].name);
}

/* A workload of one row: value ku of the summarised variant, kp of the peers. */
static void summary_one(const char *what, int ku, int kp)
{
	struct sum_row row;
	int uv = sum_variant();
	summary_add(what, uv, "", "", &row, sum_row_from(&row, "", uv, ku, kp));
}

/* The same for the variant named name (uslab's malloc rows), if it ran. */
static void summary_one_of(const char *what, const char *name, int ku, int kp)
{
	struct sum_row row;
	int uv = find_variant(name);
	if (uv >= 0)
		summary_add(what, uv, "", "", &row, sum_row_from(&row, "", uv, ku, kp));
}

static void print_summary(void)
{
	if (!nsum)
		return;
	printf("\n== summary: %s (the default) against the best peer of each row; uslab/best = uslab's median / "
	       "the best peer's median, lower is better: below 1.00 uslab leads (is faster), above 1.00 it trails ==\n",
	       variants[0].name);
	for (int i = 0; i < nsum; i++)
		printf("%s\n", sum_lines[i]);
}

static void ratio_header(void)
{
	printf("  %-10s  %-10s  %-10s  %-10s", "/glibc", "/jemalloc", "/tcmalloc", "/mimalloc");
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

/* The floor of the single loop: the same batches calling two empty functions
 * through pointers (as the peers' malloc and free are called). Any allocator's
 * pair costs at least this; printed under the table so ratios can be read
 * against it. */
__attribute__((noinline)) static void *floor_alloc(size_t n)
{
	static char obj[256];
	__asm__ __volatile__("" : : "r"(n) : "memory");
	return obj;
}
__attribute__((noinline)) static void floor_free(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}
static alloc_fn volatile floor_alloc_p = floor_alloc;
static free_fn volatile floor_free_p = floor_free;

static void call_floor(long iters, double *ns_out, double *tk_out)
{
	single_batches(floor_alloc_p, floor_free_p, iters / BATCHES, ns_out, tk_out);
}

static const char *plural(int n)
{
	return n == 1 ? "" : "s";
}

static void bench_single(int runs, long iters)
{
	double fns[64], ftk[64], fn, ft;
	int nf = runs < 64 ? runs : 64;
	begin_scenario_of("single");
	measure_n("single", iters, runs, 2, 2);
	printf("\n== single: 256-byte alloc+free pair; ns and ticks (TSC) per pair, lower is better; "
	       "%ld pairs in %d batches, median batch, median of %d run%s ==\n", iters, BATCHES, runs, plural(runs));
	printf("uslab: kmem_cache_alloc/kmem_cache_free; uslab malloc and peers: malloc(256)/free\n");
	ratio_legend("/glibc .. /mimalloc", "ns");
	printf("%-*s %9s %11s", NAMEW, "allocator", "ns/pair", "ticks/pair");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.2f %11.1f");
	data_rows("single", "ns/pair", -1, 0);
	data_rows("single", "ticks/pair", -1, 1);
	for (int r = 0; r < nf; r++)
		call_floor(iters, &fns[r], &ftk[r]);
	qsort(fns, (size_t)nf, sizeof(double), cmp_d);
	qsort(ftk, (size_t)nf, sizeof(double), cmp_d);
	fn = fns[nf / 2];
	ft = ftk[nf / 2];
	if (data_file)
		fprintf(data_file, "uslab-bench\tsingle\t(floor: 2 empty calls)\tns/pair\t\t%.4f\t%.4f\t%.4f\t%d\n", fn,
		        fns[0], fns[nf - 1], nf);
	printf("%-*s %9.2f %11.1f", NAMEW, "(floor: 2 empty calls)", fn, ft);
	ratios(fn, 0);
	printf("\n");
	print_footer();
	summary_one("single (ns/pair)", 0, 0);
	summary_one_of("single, malloc (ns/pair)", "uslab malloc", 0, 0);
}

/* nalloc's cells: per size, value a / value b, as "24/29" or "0.77/1.25". */
static void nalloc_cell(double a, double b, int ratio)
{
	if (ratio)
		printf(" %5.2f/%-5.2f", a, b);
	else
		printf(" %5.0f/%-5.0f", a, b);
}

/* nalloc's summary: one line for the allocations, one for the frees (op 0, 1). */
static void nalloc_summary(void)
{
	struct sum_row rows[NSIZES];
	int uv = sum_variant();
	for (int op = 0; op < 2; op++) {
		int n = 0;
		for (unsigned s = 0; s < NSIZES; s++) {
			char at[16];
			snprintf(at, sizeof(at), "%u", nalloc_sizes[s]);
			n += sum_row_from(&rows[n], at, uv, 2 * (int)s + op, 2 * (int)s + op);
		}
		summary_add(op ? "nalloc free (ticks/call)" : "nalloc alloc (ticks/call)", uv, "", " B", rows, n);
	}
}

#define RATIOW 28   /* width of the name column of nalloc's rows */

/* The sizes over nalloc's cells, each over its cell's first number. */
static void nalloc_sizes_header(void)
{
	printf("%-*s", RATIOW, "size (bytes)");
	for (unsigned s = 0; s < NSIZES; s++)
		printf(" %5u%6s", nalloc_sizes[s], "");
	printf("\n");
}

/* One row per allocator of A/F cells (nalloc and seed003, the table's name
 * in the data lines). */
static void nalloc_rows(const char *table)
{
	for (unsigned s = 0; s < NSIZES; s++) {
		data_rows(table, "ticks/alloc", nalloc_sizes[s], 2 * (int)s);
		data_rows(table, "ticks/free", nalloc_sizes[s], 2 * (int)s + 1);
	}
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-*s", RATIOW, variants[v].name);
		if (!ran(v))
			printf(" FAILED");
		for (unsigned s = 0; s < NSIZES && ran(v); s++)
			nalloc_cell(medians[v][2 * s], medians[v][2 * s + 1], 0);
		printf("\n");
	}
}

static void bench_nalloc(int runs, long n)
{
	begin_scenario();
	measure_n("nalloc", n, runs, 2 * (int)NSIZES, 2 * (int)NSIZES);
	printf("\n== nalloc (seed 003's \"Kmalloc N*alloc N*free(size)\"): %ld allocations each timed, then %ld frees "
	       "each timed, %d times; ticks (TSC) per call, lower is better; median of %d run%s ==\n", n, n, NALLOC_REPS,
	       runs, plural(runs));
	printf("uslab: kmem_cache of that size; peers: malloc(size)/free. Ticks include rdtsc itself.\n");
	printf("each cell: A/F = average ticks per allocation / average ticks per free (the seed's \"Average=A/F\")\n");
	nalloc_sizes_header();
	nalloc_rows("nalloc");
	int tc = find_variant("tcmalloc");
	printf("\nratios uslab / peer at each size, alloc/free (below 1.00: uslab is faster; above 1.00: slower); "
	       "\"/ best peer\": the fastest peer at that size and operation, \"/ tcmalloc\": tcmalloc's numbers\n");
	nalloc_sizes_header();
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].uslab || !ran(v))
			continue;
		char name[64];
		snprintf(name, sizeof(name), "%s / best peer", variants[v].tag);
		printf("%-*s", RATIOW, name);
		for (unsigned s = 0; s < NSIZES; s++) {
			double ba = best_peer(2 * (int)s), bf = best_peer(2 * (int)s + 1);
			if (ba > 0 && bf > 0)
				nalloc_cell(medians[v][2 * s] / ba, medians[v][2 * s + 1] / bf, 1);
			else
				printf(" %11s", "-");
		}
		printf("\n");
		if (tc >= 0) {
			snprintf(name, sizeof(name), "%s / tcmalloc", variants[v].tag);
			printf("%-*s", RATIOW, name);
			for (unsigned s = 0; s < NSIZES; s++)
				nalloc_cell(medians[v][2 * s] / medians[tc][2 * s],
				            medians[v][2 * s + 1] / medians[tc][2 * s + 1], 1);
			printf("\n");
		}
	}
	print_footer();
	nalloc_summary();
}


/* Seed 003's table: N*alloc N*free through kmalloc with both CPUs at once;
 * SLAB with its colour advanced without the node lock (the seed's "after",
 * the default) and under it (its "before"). */
static void bench_seed003(int runs, long n)
{
	begin_scenario_of("seed003");
	measure_n("seed003", n, runs, 2 * (int)NSIZES, 2 * (int)NSIZES);
	printf("\n== seed003 (seed 003's \"Kmalloc N*alloc N*free(size)\", both CPUs at once): a thread on each of "
	       "two CPUs does %ld kmalloc (peers: malloc) then %ld frees, each timed, %d times; ticks (TSC) per call, "
	       "lower is better; median of %d run%s ==\n", n, n, NALLOC_REPS, runs, plural(runs));
	printf("each cell: A/F = average ticks per allocation / per free over both threads; \"slab, colour locked\": "
	       "SLAB with the colour advanced under the node lock (the seed's before), \"slab (rseq)\": without it "
	       "(after)\n");
	nalloc_sizes_header();
	nalloc_rows("seed003");
	int after = find_variant("uslab slab (rseq)"), before = find_variant("uslab slab, colour locked");
	if (after >= 0 && before >= 0 && ran(after) && ran(before)) {
		printf("%-*s", RATIOW, "after / before (slab)");
		for (unsigned s = 0; s < NSIZES; s++)
			nalloc_cell(medians[after][2 * s] / medians[before][2 * s],
			            medians[after][2 * s + 1] / medians[before][2 * s + 1], 1);
		printf("\n(below 1.00: the racy colour is faster; the seed saw about 0.85 on allocation from 1024 bytes up)\n");
	}
	print_footer();
}

/* What colouring buys on this CPU: SLAB with and without colour, SLUB and the
 * peers for reference. */
/* Seed 000's second table: the detached freelists of its first version
 * ("simple": consecutive objects of one slab, USLAB_BULK_LOOKAHEAD=1) against
 * the look-ahead of 3 (the default), with sheaves (bulk frees fill the sheaves
 * and full ones are flushed to the slabs by detached freelists) and without
 * (every bulk free builds them); runs processes each, mean, standard deviation
 * and range, as the seed gave them. */
#define DETACHED_MAXRUNS 100
static void bench_detached(int runs, long total)
{
	static const char *const rows[4] = { "uslab sheaves (rseq)", "uslab sheaves, simple", "uslab cpu-slab (rseq)",
		                             "uslab cpu-slab, simple" };
	static double val[4][DETACHED_MAXRUNS][NDETACHED];
	int vi[4], n[4] = { 0, 0, 0, 0 };
	const char *names[NVAR];
	char arg[32];

	begin_scenario_of("detached");
	for (int v = 0; v < NVAR; v++)
		names[v] = NULL;
	for (int i = 0; i < 4; i++) {
		vi[i] = -1;
		for (int v = 0; v < NVAR; v++)
			if (!strcmp(variants[v].name, rows[i]) && variants[v].present)
				vi[i] = v;
		if (vi[i] >= 0)
			names[vi[i]] = variants[vi[i]].tag;
	}
	snprintf(arg, sizeof(arg), "%ld", total);
	progress_begin("detached", runs, names, NVAR);
	for (int r = 0; r < runs; r++) {
		progress_run(r);
		for (int i = 0; i < 4; i++) {
			if (vi[i] < 0)
				continue;
			ntried[vi[i]]++;
			if (run_child(vi[i], "detached", arg, (int)NDETACHED, val[i][n[i]]) == (int)NDETACHED)
				n[i]++;
			else
				nfail[vi[i]]++;
		}
	}
	progress_end();
	printf("\n== detached (seed 000's second table): kmem_cache_alloc_bulk + kmem_cache_free_bulk of N 256-byte "
	       "objects, %ld objects per N per run; cycles (TSC) per object, lower is better; %d runs (processes) each: "
	       "mean, standard deviation, least..greatest ==\n", total, runs);
	printf("simple: the detached freelist gathers consecutive objects of one slab only (USLAB_BULK_LOOKAHEAD=1); "
	       "look-ahead: it passes up to 3 objects of other slabs (the default); \"look-ahead - simple\": the "
	       "difference of the means (the seed measured +2 cycles at 16 up to +27 at 2048)\n");
	for (int pair = 0; pair < 2; pair++) {
		int la = 2 * pair, si = 2 * pair + 1;
		printf("-- %s\n", pair ? "sheaves off (USLAB_SHEAVES=0)" : "sheaves on (the default)");
		for (unsigned k = 0; k < NDETACHED; k++) {
			double mean[2] = { 0, 0 }, sd[2] = { 0, 0 }, lo[2] = { 0, 0 }, hi[2] = { 0, 0 };
			for (int j = 0; j < 2; j++) {
				int i = j ? la : si, m = n[i];
				for (int r = 0; r < m; r++) {
					double x = val[i][r][k];
					mean[j] += x / m;
					lo[j] = r && lo[j] < x ? lo[j] : x;
					hi[j] = r && hi[j] > x ? hi[j] : x;
				}
				for (int r = 0; r < m; r++)
					sd[j] += (val[i][r][k] - mean[j]) * (val[i][r][k] - mean[j]) / (m > 1 ? m - 1 : 1);
				sd[j] = sqrt(sd[j]);
				if (data_file && m)
					fprintf(data_file, "uslab-bench\tdetached\t%s\tcycles/object\t%u\t%.4f\t%.4f\t%.4f\t%d\n",
					        variants[vi[i]].name, detached_sizes[k], mean[j], lo[j], hi[j], m);
			}
			if (!n[la] || !n[si]) {
				printf("bulk size:%u FAILED\n", detached_sizes[k]);
				continue;
			}
			printf("bulk size:%u, look-ahead - simple: %+.2f cycles\n", detached_sizes[k], mean[1] - mean[0]);
			printf("  simple:     between %.0f-%.0f (average: %.2f stddev:+/-%.1f)\n", lo[0], hi[0], mean[0], sd[0]);
			printf("  look-ahead: between %.0f-%.0f (average: %.2f stddev:+/-%.1f)\n", lo[1], hi[1], mean[1], sd[1]);
		}
	}
	print_footer();
}

/* Seed 001's messaging workload: time per message for every allocator, then
 * uslab's slab-layer counters per 1000 messages (a second set of runs with
 * USLAB_STATS, SLUB only: SLAB has no such paths). */
static void bench_messaging(int runs, long loops)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", loops);
	begin_scenario_of("messaging");
	measure("messaging", "messaging", arg, runs, 2, 2);
	printf("\n== messaging (seed 001's \"perf bench sched messaging -g %d -t\"): %d groups of %d sender and %d "
	       "receiver threads, each sender sends %ld messages of %d bytes to each receiver of its group through "
	       "pipes (the receiver frees what the sender allocated); wall seconds and ns per message, lower is "
	       "better; median of %d run%s ==\n", MSG_GROUPS, MSG_GROUPS, MSG_SIDE, MSG_SIDE, loops, MSG_SIZE, runs,
	       plural(runs));
	printf("uslab: kmalloc/kfree; uslab malloc and peers: malloc/free. Most of the time is the pipes' system "
	       "calls, as in the kernel's benchmark\n");
	ratio_legend("/glibc .. /mimalloc", "seconds");
	printf("%-*s %9s %9s", NAMEW, "allocator", "seconds", "ns/msg");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.3f %9.0f");
	print_footer();
	data_rows("messaging", "seconds", -1, 0);
	summary_one("messaging (seconds)", 0, 0);

	/* The counters: uslab's SLUB rows only, with USLAB_STATS (slabinfo at
	 * exit to /dev/null). */
	begin_scenario_of("messaging");
	for (int v = 0; v < NVAR; v++)
		if (!variants[v].uslab || variants[v].engine || variants[v].exe)
			variants[v].present = 0;
	setenv("USLAB_STATS", "/dev/null", 1);
	measure("messaging counters", "messaging", arg, runs < 3 ? runs : 3, 6, 2);
	unsetenv("USLAB_STATS");
	printf("-- the kmalloc caches' counters per 1000 messages (USLAB_STATS; median of %d run%s): cmpxchg_double: "
	       "slab {freelist, counters} CAS tried; list_lock: node list_lock taken by the allocation and free "
	       "paths; free_slowpath, alloc_slowpath: the kernel's counters. uslab has only the state machine after "
	       "the seed (CPU partial slabs not frozen), so there is no before to set beside it; with sheaves the "
	       "CPUs' sheaves take most frees off the slabs\n", runs < 3 ? runs : 3, plural(runs < 3 ? runs : 3));
	printf("%-*s %14s %9s %13s %14s\n", NAMEW, "allocator", "cmpxchg_double", "list_lock", "free_slowpath",
	       "alloc_slowpath");
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		if (!ran(v)) {
			printf("%-*s FAILED\n", NAMEW, variants[v].name);
			continue;
		}
		printf("%-*s %14.2f %9.2f %13.2f %14.2f\n", NAMEW, variants[v].name, medians[v][2], medians[v][3],
		       medians[v][4], medians[v][5]);
	}
	static const char *const cn[4] = { "cmpxchg_double/1000 msgs", "list_lock/1000 msgs",
		                           "free_slowpath/1000 msgs", "alloc_slowpath/1000 msgs" };
	for (int i = 0; i < 4; i++)
		data_rows("messaging counters", cn[i], -1, 2 + i);
	print_footer();
}

static void bench_colour(int runs, long reads)
{
	begin_scenario_of("colour");
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", reads);
	measure("colour", "colour", arg, runs, (int)NCOLOUR, (int)NCOLOUR);
	printf("\n== colour: M objects of 3072 bytes, the first cache line of each read in turn, %ld reads per M; "
	       "ns per read (best of 5 passes), lower is better; median of %d run%s ==\n", reads, runs, plural(runs));
	printf("uslab: kmem_cache \"colour-3072\" (SLAB: slabs of two objects, 32 colours of 64 bytes); peers: "
	       "malloc(3072)\n%-*s", RATIOW, "M (objects)");
	for (unsigned k = 0; k < NCOLOUR; k++)
		printf(" %8u", colour_ms[k]);
	printf("\n");
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-*s", RATIOW, variants[v].name);
		if (!ran(v))
			printf(" FAILED");
		for (unsigned k = 0; k < NCOLOUR && ran(v); k++)
			printf(" %8.3f", medians[v][k]);
		printf("\n");
	}
	for (unsigned k = 0; k < NCOLOUR; k++)
		data_rows("colour", "ns/read", colour_ms[k], (int)k);
	int on = find_variant("uslab slab (rseq)"), off = find_variant("uslab slab, no colour");
	if (on >= 0 && off >= 0 && ran(on) && ran(off)) {
		printf("%-*s", RATIOW, "colour on / off (slab)");
		for (unsigned k = 0; k < NCOLOUR; k++)
			printf(" %8.2f", medians[on][k] / medians[off][k]);
		printf("\n(below 1.00: colouring makes the reads faster)\n");
	}
	print_footer();
}

/* One bulk comparison table: the peers' ns per object, and per uslab variant its
 * value off (1: fallback ns, 3: bulk ns, of the 4 per size) and that over the
 * best peer. Adds the summary line what. */
static void bulk_table(const char *title, int off, const char *what)
{
	struct sum_row rows[NBULK];
	int uv = sum_variant(), nrows = 0;
	printf("-- %s; ns per object, lower is better; /best = uslab's ns / the best peer's ns at that N "
	       "(below 1.00: uslab is faster; above 1.00: slower)\n", title);
	printf("%5s", "N");
	for (int v = 0; v < NVAR; v++)
		if (!variants[v].uslab && variants[v].present)
			printf(" %9s", variants[v].tag);
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && variants[v].present)
			printf(" %16s", variants[v].tag);
	printf("\n%5s", "");
	for (int v = 0; v < NVAR; v++)
		if (!variants[v].uslab && variants[v].present)
			printf(" %9s", "ns");
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && variants[v].present)
			printf(" %9s %6s", "ns", "/best");
	printf("\n");
	for (unsigned k = 0; k < NBULK; k++) {
		double best = best_peer(2 * (int)k + 1);
		char at[16];
		snprintf(at, sizeof(at), "%u", bulk_sizes[k]);
		nrows += sum_row_from(&rows[nrows], at, uv, 4 * (int)k + off, 2 * (int)k + 1);
		printf("%5u", bulk_sizes[k]);
		for (int v = 0; v < NVAR; v++) {
			if (variants[v].uslab || !variants[v].present)
				continue;
			if (ran(v))
				printf(" %9.3f", medians[v][2 * k + 1]);
			else
				printf(" %9s", "FAILED");
		}
		for (int v = 0; v < NVAR; v++) {
			if (!variants[v].uslab || !variants[v].present)
				continue;
			double x = medians[v][4 * k + off];
			if (!ran(v))
				printf(" %16s", "FAILED");
			else if (best > 0)
				printf(" %9.3f %6.2f", x, x / best);
			else
				printf(" %9.3f %6s", x, "-");
		}
		printf("\n");
	}
	summary_add(what, uv, "N=", "", rows, nrows);
}

/* Bulk against fallback, variant v, bulk size k: in words, from the cycles
 * (as the seed's "improved" column was). */
static const char *bulk_vs_fallback(char *buf, size_t n, int v, unsigned k)
{
	return in_words(buf, n, medians[v][4 * k + 2] / medians[v][4 * k], "slower", "faster");
}

/* The seed's table for variant v: both ways, cycles and ns, and bulk against fallback. */
static void bulk_seed_table(int v)
{
	char w[32];
	printf("-- %s: fallback = N x kmem_cache_alloc, N x kmem_cache_free; bulk = kmem_cache_alloc_bulk + "
	       "kmem_cache_free_bulk; last column: bulk against fallback (cycles)\n", variants[v].name);
	printf("  N -   fallback per object    -     bulk per object       - bulk against fallback\n");
	for (unsigned k = 0; k < NBULK; k++) {
		double ft = medians[v][4 * k], fn = medians[v][4 * k + 1];
		double bt = medians[v][4 * k + 2], bn = medians[v][4 * k + 3];
		printf("%3u - %4.0f cycles(tsc) %6.3f ns - %4.0f cycles(tsc) %6.3f ns - bulk %s\n", bulk_sizes[k], ft, fn,
		       bt, bn, bulk_vs_fallback(w, sizeof(w), v, k));
	}
}

/* For the locked variants, only the seed's last column, side by side (the ns
 * behind it are in the tables that follow). */
static void bulk_locked_table(void)
{
	char w[32];
	int any = 0;
	for (int v = 0; v < NVAR; v++)
		any |= variants[v].uslab && variants[v].present && variants[v].rseq && !strcmp(variants[v].rseq, "0");
	if (!any)
		return;
	printf("-- locked variants: bulk against fallback (cycles), per N\n%5s", "N");
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && variants[v].present && variants[v].rseq && !strcmp(variants[v].rseq, "0"))
			printf("  %-16s", variants[v].tag);
	printf("\n");
	for (unsigned k = 0; k < NBULK; k++) {
		printf("%5u", bulk_sizes[k]);
		for (int v = 0; v < NVAR; v++)
			if (variants[v].uslab && variants[v].present && variants[v].rseq && !strcmp(variants[v].rseq, "0"))
				printf("  %-16s", ran(v) ? bulk_vs_fallback(w, sizeof(w), v, k) : "FAILED");
		printf("\n");
	}
}

static void bench_bulk(int runs, long n)
{
	begin_scenario_of("bulk");
	measure_n("bulk", n, runs, 4 * (int)NBULK, 2 * (int)NBULK);
	printf("\n== bulk (seed 000): 256-byte objects, N allocated then N freed; cycles (TSC) and ns per object "
	       "(one alloc + one free), lower is better; %ld objects per size, median of %d run%s ==\n", n, runs,
	       plural(runs));
	/* The seed's own table for the rseq variants; for the locked ones only its
	 * last column. */
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].uslab || !variants[v].present)
			continue;
		if (!ran(v))
			printf("-- %s: FAILED\n", variants[v].name);
		else if (!variants[v].rseq || strcmp(variants[v].rseq, "0"))
			bulk_seed_table(v);
	}
	bulk_locked_table();
	printf("peers: N x malloc(256), N x free\n");
	bulk_table("uslab bulk = kmem_cache_alloc_bulk + kmem_cache_free_bulk", 3, "bulk, bulk API (ns/object)");
	bulk_table("uslab fallback = N x kmem_cache_alloc, N x kmem_cache_free", 1, "bulk, fallback (ns/object)");
	for (unsigned k = 0; k < NBULK; k++) {
		char at[16];
		snprintf(at, sizeof(at), "%u", bulk_sizes[k]);
		for (int v = 0; v < NVAR; v++) {
			if (variants[v].uslab) {
				data_row("bulk", v, "fallback ns/object", at, 4 * (int)k + 1);
				data_row("bulk", v, "bulk ns/object", at, 4 * (int)k + 3);
				data_row("bulk", v, "fallback cycles/object", at, 4 * (int)k);
				data_row("bulk", v, "bulk cycles/object", at, 4 * (int)k + 2);
			} else {
				data_row("bulk", v, "malloc ns/object", at, 2 * (int)k + 1);
				data_row("bulk", v, "malloc cycles/object", at, 2 * (int)k);
			}
		}
	}
	print_footer();
}

static void bench_remote(int runs, long n)
{
	begin_scenario();
	measure_n("remote", n, runs, 1, 1);
	printf("\n== remote: one thread allocates 256 bytes, another frees them (through a ring); ns per object, "
	       "lower is better; %ld objects, median of %d run%s ==\n", n, runs, plural(runs));
	ratio_legend("/glibc .. /mimalloc", "ns");
	printf("%-*s %9s", NAMEW, "allocator", "ns/object");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.2f");
	data_rows("remote", "ns/object", -1, 0);
	print_footer();
	summary_one("remote (ns/object)", 0, 0);
}

/* random-free at two working-set sizes: 2.5 MB (about the last-level cache)
 * and 256 MB (far beyond it). One child per variant per N. */
static void bench_random_free(int runs, int quick)
{
	static const long rf_n[2] = { 10000, 1000000 };
	static const char *const rf_what[2] = { "random-free N=10k", "random-free N=1M" };
	/* Rounds: a 10k round costs 0.1-0.7 ms (10-70 ns per object), so 500
	 * rounds are at most ~0.35 s per child; a 1M round costs 0.05-0.6 s of
	 * cache and TLB misses, so 5 rounds plus the set-up are ~0.5-3.5 s. The
	 * median round is printed. --quick: 100 and 3. */
	const long rf_rounds[2] = { quick ? 100 : 500, quick ? 3 : 5 };
	double val[2][NVAR];
	int ok[2][NVAR];
	int mi = -1;

	begin_scenario();
	for (int i = 0; i < 2; i++) {
		char arg[48], what[48];
		snprintf(arg, sizeof(arg), "%ld:%ld", rf_n[i], rf_rounds[i]);
		measure(rf_what[i], "random-free", arg, runs, 1, 1);
		data_rows("random-free", "ns/object", rf_n[i], 0);
		for (int v = 0; v < NVAR; v++) {
			ok[i][v] = ran(v);
			val[i][v] = medians[v][0];
		}
		snprintf(what, sizeof(what), "%s (ns/object)", rf_what[i]);
		summary_one(what, 0, 0);
		snprintf(what, sizeof(what), "%s, malloc (ns/object)", rf_what[i]);
		summary_one_of(what, "uslab malloc", 0, 0);
	}
	printf("\n== random-free: N live 256-byte objects; per round all N freed in a random order "
	       "(shuffle untimed), then N allocated and each written once; ns per object (free + alloc), "
	       "lower is better; median round, median of %d run%s ==\n", runs, plural(runs));
	printf("uslab: kmem_cache \"rf-256\" (kmem_cache_free/kmem_cache_alloc); peers: free/malloc(256); "
	       "rounds: %ld at N=%ld, %ld at N=%ld\n", rf_rounds[0], rf_n[0], rf_rounds[1], rf_n[1]);
	printf("10k/best, 1M/best: this row's ns / the best peer's at that N; 10k/mimalloc, 1M/mimalloc: this row's ns / "
	       "mimalloc's (below 1.00: this row is faster; above 1.00: slower)\n");
	double best[2] = { 0, 0 };
	for (int i = 0; i < 2; i++)
		for (int v = 0; v < NVAR; v++)
			if (variants[v].peer && ok[i][v] && val[i][v] > 0 && (best[i] == 0 || val[i][v] < best[i]))
				best[i] = val[i][v];
	for (int v = 0; v < NVAR; v++)
		if (!strcmp(variants[v].name, "mimalloc") && variants[v].present)
			mi = v;
	printf("%-*s %9s %9s %12s %12s %12s %12s\n", NAMEW, "allocator", "N=10k", "N=1M",
	       "10k/best", "10k/mimalloc", "1M/best", "1M/mimalloc");
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-*s", NAMEW, variants[v].name);
		for (int i = 0; i < 2; i++)
			if (ok[i][v])
				printf(" %9.2f", val[i][v]);
			else
				printf(" %9s", "FAILED");
		for (int i = 0; i < 2; i++) {
			if (ok[i][v] && best[i] > 0)
				printf(" %12.2f", val[i][v] / best[i]);
			else
				printf(" %12s", "-");
			if (ok[i][v] && mi >= 0 && ok[i][mi] && val[i][mi] > 0)
				printf(" %12.2f", val[i][v] / val[i][mi]);
			else
				printf(" %12s", "-");
		}
		printf("\n");
	}
	print_footer();
}

static const char *const scenarios[] = { "single", "nalloc", "bulk", "detached", "remote", "random-free",
	                                  "seed003", "messaging", "colour", "all" };

static void usage(FILE *f)
{
	fprintf(f, "usage: uslab-bench [single|nalloc|bulk|detached|remote|random-free|seed003|messaging|colour|all] "
	           "[--runs N] [--quick] "
	           "[--data FILE]\n"
	           "  --runs N     child runs per allocator and scenario, 1..%d (default 7); medians are printed\n"
	           "  --quick      smaller counts (single, bulk, remote, random-free)\n"
	           "  --data FILE  also append every median, with the least and greatest run, to FILE (tab-separated:\n"
	           "               program, table, allocator, metric, x, median, min, max, runs)\n", MAXRUNS);
}

/* What every table has in common, printed once at the top. */
static void how_to_read(FILE *f)
{
	fprintf(f, "How to read: each number is a median over runs (a process per allocator per run); times "
	           "(ns, TSC ticks or cycles) are per operation, lower is better. A ratio a/b below 1.00 means a is faster "
	           "than b, above 1.00 slower. The summary at the end compares uslab with the best peer of each row. "
	           "Progress goes to stderr.\n");
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "--child")) {
		use_uslab = !strcmp(argv[3], "uslab");
		if (use_uslab && !USLAB_LOADED) {
			fprintf(stderr, "uslab-bench: the uslab API is not loaded (run with LD_PRELOAD=%s)\n", USLAB_SO_PATH);
			return 3;
		}
#ifndef BENCH_STATIC
		if (!use_uslab && USLAB_LOADED)      /* malloc served by uslab: say so, and how */
			printf("uslab-malloc %s %s\n", uslab_percpu_mode(), uslab_allocator());
#endif
		char *end;
		long n = strtol(argv[4], &end, 10);
		if (!strcmp(argv[2], "single"))
			child_single(n);
		else if (!strcmp(argv[2], "nalloc"))
			child_nalloc(n, NALLOC_REPS);
		else if (!strcmp(argv[2], "remote"))
			child_remote(n);
		else if (!strcmp(argv[2], "bulk"))
			child_bulk(n);
		else if (!strcmp(argv[2], "seed003"))
			child_seed003(n);
		else if (!strcmp(argv[2], "detached"))
			child_detached(n);
		else if (!strcmp(argv[2], "messaging"))
			child_messaging(n);
		else if (!strcmp(argv[2], "colour"))
			child_colour(n);
		else if (!strcmp(argv[2], "random-free")) {
			long rounds = *end == ':' ? atol(end + 1) : 1;
			child_random_free(n, rounds > 0 ? rounds : 1);
		} else
			return 2;
		return 0;
	}

	const char *what = "all";
	int runs = 7, quick = 0, known = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
			if (!(data_file = fopen(argv[++i], "ae"))) {
				fprintf(stderr, "uslab-bench: %s: %s\n", argv[i], strerror(errno));
				return 2;
			}
			setvbuf(data_file, NULL, _IOLBF, 0);
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			how_to_read(stdout);
			return 0;
		} else if (argv[i][0] != '-')
			what = argv[i];
		else
			goto usage;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		known |= !strcmp(what, scenarios[i]);
	if (!known)
		goto usage;
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
	snprintf(static_path, sizeof(static_path), "%s-static", self_path);
	for (int v = 0; v < NVAR; v++)
		if (variants[v].exe && access(static_path, X_OK) != 0) {
			fprintf(stderr, "note: %s not built; the row %s is skipped\n", static_path, variants[v].name);
			variants[v].present = 0;
		}
	for (int v = 0; v < NVAR; v++) {
		if (variants[v].preload && access(variants[v].preload, R_OK) != 0) {
			fprintf(stderr, "note: %s not installed (%s); its column is skipped\n", variants[v].name,
			        variants[v].preload);
			variants[v].present = 0;
		}
		installed[v] = variants[v].present;
	}
	printf("uslab-bench: %ld CPUs online; uslab = LD_PRELOAD=%s (its kmem_cache_* calls through the PLT, its "
	       "malloc as the peers'), the peers by LD_PRELOAD\n", sysconf(_SC_NPROCESSORS_ONLN), USLAB_SO_PATH);
	how_to_read(stdout);
	/* Default counts: `all` with --runs 7 took 280 s on the 2-CPU machine with
	 * 8 variants (bulk is the largest part), well under 10 minutes, so no count
	 * was lowered when the variants went from 6 to 8. */
	int all = !strcmp(what, "all");
	/* Progress steps: one a measure(), two for random-free (two sizes). */
	progress_total(all ? 11 : !strcmp(what, "random-free") || !strcmp(what, "messaging") ? 2 : 1);
	if (all || !strcmp(what, "single"))
		bench_single(runs, quick ? 2000000 : 20000000);
	if (all || !strcmp(what, "nalloc"))
		bench_nalloc(runs, 10000);
	if (all || !strcmp(what, "bulk"))
		bench_bulk(runs, quick ? 1000000 : 10000000);
	/* 100 runs as the seed's (20 quick): each process about 50 ms. */
	if (all || !strcmp(what, "detached"))
		bench_detached(quick ? 20 : DETACHED_MAXRUNS, quick ? 400000 : 2000000);
	if (all || !strcmp(what, "remote"))
		bench_remote(runs, quick ? 500000 : 4000000);
	if (all || !strcmp(what, "random-free"))
		bench_random_free(runs, quick);
	if (all || !strcmp(what, "seed003"))
		bench_seed003(runs, 10000);
	if (all || !strcmp(what, "messaging"))
		bench_messaging(runs, quick ? 50 : 250);
	if (all || !strcmp(what, "colour"))
		bench_colour(runs, quick ? 2000000 : 20000000);
	print_summary();
	return 0;
usage:
	usage(stderr);
	return 2;
}
