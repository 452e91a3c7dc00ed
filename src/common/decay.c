/* decay.c - the decay schedule: the tick of the slow paths
 * (usl_decay_tick), and the background thread ("uslab-decay"), which runs the
 * decay sweep (usl_decay_sweep, given by common_init) every half decay
 * interval, so a program that stops calling the allocator still gets its free
 * memory back: barn sheaves, the CPUs' sheaves and cpu slabs of idle kmalloc
 * classes, empty slabs, old free blocks; and, with USLAB_STATS, keeps the live
 * view current (the usl_stats_tick hook, at least every publication interval
 * the statistics layer asks for), so an idle process shows what it holds.
 *
 * Started lazily, by the first slow-path tick (usl_decay_tick: every 16th slow
 * path; free's fast path counts toward it only while no thread runs and the
 * heap is large: tick_update) once the page provider has committed
 * MIN_HEAP outside the metadata regions: a small program never has it. With
 * USLAB_STATS it starts regardless of the heap: from the statistics layer's
 * constructor (usl_decay_thread_start) and, in a forked child, at its first
 * tick. Off with USLAB_BACKGROUND=0, with USLAB_DECAY_MS=0 unless USLAB_STATS
 * is set (then it only publishes), and when pthread_create fails (a sandbox
 * that forbids threads): then the slow paths sweep and publish, as without
 * it. Its sweeps park once they find nothing to give back, no barn holds
 * sheaves and no free page block waits to age; the next slow-path tick wakes
 * them. Parked without USLAB_STATS, the thread has no wake-up at all; with it,
 * it still wakes every publication interval and publishes, but sweeps only
 * when a tick wakes its sweeps again. fork(): the child has no thread and
 * starts its own the same way. A vfork child (which shares the parent's
 * memory and runs no fork handler) never starts one: its thread would outlive
 * the child's exit, which then never completes, and its parent waits for
 * ever. All signals are blocked in it.
 *
 * Locks: bg_lock (its state and condition variable; never held across a
 * sweep, a publication or pthread_create); bg_gate (held by the thread
 * across a sweep or a publication, and by every fork's prepare, first; a
 * plain mutex, not counted as a uslab lock). The sweep takes the registry's and
 * the layers' locks as any slow path does; the publication, the statistics
 * layer's (stats/live.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "../testing.h"
#include "common.h"

enum bg_state { BG_NONE, BG_STARTING, BG_RUNNING, BG_FAILED };
/* The thread runs its own code: its start-up in the C library (and a
 * sanitizer's runtime, which allocates there) is over. */
static bool bg_started;

static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held by the thread across each sweep and publication (a plain mutex, not
 * counted as a uslab lock): a fork whose thread was interrupted inside uslab
 * takes it to keep the thread out of the locks it cannot take itself. */
static pthread_mutex_t bg_gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond;
static enum bg_state bg_state;       /* atomic reads outside bg_lock */
static bool bg_parked;               /* under bg_lock: the sweeps are parked */
static bool bg_kicked;               /* under bg_lock: a tick asked for a sweep */
/* Given by common_init before the first cache exists, hence before any tick
 * (ticks come from frees and the sheaves' slow paths) or fork handler; with
 * USLAB_STATS the thread may start before (from the statistics layer's
 * constructor), and sweeps nothing until sweep_fn is there. */
static int (*sweep_fn)(uint64_t now);   /* atomic: usl_decay_sweep */
static void (*tick_fn)(bool on);      /* usl_mode_tick */
static uint64_t next_sweep_ms;       /* atomic: the ticks' clock */
static pid_t bg_pid;                 /* the process that may start the thread (not a vfork child) */
static unsigned int no_stats_tick(bool thread)
{
	(void)thread;
	return 0;
}
unsigned int (*usl_stats_tick)(bool thread) = no_stats_tick;
static __thread unsigned int tick_calls;
unsigned long usl_decay_thread_sweeps; /* atomic: sweeps the thread ran (tests, docs) */
unsigned long usl_decay_thread_parks;  /* atomic: times its sweeps parked */

/* Sweeps in a row that gave nothing back, with no barn holding sheaves, before
 * the thread's sweeps park: a free block ages over two epochs of the page
 * provider, so a few quiet sweeps mean nothing is on its way out. */
#define QUIET_SWEEPS 4
#define FOREVER UINT64_MAX

/* Sleep ms (FOREVER: until a tick kicks), or less if a tick kicks the parked
 * sweeps (park: they park now, if they did not already). True if kicked: the
 * sweeps are awake again. */
static bool bg_wait(uint64_t ms, bool park)
{
	struct timespec ts;
	bool kicked;

	usl_lock(&bg_lock);
	if (park && !bg_parked) {
		bg_parked = true;
		__atomic_fetch_add(&usl_decay_thread_parks, 1, __ATOMIC_RELAXED);
	}
	if (ms == FOREVER) {
		while (!bg_kicked)
			pthread_cond_wait(&bg_cond, &bg_lock);
	} else {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(ms / 1000);
		ts.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!bg_kicked && pthread_cond_timedwait(&bg_cond, &bg_lock, &ts) != ETIMEDOUT)
			;
	}
	kicked = bg_kicked;
	bg_kicked = false;
	if (kicked)
		bg_parked = false;
	usl_unlock(&bg_lock);
	return kicked;
}

/* One sweep: usl_decay_sweep's result (1: it gave something back or a barn
 * still holds sheaves; 0: nothing; -1: the registry was busy); *dirty: the
 * free blocks left to age. */
static int bg_sweep(uint64_t now, size_t *dirty)
{
	int (*sweep)(uint64_t) = __atomic_load_n(&sweep_fn, __ATOMIC_ACQUIRE);
	int r = sweep ? sweep(now) : 0;
	__atomic_fetch_add(&usl_decay_thread_sweeps, 1, __ATOMIC_RELAXED);
	usl_pages_stats(NULL, dirty, NULL);
	return r;
}

/* The loop: a sweep every half decay interval while sweeps find work, parked
 * after QUIET_SWEEPS quiet ones until a tick kicks; with USLAB_STATS, the
 * live view published whenever the statistics layer says it is due (its hook
 * gives the milliseconds until the next publication; 0: none wanted). */
static void *bg_main(void *unused)
{
	(void)unused;
	__atomic_store_n(&bg_started, true, __ATOMIC_RELEASE);
	const uint64_t half = usl_opt.decay_ms / 2 + 1;
	bool sweeping = usl_opt.decay_ms != 0;
	unsigned int quiet = 0;
	uint64_t next_sweep = usl_now_ms() + half;

	for (;;) {
		uint64_t now = usl_now_ms();
		if (sweeping && now >= next_sweep) {
			size_t dirty = 0;
			pthread_mutex_lock(&bg_gate);
			quiet = bg_sweep(now, &dirty) != 0 ? 0 : quiet + 1;   /* (busy: not quiet) */
			pthread_mutex_unlock(&bg_gate);
			now = usl_now_ms();
			next_sweep = now + half;
			if (quiet >= QUIET_SWEEPS && dirty == 0)
				sweeping = false;        /* parked until a tick kicks */
		}
		uint64_t wait = sweeping ? next_sweep - now : FOREVER;
		if (usl_opt.stats) {
			pthread_mutex_lock(&bg_gate);
			unsigned int view = __atomic_load_n(&usl_stats_tick, __ATOMIC_ACQUIRE)(true);
			pthread_mutex_unlock(&bg_gate);
			if (view && view < wait)
				wait = view;
		}
		if (bg_wait(wait, !sweeping && usl_opt.decay_ms)) {
			sweeping = true;             /* kicked: sweep at once */
			quiet = 0;
			next_sweep = 0;
		}
	}
	return NULL;
}

/* A heap smaller than this has little to give back, and a small program (a
 * shell tool, one that calls unshare(), which a second thread would make
 * fail) keeps a single thread. */
#define MIN_HEAP ((size_t)8 << 20)

void usl_decay_init(int (*sweep)(uint64_t now), void (*tick)(bool on))
{
	__atomic_store_n(&sweep_fn, sweep, __ATOMIC_RELEASE);
	__atomic_store_n(&tick_fn, tick, __ATOMIC_RELEASE);
}

/* The process that may start the thread: this one, at load (a vfork child
 * that makes the first allocation must not become it); fork's child takes
 * its own pid in usl_decay_after_fork. Before the other constructors
 * (the statistics layer's starts the thread). */
__attribute__((constructor(101))) static void bg_owner(void)
{
	bg_pid = getpid();
}

/* With USLAB_STATS the thread publishes the live view: it starts whatever
 * the heap's size, and with USLAB_DECAY_MS=0 (then it only publishes). */
static void background_start(void)
{
	enum bg_state none = BG_NONE;

	if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) != BG_NONE || !usl_opt.background ||
	    (!usl_opt.stats && (usl_opt.decay_ms == 0 ||
	                        __atomic_load_n(&usl_top, __ATOMIC_RELAXED) - usl_meta_reserved() < MIN_HEAP)) ||
	    getpid() != bg_pid ||          /* a vfork child: once, when the heap first is large enough */
	    !__atomic_compare_exchange_n(&bg_state, &none, BG_STARTING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	/* pthread_create may allocate (under LD_PRELOAD, from uslab): bg_state
	 * STARTING keeps those calls from starting a second thread. */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bg_cond, &ca);
	pthread_condattr_destroy(&ca);

	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;
	int saved_errno = errno;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);   /* the thread starts with every signal blocked */
	__atomic_store_n(&bg_started, false, __ATOMIC_RELAXED);
	int err = pthread_create(&tid, &attr, bg_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (!err)
		pthread_setname_np(tid, "uslab-decay");
	errno = saved_errno;
	__atomic_store_n(&bg_state, err ? BG_FAILED : BG_RUNNING, __ATOMIC_RELEASE);
}

/* True when the thread runs (its sweeps woken if they were parked): the tick
 * leaves the sweep to it. */
static bool background_kick(void)
{
	if (__atomic_load_n(&bg_state, __ATOMIC_ACQUIRE) != BG_RUNNING)
		return false;
	usl_lock(&bg_lock);
	if (bg_parked) {
		bg_kicked = true;
		pthread_cond_signal(&bg_cond);
	}
	usl_unlock(&bg_lock);
	return true;
}

/* free's fast path counts its frees toward this tick (USL_MODE_TICK) only
 * while no decay thread runs and none will: USLAB_BACKGROUND=0 (set from the
 * start, usl_read_options), a failed pthread_create, or a heap of MIN_HEAP or
 * more whose thread has not started yet. Then a program whose frees all take
 * fast paths still sweeps. With the thread, the slow paths' ticks wake it;
 * without it and with a smaller heap (a program that will start the thread
 * if it grows), there is little to give back. */
static void tick_update(void)
{
	enum bg_state st = __atomic_load_n(&bg_state, __ATOMIC_ACQUIRE);
	bool want = usl_opt.decay_ms && st != BG_RUNNING &&
	            (!usl_opt.background || st == BG_FAILED ||
	             __atomic_load_n(&usl_top, __ATOMIC_RELAXED) - usl_meta_reserved() >= MIN_HEAP);
	bool has = __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED) & USL_MODE_TICK;
	if (want != has)
		__atomic_load_n(&tick_fn, __ATOMIC_ACQUIRE)(want);
}

void usl_decay_tick(void)
{
	if (usl_unlikely(usl_opt.stats)) {
		__atomic_load_n(&usl_stats_tick, __ATOMIC_ACQUIRE)(false);
		if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) == BG_NONE)
			background_start();      /* the view's publisher at once (a forked child's first tick) */
	}
	if (usl_opt.decay_ms == 0 || ++tick_calls % 16)
		return;                          /* the clock is read every 16 slow paths */
	background_start();                  /* once the heap is large enough for it */
	tick_update();
	uint64_t now = usl_now_ms(), next = __atomic_load_n(&next_sweep_ms, __ATOMIC_RELAXED);
	if (now < next || !__atomic_compare_exchange_n(&next_sweep_ms, &next, now + usl_opt.decay_ms / 2, false,
	                                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	/* The decay thread sweeps on its own clock: wake it if it sleeps for
	 * want of work. Without it, this caller sweeps. */
	if (!background_kick())
		__atomic_load_n(&sweep_fn, __ATOMIC_ACQUIRE)(now);
}

void usl_decay_thread_start(void)
{
	background_start();
}

/* Every fork's prepare keeps the thread out of its sweeps and publications:
 * the gate, once the thread has started (a thread still in its start-up may
 * be inside the C library's or a sanitizer's allocator, whose locks a fork
 * may not guard), if it leaves the gate soon. A fork whose thread holds a
 * uslab lock (a signal handler's, which interrupted an allocation) takes none
 * of uslab's, so the thread must not be inside a sweep that waits for one. A
 * sweep blocked on the lock the interrupted thread holds never leaves; then
 * the fork goes on after about 50 ms without it (docs/ARCHITECTURE.md,
 * "fork"). */
static __thread bool gate_held;

void usl_decay_fork_hold(void)
{
	gate_held = false;
	enum bg_state st = __atomic_load_n(&bg_state, __ATOMIC_ACQUIRE);
	if (st != BG_RUNNING && st != BG_STARTING)
		return;
	for (int i = 0; i < 500; i++) {
		/* A thread still starting may be inside the allocator of the C
		 * library or a sanitizer: wait until it runs its own code. */
		if (!__atomic_load_n(&bg_started, __ATOMIC_ACQUIRE)) {
			if (__atomic_load_n(&bg_state, __ATOMIC_ACQUIRE) == BG_FAILED)
				return;
		} else if (pthread_mutex_trylock(&bg_gate) == 0) {
			gate_held = true;
			return;
		}
		struct timespec ts = { 0, 100 * 1000 };
		nanosleep(&ts, NULL);
	}
}

void usl_decay_fork_unhold(void)
{
	if (gate_held)
		pthread_mutex_unlock(&bg_gate);
	gate_held = false;
}

void usl_decay_after_fork(bool locks_held)
{
	__atomic_store_n(&next_sweep_ms, 0, __ATOMIC_RELAXED);
	bg_pid = getpid();
	pthread_mutex_init(&bg_gate, NULL);
	gate_held = false;
	bg_parked = bg_kicked = false;
	if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) != BG_FAILED)
		__atomic_store_n(&bg_state, BG_NONE, __ATOMIC_RELAXED);
	if (locks_held)
		return;                          /* bg_lock may be the interrupted code's; its next tick samples */
	pthread_mutex_init(&bg_lock, NULL);
	tick_update();                   /* no thread here (yet): frees count if the heap is large */
}

bool usl_decay_thread_running(void)
{
	return __atomic_load_n(&bg_state, __ATOMIC_ACQUIRE) == BG_RUNNING;
}
