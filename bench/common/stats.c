/* stats.c - sorting and medians for the benchmarks (stats.h). */
#include <stdlib.h>

#include "stats.h"

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n ? v[n / 2] : 0;
}

long bench_median_long(long *v, int n)
{
	qsort(v, (size_t)n, sizeof(long), cmp_long);
	return n ? v[n / 2] : 0;
}
