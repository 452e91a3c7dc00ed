/* colour.c - what SLAB's colouring buys: the first lines of M objects of
 * 3072 bytes read in turn, with colour and without. */
#include "seed.h"

/* colour: what slab colouring buys. M objects of 3072 bytes (SLAB: order-1
 * slabs of two, 2 KiB spare, 32 colours), then the first cache line of each
 * read over and over: without colour every first object starts at the same
 * page offset, so the lines compete for the same cache sets. Prints ns per
 * read for each M. */
static const unsigned int colour_ms[] = { 16, 64, 256, 512, 1024, 4096 };
#define NCOLOUR (sizeof(colour_ms) / sizeof(colour_ms[0]))

void child_colour(long reads)
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

/* What colouring buys on this CPU: SLAB with and without colour, SLUB and the
 * peers for reference. */
void bench_colour(int runs, long reads)
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
		int ok = row_head(v);
		for (unsigned k = 0; k < NCOLOUR && ok; k++)
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
