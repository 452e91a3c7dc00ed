/* test_layout.c - how predictable the heap's layout is, through plain malloc
 * (linked with uslab's drop-in malloc in the tests; bench/ builds the same
 * source without uslab, to measure the peers under LD_PRELOAD).
 *
 *   figures [trials]  the three figures, over `trials` (2000) at each of 32, 64
 *                     and 256 bytes after a warm-up of mixed allocations and
 *                     random frees, and checks them against uslab's targets
 *                     (--print: print only):
 *                       adjacent  the next malloc(n) lies within n + 32 bytes
 *                                 of the previous one;
 *                       fresh     the same once the free blocks are drained by
 *                                 a spray, so new memory is carved;
 *                       reuse     free(a); malloc(n) returns a.
 *   signature         the offsets of 1024 fresh 64-byte blocks from the first,
 *                     one line (for `order`)
 *   order             two processes (this program, spawned twice) print
 *                     different signatures
 *   fork              a fork's child and its parent carve different orders
 *                     from the same state
 *   window [seconds]  threads (more than CPUs) free a block and check that
 *                     it does not come back before WINDOW allocations of
 *                     its CPU (counted over all threads)
 *
 * Each check fails when uslab's unpredictable layout is off (USLAB_RANDOM=0):
 * tests/CMakeLists.txt runs them so too, expecting the failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
/* uslab's, when it is linked in or preloaded (bench's uslab-layout is this
 * file without uslab, run under each allocator). */
extern const char *uslab_percpu_mode(void) __attribute__((weak));

static int failures;
static bool print_only;

#define EXPECT(cond, ...)                                                              \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			failures++;                                                    \
		}                                                                      \
	} while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static void *must_malloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "malloc(%zu) failed\n", n);
		exit(2);
	}
	memset(p, 0x5a, n < 64 ? n : 64);
	return p;
}

/* ---------------------------------------------------------------------------
 * figures
 */

#define WARM 60000

static bool near(const void *a, const void *b, size_t n)
{
	intptr_t d = (intptr_t)a - (intptr_t)b;
	if (d < 0)
		d = -d;
	return d > 0 && (size_t)d <= n + 32;
}

/* Consecutive allocations of n bytes beside each other, in percent; the
 * blocks are kept in keep[]. */
static double adjacent(size_t n, int trials, void **keep)
{
	int hits = 0;
	keep[0] = must_malloc(n);
	for (int i = 1; i <= trials; i++) {
		keep[i] = must_malloc(n);
		hits += near(keep[i], keep[i - 1], n);
	}
	return 100.0 * hits / trials;
}

static void release(void **p, int k)
{
	for (int i = 0; i < k; i++)
		free(p[i]);
}

static int figures(int trials)
{
	static const size_t sizes[] = { 32, 64, 256 };
	double sum[3] = { 0, 0, 0 };
	void **warm = calloc(WARM, sizeof(void *));
	void **keep = calloc((size_t)trials * 3 + 2, sizeof(void *));
	int spray = 200000;
	void **sp = calloc((size_t)spray, sizeof(void *));
	if (!warm || !keep || !sp)
		return 2;
	/* Warm-up: a quarter each of the three sizes and of mixed ones, then a
	 * random half freed in a random order, so the first trials take scattered free blocks. */
	for (int i = 0; i < WARM; i++) {
		uint64_t r = next_rand();
		warm[i] = must_malloc((r & 3) == 3 ? 16 + (r >> 8) % 496 : sizes[r & 3]);
	}
	for (int i = 0; i < WARM / 2; i++) {        /* in a random order */
		int j = (int)(next_rand() % WARM);
		free(warm[j]);
		warm[j] = NULL;
	}
	printf("%-6s %10s %10s %10s\n", "bytes", "adjacent%", "fresh%", "reuse%");
	for (int k = 0; k < 3; k++) {
		size_t n = sizes[k];
		double adj = adjacent(n, trials, keep);
		release(keep, trials + 1);
		/* Drain: a spray of 4 MiB (at least 16384 blocks) takes every
		 * free block of the size, whatever caches hold them. */
		int m = (int)(((size_t)4 << 20) / n);
		if (m < 16384)
			m = 16384;
		if (m > spray)
			m = spray;
		for (int i = 0; i < m; i++)
			sp[i] = must_malloc(n);
		double fresh = adjacent(n, trials, keep);
		release(keep, trials + 1);
		int same = 0;
		for (int i = 0; i < trials; i++) {
			void *a = must_malloc(n);
			free(a);
			keep[i] = must_malloc(n);
			same += keep[i] == a;
		}
		release(keep, trials);
		release(sp, m);
		double reuse = 100.0 * same / trials;
		printf("%-6zu %10.2f %10.2f %10.2f\n", n, adj, fresh, reuse);
		sum[0] += adj, sum[1] += fresh, sum[2] += reuse;
	}
	for (int j = 0; j < 3; j++)
		sum[j] /= 3;
	printf("%-6s %10.2f %10.2f %10.2f\n", "mean", sum[0], sum[1], sum[2]);
	for (int i = 0; i < WARM; i++)
		free(warm[i]);
	free(warm);
	free(keep);
	free(sp);
	if (print_only)
		return 0;
	/* uslab's targets (docs/GUIDE.md, "Hardening"). */
	EXPECT(sum[0] <= 1.0, "adjacent %.2f%% > 1%%", sum[0]);
	EXPECT(sum[1] <= 3.0, "fresh %.2f%% > 3%%", sum[1]);
	EXPECT(sum[2] <= 5.0, "reuse %.2f%% > 5%%", sum[2]);
	return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------
 * Orders: two processes, a parent and its child
 */

#define SIG_N 1024

/* The offsets of SIG_N fresh 64-byte blocks from the first, as text. */
static void signature(char *out, size_t cap)
{
	void *p[SIG_N];
	size_t at = 0;
	for (int i = 0; i < SIG_N; i++)
		p[i] = must_malloc(64);
	for (int i = 1; i < SIG_N && at + 24 < cap; i++)
		at += (size_t)snprintf(out + at, cap - at, "%ld ", (long)((char *)p[i] - (char *)p[0]) / 16);
	for (int i = 0; i < SIG_N; i++)
		free(p[i]);
}

/* What fd gives until its end, as a string in out; its length. */
static size_t read_all(int fd, char *out, size_t cap)
{
	size_t at = 0;
	ssize_t r;
	while (at + 1 < cap && (r = read(fd, out + at, cap - 1 - at)) > 0)
		at += (size_t)r;
	out[at] = 0;
	close(fd);
	return at;
}

/* Run this program with `signature`, its output in out. */
static int spawn_signature(const char *self, char *out, size_t cap)
{
	int fd[2];
	if (pipe(fd))
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_addclose(&fa, fd[0]);
	char *argv[] = { (char *)self, "signature", NULL };
	pid_t pid;
	int e = posix_spawn(&pid, self, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (e) {
		close(fd[0]);
		return -1;
	}
	size_t at = read_all(fd[0], out, cap);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && at > 0 ? 0 : -1;
}

static int order(void)
{
	static char a[SIG_N * 24], b[SIG_N * 24];
	EXPECT(spawn_signature("/proc/self/exe", a, sizeof(a)) == 0, "first child");
	EXPECT(spawn_signature("/proc/self/exe", b, sizeof(b)) == 0, "second child");
	EXPECT(strcmp(a, b) != 0, "two processes carved the same order: %.60s...", a);
	printf("order: %s\n", strcmp(a, b) ? "differs" : "same");
	return failures ? 1 : 0;
}

static int fork_order(void)
{
	static char mine[SIG_N * 24], theirs[SIG_N * 24];
	void *warm[512];
	/* Both on this CPU, so both start from the same per-CPU state (their
	 * own copies of it): what differs then is the random bits alone. */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	/* A state both will start from: some blocks carved and freed. */
	for (int i = 0; i < 512; i++)
		warm[i] = must_malloc(64);
	for (int i = 0; i < 512; i += 2)
		free(warm[i]);
	int fd[2];
	if (pipe(fd))
		return 2;
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(fd[0]);
		signature(mine, sizeof(mine));
		size_t len = strlen(mine), at = 0;
		while (at < len) {
			ssize_t w = write(fd[1], mine + at, len - at);
			if (w <= 0)
				_exit(2);
			at += (size_t)w;
		}
		_exit(0);
	}
	close(fd[1]);
	signature(mine, sizeof(mine));
	size_t at = read_all(fd[0], theirs, sizeof(theirs));
	int st;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0 && at > 0, "child");
	EXPECT(strcmp(mine, theirs) != 0, "the child carved its parent's order: %.60s...", mine);
	printf("fork: %s\n", strcmp(mine, theirs) ? "differs" : "same");
	for (int i = 1; i < 512; i += 2)
		free(warm[i]);
	return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------
 * The delayed-reuse window under threads outnumbering CPUs
 */

#define WINDOW 16        /* below the smallest delay uslab keeps for these sizes */
#define THREADS 8

static double window_seconds = 2;
static unsigned long window_hits[THREADS], window_rounds[THREADS];
/* Every allocation of every thread, counted before it starts. */
static unsigned long window_allocs;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The delay counts the allocations of the freeing CPU, other threads' too,
 * which one thread does not see: a block that comes back within this
 * thread's next WINDOW allocations may have had the others' ahead of it. So
 * the count is global: window_allocs moves on before each allocation
 * starts, and between a free and the allocation that returns its block the
 * pops of the block's CPU are at most those increments plus one in flight
 * per other thread (begun before the free, counted before it). A return
 * with fewer than WINDOW - (THREADS - 1) increments in between had fewer
 * than WINDOW pops of its CPU ahead of it: an early reuse for certain (a
 * block another thread had meanwhile was freed again later, so the count
 * from the first free is only larger). Each block gets a tag at byte 16, past
 * the words uslab keeps in a free block: thread and round, so the test
 * writes to what it holds. */
#define WINDOW_SURE (WINDOW - (THREADS - 1))

static void *tagged(size_t n, uint64_t tag)
{
	__atomic_fetch_add(&window_allocs, 1, __ATOMIC_SEQ_CST);
	uint64_t *p = malloc(n);
	if (!p) {
		fprintf(stderr, "malloc(%zu) failed\n", n);
		exit(2);
	}
	p[2] = tag;
	return p;
}

static void *window_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	static const size_t sizes[] = { 32, 64, 256 };
	void *next[WINDOW];
	double end = now() + window_seconds;
	for (unsigned long r = 0;; r++) {
		if (!(r & 255) && now() > end)
			break;
		size_t n = sizes[r % 3];
		uint64_t tag = (uint64_t)me << 56 | r << 8;
		void *x = tagged(n, tag);
		free(x);
		unsigned long g0 = __atomic_load_n(&window_allocs, __ATOMIC_SEQ_CST);
		for (int i = 0; i < WINDOW; i++) {
			uint64_t *p = next[i] = tagged(n, tag | (uint64_t)(i + 1));
			if (p == x) {
				unsigned long between = __atomic_load_n(&window_allocs, __ATOMIC_SEQ_CST) - g0 - 1;
				if (between < WINDOW_SURE)
					window_hits[me]++;
			}
		}
		for (int i = 0; i < WINDOW; i++)
			free(next[i]);
		window_rounds[me]++;
		if (!(r & 63))
			sched_yield();    /* another thread runs on this CPU meanwhile */
	}
	return NULL;
}

static int window(void)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, window_thread, (void *)(intptr_t)i))
			return 2;
	unsigned long hits = 0, rounds = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		hits += window_hits[i];
		rounds += window_rounds[i];
	}
	printf("window: %lu rounds, %lu frees handed out again within %d allocations\n", rounds, hits, WINDOW_SURE);
	EXPECT(rounds > 0, "no rounds");
	/* Locked mode: two threads' slow paths on one slot can still cut a
	 * block's wait short, about once in 20 million rounds (docs/GUIDE.md,
	 * "Hardening"); one in a million is allowed there, none with rseq. */
	bool locked = uslab_percpu_mode && !strcmp(uslab_percpu_mode(), "locked");
	unsigned long allowed = locked ? rounds / 1000000 : 0;
	EXPECT(hits <= allowed, "%lu of %lu freed blocks were handed out again within %d allocations (%lu allowed)",
	       hits, rounds, WINDOW_SURE, allowed);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "figures";
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--print"))
			print_only = true;
	if (!strcmp(what, "figures"))
		return figures(argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 2000);
	if (!strcmp(what, "signature")) {
		static char sig[SIG_N * 24];
		signature(sig, sizeof(sig));
		printf("%s\n", sig);
		return 0;
	}
	if (!strcmp(what, "order"))
		return order();
	if (!strcmp(what, "fork"))
		return fork_order();
	if (!strcmp(what, "window")) {
		if (argc > 2 && atof(argv[2]) > 0)
			window_seconds = atof(argv[2]);
		return window();
	}
	fprintf(stderr, "usage: %s figures [trials] [--print] | signature | order | fork | window [seconds]\n", argv[0]);
	return 2;
}
