/* stats.c - test_corners: malloc_stats under cancellation. */
#include "corners.h"

/* ===========================================================================
 * stats: malloc_stats under cancellation
 */
static int stats_pipe[2];
static volatile int stats_started;

static void *stats_thread(void *arg)
{
	(void)arg;
	int old;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
	dup2(stats_pipe[1], 2);
	pthread_cancel(pthread_self());      /* pending: the first cancellation point acts */
	malloc_stats();
	pthread_testcancel();
	return NULL;
}

void test_stats(void)
{
	int saved = dup(2);
	CHECK(pipe(stats_pipe) == 0);
	pthread_t t;
	pthread_create(&t, NULL, stats_thread, NULL);
	void *r;
	pthread_join(t, &r);
	dup2(saved, 2);
	close(saved);
	close(stats_pipe[1]);
	CHECK(r == PTHREAD_CANCELED);
	char buf[4096];
	size_t len = 0;
	ssize_t k;
	while (len < sizeof(buf) - 1 && (k = read(stats_pipe[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)k;
	buf[len] = 0;
	close(stats_pipe[0]);
	/* glibc's lines first, in its order, then uslab's. */
	const char *want[] = { "Arena 0:\nsystem bytes     = ", "in use bytes     = ", "Total (incl. mmap):\n",
	                       "system bytes     = ", "in use bytes     = ", "max mmap regions = ",
	                       "max mmap bytes   = ", "uslab malloc_stats\n" };
	const char *at = buf;
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *f = strstr(at, want[i]);
		CHECK(f != NULL);
		if (!f) {
			fprintf(stderr, "malloc_stats: no \"%s\" in:\n%s\n", want[i], buf);
			break;
		}
		at = f + strlen(want[i]);
	}
	CHECK(strncmp(buf, "Arena 0:", 8) == 0);
}
