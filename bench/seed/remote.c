/* remote.c - one thread allocates, another frees through a ring. */
#include "seed.h"

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

void child_remote(long n)
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

void bench_remote(int runs, long n)
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
