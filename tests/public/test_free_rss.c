/* test_free_rss - a program that only frees must not grow. Blocks of several
 * sizes (kmalloc classes, the malloc classes' twins), written after
 * allocation, freed in a random order; the process's resident size
 * (/proc/self/statm) is read every 1/64 of the frees and may never exceed its
 * value before the first free by more than 1%. Sheaves that fill during the
 * frees must not cost memory beyond that (docs/ARCHITECTURE.md, "Sheaves and barns":
 * the barn's surplus is packed into the freed objects). Runs in both per-CPU
 * modes. Then the same blocks are allocated again and freed in order: the
 * second round may not grow either. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "uslab.h"

enum { N = 250000, SAMPLES = 64 };

static long process_resident(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Free v[order[0..N)] and return the largest resident size seen, in pages. */
static long free_all(void **v, const unsigned *order)
{
	long most = process_resident();
	for (unsigned i = 0; i < N; i++) {
		kfree(v[order[i]]);
		if (i % (N / SAMPLES) == 0) {
			long r = process_resident();
			if (r > most)
				most = r;
		}
	}
	long r = process_resident();
	return r > most ? r : most;
}

static void round_of(const char *what, void **v, const unsigned *sizes, const unsigned *order)
{
	for (unsigned i = 0; i < N; i++) {
		v[i] = kmalloc(sizes[i], GFP_KERNEL);
		CHECK(v[i] != NULL);
		memset(v[i], (int)(i & 0xff), sizes[i]);
	}
	long before = process_resident();
	long most = free_all(v, order);
	long page = sysconf(_SC_PAGESIZE);
	printf("%s: resident %ld KiB before the frees, at most %ld KiB during them (%+.2f%%)\n", what,
	       before * page / 1024, most * page / 1024, 100.0 * (double)(most - before) / (double)before);
	CHECK(before > 0);
	CHECK(most * 100 <= before * 101);
}

int main(void)
{
	static const unsigned classes[] = { 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024 };
	void **v = calloc(N, sizeof(void *));
	unsigned *sizes = calloc(N, sizeof(unsigned)), *order = calloc(N, sizeof(unsigned));
	uint64_t seed = 0x853c49e6748fea9bull;

	CHECK(v && sizes && order);
	if (!v || !sizes || !order)
		return test_summary();
	printf("mode %s\n", uslab_percpu_mode());
	for (unsigned i = 0; i < N; i++) {
		sizes[i] = classes[xorshift(&seed) % (sizeof(classes) / sizeof(classes[0]))];
		order[i] = i;
	}
	for (unsigned i = N - 1; i > 0; i--) {
		unsigned j = (unsigned)(xorshift(&seed) % (i + 1));
		unsigned t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	round_of("random order", v, sizes, order);
	for (unsigned i = 0; i < N; i++)
		order[i] = i;
	round_of("allocation order", v, sizes, order);
	free(v);
	free(sizes);
	free(order);
	return test_summary();
}
