/* random_free.c - N live 256-byte objects freed in a random order and
 * allocated again, all of them (random-free) or a random half each round
 * (partial-drain), at two working-set sizes. */
#include "seed.h"

/* random-free: N live 256-byte objects, then rounds of "free all N in a random
 * order, allocate N again". Unlike the LIFO loops above, the frees land on
 * objects scattered over many slabs (pages), so this measures the slow paths
 * and the cache misses of a real working set. The shuffle (a fixed-seed
 * xorshift, the same sequence for every variant) is outside the timed region;
 * each object gets one store after allocation so that an allocator is not
 * rewarded for never touching its memory. Prints the median round's ns per
 * object (one free + one alloc).
 *
 * partial-drain: the same N live objects, but each round frees a random half
 * of them (the last N/2 places of a partial Fisher-Yates shuffle of the
 * pointers, so a uniformly random half in a random order, drawn outside the
 * timed region) and allocates that half again, each new block written once.
 * The other half stays live, so every slab (page, span) keeps about half its
 * objects: no slab empties, and the allocations must refill from partly used
 * slabs, where random-free's empty the working set and refill it from scratch.
 * Prints the median round's ns per freed and reallocated block. */

/* One child of either workload: n live objects, rounds rounds, each freeing
 * and allocating again the last k of v after the last k places of a
 * Fisher-Yates shuffle (k = n: the whole of v, random-free). */
static void child_shuffle_free(const char *cache_name, long n, long k, long rounds)
{
	void **v = calloc((size_t)n, sizeof(void *));
	double *ns = calloc((size_t)rounds, sizeof(double));
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	alloc_fn m = sys_malloc;
	free_fn f = sys_free;
	if (!v || !ns || k < 1 || k > n)
		exit(3);
	if (use_uslab) {
		cache = kmem_cache_create(cache_name, 256, 0, 0, NULL);
		report_path(cache);
	}
	for (long i = 0; i < n; i++) {
		v[i] = use_uslab ? kmem_cache_alloc(cache, GFP_KERNEL) : m(256);
		*(long *)v[i] = i;
	}
	void **h = v + (n - k);       /* the part freed and allocated again */
	for (long r = 0; r < rounds; r++) {
		for (long i = n - 1; i >= n - k && i > 0; i--) {
			long j = (long)(xorshift64(&seed) % (uint64_t)(i + 1));
			void *t = v[i];
			v[i] = v[j];
			v[j] = t;
		}
		double t0 = now_ns();
		if (use_uslab) {
			for (long i = 0; i < k; i++)
				kmem_cache_free(cache, h[i]);
			for (long i = 0; i < k; i++) {
				h[i] = kmem_cache_alloc(cache, GFP_KERNEL);
				*(long *)h[i] = i;
			}
		} else {
			for (long i = 0; i < k; i++)
				f(h[i]);
			for (long i = 0; i < k; i++) {
				h[i] = m(256);
				*(long *)h[i] = i;
			}
		}
		ns[r] = (now_ns() - t0) / (double)k;
	}
	qsort(ns, (size_t)rounds, sizeof(double), cmp_double);
	printf("%.3f\n", ns[rounds / 2]);
}

void child_random_free(long n, long rounds)
{
	child_shuffle_free("rf-256", n, n, rounds);
}

void child_partial_drain(long n, long rounds)
{
	child_shuffle_free("pd-256", n, n / 2 > 0 ? n / 2 : 1, rounds);
}

/* Each workload at two working-set sizes: 2.5 MB (about the last-level cache)
 * and 256 MB (far beyond it). One child per variant per N. */
struct shuffle_bench {
	const char *scenario;          /* the child's and --data's name */
	const char *unit;              /* --data's metric, and the table's unit */
	const char *cache;             /* uslab's cache */
	const char *title;             /* the table's header, after the name */
	const char *per;               /* what one number is per */
};

static void shuffle_table(const struct shuffle_bench *b, int runs, int quick)
{
	static const long rf_n[2] = { 10000, 1000000 };
	/* Rounds: a 10k round costs 0.1-0.7 ms (10-70 ns per object), so 500
	 * rounds are at most ~0.35 s per child; a 1M round costs 0.05-0.6 s of
	 * cache and TLB misses, so 5 rounds plus the set-up are ~0.5-3.5 s. The
	 * median round is printed. --quick: 100 and 3. partial-drain's rounds
	 * free and allocate half as many, in half the time. */
	const long rf_rounds[2] = { quick ? 100 : 500, quick ? 3 : 5 };
	double val[2][NVAR];
	int ok[2][NVAR];
	int mi = -1;

	begin_scenario();
	for (int i = 0; i < 2; i++) {
		char arg[48], what[64], step[48];
		snprintf(step, sizeof(step), "%s N=%s", b->scenario, i ? "1M" : "10k");
		snprintf(arg, sizeof(arg), "%ld:%ld", rf_n[i], rf_rounds[i]);
		measure(step, b->scenario, arg, runs, 1, 1);
		data_rows(b->scenario, b->unit, rf_n[i], 0);
		for (int v = 0; v < NVAR; v++) {
			ok[i][v] = ran(v);
			val[i][v] = medians[v][0];
		}
		snprintf(what, sizeof(what), "%s (%s)", step, b->unit);
		summary_one(what, 0, 0);
		snprintf(what, sizeof(what), "%s, malloc (%s)", step, b->unit);
		summary_one_of(what, "uslab malloc", 0, 0);
	}
	printf("\n== %s: %s; %s, lower is better; median round, median of %d run%s ==\n", b->scenario, b->title,
	       b->per, runs, plural(runs));
	printf("uslab: kmem_cache \"%s\" (kmem_cache_free/kmem_cache_alloc); uslab malloc and peers: free/malloc(256) "
	       "(LD_PRELOAD); rounds: %ld at N=%ld, %ld at N=%ld\n", b->cache, rf_rounds[0], rf_n[0], rf_rounds[1],
	       rf_n[1]);
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

void bench_random_free(int runs, int quick)
{
	static const struct shuffle_bench b = {
		"random-free", "ns/object", "rf-256",
		"N live 256-byte objects; per round all N freed in a random order (shuffle untimed), then N allocated "
		"and each written once",
		"ns per object (free + alloc)" };
	shuffle_table(&b, runs, quick);
}

void bench_partial_drain(int runs, int quick)
{
	static const struct shuffle_bench b = {
		"partial-drain", "ns/block", "pd-256",
		"N live 256-byte objects; per round a random half (N/2, chosen by a shuffle, untimed) freed in a random "
		"order, then N/2 allocated and each written once; the other half stays live",
		"ns per freed and reallocated block (free + alloc)" };
	shuffle_table(&b, runs, quick);
}
