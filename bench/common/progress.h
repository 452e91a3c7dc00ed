/* progress.h - what the benchmarks print besides their tables: progress
 * lines on stderr ("[3/6] bulk: 3 runs of a b c; run 1 2 3 - done in 1.3 s")
 * and a ratio of two medians in words ("1.13x slower"). */
#ifndef USLAB_BENCH_PROGRESS_H
#define USLAB_BENCH_PROGRESS_H

#include <stddef.h>

/* How many steps this invocation runs (the n of "[i/n]"). */
void progress_total(int steps);
/* A step starts: names[0..n) are the allocators it runs (NULL entries are
 * skipped). stdout is flushed first, so tables and progress keep their order
 * where both go to one file. */
void progress_begin(const char *what, int runs, const char *const *names, int n);
void progress_run(int r);      /* run r (from 0) starts */
void progress_break(void);     /* a message follows: end the open line */
void progress_end(void);

/* r = a / b in words: "even" where it rounds to 1.00, "R.RRx more" above,
 * "(1/R).RRx less" below. */
const char *in_words(char *buf, size_t n, double r, const char *more, const char *less);

#endif
