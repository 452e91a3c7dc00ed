/* single.c - the single pair: one 256-byte alloc+free, repeated in batches,
 * against the floor of two empty calls. */
#include "seed.h"

/* single: one 256-byte alloc+free pair, repeated in BATCHES batches; prints the
 * median batch's ns and ticks per pair (a long loop's mean mostly measures the
 * other tenants of a shared machine). */
#define BATCHES 21

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
	qsort(ns, BATCHES, sizeof(double), cmp_double);
	qsort(tk, BATCHES, sizeof(double), cmp_double);
	*ns_med = ns[BATCHES / 2];
	*tk_med = tk[BATCHES / 2];
}

void child_single(long iters)
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

void bench_single(int runs, long iters)
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
	qsort(fns, (size_t)nf, sizeof(double), cmp_double);
	qsort(ftk, (size_t)nf, sizeof(double), cmp_double);
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
