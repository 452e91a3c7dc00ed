/* test_background.c - the decay thread gives memory back while the program
 * makes no allocator call at all: after a burst of kmalloc'd objects of several
 * sizes is freed in random order, the resident set falls by itself; the thread
 * then parks (no more sweeps); a fork while it runs leaves a child that
 * allocates, starts its own thread and gets its memory back the same way;
 * USLAB_BACKGROUND=0 means no thread. Modes: "on" (default), "off", "fork".
 * With USLAB_STATS set the thread also publishes the live view: its sweeps
 * must keep their schedule and park all the same while the view is
 * published five times a second. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

#include "../harness.h"
#include "../../tools/rss.h"
#include "common/common.h"
#include "pages/pages.h"
#include "stats/live.h"
#include "testing.h"

static bool stats;                       /* USLAB_STATS: the live view is published */

/* The live view's publications so far (its header), or -1. */
static long long publications(void)
{
	char path[64];
	struct usl_live_header h;
	snprintf(path, sizeof(path), "/dev/shm/uslab.%ld", (long)getpid());
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, &h, sizeof(h), 0);
	close(fd);
	return n == (ssize_t)sizeof(h) ? (long long)__atomic_load_n(&h.publications, __ATOMIC_RELAXED) : -1;
}

/* What uslab keeps resident, in KiB: the page provider's committed range less
 * the free pages it has given back (madvised). Read from its own counts, not
 * /proc: sanitizer runtimes keep shadow memory resident for what was freed. */
static long uslab_kib(void)
{
	size_t committed = 0, clean = 0;
	usl_pages_stats(&committed, NULL, &clean);
	return (long)((committed - clean) / 1024);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Threads of this process, and whether one is named uslab-decay. */
static int threads(bool *decay_thread)
{
	int n = 0;
	*decay_thread = false;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd >= 0) {
			ssize_t k = read(fd, comm, sizeof(comm) - 1);
			close(fd);
			if (k > 0 && !strncmp(comm, "uslab-decay", 11))
				*decay_thread = true;
		}
	}
	closedir(d);
	return n;
}

enum { N = 400000 };
static void *v[N];

/* About 100 MiB in sizes 32..1024, written, then freed in a random order
 * (which leaves them in sheaves and barns). Returns the resident KiB at the
 * peak. */
static long burst(void)
{
	static const size_t sizes[] = { 32, 64, 96, 128, 192, 256, 512, 1024 };
	for (int i = 0; i < N; i++) {
		size_t n = sizes[(unsigned)i % 8];
		v[i] = kmalloc(n, GFP_KERNEL);
		if (v[i])
			memset(v[i], 1, n);
	}
	long full = uslab_kib();
	unsigned x = 12345;
	for (int i = N - 1; i > 0; i--) {          /* shuffle, then free */
		x = x * 1103515245u + 12345u;
		int j = (int)((x >> 8) % (unsigned)(i + 1));
		void *t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
	for (int i = 0; i < N; i++)
		kfree(v[i]);
	return full;
}

/* With no allocator call, the resident set must fall to within a tenth of
 * the burst of where it started; up to 15 s (normally 2 to 3 decay intervals). */
static long start_kib;                   /* before any burst */
static bool falls_back(long before, long full, long *after)
{
	for (int k = 0; k < 150; k++) {
		sleep_ms(100);
		*after = uslab_kib();
		if (*after - before < (full - before) / 10)
			return true;
	}
	fprintf(stderr, "  rss %ld KiB before, %ld full, %ld after 15 s idle\n", before, full, *after);
	return false;
}

static void idle_give_back(void)
{
	long before = uslab_kib(), after = 0;
	long full = burst();
	CHECK(full - before > 40 * 1024);
	/* The first slow-path sweep starts the thread. */
	CHECK(usl_decay_thread_running());
	bool named;
	CHECK(threads(&named) >= 2);                 /* (sanitizers add threads of their own) */
	CHECK(named);
	long proc_full = rss_kib();
	CHECK(falls_back(before, full, &after));
#ifndef USLAB_TEST_SANITIZED
	CHECK(proc_full - rss_kib() > (full - before) / 2);   /* and the kernel agrees */
#else
	(void)proc_full;
#endif
	/* Then it parks: no sweep while nothing changes. */
	for (int k = 0; k < 100 && !__atomic_load_n(&usl_decay_thread_parks, __ATOMIC_RELAXED); k++)
		sleep_ms(100);
	CHECK(__atomic_load_n(&usl_decay_thread_parks, __ATOMIC_RELAXED) >= 1);
	unsigned long sweeps = __atomic_load_n(&usl_decay_thread_sweeps, __ATOMIC_RELAXED);
	long long pubs = publications();
	sleep_ms(1500);
	CHECK_EQ(__atomic_load_n(&usl_decay_thread_sweeps, __ATOMIC_RELAXED), sweeps);
	if (stats) {                             /* it wakes to publish, not to sweep */
		CHECK(pubs >= 0);
		CHECK(publications() >= pubs + 4);
	}
	/* Allocation traffic wakes it again (a slow-path tick). */
	long full2 = burst();
	CHECK(falls_back(start_kib, full2, &after));
	CHECK(__atomic_load_n(&usl_decay_thread_sweeps, __ATOMIC_RELAXED) > sweeps);
}

/* A thread keeps allocating while the main thread forks, so forks land while
 * the decay thread sweeps: each child allocates, frees, gets its own thread
 * and its memory back. */
static int stop;                         /* atomic */
static unsigned long churned;            /* atomic: the churning thread's rounds */
static void *churn(void *arg)
{
	(void)arg;
	void *keep[256] = { 0 };
	unsigned x = 1;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(&churned, 1, __ATOMIC_RELAXED);
		x = x * 1103515245u + 12345u;
		unsigned i = (x >> 8) % 256;
		kfree(keep[i]);
		keep[i] = kmalloc(16 + (x >> 16) % 3000, GFP_KERNEL);
	}
	for (int i = 0; i < 256; i++)
		kfree(keep[i]);
	return NULL;
}

static void fork_while_running(void)
{
	long after = 0;
	burst();
	CHECK(usl_decay_thread_running());
	pthread_t t;
	pthread_create(&t, NULL, churn, NULL);
	/* The forks land inside uslab's work, not inside a thread's start: the
	 * sanitizers' runtimes of gcc 12 do not lock their own allocator around
	 * fork, and a fork while a thread starts (their thread setup frees
	 * through it) left a child whose first new thread, its decay thread,
	 * blocked on that copied lock (1 run in 12 under ASan). */
	while (__atomic_load_n(&churned, __ATOMIC_RELAXED) < 1000)
		sleep_ms(1);
	while (!__atomic_load_n(&usl_decay_thread_sweeps, __ATOMIC_RELAXED))
		sleep_ms(10);
	for (int round = 0; round < 6; round++) {
		sleep_ms(round * 150);                 /* at different points of the sweeps */
		pid_t pid = fork();
		if (pid == 0) {
			int ok = !usl_decay_thread_running();   /* the thread was not copied */
			long f = burst(), a = 0;   /* (the parent's burst may not be back yet) */
			ok |= usl_decay_thread_running() << 1;  /* its own, started by its sweep */
			ok |= falls_back(start_kib, f, &a) << 2;
			if (ok != 7)
				fprintf(stderr, "  child: %d\n", ok);
			_exit(ok == 7 ? 0 : 1);
		}
		int status = -1;
		CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	long f = burst();
	CHECK(falls_back(start_kib, f, &after));     /* the parent's thread still works */
}

static void off(void)
{
	long before = uslab_kib();
	long full = burst();
	CHECK(full - before > 40 * 1024);
	CHECK(!usl_decay_thread_running());
	bool named;
	threads(&named);
	CHECK(!named);
	/* Nobody sweeps while the program is idle: the memory stays (a
	 * malloc_trim or the next calls give it back). */
	sleep_ms(2500);
	CHECK(uslab_kib() - before > (full - before) / 2);
	uslab_release_free_memory();
	CHECK(uslab_kib() - before < (full - before) / 10);

	/* Without the thread free's fast path counts toward the tick: no cache's
	 * entry is fast, and the flags follow the mode both ways. */
	struct kmem_cache *s = kmem_cache_create("fast-flag", 64, 0, 0, NULL);
	const struct usl_free_entry *f = &usl_free_entries[s->id];
	CHECK(usl_opt.mode & USL_MODE_TICK);
	CHECK(f->blind && !f->fast_path);
	usl_mode_tick(false);
	CHECK(!(usl_opt.mode & USL_MODE_TICK) && f->fast_path);
	usl_mode_tick(true);
	CHECK((usl_opt.mode & USL_MODE_TICK) && !f->fast_path);
	kmem_cache_destroy(s);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "on";
	stats = getenv("USLAB_STATS") && uslab_stats_enabled();   /* (a static link keeps the view) */
	start_kib = uslab_kib();
	if (!strcmp(mode, "off"))
		off();
	else if (!strcmp(mode, "fork"))
		fork_while_running();
	else
		idle_give_back();
	return test_summary();
}
