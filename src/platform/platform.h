/* platform.h - the platform layer (src/platform/): USLAB_* options, reports,
 * the clock, CPU and page facts, the spin lock, and the once-per-process choice
 * of per-CPU mode (rseq or locked). The bottom floor: it calls no other layer.
 * Locks: init_lock (start-up) and report_lock (copies the report handler). */
#ifndef USL_PLATFORM_H
#define USL_PLATFORM_H

#include "../types.h"
#include "topology.h"

/* ---- options (options.c) ---- */
struct usl_options {
	int min_objects;             /* 0 = kernel formula */
	int min_order;
	int max_order;
	bool max_order_given;        /* USLAB_MAX_ORDER set: it bounds malloc's own slab orders too */
	int rseq;                    /* -1 auto, 0 off, 1 on */
	int sheaves;                 /* USLAB_SHEAVES: -1 default (on), 0 off, 1 on */
	int front;                   /* USLAB_FRONT: enum usl_front (USLAB_SHEAVES=0: cpuslab) */
	unsigned int decay_ms;       /* free block age before madvise */
	int nomerge;                 /* USLAB_NOMERGE: 1 = no cache merging */
	int background;              /* USLAB_BACKGROUND: 0 = no decay thread */
	int harden;                  /* USLAB_HARDEN: 0 = no free markers (2: as 1, an older
	                                name for what USLAB_RANDOM now does by default) */
	int random;                  /* USLAB_RANDOM: 1 = an unpredictable layout (random
	                                order, delayed reuse; docs/ARCHITECTURE.md,
	                                "Hardening"), 0 = the kernel's order */
	int stats;                   /* USLAB_STATS: 1 = event counters kept (engine/slub/stat.h) */
	unsigned int mode;           /* what the malloc fast paths test, once: USL_MODE_HARDEN
	                                alone is the common case (usl_read_options); its low
	                                byte is malloc's, USL_MODE_TICK free's alone */
	const char *stats_out;       /* where slabinfo goes at exit: NULL none, "" stderr, else a path */
	int allocator;               /* USLAB_ALLOCATOR: enum usl_engine */
	int nodes;                   /* USLAB_NODES: a fake topology of that many nodes (0: the real one) */
	int slab_colour;             /* USLAB_SLAB_COLOUR: SLAB's colour 0 off, 1 racy, 2 under the node lock */
	int bulk_lookahead;          /* USLAB_BULK_LOOKAHEAD: objects of other slabs a detached freelist's scan
	                                passes before it stops (1: consecutive objects only) */
	int stack_depth;             /* USLAB_STACK_DEPTH: frames an owner track keeps (0: the caller alone) */
	int oom;                     /* USLAB_OOM: enum usl_oom, what a failed malloc does besides NULL */
	int rcu_max;                 /* USLAB_RCU_MAX: objects kfree_rcu lets wait (kmalloc/rcu.c) */
};
extern struct usl_options usl_opt USL_HIDDEN;
#define USL_MODE_HARDEN 1u
#define USL_MODE_STATS 2u
/* More than one node: free's fast path takes no cache's objects (its other path tests
 * the object's node and sends another node's object back to it,
 * common/free.c); malloc's classes ignore it; set once at start-up, after the
 * topology. */
#define USL_MODE_NUMA 4u
/* free's fast path counts its frees for the decay tick: set and cleared at
 * run time by the tick (common/decay.c) while the heap is large and no
 * decay thread runs. Above the low byte, which malloc's fast path reads. */
#define USL_MODE_TICK 0x100u
enum usl_front { USL_FRONT_SHEAVES = 0, USL_FRONT_CPUSLAB = 1, USL_FRONT_OWNED = 2 };
/* A malloc-family call that fails: NULL and ENOMEM alone (glibc's), and a
 * report, or a report and abort() (jemalloc's xmalloc). */
enum usl_oom { USL_OOM_NULL = 0, USL_OOM_REPORT = 1, USL_OOM_ABORT = 2 };
/* USLAB_OOM (v NULL: unset) into usl_opt.oom; a bad value is reported and
 * leaves the default (null). */
USL_HIDDEN void usl_oom_parse(const char *v);
USL_HIDDEN void usl_read_options(void);
/* USLAB_FRONT (v NULL: unset) into usl_opt.front; a bad value is reported
 * and leaves the default (sheaves, or cpuslab with USLAB_SHEAVES=0). */
USL_HIDDEN void usl_front_parse(const char *v);          /* once, from usl_platform_init */
/* USLAB_STATS (v NULL: unset) into usl_opt.stats and stats_out; a bad value
 * is reported and leaves them off. */
USL_HIDDEN void usl_stats_parse(const char *v);
/* USLAB_ALLOCATOR (v NULL: unset) into usl_opt.allocator; a bad value is
 * reported and leaves the default (slub). */
USL_HIDDEN void usl_allocator_parse(const char *v);
/* USLAB_DEBUG (debugopt.c): parsed by usl_read_options (v NULL: unset); the
 * SLAB_* debug flags a cache of this name gets from it (0 when unset), and
 * whether 'O' asked to spare caches whose slab order debugging would raise. */
USL_HIDDEN void usl_debug_parse(const char *v);
USL_HIDDEN uint32_t usl_debug_flags_for(const char *name);
USL_HIDDEN bool usl_debug_order_off(void);
/* USLAB_QUARANTINE (debugopt.c): bytes of freed debug-cache objects held back
 * from reuse (0: none). */
USL_HIDDEN void usl_quarantine_parse(const char *v);
USL_HIDDEN size_t usl_debug_quarantine(void);

/* ---- reports (report.c) ---- */
USL_HIDDEN void usl_report(enum uslab_error kind, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A report of several lines as they are (no "uslab: " prefix, '\n' between
 * lines, none at the end): the debug caches' reports in the kernel's shape.
 * Made with no uslab lock held. */
USL_HIDDEN void usl_report_text(enum uslab_error kind, const char *text);
/* A report made while its thread holds any uslab lock (counted by usl_lock and
 * the spin locks: locks, slot locks, flush marks under flush_mutex, an owned
 * slot taken) is queued and
 * delivered when the thread's last lock is released, so a report handler may
 * call into uslab, malloc included. */
extern __thread unsigned int usl_report_holds USL_HIDDEN __attribute__((tls_model("initial-exec")));
extern __thread bool usl_report_queued USL_HIDDEN __attribute__((tls_model("initial-exec")));
USL_HIDDEN void usl_report_deliver_queued(void);
/* A free pointer in the free object obj of cache `name` decoded to next, not
 * an object of obj's slab (a write after free, an overflow from a neighbour):
 * reported (USLAB_ERR_CORRUPT); returns NULL, where the caller cuts the list. */
USL_HIDDEN void *usl_report_free_list(const char *name, const void *obj, const void *next) USL_SLOW_PATH;
/* ---- refused frees and pops (refuse.c): the one wording of each ----
 * fn: the program's call; cache: the cache's name (NULL: none known). */
USL_HIDDEN void usl_refuse_double_free(const char *fn, const char *cache, const void *x, const char *why)
	USL_SLOW_PATH;                            /* why NULL: "already free" */
USL_HIDDEN void usl_refuse_never_allocated(const char *fn, const char *cache, const void *x) USL_SLOW_PATH;
USL_HIDDEN void usl_refuse_twice_in_array(const char *fn, const char *cache, const void *x) USL_SLOW_PATH;
/* A bulk free of more objects of one slab than it has in use. */
USL_HIDDEN void usl_refuse_overfree(const char *fn, const char *cache, unsigned int freed, unsigned int inuse)
	USL_SLOW_PATH;
/* ignored: the free was by pointer alone (kfree, free), which ignores it. */
USL_HIDDEN void usl_refuse_foreign(const char *fn, const char *cache, const void *x, bool ignored) USL_SLOW_PATH;
USL_HIDDEN void usl_refuse_wrong_cache(const char *fn, const char *cache, const void *x, const char *owner)
	USL_SLOW_PATH;
/* what: "is not in a slab" and the like (NULL: not an object of this cache);
 * with cache NULL the free was by pointer alone and is ignored. */
USL_HIDDEN void usl_refuse_not_object(const char *fn, const char *cache, const void *x, const char *what)
	USL_SLOW_PATH;
USL_HIDDEN void usl_refuse_inside(const char *fn, const char *cache, const void *x, unsigned long offset)
	USL_SLOW_PATH;
/* A pop (or refill) that does not hand obj out: how it can have stopped being free. */
USL_HIDDEN void usl_refuse_pop(const char *fn, const char *cache, const void *obj, const char *how) USL_SLOW_PATH;
/* A two-word cache's object on its way back to its slab without its marker. */
USL_HIDDEN void usl_refuse_lost_marker(const char *fn, const char *cache, const void *x) USL_SLOW_PATH;
/* A two-word cache's object taken from a free list without its free flag. */
USL_HIDDEN void usl_refuse_written(const char *cache, const void *obj) USL_SLOW_PATH;
/* fork(): report_lock and the queue's lock, then init_lock (platform.c), taken
 * by the prepare handler (common/fork.c) and released in parent and child. */
USL_HIDDEN void usl_report_fork_lock(void);
USL_HIDDEN void usl_report_fork_unlock(void);
USL_HIDDEN void usl_platform_fork_lock(void);
USL_HIDDEN void usl_platform_fork_unlock(void);
static inline void usl_report_hold(void) { usl_report_holds++; }
static inline void usl_report_release(void)
{
	if (--usl_report_holds == 0 && __builtin_expect(usl_report_queued, 0))
		usl_report_deliver_queued();
}

/* uslab's mutexes: pthread's, with reports held while one is held. The
 * count goes up before the lock is taken and down after it is released, so
 * a signal handler never finds a lock of its thread held and not counted
 * (a fork there must know: common/fork.c, fork_prepare). */
static inline void usl_lock(pthread_mutex_t *m)
{
	usl_report_hold();
	pthread_mutex_lock(m);
}
static inline bool usl_trylock(pthread_mutex_t *m)
{
	usl_report_hold();
	if (pthread_mutex_trylock(m) != 0) {
		usl_report_release();
		return false;
	}
	return true;
}
static inline void usl_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	usl_report_release();
}

/* ---- CPUs, pages, clock, per-CPU mode (platform.c) ---- */
extern unsigned int usl_nr_cpus USL_HIDDEN;    /* possible CPUs: per-CPU slots */
extern unsigned int usl_online_cpus USL_HIDDEN; /* for min_objects (the kernel's present CPUs) */
extern bool usl_rseq_mode USL_HIDDEN;           /* chosen once in usl_platform_init() */
extern long usl_rseq_off USL_HIDDEN;            /* %fs offset of the rseq area (or a dummy) */
extern unsigned int usl_rseq_nr USL_HIDDEN;     /* usl_nr_cpus in rseq mode, 0 in locked mode:
                                                   the sections' cpu check then always fails */
/* Options, CPU counts and the per-CPU mode, once; no allocation. The library's
 * start-up (usl_ensure_init, pages/pages.h) calls it first. */
USL_HIDDEN void usl_platform_init(void);
USL_HIDDEN size_t usl_os_page_size(void);       /* AT_PAGESZ; callable before start-up */
/* A private anonymous mapping of bytes (a multiple of the page size) with a
 * PROT_NONE page on each side, so an overflow out of a neighbouring mapping
 * faults before it reaches it: for uslab's own structures (MAP_NORESERVE:
 * pages count as they are touched). NULL if the kernel refuses. */
USL_HIDDEN void *usl_map_guarded(size_t bytes, int prot);
/* ---- NUMA topology: platform/topology.h; the calling thread's node here ---- */
/* The node of the CPU this thread runs on (or ran on a moment ago): in rseq
 * mode the rseq area's cpu_id (its second 32-bit word), in locked mode
 * sched_getcpu (usl_this_node_slow, platform.c). */
USL_HIDDEN unsigned int usl_this_node_slow(void);
static inline unsigned int usl_this_node(void)
{
	if (usl_likely(usl_nr_nodes == 1))
		return 0;
	if (usl_unlikely(!usl_rseq_mode))
		return usl_this_node_slow();
	uint32_t cpu = __atomic_load_n((const uint32_t *)((char *)__builtin_thread_pointer() + usl_rseq_off + 4),
	                               __ATOMIC_RELAXED);
	return cpu < USL_MAX_CPUS ? usl_cpu_node[cpu] : 0;
}

/* ---- call stacks (stack.c) ---- */
/* Load the unwinder and the symbolizer (libunwind, libdw: dlopen), once; at
 * start-up when USLAB_DEBUG is set, else by the first kmem_cache_create of a
 * cache that tracks owners, outside every uslab lock (dlopen allocates). */
#define USL_STACK_MAX 16
USL_HIDDEN void usl_stack_init(void);
/* The current call stack from caller (the return address where the
 * allocator's entry point was called) on, kept once in the depot: its handle,
 * 0 if there is none (no unwinder: the caller alone is kept). */
USL_HIDDEN uint32_t usl_stack_save(unsigned int skip, uintptr_t caller);
USL_HIDDEN unsigned int usl_stack_get(uint32_t handle, uintptr_t *pc, unsigned int max);
/* A code address as the kernel's %pS prints it: "function+0xoff/0xsize
 * (file:line)" with libdw, else dladdr's "function+0xoff" or "object+0xoff",
 * else "0xaddr". Call it with no uslab lock held (libdw allocates). */
USL_HIDDEN void usl_symbolize(uintptr_t addr, char *buf, size_t n);
/* fork(): libdw's session lock and the depot's, taken first by fork_prepare
 * (a thread symbolizing allocates, so under its lock it takes uslab's). */
USL_HIDDEN void usl_stack_fork_lock(void);
USL_HIDDEN void usl_stack_fork_unlock(void);
USL_HIDDEN void usl_unmap_guarded(void *p, size_t bytes);
USL_HIDDEN void usl_name_number(char *buf, size_t len, const char *prefix, unsigned int n);
USL_HIDDEN uint64_t usl_now_ms(void);
USL_HIDDEN int usl_current_cpu(void);           /* sched_getcpu() or 0 */
/* 64 secret bits (getrandom; where it is refused, a mix of the kernel's
 * AT_RANDOM bytes, the clock and a counter): hardening's keys. Never 0. */
USL_HIDDEN uint64_t usl_random64(void);
/* Fast random bits for the layout (carving order, refill shuffles): a
 * per-thread xorshift64* seeded by usl_random64, seeded again in a fork's
 * child (usl_random_fork_child), so parent and child never share a future
 * layout. Not for keys. */
USL_HIDDEN uint64_t usl_rand64(void);
USL_HIDDEN void usl_random_fork_child(void);
/* A uniform number below n (n > 0) from 32 random bits (Lemire's multiply). */
static inline uint32_t usl_rand_below(uint32_t r, uint32_t n)
{
	return (uint32_t)(((uint64_t)r * n) >> 32);
}
USL_HIDDEN int usl_membarrier_rseq(void);       /* abort all rseq sections of this process */
/* ---- assertions ----
 * usl_assert(cond): an invariant the code relies on; usl_assert_held(lock):
 * lock (a spin lock's int *, or a pthread_mutex_t * taken with usl_lock) is
 * held by this thread. Compiled in with USLAB_ASSERTS (CMake's option of that
 * name: on in every build type but Release and MinSizeRel, the sanitizer
 * builds included), compiled out otherwise: then the condition is
 * type-checked and never evaluated. A failure prints the condition, file:line
 * and function on stderr and aborts. With assertions a spin lock's word holds
 * its holder's id (usl_spin_holder) instead of 1. */
#ifdef USLAB_ASSERTS
USL_HIDDEN void usl_assert_fail(const char *cond, const char *file, int line, const char *fn)
	__attribute__((noreturn)) USL_SLOW_PATH;
#define usl_assert(c) (usl_likely(c) ? (void)0 : usl_assert_fail(#c, __FILE__, __LINE__, __func__))
/* This thread's spin-lock id: never 0, the same in a fork's child. */
USL_HIDDEN int usl_spin_holder_slow(void);
extern __thread int usl_spin_self USL_HIDDEN __attribute__((tls_model("initial-exec")));
static inline int usl_spin_holder(void)
{
	return usl_likely(usl_spin_self) ? usl_spin_self : usl_spin_holder_slow();
}
USL_HIDDEN bool usl_mutex_held(pthread_mutex_t *m);
/* Before a fork: in its child, the mutexes the forking thread holds still
 * count as this thread's. */
USL_HIDDEN void usl_mutex_fork_prepare(void);
#else
static inline void usl_mutex_fork_prepare(void) {}
#define usl_assert(c) ((void)sizeof(!(c)))
static inline int usl_spin_holder(void) { return 1; }
static inline bool usl_mutex_held(pthread_mutex_t *m) { (void)m; return true; }
#endif
static inline bool usl_spin_held(int *lock)
{
	return __atomic_load_n(lock, __ATOMIC_RELAXED) == usl_spin_holder();
}
#define usl_held(lock) _Generic((lock), int *: usl_spin_held, pthread_mutex_t *: usl_mutex_held)(lock)
#define usl_assert_held(lock) usl_assert(usl_held(lock))

/* One try at a spin lock: an exchange; with assertions a compare-and-swap,
 * so that a failed try leaves the holder's id in the word. */
static inline bool usl_spin_try(int *lock)
{
#ifdef USLAB_ASSERTS
	int free_word = 0;
	return __atomic_compare_exchange_n(lock, &free_word, usl_spin_holder(), false, __ATOMIC_ACQUIRE,
	                                   __ATOMIC_RELAXED);
#else
	return !__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE);
#endif
}

USL_HIDDEN void usl_spin_lock_slow(int *lock);
/* A spin-then-yield lock: one exchange when free (inlined), else the slow loop. */
static inline void usl_spin_lock(int *lock)
{
	usl_report_hold();
	if (usl_unlikely(!usl_spin_try(lock)))
		usl_spin_lock_slow(lock);
}
static inline void usl_spin_unlock(int *lock)
{
	usl_assert_held(lock);
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	usl_report_release();
}
/* The same for a leaf lock held only for a copy or a pointer swap, under which
 * nothing is reported (a slot's sheaf_lock). It is counted all the same: a
 * fork from a signal handler must know whether its thread holds any lock
 * (common/fork.c, fork_prepare). */
static inline void usl_spin_lock_leaf(int *lock)
{
	usl_report_holds++;
	if (usl_unlikely(!usl_spin_try(lock)))
		usl_spin_lock_slow(lock);
}
static inline void usl_spin_unlock_leaf(int *lock)
{
	usl_assert_held(lock);
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	usl_report_holds--;
}

#endif /* USL_PLATFORM_H */
