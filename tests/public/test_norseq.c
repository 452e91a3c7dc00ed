/* test_norseq.c - threads whose rseq registration is gone (cpu_id reads -1) use
 * no per-CPU slot: they allocate straight from the node lists and free to the
 * slabs, while other threads use the fast paths on the same caches. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../harness.h"   /* uslab.h only: this test uses the public API */

#define NT 8
#define PER 20000
static struct kmem_cache *s;
static int unregistered;
static unsigned long bad;

static void *worker(void *arg)
{
	long id = (long)arg;
	if (id % 2 == 0 && __rseq_size) {
		struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
		if (syscall(SYS_rseq, rs, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) == 0 && (int)rs->cpu_id < 0)
			__atomic_fetch_add(&unregistered, 1, __ATOMIC_RELAXED);
	}
	static __thread uint64_t *held[512];
	for (int round = 0; round < PER / 512; round++) {
		for (int i = 0; i < 512; i++) {
			held[i] = kmem_cache_alloc(s, GFP_KERNEL);
			held[i][0] = ((uint64_t)id << 32) | (uint64_t)i;
			held[i][5] = ~held[i][0];
		}
		for (int i = 0; i < 512; i++) {
			if (held[i][0] != (((uint64_t)id << 32) | (uint64_t)i) || held[i][5] != ~held[i][0])
				__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
			kmem_cache_free(s, held[i]);
		}
	}
	return NULL;
}

int main(void)
{
	pthread_t t[NT];
	s = kmem_cache_create("norseq", 48, 0, 0, NULL);
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	printf("mode %s, %d threads without rseq\n", uslab_percpu_mode(), unregistered);
	if (strcmp(uslab_percpu_mode(), "rseq") == 0)
		CHECK_EQ(unregistered, NT / 2);
	CHECK_EQ(bad, 0);
	/* Every object was freed: shrink flushes every CPU and releases every
	 * slab (0), and destroy finds no object remaining (no report). */
	CHECK_EQ(kmem_cache_shrink(s), 0);
	kmem_cache_destroy(s);
	CHECK_EQ(uslab_error_count(), 0);
	return test_summary();
}
