/* reclaim.c - giving memory back across the caches: the decay sweep
 * (usl_decay_sweep, run by the decay schedule, decay.c), malloc_trim's
 * release (uslab_release_free_memory), the out-of-memory reclaim before an
 * allocation's retry (usl_reclaim_for_retry) and the barns' trim before the
 * page provider grows. Locks: slab_mutex (the registry's) across a walk;
 * reclaim_lock, a leaf, around the reclaim's state (never held across it). */
#include <errno.h>

#include "../percpu/percpu.h"
#include "../engine/engine.h"
#include "../testing.h"
#include "common.h"
#include "registry.h"

/* Before the page provider grows (the engine's hook): give back what caches
 * hold beyond need (the barns' surplus of full sheaves). Skipped if slab_mutex
 * is busy. */
static void trim_one(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_sheaf_trim_barn(s);
}

void usl_reclaim_before_grow(void)
{
	if (!usl_registry_trylock())
		return;
	usl_registry_each(trim_one, NULL, USL_EACH_FORWARD);
	usl_registry_unlock();
}

struct sweep {
	uint64_t now;
	unsigned int flushed;                /* sheaves sent back to slabs */
	bool pending;                        /* a barn still holds what a later sweep gives back */
};

static void decay_one(struct kmem_cache *s, void *arg)
{
	struct sweep *sw = arg;
	if (usl_is_slab(s)) {                /* SLAB's cache_reap */
		unsigned int done = usl_array_reap(s, sw->now);
		sw->flushed += done;
		sw->pending |= done != 0;
		return;
	}
	if (s->oslots) {                     /* the owned front end: idle slots give their slabs up */
		sw->flushed += usl_owned_decay(s, &sw->pending);
		return;
	}
	sw->flushed += usl_sheaf_decay(s, sw->now);
	sw->pending |= usl_sheaf_decay_pending(s);
}

/* A cache's part of malloc_trim: sheaves, barn and cpu slabs flushed, empty
 * slabs freed. */
static void release_one(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_cache_flush_all(s);
	usl_engine_release(s);
}

/* atomic, for tests: a sequence count, odd while a sweep runs, +2 a sweep */
unsigned long usl_decay_sweeps;

int usl_decay_sweep(uint64_t now)
{
	struct sweep sw = { now, 0, false };

	if (!usl_registry_trylock())
		return -1;
	__atomic_fetch_add(&usl_decay_sweeps, 1, __ATOMIC_SEQ_CST);
	int saved_errno = errno;             /* free() keeps errno; the sweep makes system calls */
	usl_pages_aging = true;
	usl_registry_each(decay_one, &sw, USL_EACH_OWN_LAST);
	usl_pages_aging = false;
	usl_registry_unlock();
	size_t purged = usl_pages_purge(false) + usl_map_purge(false);
	__atomic_fetch_add(&usl_decay_sweeps, 1, __ATOMIC_SEQ_CST);
	errno = saved_errno;
	return sw.flushed || purged || sw.pending;
}

/* An allocation found no memory: what uslab holds free goes back, as
 * malloc_trim gives it (every cache's per-CPU caches, barns and empty slabs,
 * the free page blocks, the kept mappings), and the caller tries once more.
 * Only with no uslab lock held on this thread (a nested allocation, or one
 * under a slot, cannot flush) and not from inside a reclaim. One thread at a
 * time; those that waited for it try again at once. True when the caller
 * should retry. */
static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;   /* a leaf */
static pthread_cond_t reclaim_done = PTHREAD_COND_INITIALIZER;
static bool reclaim_busy;            /* under reclaim_lock: a reclaim runs */
static unsigned long reclaims;       /* under reclaim_lock: reclaims done */
static __thread bool reclaiming;

bool usl_reclaim_for_retry(void)
{
	if (usl_report_holds || reclaiming || !__atomic_load_n(&usl_inited, __ATOMIC_ACQUIRE))
		return false;
	int saved_errno = errno;
	usl_lock(&reclaim_lock);
	unsigned long seen = reclaims;
	while (reclaim_busy && reclaims == seen)
		pthread_cond_wait(&reclaim_done, &reclaim_lock);
	if (reclaims == seen) {              /* else another thread's reclaim just ended */
		reclaim_busy = reclaiming = true;
		usl_unlock(&reclaim_lock);
		usl_registry_lock();
		usl_registry_each(release_one, NULL, USL_EACH_OWN_LAST);
		usl_registry_unlock();
		usl_pages_release();
		usl_map_purge(true);
		usl_lock(&reclaim_lock);
		reclaim_busy = reclaiming = false;
		reclaims++;
		pthread_cond_broadcast(&reclaim_done);
	}
	usl_unlock(&reclaim_lock);
	errno = saved_errno;
	return true;
}

/* A fork's child: no reclaim runs (its thread may have been another). */
void usl_reclaim_after_fork(void)
{
	pthread_mutex_init(&reclaim_lock, NULL);
	pthread_cond_init(&reclaim_done, NULL);
	reclaim_busy = false;
}

/* malloc_trim's job: every cache's sheaves, barns and cpu slabs flushed, its
 * empty slabs freed, then every free page returned to the OS. uslab's own
 * caches last, as in the decay sweep (shrunk first, a sheaf cache would keep
 * a page of freed sheaves per capacity). */
size_t uslab_release_free_memory(void)
{
	usl_ensure_init();
	usl_registry_lock();
	usl_registry_each(release_one, NULL, USL_EACH_OWN_LAST);
	usl_registry_unlock();
	return usl_pages_release() + usl_map_purge(true);
}

/* Every CPU's sheaves and slabs of s, and its barn, back to slabs (shrink,
 * destroy, malloc_trim). */
void usl_cache_flush_all(struct kmem_cache *s)
{
	usl_owned_flush_all(s);
	usl_sheaf_flush_all(s);
	usl_engine_flush_cpus(s);
}
