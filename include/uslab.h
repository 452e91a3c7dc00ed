/* uslab.h - the public API of uslab: the Linux kernel's slab allocator (SLUB)
 * as a user-space library. Names are the kernel's (kmem_cache_*, SLAB_*, GFP_*);
 * everything else exported starts with uslab_. This is the only installed header.
 *
 * Linking. -luslab (pkg-config uslab) also replaces the program's malloc, free,
 * calloc, realloc, the aligned allocators and C++ operator new/delete, as
 * jemalloc's and mimalloc's libraries do. -luslab-core (pkg-config uslab-core)
 * gives the same API below and leaves malloc to the C library.
 *
 * Rules for every function below, unless its comment says otherwise:
 * - Thread-safe: any thread may allocate from and free to any cache, including
 *   objects another thread allocated. Destroying a cache while another thread
 *   still uses it is the caller's bug, as in the kernel.
 * - Bad input (NULL or destroyed cache, a pointer uslab did not hand out, a
 *   double free, a wrong cache, an impossible size) is reported (see
 *   uslab_set_report_handler) and refused: nothing is freed or corrupted, and
 *   the call returns NULL / 0 / -1 as documented.
 * - Not async-signal-safe, as malloc is not: do not call from a signal handler
 *   that may interrupt uslab (slow paths take locks).
 * - fork(): a multithreaded program's child may use every function; the
 *   caches, with the objects the parent held, are the child's copies. Objects
 *   another thread of the parent was moving at the moment of the fork count as
 *   in use in the child (kmem_cache_destroy there may report them).
 * - gfp flags: only __GFP_ZERO and __GFP_NOWARN have an effect; a call never
 *   sleeps or waits for memory, it fails with NULL (and a report unless
 *   __GFP_NOWARN). */
#ifndef USLAB_H
#define USLAB_H

#include <stddef.h>
#include <stdio.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

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
/* uslab's own: the kernel's deterministic order for this cache, whatever
 * USLAB_RANDOM says: objects handed out lowest address first, a freed one
 * first again (no random order, no delayed reuse). Never merged. */
#define SLAB_ORDERED            0x00000001U
/* uslab's own, after the kernel's SLAB_VIRTUAL proposal: type isolation. The
 * cache's slabs never share their addresses with another cache: an empty
 * slab's pages go back to the OS, but its address range stays the cache's,
 * for its next slabs, for ever (after kmem_cache_destroy too). A dangling
 * pointer into it can only ever meet an object of the same type. Costs
 * address space (the cache's peak) and page tables (docs/GUIDE.md). Never
 * merged; always on SLUB. */
#define SLAB_VIRTUAL            0x00000002U
/* The kernel's: a freed object may be handed out again at once, but its
 * slab's memory goes back to the page provider (and on to the OS) only after
 * a grace period of the program's liburcu (uslab_rcu_init, below, first: a
 * cache created before it is refused). A reader under rcu_read_lock may meet
 * an object freed and reused meanwhile, always of this cache: it must check
 * what it found (a key, a lock and a recheck), as in the kernel. A freed
 * object keeps its bytes (uslab's words go outside it, no poisoning), so a
 * constructor's state survives. Never merged; sheaves, not the owned front. */
#define SLAB_TYPESAFE_BY_RCU    0x00080000U

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

/* Creates a cache of objects of size bytes (1 to 2 MiB with 4 KiB pages: half
 * the largest slab), aligned to align (0, or a power of two up to the page
 * size; at least 8; SLAB_HWCACHE_ALIGN raises it to the cache line for objects
 * above half a line). name (required) is copied, truncated to 47 bytes.
 * Returns the cache, or NULL with a report for bad arguments or no memory
 * (abort() instead with SLAB_PANIC). flags: the SLAB_* above; other bits are
 * refused. A cache without constructor or debug flags may be merged with an
 * existing compatible one (its name then is that cache's; USLAB_NOMERGE=1 or
 * SLAB_NO_MERGE prevent it); destroy it as many times as it was created.
 * ctor, if given, runs once on every object when its slab is made (not at each
 * kmem_cache_alloc), with no uslab lock held, so it may allocate; objects must
 * be freed back in their constructed state, and uslab keeps its free-list
 * pointer outside them. Without a ctor the contents of a new object are
 * undefined (a word in its middle held the free-list pointer). */
USLAB_API struct kmem_cache *kmem_cache_create(const char *name, unsigned int size,
                                               unsigned int align, slab_flags_t flags,
                                               void (*ctor)(void *));
/* Creation with arguments: the kernel's struct kmem_cache_args. Zeroed fields
 * mean "default". sheaf_capacity > 0 gives the cache per-CPU sheaves of at least
 * that many objects whatever USLAB_SHEAVES says; 0 leaves it to USLAB_SHEAVES
 * (on unless USLAB_SHEAVES=0). useroffset/usersize are checked, with no effect. */
struct kmem_cache_args {
	unsigned int align;
	unsigned int useroffset;
	unsigned int usersize;
	unsigned int freeptr_offset;   /* with use_freeptr_offset: where the free pointer lives */
	bool use_freeptr_offset;
	void (*ctor)(void *);
	unsigned int sheaf_capacity;
};
USLAB_API struct kmem_cache *uslab_kmem_cache_create_args(const char *name, unsigned int size,
                                                          struct kmem_cache_args *args,
                                                          slab_flags_t flags);
#ifndef __cplusplus
/* As in the kernel, kmem_cache_create(name, size, &args, flags) (or NULL args)
 * takes the arguments form; the five-argument form is unchanged. */
#define kmem_cache_create(name, size, args, ...)                                   \
	_Generic((args), struct kmem_cache_args *: uslab_kmem_cache_create_args,      \
	         void *: uslab_kmem_cache_create_args,                              \
	         default: kmem_cache_create)(name, size, args, __VA_ARGS__)
#endif
/* Destroys s once every object is freed: its memory goes back to the page
 * provider. NULL: nothing. Objects still in use: reported ("Objects
 * remaining: N") and the cache is kept, usable. A merged cache (or one created
 * again under an alias) is destroyed by its last kmem_cache_destroy. A
 * destroyed cache, or a kmalloc cache, is reported and left alone. */
USLAB_API void kmem_cache_destroy(struct kmem_cache *s);
/* An object of s, or NULL when out of memory (reported unless __GFP_NOWARN) or
 * s is NULL or destroyed (reported). __GFP_ZERO clears object_size bytes.
 * Lock-free in the common case (a per-CPU sheaf or cpu slab). */
USLAB_API void *kmem_cache_alloc(struct kmem_cache *s, gfp_t flags) USLAB_MALLOC_ATTR;
/* An object from a slab of NUMA node `node` (its pages on that node where the
 * machine has several and uslab was built with libnuma); NUMA_NO_NODE: the
 * calling CPU's node, as kmem_cache_alloc. A node that does not exist is
 * reported and the local node serves. Another node than the CPU's takes the
 * node's list_lock (counted as alloc_node_mismatch). Debug caches keep to
 * node 0. */
USLAB_API void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t flags, int node) USLAB_MALLOC_ATTR;
/* kmem_cache_alloc with __GFP_ZERO. */
USLAB_API void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t flags) USLAB_MALLOC_ATTR;
/* Frees obj to s; NULL obj: nothing. Reported and not freed: a NULL or
 * destroyed s, obj of another cache, not the start of an object, not from
 * uslab, never handed out yet, or already free (wherever it sits, by its
 * free marker; with USLAB_HARDEN=0 only where it heads a free list or its
 * slab has fewer objects in use). An object two threads free at the same
 * instant is handed out again only once (the later allocation reports it). */
USLAB_API void kmem_cache_free(struct kmem_cache *s, void *obj);
/* Bulk: all or nothing. Fills p[0..nr) and returns nr, or returns 0 with
 * nothing allocated (out of memory, NULL or destroyed s, NULL p, nr above
 * INT_MAX: reported). nr == 0 returns 0. */
USLAB_API int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t flags, size_t nr, void **p);
/* The same with every object from NUMA node `node`'s slabs (NUMA_NO_NODE:
 * kmem_cache_alloc_bulk; a node that does not exist is reported and the local
 * node serves). The kernel has no such call; objects for another node are
 * taken one at a time under its list_lock. */
USLAB_API int uslab_alloc_bulk_node(struct kmem_cache *s, gfp_t flags, int node, size_t nr, void **p);
/* Frees p[0..nr) (NULL entries are skipped); s == NULL: objects of any caches.
 * The order of p is changed. Bad pointers are reported and not freed; so are
 * duplicates gathered into one slab's list (objects of one slab within the
 * look-ahead of each other) and objects that are visibly free already. */
USLAB_API void kmem_cache_free_bulk(struct kmem_cache *s, size_t nr, void **p);
/* Gives back what s holds unused: its per-CPU sheaves and cpu slabs are
 * flushed, empty slabs freed, free pages returned to the OS (madvise).
 * Returns 0 when no slab of s is left, 1 when slabs with objects in use
 * remain, -1 (reported) for a NULL or destroyed cache. Takes every CPU's slot
 * of s for a moment: slower than an allocation by far, call it rarely. */
USLAB_API int kmem_cache_shrink(struct kmem_cache *s);
/* kmem_cache_shrink for one NUMA node: every CPU's sheaves and cpu slabs are
 * flushed (their objects go back to their own nodes), then the node's empty
 * slabs are freed (SLAB: its alien and shared arrays drained first); other
 * nodes' slabs stay. 0 when the node has no slab of s left, 1 when it has,
 * -EINVAL (reported) for a NULL or destroyed cache or a node that does not
 * exist. */
USLAB_API int uslab_cache_shrink_node(struct kmem_cache *s, int node);

/* Prefilled sheaves (the kernel's API for callers that must not fail later):
 * kmem_cache_prefill_sheaf returns a sheaf holding at least size objects (NULL
 * when out of memory); kmem_cache_alloc_from_sheaf cannot fail while
 * kmem_cache_sheaf_size(sheaf) > 0; kmem_cache_refill_sheaf tops a sheaf up to
 * size objects (0, or -ENOMEM with the sheaf unchanged); kmem_cache_return_sheaf
 * gives it and its objects back. Works on every cache, with or without sheaves. */
struct slab_sheaf;                    /* opaque */
USLAB_API struct slab_sheaf *kmem_cache_prefill_sheaf(struct kmem_cache *s, gfp_t gfp, unsigned int size);
USLAB_API int kmem_cache_refill_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf **sheafp,
                                      unsigned int size);
USLAB_API void kmem_cache_return_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sheaf);
USLAB_API void *kmem_cache_alloc_from_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sheaf)
	USLAB_MALLOC_ATTR;
USLAB_API unsigned int kmem_cache_sheaf_size(struct slab_sheaf *sheaf);
/* The object size of s (for a merged cache, the larger size of the caches
 * sharing it); 0 for NULL, 0 and a report for a destroyed cache. */
USLAB_API unsigned int kmem_cache_size(struct kmem_cache *s);
/* The name of s (a merged cache has the first creator's name); NULL for NULL,
 * NULL and a report for a destroyed cache. Valid until s is destroyed. */
USLAB_API const char *kmem_cache_name(struct kmem_cache *s);

/* ---- kmalloc ----
 * Classes kmalloc-8, -16, -32, -64, -96, -128, -192, -256, -512, -1k, -2k, -4k,
 * -8k (power-of-two sizes naturally aligned, the others 8-aligned); larger
 * requests are blocks of the page provider (naturally aligned to their
 * power-of-two page count), and beyond its largest block (4 MiB with 4 KiB
 * pages) direct mappings. kmalloc(0) returns ZERO_SIZE_PTR, which kfree, ksize
 * and krealloc accept as "no object". Out of memory, or more than PTRDIFF_MAX
 * bytes: NULL, reported unless __GFP_NOWARN. kmalloc_array and kcalloc return
 * NULL on overflow. kfree(NULL) does nothing; kfree also takes objects of
 * kmem_cache caches. kfree of a pointer that is not an allocated uslab block
 * (foreign, freed already, or inside a block) is reported and ignored. With
 * -luslab, malloc'd blocks are kmalloc blocks: kfree and ksize take them, and
 * free takes kmalloc blocks. */
#define ZERO_SIZE_PTR ((void *)16)
#define ZERO_OR_NULL_PTR(x) ((unsigned long)(x) <= (unsigned long)ZERO_SIZE_PTR)
USLAB_API void *kmalloc(size_t size, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void *kzalloc(size_t size, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void *kmalloc_node(size_t size, gfp_t flags, int node) USLAB_MALLOC_ATTR;
USLAB_API void *kmalloc_array(size_t n, size_t size, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void *kcalloc(size_t n, size_t size, gfp_t flags) USLAB_MALLOC_ATTR;
/* Grows or shrinks p to n bytes: in place when ksize(p) >= n, else a new block
 * with the contents copied and p freed (NULL on failure, p untouched).
 * krealloc(NULL or ZERO_SIZE_PTR, n) is kmalloc(n); n == 0 frees p and returns
 * ZERO_SIZE_PTR. With __GFP_ZERO the bytes past n are cleared. */
USLAB_API void *krealloc(const void *p, size_t n, gfp_t flags);
USLAB_API void kfree(const void *p);
/* The usable size of p's block (at least what was asked for); 0 for NULL and
 * ZERO_SIZE_PTR. */
USLAB_API size_t ksize(const void *p);
USLAB_API char *kstrdup(const char *s, gfp_t flags) USLAB_MALLOC_ATTR;
USLAB_API void *kmemdup(const void *src, size_t len, gfp_t flags) USLAB_MALLOC_ATTR;
/* Frees p[0..nr) of any caches or kmalloc sizes (NULL entries skipped). */
USLAB_API void kfree_bulk(size_t nr, void **p);

/* A block of at least size bytes from malloc's finer classes (steps of 16
 * and 32 bytes to 256, then eight a doubling, to 8 KiB; 16-aligned) and its
 * fast path, without replacing malloc (for a program, or a language runtime,
 * that keeps its own); above 8 KiB, kmalloc's large blocks. size 0 gives a
 * 16-byte block. Freed with kfree (and kfree_bulk); ksize and krealloc take
 * it. NULL when out of memory (reported unless __GFP_NOWARN; the fast path's
 * own refill failure follows USLAB_OOM as malloc's does); __GFP_ZERO zeroes. */
USLAB_API void *uslab_malloc(size_t size, gfp_t flags) USLAB_MALLOC_ATTR;
/* A block of size bytes aligned to align (a power of two; others are reported
 * and refused with NULL), freed with kfree; ksize and krealloc take it
 * (krealloc keeps only kmalloc's alignment). Alignments up to 8 are
 * kmalloc's; above, the block comes from the power-of-two class or page
 * block of max(size, align), or beyond the largest block an aligned mapping.
 * NULL when out of memory (reported unless __GFP_NOWARN); __GFP_ZERO zeroes. */
USLAB_API void *uslab_aligned_alloc(size_t align, size_t size, gfp_t flags) USLAB_MALLOC_ATTR;

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
	USLAB_ERR_CORRUPT,      /* uslab's word in a freed object overwritten (a write after
	                           free): the free list or packed sheaf is cut there */
	USLAB_ERR_SLAB_BUG,     /* a debug cache's check failed (USLAB_DEBUG, SLAB_RED_ZONE, ...):
	                           the kernel's "BUG <cache>: ..." report, several lines */
	USLAB_ERR_SLAB_FIX,     /* what uslab did about it: the kernel's "FIX <cache>: ..." line */
};

/* Every report is one line on stderr ("uslab: ..."). A handler, if set, receives
 * each report instead (kind and the text without the newline; the line is
 * valid during the call only); NULL restores printing. The handler runs on the
 * thread that found the problem, with no uslab lock held: it may call any
 * uslab function (and malloc), and may be called from several threads at
 * once. Reports made during start-up reach it after start-up. Setting a
 * handler is thread-safe; a report already under way may still go to the
 * previous one. uslab_error_count() counts reports since start-up (kind
 * USLAB_ERR_NONE lines, notices such as SLAB_PANIC's, are not counted). */
/* Debug caches' reports (USLAB_ERR_SLAB_BUG) are in the kernel's shape, not
 * prefixed "uslab: ", and span several lines: one call, the lines separated by
 * '\n'. A FIX line (USLAB_ERR_SLAB_FIX) follows each problem uslab repaired;
 * both count, as the kernel's KUnit tests count them. */
typedef void (*uslab_report_fn)(enum uslab_error kind, const char *line, void *arg);
USLAB_API void uslab_set_report_handler(uslab_report_fn fn, void *arg);
USLAB_API unsigned long uslab_error_count(void);

/* Check every slab of a debug cache (one created with SLAB_CONSISTENCY_CHECKS,
 * SLAB_RED_ZONE, SLAB_POISON or SLAB_STORE_USER, or named by USLAB_DEBUG):
 * each object's red zones, poison, padding and free pointer, each slab's free
 * list and counts, as the kernel's validate_slab_cache. Problems are reported
 * and repaired; returns the number of reports (BUG and FIX lines), 0 when all
 * is well, -1 for a cache without debugging (nothing to check against), and
 * -1 with a report for NULL or a destroyed cache. */
USLAB_API int kmem_cache_validate(struct kmem_cache *s);

/* Per-CPU mode chosen at start-up: "rseq" (restartable sequences) or "locked"
 * (a lock per CPU slot: valgrind, USLAB_RSEQ=0, no rseq). Never changes. */
USLAB_API const char *uslab_percpu_mode(void);

/* The allocator every cache but debug caches and uslab's own runs on, chosen
 * at start-up by USLAB_ALLOCATOR: "slub" (the default) or "slab". Never
 * changes. */
USLAB_API const char *uslab_allocator(void);
/* The per-CPU front end this process's caches use where they can: "owned",
 * "sheaves" or "cpuslab" (USLAB_FRONT; "owned" only where it applies: rseq
 * mode, one NUMA node, no USLAB_STATS), or "arrays" under USLAB_ALLOCATOR=slab.
 * Debug caches and caches created with a sheaf_capacity keep sheaves whatever
 * it says. Never changes. */
USLAB_API const char *uslab_front(void);

/* Sheaf capacity of a cache (the kernel's sysfs sheaf_capacity); 0: no sheaves. */
USLAB_API unsigned int uslab_sheaf_capacity(struct kmem_cache *s);

/* Return memory to the OS now (malloc_trim's job): every cache's sheaves, barns
 * and cpu slabs are flushed, empty slabs freed, free pages madvised. Returns the
 * bytes released. Costs a kmem_cache_shrink per cache: call it when idle. */
USLAB_API size_t uslab_release_free_memory(void);

/* ---- statistics: the kernel's /sys/kernel/slab and /proc/slabinfo ----
 * Every cache has the attributes of /sys/kernel/slab/<cache>/ under the same
 * names, with the same text: slab_size, object_size, objs_per_slab, order,
 * min_partial, cpu_partial, objects, objects_partial, partial, cpu_slabs,
 * slabs_cpu_partial, ctor, aliases, align, hwcache_align, reclaim_account,
 * destroy_by_rcu, sheaf_capacity, sanity_checks, trace, red_zone, poison,
 * store_user, slabs, total_objects, validate, shrink, and uslab's own: allocator
 * ("slub" or "slab") and tunables (SLAB's "limit batchcount shared", writable;
 * "0 0 0" on SLUB), and with USLAB_STATS set
 * the CONFIG_SLUB_STATS counters (alloc_fastpath, free_cpu_sheaf, barn_get,
 * ...: "sum C0=n C1=m", per CPU where not 0). The list, NULL-terminated: */
USLAB_API const char *const *uslab_cache_attrs(void);
/* The text of attribute attr of s into buf (NUL-terminated, cut to size);
 * returns its whole length as snprintf does, or -1 with errno: EINVAL for a
 * NULL or destroyed cache (reported), ENOENT for an unknown name, EOPNOTSUPP
 * for a counter without USLAB_STATS. */
USLAB_API int uslab_cache_attr(struct kmem_cache *s, const char *attr, char *buf, size_t size);
/* Writes as sysfs does: min_partial and cpu_partial (a whole number), shrink
 * ("1"), validate ("1", debug caches), a counter ("0" resets it). 0, or -1
 * with errno: EINVAL (bad value or cache), ENOENT, EACCES (read-only),
 * EOPNOTSUPP (a counter without USLAB_STATS). */
USLAB_API int uslab_cache_attr_write(struct kmem_cache *s, const char *attr, const char *value);
/* Whether USLAB_STATS turned the counters on (fixed at start-up). */
USLAB_API int uslab_stats_enabled(void);
/* The live cache of that name (merged caches go by their first name), or NULL. */
USLAB_API struct kmem_cache *uslab_cache_find(const char *name);
/* fn(s, arg) for every live cache (uslab's own included), until fn returns
 * non-zero (returned). fn may read attributes and allocate; it must not
 * destroy a cache. */
USLAB_API int uslab_for_each_cache(int (*fn)(struct kmem_cache *s, void *arg), void *arg);
/* One cache's /proc/slabinfo row as numbers (the columns of uslab_slabinfo
 * under their kernel names). */
struct uslab_slabinfo {
	unsigned long active_objs;      /* objects in use (SLAB: and in per-CPU arrays) */
	unsigned long num_objs;         /* objects the cache's slabs hold */
	unsigned int objsize;           /* the stride: object size with its metadata */
	unsigned int objperslab;
	unsigned int pagesperslab;
	unsigned int limit, batchcount, sharedfactor;   /* SLAB's tunables (SLUB: 0) */
	unsigned long active_slabs, num_slabs;
	unsigned long sharedavail;      /* objects in SLAB's shared arrays (SLUB: 0) */
};
/* Fills *out for s: 0, or -1 with errno EINVAL for a NULL or destroyed cache
 * or a NULL out (reported). */
USLAB_API int uslab_cache_slabinfo(struct kmem_cache *s, struct uslab_slabinfo *out);
/* /proc/slabinfo, version 2.1, in the kernel's format, to f. USLAB_STATS=1
 * prints it on stderr at exit, USLAB_STATS=<path> writes it to that file. */
USLAB_API void uslab_slabinfo(FILE *f);
/* The kernel's write to /proc/slabinfo: "name limit batchcount shared" sets
 * the tunables of a SLAB cache (USLAB_ALLOCATOR=slab) at run time, as the
 * attribute "tunables" does: limit >= 1, 1 <= batchcount <= limit; the per-CPU
 * arrays are flushed and remade at the new limit. 0, or -1 with errno: EINVAL
 * (malformed, out of range), ENOENT (no such cache), EOPNOTSUPP (a SLUB cache:
 * it has no tunables), ENOMEM. */
USLAB_API int uslab_slabinfo_write(const char *line);

/* ---- RCU: objects freed after a grace period of the program's liburcu ----
 * Built when liburcu's headers (liburcu-dev) were there; without them these
 * functions do not exist and a program that calls them fails to link.
 *
 * uslab_rcu_init(&urcu_memb_flavor) (or the qsbr, mb, signal or bp flavour the
 * program's readers use) tells uslab whose grace periods to wait for; once,
 * before the first kfree_rcu: 0, or -1 with errno (EINVAL: NULL or incomplete
 * flavour; EBUSY: another flavour was given before). kfree_rcu before it is
 * refused, the object left allocated, and reported once: uslab cannot know
 * which readers a guessed flavour's grace period would miss.
 *
 * kfree_rcu(ptr, field): frees ptr, an object of any kmem_cache or a kmalloc
 * block, after a grace period; field names its struct rcu_head (liburcu's),
 * which uslab uses while the object waits (a second kfree_rcu of it then is
 * reported and refused). kfree_rcu_mightsleep(ptr): the same without a
 * rcu_head (a second one is caught when the first frees it). Objects wait in
 * per-CPU batches, one call_rcu per batch, at most about two grace periods;
 * a pointer that starts no object is reported and refused. Never call them
 * from a signal handler. kvfree_rcu_barrier(): returns when every object
 * queued before it is freed; not inside a read-side section (reported).
 * USLAB_RCU_MAX (objects, default 1048576) bounds the objects waiting: past
 * it, a kfree_rcu outside a read-side section waits for the queued ones. */
struct rcu_flavor_struct;             /* liburcu's (urcu/flavor.h) */
struct rcu_head;                      /* liburcu's (urcu/call-rcu.h) */
USLAB_API int uslab_rcu_init(const struct rcu_flavor_struct *flavor);
USLAB_API void uslab_kvfree_call_rcu(struct rcu_head *head, void *ptr);
USLAB_API void kvfree_rcu_barrier(void);
/* (ptr is evaluated once; NULL does nothing.) */
#define kfree_rcu(ptr, field)                                                     \
	do {                                                                      \
		__typeof__(ptr) uslab_rcu_p_ = (ptr);                             \
		if (uslab_rcu_p_)                                                 \
			uslab_kvfree_call_rcu(&uslab_rcu_p_->field, (void *)uslab_rcu_p_); \
	} while (0)
#define kvfree_rcu(ptr, field) kfree_rcu(ptr, field)
#define kfree_rcu_mightsleep(ptr) uslab_kvfree_call_rcu(NULL, (void *)(ptr))
/* Objects queued by kfree_rcu, handed over in batches, freed, waiting now,
 * refused (before uslab_rcu_init, bad pointers, a second kfree_rcu), the
 * times a caller waited at USLAB_RCU_MAX, and SLAB_TYPESAFE_BY_RCU slabs
 * waiting for their grace period. Also the last lines of
 * uslab_slabinfo once a flavour is set. 0, or -1 (EINVAL) for NULL. */
struct uslab_rcu_stats {
	unsigned long queued, batches, freed, waiting, refused, waits;
	unsigned long slabs_waiting;   /* SLAB_TYPESAFE_BY_RCU slabs discarded, pages not yet back */
	int flavor_set;
};
USLAB_API int uslab_rcu_stats(struct uslab_rcu_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* USLAB_H */
