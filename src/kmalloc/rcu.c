/* rcu.c - kfree_rcu on the program's liburcu flavour (uslab_rcu_init): objects
 * freed after a grace period, one call_rcu per sheaf or batch (never per
 * object). An object of a cache with sheaves waits in a per-CPU RCU sheaf of
 * its cache, which after the grace period goes whole to the barn as a full
 * sheaf (the kernel's rcu_free sheaf): the objects never go back to their
 * slabs. Any other object (kmalloc's large blocks, SLAB, debug and owned
 * caches, a cache whose sheaf place on this CPU is taken) waits in the CPU's
 * batch, freed with kfree_bulk by the batch's callback. A CPU's first object
 * asks for a "kick" after one grace period, which hands over whatever the
 * batch and sheaves hold then, so a partial one waits at most two grace
 * periods with no timer thread. Waiting objects
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

/* An RCU sheaf: objects of one cache with their rcu_head at one offset
 * (off), in an empty sheaf of the cache's capacity (usl_sheaf_rcu_get). */
struct rsheaf {
	struct rcu_head head;      /* liburcu's: this sheaf's call_rcu */
	struct kmem_cache *s;
	struct slab_sheaf *sh;
	uint32_t off;
	uint32_t cpu;
};
/* A CPU's RCU sheaves: one place per cache id modulo RSHEAVES; an object
 * whose place holds another cache's sheaf goes to the batch. */
#define RSHEAVES 8

struct cpu_queue {
	int lock;                  /* a leaf spin lock: held for an append or a pointer swap */
	struct batch *cur;         /* objects not yet handed to call_rcu */
	struct rsheaf *rs[RSHEAVES];   /* sheaves not yet handed to call_rcu */
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
static unsigned long n_batches, n_sheaves, n_refused, n_waits;

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

/* Callers waiting at the bound (wait_at_bound), woken by the callbacks. The
 * count is peeked by every callback: a sequentially consistent add on both
 * sides, so a callback either sees the waiter or the waiter sees its count. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int waiters;
} progress = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

/* A callback freed n objects that q queued. */
static void freed_on(struct cpu_queue *q, unsigned long n)
{
	__atomic_fetch_add(&q->freed, n, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&progress.waiters, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&progress.lock);
		pthread_cond_broadcast(&progress.cond);
		pthread_mutex_unlock(&progress.lock);
	}
}

/* The word a queued object's rcu_head carries (its second word, liburcu's
 * func, which only call_rcu writes): says "queued for RCU" to a second
 * kfree_rcu; cleared when the object is freed, so a reused object's stale
 * copy cannot match its next life's kfree_rcu. */
static inline uintptr_t queued_mark(const void *obj) { return (uintptr_t)obj ^ mark_secret; }

/* After the grace period, obj's mark (its rcu_head at off) is taken: true if
 * it was still there. Else obj was written after its kfree_rcu: freed and
 * reused meanwhile (a second owner's), or a write after free; reported, and
 * obj is not freed (it may be another's now). */
static bool mark_take(void *obj, uint32_t off)
{
	if (off == NO_HEAD)
		return true;
	uintptr_t *w = (uintptr_t *)((char *)obj + off);
	if (usl_unlikely(w[1] != queued_mark(obj))) {
		usl_report(USLAB_ERR_CORRUPT, "kfree_rcu(%s): %p was written after its kfree_rcu (freed and reused "
		           "meanwhile?); not freed", usl_block_owner_name(obj), obj);
		return false;
	}
	w[1] = 0;
	return true;
}

/* After the grace period: the objects' marks taken, the objects freed. */
static void batch_done(struct rcu_head *head)
{
	struct batch *b = usl_container_of(head, struct batch, head);
	for (unsigned int i = 0; i < b->n; i++)
		if (!mark_take(b->obj[i], b->offs[i]))
			b->obj[i] = NULL;
	kfree_bulk(b->n, b->obj);
	freed_on(&queues[b->cpu], b->n);
	kfree(b);
}

static void hand_over(struct batch *b)
{
	count(&n_batches, 1);
	flavor->update_call_rcu(&b->head, batch_done);
}

/* After the grace period: the objects' marks taken, each given the free
 * state a push leaves (freestate.h: a two-word cache's marker written, a
 * one-word cache's checked, so an object freed meanwhile is reported), and
 * the sheaf to the barn. */
static void rsheaf_done(struct rcu_head *head)
{
	struct rsheaf *rs = usl_container_of(head, struct rsheaf, head);
	struct kmem_cache *s = rs->s;
	struct slab_sheaf *sh = rs->sh;
	unsigned int n = sh->size, k = 0;
	const bool tw = usl_two_word(s);
	const uint32_t blk = (uint32_t)__builtin_ctzl(s->fp_mask);
	for (unsigned int i = 0; i < n; i++) {
		void *x = sh->objects[i];
		if (!mark_take(x, rs->off))
			continue;
		if (usl_opt.harden) {
			if (tw) {
				usl_marker_set(s, x);
			} else if (usl_unlikely(!usl_marker_take((uintptr_t)x, s->offset, s->fp_secret, blk))) {
				usl_marker_double_free(s, x, "kfree_rcu");
				continue;
			}
		}
		sh->objects[k++] = x;
	}
	sh->size = k;
	usl_sheaf_rcu_put(s, sh);
	freed_on(&queues[rs->cpu], n);
	kfree(rs);
}

static void hand_over_sheaf(struct rsheaf *rs)
{
	count(&n_batches, 1);
	count(&n_sheaves, 1);
	flavor->update_call_rcu(&rs->head, rsheaf_done);
}

/* Hands over what q's batch and sheaves hold, if anything; kick: the call is
 * q's kick (its callback), which may be queued again from now on. */
static void hand_over_partial(struct cpu_queue *q, bool kick)
{
	struct rsheaf *rs[RSHEAVES];
	usl_spin_lock_leaf(&q->lock);
	struct batch *b = q->cur && q->cur->n ? q->cur : NULL;
	if (b)
		q->cur = NULL;
	for (int i = 0; i < RSHEAVES; i++) {   /* (a sheaf in place holds an object) */
		rs[i] = q->rs[i];
		q->rs[i] = NULL;
	}
	if (kick)
		q->kick_pending = false;
	usl_spin_unlock_leaf(&q->lock);
	if (b)
		hand_over(b);
	for (int i = 0; i < RSHEAVES; i++)
		if (rs[i])
			hand_over_sheaf(rs[i]);
}

/* One grace period after a batch started: whatever it holds goes. */
static void kick_done(struct rcu_head *head)
{
	hand_over_partial(usl_container_of(head, struct cpu_queue, kick), true);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&progress.lock);
	for (unsigned int i = 0; i < nqueues; i++)
		usl_spin_lock_leaf(&queues[i].lock);
	usl_lock(&gp_slabs.lock);
}

static void fork_release(void)
{
	usl_unlock(&gp_slabs.lock);
	for (unsigned int i = nqueues; i-- > 0;)
		usl_spin_unlock_leaf(&queues[i].lock);
	pthread_mutex_unlock(&progress.lock);
}

/* The child has none of its parent's waiting threads. */
static void fork_child(void)
{
	progress.waiters = 0;
	progress.cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	fork_release();
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
		pthread_atfork(fork_prepare, fork_release, fork_child);
		__atomic_store_n(&flavor, f, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_lock);
	return rc;
}

/* Past the bound: wait until q's callbacks brought what waits there back
 * under its share, where waiting is allowed (not inside a read-side
 * section, which the wait would deadlock). A grace period that never ends
 * keeps the caller waiting: the queue does not grow. */
static void wait_at_bound(struct cpu_queue *q)
{
	if (flavor->read_ongoing())
		return;
	static int said;
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		usl_report(USLAB_ERR_NONE, "kfree_rcu: %lu objects wait for a grace period (USLAB_RCU_MAX %lu); "
		           "callers outside read-side sections now wait for them", waiting(), rcu_max);
	count(&n_waits, 1);
	hand_over_partial(q, false);   /* what q holds goes with the next grace period */
	pthread_mutex_lock(&progress.lock);
	__atomic_fetch_add(&progress.waiters, 1, __ATOMIC_SEQ_CST);
	while (q_waiting(q) > rcu_max / nqueues)
		pthread_cond_wait(&progress.cond, &progress.lock);
	__atomic_fetch_sub(&progress.waiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&progress.lock);
}

/* One object appended under q's lock: counted, and a kick asked for if
 * none is pending (the caller queues it after the unlock). */
static bool appended(struct cpu_queue *q, bool full)
{
	__atomic_store_n(&q->queued, q->queued + 1, __ATOMIC_RELAXED);
	bool kick = !q->kick_pending && !full;
	if (kick)
		q->kick_pending = true;
	return kick;
}

/* ptr, an object of s (whose rcu_head is at off), into q's RCU sheaf of s,
 * which is started if there is none; false if its place holds another
 * cache's sheaf or there is no memory for one (the batch takes ptr then). */
static bool queue_in_sheaf(const struct rcu_flavor_struct *f, struct cpu_queue *q, struct kmem_cache *s,
                           void *ptr, uint32_t off)
{
	struct rsheaf **place = &q->rs[s->id % RSHEAVES], *spare = NULL;
	bool queued = false;
	for (;;) {
		usl_spin_lock_leaf(&q->lock);
		struct rsheaf *rs = *place;
		if (!rs && spare) {
			*place = rs = spare;
			spare = NULL;
		}
		if (rs && rs->s == s && rs->off == off) {
			struct slab_sheaf *sh = rs->sh;
			sh->objects[sh->size++] = ptr;
			bool full = sh->size == sh->capacity;
			if (full)
				*place = NULL;
			bool kick = appended(q, full);
			usl_spin_unlock_leaf(&q->lock);
			if (kick)
				f->update_call_rcu(&q->kick, kick_done);
			if (full)
				hand_over_sheaf(rs);
			queued = true;
			break;
		}
		usl_spin_unlock_leaf(&q->lock);
		if (rs || spare)     /* another cache's (or offset's) sheaf is in place */
			break;
		spare = kmalloc(sizeof(*spare), GFP_NOWAIT | __GFP_NOWARN);
		if (!spare)
			break;
		spare->sh = usl_sheaf_rcu_get(s);
		if (!spare->sh) {
			kfree(spare);
			return false;
		}
		spare->s = s;
		spare->off = off;
		spare->cpu = (unsigned int)(q - queues);
	}
	if (spare) {
		usl_sheaf_rcu_put(s, spare->sh);   /* empty: back to the barn */
		kfree(spare);
	}
	return queued;
}

/* ptr into q's batch, which is started if there is none. False: no memory
 * for a batch, and ptr was freed after a grace period waited for here, or
 * (inside a read-side section) refused. */
static bool queue_in_batch(const struct rcu_flavor_struct *f, struct cpu_queue *q, void *ptr, struct rcu_head *head,
                           uint32_t off)
{
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
			bool full = b->n == BATCH;
			if (full)
				q->cur = NULL;
			bool kick = appended(q, full);
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
				return false;
			}
			f->update_synchronize_rcu();
			if (head)
				((uintptr_t *)head)[1] = 0;
			kfree(ptr);
			return false;
		}
		spare->n = 0;
		spare->cpu = (unsigned int)(q - queues);
	}
	if (spare)
		kfree(spare);
	return true;
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
	struct kmem_cache *s = usl_block_owner(ptr);
	if (!(s && usl_sheaf_rcu_ok(s) && queue_in_sheaf(f, q, s, ptr, off)) && !queue_in_batch(f, q, ptr, head, off))
		return;
	/* The bound, a CPU's share of it (what waits is spread over the CPUs
	 * that queued it). */
	if (usl_unlikely(q_waiting(q) > rcu_max / nqueues))
		wait_at_bound(q);
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

unsigned long usl_rcu_sheaves(void)
{
	return __atomic_load_n(&n_sheaves, __ATOMIC_RELAXED);
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
