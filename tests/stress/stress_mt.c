/* stress_mt.c - many more threads than CPUs on several caches of random sizes:
 * single and bulk calls, local and cross-thread frees, every object filled with a
 * pattern derived from its owner and checked before it is freed, a shrinker thread
 * flushing every CPU meanwhile, prefilled sheaves, and optionally a storm of
 * signals (which aborts rseq sections). Run with USLAB_SHEAVES=0 and 1.
 * Usage: stress_mt [threads] [ops-per-thread] [signals 0|1] [seed] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "common/common.h"
#include "platform/platform.h"
#include "engine/engine.h"
#include "testing.h"

#define NCACHES 7
#define LOCAL_MAX 512
#define RING 1024
#define CTOR_MAGIC 0xC0C0C0C0DEADBEEFull

struct obj_ref {
	uint64_t *p;
	uint64_t tag;
	int cache;
};

struct mailbox {
	pthread_mutex_t lock;
	struct obj_ref ring[RING];
	unsigned head, count;
};

static struct kmem_cache *caches[NCACHES];
static unsigned int sizes[NCACHES];
static int has_ctor[NCACHES];
static int nthreads = 16;
static long ops = 200000;
static int signals_on;
static struct mailbox *boxes;
static pthread_t *tids;
static int stop_aux;
static int done, release;
static unsigned long corrupt, allocs, frees, nulls, sigs, shrinks;
static unsigned long ctor_runs;

static void ctor_fn(void *p)
{
	*(uint64_t *)p = CTOR_MAGIC;
	__atomic_fetch_add(&ctor_runs, 1, __ATOMIC_RELAXED);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill(struct obj_ref *r)
{
	unsigned int words = sizes[r->cache] / 8;
	for (unsigned int i = has_ctor[r->cache]; i < words; i++)
		r->p[i] = r->tag ^ (i * 0x9E3779B97F4A7C15ull);
}

static void check(struct obj_ref *r)
{
	unsigned int words = sizes[r->cache] / 8;
	for (unsigned int i = has_ctor[r->cache]; i < words; i++)
		if (r->p[i] != (r->tag ^ (i * 0x9E3779B97F4A7C15ull))) {
			__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
			break;
		}
	if (has_ctor[r->cache] && r->p[0] != CTOR_MAGIC)
		__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
}

/* Check n objects and free them with one kfree_bulk (any caches, NULLs mixed in). */
static void check_and_free_bulk(struct obj_ref *r, unsigned n)
{
	void *arr[RING + RING / 8];
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		check(&r[i]);
		arr[k++] = r[i].p;
		if (i % 8 == 3)
			arr[k++] = NULL;
	}
	kfree_bulk(k, arr);
	__atomic_fetch_add(&frees, n, __ATOMIC_RELAXED);
}

/* Check n objects and free them cache by cache with kmem_cache_free_bulk (the
 * sheaf layer's bulk path), NULLs mixed in. */
static void check_and_free_bulk_per_cache(struct obj_ref *r, unsigned n)
{
	void *arr[RING + RING / 8];
	for (int c = 0; c < NCACHES; c++) {
		unsigned k = 0, m = 0;
		for (unsigned i = 0; i < n; i++) {
			if (r[i].cache != c)
				continue;
			check(&r[i]);
			arr[k++] = r[i].p;
			if (++m % 5 == 2)
				arr[k++] = NULL;
		}
		if (k)
			kmem_cache_free_bulk(caches[c], k, arr);
		__atomic_fetch_add(&frees, m, __ATOMIC_RELAXED);
	}
}

static void check_and_free(struct obj_ref *r)
{
	check(r);
	kmem_cache_free(caches[r->cache], r->p);
	__atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
}

static void drain_box(int me)
{
	struct mailbox *b = &boxes[me];
	struct obj_ref tmp[RING];
	unsigned n = 0;

	pthread_mutex_lock(&b->lock);
	while (b->count) {
		tmp[n++] = b->ring[b->head];
		b->head = (b->head + 1) % RING;
		b->count--;
	}
	pthread_mutex_unlock(&b->lock);
	/* Objects from other threads, of several caches: freed in bulk half the time. */
	if (n && (n & 1))
		check_and_free_bulk(tmp, n);
	else
		for (unsigned i = 0; i < n; i++)
			check_and_free(&tmp[i]);
}

static int post(int to, struct obj_ref *r)
{
	struct mailbox *b = &boxes[to];
	int ok = 0;
	pthread_mutex_lock(&b->lock);
	if (b->count < RING) {
		b->ring[(b->head + b->count) % RING] = *r;
		b->count++;
		ok = 1;
	}
	pthread_mutex_unlock(&b->lock);
	return ok;
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t seed = 0x1234567ull * (uint64_t)(me + 1) + (uint64_t)ops;
	struct obj_ref local[LOCAL_MAX];
	int nlocal = 0;
	uint64_t seq = 0;

	for (long i = 0; i < ops; i++) {
		uint64_t r = rng(&seed);
		int action = (int)(r % 100);
		if (action < 50 && nlocal < LOCAL_MAX) {
			struct obj_ref o;
			o.cache = (int)((r >> 8) % NCACHES);
			o.p = kmem_cache_alloc(caches[o.cache], GFP_KERNEL);
			if (!o.p) {
				__atomic_fetch_add(&nulls, 1, __ATOMIC_RELAXED);
				continue;
			}
			__atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
			if (has_ctor[o.cache] && o.p[0] != CTOR_MAGIC)
				__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
			o.tag = ((uint64_t)me << 48) ^ (++seq * 0x100000001B3ull);
			fill(&o);
			local[nlocal++] = o;
		} else if (action < 55 && nlocal + 64 <= LOCAL_MAX) {
			/* bulk allocation of up to 64 objects of one cache */
			int c = (int)((r >> 8) % NCACHES);
			unsigned k = 1 + (unsigned)((r >> 20) % 64);
			void *arr[64];
			if (kmem_cache_alloc_bulk(caches[c], GFP_KERNEL, k, arr) != (int)k) {
				__atomic_fetch_add(&nulls, 1, __ATOMIC_RELAXED);
				continue;
			}
			__atomic_fetch_add(&allocs, k, __ATOMIC_RELAXED);
			for (unsigned j = 0; j < k; j++) {
				struct obj_ref o = { arr[j], ((uint64_t)me << 48) ^ (++seq * 0x100000001B3ull), c };
				if (has_ctor[c] && o.p[0] != CTOR_MAGIC)
					__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
				fill(&o);
				local[nlocal++] = o;
			}
		} else if (action < 60 && nlocal) {
			/* bulk free of a random run of local objects (mixed caches) */
			unsigned k = 1 + (unsigned)((r >> 20) % (unsigned)nlocal);
			if (k > 64)
				k = 64;
			if ((r >> 40) & 1)
				check_and_free_bulk_per_cache(&local[nlocal - (int)k], k);
			else
				check_and_free_bulk(&local[nlocal - (int)k], k);
			nlocal -= (int)k;
		} else if (action < 80 && nlocal) {
			int k = (int)((r >> 16) % (unsigned)nlocal);
			check_and_free(&local[k]);
			local[k] = local[--nlocal];
		} else if (action < 82 && nlocal + 48 <= LOCAL_MAX) {
			/* a prefilled sheaf: objects taken from it cannot fail */
			int c = (int)((r >> 8) % NCACHES);
			unsigned want = 1 + (unsigned)((r >> 20) % 48);
			struct slab_sheaf *sh = kmem_cache_prefill_sheaf(caches[c], GFP_KERNEL, want);
			if (!sh || kmem_cache_sheaf_size(sh) < want) {
				__atomic_fetch_add(&nulls, 1, __ATOMIC_RELAXED);
				if (sh)
					kmem_cache_return_sheaf(caches[c], GFP_KERNEL, sh);
				continue;
			}
			unsigned take = 1 + (unsigned)((r >> 32) % want);
			for (unsigned j = 0; j < take; j++) {
				struct obj_ref o = { kmem_cache_alloc_from_sheaf(caches[c], GFP_KERNEL, sh),
				                     ((uint64_t)me << 48) ^ (++seq * 0x100000001B3ull), c };
				if (!o.p) {
					__atomic_fetch_add(&nulls, 1, __ATOMIC_RELAXED);
					break;
				}
				__atomic_fetch_add(&allocs, 1, __ATOMIC_RELAXED);
				if (has_ctor[c] && o.p[0] != CTOR_MAGIC)
					__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
				fill(&o);
				local[nlocal++] = o;
			}
			kmem_cache_return_sheaf(caches[c], GFP_KERNEL, sh);
		} else if (action < 95 && nlocal) {
			int k = (int)((r >> 16) % (unsigned)nlocal);
			int to = (int)((r >> 32) % (unsigned)nthreads);
			if (post(to, &local[k]))
				local[k] = local[--nlocal];
		} else {
			drain_box(me);
		}
	}
	while (nlocal)
		check_and_free(&local[--nlocal]);
	drain_box(me);
	/* Stay alive until the signaller stops: pthread_kill needs a live thread. */
	__atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		drain_box(me);
	}
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	__atomic_fetch_add(&sigs, 1, __ATOMIC_RELAXED);
}

static void *signaller(void *arg)
{
	uint64_t seed = 99;
	(void)arg;
	while (!__atomic_load_n(&stop_aux, __ATOMIC_ACQUIRE)) {
		pthread_kill(tids[rng(&seed) % (unsigned)nthreads], SIGUSR1);
		sched_yield();
	}
	return NULL;
}

static void *shrinker(void *arg)
{
	uint64_t seed = 7;
	(void)arg;
	while (!__atomic_load_n(&stop_aux, __ATOMIC_ACQUIRE)) {
		kmem_cache_shrink(caches[rng(&seed) % NCACHES]);
		__atomic_fetch_add(&shrinks, 1, __ATOMIC_RELAXED);
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = 42;
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		ops = atol(argv[2]);
	if (argc > 3)
		signals_on = atoi(argv[3]);
	if (argc > 4)
		seed = (uint64_t)atoll(argv[4]);
	if (nthreads < 1 || ops < 1) {
		fprintf(stderr, "usage: stress_mt [threads] [ops] [signals] [seed]\n");
		return 2;
	}
	printf("mode %s, %d threads on %ld CPUs, %ld ops each, signals %d\n", uslab_percpu_mode(),
	       nthreads, sysconf(_SC_NPROCESSORS_ONLN), ops, signals_on);

	for (int i = 0; i < NCACHES; i++) {
		char name[32];
		sizes[i] = (unsigned int)(16 + (rng(&seed) % 2048)) & ~7u;
		has_ctor[i] = i % 3 == 0;
		snprintf(name, sizeof(name), "stress-%u", sizes[i]);
		caches[i] = kmem_cache_create(name, sizes[i], 0, i % 2 ? SLAB_HWCACHE_ALIGN : 0,
		                              has_ctor[i] ? ctor_fn : NULL);
		CHECK(caches[i] != NULL);
	}
	/* One cache with sheaves its creator asked for: sheaves whatever
	 * USLAB_SHEAVES says. */
	kmem_cache_destroy(caches[1]);
	struct kmem_cache_args args = { .sheaf_capacity = 100 };
	caches[1] = kmem_cache_create("stress-sheaf100", sizes[1], &args, SLAB_HWCACHE_ALIGN);
	/* (Under USLAB_DEBUG every cache is a debug cache: no sheaves.) */
	CHECK(caches[1] != NULL && (uslab_sheaf_capacity(caches[1]) >= 100 || getenv("USLAB_DEBUG")));
	sizes[0] = 8;  /* smallest objects too */
	kmem_cache_destroy(caches[0]);
	caches[0] = kmem_cache_create("stress-8", 8, 0, 0, NULL);
	has_ctor[0] = 0;

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);

	boxes = calloc((size_t)nthreads, sizeof(*boxes));
	tids = calloc((size_t)nthreads, sizeof(*tids));
	for (int i = 0; i < nthreads; i++)
		pthread_mutex_init(&boxes[i].lock, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&tids[i], NULL, worker, (void *)(intptr_t)i);
	pthread_t sig_t, shr_t;
	if (signals_on)
		pthread_create(&sig_t, NULL, signaller, NULL);
	pthread_create(&shr_t, NULL, shrinker, NULL);
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < nthreads) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&stop_aux, 1, __ATOMIC_RELEASE);
	if (signals_on)
		pthread_join(sig_t, NULL);
	pthread_join(shr_t, NULL);
	__atomic_store_n(&release, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	/* Objects posted to a thread after it drained its box for the last time. */
	for (int i = 0; i < nthreads; i++)
		drain_box(i);

	printf("allocs %lu frees %lu nulls %lu corrupt %lu signals %lu shrinks %lu ctor runs %lu\n",
	       allocs, frees, nulls, corrupt, sigs, shrinks, ctor_runs);
	CHECK_EQ(corrupt, 0);
	CHECK_EQ(nulls, 0);
	CHECK_EQ(allocs, frees);
	CHECK(allocs > (unsigned long)ops / 4);
	if (signals_on)
		CHECK(sigs > 0);
	for (int i = 0; i < NCACHES; i++) {
		struct usl_sheaf_counts sc;
		if (uslab_sheaf_capacity(caches[i])) {
			usl_sheaf_counts(caches[i], &sc);
			/* Full sheaves above the level decay over time (exact with
			 * USLAB_DECAY_MS=0); empties never exceed their limit. */
			if (usl_opt.decay_ms == 0) {
				CHECK(sc.barn_full <= caches[i]->barn_max_full);
				CHECK(sc.barn_empty <= caches[i]->barn_max_empty);
			}
		}
		usl_cache_flush_all(caches[i]);
		if (uslab_sheaf_capacity(caches[i])) {
			usl_sheaf_counts(caches[i], &sc);
			CHECK_EQ(sc.cpu_objects + sc.barn_objects + sc.barn_full, 0);
			CHECK(sc.barn_empty <= caches[i]->barn_max_empty);
		}
		CHECK_EQ(usl_engine_objects_in_use(caches[i]), 0);
		if (usl_is_slab(caches[i])) {
			CHECK_EQ(usl_slab_check_lists(caches[i]), 0);
		} else {
			struct usl_state_counts st;
			usl_slub_state_counts(caches[i], &st);
			CHECK_EQ(st.cpu_slabs + st.cpu_partial, 0);
			CHECK_EQ(st.full, 0);
		}
		kmem_cache_destroy(caches[i]);
	}
	CHECK_EQ(uslab_error_count(), 0);
	return test_summary();
}
