/* spawn.h - how the benchmarks' drivers run their children: the path of this
 * program (to run itself as a child), the child's environment, and a child
 * run with its stdout read back. */
#ifndef USLAB_BENCH_SPAWN_H
#define USLAB_BENCH_SPAWN_H

#include <stddef.h>
#include <sys/resource.h>

/* This program's path from /proc/self/exe into buf; its length, or -1. */
int self_exe(char *buf, size_t n);

/* name=value in the environment, or name removed when value is NULL. */
void env_set(const char *name, const char *value);

/* What a child run gave: its wait status and resource use; failed names the
 * step that could not be done ("pipe", "fork", "wait", errno says why), NULL
 * when the child ran. */
struct spawn_result {
	int status;
	struct rusage ru;
	const char *failed;
};

/* Forks a child with its stdout on a pipe and calls exec(arg) in it (which
 * sets the environment and execs; if it returns, the child exits with 127).
 * The parent reads the child's stdout into out (at most n-1 bytes, then NUL)
 * and waits for it. stdout and stderr are flushed first, so that nothing
 * buffered is written twice and output stays in order. Returns the bytes
 * read, or -1 with r->failed set. */
long spawn_capture(void (*exec)(void *), void *arg, char *out, size_t n, struct spawn_result *r);

#endif /* USLAB_BENCH_SPAWN_H */
