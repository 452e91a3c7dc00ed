/* clock.h - the benchmarks' clock (CLOCK_MONOTONIC, in seconds or in ns) and
 * their pseudo-random numbers (xorshift64: cheap, and the same sequence for
 * every allocator from the same seed). */
#ifndef USLAB_BENCH_CLOCK_H
#define USLAB_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline uint64_t xorshift64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

#endif /* USLAB_BENCH_CLOCK_H */
