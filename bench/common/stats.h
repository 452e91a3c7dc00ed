/* stats.h - the order the benchmarks sort their runs in (qsort comparisons)
 * and the median they print. */
#ifndef USLAB_BENCH_STATS_H
#define USLAB_BENCH_STATS_H

int cmp_double(const void *a, const void *b);
int cmp_long(const void *a, const void *b);

/* The median of v[0..n) (sorts v); 0 for none. */
double bench_median(double *v, int n);
long bench_median_long(long *v, int n);

#endif /* USLAB_BENCH_STATS_H */
