/* test_pages.c - the page provider: alignment, table lookup of every page,
 * buddy merging, purge (memory really released), decay, failure injection. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "pages/pages.h"
#include "platform/platform.h"
#include "testing.h"

static void test_blocks(void)
{
	for (unsigned int order = 0; order <= USL_MAX_ORDER; order++) {
		size_t bytes = usl_order_bytes(order);
		char *p = usl_pages_alloc(order, USL_PAGE_INTERNAL, 0);
		CHECK(p != NULL);
		CHECK(((uintptr_t)p & (bytes - 1)) == 0);    /* naturally aligned */
		struct slab *head = usl_virt_to_slab(p);
		CHECK(head != NULL && head->kind == USL_PAGE_INTERNAL && head->order == order);
		int bad = 0;
		for (size_t off = 0; off < bytes; off += USL_PAGE_SIZE / 2)
			bad += usl_virt_to_slab(p + off) != head;
		CHECK_EQ(bad, 0);
		CHECK(usl_slab_address(head) == p);
		memset(p, 0x5a, bytes);
		usl_pages_free(p);
	}
}

static void test_foreign(void)
{
	int local;
	CHECK(usl_virt_to_slab(&local) == NULL);
	CHECK(usl_virt_to_slab((void *)usl_base) != NULL);
	CHECK(usl_virt_to_slab((char *)usl_base + usl_top) == NULL);           /* reserved, not committed */
	CHECK(usl_virt_to_slab((char *)usl_base + usl_range - 1) == NULL);
	CHECK(usl_virt_to_slab((char *)usl_base - 1) == NULL);
	CHECK(usl_virt_to_slab(NULL) == NULL);
}

static void test_buddy_merge(void)
{
	/* Take every free block, so the next allocations come from one fresh
	 * largest block, then check that two freed halves merge back. */
	char *big = usl_pages_alloc(USL_MAX_ORDER, USL_PAGE_INTERNAL, 0);
	usl_pages_free(big);
	char *a = usl_pages_alloc(USL_MAX_ORDER - 1, USL_PAGE_INTERNAL, 0);
	char *b = usl_pages_alloc(USL_MAX_ORDER - 1, USL_PAGE_INTERNAL, 0);
	CHECK(a && b);
	CHECK((size_t)(a > b ? a - b : b - a) == usl_order_bytes(USL_MAX_ORDER - 1));
	usl_pages_free(a);
	usl_pages_free(b);
	char *c = usl_pages_alloc(USL_MAX_ORDER, USL_PAGE_INTERNAL, 0);
	CHECK(c == (a < b ? a : b));          /* merged into one largest block */
	/* Split it into pages and merge them all again. */
	usl_pages_free(c);
	enum { N = 64 };
	char *pg[N];
	for (int i = 0; i < N; i++)
		pg[i] = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	for (int i = N - 1; i >= 0; i -= 2)
		usl_pages_free(pg[i]);
	for (int i = N - 2; i >= 0; i -= 2)
		usl_pages_free(pg[i]);
	char *d = usl_pages_alloc(USL_MAX_ORDER, USL_PAGE_INTERNAL, 0);
	CHECK(d == c);
	usl_pages_free(d);
}

static void test_purge(void)
{
	size_t dirty, clean;
	char *p = usl_pages_alloc(4, USL_PAGE_INTERNAL, 0);
	memset(p, 0xab, usl_order_bytes(4));
	usl_pages_free(p);
	usl_pages_stats(NULL, &dirty, &clean);
	CHECK(dirty >= usl_order_bytes(4));
	CHECK(uslab_release_free_memory() >= usl_order_bytes(4));
	usl_pages_stats(NULL, &dirty, NULL);
	CHECK_EQ(dirty, 0);
	/* The memory was given back: it reads as zero now. */
	char *q = usl_pages_alloc(4, USL_PAGE_INTERNAL, 0);
	CHECK(q == p);
	int nz = 0;
	for (size_t i = 0; i < usl_order_bytes(4); i++)
		nz += q[i] != 0;
	CHECK_EQ(nz, 0);
	usl_pages_free(q);

	/* Decay: with a zero delay, a later free purges what was freed before. */
	usl_opt.decay_ms = 0;
	char *r = usl_pages_alloc(2, USL_PAGE_INTERNAL, 0);
	char *s2 = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	memset(r, 1, usl_order_bytes(2));
	usl_pages_free(r);
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	usl_pages_free(s2);
	nanosleep(&ts, NULL);
	char *t = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	usl_pages_free(t);
	usl_pages_stats(NULL, &dirty, &clean);
	CHECK_EQ(dirty, 0);
	usl_opt.decay_ms = 1000;
}

/* A purged free block gives back all of its page-map pages, and a table page
 * that holds no allocated block's head entry goes at the next purge: free
 * blocks are kept in bitmaps, not in their entries. */
static void test_entries_released(void)
{
	unsigned int order = USL_MAX_ORDER - 1;
	size_t bytes = usl_order_bytes(order), n = (size_t)1 << order;
	char *a = usl_pages_alloc(order, USL_PAGE_INTERNAL, 0);
	char *b = usl_pages_alloc(order, USL_PAGE_INTERNAL, 0);   /* keeps a from merging */
	CHECK(a && b);
	CHECK((((uintptr_t)a - usl_base) ^ ((uintptr_t)b - usl_base)) == bytes);   /* buddies: one region */
	size_t pfn = ((uintptr_t)a - usl_base) >> USL_PAGE_SHIFT;
	struct slab *e = usl_virt_to_slab(a), *f = usl_virt_to_slab(b);
	CHECK(e == &usl_table[usl_table_index(pfn)] && usl_slab_address(e) == a && usl_slab_address(f) == b);
	struct usl_pagemap_entry *m = &usl_pagemap[pfn];
	void *ep = (void *)((uintptr_t)e & ~(USL_PAGE_SIZE - 1));   /* e's table page */
	CHECK(ep == (void *)((uintptr_t)f & ~(USL_PAGE_SIZE - 1))); /* the region's first entries */
	usl_pages_free(a);
	CHECK(resident_pages(m, n * sizeof(*m)) > 0);          /* written by the free */
	uslab_release_free_memory();
	CHECK_EQ(resident_pages(m, n * sizeof(*m)), 0);
	/* A live block's head stays, whatever is purged around it. */
	CHECK_EQ(resident_pages(ep, USL_PAGE_SIZE), 1);
	CHECK(f->kind == USL_PAGE_INTERNAL && f->order == order && usl_slab_address(f) == b);
	/* Still free, and handed out again (first: the lowest block that fits). */
	char *c = usl_pages_alloc(order, USL_PAGE_INTERNAL, 0);
	CHECK(c == a);
	CHECK(usl_virt_to_slab(c) == e && e->kind == USL_PAGE_INTERNAL && e->order == order);
	usl_pages_free(c);
	usl_pages_free(b);
	CHECK_EQ(resident_pages(ep, USL_PAGE_SIZE), 1);        /* written by the frees */
	usl_pages_purge(false);                                /* the decay's purge */
	CHECK_EQ(resident_pages(ep, USL_PAGE_SIZE), 0);        /* no head left on it */
	CHECK(e->kind == USL_PAGE_UNUSED && f->kind == USL_PAGE_UNUSED);   /* zeros: the free state */
}

/* The table order: a bijection inside each region, and the heads of blocks of
 * 2^k pages all fall in the region's first 1024 >> k entries (a region of
 * 16-page blocks keeps one of its 16 table pages resident). */
static void test_table_order(void)
{
	size_t per = (size_t)1 << USL_MAX_ORDER;
	static unsigned char seen[1 << USL_MAX_ORDER];
	for (size_t region = 0; region < 3; region++) {
		memset(seen, 0, sizeof(seen));
		for (size_t pfn = region * per; pfn < (region + 1) * per; pfn++) {
			size_t idx = usl_table_index(pfn);
			CHECK(idx / per == region);
			CHECK(usl_table_pfn(idx) == pfn);
			seen[idx % per]++;
		}
		for (size_t i = 0; i < per; i++)
			CHECK_EQ(seen[i], 1);
	}
	for (unsigned int order = 0; order <= USL_MAX_ORDER; order++) {
		size_t below = 0;
		for (size_t pfn = per; pfn < 2 * per; pfn += (size_t)1 << order)
			below += usl_table_index(pfn) - per < (per >> order);
		CHECK_EQ(below, per >> order);
	}
}

static bool mine(char **p, int n, const char *x)
{
	for (int i = 0; i < n; i++)
		if (p[i] == x)
			return true;
	return false;
}

/* Allocations take the lowest free block that fits, dirty ones (resident
 * already) before clean ones, whatever the order of the frees. */
static void test_address_order(void)
{
	enum { N = 64 };
	char *p[N], *a = NULL, *b = NULL;
	uslab_release_free_memory();                  /* every free block clean */
	for (int i = 0; i < N; i++)
		p[i] = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	/* Two pages whose buddies are ours too, so that freed they stay pages. */
	for (int i = 0; i < N; i++) {
		char *buddy = (char *)(usl_base + (((uintptr_t)p[i] - usl_base) ^ USL_PAGE_SIZE));
		if (!mine(p, N, buddy))
			continue;
		if (!a)
			a = p[i];
		else if (p[i] != (char *)(usl_base + (((uintptr_t)a - usl_base) ^ USL_PAGE_SIZE))) {
			b = p[i];
			break;
		}
	}
	CHECK(a && b);
	if (a > b) {
		char *t = a;
		a = b;
		b = t;
	}
	/* The lower one is taken first although freed first (a LIFO list would
	 * give b). */
	usl_pages_free(a);
	usl_pages_free(b);
	char *q = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	CHECK(q == a);
	char *q2 = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	CHECK(q2 == b);
	/* A clean page below a dirty one: the dirty one is taken. */
	usl_pages_free(a);
	uslab_release_free_memory();
	usl_pages_free(b);
	q = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	CHECK(q == b);
	for (int i = 0; i < N; i++)
		if (p[i] != a)
			usl_pages_free(p[i]);
}

/* Random allocations and frees of every order, with purges between them, against
 * a model: blocks never overlap, are aligned, keep their contents, and read as
 * zeros when the provider says so; at the end everything merges back (the page
 * provider's own use is as before) and largest blocks come out without growth. */
static void test_random_model(void)
{
	enum { N = 400, ROUNDS = 20000 };
	static char *blk[N];
	static unsigned int ord[N];
	static unsigned char tag[N];
	size_t committed0, dirty0, clean0, committed1, dirty1, clean1;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int overlap = 0, misaligned = 0, corrupt = 0, notzero = 0;

	usl_pages_stats(&committed0, &dirty0, &clean0);
	memset(blk, 0, sizeof(blk));
	for (int r = 0; r < ROUNDS; r++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int i = (int)(x % N);
		if (blk[i]) {
			/* Its first and last page still carry its tag. */
			size_t len = usl_order_bytes(ord[i]);
			corrupt += blk[i][0] != (char)tag[i] || blk[i][len - 1] != (char)tag[i];
			usl_pages_free(blk[i]);
			blk[i] = NULL;
		} else {
			unsigned int o = (unsigned int)((x >> 20) % 100);
			o = o < 60 ? o % 3 : o < 90 ? 3 + o % 4 : 7 + o % (USL_MAX_ORDER - 6);   /* mostly small */
			bool zeroed = false;
			char *p = usl_pages_alloc_z(o, USL_PAGE_INTERNAL, 0, &zeroed);
			if (!p)
				continue;
			size_t len = usl_order_bytes(o);
			misaligned += ((uintptr_t)p - usl_base) % len != 0;
			if (zeroed)
				notzero += p[0] != 0 || p[len - 1] != 0 || p[len / 2] != 0;
			for (int j = 0; j < N; j++)
				if (blk[j] && p < blk[j] + usl_order_bytes(ord[j]) && blk[j] < p + len)
					overlap++;
			blk[i] = p;
			ord[i] = o;
			tag[i] = (unsigned char)(r | 1);
			p[0] = p[len - 1] = (char)tag[i];
		}
		if (r % 997 == 0)
			usl_pages_purge(r % 2 == 0);
	}
	CHECK_EQ(overlap, 0);
	CHECK_EQ(misaligned, 0);
	CHECK_EQ(corrupt, 0);
	CHECK_EQ(notzero, 0);
	for (int i = 0; i < N; i++)
		if (blk[i])
			usl_pages_free(blk[i]);
	usl_pages_stats(&committed1, &dirty1, &clean1);
	/* Whatever the provider holds besides this test's blocks is unchanged. */
	CHECK_EQ(committed1 - dirty1 - clean1, committed0 - dirty0 - clean0);
	/* Every region grown for the test merged back whole: as many largest
	 * blocks as it grew come out without growing again. */
	size_t grown = (committed1 - committed0) / usl_order_bytes(USL_MAX_ORDER), got = 0;
	char *big[64];
	for (size_t k = 0; k < grown && k < 64; k++)
		if ((big[k] = usl_pages_alloc(USL_MAX_ORDER, USL_PAGE_INTERNAL, 0)))
			got++;
	size_t committed2;
	usl_pages_stats(&committed2, NULL, NULL);
	CHECK_EQ(committed2, committed1);
	CHECK_EQ(got, grown < 64 ? grown : 64);
	for (size_t k = 0; k < got; k++)
		usl_pages_free(big[k]);
}

static void test_failures(void)
{
	CHECK(usl_pages_alloc(USL_MAX_ORDER + 1, USL_PAGE_INTERNAL, 0) == NULL);
	usl_pages_fail_after(2);
	void *a = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	void *b = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	void *c = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	CHECK(a && b && !c);
	usl_pages_fail_after(-1);
	c = usl_pages_alloc(0, USL_PAGE_INTERNAL, 0);
	CHECK(c != NULL);
	usl_pages_free(a);
	usl_pages_free(b);
	usl_pages_free(c);
	usl_pages_free(NULL);          /* foreign: ignored */
}

int main(void)
{
	usl_ensure_init();
	CHECK(USL_PAGE_SIZE == (size_t)sysconf(_SC_PAGESIZE));
	CHECK((1UL << USL_PAGE_SHIFT) == USL_PAGE_SIZE);
	test_blocks();
	test_foreign();
	test_buddy_merge();
	test_purge();
	test_table_order();
	test_entries_released();
	test_address_order();
	test_random_model();
	test_failures();
	return test_summary();
}
