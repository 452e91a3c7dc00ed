/* backend.h - the calls between the two halves of the kernel-suites adapter.
 *
 * The kernel's user-space test suites (tools/testing/radix-tree) are built
 * against a shim of the slab API that the kernel ships beside them. The
 * adapter implements that shim's interface on uslab in two files, because the
 * kernel's tools headers and uslab.h cannot meet in one translation unit (each
 * declares kmem_cache_create, gfp_t and the GFP bits its own way):
 *
 *   shim.c     compiled with the kernel's headers: the shim's functions, its
 *              counters, failure injection and callbacks;
 *   backend.c  compiled with uslab.h: the uslab calls behind them.
 *
 * This header is all they share: plain C types, no kernel or uslab names.
 * scripts/kernel-suites.sh builds both and links the suites with libuslab.
 */
#ifndef USLAB_KERNEL_BACKEND_H
#define USLAB_KERNEL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

struct kb_cache;   /* a uslab cache (struct kmem_cache of uslab.h) */

/* A uslab cache of objects of size bytes aligned to align (0: the default),
 * with ctor run once per object when its slab is made. NULL when uslab
 * refuses it (reported by uslab). */
struct kb_cache *kb_create(const char *name, unsigned int size, unsigned int align, void (*ctor)(void *));
/* One object, zeroed when zero is true; NULL when out of memory. */
void *kb_alloc(struct kb_cache *c, bool zero);
void kb_free(struct kb_cache *c, void *p);
/* All n objects into p, or none: returns n or 0. */
int kb_alloc_bulk(struct kb_cache *c, bool zero, size_t n, void **p);
void kb_free_bulk(struct kb_cache *c, size_t n, void **p);
void kb_shrink(struct kb_cache *c);
/* uslab's kmalloc and kfree. */
void *kb_kmalloc(size_t size, bool zero);
void kb_kfree(void *p);

#endif
