/* test_dlclose.c - dlopen libuslab.so, use it (rseq sections leave the thread's
 * rseq area pointing into the library), dlclose it, and keep running long enough
 * to be preempted: the library must stay mapped (-z nodelete). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include "../harness.h"

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	if (!h)
		return test_summary();
	struct kmem_cache *(*create)(const char *, unsigned int, unsigned int, slab_flags_t, void (*)(void *)) =
		(struct kmem_cache *(*)(const char *, unsigned int, unsigned int, slab_flags_t, void (*)(void *)))dlsym(h, "kmem_cache_create");
	void *(*alloc)(struct kmem_cache *, gfp_t) = (void *(*)(struct kmem_cache *, gfp_t))dlsym(h, "kmem_cache_alloc");
	void (*release)(struct kmem_cache *, void *) = (void (*)(struct kmem_cache *, void *))dlsym(h, "kmem_cache_free");
	CHECK(create && alloc && release);
	struct kmem_cache *s = create("dl", 64, 0, 0, NULL);
	for (int i = 0; i < 1000; i++)
		release(s, alloc(s, GFP_KERNEL));
	dlclose(h);
	/* Be preempted and signalled a few times. */
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_nsec += 200 * 1000 * 1000;
	volatile unsigned long spin = 0;
	do {
		for (int i = 0; i < 100000; i++)
			spin++;
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec + (end.tv_nsec >= 1000000000) ||
	         (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	CHECK(spin > 0);
	return test_summary();
}
