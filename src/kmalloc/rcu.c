/* rcu.c - kfree_rcu on the program's liburcu flavour (uslab_rcu_init): objects
 * freed after a grace period, queued in per-CPU batches, one call_rcu per
 * batch (never per object), freed with kfree_bulk by the batch's callback.
 * A CPU's first object starts its batch and asks for a "kick" after one
 * grace period, which hands over whatever the batch holds then, so a partial
 * batch waits at most two grace periods with no timer thread. Waiting objects
 * are counted and bounded (USLAB_RCU_MAX): past the bound, a caller outside a
 * read-side section waits for the callbacks (the flavour's rcu_barrier).
 * Also SLAB_TYPESAFE_BY_RCU: a discarded slab's pages go back only after a
 * grace period (free_slab_after_gp, the engines' hook).
 * Locks: a CPU's queue lock (a leaf spin lock), and gp_slabs.lock, each
 * alone (nothing is allocated or called under them); the flavour's own
 * inside call_rcu and rcu_barrier. Built with liburcu's headers
 * (USLAB_HAVE_LIBURCU): without them these calls do not exist, and a program
 * that uses them fails to link. docs/GUIDE.md, "RCU". */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kmalloc.h"

#ifdef USLAB_HAVE_LIBURCU
#include <urcu/call-rcu.h>
#include <urcu/flavor.h>

/* A batch: 2 KiB, a kmalloc block. offs[i] is the offset of object i's
 * rcu_head in it (NO_HEAD for kfree_rcu_mightsleep's headless objects). */
#define NO_HEAD UINT32_MAX
#define BATCH ((2048 - 32) / 12)
struct batch {
	struct rcu_head head;      /* liburcu's: this batch's call_rcu */
	unsigned int n;
	unsigned int cpu;
	void *obj[BATCH];
	uint32_t offs[BATCH];
};
_Static_assert(sizeof(struct batch) <= 2048, "a batch is a kmalloc-2k block");

struct cpu_queue {
	int lock;                  /* a leaf spin lock: held for an append or a pointer swap */
	struct batch *cur;         /* objects not yet handed to call_rcu */
	struct rcu_head kick;      /* handed to call_rcu while kick_pending */
	bool kick_pending;
	unsigned long queued;      /* objects queued here (under lock) */
	unsigned long freed;       /* of those, freed (atomic: batch_done, once a batch) */
} __attribute__((aligned(64)));

static const struct rcu_flavor_struct *flavor;
static struct cpu_queue *queues;
static unsigned int nqueues;
static uintptr_t mark_secret;
static unsigned long rcu_max;              /* objects waiting, at most (USLAB_RCU_MAX) */

/* SLAB_TYPESAFE_BY_RCU's discarded slabs (free_slab_after_gp, below). */
static struct {
	pthread_mutex_t lock;
	struct usl_list pending;   /* discarded, not yet handed over */
	struct usl_list flight;    /* handed over: freed by slabs_done */
	bool in_flight;
	struct rcu_head head;
	unsigned long deferred, released;
} gp_slabs = { .lock = PTHREAD_MUTEX_INITIALIZER,
               .pending = { &gp_slabs.pending, &gp_slabs.pending },
               .flight = { &gp_slabs.flight, &gp_slabs.flight } };


/* Counters: objects queued and freed per CPU queue (no shared line on the
 * fast path); batches handed over, objects refused (before uslab_rcu_init,
 * bad pointers, double kfree_rcu), and the times a caller waited at the bound
 * (relaxed atomics, off the per-object path). */
static unsigned long n_batches, n_refused, n_waits;

static inline void count(unsigned long *c, unsigned long d) { __atomic_fetch_add(c, d, __ATOMIC_RELAXED); }
static inline unsigned long q_waiting(const struct cpu_queue *q)
{
	return __atomic_load_n(&q->queued, __ATOMIC_RELAXED) - __atomic_load_n(&q->freed, __ATOMIC_RELAXED);
}
static void totals(unsigned long *queued, unsigned long *freed)
{
	*queued = *freed = 0;
	for (unsigned int i = 0; i < nqueues; i++) {
		*freed += __atomic_load_n(&queues[i].freed, __ATOMIC_RELAXED);
		*queued += __atomic_load_n(&queues[i].queued, __ATOMIC_RELAXED);
	}
}
static unsigned long waiting(void)
{
	unsigned long q, f;
	totals(&q, &f);
	return q - f;
}

/* The word a queued object's rcu_head carries (its second word, liburcu's
 * func, which only call_rcu writes): says "queued for RCU" to a second
 * kfree_rcu; cleared when the object is freed, so a reused object's stale
 * copy cannot match its next life's kfree_rcu. */
static inline uintptr_t queued_mark(const void *obj) { return (uintptr_t)obj ^ mark_secret; }

/* After the grace period: the objects' marks cleared, the objects freed. */
static void batch_done(struct rcu_head *head)
{
	struct batch *b = usl_container_of(head, struct batch, head);
	for (unsigned int i = 0; i < b->n; i++)
		if (b->offs[i] != NO_HEAD)
			((uintptr_t *)((char *)b->obj[i] + b->offs[i]))[1] = 0;
	kfree_bulk(b->n, b->obj);
	count(&queues[b->cpu].freed, b->n);
	kfree(b);
}

static void hand_over(struct batch *b)
{
	count(&n_batches, 1);
	flavor->update_call_rcu(&b->head, batch_done);
}

/* Hands over what q's batch holds, if anything; kick: the call is q's kick
 * (its callback), which may be queued again from now on. */
static void hand_over_partial(struct cpu_queue *q, bool kick)
{
	usl_spin_lock_leaf(&q->lock);
	struct batch *b = q->cur && q->cur->n ? q->cur : NULL;
	if (b)
		q->cur = NULL;
	if (kick)
		q->kick_pending = false;
	usl_spin_unlock_leaf(&q->lock);
	if (b)
		hand_over(b);
}

/* One grace period after a batch started: whatever it holds goes. */
static void kick_done(struct rcu_head *head)
{
	hand_over_partial(usl_container_of(head, struct cpu_queue, kick), true);
}

static void fork_prepare(void)
{
	for (unsigned int i = 0; i < nqueues; i++)
		usl_spin_lock_leaf(&queues[i].lock);
	usl_lock(&gp_slabs.lock);
}

static void fork_release(void)
{
	usl_unlock(&gp_slabs.lock);
	for (unsigned int i = nqueues; i-- > 0;)
		usl_spin_unlock_leaf(&queues[i].lock);
}

static void kvfree_rcu_barrier_quiet(void);
static void free_slab_after_gp(struct slab *slab);

/* kmem_cache_destroy: what waits is freed first (where waiting is allowed). */
static void destroy_wait(void)
{
	if (waiting() && !flavor->read_ongoing())
		kvfree_rcu_barrier_quiet();
}

int uslab_rcu_init(const struct rcu_flavor_struct *f)
{
	static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
	if (!f || !f->update_call_rcu || !f->barrier || !f->read_ongoing) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_rcu_init: %s; kfree_rcu stays refused",
		           f ? "the flavour lacks call_rcu, rcu_barrier or read_ongoing" : "NULL flavour");
		errno = EINVAL;
		return -1;
	}
	usl_ensure_init();
	pthread_mutex_lock(&init_lock);
	int rc = 0;
	if (flavor && flavor != f) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_rcu_init: another flavour was given already; it stays");
		errno = EBUSY;
		rc = -1;
	} else if (!flavor) {
		rcu_max = (unsigned long)usl_opt.rcu_max;
		nqueues = usl_nr_cpus ? usl_nr_cpus : 1;
		queues = calloc(nqueues, sizeof(*queues));
		if (!queues) {
			pthread_mutex_unlock(&init_lock);
			errno = ENOMEM;
			return -1;
		}
		mark_secret = (uintptr_t)usl_rand64() | 1;
		__atomic_store_n(&usl_rcu_destroy_wait, destroy_wait, __ATOMIC_RELEASE);
		__atomic_store_n(&usl_free_slab_after_gp, free_slab_after_gp, __ATOMIC_RELEASE);
		pthread_atfork(fork_prepare, fork_release, fork_release);
		__atomic_store_n(&flavor, f, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_lock);
	return rc;
}

/* Past the bound: wait for the callbacks of what is queued, where waiting is
 * allowed (not inside a read-side section, which the wait would deadlock). */
static void wait_at_bound(void)
{
	if (flavor->read_ongoing())
		return;
	static int said;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		usl_report(USLAB_ERR_NONE, "kfree_rcu: %lu objects wait for a grace period (USLAB_RCU_MAX %lu); "
		           "callers outside read-side sections now wait for them", waiting(), rcu_max);
	count(&n_waits, 1);
	kvfree_rcu_barrier();
}

void uslab_kvfree_call_rcu(struct rcu_head *head, void *ptr)
{
	if (ZERO_OR_NULL_PTR(ptr))
		return;
	const struct rcu_flavor_struct *f = __atomic_load_n(&flavor, __ATOMIC_ACQUIRE);
	if (usl_unlikely(!f)) {
		/* The flavour decides which readers a grace period waits for: a
		 * guess could free an object a reader still holds. Refused (the
		 * object stays allocated), reported once. */
		static int said;
		count(&n_refused, 1);
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			usl_report(USLAB_ERR_BAD_ARG, "kfree_rcu: %p before uslab_rcu_init(flavour); not freed (and no "
			           "further kfree_rcu before it is reported)", ptr);
		return;
	}
	size_t size = usl_block_size_named(ptr, "kfree_rcu");   /* reports a pointer that starts no object */
	if (usl_unlikely(!size)) {
		count(&n_refused, 1);
		return;
	}
	uint32_t off = NO_HEAD;
	if (head) {
		uintptr_t h = (uintptr_t)head - (uintptr_t)ptr;
		if (usl_unlikely(h > size - sizeof(struct rcu_head))) {
			usl_report(USLAB_ERR_BAD_ARG, "kfree_rcu(%s): rcu_head %p is not inside the object %p; not freed",
			           usl_block_owner_name(ptr), (void *)head, ptr);
			count(&n_refused, 1);
			return;
		}
		uintptr_t *w = (uintptr_t *)head;
		if (usl_unlikely(__atomic_load_n(&w[1], __ATOMIC_RELAXED) == queued_mark(ptr))) {
			usl_report(USLAB_ERR_DOUBLE_FREE, "kfree_rcu(%s): %p is queued for RCU already; not queued again",
			           usl_block_owner_name(ptr), ptr);
			count(&n_refused, 1);
			return;
		}
		__atomic_store_n(&w[1], queued_mark(ptr), __ATOMIC_RELAXED);
		off = (uint32_t)h;
	}
	struct cpu_queue *q = &queues[(unsigned int)usl_current_cpu() % nqueues];
	struct batch *spare = NULL;
	for (;;) {
		usl_spin_lock_leaf(&q->lock);
		if (!q->cur && spare) {
			q->cur = spare;
			spare = NULL;
		}
		struct batch *b = q->cur;
		if (b) {
			b->obj[b->n] = ptr;
			b->offs[b->n] = off;
			b->n++;
			__atomic_store_n(&q->queued, q->queued + 1, __ATOMIC_RELAXED);
			bool full = b->n == BATCH, kick = !q->kick_pending && !full;
			if (full)
				q->cur = NULL;
			if (kick)
				q->kick_pending = true;
			usl_spin_unlock_leaf(&q->lock);
			if (kick)
				f->update_call_rcu(&q->kick, kick_done);
			if (full)
				hand_over(b);
			break;
		}
		usl_spin_unlock_leaf(&q->lock);
		spare = kmalloc(sizeof(struct batch), GFP_KERNEL | __GFP_NOWARN);
		if (!spare) {
			/* No memory for a batch: this object alone, after a
			 * grace period the caller waits for; inside a read-side
			 * section that wait would never end, so it stays. */
			if (f->read_ongoing()) {
				usl_report(USLAB_ERR_NOMEM, "kfree_rcu(%s): no memory for a batch, inside a read-side "
				           "section; %p not freed", usl_block_owner_name(ptr), ptr);
				count(&n_refused, 1);
				return;
			}
			f->update_synchronize_rcu();
			if (head)
				((uintptr_t *)head)[1] = 0;
			kfree(ptr);
			return;
		}
		spare->n = 0;
		spare->cpu = (unsigned int)(q - queues);
	}
	if (spare)
		kfree(spare);
	/* The bound, a CPU's share of it (what waits is spread over the CPUs
	 * that queued it). */
	if (usl_unlikely(q_waiting(q) > rcu_max / nqueues))
		wait_at_bound();
}

void kvfree_rcu_barrier(void)
{
	const struct rcu_flavor_struct *f = __atomic_load_n(&flavor, __ATOMIC_ACQUIRE);
	if (!f)
		return;
	if (f->read_ongoing()) {
		usl_report(USLAB_ERR_BAD_ARG, "kvfree_rcu_barrier: called inside a read-side critical section (it "
		           "would wait for itself); not waiting");
		return;
	}
	kvfree_rcu_barrier_quiet();
}

/* Every CPU's batch handed over, then the callbacks waited for. */
static void kvfree_rcu_barrier_quiet(void)
{
	for (unsigned int i = 0; i < nqueues; i++)
		hand_over_partial(&queues[i], false);
	flavor->barrier();   /* every callback queued so far (a kick's hand-over too) has run */
	flavor->barrier();   /* and those they queued: a kick's batch, slabs_done's next list */
}

/* ===========================================================================
 * SLAB_TYPESAFE_BY_RCU: discarded slabs' pages back after a grace period.
 * The slabs wait on a list linked through their slab_list (no allocation:
 * an engine discards deep in its slow paths); the list is handed over whole,
 * one call_rcu at a time on gp_slabs.head, and what was discarded meanwhile
 * goes with the next one. Lock: gp_slabs.lock, alone.
 */
static void slabs_done(struct rcu_head *head)
{
	(void)head;
	/* flight is this callback's alone until in_flight is cleared. */
	unsigned long n = 0;
	while (!usl_list_empty(&gp_slabs.flight)) {
		struct slab *slab = usl_container_of(gp_slabs.flight.next, struct slab, slab_list);
		usl_list_del(&slab->slab_list);
		usl_pages_free(usl_slab_address(slab));
		n++;
	}
	usl_lock(&gp_slabs.lock);
	gp_slabs.released += n;
	bool again = !usl_list_empty(&gp_slabs.pending);
	if (again)
		usl_list_splice_tail_init(&gp_slabs.pending, &gp_slabs.flight);
	else
		gp_slabs.in_flight = false;
	usl_unlock(&gp_slabs.lock);
	if (again)
		flavor->update_call_rcu(&gp_slabs.head, slabs_done);
}

static void free_slab_after_gp(struct slab *slab)
{
	usl_lock(&gp_slabs.lock);
	usl_list_add_tail(&slab->slab_list, &gp_slabs.pending);
	gp_slabs.deferred++;
	bool go = !gp_slabs.in_flight;
	if (go) {
		usl_list_splice_tail_init(&gp_slabs.pending, &gp_slabs.flight);
		gp_slabs.in_flight = true;
	}
	usl_unlock(&gp_slabs.lock);
	if (go)
		flavor->update_call_rcu(&gp_slabs.head, slabs_done);
}

int uslab_rcu_stats(struct uslab_rcu_stats *out)
{
	if (!out) {
		errno = EINVAL;
		return -1;
	}
	unsigned long queued = 0, freed = 0;
	if (__atomic_load_n(&flavor, __ATOMIC_ACQUIRE))
		totals(&queued, &freed);
	*out = (struct uslab_rcu_stats){
		.queued = queued,
		.batches = __atomic_load_n(&n_batches, __ATOMIC_RELAXED),
		.freed = freed,
		.refused = __atomic_load_n(&n_refused, __ATOMIC_RELAXED),
		.waits = __atomic_load_n(&n_waits, __ATOMIC_RELAXED),
		.flavor_set = __atomic_load_n(&flavor, __ATOMIC_ACQUIRE) != NULL,
	};
	out->waiting = out->queued - out->freed;
	usl_lock(&gp_slabs.lock);
	out->slabs_waiting = gp_slabs.deferred - gp_slabs.released;
	usl_unlock(&gp_slabs.lock);
	return 0;
}

#endif /* USLAB_HAVE_LIBURCU */
