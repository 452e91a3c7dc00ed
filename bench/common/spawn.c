/* spawn.c - running the benchmarks' children (spawn.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

int self_exe(char *buf, size_t n)
{
	ssize_t l = readlink("/proc/self/exe", buf, n - 1);
	if (l <= 0)
		return -1;
	buf[l] = 0;
	return (int)l;
}

void env_set(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

long spawn_capture(void (*exec)(void *), void *arg, char *out, size_t n, struct spawn_result *r)
{
	int pfd[2];
	r->failed = NULL;
	if (pipe(pfd) != 0) {
		r->failed = "pipe";
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pfd[0]);
		close(pfd[1]);
		errno = e;
		r->failed = "fork";
		return -1;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		exec(arg);
		_exit(127);
	}
	close(pfd[1]);
	size_t len = 0;
	ssize_t k;
	while (len < n - 1 && (k = read(pfd[0], out + len, n - 1 - len)) > 0)
		len += (size_t)k;
	close(pfd[0]);
	out[len] = 0;
	pid_t w;
	while ((w = wait4(pid, &r->status, 0, &r->ru)) < 0 && errno == EINTR)
		;
	if (w != pid) {
		r->failed = "wait";
		return -1;
	}
	return (long)len;
}
