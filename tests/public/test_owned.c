/* test_owned.c - the owned front end (USLAB_FRONT=owned) as a user sees it,
 * with the public API alone: the front chosen (or the fallback reported in
 * locked mode); double frees reported at the free, on the owner's CPU and on
 * another; interior, foreign and wrong-cache frees each reported once with
 * nothing lost; a write into a freed object changes no allocation; free
 * objects handed out lowest address first; another CPU's frees come back to
 * the owner (the cache does not grow over rounds); bulk calls; shrink and an
 * idle CPU's slots give memory back. Run with USLAB_FRONT=owned in both
 * per-CPU modes (locked mode checks the fallback). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "../harness.h"   /* uslab.h only */

static bool owned;
static int ncpus;

static long attr_long(struct kmem_cache *s, const char *name)
{
	char buf[128];
	if (uslab_cache_attr(s, name, buf, sizeof(buf)) < 0)
		return -1;
	return strtol(buf, NULL, 10);
}

static bool pin(int cpu)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one) == 0;
}

static void unpin(void)
{
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int i = 0; i < ncpus && i < CPU_SETSIZE; i++)
		CPU_SET(i, &all);
	sched_setaffinity(0, sizeof(all), &all);
}

/* Which front runs: owned where rseq is, else sheaves with one report. */
static void front(void)
{
	capture_reports();
	const char *mode = uslab_percpu_mode();
	const char *f = uslab_front();
	const char *harden = getenv("USLAB_HARDEN");
	if (harden && !strcmp(harden, "2")) {   /* its random order is the sheaves' */
		CHECK(!strcmp(f, "sheaves"));
		CHECK_EQ(reports(USLAB_ERR_OPTION), 1);
		CHECK(strstr(last_report, "USLAB_HARDEN=2") != NULL || strcmp(mode, "rseq") != 0);
	} else if (!strcmp(mode, "rseq")) {
		CHECK(!strcmp(f, "owned"));
		CHECK_EQ(reports(USLAB_ERR_OPTION), 0);
	} else {
		CHECK(!strcmp(f, "sheaves"));
		CHECK_EQ(reports(USLAB_ERR_OPTION), 1);
		CHECK(strstr(last_report, "USLAB_FRONT=owned") != NULL);
	}
	owned = !strcmp(f, "owned");
}

/* A double free is reported at the second free, naming the cache; the
 * object is handed out once afterwards. */
static void double_free_here(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-df", 64, 0, SLAB_NO_MERGE, NULL);
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);
	kmem_cache_free(s, p);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	CHECK(strstr(last_report, "owned-df") != NULL);
	/* Through free-by-pointer too. */
	void *q = kmalloc(100, GFP_KERNEL);
	kfree(q);
	kfree(q);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 2);
	/* p comes back at most once among many allocations. */
	enum { N = 3000 };
	static void *v[N];
	int seen = 0;
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		seen += v[i] == p;
	}
	CHECK(seen <= 1);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, v[i]);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

/* The second free on another CPU (the remote path) is reported too. */
struct df_arg {
	struct kmem_cache *s;
	void *p;
	int cpu;
};
static void *free_on(void *a)
{
	struct df_arg *d = a;
	if (pin(d->cpu))
		kmem_cache_free(d->s, d->p);
	return NULL;
}

static void double_free_remote(void)
{
	if (ncpus < 2 || !owned)             /* sheaves report it when the object is next taken out */
		return;
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-rdf", 128, 0, SLAB_NO_MERGE, NULL);
	CHECK(pin(0));
	void *keep = kmem_cache_alloc(s, GFP_KERNEL);   /* the slab stays in use */
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);                          /* freed on CPU 0, its owner */
	struct df_arg d = { s, p, 1 };
	pthread_t t;
	pthread_create(&t, NULL, free_on, &d);          /* again on CPU 1 */
	pthread_join(t, NULL);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	/* Freed remotely once, then a second remote free: reported there. */
	void *r = kmem_cache_alloc(s, GFP_KERNEL);
	d.p = r;
	pthread_create(&t, NULL, free_on, &d);
	pthread_join(t, NULL);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	pthread_create(&t, NULL, free_on, &d);
	pthread_join(t, NULL);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 2);
	/* and the local free of it, on CPU 0, while its bit waits remote */
	kmem_cache_free(s, r);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 3);
	unpin();
	kmem_cache_free(s, keep);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

/* Interior, foreign and wrong-cache frees: each reported once, nothing
 * freed; the object is freed later without a report. */
static void bad_pointers(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-bad", 96, 0, SLAB_NO_MERGE, NULL);
	struct kmem_cache *t = kmem_cache_create("owned-other", 96, 0, SLAB_NO_MERGE, NULL);
	char *p = kmem_cache_alloc(s, GFP_KERNEL);
	int local;
	kmem_cache_free(s, p + 8);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), 1);
	kmem_cache_free(s, &local);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), 1);
	kmem_cache_free(t, p);
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), 1);
	kfree(p + 16);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), 2);
	unsigned long before = uslab_error_count();
	kmem_cache_free(s, p);
	CHECK_EQ(uslab_error_count(), before);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(t);
	uslab_set_report_handler(NULL, NULL);
}

/* A write over a freed object (a use after free that would forge a free
 * pointer) changes no allocation: everything handed out is distinct, and
 * nothing is reported. */
static void write_after_free(void)
{
	if (!owned)                          /* sheaves refuse the forged marker, with a report */
		return;
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-uaf", 64, 0, SLAB_NO_MERGE, NULL);
	enum { N = 2048 };
	static char *v[N];
	for (int i = 0; i < N; i++)
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
	char *target = v[N - 1];
	for (int i = 0; i < N; i += 2) {
		kmem_cache_free(s, v[i]);
		/* forge a "free pointer" to another live object in every word */
		for (int w = 0; w < 8; w++)
			((char **)v[i])[w] = target;
	}
	int dup = 0, hit = 0;
	static char *u[N / 2];
	for (int i = 0; i < N / 2; i++) {
		u[i] = kmem_cache_alloc(s, GFP_KERNEL);
		hit += u[i] == target;
		for (int j = 0; j < N; j += 1)
			if (j % 2 && v[j] == u[i])
				dup++;               /* a live object handed out again */
	}
	CHECK_EQ(hit, 0);
	CHECK_EQ(dup, 0);
	CHECK_EQ(reports_all(), 0);
	for (int i = 0; i < N / 2; i++)
		kmem_cache_free(s, u[i]);
	for (int i = 1; i < N; i += 2)
		kmem_cache_free(s, v[i]);
	CHECK_EQ(reports_all(), 0);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

/* Free objects are handed out lowest address first (one CPU, one slab). */
static void address_order(void)
{
	if (!owned)
		return;
	CHECK(pin(0));
	struct kmem_cache *s = kmem_cache_create("owned-order", 256, 0, SLAB_NO_MERGE, NULL);
	enum { N = 64 };
	void *v[N];
	for (int i = 0; i < N; i++)
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
	uint64_t x = 12345;
	for (int i = N - 1; i > 0; i--) {       /* free in a random order */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int j = (int)(x % (uint64_t)(i + 1));
		void *tmp = v[i];
		v[i] = v[j];
		v[j] = tmp;
	}
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, v[i]);
	int rising = 0;
	void *prev = NULL;
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		rising += !prev || (uintptr_t)v[i] > (uintptr_t)prev;
		prev = v[i];
	}
	CHECK_EQ(rising, N);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, v[i]);
	unpin();
	kmem_cache_destroy(s);
}

/* Objects allocated on CPU 0 and freed on CPU 1 come back to CPU 0's
 * allocations: over many rounds the cache keeps the slabs of one round. */
struct rf_arg {
	struct kmem_cache *s;
	void **v;
	int n;
};
static void *free_all_on_1(void *a)
{
	struct rf_arg *r = a;
	pin(1);
	for (int i = 0; i < r->n; i++)
		kmem_cache_free(r->s, r->v[i]);
	return NULL;
}

static void remote_frees_come_back(void)
{
	if (ncpus < 2 || !owned)
		return;
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-remote", 256, 0, SLAB_NO_MERGE, NULL);
	enum { N = 5000 };
	static void *v[N];
	CHECK(pin(0));
	long slabs1 = 0;
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < N; i++)
			v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		if (round == 0)
			slabs1 = attr_long(s, "slabs");
		struct rf_arg r = { s, v, N };
		pthread_t t;
		pthread_create(&t, NULL, free_all_on_1, &r);
		pthread_join(t, NULL);
	}
	long slabs = attr_long(s, "slabs");
	CHECK(slabs1 > 0);
	CHECK(slabs <= slabs1 + 1);
	CHECK_EQ(reports_all(), 0);
	unpin();
	CHECK_EQ(kmem_cache_shrink(s), 0);      /* every slab released */
	CHECK_EQ(attr_long(s, "slabs"), 0);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

/* Bulk: all handed out distinct; a duplicate in a bulk free is reported
 * once and the rest freed. */
static void bulk(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("owned-bulk", 48, 0, SLAB_NO_MERGE, NULL);
	enum { N = 300 };
	void *p[N + 1];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, N, p), N);
	int dup = 0;
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			dup += p[i] == p[j];
	CHECK_EQ(dup, 0);
	p[N] = p[7];
	kmem_cache_free_bulk(s, N + 1, p);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), 0);
	uslab_set_report_handler(NULL, NULL);
}

/* A CPU that stops allocating gives its slabs up at the decay sweeps
 * (USLAB_DECAY_MS is short in this test's environment). */
static void *churn_on_1(void *a)
{
	struct kmem_cache *s = a;
	pin(1);
	enum { N = 60000 };
	void **v = malloc(N * sizeof(void *));
	for (int i = 0; i < N; i++)
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, v[i]);
	free(v);
	return NULL;
}

static void idle_gives_back(void)
{
	if (ncpus < 2 || !owned)
		return;
	struct kmem_cache *s = kmem_cache_create("owned-idle", 128, 0, SLAB_NO_MERGE, NULL);
	pthread_t t;
	pthread_create(&t, NULL, churn_on_1, s);
	pthread_join(t, NULL);
	long before = attr_long(s, "slabs");
	long after = before;
	for (int i = 0; i < 100 && after > 8; i++) {   /* up to 5 s of decay sweeps */
		usleep(50000);
		void *x = kmalloc(64, GFP_KERNEL);       /* ticks the decay clock */
		kfree(x);
		after = attr_long(s, "slabs");
	}
	CHECK(before > 50);
	CHECK(after <= 8);
	kmem_cache_destroy(s);
}

int main(void)
{
	ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	front();
	double_free_here();
	double_free_remote();
	bad_pointers();
	write_after_free();
	address_order();
	remote_frees_come_back();
	bulk();
	idle_gives_back();
	return test_summary();
}
