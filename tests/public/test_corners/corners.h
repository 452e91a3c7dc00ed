/* corners.h - the parts of test_corners, one file per kind of corner
 * (main.c runs the one its first argument names): what they share. */
#ifndef TEST_CORNERS_H
#define TEST_CORNERS_H

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

#include "../../harness.h"

extern char **environ;

/* The allocator's calls through pointers the compiler cannot see through
 * (each file its own). */
static void *(*volatile vmalloc)(size_t) __attribute__((unused)) = malloc;
/* (gcc takes posix_memalign as leaving errno alone: called through a pointer.) */
static int (*volatile vposix_memalign)(void **, size_t, size_t) __attribute__((unused)) = posix_memalign;
static void *(*volatile vrealloc)(void *, size_t) __attribute__((unused)) = realloc;
static void (*volatile vfree)(void *) __attribute__((unused)) = free;

extern int run_seconds;              /* 0: the default loop counts */
extern int round_nr;                 /* the out-of-memory tests' round */

double now_s(void);
/* The loop goes on: n rounds, or run_seconds from start. */
bool more(int i, int n, double start);
/* A child's exit status: 0 for a clean exit 0. */
int child_status(pid_t pid);

void test_sigfork(void);             /* fork.c */
void test_stdio(void);
void test_mtfork(void);
void test_spawn(void);
void test_errno(void);              /* memory.c */
void test_aslimit(void);
void test_lowmem(void);
void lowmem_after(void);
void test_refill(void);
void test_stats(void);              /* stats.c */

#endif
