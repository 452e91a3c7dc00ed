/* live_idle.c - a process that allocates and then makes no allocator call at
 * all, for live_idle.sh: its live view (USLAB_STATS) must show what it holds
 * all the same, kept current by the decay thread.
 *
 *   live_idle cache N    N objects of a kmem_cache "live-idle" (200 bytes)
 *   live_idle malloc N   N mallocs of 700 bytes (the class malloc-736, which
 *                        nothing else asks for); built as a plain program
 *                        (LIVE_IDLE_PLAIN) and run under LD_PRELOAD
 *   live_idle fork N M   N objects of "live-idle", then a fork()ed child
 *                        whose vfork()ed child allocates (it must start no
 *                        thread and make no view), then M objects more in
 *                        the child, which prints "child PID" and idles too
 *
 * Prints "ready PID HELD" once the objects are held, then blocks reading
 * stdin: a line "free K" frees K of them and prints "ready PID HELD" again;
 * end of input exits (through exit(): the view is removed). Its input and
 * output are read(2) and write(2): stdio would allocate its buffers. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LIVE_IDLE_PLAIN
#include "uslab.h"
static struct kmem_cache *cache;
#endif

static void **held;
static long nheld;
static bool use_malloc;

/* A line on stdout, written at once and without an allocation. */
static void say(const char *fmt, ...)
{
	char buf[128];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len > 0 && write(1, buf, (size_t)len) != len)
		exit(1);
}

static void hold(long n)
{
	for (long i = 0; i < n; i++) {
#ifndef LIVE_IDLE_PLAIN
		void *p = use_malloc ? malloc(700) : kmem_cache_alloc(cache, GFP_KERNEL);
#else
		void *p = malloc(700);
#endif
		if (!p) {
			fprintf(stderr, "live_idle: allocation %ld failed\n", i);
			exit(1);
		}
		held[nheld++] = p;
	}
}

static void release(long n)
{
	while (n-- > 0 && nheld > 0) {
		void *p = held[--nheld];
#ifndef LIVE_IDLE_PLAIN
		if (!use_malloc) {
			kmem_cache_free(cache, p);
			continue;
		}
#endif
		free(p);
	}
}

/* The threads of this process (/proc/self/status, read without an
 * allocation: one would tick, and may start this process's thread). */
static int threads(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	char *t = strstr(buf, "\nThreads:");
	return t ? atoi(t + 9) : -1;
}

/* The forked child, before its own first allocation: a vfork child that
 * allocates (past the ticks that start the thread) must start none, since
 * it shares this process's memory, and make no view of its own. */
static void vfork_child_check(void)
{
	pid_t pid = vfork();
	if (pid == 0) {
		for (int i = 0; i < 4096; i++)
			free(malloc(64 + (size_t)(i % 16) * 64));
		for (int i = 0; i < 2048; i++)
			if (!malloc(1024))
				_exit(4);
		_exit(0);
	}
	int status = -1;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "live_idle: the vfork child failed (status %#x)\n", status);
		exit(1);
	}
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/uslab.%ld", (long)pid);
	if (access(path, F_OK) == 0) {
		fprintf(stderr, "live_idle: the vfork child made %s\n", path);
		unlink(path);
		exit(1);
	}
	int n = threads();
	if (n != 1) {
		fprintf(stderr, "live_idle: %d threads in the forked child after its vfork child\n", n);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: live_idle cache|malloc|fork N [M]\n");
		return 2;
	}
	long n = atol(argv[2]), m = argc > 3 ? atol(argv[3]) : 0;
	use_malloc = !strcmp(argv[1], "malloc");
	held = calloc((size_t)(n + m), sizeof(void *));   /* (before the counted allocations) */
#ifndef LIVE_IDLE_PLAIN
	if (!uslab_stats_enabled()) {   /* (and a static link keeps the live view) */
		fprintf(stderr, "live_idle: run it with USLAB_STATS set\n");
		return 1;
	}
	cache = kmem_cache_create("live-idle", 200, 0, SLAB_NO_MERGE, NULL);
	if (!cache)
		return 1;
#else
	if (!use_malloc)
		return 2;
#endif
	hold(n);
	if (!strcmp(argv[1], "fork")) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			vfork_child_check();
			hold(m);
			say("child %ld\n", (long)getpid());
		}
	}
	say("ready %ld %ld\n", (long)getpid(), nheld);
	char line[64];
	size_t len = 0;
	ssize_t r;
	while ((r = read(0, line + len, sizeof(line) - 1 - len)) > 0) {
		len += (size_t)r;
		line[len] = 0;
		char *nl;
		while ((nl = strchr(line, '\n'))) {
			long k;
			*nl = 0;
			if (sscanf(line, "free %ld", &k) == 1) {
				release(k);
				say("ready %ld %ld\n", (long)getpid(), nheld);
			}
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len + 1);
		}
		if (len == sizeof(line) - 1)
			len = 0;                 /* a line too long: dropped */
	}
	exit(0);
}
