/* cross_thread.c - test_sheaves: a million objects allocated on some threads
 * and freed on others each come back exactly once. */
#include "sheaves.h"

#define XN_PRODUCERS 6
#define XN_CONSUMERS 6
#define XN_PER 170000                 /* 6 x 170000 = 1.02 million */
#define XN_RING 4096

static struct kmem_cache *xc;
static void **xall;                   /* every object handed out, by producer */
static struct {
	pthread_mutex_t lock;
	void *ring[XN_RING];
	unsigned head, count;
	int producers_done;
} xq = { .lock = PTHREAD_MUTEX_INITIALIZER };
static unsigned long xfreed, xbad;
static unsigned char *xseen;          /* per (producer, index): consumed once */

static void *x_producer(void *arg)
{
	int me = (int)(intptr_t)arg;
	void **mine = xall + (size_t)me * XN_PER;
	for (unsigned i = 0; i < XN_PER;) {
		void *batch[16];
		unsigned k = XN_PER - i < 16 ? XN_PER - i : 16;
		if (i % 3 == 0) {
			if (kmem_cache_alloc_bulk(xc, GFP_KERNEL, k, batch) != (int)k)
				__atomic_fetch_add(&xbad, 1, __ATOMIC_RELAXED);
		} else {
			for (unsigned j = 0; j < k; j++)
				batch[j] = kmem_cache_alloc(xc, GFP_KERNEL);
		}
		for (unsigned j = 0; j < k; j++) {
			/* the object says who allocated it */
			*(uint64_t *)batch[j] = ((uint64_t)me << 32) | (i + j);
			mine[i + j] = batch[j];
		}
		unsigned j = 0;
		while (j < k) {
			pthread_mutex_lock(&xq.lock);
			while (j < k && xq.count < XN_RING) {
				xq.ring[(xq.head + xq.count) % XN_RING] = batch[j++];
				xq.count++;
			}
			pthread_mutex_unlock(&xq.lock);
			if (j < k)
				sched_yield();
		}
		i += k;
	}
	__atomic_fetch_add(&xq.producers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *x_consumer(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (;;) {
		void *batch[32];
		unsigned k = 0;
		pthread_mutex_lock(&xq.lock);
		while (k < 32 && xq.count) {
			batch[k++] = xq.ring[xq.head];
			xq.head = (xq.head + 1) % XN_RING;
			xq.count--;
		}
		int done = __atomic_load_n(&xq.producers_done, __ATOMIC_ACQUIRE) == XN_PRODUCERS && !xq.count && !k;
		pthread_mutex_unlock(&xq.lock);
		if (done)
			break;
		if (!k) {
			sched_yield();
			continue;
		}
		for (unsigned j = 0; j < k; j++) {
			uint64_t tag = *(uint64_t *)batch[j];
			unsigned prod = (unsigned)(tag >> 32), idx = (unsigned)tag;
			if (prod >= XN_PRODUCERS || idx >= XN_PER || xall[(size_t)prod * XN_PER + idx] != batch[j] ||
			    __atomic_exchange_n(&xseen[(size_t)prod * XN_PER + idx], 1, __ATOMIC_RELAXED))
				__atomic_fetch_add(&xbad, 1, __ATOMIC_RELAXED);   /* an object handed out twice */
		}
		if (me & 1)
			kmem_cache_free_bulk(xc, k, batch);
		else
			for (unsigned j = 0; j < k; j++)
				kmem_cache_free(xc, batch[j]);
		__atomic_fetch_add(&xfreed, k, __ATOMIC_RELAXED);
	}
	return NULL;
}

void test_million_cross_thread(void)
{
	const size_t total = (size_t)XN_PRODUCERS * XN_PER;
	pthread_t t[XN_PRODUCERS + XN_CONSUMERS];

	xc = kmem_cache_create("xthread-48", 48, 0, 0, NULL);
	xall = calloc(total, sizeof(void *));
	xseen = calloc(total, 1);
	unsigned long errors_before = uslab_error_count();
	for (int i = 0; i < XN_PRODUCERS; i++)
		pthread_create(&t[i], NULL, x_producer, (void *)(intptr_t)i);
	for (int i = 0; i < XN_CONSUMERS; i++)
		pthread_create(&t[XN_PRODUCERS + i], NULL, x_consumer, (void *)(intptr_t)i);
	for (int i = 0; i < XN_PRODUCERS + XN_CONSUMERS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(xbad, 0);
	CHECK_EQ(xfreed, total);
	size_t unseen = 0;
	for (size_t i = 0; i < total; i++)
		unseen += !xseen[i];
	CHECK_EQ(unseen, 0);                  /* each object came back exactly once */
	CHECK_EQ(uslab_error_count(), errors_before);   /* and nothing was reported */
	/* Every object is free exactly once: nothing in use, and a million fresh
	 * allocations are a million distinct objects. */
	CHECK_EQ(in_use(xc), 0);
	for (size_t i = 0; i < total; i++)
		xall[i] = kmem_cache_alloc(xc, GFP_KERNEL);
	qsort(xall, total, sizeof(void *), cmp_ptr);
	size_t dups = 0, nulls = 0;
	for (size_t i = 0; i < total; i++) {
		nulls += !xall[i];
		dups += i && xall[i] == xall[i - 1];
	}
	CHECK_EQ(nulls, 0);
	CHECK_EQ(dups, 0);
	kmem_cache_free_bulk(xc, total, xall);
	CHECK_EQ(in_use(xc), 0);
	CHECK_EQ(kmem_cache_shrink(xc), 0);
	kmem_cache_destroy(xc);
	free(xall);
	free(xseen);
}
