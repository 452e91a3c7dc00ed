/* nalloc.c - seed 003's "Kmalloc N*alloc N*free(size)": nalloc (each call
 * timed, one thread) and seed003 (through kmalloc, a thread on each of two CPUs
 * at once, SLAB's colour under the node lock and without it). */
#include "seed.h"

/* nalloc (seed 003): for each size, N allocations each timed, then N frees each
 * timed; average ticks per alloc and per free. */
static const unsigned int nalloc_sizes[] = { 32, 64, 128, 256, 512, 1024, 2048, 4096 };
#define NSIZES (sizeof(nalloc_sizes) / sizeof(nalloc_sizes[0]))

void child_nalloc(long n, int reps)
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

void child_seed003(long n)
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
		int ok = row_head(v);
		for (unsigned s = 0; s < NSIZES && ok; s++)
			nalloc_cell(medians[v][2 * s], medians[v][2 * s + 1], 0);
		printf("\n");
	}
}

void bench_nalloc(int runs, long n)
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
	int tc = find_variant("gperftools");
	printf("\nratios uslab / peer at each size, alloc/free (below 1.00: uslab is faster; above 1.00: slower); "
	       "\"/ best peer\": the fastest peer at that size and operation, \"/ gperftools\": gperftools' numbers\n");
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
			snprintf(name, sizeof(name), "%s / gperftools", variants[v].tag);
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
void bench_seed003(int runs, long n)
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
