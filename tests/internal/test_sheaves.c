/* test_sheaves.c - the sheaf layer: a million objects allocated on some threads
 * and freed on others each come back exactly once; barn limits hold; shrink
 * returns every empty slab; the prefilled-sheaf API cannot fail while it has
 * objects (the page provider failing meanwhile); kmem_cache_args; bad input.
 * Runs with sheaves on (default) and USLAB_SHEAVES=0 (".nosheaves"). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "common/common.h"
#include "pages/pages.h"
#include "percpu/percpu.h"
#include "platform/platform.h"
#include "engine.h"
#include "testing.h"

static bool sheaves_default;

static unsigned long in_use(struct kmem_cache *s)
{
	usl_cache_flush_all(s);
	return usl_engine_objects_in_use(s);
}

/* ---- a million objects across threads ---- */

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

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

static void test_million_cross_thread(void)
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

/* ---- barn limits and shrink ---- */

static void check_barn(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	if (usl_opt.decay_ms == 0) {
		/* exact without decay */
		CHECK(sc.barn_full <= s->barn_max_full);
		CHECK(sc.barn_empty <= s->barn_max_empty);
	}
	CHECK(sc.barn_objects == sc.barn_full * s->sheaf_capacity);
	if (!s->ctor)     /* the surplus is packed: arrays stay at the level */
		CHECK(sc.barn_full <= s->barn_max_full);
}

static unsigned long barn_full(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_full;
}

/* Full sheaves the barn holds, as arrays and packed. */
static unsigned long barn_held(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_full + sc.barn_packed;
}

/* Empty slabs of s on its CPUs' partial lists and its node list (the test's
 * own thread is the only user of s's slots here). */
static unsigned long empty_slabs(struct kmem_cache *s)
{
	struct usl_state_counts st;
	unsigned long n = 0;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		for (struct slab *p = s->cpu_slab[i].partial; p; p = p->next)
			n += usl_counters_inuse(p->counters) == 0;
	usl_slub_state_counts(s, &st);
	return n + st.empty_node_partial;
}

static unsigned long barn_empty(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_empty;
}

static void ctor_mark(void *p)
{
	memset(p, 0x5a, 128);
}

/* The empty sheaves a burst of frees leaves in the barn once its objects are
 * allocated again stay while the program takes back what it freed (the next
 * burst reuses them), and are freed down to the kernel's ten once it goes on
 * allocating from slabs: arrays must not stay while a program grows. */
static void test_empties_after_burst(void)
{
	/* A cache with a constructor: its surplus stays in arrays (its objects
	 * must stay constructed, so none is packed into them). */
	struct kmem_cache_args args = { .sheaf_capacity = 20, .ctor = ctor_mark };
	struct kmem_cache *s = kmem_cache_create("empties-128", 128, &args, 0);
	CHECK(s != NULL);
	/* The budget is a 32nd of the cache's slab memory: live objects make
	 * room for a burst of N (25 sheaves) in arrays. */
	unsigned int cap = uslab_sheaf_capacity(s);
	const unsigned int N = 25 * cap, LIVE = N * 16 / 3, MORE = 4 * N;
	void **live = malloc(LIVE * sizeof(void *)), **p = malloc((N + MORE) * sizeof(void *));
	CHECK(live && p);
	for (unsigned i = 0; i < LIVE; i++)
		live[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < N; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < N; i++)
		kmem_cache_free(s, p[i]);
	if (usl_opt.decay_ms)
		CHECK(barn_full(s) > 2 * s->barn_max_full);   /* the burst's sheaves */
	for (unsigned i = 0; i < N; i++)                 /* taken back: empties stay */
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long kept = barn_empty(s);
	if (usl_opt.decay_ms)
		CHECK(kept > 2 * s->barn_max_empty);
	/* Growing past it: refills from slabs, and the surplus empties go. */
	for (unsigned i = N; i < N + MORE; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(MORE / cap > 32 + kept / 8);                /* enough refills to free them all */
	CHECK(barn_empty(s) <= s->barn_max_empty);
	for (unsigned i = 0; i < N + MORE; i++)
		kmem_cache_free(s, p[i]);
	for (unsigned i = 0; i < LIVE; i++)
		kmem_cache_free(s, live[i]);
	kmem_cache_destroy(s);
	free(live);
	free(p);
}

/* Rounds of allocations and frees, single and bulk: the barn within its
 * limits, and at least its level of full sheaves after a burst of frees. */
static void barn_rounds(struct kmem_cache *s, void **p)
{
	for (int round = 0; round < 4; round++) {
		unsigned n = round % 2 ? 20000 : 3000;
		for (unsigned i = 0; i < n; i++)
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		check_barn(s);
		for (unsigned i = 0; i < n; i++)
			kmem_cache_free(s, p[n - 1 - i]);
		check_barn(s);
		/* The barn holds at least its level of full sheaves after a burst
		 * of frees (exactly that without decay; the rest went to slabs). */
		if (usl_opt.decay_ms == 0)
			CHECK_EQ(barn_full(s), s->barn_max_full);
		else
			CHECK(barn_held(s) > s->barn_max_full);
		CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, n, p), (int)n);
		check_barn(s);
		kmem_cache_free_bulk(s, n, p);
		check_barn(s);
	}
}

/* The surplus above the level that stays unused for a decay interval goes
 * back to slabs (two intervals: the sheaves parked after a check become
 * eligible at the next one). */
static void barn_surplus_decays(struct kmem_cache *s, void **p)
{
	unsigned long burst = barn_held(s);
	CHECK(burst > s->barn_max_full + 100);
	for (int k = 0; k < 3; k++) {
		struct timespec ts = { (time_t)(usl_opt.decay_ms / 1000), (long)(usl_opt.decay_ms % 1000) * 1000000L + 100000000L };
		nanosleep(&ts, NULL);
		/* frees that park full sheaves (and no allocation from the barn) */
		for (unsigned i = 0; i < 1500; i++)
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		for (unsigned i = 0; i < 1500; i++)
			kmem_cache_free(s, p[i]);
	}
	CHECK(barn_held(s) < burst / 2);
}

/* A tenth of the decay interval, then 600 kmalloc/kfree pairs of 200 bytes
 * (the main sheaf only). */
static void tick_kmalloc_200(void)
{
	struct timespec ts = { 0, (long)(usl_opt.decay_ms % 10000) * 100000L + 1000000L };
	nanosleep(&ts, NULL);
	for (int j = 0; j < 600; j++)
		kfree(kmalloc(200, GFP_KERNEL));
}

/* A barn nobody visits for an interval gives back all of its full sheaves,
 * even while the cache is in use through the CPU's own sheaves: here a
 * kmalloc class, whose kfree calls are sampled as use (and tick the sweep). */
static void barn_unvisited_empties(void **p)
{
	void *q0 = kmalloc(200, GFP_KERNEL);
	struct kmem_cache *km = usl_virt_to_slab(q0)->slab_cache;
	kfree(q0);
	if (!uslab_sheaf_capacity(km))
		return;
	for (unsigned i = 0; i < 3000; i++)
		p[i] = kmalloc(200, GFP_KERNEL);
	for (unsigned i = 0; i < 3000; i++)
		kfree(p[i]);
	CHECK(barn_held(km) >= 1);
	/* The barn holds its ten arrays (the rest of the burst is packed into
	 * the objects themselves). */
	CHECK_EQ(barn_full(km), km->barn_max_full);
	struct slab_sheaf *held = NULL;    /* in the barn of the node the thread ran on */
	for (unsigned int nid = 0; !held && nid < usl_nr_nodes; nid++)
		held = km->node[nid]->barn.full;
	CHECK(held != NULL);
	struct kmem_cache *shc = usl_virt_to_slab(held)->slab_cache;
	struct usl_state_counts st0, st1;
	usl_slub_state_counts(shc, &st0);
	CHECK(st0.total >= 1);
	for (int k = 0; k < 40 && barn_held(km); k++)
		tick_kmalloc_200();
	CHECK_EQ(barn_held(km), 0);
	/* The same sweep flushed the CPUs' sheaves, which were both full after
	 * the frees. */
	struct usl_sheaf_counts kc;
	usl_sheaf_counts(km, &kc);
	/* What they hold now is what the traffic refilled since, in small
	 * refills (an eighth of a sheaf, then a quarter, ... on each CPU the
	 * thread ran on; the steps are each node's barn's), not the two full
	 * sheaves. */
	CHECK(kc.cpu_objects < uslab_sheaf_capacity(km) * 3 / 2 * usl_nr_nodes);
	/* The sweeps free the sheaves, and then the slabs of the sheaf
	 * structures' cache they empty, cpu partial ones too (later in the same
	 * sweep): after a sweep no slab of that cache is empty. (How many hold
	 * live sheaves depends on where they were made.) */
	unsigned long empty = empty_slabs(shc);
	for (int k = 0; k < 40 && empty; k++) {
		tick_kmalloc_200();
		empty = empty_slabs(shc);
	}
	CHECK_EQ(empty, 0);
	usl_slub_state_counts(shc, &st1);
	CHECK(st1.total <= st0.total);
}

/* Shrink: every sheaf flushed, every empty slab returned; with objects in
 * use, shrink keeps exactly their slabs. */
static void shrink_flushes_sheaves(struct kmem_cache *s, void **p)
{
	CHECK_EQ(kmem_cache_shrink(s), 0);
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	CHECK_EQ(sc.cpu_objects + sc.barn_objects + sc.barn_full, 0);
	CHECK_EQ(sc.barn_empty, 0);                  /* and the sheaves freed, empty ones too */
	struct usl_state_counts st;
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
	for (unsigned i = 0; i < 5000; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < 5000; i += 2)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(kmem_cache_shrink(s), 1);
	CHECK_EQ(usl_engine_objects_in_use(s), 2500);
	for (unsigned i = 1; i < 5000; i += 2)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
}

static void test_barn_and_shrink(void)
{
	unsigned long errors_before = uslab_error_count();
	struct kmem_cache_args args = { .sheaf_capacity = 20 };
	struct kmem_cache *s = kmem_cache_create("barn-256", 256, &args, 0);
	static void *p[20000];

	CHECK(s != NULL);
	CHECK(uslab_sheaf_capacity(s) >= 20);
	CHECK_EQ(s->barn_max_full, 10);
	CHECK_EQ(s->barn_max_empty, 10);
	barn_rounds(s, p);
	if (usl_opt.decay_ms) {
		barn_surplus_decays(s, p);
		barn_unvisited_empties(p);
	}
	shrink_flushes_sheaves(s, p);
	kmem_cache_destroy(s);
	CHECK_EQ(uslab_error_count(), errors_before);
}

/* A burst of frees in random order: the arrays stay at the barn's level and
 * two sheaves a CPU, the rest is packed into the freed objects, every object
 * is accounted for, and allocating them back returns each object exactly
 * once. Sizes from the smallest packed (two words a block) to several lines;
 * the 8-byte one is not packed and keeps its budget. */
static void test_packed_burst(void)
{
	static const unsigned int sizes[] = { 8, 16, 24, 40, 64, 200, 256, 1000 };
	enum { N = 6000 };
	static void *p[N], *q[N];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	/* On one CPU: a thread that moves between the burst and the
	 * allocations would leave the burst's objects in the other CPU's
	 * sheaves, out of its reach, and take slab objects instead. */
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);

	for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		char name[32];
		snprintf(name, sizeof(name), "packed-%u", sizes[z]);
		struct kmem_cache *s = kmem_cache_create(name, sizes[z], NULL, SLAB_NO_MERGE);
		CHECK(s != NULL);
		if (!s)
			continue;
		for (unsigned i = 0; i < N; i++) {
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
			memset(p[i], 0xa5, sizes[z]);        /* the program's own data */
		}
		for (unsigned i = N - 1; i > 0; i--) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			unsigned j = (unsigned)(seed % (i + 1));
			void *x = p[i];
			p[i] = p[j];
			p[j] = x;
		}
		unsigned long sweeps = __atomic_load_n(&usl_decay_sweeps, __ATOMIC_SEQ_CST);
		for (unsigned i = 0; i < N; i++)
			kmem_cache_free(s, p[i]);
		struct usl_sheaf_counts sc;
		usl_slub_flush_cpus(s);      /* cpu slabs to the node lists: the count below is exact */
		usl_sheaf_counts(s, &sc);
		unsigned long held = sc.cpu_objects + sc.barn_objects + sc.packed_objects;
		CHECK_EQ(held, usl_engine_objects_in_use(s));        /* nothing lost or counted twice */
		if (uslab_sheaf_capacity(s) && usl_opt.decay_ms && sizes[z] >= 24) {   /* a node: two words and the marker */
			CHECK(sc.barn_full <= s->barn_max_full);
			CHECK(sc.barn_empty <= s->barn_max_empty);
			CHECK(sc.cpu_sheaves <= 2 * usl_nr_cpus);
			CHECK(sc.barn_packed >= (N - (2 * usl_nr_cpus + s->barn_max_full) * uslab_sheaf_capacity(s)) /
			                        uslab_sheaf_capacity(s));
			CHECK(held >= N);
		} else if (uslab_sheaf_capacity(s) && usl_opt.decay_ms) {
			/* Not packed: arrays up to a 32nd of the slab memory. */
			CHECK_EQ(sc.barn_packed, 0);
			CHECK(sc.barn_full * (8 * uslab_sheaf_capacity(s) + 32) <=
			      usl_engine_objects_in_use(s) * s->size / 32 + (s->barn_max_full + 1) * (8 * uslab_sheaf_capacity(s) + 32) + 8192);
		}
		for (unsigned i = 0; i < N; i++) {
			q[i] = kmem_cache_alloc(s, GFP_KERNEL);
			CHECK(q[i] != NULL);
			memset(q[i], 0x3c, sizes[z]);
		}
		/* Each object comes back once; all but what the sheaves held
		 * before the burst are the burst's own. */
		qsort(p, N, sizeof(void *), cmp_ptr);
		qsort(q, N, sizeof(void *), cmp_ptr);
		unsigned dup = 0, ours = 0;
		for (unsigned i = 0; i < N; i++) {
			dup += i && q[i] == q[i - 1];
			ours += bsearch(&q[i], p, N, sizeof(void *), cmp_ptr) != NULL;
		}
		CHECK_EQ(dup, 0);
		/* (On one CPU, and unless a decay sweep ran meanwhile, as on a loaded machine
		 * under a sanitizer: it may have given the burst's packed sheaves
		 * back to slabs, and empty slabs away. Counted, not timed: a
		 * sweep can start at any point of an interval, and one already
		 * running when the burst began makes the count odd.) */
		if (pinned && held >= N && !(sweeps & 1) &&
		    __atomic_load_n(&usl_decay_sweeps, __ATOMIC_SEQ_CST) == sweeps)
			CHECK(ours >= N - (held - N));
		usl_sheaf_counts(s, &sc);
		CHECK_EQ(sc.packed_objects, 0);
		CHECK_EQ(sc.barn_packed, 0);
		for (unsigned i = 0; i < N; i++)
			kmem_cache_free(s, q[i]);
		/* shrink gives back the packed ones too */
		CHECK_EQ(kmem_cache_shrink(s), 0);
		usl_sheaf_counts(s, &sc);
		CHECK_EQ(sc.packed_objects + sc.barn_packed + sc.barn_full + sc.cpu_objects, 0);
		CHECK_EQ(usl_engine_objects_in_use(s), 0);
		kmem_cache_destroy(s);
	}
	if (pinned)
		unpin_cpu(&was);
}

/* The barn's surplus is given back before the page provider grows. */
static void test_reclaim_before_growth(void)
{
	struct kmem_cache_args args = { .sheaf_capacity = 20 };
	struct kmem_cache *a = kmem_cache_create("reclaim-a", 256, &args, 0);
	struct kmem_cache *b = kmem_cache_create("reclaim-b", 4096, NULL, 0);
	static void *p[20000];

	for (unsigned i = 0; i < 20000; i++)
		p[i] = kmem_cache_alloc(a, GFP_KERNEL);
	for (unsigned i = 0; i < 20000; i++)
		kmem_cache_free(a, p[i]);
	if (usl_opt.decay_ms)
		CHECK(barn_held(a) > a->barn_max_full);    /* a burst, parked */
	/* b needs more pages than are free: a's surplus goes back first, and
	 * its emptied slabs' pages serve b. */
	size_t committed_before, d, c;
	usl_pages_stats(&committed_before, &d, &c);
	for (unsigned i = 0; i < 3000; i++)
		p[i] = kmem_cache_alloc(b, GFP_KERNEL);
	CHECK(barn_held(a) <= a->barn_max_full);
	size_t committed_after;
	usl_pages_stats(&committed_after, &d, &c);
	/* 3000 x 4 KiB = 12 MiB for b; a's 5 MiB came back and were reused. */
	CHECK(committed_after - committed_before < (size_t)3000 * 4096);
	for (unsigned i = 0; i < 3000; i++)
		kmem_cache_free(b, p[i]);
	kmem_cache_destroy(a);
	kmem_cache_destroy(b);
}

/* ---- the prefilled-sheaf API ---- */

static void *drained[200000];

static void test_prefill(struct kmem_cache *s)
{
	unsigned cap = uslab_sheaf_capacity(s);
	unsigned sizes[] = { 1, 5, cap ? cap : 7, cap + 30 };   /* the last is oversize */

	for (unsigned k = 0; k < 4; k++) {
		unsigned want = sizes[k];
		struct slab_sheaf *sh = kmem_cache_prefill_sheaf(s, GFP_KERNEL, want);
		CHECK(sh != NULL);
		if (!sh)
			continue;
		unsigned have = kmem_cache_sheaf_size(sh);
		CHECK(have >= want);
		/* From here no page may be allocated: the sheaf must suffice. */
		usl_pages_fail_after(0);
		void *o[512];
		unsigned got = 0;
		for (unsigned i = 0; i < have && i < 512; i++) {
			o[got] = kmem_cache_alloc_from_sheaf(s, GFP_KERNEL | (i & 1 ? __GFP_ZERO : 0), sh);
			if (!o[got])
				break;
			if (i & 1) {
				int nonzero = 0;
				for (unsigned b = 0; b < s->object_size; b++)
					nonzero += ((unsigned char *)o[got])[b] != 0;
				CHECK_EQ(nonzero, 0);
			}
			memset(o[got], 0x5a, s->object_size);
			got++;
		}
		CHECK_EQ(got, have);
		CHECK_EQ(kmem_cache_sheaf_size(sh), 0);
		/* Empty: a clear report and NULL, not a fallback allocation. */
		unsigned long before = reports(USLAB_ERR_BAD_ARG);
		CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, sh) == NULL);
		CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 1);
		/* A refill that cannot get memory fails and leaves the sheaf as it
		 * was: first take every object the cache still holds. */
		size_t nd = 0;
		void *x;
		while (nd < 200000 && (x = kmem_cache_alloc(s, GFP_KERNEL | __GFP_NOWARN)))
			drained[nd++] = x;
		CHECK(nd < 200000);
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL | __GFP_NOWARN, &sh, want), -ENOMEM);
		CHECK_EQ(kmem_cache_sheaf_size(sh), 0);
		usl_pages_fail_after(-1);
		kmem_cache_free_bulk(s, nd, drained);
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &sh, want), 0);
		CHECK(kmem_cache_sheaf_size(sh) >= want);
		/* Growing beyond the capacity swaps in a bigger sheaf. */
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &sh, cap + 50), 0);
		CHECK(kmem_cache_sheaf_size(sh) >= cap + 50);
		qsort(o, got, sizeof(void *), cmp_ptr);
		int dups = 0;
		for (unsigned i = 1; i < got; i++)
			dups += o[i] == o[i - 1];
		CHECK_EQ(dups, 0);
		kmem_cache_return_sheaf(s, GFP_KERNEL, sh);
		kmem_cache_free_bulk(s, got, o);
		CHECK_EQ(in_use(s), 0);
	}
	/* Bad input. */
	struct kmem_cache *other = kmem_cache_create("prefill-other", 64, 0, 0, NULL);
	struct slab_sheaf *sh = kmem_cache_prefill_sheaf(other, GFP_KERNEL, 3);
	unsigned long wc = reports(USLAB_ERR_WRONG_CACHE), ba = reports(USLAB_ERR_BAD_ARG);
	CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, sh) == NULL);      /* other's sheaf */
	kmem_cache_return_sheaf(s, GFP_KERNEL, sh);                           /* refused */
	struct slab_sheaf *theirs = sh;
	CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &theirs, 5), -EINVAL);  /* refused */
	CHECK(theirs == sh);
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), wc + 3);
	CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, NULL) == NULL);
	CHECK(kmem_cache_prefill_sheaf(NULL, GFP_KERNEL, 3) == NULL);
	CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, NULL, 3), -EINVAL);
	CHECK(kmem_cache_prefill_sheaf(s, GFP_KERNEL, 100000000) == NULL);
	kmem_cache_return_sheaf(s, GFP_KERNEL, NULL);
	kmem_cache_return_sheaf(NULL, GFP_KERNEL, sh);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 6);
	CHECK_EQ(kmem_cache_sheaf_size(NULL), 0);
	CHECK_EQ(uslab_sheaf_capacity(NULL), 0);
	CHECK(kmem_cache_sheaf_size(sh) >= 3);
	kmem_cache_return_sheaf(other, GFP_KERNEL, sh);
	CHECK_EQ(in_use(other), 0);
	kmem_cache_destroy(other);
}

/* ---- creation with kmem_cache_args, USLAB_SHEAVES ---- */

static int ctor_calls;
static void ctor(void *p)
{
	*(uint64_t *)p = 0xC7;
	__atomic_fetch_add(&ctor_calls, 1, __ATOMIC_RELAXED);
}

static void test_args(void)
{
	struct kmem_cache *plain = kmem_cache_create("args-plain", 100, 0, 0, NULL);
	CHECK_EQ(uslab_sheaf_capacity(plain) != 0, sheaves_default);
	if (sheaves_default)
		/* < 256 bytes: 60, fills 512; with delayed reuse 124, fills 1024 */
		CHECK_EQ(uslab_sheaf_capacity(plain), usl_opt.random && usl_opt.allocator != USL_ENGINE_SLAB ? 124 : 60);
	kmem_cache_destroy(plain);

	struct kmem_cache_args a = { .align = 64, .ctor = ctor, .sheaf_capacity = 30 };
	struct kmem_cache *s = kmem_cache_create("args-ctor", 200, &a, 0);
	CHECK(s != NULL);
	CHECK(uslab_sheaf_capacity(s) >= 30);           /* configured: whatever USLAB_SHEAVES says */
	void *o = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(((uintptr_t)o & 63) == 0);
	CHECK_EQ(*(uint64_t *)o, 0xC7);
	CHECK(ctor_calls > 0);
	kmem_cache_free(s, o);
	test_prefill(s);
	kmem_cache_destroy(s);

	/* freeptr_offset: the free pointer where the creator says. */
	struct kmem_cache_args f = { .freeptr_offset = 8, .use_freeptr_offset = true };
	s = kmem_cache_create("args-freeptr", 64, &f, 0);
	CHECK(s != NULL && s->offset == 8 && s->size == 64);
	void *objs[100];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, objs), 100);
	kmem_cache_free_bulk(s, 100, objs);
	CHECK_EQ(in_use(s), 0);
	/* ... and the only word uslab writes in a free object: the others keep
	 * what the program left, in a sheaf and on its slab's free list. */
	CHECK(!usl_two_word(s));
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, objs), 100);
	void *k = objs[50];                            /* its neighbours stay live: so does its slab */
	memset(k, 0xab, 64);
	kmem_cache_free(s, k);
	uslab_release_free_memory();                   /* onto its slab's list */
	int kept = 0;
	for (int i = 0; i < 64; i++)
		kept += (i >= 8 && i < 16) || ((unsigned char *)k)[i] == 0xab;
	CHECK_EQ(kept, 64);
	objs[50] = NULL;
	kmem_cache_free_bulk(s, 100, objs);
	kmem_cache_destroy(s);

	/* NULL args: defaults. Bad arguments: a clear report, no cache. */
	s = kmem_cache_create("args-null", 32, NULL, 0);
	CHECK(s != NULL);
	kmem_cache_destroy(s);
	unsigned long ba = reports(USLAB_ERR_BAD_ARG);
	struct kmem_cache_args bad1 = { .freeptr_offset = 3, .use_freeptr_offset = true };
	CHECK(kmem_cache_create("bad-freeptr", 64, &bad1, 0) == NULL);
	struct kmem_cache_args bad2 = { .useroffset = 10, .usersize = 60 };
	CHECK(kmem_cache_create("bad-user", 64, &bad2, 0) == NULL);
	struct kmem_cache_args bad3 = { .sheaf_capacity = 1u << 30 };
	CHECK(kmem_cache_create("bad-sheaf", 64, &bad3, 0) == NULL);
	struct kmem_cache_args ok = { .sheaf_capacity = 8 };
	CHECK(kmem_cache_create(NULL, 64, &ok, 0) == NULL);                  /* no name */
	CHECK(kmem_cache_create("bad-size", 0, &ok, 0) == NULL);             /* size 0 */
	CHECK(kmem_cache_create("bad-flags", 64, &ok, 0x4U) == NULL);        /* unknown flag */
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 6);
	/* Debug caches never get sheaves (as in the kernel). */
	struct kmem_cache_args dbg = { .sheaf_capacity = 30 };
	s = kmem_cache_create("args-debug", 64, &dbg, SLAB_POISON);
	CHECK(s != NULL && uslab_sheaf_capacity(s) == 0);
	test_prefill(s);                                  /* works without sheaves too */
	/* ... even for 0 objects: a one-off sheaf, never parked in a slot. */
	for (int k = 0; k < 3; k++) {
		struct slab_sheaf *z = kmem_cache_prefill_sheaf(s, GFP_KERNEL, 0);
		CHECK(z != NULL);
		CHECK_EQ(kmem_cache_sheaf_size(z), 0);
		kmem_cache_return_sheaf(s, GFP_KERNEL, z);
	}
	int parked = 0;
	for (unsigned i = 0; i < usl_nr_cpus; i++)
		parked += s->cpu_slab[i].main != &usl_empty_sheaf || s->cpu_slab[i].spare != NULL;
	CHECK_EQ(parked, 0);
	kmem_cache_destroy(s);
}

/* ---- single-object bad input with sheaves ---- */

static void test_bad_free(void)
{
	struct kmem_cache_args a = { .sheaf_capacity = 16 };
	struct kmem_cache *s = kmem_cache_create("bad-sheaf-free", 64, &a, 0);
	struct kmem_cache *t = kmem_cache_create("bad-sheaf-other", 64, &a, 0);
	int local;
	void *x = kmem_cache_alloc(s, GFP_KERNEL), *y = kmem_cache_alloc(t, GFP_KERNEL);

	unsigned long df = reports(USLAB_ERR_DOUBLE_FREE), wc = reports(USLAB_ERR_WRONG_CACHE),
	              fo = reports(USLAB_ERR_FOREIGN), no = reports(USLAB_ERR_NOT_OBJECT);
	kmem_cache_free(s, y);                 /* t's object */
	kmem_cache_free(s, &local);            /* foreign */
	kmem_cache_free(s, (char *)x + 8);     /* not an object start */
	kmem_cache_free(s, x);
	kmem_cache_free(s, x);                 /* the sheaf's top object again */
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), wc + 1);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), df + 1);
	kmem_cache_free(t, y);
	/* Nothing was handed out twice. */
	void *a1 = kmem_cache_alloc(s, GFP_KERNEL), *a2 = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a1 != a2);
	kmem_cache_free(s, a1);
	kmem_cache_free(s, a2);
	CHECK_EQ(in_use(s), 0);
	CHECK_EQ(in_use(t), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(t);
}

/* Two threads freeing one object at the same instant both pass its free
 * marker check and push it: simulated by a second push that skips the check
 * (usl_sheaf_free). The pop that finds it a second time refuses it: it is
 * handed out once, and reported. */
static void test_pushed_twice(void)
{
	if (!usl_opt.harden)
		return;
	struct kmem_cache_args args = { .sheaf_capacity = 32 };
	struct kmem_cache *s = kmem_cache_create("twice", 96, &args, SLAB_NO_MERGE | SLAB_ORDERED);
	CHECK(s != NULL && uslab_sheaf_capacity(s) != 0);
	void *keep[4], *x = kmem_cache_alloc(s, GFP_KERNEL), *y = kmem_cache_alloc(s, GFP_KERNEL);
	for (int i = 0; i < 4; i++)
		keep[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free(s, x);
	kmem_cache_free(s, y);
	usl_sheaf_free(s, x);          /* the racing second free (not at the top) */
	void *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	void *c = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a && b && c && a != b && b != c && a != c);
	CHECK((a == x) + (b == x) + (c == x) <= 1);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, c);
	for (int i = 0; i < 4; i++)
		kmem_cache_free(s, keep[i]);
}

/* A fresh cache's first allocations come out in rising addresses (the
 * refill's objects are laid in the sheaf so that its pops give them in the
 * order a fresh slab was carved), as from the cpu slab's freelist without
 * sheaves: a program walking its objects in the order it made them reads
 * forwards. On one CPU, so that one sheaf serves them all. The kernel's
 * order (SLAB_ORDERED; the random one is test_layout's). */
static void test_rising_order(void)
{
	enum { K = 16 };
	void *p[K];
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	struct kmem_cache *s = kmem_cache_create("rising-64", 64, NULL, SLAB_NO_MERGE | SLAB_ORDERED);
	CHECK(s != NULL);
	bool rising = s != NULL;
	for (unsigned i = 0; s && i < K; i++) {
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(p[i] != NULL);
		if (i && (uintptr_t)p[i] <= (uintptr_t)p[i - 1]) {
			if (rising)
				fprintf(stderr, "  allocation %u at %p, after %p\n", i, p[i], p[i - 1]);
			rising = false;
		}
	}
	CHECK(rising);
	for (unsigned i = 0; s && i < K; i++)
		kmem_cache_free(s, p[i]);
	if (s)
		kmem_cache_destroy(s);
	if (pinned)
		unpin_cpu(&was);
}

int main(void)
{
	/* The barn and decay counts here follow this thread's own slow-path
	 * sweeps; the decay thread (test_background) would sweep in between. */
	usl_opt.background = 0;
	const char *e = getenv("USLAB_SHEAVES");
	sheaves_default = !(e && strcmp(e, "0") == 0);
	printf("mode %s, sheaves %s by default\n", uslab_percpu_mode(), sheaves_default ? "on" : "off");
	capture_reports();
	test_args();
	test_bad_free();
	test_barn_and_shrink();
	test_empties_after_burst();
	test_packed_burst();
	test_reclaim_before_growth();
	test_million_cross_thread();
	test_pushed_twice();
	test_rising_order();
	return test_summary();
}
