/* harness.h - the test harness: CHECK(expr) counts passes and failures, and
 * test_summary() prints "N passed, N failed" and returns the exit code.
 * Report capture: tests install capture_reports() to count uslab's reports by kind. */
#ifndef USLAB_TEST_HARNESS_H
#define USLAB_TEST_HARNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uslab.h"

/* The counts, and the reports captured below, are weak definitions: a test
 * of several files counts its checks, and sees its reports, in one place. */
__attribute__((weak)) int t_pass, t_fail;

#define CHECK(expr)                                                                      \
	do {                                                                             \
		if (expr) {                                                              \
			t_pass++;                                                        \
		} else {                                                                 \
			t_fail++;                                                        \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #expr);  \
		}                                                                        \
	} while (0)

#define CHECK_EQ(a, b)                                                                   \
	do {                                                                             \
		long long va_ = (long long)(a), vb_ = (long long)(b);                    \
		if (va_ == vb_) {                                                        \
			t_pass++;                                                        \
		} else {                                                                 \
			t_fail++;                                                        \
			fprintf(stderr, "FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__,  \
			        __LINE__, #a, #b, va_, vb_);                             \
		}                                                                        \
	} while (0)

static inline int test_summary(void)
{
	printf("%d passed, %d failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
}

/* Every one of the n bytes at p is c. */
static inline bool all_bytes(const void *p, int c, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)c)
			return false;
	return true;
}

/* Report capture */
__attribute__((weak)) unsigned long reports_by_kind[16];
__attribute__((weak)) char last_report[512];
static void capture_fn(enum uslab_error kind, const char *line, void *arg)
{
	(void)arg;
	__atomic_fetch_add(&reports_by_kind[kind & 15], 1, __ATOMIC_RELAXED);
	strncpy(last_report, line, sizeof(last_report) - 1);
}
static inline void capture_reports(void)
{
	memset(reports_by_kind, 0, sizeof(reports_by_kind));
	last_report[0] = 0;
	uslab_set_report_handler(capture_fn, NULL);
}
static inline unsigned long reports(enum uslab_error kind)
{
	return __atomic_load_n(&reports_by_kind[kind & 15], __ATOMIC_RELAXED);
}
/* Reports of every kind, USLAB_ERR_NONE's lines too. */
static inline unsigned long reports_all(void)
{
	unsigned long n = 0;
	for (int k = 0; k < 16; k++)
		n += reports((enum uslab_error)k);
	return n;
}

/* The front end: is this process's plain SLUB caches' front the owned one
 * (USLAB_FRONT=owned where it applies: rseq mode, one node, no USLAB_STATS)?
 * Tests whose expectation differs there (no free pointer or marker in a freed
 * object, a bitmap's order instead of a LIFO, slabs of 64 KiB or more) check
 * the owned behaviour when it is on. */
static inline bool owned_front(void)
{
	return strcmp(uslab_front(), "owned") == 0;
}
/* Cache s on the owned front: owned_front() and neither a debug cache nor one
 * created with a sheaf_capacity (those keep sheaves). */
static inline bool cache_owned(struct kmem_cache *s)
{
	return owned_front() && uslab_sheaf_capacity(s) == 0;
}

/* Pages of [addr, addr + bytes) resident now (mincore; whole pages, at most
 * 512), or (size_t)-1 if that cannot be told. */
static inline size_t resident_pages(const void *addr, size_t bytes)
{
	size_t pages = bytes / (size_t)sysconf(_SC_PAGESIZE), n = 0;
	unsigned char vec[512];
	if (pages > sizeof(vec) || mincore((void *)addr, bytes, vec) != 0)
		return (size_t)-1;
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	return n;
}

#ifdef _GNU_SOURCE
#include <sched.h>
/* Pin the calling thread to the CPU it runs on (a test whose check needs one
 * CPU's sheaves throughout); its affinity is kept in *was. True if pinned:
 * then unpin_cpu(was) gives it back. */
static inline bool pin_this_cpu(cpu_set_t *was)
{
	cpu_set_t one;
	if (sched_getaffinity(0, sizeof(*was), was) != 0)
		return false;
	CPU_ZERO(&one);
	int cpu = sched_getcpu();
	CPU_SET(cpu >= 0 && CPU_ISSET(cpu, was) ? cpu : 0, &one);
	return sched_setaffinity(0, sizeof(one), &one) == 0;
}

static inline void unpin_cpu(const cpu_set_t *was)
{
	CHECK(sched_setaffinity(0, sizeof(*was), was) == 0);
}
#endif

#endif
