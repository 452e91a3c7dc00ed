/* test_cache_api.c - every object-cache entry point, including bad input. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "common/common.h"
#include "pages/pages.h"
#include "percpu/percpu.h"
#include "platform/platform.h"
#include "engine/engine.h"
#include "testing.h"

struct conn {
	int magic;
	int refs;
	char buf[200];
};

static unsigned long in_use(struct kmem_cache *s)
{
	usl_cache_flush_all(s);
	return usl_engine_objects_in_use(s);
}

/* Constructor bookkeeping: every address the constructor ran on, and how often. */
#define CTOR_SET 65536
static uintptr_t ctor_addr[CTOR_SET];
static unsigned char ctor_times[CTOR_SET];
static unsigned long ctor_calls;
static unsigned int ctor_slot(uintptr_t a)
{
	unsigned int h = (unsigned int)((a >> 3) * 2654435761u) & (CTOR_SET - 1);
	while (ctor_addr[h] && ctor_addr[h] != a)
		h = (h + 1) & (CTOR_SET - 1);
	return h;
}
static void conn_init(void *p)
{
	struct conn *c = p;
	unsigned int h = ctor_slot((uintptr_t)p);
	ctor_addr[h] = (uintptr_t)p;
	ctor_times[h]++;
	ctor_calls++;
	c->magic = 0x600d;
	c->refs = 0;
}

static void test_basic(void)
{
	struct kmem_cache *s = kmem_cache_create("basic", 100, 0, 0, NULL);
	CHECK(s != NULL);
	CHECK_EQ(kmem_cache_size(s), 100);
	CHECK(strcmp(kmem_cache_name(s), "basic") == 0);
	void *p[1000];
	for (int i = 0; i < 1000; i++) {
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(p[i] != NULL);
		CHECK(((uintptr_t)p[i] & 7) == 0);
		memset(p[i], i & 0xff, 100);
	}
	for (int i = 0; i < 1000; i++)
		for (int j = i + 1; j < i + 3 && j < 1000; j++)
			CHECK(p[i] != p[j]);
	int bad = 0;
	for (int i = 0; i < 1000; i++)
		for (int b = 0; b < 100; b++)
			bad += ((unsigned char *)p[i])[b] != (i & 0xff);
	CHECK_EQ(bad, 0);
	for (int i = 0; i < 1000; i++)
		kmem_cache_free(s, p[i]);
	kmem_cache_free(s, NULL);  /* no-op */
	CHECK_EQ(in_use(s), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(NULL);
}

static void test_zalloc_node_align(void)
{
	struct kmem_cache *s = kmem_cache_create("zal", 64, 0, 0, NULL);
	unsigned char *p = kmem_cache_alloc(s, GFP_KERNEL);
	memset(p, 0xab, 64);
	kmem_cache_free(s, p);
	for (int i = 0; i < 50; i++) {
		unsigned char *z = kmem_cache_zalloc(s, GFP_KERNEL);
		int nz = 0;
		for (int b = 0; b < 64; b++)
			nz += z[b] != 0;
		CHECK_EQ(nz, 0);
		memset(z, 0xcd, 64);
		kmem_cache_free(s, z);
		unsigned char *q = kmem_cache_alloc(s, GFP_KERNEL | __GFP_ZERO);
		nz = 0;
		for (int b = 0; b < 64; b++)
			nz += q[b] != 0;
		CHECK_EQ(nz, 0);
		kmem_cache_free(s, q);
	}
	void *a = kmem_cache_alloc_node(s, GFP_KERNEL, NUMA_NO_NODE);
	void *b = kmem_cache_alloc_node(s, GFP_ATOMIC, 0);
	void *c = kmem_cache_alloc_node(s, GFP_NOWAIT, 7);
	CHECK(a && b && c);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, c);
	kmem_cache_destroy(s);

	unsigned int aligns[] = { 8, 16, 32, 64, 128, 256, 512, 4096 };
	for (unsigned i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		struct kmem_cache *al = kmem_cache_create("aligned", 24, aligns[i], 0, NULL);
		CHECK(al != NULL);
		void *o[40];
		for (int k = 0; k < 40; k++) {
			o[k] = kmem_cache_alloc(al, GFP_KERNEL);
			CHECK(((uintptr_t)o[k] & (aligns[i] - 1)) == 0);
		}
		for (int k = 0; k < 40; k++)
			kmem_cache_free(al, o[k]);
		kmem_cache_destroy(al);
	}
	/* SLAB_HWCACHE_ALIGN: objects larger than half a line start on a line. */
	struct kmem_cache *hw = kmem_cache_create("hw", 40, 0, SLAB_HWCACHE_ALIGN, NULL);
	for (int k = 0; k < 100; k++) {
		void *o = kmem_cache_alloc(hw, GFP_KERNEL);
		CHECK(((uintptr_t)o & 63) == 0);
		kmem_cache_free(hw, o);
	}
	kmem_cache_destroy(hw);
	struct kmem_cache *hw2 = kmem_cache_create("hw2", 20, 0, SLAB_HWCACHE_ALIGN, NULL);
	void *o = kmem_cache_alloc(hw2, GFP_KERNEL);
	CHECK(((uintptr_t)o & 31) == 0);
	kmem_cache_free(hw2, o);
	kmem_cache_destroy(hw2);
}

static void test_ctor(void)
{
	/* One CPU, so objects cached in another CPU's slot cannot force new slabs
	 * (which would rightly run the constructor again). */
	cpu_set_t set, old;
	sched_getaffinity(0, sizeof(old), &old);
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	sched_setaffinity(0, sizeof(set), &set);
	struct kmem_cache *s = kmem_cache_create("conn", sizeof(struct conn), 0, SLAB_HWCACHE_ALIGN, conn_init);
	CHECK(s != NULL);
	enum { N = 5000 };
	static struct conn *objs[N];
	int bad = 0;

	/* Phase 1: all live, so no slab is freed: the constructor ran once on every
	 * object of every slab, and on each object we got. */
	for (int i = 0; i < N; i++) {
		objs[i] = kmem_cache_alloc(s, GFP_KERNEL);
		bad += objs[i]->magic != 0x600d || objs[i]->refs != 0;
		unsigned int h = ctor_slot((uintptr_t)objs[i]);
		bad += ctor_addr[h] != (uintptr_t)objs[i] || ctor_times[h] != 1;
		objs[i]->refs = 1;
		memset(objs[i]->buf, 0x77, sizeof(objs[i]->buf));
	}
	CHECK_EQ(bad, 0);
	struct usl_state_counts st;
	usl_slub_state_counts(s, &st);
	CHECK_EQ(ctor_calls, st.total * s->objects);
	int twice = 0;
	for (unsigned int h = 0; h < CTOR_SET; h++)
		twice += ctor_times[h] > 1;
	CHECK_EQ(twice, 0);

	/* Phase 2: free every other object (back in constructed state) and allocate
	 * as many again. Phase 1 filled the slabs in order, so every slab keeps half
	 * its objects live: none empties, no constructor runs, and every object comes
	 * back constructed. */
	unsigned long before = ctor_calls;
	for (int i = 0; i < N; i += 2) {
		objs[i]->refs = 0;
		kmem_cache_free(s, objs[i]);
	}
	for (int i = 0; i < N; i += 2) {
		objs[i] = kmem_cache_alloc(s, GFP_KERNEL);
		bad += objs[i]->magic != 0x600d || objs[i]->refs != 0;
		objs[i]->refs = 1;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ctor_calls, before);
	for (int i = 0; i < N; i++) {
		objs[i]->refs = 0;
		kmem_cache_free(s, objs[i]);
	}
	kmem_cache_destroy(s);
	sched_setaffinity(0, sizeof(old), &old);
}

static void test_shrink_returns_memory(void)
{
	struct kmem_cache *s = kmem_cache_create("shrinkme", 512, 0, 0, NULL);
	enum { N = 40000 };
	static void *objs[N];
	for (int i = 0; i < N; i++) {
		objs[i] = kmem_cache_alloc(s, GFP_KERNEL);
		memset(objs[i], 1, 512);
	}
	struct usl_state_counts st;
	usl_slub_state_counts(s, &st);
	CHECK(st.total * s->objects >= N);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, objs[i]);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
	size_t dirty;
	usl_pages_stats(NULL, &dirty, NULL);
	CHECK_EQ(dirty, 0);
	kmem_cache_destroy(s);
}

static void test_destroy_with_objects(void)
{
	capture_reports();
	/* Not merged: an alias's destroy only drops its name (kmalloc-64 may
	 * exist by now: the first malloc, of stdio or a thread, makes it). */
	struct kmem_cache *s = kmem_cache_create("leaky", 64, 0, SLAB_NO_MERGE, NULL);
	void *a = kmem_cache_alloc(s, GFP_KERNEL);
	void *b = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), 1);
	CHECK(strstr(last_report, "leaky") != NULL);
	CHECK(strstr(last_report, "Objects remaining: 2") != NULL);
	/* The cache is still alive and usable. */
	void *c = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(c != NULL);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, c);
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), 1);
	uslab_set_report_handler(NULL, NULL);
}

static void test_bad_frees(void)
{
	capture_reports();
	/* Distinct caches, run by hand too; the kernel's order (a freed object
	 * is the next one handed out), which the checks below count on. */
	struct kmem_cache *s = kmem_cache_create("mine", 48, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	struct kmem_cache *t = kmem_cache_create("theirs", 48, 0, SLAB_NO_MERGE, NULL);
	char *a = kmem_cache_alloc(s, GFP_KERNEL);
	char *b = kmem_cache_alloc(t, GFP_KERNEL);
	int on_stack;

	kmem_cache_free(s, b);                   /* wrong cache */
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), 1);
	CHECK(strstr(last_report, "mine") && strstr(last_report, "theirs"));
	kmem_cache_free(s, &on_stack);           /* foreign */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), 1);
	kmem_cache_free(s, a + 1);               /* misaligned inside a slab */
	kmem_cache_free(s, a + 47);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), 2);
	kmem_cache_free(NULL, a);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 1);

	/* None of them were freed: a and b are still ours, and no object is handed
	 * out twice. */
	void *more[200];
	for (int i = 0; i < 200; i++) {
		more[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(more[i] != a && more[i] != b && more[i] != a + 1);
	}
	for (int i = 0; i < 200; i++)
		kmem_cache_free(s, more[i]);

	/* Double free of the object at the head of the freelist. */
	kmem_cache_free(s, a);
	kmem_cache_free(s, a);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	/* a was freed once: it comes back exactly once. */
	int seen = 0;
	for (int i = 0; i < 200; i++) {
		more[i] = kmem_cache_alloc(s, GFP_KERNEL);
		seen += more[i] == a;
	}
	CHECK_EQ(seen, 1);
	for (int i = 0; i < 200; i++)
		kmem_cache_free(s, more[i]);
	kmem_cache_free(t, b);
	CHECK_EQ(in_use(s), 0);
	CHECK_EQ(in_use(t), 0);
	kmem_cache_destroy(s);
	kmem_cache_destroy(t);
	/* A freed slab's memory is no longer a slab. */
	capture_reports();
	struct kmem_cache *u = kmem_cache_create("gone", 48, 0, 0, NULL);
	char *g = kmem_cache_alloc(u, GFP_KERNEL);
	kmem_cache_free(u, g);
	kmem_cache_shrink(u);
	kmem_cache_free(u, g);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), 1);
	kmem_cache_destroy(u);
	CHECK(kmem_cache_alloc(NULL, GFP_KERNEL) == NULL);
	CHECK(kmem_cache_shrink(NULL) < 0);
	uslab_set_report_handler(NULL, NULL);
}

static void test_bad_create(void)
{
	capture_reports();
	CHECK(kmem_cache_create("zero", 0, 0, 0, NULL) == NULL);
	CHECK(kmem_cache_create("huge", 0x7fffffff, 0, 0, NULL) == NULL);
	CHECK(kmem_cache_create("huge2", ~0u, 0, 0, NULL) == NULL);
	CHECK(kmem_cache_create("align3", 64, 3, 0, NULL) == NULL);
	CHECK(kmem_cache_create("align48", 64, 48, 0, NULL) == NULL);
	CHECK(kmem_cache_create("alignbig", 64, 1u << 30, 0, NULL) == NULL);
	CHECK(kmem_cache_create(NULL, 64, 0, 0, NULL) == NULL);
	CHECK(kmem_cache_create("flags", 64, 0, 0x80000000u, NULL) == NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), 8);
	CHECK(strstr(last_report, "flags") != NULL);
	/* Largest legal object still works. */
	struct kmem_cache *big = kmem_cache_create("big", 1u << 20, 0, 0, NULL);
	CHECK(big != NULL);
	void *p = kmem_cache_alloc(big, GFP_KERNEL);
	CHECK(p != NULL);
	memset(p, 1, 1u << 20);
	kmem_cache_free(big, p);
	kmem_cache_destroy(big);
	uslab_set_report_handler(NULL, NULL);

	/* SLAB_PANIC aborts. */
	pid_t pid = fork();
	if (pid == 0) {
		close(2);
		kmem_cache_create("panic", 0, 0, SLAB_PANIC, NULL);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_nomem(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("nomem", 1024, 0, 0, NULL);
	void *held[4096];
	int n = 0;
	usl_pages_fail_after(0);
	for (; n < 4096; n++) {
		held[n] = kmem_cache_alloc(s, GFP_KERNEL);
		if (!held[n])
			break;
	}
	CHECK(n < 4096);
	CHECK(reports(USLAB_ERR_NOMEM) == 1);
	CHECK(kmem_cache_alloc(s, GFP_KERNEL | __GFP_NOWARN) == NULL);
	CHECK(reports(USLAB_ERR_NOMEM) == 1);
	usl_pages_fail_after(-1);
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(p != NULL);
	kmem_cache_free(s, p);
	for (int i = 0; i < n; i++)
		kmem_cache_free(s, held[i]);
	kmem_cache_destroy(s);
	uslab_set_report_handler(NULL, NULL);
}

/* Constructors that allocate: from their own cache, and from each other's. */
static struct kmem_cache *re_a, *re_b;
static __thread int re_depth;
static unsigned long re_calls;
static void re_ctor_a(void *p)
{
	(void)p;
	re_calls++;
	if (re_depth++ == 0) {
		void *q = kmem_cache_alloc(re_a, GFP_KERNEL);
		void *r = kmem_cache_alloc(re_b, GFP_KERNEL);
		kmem_cache_free(re_a, q);
		kmem_cache_free(re_b, r);
	}
	re_depth--;
}

static void test_reentrant_ctor(void)
{
	alarm(20);   /* a deadlock fails the test */
	re_a = kmem_cache_create("re-a", 64, 0, 0, re_ctor_a);
	re_b = kmem_cache_create("re-b", 128, 0, 0, re_ctor_a);
	void *objs[2000];
	for (int i = 0; i < 2000; i++)
		objs[i] = kmem_cache_alloc(i & 1 ? re_b : re_a, GFP_KERNEL);
	for (int i = 0; i < 2000; i++)
		kmem_cache_free(i & 1 ? re_b : re_a, objs[i]);
	CHECK(re_calls >= 2000);
	CHECK_EQ(in_use(re_a), 0);
	CHECK_EQ(in_use(re_b), 0);
	kmem_cache_destroy(re_a);
	kmem_cache_destroy(re_b);
	alarm(0);
}

/* A double free that is not at the freelist head, into a slab with nothing else
 * in use, must not wrap the slab's counters. */
static void test_double_free_not_head(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("dfree", 64, 0, 0, NULL);
	unsigned int n = s->objects;
	void **o = malloc((n + 1) * sizeof(*o));   /* the owned front's slabs hold 1024 */
	CHECK(o != NULL);
	if (!o)
		return;
	for (unsigned int i = 0; i < n + 1; i++)   /* one full slab, one more in a new cpu slab */
		o[i] = kmem_cache_alloc(s, GFP_KERNEL);
	struct slab *full = usl_virt_to_slab(o[0]);
	for (unsigned int i = 0; i < n; i++)
		kmem_cache_free(s, o[i]);               /* the full slab empties */
	if (s->oslots) {
		/* Owned: a bitmap slab, no struct slab counters; the double free is
		 * seen at the free itself and changes nothing. */
		kmem_cache_free(s, o[1]);
		CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
	} else if (full->slab_cache == s && usl_counters_inuse(full->counters) == 0) {
		kmem_cache_free(s, o[1]);           /* not the head: o[n-1] is */
		CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), 1);
		CHECK_EQ(usl_counters_inuse(full->counters), 0);
		CHECK_EQ(usl_counters_objects(full->counters), n);
		CHECK(!usl_counters_frozen(full->counters));
	}
	kmem_cache_free(s, o[n]);
	CHECK_EQ(in_use(s), 0);
	kmem_cache_destroy(s);
	free(o);
	uslab_set_report_handler(NULL, NULL);
}

/* A double free on the cpu freelist that is not at its head makes the chain
 * loop (x -> y -> x); flushing the cpu slab must report it and go on, not walk
 * the loop for ever. */
static struct kmem_cache *loop_cache;
static unsigned long handler_allocs;
/* A report handler that calls uslab, as header promises it may: the report of
 * the loop comes while the flusher has finished with every slot. */
static void allocating_handler(enum uslab_error kind, const char *line, void *arg)
{
	capture_fn(kind, line, arg);
	void *o = kmem_cache_alloc(loop_cache, GFP_KERNEL), *k = kmalloc(100, GFP_KERNEL);
	if (o && k)
		handler_allocs++;
	kmem_cache_free(loop_cache, o);
	kfree(k);
}

static void test_double_free_loop(void)
{
	capture_reports();
	uslab_set_report_handler(allocating_handler, NULL);
	int saved = usl_opt.sheaves;
	usl_opt.sheaves = 0;                         /* the cpu freelist is the fast path */
	struct kmem_cache *s = kmem_cache_create("dfloop", 64, 0, SLAB_NO_MERGE, NULL);
	usl_opt.sheaves = saved;
	if (s && usl_is_slab(s)) {                   /* SLAB's per-CPU arrays are always there */
		kmem_cache_destroy(s);
		uslab_set_report_handler(NULL, NULL);
		return;
	}
	CHECK(s && s->sheaf_capacity == 0);
	loop_cache = s;
	alarm(20);                                   /* a hang fails the test */
	void *x = kmem_cache_alloc(s, GFP_KERNEL), *y = kmem_cache_alloc(s, GFP_KERNEL);
	void *keep = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(usl_virt_to_slab(x) == usl_virt_to_slab(y));
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free(s, x);
	kmem_cache_free(s, y);
	kmem_cache_free(s, x);                       /* not the head (y is): its free marker (USLAB_HARDEN,
	                                                on by default) sees it; without, the flush does */
	kmem_cache_shrink(s);                        /* unfreezes the cpu slab */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
	CHECK(handler_allocs >= 1);
	/* The cache still works, and a kept object frees cleanly. */
	void *z = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(z && z != keep);
	kmem_cache_free(s, z);
	kmem_cache_free(s, keep);
	alarm(0);
	/* Not destroyed: the abandoned slab's objects count as in use, and
	 * destroy would keep the cache with a leak report. */
	uslab_set_report_handler(NULL, NULL);
}

/* The page map names a slab's cache by id: ids are unique among live caches,
 * the lowest free one is given (so a destroyed cache's id is reused), every
 * page of a slab carries it, and a free into the wrong cache is still seen. */
static void test_cache_ids(void)
{
	capture_reports();
	/* The first debug cache loads the debug reports' libraries (dlopen),
	 * whose allocations may make malloc classes, each taking an id: done
	 * first, so that "ids-c" below finds a's id the lowest free one. */
	kmem_cache_destroy(kmem_cache_create("ids-warm", 64, 0, SLAB_NO_MERGE | SLAB_POISON, NULL));
	struct kmem_cache *a = kmem_cache_create("ids-a", 200, 0, SLAB_NO_MERGE, NULL);
	struct kmem_cache *b = kmem_cache_create("ids-b", 3000, 0, SLAB_NO_MERGE, NULL);
	CHECK(a && b && a->id && b->id && a->id != b->id);
	CHECK(usl_caches[a->id] == a && usl_caches[b->id] == b && usl_caches[0] == NULL);
	/* Slots by id: where the fast paths look for them, not overlapping, and
	 * the divisor free's check reads. */
	CHECK(a->cpu_slab == usl_id_slots(a->id) && b->cpu_slab == usl_id_slots(b->id));
	/* Not overlapping, and no two CPUs' slots (of any caches) in one 128-byte
	 * pair: Intel's L2 prefetches lines in pairs, so a pair shared by two
	 * CPUs' slots moves between them on every fast path. */
	struct kmem_cache *ab[2] = { a, b };
	for (int x = 0; x < 2; x++)
		for (int y = 0; y < 2; y++)
			for (unsigned int i = 0; i < usl_nr_cpus; i++)
				for (unsigned int j = 0; j < usl_nr_cpus; j++)
					if (x != y || i != j)   /* two different slots */
						CHECK((uintptr_t)&ab[x]->cpu_slab[i] / 128 !=
						      (uintptr_t)&ab[y]->cpu_slab[j] / 128);
	CHECK_EQ(usl_free_entries[b->id].div, b->div_inv | (uint64_t)b->div_shift << 32);
	CHECK_EQ(usl_free_entries[0].div, 0);
	void *ax[40];                                /* leave state in a's slots */
	for (int i = 0; i < 40; i++)
		ax[i] = kmem_cache_alloc(a, GFP_KERNEL);
	for (int i = 0; i < 40; i += 2)
		kmem_cache_free(a, ax[i]);
	void *x = kmem_cache_alloc(b, GFP_KERNEL);
	struct slab *sl = usl_virt_to_slab(x);
	size_t pfn = ((uintptr_t)sl->addr - usl_base) >> USL_PAGE_SHIFT;
	CHECK(b->order > 0);
	for (size_t i = 0; i < ((size_t)1 << b->order); i++) {
		struct usl_pagemap_entry e = usl_pm_read(&usl_pagemap[pfn + i]);
		CHECK_EQ(e.cache, b->id);
		/* The objects carved so far (never handed out ones beyond). */
		unsigned long c = __atomic_load_n(&sl->counters, __ATOMIC_RELAXED);
		CHECK_EQ(USL_PM_OBJECTS(e), usl_counters_objects(c) - usl_counters_uncarved(c));
		CHECK(!(e.objects & USL_PM_INTERNAL));
	}
	unsigned long wc = reports(USLAB_ERR_WRONG_CACHE);
	kmem_cache_free(a, x);                       /* wrong cache: reported, not freed */
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), wc + 1);
	kmem_cache_free(b, x);
	unsigned int aid = a->id;
	for (int i = 1; i < 40; i += 2)
		kmem_cache_free(a, ax[i]);
	kmem_cache_destroy(a);
	CHECK(usl_caches[aid] == NULL && usl_free_entries[aid].div == 0);
	/* The id's next cache starts with clean slots: no sheaf, no count, no
	 * cpu slab left from the old one. A cache without sheaves (a debug one)
	 * has the empty sheaf as main too, so free's fast path fails on it. */
	struct kmem_cache *c = kmem_cache_create("ids-c", 64, 0, SLAB_NO_MERGE | SLAB_POISON, NULL);
	CHECK(c && c->id == aid && usl_caches[aid] == c && c->sheaf_capacity == 0);
	for (unsigned int i = 0; i < usl_nr_cpus; i++) {
		struct kmem_cache_cpu *sc = &c->cpu_slab[i];
		CHECK(sc->main == &usl_empty_sheaf && sc->main_size == 0 && sc->spare == NULL);
		CHECK(sc->slab == NULL && sc->freelist == NULL && sc->partial == NULL);
	}
	void *y = kmem_cache_alloc(c, GFP_KERNEL);
	unsigned long nr = reports_all();
	kfree(y);                                    /* through kfree_slow: freed, no report */
	CHECK_EQ(reports_all(), nr);
	void *y2 = kmem_cache_alloc(c, GFP_KERNEL);  /* the cpu freelist is LIFO */
	CHECK(y2 == y);
	kmem_cache_free(c, y2);
	kmem_cache_destroy(b);
	kmem_cache_destroy(c);
	uslab_set_report_handler(NULL, NULL);
}

/* Every cache id in use (65535 live caches): the next kmem_cache_create is
 * refused with a report naming the limit, the caches keep working, and a
 * destroyed cache's id serves the next one. */
static void test_all_ids(void)
{
	enum { CAP = 1 << 16 };
	struct kmem_cache **v = calloc(CAP, sizeof(*v));
	size_t n = 0;

	CHECK(v != NULL);
	capture_reports();
	unsigned long ba = reports(USLAB_ERR_BAD_ARG);
	while (v && n < CAP) {
		char name[32];
		snprintf(name, sizeof(name), "id-%zu", n);
		struct kmem_cache *s = kmem_cache_create(name, 32, 0, SLAB_NO_MERGE, NULL);
		if (!s)
			break;
		v[n++] = s;
	}
	CHECK(n < CAP);                              /* refused before the 65536th id */
	CHECK(n > 60000);                            /* less the caches that existed */
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 1);
	CHECK(strstr(last_report, "no cache id left") != NULL);
	void *x = kmem_cache_alloc(v[n - 1], GFP_KERNEL);
	CHECK(x != NULL);
	kmem_cache_free(v[n - 1], x);
	unsigned int id = v[n / 2]->id;
	kmem_cache_destroy(v[n / 2]);
	v[n / 2] = kmem_cache_create("id-again", 32, 0, SLAB_NO_MERGE, NULL);
	CHECK(v[n / 2] != NULL && v[n / 2]->id == id);
	for (size_t i = 0; i < n; i++)
		kmem_cache_destroy(v[i]);
	CHECK(kmem_cache_create("id-after", 32, 0, SLAB_NO_MERGE, NULL) != NULL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 1);
	uslab_set_report_handler(NULL, NULL);
	free(v);
}

/* Usage: test_cache_api [expected per-CPU mode] [ids] */
/* Cache structures are packed: sixty caches made one after another put their
 * structures in at most two slabs of the "kmem_cache" cache (a slab every 14
 * caches spread them over the heap). */
static void test_structures_packed(void)
{
	enum { N = 60 };
	struct kmem_cache *c[N];
	struct slab *heads[N];
	int distinct = 0;
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "packed-%d", i);
		c[i] = kmem_cache_create(name, 40 + 8 * (unsigned int)i, 0, SLAB_NO_MERGE, NULL);
		CHECK(c[i] != NULL);
		struct slab *h = usl_virt_to_slab(c[i]);
		CHECK(h != NULL && h->kind == USL_PAGE_SLAB);
		bool seen = false;
		for (int j = 0; j < distinct; j++)
			seen |= heads[j] == h;
		if (!seen)
			heads[distinct++] = h;
	}
	/* As many slabs as the structures fill (bigger with more nodes: a node
	 * structure each), and one the first may have shared with older ones. */
	unsigned int per = usl_virt_to_slab(c[0])->slab_cache->objects;
	CHECK(distinct <= (int)((N + per - 1) / per) + 1);
	for (int i = 0; i < N; i++)
		kmem_cache_destroy(c[i]);
}

int main(int argc, char **argv)
{
	printf("per-CPU mode: %s\n", uslab_percpu_mode());
	if (argc > 1)
		CHECK(strcmp(uslab_percpu_mode(), argv[1]) == 0);
	if (argc > 2 && !strcmp(argv[2], "ids")) {   /* its own test: 65535 caches */
		test_all_ids();
		return test_summary();
	}
	test_basic();
	test_zalloc_node_align();
	test_ctor();
	test_shrink_returns_memory();
	test_destroy_with_objects();
	test_bad_frees();
	test_bad_create();
	test_nomem();
	test_reentrant_ctor();
	test_double_free_not_head();
	test_double_free_loop();
	test_cache_ids();
	test_structures_packed();
	return test_summary();
}
