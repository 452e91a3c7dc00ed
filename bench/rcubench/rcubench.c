/* rcubench.c - uslab-rcubench: objects freed after an RCU grace period
 * (liburcu, memb flavour), kfree_rcu against call_rcu with a freeing callback
 * per object. Writers (twice the CPUs) each replace objects of their own slots
 * (malloc(64) with an rcu_head) and retire the old one; a reader per CPU walks
 * every slot under rcu_read_lock. A run ends when every retired object is
 * freed (rcu_barrier / kvfree_rcu_barrier; the readers pause 100 us between walks): its wall time gives the
 * throughput (objects retired per second), getrusage its peak RSS.
 * Each row is a child process run under LD_PRELOAD of its allocator, as its
 * users run it: uslab's kfree_rcu (through weak references that the
 * preloaded libuslab.so resolves), uslab's malloc with call_rcu per object,
 * glibc (no preload), jemalloc and mimalloc with call_rcu per object. Rows
 * interleaved, medians. Usage: uslab-rcubench [--runs N] [--quick] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <urcu/urcu-memb.h>

#include "clock.h"
#include "peers.h"
#include "spawn.h"
#include "stats.h"
#include "uslab.h"

/* Resolved by the preloaded libuslab.so; NULL under the other allocators. */
#pragma weak uslab_rcu_init
#pragma weak uslab_kvfree_call_rcu
#pragma weak kvfree_rcu_barrier
#pragma weak uslab_rcu_stats

struct obj {
	struct rcu_head rcu;
	unsigned long id;
	char payload[40];
};

#define SLOTS 512
static struct obj *_Atomic slots[64][SLOTS];
static atomic_int done;
static unsigned long per_writer;
static int use_kfree_rcu;

static void free_cb(struct rcu_head *h)
{
	free(h);   /* (rcu is the first member) */
}

static void *writer(void *arg)
{
	size_t w = (size_t)arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (w + 1);
	for (unsigned long i = 0; i < per_writer; i++) {
		xorshift64(&x);
		struct obj *o = malloc(sizeof(*o));
		if (!o)
			abort();
		o->id = i;
		memset(o->payload, (int)i, sizeof(o->payload));
		struct obj *old = atomic_exchange(&slots[w][x % SLOTS], o);
		if (!old)
			continue;
		if (use_kfree_rcu)
			uslab_kvfree_call_rcu(&old->rcu, old);
		else
			urcu_memb_call_rcu(&old->rcu, free_cb);
	}
	return NULL;
}

static int nwriters;
static void *reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	unsigned long sum = 0;
	while (!atomic_load(&done)) {
		urcu_memb_read_lock();
		for (int w = 0; w < nwriters; w++)
			for (int s = 0; s < SLOTS; s += 7) {
				struct obj *o = atomic_load_explicit(&slots[w][s], memory_order_acquire);   /* rcu_dereference */
				if (o)
					sum += o->id;
			}
		urcu_memb_read_unlock();
		usleep(100);   /* readers come and go: the writers' and the frees' cost is measured */
	}
	urcu_memb_unregister_thread();
	return (void *)sum;
}

/* One run: prints "seconds maxrss_kb". */
static int child(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nwriters = (int)(ncpu * 2 > 64 ? 64 : ncpu * 2);
	int nreaders = (int)ncpu;
	if (use_kfree_rcu) {
		if (!uslab_rcu_init || !uslab_kvfree_call_rcu) {
			fprintf(stderr, "uslab-rcubench: kfree_rcu row without libuslab.so preloaded\n");
			return 3;
		}
		uslab_rcu_init(&urcu_memb_flavor);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t r[64], w[64];
	for (int i = 0; i < nreaders && i < 64; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (int i = 0; i < nwriters; i++)
		pthread_create(&w[i], NULL, writer, (void *)(size_t)i);
	for (int i = 0; i < nwriters; i++)
		pthread_join(w[i], NULL);
	atomic_store(&done, 1);
	for (int i = 0; i < nreaders && i < 64; i++)
		pthread_join(r[i], NULL);
	if (use_kfree_rcu)
		kvfree_rcu_barrier();
	else
		urcu_memb_barrier();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%.4f %ld\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, ru.ru_maxrss);
	struct uslab_rcu_stats st;
	if (use_kfree_rcu && uslab_rcu_stats && uslab_rcu_stats(&st) == 0)   /* (for a run by hand) */
		fprintf(stderr, "kfree_rcu: %lu queued in %lu batches, %lu waits at USLAB_RCU_MAX\n", st.queued, st.batches,
		        st.waits);
	return 0;
}

struct row {
	const char *name, *preload;
	int kfree_rcu;
	double secs[31];
	long rss[31];
	int n;
};

/* The child's side of a run: row r's allocator, this program with --child. */
struct run_exec {
	const char *exe;
	const struct row *r;
};

static void exec_run(void *p)
{
	const struct run_exec *x = p;
	char a1[8], a2[32];
	env_set("LD_PRELOAD", x->r->preload);
	snprintf(a1, sizeof(a1), "%d", x->r->kfree_rcu);
	snprintf(a2, sizeof(a2), "%lu", per_writer);
	execl(x->exe, x->exe, "--child", a1, a2, (char *)NULL);
}

/* Run number run of row r: its time and peak RSS kept, or a message. -1 if
 * no child could be started. */
static int run_row(const char *exe, struct row *r, int run)
{
	struct run_exec x = { exe, r };
	struct spawn_result res;
	char buf[128];
	double s;
	long rss;
	long n = spawn_capture(exec_run, &x, buf, sizeof(buf), &res);
	if (n < 0 && strcmp(res.failed, "wait") != 0)
		return -1;
	if (n > 0 && WIFEXITED(res.status) && WEXITSTATUS(res.status) == 0 && sscanf(buf, "%lf %ld", &s, &rss) == 2) {
		r->secs[r->n] = s;
		r->rss[r->n] = rss;
		r->n++;
	} else {
		fprintf(stderr, "uslab-rcubench: %s: run %d failed\n", r->name, run + 1);
	}
	return 0;
}

/* The table: each row's throughput and peak RSS (medians), and their ratios to
 * the first row's. */
static void print_table(struct row *rows, int nrows, int runs, long ncpu)
{
	double objs = (double)per_writer * (double)(ncpu * 2);
	printf("== kfree_rcu against call_rcu per object: %ld writers x %lu objects of 64 bytes, %ld readers "
	       "(liburcu memb) ==\n", ncpu * 2, per_writer, ncpu);
	printf("%-26s %12s %10s %12s %10s\n", "allocator", "Mobj/s", "x", "peak RSS MB", "x");
	double base_t = 0;
	long base_r = 0;
	for (int k = 0; k < nrows; k++) {
		struct row *r = &rows[k];
		if (!r->n) {
			printf("%-26s %12s\n", r->name, "(not run)");
			continue;
		}
		double t = bench_median(r->secs, r->n);
		long rss = bench_median_long(r->rss, r->n);
		if (k == 0) {
			base_t = t;
			base_r = rss;
		}
		printf("%-26s %12.2f %10.2f %12.1f %10.2f\n", r->name, objs / t / 1e6, base_t > 0 ? t / base_t : 0,
		       (double)rss / 1024.0, base_r > 0 ? (double)rss / (double)base_r : 0);
	}
	printf("(x: the row's time and peak RSS over uslab kfree_rcu's; above 1.00 is slower or larger. Medians of "
	       "%d runs.)\n", runs);
}

int main(int argc, char **argv)
{
	int runs = 5, quick = 0;
	per_writer = 1000000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--child") && i + 2 < argc) {
			use_kfree_rcu = atoi(argv[i + 1]);
			per_writer = strtoul(argv[i + 2], NULL, 10);
			return child();
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else {
			fprintf(stderr, "usage: uslab-rcubench [--runs N] [--quick]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 31) {
		fprintf(stderr, "uslab-rcubench: --runs must be 1..31\n");
		return 2;
	}
	if (quick)
		per_writer = 200000;
	struct row rows[] = {
		{ "uslab kfree_rcu", USLAB_SO_PATH, 1, { 0 }, { 0 }, 0 },
		{ "uslab call_rcu+free", USLAB_SO_PATH, 0, { 0 }, { 0 }, 0 },
		{ "glibc call_rcu+free", NULL, 0, { 0 }, { 0 }, 0 },
		{ "jemalloc call_rcu+free", JEMALLOC_SO, 0, { 0 }, { 0 }, 0 },
		{ "mimalloc call_rcu+free", MIMALLOC_SO, 0, { 0 }, { 0 }, 0 },
	};
	int nrows = (int)(sizeof(rows) / sizeof(rows[0]));
	char exe[4096];
	if (self_exe(exe, sizeof(exe)) < 0)
		return 1;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	fprintf(stderr, "[rcu] %d runs of %d rows: %ld writers x %lu objects, %ld readers\n", runs, nrows, ncpu * 2,
	        per_writer, ncpu);
	for (int run = 0; run < runs; run++)
		for (int k = 0; k < nrows; k++)
			if (!(rows[k].preload && access(rows[k].preload, R_OK) != 0) && run_row(exe, &rows[k], run) < 0)
				return 1;
	print_table(rows, nrows, runs, ncpu);
	return 0;
}
