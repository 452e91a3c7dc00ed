/* test_corners.c - the corners of the malloc contract a program meets rarely
 * and where glibc does the right thing, with the drop-in malloc (linked
 * statically: -luslab puts the program on uslab). One corner per run, named
 * by the first argument; the fork tests loop and fail on a hang (CTest's
 * timeout, or a child's alarm), never on time:
 *   sigfork   a single-threaded program forks from a signal handler that
 *             interrupted malloc, free, realloc or a cache call (locks held);
 *             parent and child go on
 *   stdio     getline (stream lock, then malloc), fflush(NULL) (list lock,
 *             then stream locks) and fork in three threads: no deadlock
 *   mtfork    more threads than CPUs in malloc, free, realloc and cache calls
 *             while the main thread forks; children allocate and fork again
 *   spawn     vfork and posix_spawn from threads while others allocate
 *   errno     every failed allocation sets ENOMEM, free keeps errno
 *   aslimit   RLIMIT_AS a little above the current use before the first
 *             allocation: uslab runs in what it gets, then NULL and ENOMEM
 *   refill    memory filled with 4 KiB blocks and freed, then larger blocks:
 *             served from what uslab held free (no decay needed)
 *   lowmem    less than 1 MiB of address space left: NULL and ENOMEM for
 *             every kind of request, reports only with USLAB_OOM=report
 *   stats     malloc_stats under deferred cancellation prints glibc's lines
 * An optional second argument: seconds to run the loops (the stress label). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"

extern char **environ;

static void *(*volatile vmalloc)(size_t) = malloc;
/* (gcc takes posix_memalign as leaving errno alone: called through a pointer.) */
static int (*volatile vposix_memalign)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile vrealloc)(void *, size_t) = realloc;
static void (*volatile vfree)(void *) = free;

static int run_seconds;              /* 0: the default loop counts */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The loop goes on: n rounds, or run_seconds from start. */
static bool more(int i, int n, double start)
{
	return run_seconds ? now_s() - start < run_seconds : i < n;
}

/* A child's exit status: 0 for a clean exit 0. */
static int child_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ===========================================================================
 * sigfork: fork from a signal handler that interrupted the allocator
 */
static volatile sig_atomic_t in_child, child_bad;
static volatile sig_atomic_t forks_done;
static struct kmem_cache *sig_cache;

/* The next tick, one-shot, 50 to 1000 us after the handler ends: the loop
 * runs between forks, and each lands somewhere else in it. */
static void arm_timer(void)
{
	static unsigned int seed = 12345;
	seed = seed * 1103515245u + 12345u;
	struct itimerval it = { { 0, 0 }, { 0, 50 + (long)((seed >> 8) % 950) } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void on_timer(int sig)
{
	(void)sig;
	int e = errno;
	if (in_child)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		in_child = 1;                /* back in the interrupted call, then the loop's child branch */
		errno = e;
		return;
	}
	if (pid > 0) {
		if (child_status(pid) != 0)
			child_bad = 1;
		forks_done++;
	}
	arm_timer();
	errno = e;
}

/* The child, after its interrupted call came back: it allocates, frees and
 * makes a cache, then exits. */
static void sig_child(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_DFL);
	alarm(20);                           /* a hang in the child fails it */
	void *p[64];
	for (int i = 0; i < 64; i++)
		if (!(p[i] = vmalloc((size_t)(i * 997 % 70000) + 1)))
			_exit(3);
	for (int i = 0; i < 64; i++)
		vfree(p[i]);
	struct kmem_cache *c = kmem_cache_create("sigfork-child", 72, 0, 0, NULL);
	void *o = c ? kmem_cache_alloc(c, GFP_KERNEL) : NULL;
	if (!o)
		_exit(4);
	kmem_cache_free(c, o);
	kmem_cache_destroy(c);
	_exit(0);
}

static void test_sigfork(void)
{
	sig_cache = kmem_cache_create("sigfork", 200, 0, 0, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_timer;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* Timer ticks land anywhere in the loop, inside the allocator's locks
	 * a good part of the time (page blocks, large blocks, cache creation
	 * and destruction, malloc_trim). */
	arm_timer();
	double start = now_s();
	void *keep[32] = { 0 };
	unsigned long n = 0;
	while (run_seconds ? now_s() - start < run_seconds : forks_done < 300) {
		size_t sz = (n * 7919) % 5 == 0 ? 40000 + n % 3000000 : 16 + n % 9000;
		unsigned int k = (unsigned int)(n % 32);
		keep[k] = vrealloc(keep[k], sz);
		if (in_child)
			sig_child();
		void *o = kmem_cache_alloc(sig_cache, GFP_KERNEL);
		kmem_cache_free(sig_cache, o);
		if (n % 64 == 0) {
			struct kmem_cache *c = kmem_cache_create("sigfork-tmp", 48, 0, 0, NULL);
			kmem_cache_free(c, kmem_cache_alloc(c, GFP_KERNEL));
			kmem_cache_destroy(c);
		}
		if (n % 256 == 0)
			malloc_trim(0);
		if (in_child)
			sig_child();
		n++;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	for (int k = 0; k < 32; k++)
		vfree(keep[k]);
	CHECK(forks_done >= 1);
	CHECK(!child_bad);
	kmem_cache_destroy(sig_cache);
	printf("sigfork: %d forks from the handler, %lu rounds\n", (int)forks_done, n);
}

/* ===========================================================================
 * stdio: getline, fflush(NULL) and fork
 */
static int stop;
static char stdio_path[64];

static void *getline_loop(void *arg)
{
	(void)arg;
	FILE *f = fopen(stdio_path, "r");
	if (!f)
		return (void *)1;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		char *line = NULL;
		size_t cap = 0;
		rewind(f);
		/* Each getline holds the stream's lock while it mallocs its buffer. */
		while (getline(&line, &cap, f) > 0) {
			free(line);
			line = NULL;
			cap = 0;
		}
		free(line);
	}
	fclose(f);
	return NULL;
}

static void *flush_loop(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		fflush(NULL);                    /* the list lock, then every stream's */
	return NULL;
}

static void test_stdio(void)
{
	snprintf(stdio_path, sizeof(stdio_path), "/tmp/uslab-corners-%d", (int)getpid());
	FILE *w = fopen(stdio_path, "w");
	CHECK(w != NULL);
	if (!w)
		return;
	/* Lines of 40 KB: getline grows its buffer past the classes, so under
	 * the stream's lock it takes the page provider's. */
	for (int i = 0; i < 20; i++) {
		for (int k = 0; k < 1000; k++)
			fputs("getline stream ", w), fputs(k % 2 ? "abcdefghijklmnopqrstuvwxy" : "0123456789", w);
		fprintf(w, " line %d\n", i);
	}
	fclose(w);
	/* First a fork while the process has one thread: the child's stdio
	 * list lock is free for a new thread there (released by the child
	 * handler, as glibc resets it only for a multithreaded parent). */
	pid_t first = fork();
	if (first == 0) {
		alarm(20);
		pthread_t ct;
		bool ok = pthread_create(&ct, NULL, flush_loop, NULL) == 0;
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		if (ok)
			pthread_join(ct, NULL);
		FILE *f = fopen(stdio_path, "r");
		_exit(ok && f ? 0 : 3);
	}
	CHECK(first > 0 && child_status(first) == 0);
	pthread_t t[2];
	pthread_create(&t[0], NULL, getline_loop, NULL);
	pthread_create(&t[1], NULL, flush_loop, NULL);
	double start = now_s();
	int forks = 0, bad = 0;
	for (int i = 0; more(i, 100, start); i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(20);
			/* The child's stdio and malloc work, from a new thread too
			 * (the list lock must not be left held). */
			char *p = malloc(100);
			FILE *f = fopen(stdio_path, "r");
			char *line = NULL;
			size_t cap = 0;
			int ok = p && f && getline(&line, &cap, f) > 0;
			pthread_t ct;
			ok = ok && pthread_create(&ct, NULL, flush_loop, NULL) == 0;
			__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
			if (ok)
				pthread_join(ct, NULL);
			fflush(NULL);
			_exit(ok ? 0 : 3);
		}
		if (pid > 0) {
			forks++;
			bad += child_status(pid) != 0;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	unlink(stdio_path);
	CHECK(forks > 0);
	CHECK_EQ(bad, 0);
	printf("stdio: %d forks\n", forks);
}

/* ===========================================================================
 * mtfork: threads in every kind of call while the main thread forks
 */
#define MT_THREADS 6
static struct kmem_cache *mt_cache;

static void *mt_worker(void *arg)
{
	long id = (long)arg;
	void *held[48] = { 0 };
	unsigned long n = (unsigned long)id * 7;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		unsigned int k = (unsigned int)(n % 48);
		switch ((n + (unsigned long)id) % 4) {
		case 0:
			vfree(held[k]);
			held[k] = vmalloc(16 + n % 20000);
			break;
		case 1:
			held[k] = vrealloc(held[k], 8 + (n * 31) % 70000);
			break;
		case 2: {
			void *o = kmem_cache_alloc(mt_cache, GFP_KERNEL);
			kmem_cache_free(mt_cache, o);
			break;
		}
		default: {
			void *b[8];
			if (kmem_cache_alloc_bulk(mt_cache, GFP_KERNEL, 8, b) == 8)
				kmem_cache_free_bulk(mt_cache, 8, b);
		}
		}
		n++;
	}
	for (int k = 0; k < 48; k++)
		vfree(held[k]);
	return NULL;
}

/* The child: allocates, frees, makes a cache, and forks once more. */
static int mt_child(int depth)
{
	alarm(20);
	void *p[200];
	for (int i = 0; i < 200; i++)
		if (!(p[i] = vmalloc(16 + (size_t)i * 131)))
			return 3;
	for (int i = 0; i < 200; i++)
		vfree(p[i]);
	for (int i = 0; i < 100; i++)
		kmem_cache_free(mt_cache, kmem_cache_alloc(mt_cache, GFP_KERNEL));
	struct kmem_cache *c = kmem_cache_create("mtfork-child", 88, 0, 0, NULL);
	if (!c)
		return 4;
	kmem_cache_free(c, kmem_cache_alloc(c, GFP_KERNEL));
	kmem_cache_destroy(c);
	if (depth == 0) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(mt_child(1));
		if (pid < 0 || child_status(pid) != 0)
			return 5;
	}
	return 0;
}

static void test_mtfork(void)
{
	mt_cache = kmem_cache_create("mtfork", 120, 0, 0, NULL);
	pthread_t t[MT_THREADS];
	for (long i = 0; i < MT_THREADS; i++)
		pthread_create(&t[i], NULL, mt_worker, (void *)i);
	double start = now_s();
	int forks = 0, bad = 0;
	for (int i = 0; more(i, 150, start); i++) {
		usleep(300);
		pid_t pid = fork();
		if (pid == 0)
			_exit(mt_child(0));
		if (pid > 0) {
			forks++;
			bad += child_status(pid) != 0;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(t[i], NULL);
	kmem_cache_destroy(mt_cache);
	CHECK(forks > 0);
	CHECK_EQ(bad, 0);
	printf("mtfork: %d forks\n", forks);
}

/* ===========================================================================
 * spawn: vfork and posix_spawn from threads while others allocate
 */
static void *spawner(void *arg)
{
	long id = (long)arg;
	int bad = 0;
	double start = now_s();
	for (int i = 0; more(i, 100, start); i++) {
		pid_t pid;
		if (id % 2) {
			char *argv[] = { "/bin/true", NULL };
			if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0) {
				bad++;
				continue;
			}
		} else {
			pid = vfork();
			if (pid == 0) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(127);
			}
			if (pid < 0) {
				bad++;
				continue;
			}
		}
		bad += child_status(pid) != 0;
	}
	return (void *)(long)bad;
}

static void test_spawn(void)
{
	mt_cache = kmem_cache_create("spawn", 120, 0, 0, NULL);
	pthread_t w[MT_THREADS], s[4];
	for (long i = 0; i < MT_THREADS; i++)
		pthread_create(&w[i], NULL, mt_worker, (void *)i);
	for (long i = 0; i < 4; i++)
		pthread_create(&s[i], NULL, spawner, (void *)i);
	long bad = 0;
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(s[i], &r);
		bad += (long)r;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(w[i], NULL);
	kmem_cache_destroy(mt_cache);
	CHECK_EQ(bad, 0);
	void *p = vmalloc(1000);             /* the parent goes on */
	CHECK(p != NULL);
	vfree(p);
}

/* ===========================================================================
 * errno: every failed allocation says ENOMEM; free keeps errno
 */
static volatile size_t huge_size = (size_t)1 << 62;

static void test_errno(void)
{
	const size_t huge = huge_size;
	void *p;

	errno = 0;
	CHECK(vmalloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(calloc(huge, 4) == NULL && errno == ENOMEM);      /* overflow */
	errno = 0;
	CHECK(calloc(1, huge) == NULL && errno == ENOMEM);
	p = vmalloc(10);
	errno = 0;
	CHECK(vrealloc(p, huge) == NULL && errno == ENOMEM);    /* p stays */
	vfree(p);
	errno = 0;
	CHECK(vposix_memalign(&p, 64, huge) == ENOMEM && errno == ENOMEM);
	errno = 0;
	CHECK(vposix_memalign(&p, 1 << 20, huge) == ENOMEM && errno == ENOMEM);
	errno = 0;
	CHECK(aligned_alloc(4096, huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(memalign(64, huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(valloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(pvalloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	CHECK(reallocarray(NULL, huge, 8) == NULL && errno == ENOMEM);
	/* Bad arguments are EINVAL, not ENOMEM. */
	errno = 0;
	CHECK(posix_memalign(&p, 3, 10) == EINVAL);
	/* Success leaves errno as it was; free keeps it, for every kind of block. */
	size_t sizes[] = { 8, 100, 5000, 40000, 3 << 20, 40 << 20 };
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		errno = 1234;
		p = vmalloc(sizes[i]);
		CHECK(p != NULL && errno == 1234);
		memset(p, 1, sizes[i]);
		vfree(p);
		CHECK_EQ(errno, 1234);
	}
	errno = 1234;
	CHECK(vposix_memalign(&p, 4096, 100) == 0 && errno == 1234);
	free(p);
	malloc_trim(0);
	CHECK_EQ(errno, 1234);
}

/* ===========================================================================
 * aslimit and refill: running out of address space
 */
/* This process's address space now (/proc/self/statm's first field, pages),
 * read without stdio (which would allocate). */
static size_t vm_bytes(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (size_t)strtoull(buf, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

/* Under the stress label the out-of-memory tests repeat for run_seconds,
 * under the limit set in their first round. */
static int round_nr;

static void as_limit(size_t extra)
{
	if (round_nr > 0)
		return;
	struct rlimit rl;
	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = vm_bytes() + extra;
	setrlimit(RLIMIT_AS, &rl);
}

/* Fill with size-byte blocks until NULL (at most max); the count. */
static size_t fill(void **p, size_t max, size_t size, int *err)
{
	size_t n = 0;
	errno = 0;
	while (n < max && (p[n] = vmalloc(size)))
		memset(p[n++], 0x5a, size < 64 ? size : 64);
	*err = errno;
	return n;
}

#define FILL_MAX (1u << 20)
static void *blocks[FILL_MAX];

static void test_aslimit(void)
{
	/* Before anything allocates (stdio would): 2 MiB above what is mapped. */
	as_limit(2u << 20);
	int err = 0;
	size_t n = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(n * 4096 >= (512u << 10));     /* a good part of the 2 MiB */
	CHECK_EQ(err, ENOMEM);
	for (size_t i = 0; i < n; i++)
		vfree(blocks[i]);
	/* And again, with what was freed. */
	size_t again = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(again * 2 >= n);
	for (size_t i = 0; i < again; i++)
		vfree(blocks[i]);
	void *p = vmalloc(100);              /* the program goes on */
	CHECK(p != NULL);
	vfree(p);
	if (round_nr == 0)
		printf("aslimit: %zu blocks of 4 KiB, then %zu\n", n, again);
}

/* Less than 1 MiB left: every kind of request fails cleanly (NULL, ENOMEM),
 * silently unless USLAB_OOM asks for a report, and the program goes on. */
static void test_lowmem(void)
{
	as_limit(768u << 10);                /* before uslab starts */
	const char *oom = getenv("USLAB_OOM");
	bool report = oom && !strcmp(oom, "report");
	size_t sizes[] = { 24, 700, 4096, 20000, 300000, 3000000 };
	size_t got[6];
	int errs[6];
	for (unsigned int k = 0; k < 6; k++) {
		got[k] = fill(blocks, FILL_MAX, sizes[k], &errs[k]);
		for (size_t i = 0; i < got[k]; i++)
			vfree(blocks[i]);
	}
	void *p;
	errno = 0;
	int pm = vposix_memalign(&p, 4096, 1u << 20);
	int pm_errno = errno;
	/* A cache of its own, asked without a warning: NULL, no report. */
	struct kmem_cache *c = kmem_cache_create("lowmem", 1000, 0, 0, NULL);
	size_t objs = 0;
	if (c) {
		while (objs < FILL_MAX && (blocks[objs] = kmem_cache_alloc(c, GFP_KERNEL | __GFP_NOWARN)))
			objs++;
		for (size_t i = 0; i < objs; i++)
			kmem_cache_free(c, blocks[i]);
		kmem_cache_destroy(c);
	}
	unsigned long reports = uslab_error_count();
	for (unsigned int k = 0; k < 6; k++) {
		CHECK_EQ(errs[k], ENOMEM);
		if (round_nr == 0)
			printf("lowmem: %zu blocks of %zu bytes\n", got[k], sizes[k]);
	}
	CHECK(pm == ENOMEM && pm_errno == ENOMEM);
	if (round_nr == 0)
		printf("lowmem: %zu objects of a cache (%s), %lu reports\n", objs, c ? "made" : "not made", reports);
	if (report)
		CHECK(reports >= 6);
	else
		CHECK_EQ(reports, 0);
}

/* After the rounds: the limit lifted, the program goes on. */
static void lowmem_after(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_AS, &rl);
	void *p = vmalloc(100);
	CHECK(p != NULL);
	vfree(p);
}

static void test_refill(void)
{
	as_limit(64u << 20);                 /* before uslab starts, as in aslimit */
	int err = 0;
	size_t n = fill(blocks, FILL_MAX, 4096, &err);
	CHECK(n * 4096 >= (32u << 20));
	CHECK_EQ(err, ENOMEM);
	for (size_t i = 0; i < n; i++)
		vfree(blocks[i]);
	/* Blocks of 10 KB to 3 MB, each asked for at once after the frees: what
	 * uslab holds free must serve them (no decay here: it is off). */
	size_t sizes[] = { 10000, 30000, 100000, 300000, 1000000, 3000000 };
	size_t got = 0;
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = vmalloc(sizes[i]);
		CHECK(p != NULL);
		if (!p)
			fprintf(stderr, "refill: %zu bytes refused\n", sizes[i]);
		got += p != NULL;
		vfree(p);
	}
	/* Filled with large blocks now, then small ones again. */
	size_t big = fill(blocks, FILL_MAX, 300000, &err);
	CHECK(big * 300000 >= (16u << 20));
	for (size_t i = 0; i < big; i++)
		vfree(blocks[i]);
	size_t small = fill(blocks, FILL_MAX, 256, &err);
	CHECK(small * 256 >= (16u << 20));
	for (size_t i = 0; i < small; i++)
		vfree(blocks[i]);
	if (round_nr == 0)
		printf("refill: %zu pages, %zu of 6 sizes, %zu blocks of 300 KB, %zu of 256 B\n", n, got, big, small);
}

/* ===========================================================================
 * stats: malloc_stats under cancellation
 */
static int stats_pipe[2];
static volatile int stats_started;

static void *stats_thread(void *arg)
{
	(void)arg;
	int old;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
	dup2(stats_pipe[1], 2);
	pthread_cancel(pthread_self());      /* pending: the first cancellation point acts */
	malloc_stats();
	pthread_testcancel();
	return NULL;
}

static void test_stats(void)
{
	int saved = dup(2);
	CHECK(pipe(stats_pipe) == 0);
	pthread_t t;
	pthread_create(&t, NULL, stats_thread, NULL);
	void *r;
	pthread_join(t, &r);
	dup2(saved, 2);
	close(saved);
	close(stats_pipe[1]);
	CHECK(r == PTHREAD_CANCELED);
	char buf[4096];
	size_t len = 0;
	ssize_t k;
	while (len < sizeof(buf) - 1 && (k = read(stats_pipe[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)k;
	buf[len] = 0;
	close(stats_pipe[0]);
	/* glibc's lines first, in its order, then uslab's. */
	const char *want[] = { "Arena 0:\nsystem bytes     = ", "in use bytes     = ", "Total (incl. mmap):\n",
	                       "system bytes     = ", "in use bytes     = ", "max mmap regions = ",
	                       "max mmap bytes   = ", "uslab malloc_stats\n" };
	const char *at = buf;
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *f = strstr(at, want[i]);
		CHECK(f != NULL);
		if (!f) {
			fprintf(stderr, "malloc_stats: no \"%s\" in:\n%s\n", want[i], buf);
			break;
		}
		at = f + strlen(want[i]);
	}
	CHECK(strncmp(buf, "Arena 0:", 8) == 0);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_corners sigfork|stdio|mtfork|spawn|errno|aslimit|refill|lowmem|stats [seconds]\n");
		return 2;
	}
	if (argc > 2)
		run_seconds = atoi(argv[2]);
	const char *t = argv[1];
	/* The out-of-memory tests first: their limit is set before anything
	 * (stdio) allocates; repeated for run_seconds under the stress label. */
	void (*oom_test)(void) = !strcmp(t, "aslimit") ? test_aslimit : !strcmp(t, "refill") ? test_refill
	                       : !strcmp(t, "lowmem") ? test_lowmem : NULL;
	if (oom_test) {
		double start = now_s();
		do {
			oom_test();
			round_nr++;
		} while (run_seconds && now_s() - start < run_seconds);
		if (oom_test == test_lowmem)
			lowmem_after();
		if (run_seconds)
			printf("%s: %d rounds\n", t, round_nr);
	} else if (!strcmp(t, "sigfork"))
		test_sigfork();
	else if (!strcmp(t, "stdio"))
		test_stdio();
	else if (!strcmp(t, "mtfork"))
		test_mtfork();
	else if (!strcmp(t, "spawn"))
		test_spawn();
	else if (!strcmp(t, "errno"))
		test_errno();
	else if (!strcmp(t, "stats"))
		test_stats();
	else {
		fprintf(stderr, "test_corners: unknown test %s\n", t);
		return 2;
	}
	return test_summary();
}
