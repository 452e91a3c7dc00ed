/* shim.c - the kernel half of the kernel-suites adapter: the interface of the
 * kernel's user-space slab shim (tools/testing/shared/linux.c and
 * tools/lib/slab.c), implemented on uslab through backend.h.
 *
 * Compiled with the kernel's tools headers and the suites' flags, plus a
 * header scripts/kernel-suites.sh generates that renames every name uslab
 * exports (kmem_cache_create, kmalloc, ...) to shim_<name> in the kernel's
 * objects and here, so the suites' calls land in this file and this file's
 * calls to uslab (in backend.c) cannot land in itself.
 *
 * What the suites rely on, kept as the kernel's shim has it:
 *   - failure injection: an allocation whose GFP flags forbid direct reclaim
 *     fails unless kmem_cache_set_non_kernel() granted it, and the failure
 *     arms the cache's callback, run at the next allocation;
 *   - the counters: nr_allocated (objects of every cache in use),
 *     kmem_cache_nr_allocated / nr_tallocated per cache, kmalloc_nr_allocated;
 *   - kmem_cache_get_alloc: bytes in use, the cache's size times its objects.
 * The objects themselves are uslab's: no list of recycled objects here (the
 * kernel's shim keeps ten), no poisoning (uslab's own, under USLAB_DEBUG=P).
 *
 * No locks: uslab is thread-safe, the counters are atomic, and the injection
 * state is as unlocked as in the kernel's shim (the suites set it from one
 * thread).
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/gfp.h>
#include <linux/slab.h>

#include "backend.h"

int nr_allocated;
int preempt_count;
int test_verbose;
int kmalloc_nr_allocated;
int kmalloc_verbose;

struct kmem_cache {
	struct kb_cache *c;
	const char *name;
	unsigned int size;
	unsigned int align;
	void (*ctor)(void *);
	unsigned int non_kernel;
	unsigned long nr_allocated;
	unsigned long nr_tallocated;
	bool exec_callback;
	void (*callback)(void *);
	void *private;
};

static void count(struct kmem_cache *cachep, long n)
{
	__atomic_add_fetch(&nr_allocated, (int)n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cachep->nr_allocated, (unsigned long)n, __ATOMIC_RELAXED);
	if (n > 0)
		__atomic_add_fetch(&cachep->nr_tallocated, (unsigned long)n, __ATOMIC_RELAXED);
}

void kmem_cache_set_callback(struct kmem_cache *cachep, void (*callback)(void *))
{
	cachep->callback = callback;
}

void kmem_cache_set_private(struct kmem_cache *cachep, void *private)
{
	cachep->private = private;
}

void kmem_cache_set_non_kernel(struct kmem_cache *cachep, unsigned int val)
{
	cachep->non_kernel = val;
}

unsigned long kmem_cache_get_alloc(struct kmem_cache *cachep)
{
	return cachep->size * __atomic_load_n(&cachep->nr_allocated, __ATOMIC_RELAXED);
}

unsigned long kmem_cache_nr_allocated(struct kmem_cache *cachep)
{
	return __atomic_load_n(&cachep->nr_allocated, __ATOMIC_RELAXED);
}

unsigned long kmem_cache_nr_tallocated(struct kmem_cache *cachep)
{
	return __atomic_load_n(&cachep->nr_tallocated, __ATOMIC_RELAXED);
}

void kmem_cache_zero_nr_tallocated(struct kmem_cache *cachep)
{
	__atomic_store_n(&cachep->nr_tallocated, 0, __ATOMIC_RELAXED);
}

/* __GFP_ZERO is honoured only without a constructor, as the kernel's shim does
 * (the kernel itself refuses the pair). */
static bool zeroed(struct kmem_cache *cachep, int gfp)
{
	return !cachep->ctor && (gfp & __GFP_ZERO);
}

void *kmem_cache_alloc_lru(struct kmem_cache *cachep, struct list_lru *lru, int gfp)
{
	void *p;

	(void)lru;
	if (cachep->exec_callback) {
		if (cachep->callback)
			cachep->callback(cachep->private);
		cachep->exec_callback = false;
	}
	if (!(gfp & __GFP_DIRECT_RECLAIM)) {
		if (!cachep->non_kernel) {
			cachep->exec_callback = true;
			return NULL;
		}
		cachep->non_kernel--;
	}
	p = kb_alloc(cachep->c, zeroed(cachep, gfp));
	if (!p)
		return NULL;
	count(cachep, 1);
	if (kmalloc_verbose)
		printf("Allocating %p from slab\n", p);
	return p;
}

void kmem_cache_free(struct kmem_cache *cachep, void *objp)
{
	assert(objp);
	count(cachep, -1);
	if (kmalloc_verbose)
		printf("Freeing %p to slab\n", objp);
	kb_free(cachep->c, objp);
}

void kmem_cache_free_bulk(struct kmem_cache *cachep, size_t size, void **list)
{
	if (kmalloc_verbose)
		printf("Bulk free %p[0-%zu]\n", (void *)list, size - 1);
	count(cachep, -(long)size);
	kb_free_bulk(cachep->c, size, list);
}

int kmem_cache_alloc_bulk(struct kmem_cache *cachep, gfp_t gfp, size_t size, void **p)
{
	if (kmalloc_verbose)
		printf("Bulk alloc %zu\n", size);
	if (!(gfp & __GFP_DIRECT_RECLAIM)) {
#ifdef KSHIM_BULK_ALL_OR_NOTHING
		/* As older kernels' shim (6.1's): grants for all, or nothing
		 * allocated and no grant spent. */
		if (cachep->non_kernel < size)
			return 0;
		cachep->non_kernel -= (unsigned int)size;
#else
		/* As newer kernels' shim (6.12's): each object takes one grant;
		 * when they run out part way, the grants taken are spent and
		 * nothing is allocated (no callback is armed). */
		size_t granted = size < cachep->non_kernel ? size : cachep->non_kernel;
		cachep->non_kernel -= (unsigned int)granted;
		if (granted < size)
			return 0;
#endif
	}
	if (!size)
		return 0;
	if (kb_alloc_bulk(cachep->c, zeroed(cachep, (int)gfp), size, p) != (int)size)
		return 0;
	count(cachep, (long)size);
	if (kmalloc_verbose)
		for (size_t i = 0; i < size; i++)
			printf("Allocating %p from slab\n", p[i]);
	return (int)size;
}

void kmem_cache_shrink(struct kmem_cache *cachep)
{
	kb_shrink(cachep->c);
}

/* flags: the tools headers' values, not uslab's. SLAB_PANIC is honoured here;
 * SLAB_RECLAIM_ACCOUNT (radix_tree_node's) means nothing in user space. */
struct kmem_cache *kmem_cache_create(const char *name, unsigned int size, unsigned int align, unsigned int flags,
                                     void (*ctor)(void *))
{
	struct kmem_cache *ret = calloc(1, sizeof(*ret));

	if (ret)
		ret->c = kb_create(name, size, align, ctor);
	if (!ret || !ret->c) {
		free(ret);
		if (flags & SLAB_PANIC) {
			fprintf(stderr, "kernel-suites adapter: kmem_cache_create(\"%s\", %u, %u) failed\n", name, size,
			        align);
			abort();
		}
		return NULL;
	}
	ret->name = name;
	ret->size = size;
	ret->align = align;
	ret->ctor = ctor;
	return ret;
}

void *kmalloc(size_t size, gfp_t gfp)
{
	void *ret;

	if (!(gfp & __GFP_DIRECT_RECLAIM))
		return NULL;
	ret = kb_kmalloc(size, gfp & __GFP_ZERO);
	if (!ret)
		return NULL;
	__atomic_add_fetch(&kmalloc_nr_allocated, 1, __ATOMIC_RELAXED);
	if (kmalloc_verbose)
		printf("Allocating %p from malloc\n", ret);
	return ret;
}

void kfree(void *p)
{
	if (!p)
		return;
	__atomic_sub_fetch(&kmalloc_nr_allocated, 1, __ATOMIC_RELAXED);
	if (kmalloc_verbose)
		printf("Freeing %p to malloc\n", p);
	kb_kfree(p);
}

/* The maple suite calls this to check the shim itself. The kernel's version
 * looks at its own list of recycled objects; this one checks what the suites
 * rely on of uslab through the same calls: single and bulk objects distinct,
 * aligned as asked, counted while in use, and the caches' counts back to 0
 * once all are freed (not the global nr_allocated: RCU callbacks of earlier
 * tests may still be freeing other caches' objects). A failure aborts the
 * suite. */
void test_kmem_cache_bulk(void)
{
	void *list[12];
	struct kmem_cache *c1 = kmem_cache_create("test_cache", 256, 0, SLAB_PANIC, NULL);
	struct kmem_cache *c2 = kmem_cache_create("test_cache2", 128, 128, SLAB_PANIC, NULL);

	for (int i = 0; i < 5; i++)
		list[i] = kmem_cache_alloc(c1, __GFP_DIRECT_RECLAIM);
	assert(kmem_cache_nr_allocated(c1) == 5);
	for (int i = 0; i < 5; i++)
		kmem_cache_free(c1, list[i]);
	assert(kmem_cache_nr_allocated(c1) == 0);

	assert(kmem_cache_alloc_bulk(c1, __GFP_DIRECT_RECLAIM, 12, list) == 12);
	for (int i = 0; i < 12; i++)
		for (int j = 0; j < i; j++)
			assert(list[i] != list[j]);
	memset(list[11], 0xa5, 256);   /* whole objects are the caller's */
	assert(kmem_cache_nr_allocated(c1) == 12 && kmem_cache_get_alloc(c1) == 12 * 256);
	kmem_cache_free_bulk(c1, 12, list);

	/* No grant: a bulk allocation without direct reclaim gets nothing. */
	assert(kmem_cache_alloc_bulk(c1, GFP_NOWAIT, 3, list) == 0);
	kmem_cache_set_non_kernel(c1, 3);
	assert(kmem_cache_alloc_bulk(c1, GFP_NOWAIT, 3, list) == 3);
	kmem_cache_free_bulk(c1, 3, list);

	assert(kmem_cache_alloc_bulk(c2, __GFP_DIRECT_RECLAIM, 10, list) == 10);
	for (int i = 0; i < 10; i++)
		assert(((uintptr_t)list[i] & 127) == 0);
	kmem_cache_free_bulk(c2, 10, list);
	assert(kmem_cache_nr_allocated(c2) == 0);
	assert(kmem_cache_nr_allocated(c1) == 0);
}
