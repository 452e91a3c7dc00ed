/* background.c - the decay schedule: the tick of the slow paths
 * (usl_decay_tick), and the decay thread, which runs the decay sweep
 * (usl_decay_sweep, given by common_init) every half decay interval, so a program that stops calling the allocator
 * still gets its free memory back: barn sheaves, the CPUs' sheaves and cpu
 * slabs of idle kmalloc classes, empty slabs, old free page blocks.
 *
 * Started lazily, by the first slow-path tick (usl_decay_tick: every 16th slow
 * path; free's fast path counts toward it only while no thread runs and the
 * heap is large: sampling_update) once the page provider has committed
 * MIN_HEAP outside the metadata regions: a small program never has it. Off with USLAB_BACKGROUND=0 or USLAB_DECAY_MS=0, and
 * when pthread_create fails (a sandbox that forbids threads): then the slow
 * paths sweep, as without it. It parks (no wake-up at all) once sweeps find
 * nothing to give back, no barn holds sheaves and no free page block waits to
 * age; the next
 * slow-path tick wakes it. Awake, it sweeps twice per decay interval. fork():
 * the child has no thread and starts its own the same way. A vfork child
 * (which shares the parent's memory and runs no fork handler) never starts
 * one: its thread would outlive the child's exit, which then never completes,
 * and its parent waits for ever. All signals are blocked in it.
 *
 * Locks: bg_lock (its state and condition variable; never held across a
 * sweep or pthread_create). The sweep takes the registry's and the layers'
 * locks as any slow path does. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "../testing.h"
#include "common.h"

enum bg_state { BG_NONE, BG_STARTING, BG_RUNNING, BG_FAILED };

static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond;
static enum bg_state bg_state;       /* atomic reads outside bg_lock */
static bool bg_parked;               /* under bg_lock */
static bool bg_kicked;               /* under bg_lock: a tick asked for a sweep */
/* Both given by common_init before the first cache exists, hence before any
 * tick (ticks come from frees and the sheaves' slow paths) or fork handler. */
static int (*sweep_fn)(uint64_t now);   /* usl_decay_sweep */
static void (*sample_fn)(bool on);      /* usl_fast_mode_sample */
static uint64_t next_sweep_ms;       /* atomic: the ticks' clock */
static pid_t bg_pid;                 /* the process that may start the thread (not a vfork child) */
static void no_stats_tick(void) {}
void (*usl_stats_tick)(void) = no_stats_tick;
static __thread unsigned int tick_calls;
unsigned long usl_background_sweeps; /* atomic: sweeps the thread ran (tests, docs) */
unsigned long usl_background_parks;  /* atomic: times it parked */

/* Sweeps in a row that gave nothing back, with no barn holding sheaves, before
 * the thread parks: a free block ages over two epochs of the page provider, so
 * a few quiet sweeps mean nothing is on its way out. */
#define QUIET_SWEEPS 4

static void bg_wait(uint64_t ms, bool park)
{
	struct timespec ts;

	usl_lock(&bg_lock);
	if (park) {
		bg_parked = true;
		__atomic_fetch_add(&usl_background_parks, 1, __ATOMIC_RELAXED);
		while (!bg_kicked)
			pthread_cond_wait(&bg_cond, &bg_lock);
		bg_parked = false;
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
	bg_kicked = false;
	usl_unlock(&bg_lock);
}

static void *bg_main(void *unused)
{
	(void)unused;
	unsigned int quiet = 0;
	size_t dirty = 0;

	for (;;) {
		bool park = quiet >= QUIET_SWEEPS && dirty == 0;
		bg_wait(usl_opt.decay_ms / 2 + 1, park);
		if (park)
			quiet = 0;
		int r = sweep_fn(usl_now_ms());
		__atomic_fetch_add(&usl_background_sweeps, 1, __ATOMIC_RELAXED);
		if (usl_opt.stats)
			__atomic_load_n(&usl_stats_tick, __ATOMIC_ACQUIRE)();
		quiet = r != 0 ? 0 : quiet + 1;   /* (busy: not quiet) */
		usl_pages_stats(NULL, &dirty, NULL);
	}
	return NULL;
}

/* A heap smaller than this has little to give back, and a small program (a
 * shell tool, one that calls unshare(), which a second thread would make
 * fail) keeps a single thread. */
#define MIN_HEAP ((size_t)8 << 20)

void usl_background_init(int (*sweep)(uint64_t now), void (*sample)(bool on))
{
	sweep_fn = sweep;
	__atomic_store_n(&sample_fn, sample, __ATOMIC_RELEASE);
}

/* The process that may start the thread: this one, at load (a vfork child
 * that makes the first allocation must not become it); fork's child takes
 * its own pid in usl_background_after_fork. */
__attribute__((constructor)) static void bg_owner(void)
{
	bg_pid = getpid();
}

static void background_start(void)
{
	enum bg_state none = BG_NONE;

	if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) != BG_NONE || !usl_opt.background ||
	    usl_opt.decay_ms == 0 || __atomic_load_n(&usl_top, __ATOMIC_RELAXED) - usl_meta_reserved() < MIN_HEAP ||
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
	int err = pthread_create(&tid, &attr, bg_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (!err)
		pthread_setname_np(tid, "uslab-decay");
	errno = saved_errno;
	__atomic_store_n(&bg_state, err ? BG_FAILED : BG_RUNNING, __ATOMIC_RELEASE);
}

/* True when the thread runs (woken if it was parked): the tick leaves the
 * sweep to it. */
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

/* free's fast path counts its frees toward this tick (USL_MODE_SAMPLE) only
 * while no decay thread runs and none will: USLAB_BACKGROUND=0 (set from the
 * start, usl_read_options), a failed pthread_create, or a heap of MIN_HEAP or
 * more whose thread has not started yet. Then a program whose frees all take
 * fast paths still sweeps. With the thread, the slow paths' ticks wake it;
 * without it and with a smaller heap (a program that will start the thread
 * if it grows), there is little to give back. */
static void sampling_update(void)
{
	enum bg_state st = __atomic_load_n(&bg_state, __ATOMIC_ACQUIRE);
	bool want = usl_opt.decay_ms && st != BG_RUNNING &&
	            (!usl_opt.background || st == BG_FAILED ||
	             __atomic_load_n(&usl_top, __ATOMIC_RELAXED) - usl_meta_reserved() >= MIN_HEAP);
	bool has = __atomic_load_n(&usl_opt.fast_mode, __ATOMIC_RELAXED) & USL_MODE_SAMPLE;
	if (want != has)
		__atomic_load_n(&sample_fn, __ATOMIC_ACQUIRE)(want);
}

void usl_decay_tick(void)
{
	if (usl_unlikely(usl_opt.stats))
		__atomic_load_n(&usl_stats_tick, __ATOMIC_ACQUIRE)();
	if (usl_opt.decay_ms == 0 || ++tick_calls % 16)
		return;                          /* the clock is read every 16 slow paths */
	background_start();                  /* once the heap is large enough for it */
	sampling_update();
	uint64_t now = usl_now_ms(), next = __atomic_load_n(&next_sweep_ms, __ATOMIC_RELAXED);
	if (now < next || !__atomic_compare_exchange_n(&next_sweep_ms, &next, now + usl_opt.decay_ms / 2, false,
	                                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	/* The decay thread sweeps on its own clock: wake it if it sleeps for
	 * want of work. Without it, this caller sweeps. */
	if (!background_kick())
		sweep_fn(now);
}

void usl_background_after_fork(void)
{
	__atomic_store_n(&next_sweep_ms, 0, __ATOMIC_RELAXED);
	bg_pid = getpid();
	pthread_mutex_init(&bg_lock, NULL);
	bg_parked = bg_kicked = false;
	if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) != BG_FAILED)
		__atomic_store_n(&bg_state, BG_NONE, __ATOMIC_RELAXED);
	sampling_update();                   /* no thread here (yet): frees count if the heap is large */
}

bool usl_background_running(void)
{
	return __atomic_load_n(&bg_state, __ATOMIC_ACQUIRE) == BG_RUNNING;
}
