/* live.c - the live view: with USLAB_STATS, the process publishes its caches,
 * their counts and counters in /dev/shm/uslab.<pid> (the layout and its
 * sequence counts: stats/live.h) for tools/uslabinfo to read from outside.
 * Made when the library is loaded (the constructor usl_live_init, which the
 * malloc override names so that a static link keeps this file), which also
 * starts the decay thread (common/decay.c); rewritten every PUBLISH_MS
 * by that thread, idle program or not, and at most every PUBLISH_MS by the
 * decay ticks (usl_stats_tick: slow paths and counted frees, no lock held);
 * removed at exit. Without the thread (USLAB_BACKGROUND=0, pthread_create
 * refused) it is as current as the last tick. A file left by a process that
 * died without exiting is removed by the next process that makes one (its pid
 * is gone, or now names a process started at another time). A forked child
 * makes its own at its first tick (which starts its thread); a vfork child
 * (its parent's memory, no fork handler) never touches it. Requests written
 * into the file (shrink, validate, the owner summaries, which go to a file
 * of their own beside it) are served at the next publication.
 * Locks: live_lock (a try-lock for a publisher: one at a time, a tick that
 * finds it held goes on; waited for only at exit); the walk's (walk_lock to
 * count it, list_lock) inside it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "stats.h"

#define PUBLISH_MS 200
#define LIVE_DIR "/dev/shm"

_Static_assert(USL_NR_STATS <= USL_LIVE_STATS, "the file's rows hold every counter");
_Static_assert(sizeof(struct usl_live_header) % 8 == 0 && sizeof(struct usl_live_row) % 8 == 0, "8-byte fields");

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct usl_live_header *live;     /* written under live_lock: the mapping, or NULL */
static pid_t live_owner;                 /* the process whose view it is (usl_live_init, a fork child) */
static char live_path[64];
static uint64_t next_publish_ms;         /* atomic */
static bool live_failed;                 /* atomic: could not make the file: said once, not retried */
static bool live_closed;                 /* under live_lock: removed at exit, never made again */
static __thread bool live_held;          /* this thread holds live_lock */

/* A file of another process of this user that is no longer running: its pid
 * is gone, or has been reused by a process started at another time. */
static bool stale(const char *path, long pid)
{
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return true;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	struct usl_live_header h;
	ssize_t n = pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h.magic, USL_LIVE_MAGIC, 8))
		return false;               /* not ours to judge */
	uint64_t now = usl_live_start_time(pid);
	return now && h.start_time && now != h.start_time;
}

static void remove_stale(void)
{
	DIR *d = opendir(LIVE_DIR);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		if (strncmp(e->d_name, "uslab.", 6))
			continue;
		long pid = strtol(e->d_name + 6, &end, 10);
		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		char path[300];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", LIVE_DIR, e->d_name);
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && stale(path, pid))
			unlink(path);
	}
	closedir(d);
}

/* The file for this process, with its fixed part written. Under live_lock. */
static bool live_make(void)
{
	usl_assert_held(&live_lock);
	pid_t pid = getpid();
	snprintf(live_path, sizeof(live_path), "%s/uslab.%ld", LIVE_DIR, (long)pid);
	remove_stale();
	unlink(live_path);                   /* ours by pid: an older process's with our pid */
	int fd = open(live_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)USL_LIVE_FILE_BYTES) != 0) {
		close(fd);
		unlink(live_path);
		goto fail;
	}
	void *m = mmap(NULL, USL_LIVE_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		unlink(live_path);
		goto fail;
	}
	struct usl_live_header *h = m;
	h->version = USL_LIVE_VERSION;
	h->header_size = sizeof(struct usl_live_header);
	h->row_size = sizeof(struct usl_live_row);
	h->max_rows = USL_LIVE_ROWS;
	h->alias_size = sizeof(struct usl_live_alias);
	h->max_aliases = USL_LIVE_ALIASES;
	h->nr_stats = USL_NR_STATS;
	h->nr_cpus = usl_nr_cpus;
	h->nr_nodes = usl_nr_nodes;
	h->page_size = (uint32_t)USL_PAGE_SIZE;
	h->stats_on = (uint32_t)usl_opt.stats;
	h->pid = pid;
	h->start_time = usl_live_start_time(pid);
	snprintf(h->percpu_mode, sizeof(h->percpu_mode), "%s", usl_rseq_mode ? "rseq" : "locked");
	for (int i = 0; i < USL_NR_STATS; i++)
		snprintf(h->stat_names[i], USL_LIVE_STAT_NAME, "%s", usl_stat_names[i]);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, USL_LIVE_MAGIC, 8);  /* last: a reader sees a whole header or no magic */
	__atomic_store_n(&live, h, __ATOMIC_RELEASE);   /* request_pending reads it unlocked */
	return true;
fail:
	if (!live_failed)
		usl_report(USLAB_ERR_OPTION, "USLAB_STATS: cannot make %s (%s); no live view for uslabinfo", live_path,
		           strerror(errno));
	__atomic_store_n(&live_failed, true, __ATOMIC_RELAXED);
	return false;
}

static struct usl_live_row *row_at(unsigned int i)
{
	return (struct usl_live_row *)((char *)live + sizeof(struct usl_live_header)) + i;
}

static struct usl_live_alias *alias_at(unsigned int i)
{
	return (struct usl_live_alias *)((char *)row_at(USL_LIVE_ROWS)) + i;
}

static void seq_begin(uint64_t *seq)
{
	__atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);   /* odd before the data */
}

static void seq_end(uint64_t *seq)
{
	__atomic_store_n(seq, __atomic_load_n(seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

struct walk {
	unsigned int rows, dropped;
};

static int write_row(struct kmem_cache *s, void *arg)
{
	struct walk *w = arg;
	if (w->rows == USL_LIVE_ROWS) {
		w->dropped++;
		return 0;
	}
	struct usl_live_row *r = row_at(w->rows++);
	struct usl_node_counts nc, per[USL_LIVE_NODES];
	unsigned int cpu_slabs = 0, cpu_partial = 0;
	memset(&nc, 0, sizeof(nc));
	for (unsigned int nid = 0; nid < usl_nr_nodes && nid < USL_LIVE_NODES; nid++) {
		usl_engine_node_counts(s, (int)nid, &per[nid]);
		usl_node_counts_add(&nc, &per[nid]);
	}
	for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++) {
		bool has;
		unsigned int n;
		usl_slub_cpu_counts(s, cpu, &has, &n);
		cpu_slabs += has;
		cpu_partial += n;
	}
	slab_flags_t f = s->flags;
	seq_begin(&r->seq);
	snprintf(r->name, sizeof(r->name), "%s", s->name);
	r->object_size = __atomic_load_n(&s->object_size, __ATOMIC_RELAXED);
	r->slab_size = s->size;
	r->objs_per_slab = s->objects;
	r->order = s->order;
	r->align = s->align;
	r->sheaf_capacity = s->sheaf_capacity;
	r->aliases = s->refcount > 0 ? (uint32_t)s->refcount - 1 : 0;
	r->min_partial = __atomic_load_n(&s->min_partial, __ATOMIC_RELAXED);
	r->cpu_partial = __atomic_load_n(&s->cpu_partial, __ATOMIC_RELAXED);
	r->flags = (f & SLAB_HWCACHE_ALIGN ? USL_LIVE_F_HWCACHE : 0) | (f & SLAB_POISON ? USL_LIVE_F_POISON : 0) |
	           (f & SLAB_RED_ZONE ? USL_LIVE_F_RED_ZONE : 0) | (f & SLAB_CONSISTENCY_CHECKS ? USL_LIVE_F_CHECKS : 0) |
	           (f & SLAB_STORE_USER ? USL_LIVE_F_STORE_USER : 0) | (f & SLAB_TRACE ? USL_LIVE_F_TRACE : 0) |
	           (f & USL_SLAB_INTERNAL ? USL_LIVE_F_OWN : 0) | (usl_is_slab(s) ? USL_LIVE_F_SLAB : 0);
	r->cpu_slabs = cpu_slabs;                 /* as sysfs cpu_slabs: cpu slabs and cpu partial slabs */
	r->cpu_partial_slabs = cpu_partial;
	r->cpu_slabs += cpu_partial;
	r->slabs = nc.nr_slabs;
	r->total_objects = nc.total_objects;
	r->objects = nc.total_objects - nc.partial_free;
	r->partial = nc.nr_partial;
	r->objects_partial = nc.partial_inuse;
	for (unsigned int nid = 0; nid < USL_LIVE_NODES; nid++) {
		r->node_slabs[nid] = nid < usl_nr_nodes ? per[nid].nr_slabs : 0;
		r->node_partial[nid] = nid < usl_nr_nodes ? per[nid].nr_partial : 0;
	}
	for (int i = 0; i < USL_NR_STATS; i++)
		r->stats[i] = usl_stat_sum(s, (enum usl_stat_item)i);
	seq_end(&r->seq);
	return 0;
}

static int write_alias(const char *name, struct kmem_cache *target, void *arg)
{
	unsigned int *n = arg;
	if (*n == USL_LIVE_ALIASES) {
		live->dropped_aliases++;
		return 0;
	}
	struct usl_live_alias *a = alias_at((*n)++);
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->target, sizeof(a->target), "%s", target->name);
	return 0;
}

/* Under live_lock. */
static void publish(void)
{
	usl_assert_held(&live_lock);
	struct walk w = { 0, 0 };
	unsigned int aliases = 0;
	struct timespec ts;

	seq_begin(&live->seq);
	live->dropped_aliases = 0;
	usl_cache_for_each(write_row, &w);
	usl_cache_aliases_each(write_alias, &aliases);
	live->nr_rows = w.rows;
	live->dropped_rows = w.dropped;
	live->nr_aliases = aliases;
	clock_gettime(CLOCK_REALTIME, &ts);
	live->updated_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	live->publications++;
	seq_end(&live->seq);
}

struct request {
	const char *name;
	uint32_t op;
	int64_t result;
	bool any;
	int fd;                  /* USL_LIVE_CALLS: the reply file */
};

/* One owner summary of s into the reply file: its heading, then the text
 * (in a mapping of its own: this may run inside an allocation's tick). The
 * summary walks the cache's slabs: it is made once, and again only when it
 * did not fit. */
static void write_calls(struct request *q, struct kmem_cache *s, const char *which)
{
	char head[USL_LIVE_NAME + 32];
	size_t cap = 64 * 1024;
	char *buf = MAP_FAILED;
	int n = -1;
	for (int pass = 0; pass < 2; pass++) {
		buf = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED)
			return;
		n = uslab_cache_attr(s, which, buf, cap);
		if (n < 0 || (size_t)n < cap)
			break;
		munmap(buf, cap);
		buf = MAP_FAILED;
		cap = (size_t)n + 4096;          /* room for what more may come meanwhile */
	}
	int h = snprintf(head, sizeof(head), "== %s %s\n", s->name, which);
	if (buf != MAP_FAILED && n >= 0 && h > 0 && write(q->fd, head, (size_t)h) == h) {
		size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
		(void)!write(q->fd, buf, len);
	}
	if (buf != MAP_FAILED)
		munmap(buf, cap);
}

/* The reply file of USL_LIVE_CALLS, beside the view's. */
static void calls_path(char *path, size_t n)
{
	snprintf(path, n, "%s%s", live_path, USL_LIVE_CALLS_SUFFIX);
}

static int serve_one(struct kmem_cache *s, void *arg)
{
	struct request *q = arg;
	if (q->name[0] && strcmp(q->name, s->name))
		return 0;
	q->any = true;
	if (q->op == USL_LIVE_CALLS) {
		if (s->flags & SLAB_STORE_USER) {
			write_calls(q, s, "alloc_calls");
			write_calls(q, s, "free_calls");
			q->result++;
		}
	} else if (q->op == USL_LIVE_SHRINK) {
		if (kmem_cache_shrink(s) >= 0)
			q->result++;
	} else if (s->flags & USL_SLAB_DEBUG_FLAGS) {
		int n = kmem_cache_validate(s);
		if (n > 0)
			q->result += n;
	}
	return 0;
}

/* A request written into the file: served, its result stored. Under live_lock. */
static void serve(void)
{
	usl_assert_held(&live_lock);
	uint64_t seq = __atomic_load_n(&live->req_seq, __ATOMIC_ACQUIRE);
	if (seq == __atomic_load_n(&live->done_seq, __ATOMIC_RELAXED))
		return;
	char name[USL_LIVE_NAME];
	memcpy(name, live->req_name, sizeof(name));
	name[sizeof(name) - 1] = 0;
	struct request q = { name, __atomic_load_n(&live->req_op, __ATOMIC_RELAXED), 0, false, -1 };
	if (q.op == USL_LIVE_CALLS) {
		/* A new file each time (one left by a requester that gave up,
		 * or a link planted at the name, is removed first). */
		char path[sizeof(live_path) + sizeof(USL_LIVE_CALLS_SUFFIX)];
		calls_path(path, sizeof(path));
		unlink(path);
		q.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (q.fd >= 0) {
			usl_cache_for_each(serve_one, &q);
			close(q.fd);
		} else {
			q.any = true;
			q.result = -2;           /* could not make it */
		}
	} else if (q.op == USL_LIVE_SHRINK || q.op == USL_LIVE_VALIDATE) {
		usl_cache_for_each(serve_one, &q);
	}
	__atomic_store_n(&live->req_result, q.any ? q.result : -1, __ATOMIC_RELAXED);
	__atomic_store_n(&live->done_seq, seq, __ATOMIC_RELEASE);
	__atomic_store_n(&next_publish_ms, 0, __ATOMIC_RELAXED);   /* show what it did at once */
}

/* A request waits in the file. Read without live_lock (a forked child has
 * let go of its parent's file: it serves none of the parent's requests). */
static bool request_pending(void)
{
	struct usl_live_header *h = __atomic_load_n(&live, __ATOMIC_ACQUIRE);
	return h && __atomic_load_n(&h->req_seq, __ATOMIC_RELAXED) != __atomic_load_n(&h->done_seq, __ATOMIC_RELAXED);
}

/* The usl_stats_tick hook: publish if PUBLISH_MS have passed since the last
 * publication (a tick of the slow paths looks at the clock only every 16th
 * time, or when a request waits; the decay thread every time), serving a
 * request first. The milliseconds until the next publication is due; 0
 * without a view (the thread need not wake for it). */
static unsigned int live_tick(bool thread)
{
	static __thread unsigned int calls;
	bool asked = request_pending();
	if (!thread && ++calls % 16 && !asked)
		return 0;                       /* the clock every 16th tick, or a request */
	if (__atomic_load_n(&live_failed, __ATOMIC_RELAXED))
		return 0;
	uint64_t now = usl_now_ms(), next = __atomic_load_n(&next_publish_ms, __ATOMIC_RELAXED);
	if (now < next && !asked)
		return (unsigned int)(next - now);
	if (getpid() != live_owner)
		return 0;                       /* a vfork child: the view is its parent's */
	if (!usl_trylock(&live_lock))
		return PUBLISH_MS;              /* another publishes */
	live_held = true;
	if (!live && !live_closed && !live_failed)
		live_make();                    /* a forked child's own */
	unsigned int due = 0;
	if (live && !live_closed) {
		serve();
		publish();
		__atomic_store_n(&next_publish_ms, now + PUBLISH_MS, __ATOMIC_RELAXED);
		due = PUBLISH_MS;
	}
	live_held = false;
	usl_unlock(&live_lock);
	return due;
}

/* A forked child shares the parent's mapping: it lets go of it (no unlink)
 * and makes its own at its first tick. */
static void live_child(void)
{
	pthread_mutex_init(&live_lock, NULL);
	if (live)
		munmap(live, USL_LIVE_FILE_BYTES);
	live = NULL;
	live_owner = getpid();
	live_held = false;
	next_publish_ms = 0;
}

__attribute__((constructor)) void usl_live_init(void)
{
	const char *v = getenv("USLAB_STATS");
	if (!v || (v[0] == '0' && !v[1]))
		return;                         /* no start-up work for a program without it */
	usl_ensure_init();
	if (!usl_opt.stats)
		return;
	usl_stats_pid = live_owner = getpid();
	pthread_atfork(NULL, NULL, live_child);
	__atomic_store_n(&usl_stats_tick, live_tick, __ATOMIC_RELEASE);
	usl_lock(&live_lock);
	live_held = true;
	if (live_make()) {
		publish();
		__atomic_store_n(&next_publish_ms, usl_now_ms() + PUBLISH_MS, __ATOMIC_RELAXED);
	}
	live_held = false;
	usl_unlock(&live_lock);
	usl_decay_thread_start();             /* keeps the view current while the program is idle */
}

/* The file is removed under live_lock, so that no publisher (the decay
 * thread goes on until the process ends) makes a new one; the mapping stays
 * for the exit to unmap, since a publisher or a tick's unlocked look for a
 * request may still read it. (A thread that exits while it publishes, from a
 * report handler, holds the lock already.) */
__attribute__((destructor)) static void live_exit(void)
{
	usl_stats_exit_report();
	if (live_owner == 0 || getpid() != live_owner)
		return;                         /* no view, or a vfork child's exit() */
	bool held = live_held;
	if (!held)
		usl_lock(&live_lock);
	live_closed = true;
	if (live) {
		char path[sizeof(live_path) + sizeof(USL_LIVE_CALLS_SUFFIX)];
		calls_path(path, sizeof(path));
		unlink(path);                   /* a reply no requester took */
		unlink(live_path);
	}
	if (!held)
		usl_unlock(&live_lock);
}
