/* bulk.c - seed 000's and 002's bulk tables: N objects allocated and freed N
 * at a time, the bulk API against single calls (fallback), per object. */
#include "seed.h"

/* bulk (seed 000): for each bulk size N, objects allocated N at a time and then
 * freed N at a time; "fallback" with single calls, "bulk" with the bulk API
 * (uslab only). Per object (one alloc + one free): ticks and ns, median of 5
 * batches. Prints 4 numbers per size for uslab, 2 for malloc. */
static const unsigned int bulk_sizes[] = { 1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250 };
#define NBULK (sizeof(bulk_sizes) / sizeof(bulk_sizes[0]))
#define BULK_BATCHES 5

void child_bulk(long total)
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
			qsort(tk, BULK_BATCHES, sizeof(double), cmp_double);
			qsort(ns, BULK_BATCHES, sizeof(double), cmp_double);
			printf("%.2f %.3f ", tk[BULK_BATCHES / 2], ns[BULK_BATCHES / 2]);
		}
	}
	printf("\n");
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
			printf(" %12s", variants[v].tag);
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && variants[v].present)
			printf(" %16s", variants[v].tag);
	printf("\n%5s", "");
	for (int v = 0; v < NVAR; v++)
		if (!variants[v].uslab && variants[v].present)
			printf(" %12s", "ns");
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
				printf(" %12.3f", medians[v][2 * k + 1]);
			else
				printf(" %12s", "FAILED");
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

void bench_bulk(int runs, long n)
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
