/* uslab.h - the public API of uslab: the Linux kernel's slab allocator (SLUB)
 * as a user-space library. Names are the kernel's (kmem_cache_*, SLAB_*, GFP_*);
 * everything else exported starts with uslab_. This is the only installed header. */
#ifndef USLAB_H
#define USLAB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define USLAB_VERSION_MAJOR 0
#define USLAB_VERSION_MINOR 1

#if defined(__GNUC__)
#define USLAB_API __attribute__((visibility("default")))
#define USLAB_MALLOC_ATTR __attribute__((malloc))
#else
#define USLAB_API
#define USLAB_MALLOC_ATTR
#endif

struct kmem_cache;                    /* opaque */
typedef unsigned int slab_flags_t;
typedef unsigned int gfp_t;

/* Cache flags (kmem_cache_create). */
#define SLAB_CONSISTENCY_CHECKS 0x00000100U /* debug: sanity checks on alloc/free (F) */
#define SLAB_RED_ZONE           0x00000400U /* debug: red zones around objects (Z) */
#define SLAB_POISON             0x00000800U /* debug: poison free objects (P) */
#define SLAB_NO_MERGE           0x01000000U /* never merge with another cache */
#define SLAB_HWCACHE_ALIGN      0x00002000U /* align objects on cache lines */
#define SLAB_STORE_USER         0x00010000U /* debug: record last alloc/free owner (U) */
#define SLAB_PANIC              0x00040000U /* abort if kmem_cache_create fails */
#define SLAB_TRACE              0x00200000U /* debug: trace every alloc/free (T) */

/* Allocation flags. GFP_KERNEL, GFP_ATOMIC and GFP_NOWAIT are accepted and have
 * no effect in user space; __GFP_ZERO zeroes the object; __GFP_NOWARN silences the
 * allocation-failure message. */
#define __GFP_NOWARN 0x2000U
#define __GFP_ZERO   0x100U
#define GFP_ATOMIC   0x20U
#define GFP_NOWAIT   0x800U
#define GFP_KERNEL   0xcc0U

#define NUMA_NO_NODE (-1)

/* ---- object caches ---- */
USLAB_API struct kmem_cache *kmem_cache_create(const char *name, unsigned int size,
                                               unsigned int align, slab_flags_t flags,
                                               void (*ctor)(void *));
USLAB_API void kmem_cache_destroy(struct kmem_cache *s);
USLAB_API void *kmem_cache_alloc(struct kmem_cache *s, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t flags, int node) USLAB_MALLOC_ATTR;
USLAB_API void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void kmem_cache_free(struct kmem_cache *s, void *obj);
/* Bulk: all or nothing. Returns nr, or 0 with nothing allocated. */
USLAB_API int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t flags, size_t nr, void **p);
/* Frees p[0..nr) (NULL entries are skipped); s == NULL: objects of any caches.
 * The order of p is changed. Bad pointers are reported and not freed; so are
 * duplicates gathered into one slab's list (objects of one slab within the
 * look-ahead of each other) and objects that are visibly free already. */
USLAB_API void kmem_cache_free_bulk(struct kmem_cache *s, size_t nr, void **p);
USLAB_API void kfree_bulk(size_t nr, void **p);
USLAB_API int kmem_cache_shrink(struct kmem_cache *s);
USLAB_API unsigned int kmem_cache_size(struct kmem_cache *s);
USLAB_API const char *kmem_cache_name(struct kmem_cache *s);

/* ---- uslab's own additions ---- */

/* Kinds of problems uslab reports. */
enum uslab_error {
	USLAB_ERR_NONE = 0,
	USLAB_ERR_FOREIGN,      /* pointer not from uslab */
	USLAB_ERR_WRONG_CACHE,  /* object belongs to another cache */
	USLAB_ERR_NOT_OBJECT,   /* inside a slab but not at an object start */
	USLAB_ERR_DOUBLE_FREE,  /* object already free */
	USLAB_ERR_BAD_ARG,      /* invalid argument (size, alignment, NULL cache, ...) */
	USLAB_ERR_LEAK,         /* objects remaining at kmem_cache_destroy */
	USLAB_ERR_NOMEM,        /* out of memory */
	USLAB_ERR_OPTION,       /* malformed USLAB_* environment variable */
};

/* Every report is one line on stderr ("uslab: ..."). A handler, if set, receives
 * each report instead (kind and the text without the newline); NULL restores
 * printing. uslab_error_count() counts reports since start-up. */
typedef void (*uslab_report_fn)(enum uslab_error kind, const char *line, void *arg);
USLAB_API void uslab_set_report_handler(uslab_report_fn fn, void *arg);
USLAB_API unsigned long uslab_error_count(void);

/* Per-CPU mode chosen at start-up: "rseq" or "locked". */
USLAB_API const char *uslab_percpu_mode(void);

/* Return free pages to the OS now (madvise). Returns bytes released. */
USLAB_API size_t uslab_release_free_memory(void);

#ifdef __cplusplus
}
#endif
#endif /* USLAB_H */
