/* test_carve.c - new slabs are carved lazily: a slab's pages are written only
 * for objects handed out (and the first page's links); every object is handed
 * out once, whichever path takes it (cpu slab, sheaf refill, a node partial slab
 * after a flush, a thread without a per-CPU slot); a free of an object that was
 * never handed out is refused. Runs with and without sheaves, both modes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../harness.h"
#include "arch/arch.h"
#include "pages/pages.h"
#include "engine/engine.h"
#include "testing.h"

#define SIZE 1024
#define MAXO 4096

static struct kmem_cache *s;

/* Stamp each object with its index over its whole size; a later check finds a
 * stamp overwritten if two live objects ever overlapped. */
static void stamp(void **o, unsigned int from, unsigned int to)
{
	for (unsigned int i = from; i < to; i++)
		if (o[i])
			memset(o[i], (int)(i % 251) + 1, SIZE);
}

static unsigned int stamps_broken(void **o, unsigned int n)
{
	unsigned int bad = 0;
	for (unsigned int i = 0; i < n; i++) {
		if (!o[i])
			continue;
		const unsigned char *p = o[i];
		for (unsigned int j = 0; j < SIZE; j += 64)
			bad += p[j] != (unsigned char)((i % 251) + 1);
	}
	return bad;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* Live objects are distinct and at least an object apart. */
static unsigned int overlaps(void **o, unsigned int n)
{
	static void *sorted[MAXO];
	unsigned int m = 0, bad = 0;
	for (unsigned int i = 0; i < n; i++)
		if (o[i])
			sorted[m++] = o[i];
	qsort(sorted, m, sizeof(void *), cmp_ptr);
	for (unsigned int i = 1; i < m; i++)
		bad += (uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] < SIZE;
	return bad;
}

static void *no_slot_worker(void *arg)
{
	void **o = arg;
	struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	if (!__rseq_size || syscall(SYS_rseq, rs, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) != 0)
		return NULL;
	for (unsigned int i = 0; i < 64; i++)
		o[i] = kmem_cache_alloc(s, GFP_KERNEL);
	return o;
}

static void *live[MAXO];   /* s's objects (NULL: freed) */
static unsigned int nlive;

/* 1. One allocation from a new slab writes at most the first page (its
 *    links) and, of the objects a sheaf refill took, only their free
 *    markers with USLAB_HARDEN (a word each; nothing without). */
static void check_first_alloc(void)
{
	live[nlive++] = kmem_cache_alloc(s, GFP_KERNEL);
	struct slab *first = usl_virt_to_slab(live[0]);
	size_t bytes = usl_order_bytes(first->order), page = (size_t)sysconf(_SC_PAGESIZE);
	CHECK(bytes >= 4 * page);
	size_t refill_pages = usl_opt.harden ? (uslab_sheaf_capacity(s) * (size_t)s->size + page - 1) / page : 0;
	CHECK(resident_pages(first->addr, bytes) <= 1 + refill_pages);
	CHECK(refill_pages < bytes / page);   /* not the whole slab */
	CHECK(usl_counters_uncarved(usl_load(&first->counters)) > 0);
}

/* 2. Many slabs' worth, one at a time and in bulk: all distinct.
 * 3. Free every other one; shrink flushes the CPU slots, so partly carved
 *    slabs go to the node list; allocating again carves them there. */
static void check_many_and_recarve(unsigned int objects)
{
	while (nlive < 3 * objects + 1)
		live[nlive++] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 2 * objects + 3, &live[nlive]), 2 * objects + 3);
	nlive += 2 * objects + 3;
	stamp(live, 0, nlive);
	CHECK_EQ(overlaps(live, nlive), 0);

	for (unsigned int i = 0; i < nlive; i += 2) {
		kmem_cache_free(s, live[i]);
		live[i] = NULL;
	}
	CHECK_EQ(kmem_cache_shrink(s), 1);
	unsigned int again = nlive;
	while (nlive < again + 2 * objects)
		live[nlive++] = kmem_cache_alloc(s, GFP_KERNEL);
	stamp(live, again, nlive);
	CHECK_EQ(stamps_broken(live, nlive), 0);
	CHECK_EQ(overlaps(live, nlive), 0);
}

/* Allocates q[*nq..2 * objects) from t and checks them apart; frees all of
 * q and destroys t. */
static void refill_free_destroy(struct kmem_cache *t, void **q, unsigned int nq, unsigned int objects,
				const struct slab *sl, int check_first)
{
	while (nq < 2 * objects)
		q[nq++] = kmem_cache_alloc(t, GFP_KERNEL);
	if (check_first) {
		unsigned int in_first = 0;
		for (unsigned int i = 0; i < nq; i++)
			in_first += usl_virt_to_slab(q[i]) == sl;
		CHECK_EQ(in_first, objects);
	}
	CHECK_EQ(overlaps(q, nq), 0);
	for (unsigned int i = 0; i < nq; i++)
		kmem_cache_free(t, q[i]);
	kmem_cache_destroy(t);
}

/* 4. A slab left partly carved on the node list: a free of one of its
 *    never handed out objects is refused (with sheaves too: its page is
 *    marked in the page map, so the sheaf push is not reached), and
 *    carving still hands out each object once. */
static void check_never_allocated(unsigned int objects)
{
	struct kmem_cache *t = kmem_cache_create("carve-t", SIZE, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	void *a = kmem_cache_alloc(t, GFP_KERNEL);
	CHECK_EQ(kmem_cache_shrink(t), 1);
	struct slab *sl = usl_virt_to_slab(a);
	unsigned long c = usl_load(&sl->counters);
	CHECK(!usl_counters_frozen(c) && sl->node_partial);
	CHECK(usl_counters_uncarved(c) > 0);
	void *never = sl->addr + (size_t)(usl_counters_objects(c) - 1) * t->size;
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free(t, never);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
	CHECK(strstr(last_report, "never allocated") != NULL);
	CHECK_EQ(usl_counters_uncarved(usl_load(&sl->counters)), usl_counters_uncarved(c));
	/* By pointer alone (kfree, free) the same. */
	kfree(never);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 2);
	CHECK(strstr(last_report, "never allocated") != NULL);
	static void *q[MAXO];
	q[0] = a;
	refill_free_destroy(t, q, 1, objects, sl, 1);
}

/* The same free inside a bulk free (or, with sheaves, when the sheaf
 * holding it is flushed) is refused too, and the rest is freed. */
static void check_never_allocated_bulk(unsigned int objects)
{
	struct kmem_cache *t = kmem_cache_create("carve-u", SIZE, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	void *b[3];
	CHECK_EQ(kmem_cache_alloc_bulk(t, GFP_KERNEL, 3, b), 3);
	CHECK_EQ(kmem_cache_shrink(t), 1);
	struct slab *sl = usl_virt_to_slab(b[0]);
	unsigned long c = usl_load(&sl->counters);
	CHECK(usl_counters_uncarved(c) > 0);
	void *pair[2] = { b[1], sl->addr + (size_t)(usl_counters_objects(c) - 1) * t->size };
	unsigned long dfs = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free_bulk(t, 2, pair);
	CHECK_EQ(kmem_cache_shrink(t), 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), dfs + 1);
	CHECK_EQ(usl_slub_objects_in_use(t), 2);
	static void *q[MAXO];
	q[0] = b[0];
	q[1] = b[2];
	refill_free_destroy(t, q, 2, objects, sl, 0);
}

/* 5. A thread without a per-CPU slot takes objects straight from node
 *    partial slabs, carving them there (rseq mode only: locked mode has a
 *    slot for every thread). */
static void check_no_slot_thread(void)
{
	CHECK_EQ(kmem_cache_shrink(s), 1);
	static void *direct[64];
	pthread_t th;
	void *ret;
	CHECK(pthread_create(&th, NULL, no_slot_worker, direct) == 0);
	CHECK(pthread_join(th, &ret) == 0);
	if (ret) {
		for (unsigned int i = 0; i < 64 && nlive < MAXO; i++)
			live[nlive++] = direct[i];
		stamp(live, nlive - 64, nlive);
		CHECK_EQ(stamps_broken(live, nlive), 0);
		CHECK_EQ(overlaps(live, nlive), 0);
	}
}

int main(void)
{
	capture_reports();
	s = kmem_cache_create("carve", SIZE, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	CHECK(s != NULL);
	unsigned int objects = s->objects;
	CHECK(objects > 4);

	check_first_alloc();
	check_many_and_recarve(objects);
	check_never_allocated(objects);
	check_never_allocated_bulk(objects);
	check_no_slot_thread();

	for (unsigned int i = 0; i < nlive; i++)
		if (live[i])
			kmem_cache_free(s, live[i]);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), 0);
	CHECK_EQ(uslab_error_count(), 3);   /* the never allocated object: twice; the bulk one */
	return test_summary();
}
