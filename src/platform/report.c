/* report.c - problem reports: one line on stderr starting "uslab: ", or the
 * handler set with uslab_set_report_handler; uslab_error_count counts them.
 * A report made while its thread holds a uslab lock (start-up's init_lock
 * included) is queued and delivered when that thread holds none. Locks:
 * report_lock (copies the handler; never held while it runs), queue_lock (a
 * leaf spin lock over the queue). Never allocates. */
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
static void queue_take(void);
static void queue_give(void);
static uslab_report_fn report_fn;
static void *report_arg;
static unsigned long error_count;

/* fork(): the prepare handler holds both, so the child finds them free. */
void usl_report_fork_lock(void)
{
	pthread_mutex_lock(&report_lock);
	queue_take();
}

void usl_report_fork_unlock(void)
{
	queue_give();
	pthread_mutex_unlock(&report_lock);
}

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

/* Reports made while their thread holds a uslab lock wait in a small queue,
 * each entry owned by its thread (the address of its holds counter), until
 * that thread's last lock is released (usl_report_release). queue_lock is a
 * plain spin lock, not a counted one: it is never held while anything else runs. */
#define QUEUE_MAX 16
static struct {
	const void *owner;          /* NULL: free */
	enum uslab_error kind;
	char line[256];
} queue[QUEUE_MAX];
static int queue_lock;
__thread unsigned int usl_report_holds __attribute__((tls_model("initial-exec")));
__thread bool usl_report_queued __attribute__((tls_model("initial-exec")));
static __thread unsigned int lost_here __attribute__((tls_model("initial-exec")));
static __thread enum uslab_error lost_kind __attribute__((tls_model("initial-exec")));

static void queue_take(void)
{
	while (__atomic_exchange_n(&queue_lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&queue_lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

static void queue_give(void) { __atomic_store_n(&queue_lock, 0, __ATOMIC_RELEASE); }

static void enqueue(enum uslab_error kind, const char *line)
{
	int i;
	queue_take();
	for (i = 0; i < QUEUE_MAX && queue[i].owner; i++)
		;
	if (i < QUEUE_MAX) {
		size_t k = 0;                        /* cut to its 256 bytes */
		for (; k + 1 < sizeof(queue[i].line) && line[k]; k++)
			queue[i].line[k] = line[k];
		queue[i].line[k] = 0;
		queue[i].kind = kind;
		queue[i].owner = &usl_report_holds;
	} else {
		lost_here++;
		lost_kind = kind;
	}
	queue_give();
	usl_report_queued = true;
}

static void deliver(enum uslab_error kind, char *line, size_t cap);

/* This thread's queued reports, oldest first, with no lock held. */
void usl_report_deliver_queued(void)
{
	enum uslab_error kind;
	char line[256];

	usl_report_queued = false;
	for (;;) {
		bool found = false;
		queue_take();
		for (int i = 0; i < QUEUE_MAX; i++) {
			if (queue[i].owner == &usl_report_holds) {
				kind = queue[i].kind;
				memcpy(line, queue[i].line, sizeof(line));
				queue[i].owner = NULL;
				found = true;
				break;
			}
		}
		queue_give();
		if (!found)
			break;
		deliver(kind, line, sizeof(line));
	}
	if (lost_here) {
		unsigned int n = lost_here;
		lost_here = 0;
		char msg[96];
		snprintf(msg, sizeof(msg), "uslab: %u more reports lost (the queue of reports made under locks was full)", n);
		__atomic_fetch_add(&error_count, n - 1, __ATOMIC_RELAXED);   /* each counts; the line counts once more */
		deliver(lost_kind, msg, sizeof(msg));
	}
}

void usl_report(enum uslab_error kind, const char *fmt, ...)
{
	char line[512];
	int saved = errno;
	size_t n = (size_t)snprintf(line, sizeof(line), "uslab: ");
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (usl_report_holds)
		enqueue(kind, line);
	else
		deliver(kind, line, sizeof(line));
	errno = saved;
}

/* To the handler, else to stderr with a newline; counted unless a notice. */
static void dispatch(enum uslab_error kind, const char *text, size_t len)
{
	if (kind != USLAB_ERR_NONE)
		__atomic_fetch_add(&error_count, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&report_lock);
	uslab_report_fn fn = report_fn;
	void *arg = report_arg;
	pthread_mutex_unlock(&report_lock);
	if (fn) {
		fn(kind, text, arg);
	} else {
		write_all(2, text, len);
		write_all(2, "\n", 1);
	}
}

static void deliver(enum uslab_error kind, char *line, size_t cap)
{
	size_t n = strlen(line);
	dispatch(kind, line, n < cap ? n : cap - 1);
}

void usl_report_text(enum uslab_error kind, const char *text)
{
	int saved = errno;
	if (usl_report_holds)
		enqueue(kind, text);   /* made under a lock after all: its first line still goes */
	else
		dispatch(kind, text, strlen(text));
	errno = saved;
}

void *usl_report_free_list(const char *name, const void *obj, const void *next)
{
	usl_report(USLAB_ERR_CORRUPT, "%s: free list corrupted: the free object %p links to %p, not an object of its slab "
	           "(a write after free?); the rest of the list is dropped", name, obj, next);
	return NULL;
}
