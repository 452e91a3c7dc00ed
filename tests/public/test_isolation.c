/* test_isolation.c - type isolation (SLAB_VIRTUAL): a cache's empty slabs give
 * their pages back to the OS, but no other cache, nor malloc, ever gets their
 * addresses; the cache itself takes them again. The same sequence without the
 * flag shows that the check sees reuse where there is some (another cache gets
 * the pages a shrink gave back), so it can fail. Public API only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../harness.h"

enum { N = 16384, SIZE = 256 };

static int cmp_page(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* The pages of p[0..n), sorted and unique, into pages[]; their count. */
static size_t pages_of(void **p, size_t n, uintptr_t *pages)
{
	for (size_t i = 0; i < n; i++)
		pages[i] = (uintptr_t)p[i] >> 12;
	qsort(pages, n, sizeof(*pages), cmp_page);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!k || pages[k - 1] != pages[i])
			pages[k++] = pages[i];
	return k;
}

static bool in_pages(const uintptr_t *pages, size_t k, const void *x)
{
	uintptr_t v = (uintptr_t)x >> 12;
	return bsearch(&v, pages, k, sizeof(*pages), cmp_page) != NULL;
}

/* How many of n new objects of t (and n mallocs) lie on the pages a's
 * objects had, after a's were all freed and a shrunk. */
static size_t reuse_after(slab_flags_t flags, size_t *resident, size_t *own_again, size_t *after_destroy)
{
	static void *p[N], *q[N], *m[N];
	static uintptr_t pages[N];
	struct kmem_cache *a = kmem_cache_create("iso-a", SIZE, 0, SLAB_NO_MERGE | flags, NULL);
	CHECK(a != NULL);
	for (size_t i = 0; i < N; i++)
		CHECK((p[i] = kmem_cache_alloc(a, GFP_KERNEL)) != NULL);
	for (size_t i = 0; i < N; i++)
		memset(p[i], 0x5a, SIZE);
	size_t k = pages_of(p, N, pages);
	for (size_t i = 0; i < N; i++)
		kmem_cache_free(a, p[i]);
	kmem_cache_shrink(a);
	uslab_release_free_memory();
	/* Given back to the OS: none of those pages resident (mincore). */
	*resident = 0;
	for (size_t i = 0; i < k; i++) {
		unsigned char v = 0;
		if (mincore((void *)(pages[i] << 12), 4096, &v) == 0 && (v & 1))
			(*resident)++;
	}
	/* Another cache of the same size, and malloc of it. */
	struct kmem_cache *t = kmem_cache_create("iso-t", SIZE, 0, SLAB_NO_MERGE, NULL);
	CHECK(t != NULL);
	size_t on = 0;
	for (size_t i = 0; i < N; i++) {
		q[i] = kmem_cache_alloc(t, GFP_KERNEL);
		m[i] = malloc(SIZE);
		CHECK(q[i] && m[i]);
		on += in_pages(pages, k, q[i]) + in_pages(pages, k, m[i]);
	}
	/* The cache itself takes its pages again. */
	*own_again = 0;
	for (size_t i = 0; i < N; i++) {
		p[i] = kmem_cache_alloc(a, GFP_KERNEL);
		*own_again += in_pages(pages, k, p[i]);
	}
	for (size_t i = 0; i < N; i++) {
		kmem_cache_free(a, p[i]);
		kmem_cache_free(t, q[i]);
		free(m[i]);
	}
	kmem_cache_destroy(t);
	kmem_cache_destroy(a);
	/* After a's destruction: a new cache, and malloc, still elsewhere. */
	struct kmem_cache *u = kmem_cache_create("iso-u", SIZE, 0, SLAB_NO_MERGE, NULL);
	*after_destroy = 0;
	for (size_t i = 0; i < N; i++) {
		q[i] = kmem_cache_alloc(u, GFP_KERNEL);
		m[i] = malloc(SIZE);
		*after_destroy += in_pages(pages, k, q[i]) + in_pages(pages, k, m[i]);
	}
	for (size_t i = 0; i < N; i++) {
		kmem_cache_free(u, q[i]);
		free(m[i]);
	}
	kmem_cache_destroy(u);
	return on;
}

int main(void)
{
	size_t resident, own, gone;
	/* Without the flag: the pages a shrink gave back serve the next cache. */
	size_t plain = reuse_after(0, &resident, &own, &gone);
	printf("plain cache: %zu of %d new objects on its old pages (%zu after its destruction)\n", plain, 2 * N, gone);
	CHECK(plain + gone > 0);
	size_t isolated = reuse_after(SLAB_VIRTUAL, &resident, &own, &gone);
	printf("SLAB_VIRTUAL: %zu on its old pages (%zu after its destruction), %zu pages resident after the "
	       "shrink, %zu of its own new objects there\n", isolated, gone, resident, own);
	CHECK_EQ(isolated, 0);
	CHECK_EQ(gone, 0);
	CHECK_EQ(resident, 0);
	CHECK(own > N / 2);
	/* The flag is refused nowhere, never merged, and not a debug flag. */
	struct kmem_cache *x = kmem_cache_create("iso-x", 64, 0, SLAB_VIRTUAL, NULL);
	struct kmem_cache *y = kmem_cache_create("iso-y", 64, 0, 0, NULL);
	CHECK(x && y && x != y);
	kmem_cache_destroy(x);
	kmem_cache_destroy(y);
	return test_summary();
}
