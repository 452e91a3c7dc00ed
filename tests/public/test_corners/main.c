/* test_corners - the corners of the malloc contract a program meets rarely
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
 * An optional second argument: seconds to run the loops (the stress label).
 * fork.c has the fork corners, memory.c errno and out of memory, stats.c
 * malloc_stats. */
#include "corners.h"

int run_seconds;
int round_nr;

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool more(int i, int n, double start)
{
	return run_seconds ? now_s() - start < run_seconds : i < n;
}

int child_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
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
