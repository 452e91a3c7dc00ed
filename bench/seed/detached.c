/* detached.c - seed 000's second table: the detached freelists of its first
 * version ("simple") against the look-ahead, with and without sheaves. */
#include "seed.h"

/* detached: the bulk API at seed 000's second table's sizes, total objects per
 * size; per size the cycles (TSC) per object of one kmem_cache_alloc_bulk +
 * kmem_cache_free_bulk round, over the whole loop. */
static const unsigned int detached_sizes[] = { 16, 48, 144, 512, 2048 };
#define NDETACHED (sizeof(detached_sizes) / sizeof(detached_sizes[0]))
void child_detached(long total)
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

/* Seed 000's second table: the detached freelists of its first version
 * ("simple": consecutive objects of one slab, USLAB_BULK_LOOKAHEAD=1) against
 * the look-ahead of 3 (the default), with sheaves (bulk frees fill the sheaves
 * and full ones are flushed to the slabs by detached freelists) and without
 * (every bulk free builds them); runs processes each, mean, standard deviation
 * and range, as the seed gave them. */
void bench_detached(int runs, long total)
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
