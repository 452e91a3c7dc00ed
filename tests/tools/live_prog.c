/* live_prog.c - a process for uslabinfo to look at (uslabinfo.sh): caches
 * "live-a" (300 objects of 200 bytes kept), "live-b" merged into it, a
 * debug cache "live-dbg", and "live-owned" with U (40 objects allocated at
 * live_owner_site, exported: named without libdw too); then, until SIGTERM (or two minutes), bursts of
 * malloc/free and cache traffic every 20 ms, so that the allocator's ticks
 * publish its live view and serve requests. Prints "ready" once the view
 * exists. Exits through exit() (the view is removed). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uslab.h"

static volatile sig_atomic_t done;

/* The owner summaries' known call site: 40 objects of "live-owned" (U). */
__attribute__((noinline)) void *live_owner_site(struct kmem_cache *s)
{
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	__asm__ volatile("" ::: "memory");
	return p;
}
static void on_term(int sig)
{
	(void)sig;
	done = 1;
}

int main(void)
{
	signal(SIGTERM, on_term);
	if (!uslab_stats_enabled()) {     /* (and a static link keeps the live view) */
		fprintf(stderr, "live_prog: run it with USLAB_STATS set\n");
		return 1;
	}
	struct kmem_cache *a = kmem_cache_create("live-a", 200, 0, 0, NULL);
	struct kmem_cache *b = kmem_cache_create("live-b", 200, 0, 0, NULL);
	struct kmem_cache *d = kmem_cache_create("live-dbg", 64, 0, SLAB_RED_ZONE | SLAB_POISON, NULL);
	if (!a || !b || !d || a != b) {
		fprintf(stderr, "live_prog: caches not as expected (merged: %d)\n", a == b);
		return 1;
	}
	static void *keep[300];
	for (int i = 0; i < 300; i++)
		keep[i] = kmem_cache_alloc(a, GFP_KERNEL);
	void *dk = kmem_cache_alloc(d, GFP_KERNEL);
	struct kmem_cache *u = kmem_cache_create("live-owned", 48, 0, SLAB_STORE_USER, NULL);
	static void *owned[40];
	for (int i = 0; u && i < 40; i++)
		owned[i] = live_owner_site(u);
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/uslab.%ld", (long)getpid());
	bool said = false;
	for (int rounds = 0; !done && rounds < 6000; rounds++) {
		/* More than a sheaf each way, so that the sheaves' slow paths
		 * (the ticks that publish) run even where malloc is not
		 * uslab's (the sanitizer builds). */
		static void *burst[500];
		for (int i = 0; i < 500; i++)
			burst[i] = kmem_cache_alloc(b, GFP_KERNEL);
		for (int i = 0; i < 500; i++)
			kmem_cache_free(b, burst[i]);
		for (int i = 0; i < 2000; i++)
			free(malloc(16 + (size_t)(i % 500)));
		if (!said && access(path, R_OK) == 0) {
			printf("ready\n");
			fflush(stdout);
			said = true;
		}
		usleep(20000);
	}
	kmem_cache_free(d, dk);
	for (int i = 0; i < 300; i++)
		kmem_cache_free(a, keep[i]);
	exit(0);
}
