/* random_free.c - N live 256-byte objects freed in a random order and
 * allocated again, at two working-set sizes. */
#include "common.h"

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

void child_random_free(long n, long rounds)
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

/* random-free at two working-set sizes: 2.5 MB (about the last-level cache)
 * and 256 MB (far beyond it). One child per variant per N. */
void bench_random_free(int runs, int quick)
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
