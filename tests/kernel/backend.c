/* backend.c - the uslab half of the kernel-suites adapter (backend.h): every
 * object the suites allocate comes from a uslab cache or uslab's kmalloc.
 *
 * At exit it checks that uslab reported nothing while the suite ran
 * (uslab_error_count): a report under USLAB_DEBUG, or any hardening report, is
 * a failure of the suite whatever the suite itself concluded. No locks of its
 * own: uslab's calls are thread-safe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <uslab.h>

#include "backend.h"

struct kb_cache *kb_create(const char *name, unsigned int size, unsigned int align, void (*ctor)(void *))
{
	/* The five-argument form: a ctor or align are passed as the kernel
	 * passes them; uslab merges the cache with a compatible one when it
	 * may, as SLUB does. */
	return (struct kb_cache *)kmem_cache_create(name, size, align, 0, ctor);
}

void *kb_alloc(struct kb_cache *c, bool zero)
{
	return kmem_cache_alloc((struct kmem_cache *)c, GFP_KERNEL | (zero ? __GFP_ZERO : 0));
}

void kb_free(struct kb_cache *c, void *p)
{
	kmem_cache_free((struct kmem_cache *)c, p);
}

int kb_alloc_bulk(struct kb_cache *c, bool zero, size_t n, void **p)
{
	return kmem_cache_alloc_bulk((struct kmem_cache *)c, GFP_KERNEL | (zero ? __GFP_ZERO : 0), n, p);
}

void kb_free_bulk(struct kb_cache *c, size_t n, void **p)
{
	kmem_cache_free_bulk((struct kmem_cache *)c, n, p);
}

void kb_shrink(struct kb_cache *c)
{
	kmem_cache_shrink((struct kmem_cache *)c);
}

void *kb_kmalloc(size_t size, bool zero)
{
	return kmalloc(size, GFP_KERNEL | (zero ? __GFP_ZERO : 0));
}

void kb_kfree(void *p)
{
	kfree(p);
}

/* A suite that made uslab report something fails, with the count on stderr. */
static void check_reports(void)
{
	unsigned long n = uslab_error_count();

	if (n) {
		fprintf(stderr, "kernel-suites adapter: uslab reported %lu error%s while the suite ran\n", n,
		        n == 1 ? "" : "s");
		_exit(3);
	}
}

__attribute__((constructor)) static void kb_init(void)
{
	atexit(check_reports);
}
