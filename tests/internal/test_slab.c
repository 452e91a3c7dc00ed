/* test_slab.c - SLAB's own parts (USLAB_ALLOCATOR=slab): which caches run on
 * it, the slab lists step by step, the three places of the free-index array
 * and its two widths, colour (in range, rotating, wrapping, with growers
 * racing, and under the node lock), the per-CPU arrays' refill and flush
 * batches with and without a shared array, free_block's free_limit, the reap
 * down to nothing, tunables changed under load and refused when bad, and
 * alien frees with a fake second node (USLAB_SLAB_NODES=2; skipped with one
 * node or one CPU). */
#define _GNU_SOURCE
#include <pthread.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "../harness.h"
#include "common/common.h"
#include "engine/engine.h"
#include "pages/pages.h"
#include "percpu/percpu.h"
#include "platform/platform.h"

/* Objects taken from the engine given straight back to it, as a freed object
 * reaches it: with its free marker (a two-word cache's slab takes only
 * those; types.h, usl_two_word). */
static void give_bulk(struct kmem_cache *s, size_t n, void **p)
{
	if (usl_opt.harden)
		for (size_t i = 0; i < n; i++)
			usl_marker_set(s, p[i]);
	usl_slab_free_bulk(s, n, p);
}

static void give_one(struct kmem_cache *s, void *x)
{
	give_bulk(s, 1, &x);
}

static struct kmem_cache *make_flags(const char *name, unsigned int size, void (*ctor)(void *), slab_flags_t flags)
{
	struct kmem_cache *s = kmem_cache_create(name, size, 0, SLAB_NO_MERGE | flags, ctor);
	CHECK(s != NULL);
	CHECK(s && usl_is_slab(s));
	return s;
}

static struct kmem_cache *make(const char *name, unsigned int size, void (*ctor)(void *))
{
	return make_flags(name, size, ctor, 0);
}

static void ctor_fill(void *p) { memset(p, 0x5c, 512); }

static unsigned long in_arrays(struct kmem_cache *s)
{
	unsigned long n = 0;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		n += s->cpu_slab[i].main_size;
	return n;
}

static void test_engines(void)
{
	CHECK(strcmp(uslab_allocator(), "slab") == 0);
	struct kmem_cache *s = make("slab-user", 100, NULL);
	struct kmem_cache *d = kmem_cache_create("slab-debug", 100, 0, SLAB_RED_ZONE | SLAB_NO_MERGE, NULL);
	CHECK(d && !usl_is_slab(d));         /* debug caches stay on SLUB's checked paths */
	void *k = kmalloc(64, GFP_KERNEL);
	struct kmem_cache *kc = usl_caches[usl_pm_read(&usl_pagemap[((uintptr_t)k - usl_base) >> USL_PAGE_SHIFT]).cache];
	CHECK(kc && usl_is_slab(kc));        /* kmalloc classes too */
	CHECK(kc && kc->sheaf_cache && !usl_is_slab(kc->sheaf_cache));   /* uslab's own: SLUB */
	kfree(k);
	kmem_cache_destroy(d);
	kmem_cache_destroy(s);
}

/* The lists by hand: objects taken and given straight to the engine. */
static void test_lists(void)
{
	struct kmem_cache *s = make("slab-lists", 256, NULL);
	unsigned int num = s->objects;
	void **p = calloc(num * 3, sizeof(void *));
	struct usl_slab_counts c;

	CHECK_EQ(usl_slab_alloc_bulk(s, GFP_KERNEL, num, p), num);
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.total_slabs, 1);
	CHECK_EQ(c.full_slabs, 1);
	CHECK_EQ(c.free_objects, 0);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	give_bulk(s, num / 2, p);                 /* full -> partial */
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.full_slabs, 0);
	CHECK_EQ(c.partial_slabs, 1);
	CHECK_EQ(c.free_objects, num / 2);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	give_bulk(s, num - num / 2, p + num / 2); /* partial -> free */
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.partial_slabs, 0);
	CHECK_EQ(c.free_slabs, 1);
	CHECK_EQ(c.free_objects, num);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	/* The free slab serves the next refill before any growth. */
	CHECK_EQ(usl_slab_refill(s, p, 3, GFP_KERNEL), 3);
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.total_slabs, 1);
	CHECK_EQ(c.partial_slabs, 1);
	give_bulk(s, 3, p);
	/* Three slabs' worth, freed in a mixed order: every slab back to free,
	 * each object handed out once. */
	CHECK_EQ(usl_slab_alloc_bulk(s, GFP_KERNEL, num * 3, p), num * 3);
	int dup = 0;
	for (unsigned int i = 0; i < num * 3; i++)
		for (unsigned int j = i + 1; j < num * 3; j++)
			dup += p[i] == p[j];
	CHECK_EQ(dup, 0);
	for (unsigned int i = 0; i < num * 3; i += 2)
		give_one(s, p[i]);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	for (unsigned int i = 1; i < num * 3; i += 2)
		give_one(s, p[i]);
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.full_slabs + c.partial_slabs, 0);
	CHECK_EQ(usl_slab_objects_in_use(s), 0);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	CHECK(!usl_slab_release(s));
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.total_slabs, 0);
	free(p);
	kmem_cache_destroy(s);
}

/* Bad frees on SLAB: an object never handed out (past the high-water mark
 * the page map counts), one freed twice while on its slab, and one written
 * after its free: each reported, nothing handed out twice. */
static unsigned long expected_errors;

static void test_bad_frees(void)
{
	unsigned long errors0 = uslab_error_count();
	struct kmem_cache *s = make("slab-bad", 128, NULL);
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE), corrupt = reports(USLAB_ERR_CORRUPT);
	char *a = kmem_cache_alloc(s, GFP_KERNEL);
	char *b = kmem_cache_alloc(s, GFP_KERNEL);
	/* The array was refilled with a batch: objects after them were taken
	 * from the slab; the slab's last one never was. */
	struct slab *slab = usl_virt_to_slab(a);
	char *never = (char *)slab->unused + (size_t)(s->objects - 1) * s->size;
	if (!s->random) {
		kmem_cache_free(s, never);
		CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 1);
	}
	kmem_cache_free(s, a);
	usl_cache_flush_all(s);                      /* a is back on its slab */
	if (usl_opt.harden)                          /* its marker: without, only a sheaf's top is seen */
		kmem_cache_free(s, a);               /* again: refused when its copy leaves the sheaf (below) */
	memset(a, 0x41, 128);                        /* written after its free */
	void *got[64];
	for (int i = 0; i < 64; i++)
		got[i] = kmem_cache_alloc(s, GFP_KERNEL);
	int dup = 0;
	for (int i = 0; i < 64; i++)
		for (int j = i + 1; j < 64; j++)
			dup += got[i] == got[j] || got[i] == b;
	CHECK_EQ(dup, 0);
	if (usl_opt.harden) {
		CHECK(reports(USLAB_ERR_DOUBLE_FREE) >= before + 1 + !s->random);
		CHECK(reports(USLAB_ERR_CORRUPT) > corrupt);
	}
	for (int i = 0; i < 64; i++)
		kmem_cache_free(s, got[i]);
	kmem_cache_free(s, b);
	usl_cache_flush_all(s);
	/* A two-word cache keeps a, written after its free, out of use: its
	 * marker cannot tell a write from a second copy handed out. */
	CHECK_EQ(usl_slab_objects_in_use(s), usl_flagged(s) ? 1 : 0);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	kmem_cache_destroy(s);
	expected_errors += uslab_error_count() - errors0;
}

/* Every object of a few slabs written, freed in a scrambled order, taken
 * again: all distinct, inside their slabs, none overlapping the index array. */
static void exercise(struct kmem_cache *s, unsigned int expect_place, bool idx2)
{
	CHECK_EQ(s->mgmt & USL_MGMT_PLACE, expect_place);   /* the kernel's choice */
	CHECK_EQ(!!(s->mgmt & USL_MGMT_IDX2), idx2);
	unsigned int n = s->objects * 3;
	void **p = calloc(n, sizeof(void *));
	for (int round = 0; round < 3; round++) {
		CHECK_EQ(usl_slab_alloc_bulk(s, GFP_KERNEL, n, p), n);
		int bad = 0;
		for (unsigned int i = 0; i < n; i++) {
			struct slab *slab = usl_virt_to_slab(p[i]);
			char *first = slab->unused, *end = (char *)usl_slab_address(slab) + usl_order_bytes(slab->order);
			bad += (char *)p[i] < first || (char *)p[i] + s->size > end;
			if ((s->mgmt & USL_MGMT_PLACE) == USL_MGMT_ON)
				bad += (char *)p[i] + s->size > end - s->freelist_size;
			memset(p[i], (int)(i & 0xff), s->object_size);
		}
		CHECK_EQ(bad, 0);
		for (unsigned int i = 0; i < n; i++)
			bad += !all_bytes(p[i], (int)(i & 0xff), s->object_size);
		CHECK_EQ(bad, 0);                    /* no object overlaps another */
		for (unsigned int i = 0; i < n; i++) {   /* a scrambled order: stride 7 */
			unsigned int j = (i * 7 + (unsigned int)round) % n;
			if (p[j]) {
				give_one(s, p[j]);
				p[j] = NULL;
			}
		}
		for (unsigned int i = 0; i < n; i++)
			if (p[i])
				give_one(s, p[i]);
		CHECK_EQ(usl_slab_check_lists(s), 0);
		CHECK_EQ(usl_slab_objects_in_use(s), 0);
	}
	free(p);
}

static void test_placements(void)
{
	/* 8 indices fit in an object; hardened, never there: off the slab
	 * (no spare bytes, and an array of 8 is far below half an object). */
	struct kmem_cache *obj = make("slab-objfreelist", 512, NULL);
	exercise(obj, usl_opt.harden ? USL_MGMT_OFF : USL_MGMT_OBJ, false);
	struct kmem_cache *on = make("slab-onslab", 32, NULL);          /* 124 indices do not */
	exercise(on, USL_MGMT_ON, false);
	/* A constructor: not in an object; no spare bytes (stride 1024): off. */
	struct kmem_cache *off = make("slab-offslab", 1016, ctor_fill);
	/* A constructed object keeps its constructed state through free and reuse. */
	void *x = kmem_cache_alloc(off, GFP_KERNEL);
	CHECK(x && all_bytes(x, 0x5c, 512));
	kmem_cache_free(off, x);
	x = kmem_cache_alloc(off, GFP_KERNEL);
	CHECK(x && all_bytes(x, 0x5c, 512));
	kmem_cache_free(off, x);
	usl_cache_flush_all(off);
	exercise(off, USL_MGMT_OFF, false);
	CHECK(off->freelist_cache && !usl_is_slab(off->freelist_cache));
	struct kmem_cache *wide = make("slab-idx2", 8, NULL);           /* more than 256 a slab */
	CHECK(wide->objects > 256);
	exercise(wide, USL_MGMT_ON, true);
	kmem_cache_destroy(obj);
	kmem_cache_destroy(on);
	kmem_cache_destroy(off);
	kmem_cache_destroy(wide);
}

/* ---- colour ---- */
static struct kmem_cache *colour_cache;
static _Atomic unsigned long colour_bad, colour_seen;

static unsigned int colour_of(struct kmem_cache *s, void *obj, bool *ok)
{
	struct slab *slab = usl_virt_to_slab(obj);
	size_t off = (size_t)((char *)slab->unused - (char *)usl_slab_address(slab));
	size_t used = off + (size_t)s->objects * s->size;
	if ((s->mgmt & USL_MGMT_PLACE) == USL_MGMT_ON)
		used += s->freelist_size;
	*ok = off % s->colour_off == 0 && off / s->colour_off < s->colour && used <= usl_order_bytes(slab->order);
	return (unsigned int)(off / s->colour_off);
}

static void *grower(void *arg)
{
	struct kmem_cache *s = colour_cache;
	unsigned int num = s->objects;
	void **p = calloc(num, sizeof(void *));
	(void)arg;
	for (int i = 0; i < 300; i++) {
		unsigned int got = usl_slab_refill(s, p, num, GFP_KERNEL);   /* a whole new slab, mostly */
		for (unsigned int k = 0; k < got; k++) {
			bool ok;
			colour_of(s, p[k], &ok);
			colour_bad += !ok;
		}
		colour_seen += got;
		give_bulk(s, got, p);
		usl_slab_release(s);
	}
	free(p);
	return NULL;
}

static void test_colour(void)
{
	struct kmem_cache *s = make("slab-colour", 1100, NULL);
	CHECK(s->colour >= 2);
	CHECK_EQ(s->colour_off, 64);
	/* One grower: each new slab takes the next colour, wrapping (pinned: the
	 * colour is per node, and with USLAB_NODES=2 a thread moved to the other
	 * node's CPU would grow there). */
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	unsigned int num = s->objects, prev = ~0u, wraps = 0;
	void **p = calloc((size_t)num * (s->colour * 2 + 2), sizeof(void *));
	for (unsigned int i = 0; i < s->colour * 2 + 2; i++) {
		CHECK_EQ(usl_slab_refill(s, p + (size_t)i * num, num, GFP_KERNEL), num);
		bool ok;
		unsigned int c = colour_of(s, p[(size_t)i * num], &ok);
		CHECK(ok);
		if (prev != ~0u)
			CHECK_EQ(c, prev + 1 == s->colour ? 0 : prev + 1);
		wraps += c == 0;
		prev = c;
	}
	CHECK(wraps >= 2);
	if (pinned)
		unpin_cpu(&was);
	give_bulk(s, (size_t)num * (s->colour * 2 + 2), p);
	free(p);
	/* Growers racing on the colour without the lock (and then with it):
	 * never an offset outside the slab's spare bytes. */
	colour_cache = s;
	for (int locked = 0; locked < 2; locked++) {
		usl_opt.slab_colour = locked ? 2 : 1;
		colour_bad = colour_seen = 0;
		pthread_t t[6];
		for (int i = 0; i < 6; i++)
			pthread_create(&t[i], NULL, grower, NULL);
		for (int i = 0; i < 6; i++)
			pthread_join(t[i], NULL);
		CHECK_EQ(colour_bad, 0);
		CHECK(colour_seen > 0);
	}
	usl_opt.slab_colour = 1;
	CHECK_EQ(usl_slab_check_lists(s), 0);
	kmem_cache_destroy(s);
	/* No spare bytes: one colour, offset 0. */
	struct kmem_cache *z = make("slab-nocolour", 256, NULL);
	CHECK(z->colour <= 1);
	kmem_cache_destroy(z);
}

/* ---- the per-CPU arrays ---- */
static void test_batches(void)
{
	struct kmem_cache *s = make_flags("slab-batch", 128, NULL, SLAB_ORDERED);   /* (rising order below) */
	struct usl_slab_counts c;
	CHECK_EQ(usl_cache_tune(s, 10, 4, 0), 0);
	CHECK_EQ(s->limit, 10);
	CHECK_EQ(s->batchcount, 4);
	CHECK_EQ(s->shared, 0);
	CHECK_EQ(s->sheaf_capacity, 10);
	/* An allocation refills batchcount: one handed out, three stay. They
	 * come out in the order the fresh slab gave them, rising addresses (on
	 * one CPU: one array serves them all). */
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	void *a = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(in_arrays(s), 3);
	void *p[32];
	for (int i = 0; i < 3; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(in_arrays(s), 0);
	CHECK((uintptr_t)a < (uintptr_t)p[0] && (uintptr_t)p[0] < (uintptr_t)p[1] && (uintptr_t)p[1] < (uintptr_t)p[2]);
	/* Still pinned: with two nodes (USLAB_NODES=2) a thread moved to the
	 * other node's CPU would free these objects to alien arrays. */
	p[3] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK_EQ(in_arrays(s), 3);
	for (int i = 4; i < 16; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	/* Frees fill the array to its limit; one more flushes batchcount (no
	 * shared array: to the slabs). */
	for (int i = 0; i < 16; i++)
		kmem_cache_free(s, p[i]);
	unsigned long held = in_arrays(s);
	CHECK(held <= 10 && held >= 10 - 4 + 1);
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.shared_avail, 0);
	CHECK_EQ(c.total_objects - c.free_objects - held - c.alien_avail, 1);   /* a */
	if (pinned)
		unpin_cpu(&was);
	/* With a shared array (shared 2: 8 objects), a flush lands there first. */
	CHECK_EQ(usl_cache_tune(s, 10, 4, 2), 0);
	CHECK_EQ(in_arrays(s), 0);                 /* tuning flushed the arrays */
	for (int i = 0; i < 32; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (int i = 0; i < 32; i++)
		kmem_cache_free(s, p[i]);
	usl_slab_counts(s, -1, &c);
	CHECK(c.shared_avail > 0 && c.shared_avail <= 8);
	/* A refill takes from the shared array before the slabs. */
	unsigned long shared_before = c.shared_avail;
	usl_cache_flush_all(s);                    /* arrays to slabs, shared untouched */
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(c.shared_avail, shared_before);
	void *b = kmem_cache_alloc(s, GFP_KERNEL);
	usl_slab_counts(s, -1, &c);
	CHECK(c.shared_avail < shared_before);
	kmem_cache_free(s, b);
	kmem_cache_free(s, a);
	/* Bad tunables are refused, nothing changed. */
	CHECK_EQ(usl_cache_tune(s, 0, 1, 0), -EINVAL);
	CHECK_EQ(usl_cache_tune(s, 10, 0, 0), -EINVAL);
	CHECK_EQ(usl_cache_tune(s, 10, 11, 0), -EINVAL);
	CHECK_EQ(usl_cache_tune(s, 1u << 30, 1, 0), -EINVAL);
	CHECK_EQ(s->limit, 10);
	struct kmem_cache *d = kmem_cache_create("slab-tune-debug", 64, 0, SLAB_POISON | SLAB_NO_MERGE, NULL);
	CHECK_EQ(usl_cache_tune(d, 10, 4, 0), -EINVAL);   /* a SLUB cache has no tunables */
	kmem_cache_destroy(d);
	kmem_cache_destroy(s);
}

/* free_block keeps at most free_limit free objects in free slabs; the reap
 * takes the rest back, a fifth of free_limit a round, and drains the arrays. */
static void test_reap(void)
{
	struct kmem_cache *s = make("slab-reap", 512, NULL);
	struct usl_slab_counts c;
	enum { N = 4000 };
	static void *p[N];
	for (int i = 0; i < N; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, p[i]);
	usl_slab_counts(s, -1, &c);
	CHECK(c.free_objects <= c.free_limit + s->objects);
	CHECK(c.total_slabs > 0);
	uint64_t now = usl_now_ms() + 10000;
	unsigned long per_round = (c.free_limit + 5 * s->objects - 1) / (5 * s->objects);
	unsigned long prev = c.free_slabs;
	for (int round = 0; round < 40; round++) {
		/* A round frees at most a fifth of free_limit's slabs, plus what
		 * the arrays' drained objects make free_block give back. */
		unsigned long held = in_arrays(s);
		usl_array_reap(s, now);
		usl_slab_counts(s, -1, &c);
		unsigned long drained = held - in_arrays(s);
		if (c.free_slabs < prev)
			CHECK(prev - c.free_slabs <= per_round + 1 + (drained + s->objects - 1) / s->objects);
		prev = c.free_slabs;
		now += 10000;
	}
	usl_slab_counts(s, -1, &c);
	CHECK_EQ(in_arrays(s), 0);
	CHECK_EQ(c.shared_avail, 0);
	CHECK_EQ(c.total_slabs, 0);
	CHECK_EQ(usl_slab_check_lists(s), 0);
	kmem_cache_destroy(s);
}

/* The tunables as a program sets them: the attribute and the kernel's
 * /proc/slabinfo write, their refusals, and slabinfo's columns. */
static void test_tunables_api(void)
{
	struct kmem_cache *s = make("slab-attr", 96, NULL);
	char buf[128];
	CHECK(uslab_cache_attr(s, "allocator", buf, sizeof(buf)) > 0 && !strcmp(buf, "slab\n"));
	CHECK(uslab_cache_attr(s, "tunables", buf, sizeof(buf)) > 0 && !strcmp(buf, "120 60 8\n") == (usl_nr_cpus > 1));
	CHECK_EQ(uslab_cache_attr_write(s, "tunables", "32 16 4\n"), 0);
	CHECK(uslab_cache_attr(s, "tunables", buf, sizeof(buf)) > 0 && !strcmp(buf, "32 16 4\n"));
	CHECK_EQ(s->sheaf_capacity, 32);
	CHECK_EQ(uslab_slabinfo_write("slab-attr 64 32 0"), 0);
	CHECK_EQ(s->limit, 64);
	CHECK_EQ(s->batchcount, 32);
	CHECK_EQ(s->shared, 0);
	static const char *const bad[] = { "slab-attr 0 1 0", "slab-attr 4 8 0", "slab-attr 4 x 0", "slab-attr 4 2",
	                                   "slab-attr 4 2 0 junk", "slab-attr", "", "slab-attr 99999999999 1 0" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		CHECK_EQ(uslab_slabinfo_write(bad[i]), -1);
		CHECK_EQ(errno, EINVAL);
	}
	errno = 0;
	CHECK_EQ(uslab_slabinfo_write(NULL), -1);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(uslab_slabinfo_write("no-such-cache 8 4 0"), -1);
	CHECK_EQ(errno, ENOENT);
	CHECK_EQ(s->limit, 64);
	struct kmem_cache *d = kmem_cache_create("slab-attr-debug", 64, 0, SLAB_POISON | SLAB_NO_MERGE, NULL);
	errno = 0;
	CHECK_EQ(uslab_cache_attr_write(d, "tunables", "8 4 0"), -1);
	CHECK_EQ(errno, EOPNOTSUPP);
	CHECK(uslab_cache_attr(d, "allocator", buf, sizeof(buf)) > 0 && !strcmp(buf, "slub\n"));
	kmem_cache_destroy(d);
	/* slabinfo shows them. */
	void *x = kmem_cache_alloc(s, GFP_KERNEL);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	uslab_slabinfo(f);
	fclose(f);
	char *row = text ? strstr(text, "\nslab-attr ") : NULL;
	CHECK(row != NULL);
	if (row) {
		char name[64];
		unsigned long act, num, slabs_act, slabs_num, shared_avail;
		unsigned int size, per, pages, lim, batch, shared;
		CHECK_EQ(sscanf(row + 1, "%63s %lu %lu %u %u %u : tunables %u %u %u : slabdata %lu %lu %lu", name, &act,
		                &num, &size, &per, &pages, &lim, &batch, &shared, &slabs_act, &slabs_num, &shared_avail),
		         12);
		CHECK_EQ(lim, 64);
		CHECK_EQ(batch, 32);
		CHECK_EQ(shared, 0);
		CHECK(act >= 1 && act <= num);
		CHECK(slabs_act >= 1 && slabs_act <= slabs_num);
		CHECK_EQ(per, s->objects);
	}
	free(text);
	kmem_cache_free(s, x);
	kmem_cache_destroy(s);
}

/* ---- tunables under load ---- */
static struct kmem_cache *load_cache;
static _Atomic int load_stop;
static _Atomic unsigned long load_bad, load_ops;

static void *loader(void *arg)
{
	uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
	void *held[64] = { 0 };
	while (!load_stop) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned int i = (unsigned int)(seed >> 33) % 64;
		if (held[i]) {
			load_bad += *(uintptr_t *)held[i] != (uintptr_t)held[i];
			kmem_cache_free(load_cache, held[i]);
			held[i] = NULL;
		} else if ((held[i] = kmem_cache_alloc(load_cache, GFP_KERNEL))) {
			*(uintptr_t *)held[i] = (uintptr_t)held[i];
			memset((char *)held[i] + 8, 0x33, 120);
		}
		load_ops++;
	}
	for (int i = 0; i < 64; i++)
		if (held[i])
			kmem_cache_free(load_cache, held[i]);
	return NULL;
}

static void test_tune_under_load(void)
{
	unsigned long errors0 = uslab_error_count();
	load_cache = make("slab-load", 128, NULL);
	pthread_t t[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&t[i], NULL, loader, (void *)(uintptr_t)(i + 1));
	static const unsigned int tunes[][3] = { { 1, 1, 0 }, { 200, 100, 8 }, { 16, 8, 0 }, { 120, 60, 8 },
	                                         { 7, 3, 1 }, { 500, 250, 2 } };
	for (int k = 0; k < 60; k++) {
		const unsigned int *v = tunes[k % 6];
		CHECK_EQ(usl_cache_tune(load_cache, v[0], v[1], v[2]), 0);
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	load_stop = 1;
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(load_bad, 0);
	CHECK(load_ops > 1000);
	if (uslab_error_count() != errors0)
		fprintf(stderr, "tunables under load: %lu reports, the last: %s\n", uslab_error_count() - errors0, last_report);
	usl_cache_flush_all(load_cache);
	CHECK_EQ(usl_slab_objects_in_use(load_cache), 0);
	CHECK_EQ(usl_slab_check_lists(load_cache), 0);
	kmem_cache_destroy(load_cache);
}

/* ---- alien frees (fake second node) ---- */
static struct kmem_cache *alien_cache;
static void *alien_objs[2000];

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *alloc_on_1(void *arg)
{
	(void)arg;
	pin(1);
	for (int i = 0; i < 2000; i++)
		alien_objs[i] = kmem_cache_alloc(alien_cache, GFP_KERNEL);
	return NULL;
}

static void test_alien(void)
{
	if (usl_nr_nodes < 2 || usl_nr_cpus < 2 || usl_node_of_cpu(1) != 1) {
		printf("alien frees: skipped (one node or one CPU)\n");
		return;
	}
	cpu_set_t old;
	sched_getaffinity(0, sizeof(old), &old);
	alien_cache = make("slab-alien", 200, NULL);
	CHECK(alien_cache->node[1] != NULL);
	pthread_t t;
	pthread_create(&t, NULL, alloc_on_1, NULL);
	pthread_join(t, NULL);
	int remote = 0;
	for (int i = 0; i < 2000; i++)
		remote += alien_objs[i] && usl_virt_to_slab(alien_objs[i])->nid == 1;
	if (sched_getcpu() >= 0 && remote == 0) {
		printf("alien frees: skipped (CPU 1 not usable)\n");
		kmem_cache_destroy(alien_cache);
		return;
	}
	CHECK(remote > 1000);
	pin(0);
	struct usl_slab_counts c;
	unsigned long alien_peak = 0;
	for (int i = 0; i < 2000; i++) {
		kmem_cache_free(alien_cache, alien_objs[i]);
		if (i % 50 == 0) {
			usl_slab_counts(alien_cache, -1, &c);
			if (c.alien_avail > alien_peak)
				alien_peak = c.alien_avail;
		}
	}
	CHECK(alien_peak > 0 && alien_peak <= 12);       /* the alien array: 12 */
	CHECK_EQ(usl_slab_check_lists(alien_cache), 0);
	/* The reap drains the alien arrays to their node. */
	usl_array_reap(alien_cache, usl_now_ms() + 100000);
	usl_slab_counts(alien_cache, -1, &c);
	CHECK_EQ(c.alien_avail, 0);
	usl_cache_flush_all(alien_cache);
	CHECK_EQ(usl_slab_objects_in_use(alien_cache), 0);
	CHECK_EQ(usl_slab_check_lists(alien_cache), 0);
	sched_setaffinity(0, sizeof(old), &old);
	kmem_cache_destroy(alien_cache);
}

int main(void)
{
	/* The reap rounds here are this thread's; the decay thread would reap
	 * in between (test_background tests it). */
	usl_opt.background = 0;
	capture_reports();
	/* The one-thread tests count one node's lists: pinned, so that with
	 * USLAB_NODES=2 the thread does not move to the other node's CPU and
	 * grow there; the threads of the load test run free. */
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);
	test_engines();
	test_lists();
	test_bad_frees();
	test_placements();
	test_colour();
	test_batches();
	test_reap();
	test_tunables_api();
	if (pinned)
		unpin_cpu(&was);
	test_tune_under_load();
	test_alien();
	CHECK_EQ(uslab_error_count(), expected_errors);   /* none but the bad frees' */
	printf("per-CPU mode: %s, nodes %u\n", uslab_percpu_mode(), usl_nr_nodes);
	return test_summary();
}
