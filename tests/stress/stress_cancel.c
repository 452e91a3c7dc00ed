/* stress_cancel.c - short-lived threads, many more than CPUs, that malloc and
 * kmalloc, free each other's blocks through a shared table, migrate between
 * CPUs (sched_setaffinity) and are cancelled at cancellation points (deferred
 * cancellation: nanosleep) while others run. Every block carries a tag written
 * at allocation and checked before it is freed, so a block handed out twice or
 * written by uslab while live is caught; no report may be made.
 * Usage: stress_cancel [rounds] [threads per round] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"   /* uslab.h only */

#define SLOTS 4096

struct block {
	uint64_t tag;       /* the slot's generation, written at allocation */
	uint64_t self;      /* the block's own address */
	size_t size;
};

static struct {
	pthread_mutex_t lock;
	struct block *p;
	uint64_t tag;
	bool kmalloced;
} slot[SLOTS];

static uint64_t next_tag = 1;
static unsigned long bad;
static unsigned int ncpus;

static bool check_block(const struct block *b, uint64_t tag)
{
	return b->tag == tag && b->self == (uint64_t)(uintptr_t)b;
}

static void put(unsigned int i, size_t size, bool km)
{
	struct block *b = km ? kmalloc(size, GFP_KERNEL) : malloc(size);
	if (!b)
		return;
	uint64_t tag = __atomic_fetch_add(&next_tag, 1, __ATOMIC_RELAXED);
	b->tag = tag;
	b->self = (uint64_t)(uintptr_t)b;
	b->size = size;
	pthread_mutex_lock(&slot[i].lock);
	struct block *old = slot[i].p;
	uint64_t otag = slot[i].tag;
	bool okm = slot[i].kmalloced;
	slot[i].p = b;
	slot[i].tag = tag;
	slot[i].kmalloced = km;
	pthread_mutex_unlock(&slot[i].lock);
	if (old) {
		if (!check_block(old, otag))
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		okm ? kfree(old) : free(old);
	}
}

static void *worker(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	for (int n = 0; n < 4000; n++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		size_t size = sizeof(struct block) + (seed >> 20) % ((seed & 1) ? 200 : 3000);
		put((unsigned int)(seed >> 40) % SLOTS, size, (seed >> 8) & 1);
		if (!(n % 500) && ncpus > 1) {          /* migrate */
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((unsigned int)(seed >> 33) % ncpus, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
		if (!(n % 128)) {                       /* a cancellation point */
			struct timespec ts = { 0, 1000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 40;
	int nthreads = argc > 2 ? atoi(argv[2]) : 12;
	pthread_t th[256];

	if (nthreads > 256)
		nthreads = 256;
	capture_reports();
	long c = sysconf(_SC_NPROCESSORS_ONLN);
	ncpus = c > 0 ? (unsigned int)c : 1;
	for (int i = 0; i < SLOTS; i++)
		pthread_mutex_init(&slot[i].lock, NULL);
	for (int r = 0; r < rounds; r++) {
		for (int t = 0; t < nthreads; t++)
			CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)(r * 1000 + t + 1)) == 0);
		struct timespec ts = { 0, 200 * 1000 };
		nanosleep(&ts, NULL);
		for (int t = 0; t < nthreads; t += 3)   /* a third cancelled mid-run */
			pthread_cancel(th[t]);
		for (int t = 0; t < nthreads; t++)
			CHECK(pthread_join(th[t], NULL) == 0);
	}
	for (int i = 0; i < SLOTS; i++)
		if (slot[i].p) {
			if (!check_block(slot[i].p, slot[i].tag))
				bad++;
			slot[i].kmalloced ? kfree(slot[i].p) : free(slot[i].p);
		}
	if (bad || reports_all())
		fprintf(stderr, "  %lu blocks changed while live, %lu reports (last: %s)\n", bad, reports_all(), last_report);
	CHECK_EQ(bad, 0);
	CHECK_EQ(reports_all(), 0);
	return test_summary();
}
