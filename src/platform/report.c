/* report.c - problem reports: one line on stderr starting "uslab: ", or the
 * handler set with uslab_set_report_handler; uslab_error_count counts them.
 * Reports made during start-up are kept and delivered after it. Locks:
 * report_lock (copies the handler; never held while it runs). Never allocates. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "platform.h"

/* The handler and its argument change together (report_lock), and a report calls
 * the pair it copied, outside the lock, so a handler may report in turn. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static uslab_report_fn report_fn;
static void *report_arg;
static unsigned long error_count;

void uslab_set_report_handler(uslab_report_fn fn, void *arg)
{
	pthread_mutex_lock(&report_lock);
	report_fn = fn;
	report_arg = arg;
	pthread_mutex_unlock(&report_lock);
}

unsigned long uslab_error_count(void)
{
	return __atomic_load_n(&error_count, __ATOMIC_RELAXED);
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Reports made while start-up holds init_lock wait until it is released, so a
 * handler may call into uslab (deferring is this thread's, set only there). */
#define PENDING_MAX 8
static struct {
	enum uslab_error kind;
	char line[256];
} pending[PENDING_MAX];
static int npending;
static __thread int deferring __attribute__((tls_model("initial-exec")));

static void deliver(enum uslab_error kind, char *line, size_t cap);

void usl_report(enum uslab_error kind, const char *fmt, ...)
{
	char line[512];
	int saved = errno;
	size_t n = (size_t)snprintf(line, sizeof(line), "uslab: ");
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (deferring) {
		if (npending < PENDING_MAX) {
			char *to = pending[npending].line;   /* cut to its 256 bytes */
			size_t i = 0;
			for (; i + 1 < sizeof(pending[npending].line) && line[i]; i++)
				to[i] = line[i];
			to[i] = 0;
			pending[npending].kind = kind;
			npending++;
		}
		errno = saved;
		return;
	}
	deliver(kind, line, sizeof(line));
	errno = saved;
}

static void deliver(enum uslab_error kind, char *line, size_t cap)
{
	size_t n;

	if (kind != USLAB_ERR_NONE)
		__atomic_fetch_add(&error_count, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&report_lock);
	uslab_report_fn fn = report_fn;
	void *arg = report_arg;
	pthread_mutex_unlock(&report_lock);
	if (fn) {
		fn(kind, line, arg);
	} else {
		n = strlen(line);
		if (n > cap - 2)
			n = cap - 2;
		line[n] = '\n';
		write_all(2, line, n + 1);
	}
}
void usl_report_defer(bool on)
{
	deferring = on;
}

/* Deliver what was kept while deferring (after init_lock is released). */
void usl_report_flush(void)
{
	int n = npending;
	npending = 0;
	for (int i = 0; i < n; i++)
		deliver(pending[i].kind, pending[i].line, sizeof(pending[i].line));
}
