/* fork.c - the fork handlers, which take every lock of the library in its
 * documented order (C stdio's list lock first) before a fork and release them
 * after it in both processes; the registry's own part is registry.c's
 * (usl_registry_fork_lock). Takes every lock; owns none but its per-thread
 * notes of what this fork took. docs/ARCHITECTURE.md, "fork". */
#include "../percpu/percpu.h"
#include "../engine/engine.h"
#include "../testing.h"
#include "common.h"
#include "registry.h"

/* fork(): take every allocator lock in the documented order (classes_lock,
 * sheaf_classes_lock, cache_cache_lock, slab_mutex, flush_mutex, each cache's
 * sheaf locks and barn lock, its slot locks and list_lock, start_lock,
 * pages_lock, mappings_lock, then the platform's init_lock, report_lock and the
 * report queue's lock), so the child of a multithreaded parent finds them all
 * free.
 *
 * Two exceptions (docs/ARCHITECTURE.md, "fork"):
 * - C stdio's list lock comes first, as in glibc's own fork, which takes it
 *   before its malloc locks: a thread in fflush(NULL) holds it while it waits
 *   for a stream whose holder is inside malloc (getline), so a fork that held
 *   the allocator's locks while it waited for the list lock would close a
 *   circle. glibc resets the lock in the child of a multithreaded parent
 *   itself; otherwise the child handler lets go of it.
 * - A thread that forks while it holds a uslab lock (its signal handler
 *   interrupted an allocation) takes nothing: it cannot take what it holds,
 *   and the code it interrupted goes on in the parent and in the child alike,
 *   releasing what it holds. The decay thread is kept out of its sweeps
 *   meanwhile. glibc does the same for a process with one thread. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern char __libc_single_threaded __attribute__((weak));

static __thread bool fork_locks_held;   /* this fork takes nothing */
static __thread bool fork_stdio;        /* this fork took stdio's list lock */
static __thread bool fork_stdio_reset;  /* and glibc resets it in the child */

/* A cache's locks, taken and released in fork's order. */
static void owned_lock(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_owned_fork_lock(s);
}

static void owned_unlock(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_owned_fork_unlock(s);
}

static void cache_lock(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_sheaf_fork_lock(s);
	usl_engine_fork_lock(s);
}

static void cache_unlock(struct kmem_cache *s, void *unused)
{
	(void)unused;
	usl_engine_fork_unlock(s);
	usl_sheaf_fork_unlock(s);
}

static void fork_prepare(void)
{
	fork_locks_held = usl_report_holds != 0;
	fork_stdio = false;
	/* The decay thread out of its sweep and publication first (bounded): a
	 * sweep may wait for a lock this thread holds, and a publication calls
	 * libc outside uslab's locks (opendir, file I/O), where an allocator
	 * other than uslab's (a sanitizer's) may not guard its own locks across
	 * fork. */
	usl_decay_fork_hold();
	usl_mutex_fork_prepare();        /* the child's assertions see this thread's locks as its own */
	if (fork_locks_held)
		return;
	if (_IO_list_lock && _IO_list_unlock && &__libc_single_threaded) {
		fork_stdio_reset = !__libc_single_threaded;   /* glibc's own test, made just after this */
		_IO_list_lock();
		fork_stdio = true;
	}
	usl_registry_fork_lock();        /* no walk in progress (a walk allocates), slab_mutex last */
	/* Owned slots marked first (after the owned flushers' mutex: a flusher
	 * between its unmark and its unlock would leave it held in the child):
	 * a refill that holds one may take any cache's locks below (a new
	 * slab's bitmap comes from another cache). */
	usl_owned_fork_lock_global();
	usl_registry_each(owned_lock, NULL, USL_EACH_FORWARD);
	usl_slub_fork_lock_global();
	usl_debug_fork_lock();
	usl_registry_each(cache_lock, NULL, USL_EACH_FORWARD);
	usl_meta_fork_lock();
	usl_pages_fork_lock();
	usl_map_fork_lock();
	usl_platform_fork_lock();
}

static void fork_release(void)
{
	usl_platform_fork_unlock();
	usl_map_fork_unlock();
	usl_pages_fork_unlock();
	usl_meta_fork_unlock();
	usl_registry_each(cache_unlock, NULL, USL_EACH_BACKWARD);
	usl_debug_fork_unlock();
	usl_slub_fork_unlock_global();
	usl_registry_each(owned_unlock, NULL, USL_EACH_BACKWARD);
	usl_owned_fork_unlock_global();
	usl_registry_fork_unlock();
}

static void fork_release_parent(void)
{
	if (!fork_locks_held) {
		fork_release();
		if (fork_stdio)
			_IO_list_unlock();
	}
	usl_decay_fork_unhold();
}

/* The child has no decay thread (fork copies only the calling thread). */
static void fork_release_child(void)
{
	usl_random_fork_child();         /* a layout of its own (from a signal handler too) */
	if (fork_locks_held) {
		usl_decay_after_fork(true);
		return;
	}
	fork_release();
	if (fork_stdio && !fork_stdio_reset)
		_IO_list_unlock();
	usl_entries_after_fork();
	usl_reclaim_after_fork();
	usl_decay_after_fork(false);
}

void usl_fork_init(void)
{
	pthread_atfork(fork_prepare, fork_release_parent, fork_release_child);
}
