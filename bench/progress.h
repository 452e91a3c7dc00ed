/* progress.h - what uslab-bench and uslab-mbench print besides their tables:
 * progress lines on stderr ("[3/6] bulk: 3 runs of a b c; run 1 2 3 - done in
 * 1.3 s"), a ratio of two medians in words ("1.13x slower"), the median
 * those ratios are of (uslab-mbench, uslab-dbench), and the legend of the
 * peer named gperftools. */
#ifndef USLAB_BENCH_PROGRESS_H
#define USLAB_BENCH_PROGRESS_H

#include <stddef.h>

/* The peer preloaded from Debian's libtcmalloc-minimal4 is gperftools'
 * tcmalloc 2.10, whose caches are per thread, not Google's current tcmalloc
 * with per-CPU caches (which Debian does not ship): its rows and columns are
 * named "gperftools", and each table that shows it prints this legend. Its --data key stays "tcmalloc" (see driver.c). */
#define GPERFTOOLS_NOTE                                                                                    \
	"gperftools = Debian libtcmalloc-minimal4, gperftools 2.10 tcmalloc with per-thread caches (not "   \
	"Google's per-CPU tcmalloc)"

/* How many steps this invocation runs (the n of "[i/n]"). */
void progress_total(int steps);
/* A step starts: names[0..n) are the allocators it runs (NULL entries are
 * skipped). stdout is flushed first, so tables and progress keep their order
 * where both go to one file. */
void progress_begin(const char *what, int runs, const char *const *names, int n);
void progress_run(int r);      /* run r (from 0) starts */
void progress_break(void);     /* a message follows: end the open line */
void progress_end(void);

/* The median of v[0..n) (sorts v); 0 for none. */
double bench_median(double *v, int n);

/* r = a / b in words: "even" where it rounds to 1.00, "R.RRx more" above,
 * "(1/R).RRx less" below. */
const char *in_words(char *buf, size_t n, double r, const char *more, const char *less);

#endif
