/* progress.c - progress lines and ratios in words for the benchmarks
 * (progress.h). Single-threaded: only the driver process calls it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "progress.h"

static int step_no, step_total, progress_open;
static const char *step_what;
static double step_t0;

void progress_total(int steps)
{
	step_total = steps;
}

void progress_begin(const char *what, int runs, const char *const *names, int n)
{
	fflush(stdout);
	step_no++;
	step_what = what;
	step_t0 = now_s();
	fprintf(stderr, "[%d/%d] %s: %d run%s of", step_no, step_total, what, runs, runs == 1 ? "" : "s");
	for (int i = 0; i < n; i++)
		if (names[i])
			fprintf(stderr, " %s", names[i]);
	fprintf(stderr, "; run");
	progress_open = 1;
}

void progress_break(void)
{
	if (progress_open)
		fputc('\n', stderr);
	progress_open = 0;
}

void progress_run(int r)
{
	if (!progress_open)
		fprintf(stderr, "[%d/%d] %s, continued: run", step_no, step_total, step_what);
	progress_open = 1;
	fprintf(stderr, " %d", r + 1);
}

void progress_end(void)
{
	fprintf(stderr, " - done in %.1f s\n", now_s() - step_t0);
	progress_open = 0;
}

const char *in_words(char *buf, size_t n, double r, const char *more, const char *less)
{
	if (r >= 0.995 && r < 1.005)
		snprintf(buf, n, "even");
	else if (r > 1)
		snprintf(buf, n, "%.2fx %s", r, more);
	else
		snprintf(buf, n, "%.2fx %s", 1 / r, less);
	return buf;
}
