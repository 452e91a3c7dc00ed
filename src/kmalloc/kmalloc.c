/* kmalloc.c - the kmalloc family: the kernel's size classes kmalloc-8 ..
 * kmalloc-8k, malloc's finer classes and its fast path, larger blocks from
 * the page provider and beyond its largest order direct mappings (both in
 * pages/large.c), ksize and krealloc. Lock: the common layer's classes lock
 * (usl_cache_classes_lock), held while classes are made and published. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../arch/arch.h"
#include "../percpu/percpu.h"
#include "../testing.h"
#include "kmalloc.h"

/* ===========================================================================
 * Size classes: the kernel's kmalloc_info for 4 KiB pages. Index n >= 3 is
 * 2^n bytes; 1 is 96 and 2 is 192 (the kernel's numbering).
 */
#define KMALLOC_SHIFT_LOW 3

static const struct {
	const char *name;
	unsigned int size;
} kmalloc_info[KMALLOC_SHIFT_HIGH + 1] = {
	{ NULL, 0 },          { "kmalloc-96", 96 },   { "kmalloc-192", 192 }, { "kmalloc-8", 8 },
	{ "kmalloc-16", 16 }, { "kmalloc-32", 32 },   { "kmalloc-64", 64 },   { "kmalloc-128", 128 },
	{ "kmalloc-256", 256 }, { "kmalloc-512", 512 }, { "kmalloc-1k", 1024 }, { "kmalloc-2k", 2048 },
	{ "kmalloc-4k", 4096 }, { "kmalloc-8k", 8192 },
};

/* Sizes up to 192 by (size - 1) / 8: the kernel's size_index table. */
static const uint8_t size_index[24] = { 3, 4, 5, 5, 6, 6, 6, 6, 1, 1, 1, 1,
                                        7, 7, 7, 7, 2, 2, 2, 2, 2, 2, 2, 2 };

static struct kmem_cache *kmalloc_caches[KMALLOC_SHIFT_HIGH + 1];
static int kmalloc_ready;                  /* acquire/release: the array is filled */

static inline unsigned int kmalloc_index(size_t size)
{
	if (size <= 192)
		return size_index[(size - 1) / 8];
	return (unsigned int)(64 - __builtin_clzl(size - 1));   /* fls(size - 1) */
}

/* Run make (which fills a class table, skipping entries made by an earlier
 * try) once under the classes lock, and publish *ready when it succeeded. */
static bool create_once(int *ready, bool (*make)(void))
{
	bool ok = true;
	usl_cache_classes_lock();
	if (!__atomic_load_n(ready, __ATOMIC_ACQUIRE)) {
		ok = make();
		if (ok)
			__atomic_store_n(ready, 1, __ATOMIC_RELEASE);
	}
	usl_cache_classes_unlock();
	return ok;
}

static bool make_kmalloc_caches(void)
{
	bool ok = true;
	for (unsigned int i = 1; i <= KMALLOC_SHIFT_HIGH && ok; i++) {
		unsigned int size = kmalloc_info[i].size;
		if (kmalloc_caches[i])
			continue;
		/* Power-of-two sizes are naturally aligned (the kernel's rule): with
		 * a stride of exactly the size inside a block aligned to at least
		 * that, every object is; the requested alignment says so up to the
		 * page (the block does the rest). 96 and 192 serve malloc too:
		 * 16, malloc's guarantee (a stride of 96 is already a multiple of
		 * it; a debug layout's is not, unless told). */
		unsigned int align = (size & (size - 1)) ? 16 : size;
		if (align > USL_PAGE_SIZE)
			align = (unsigned int)USL_PAGE_SIZE;
		kmalloc_caches[i] = usl_cache_create(kmalloc_info[i].name, size, align, 0, NULL, NULL, USL_CACHE_KMALLOC, 0);
		ok = kmalloc_caches[i] != NULL;
	}
	return ok;
}

static USL_SLOW_PATH bool kmalloc_create_caches(void)
{
	usl_ensure_init();
	return create_once(&kmalloc_ready, make_kmalloc_caches);
}

/* The class cache for size (1 .. KMALLOC_MAX_CACHE_SIZE), NULL if the classes
 * cannot be made. */
static inline struct kmem_cache *kmalloc_cache(size_t size)
{
	if (usl_unlikely(!__atomic_load_n(&kmalloc_ready, __ATOMIC_ACQUIRE)) && !kmalloc_create_caches())
		return NULL;
	return kmalloc_caches[kmalloc_index(size)];
}

/* ===========================================================================
 * The malloc path's classes. kmalloc doubles from 256 to 8 KiB, which costs a
 * program up to half of every such block (sqlite's 4.2 KiB page buffers take
 * 8 KiB). malloc has eight classes a doubling there, each the largest size of
 * which k objects fill a slab of 8 times the doubling's top (4 KiB for 256..512,
 * 64 KiB for 4..8 KiB) with k = 15 .. 8, in multiples of 16: 4368 is 64 KiB
 * / 15, so sqlite's 4368-byte page buffers waste nothing, and a slab wastes
 * under 16 bytes an object. A size
 * just above a class may waste an eighth plus 16 bytes. Below 256: steps of
 * 16 to 128, then of 32. They are caches named malloc-<size> with that slab
 * order, each made by the first malloc of a size it serves (a program pays
 * the cache structure and sheaves only of the sizes it uses); the
 * power-of-two sizes (k = 8) are kmalloc's caches.
 */

/* The slab bytes of the classes for n in (2^(j-1), 2^j], j > 8: 2^(j+3). */
static size_t malloc_slab_bytes(size_t n)
{
	return (size_t)8 << (64 - __builtin_clzl(n - 1));
}

/* The class size serving n bytes (1 .. KMALLOC_MAX_CACHE_SIZE). */
static unsigned int malloc_class_size(size_t n)
{
	if (n <= 256) {
		size_t step = n <= 128 ? 16 : 32;
		return (unsigned int)((n + step - 1) & ~(step - 1));
	}
	size_t b = malloc_slab_bytes(n), k = b / n;   /* the most objects of n bytes */
	return (unsigned int)((b / k) & ~(size_t)15);     /* >= n: n is a multiple of 16 here */
}

/* The class of every n up to KMALLOC_MAX_CACHE_SIZE, by (n + 15) / 16 (every
 * class size is a multiple of 16): one load and no branch on the size, which
 * a program's mix of sizes would mispredict. NULL until that class is made;
 * entry 0 (malloc(0)) is the smallest class. */
struct kmem_cache *usl_malloc_tab[USL_MALLOC_TAB];
struct usl_malloc_class usl_malloc_classes[USL_MALLOC_TAB] __attribute__((aligned(64)));
struct kmem_cache_cpu *usl_malloc_plain[USL_MALLOC_TAB];

/* A class cache: the kmalloc one of that size, or a malloc-<size> cache. */
static struct kmem_cache *malloc_class(unsigned int size)
{
	if (!(size & (size - 1)) || size == 96 || size == 192)
		return kmalloc_caches[kmalloc_index(size)];
	char name[32];
	usl_name_number(name, sizeof(name), "malloc-", size);
	return usl_cache_create(name, size, 16, 0, NULL, NULL, USL_CACHE_KMALLOC, size > 256 ? malloc_slab_bytes(size) : 0);
}

/* Publish class s (of size bytes) in table entry j: the cache first (malloc's
 * refusal reads it after it has seen the slots), then, in the mode of
 * hardening alone (the low byte of the fast mode never changes), unless it is
 * a debug class or its marker is not word 0, the secret and the slots; with
 * hardening off and no counters, the slots in usl_malloc_plain instead. With
 * no slots published malloc's fast path sends its sizes to malloc_other: the
 * plain pop, else alloc_bytes: a debug class's to the checked path, which
 * learns the size asked for, and with counters on each class's
 * kmem_cache_alloc, which counts (no class has its marker elsewhere: the
 * fast path's check takes it at word 0). */
static void malloc_publish(size_t j, struct kmem_cache *s)
{
	__atomic_store_n(&usl_malloc_tab[j], s, __ATOMIC_RELEASE);
	if (s->flags & USL_SLAB_DEBUG_FLAGS)
		return;
	uint8_t mode = (uint8_t)(usl_opt.mode & ~USL_MODE_NUMA);   /* a CPU's sheaves hold its node's objects */
	if (s->oslots) {                     /* the owned front end: no marker, whatever the mode */
		__atomic_store_n(&usl_malloc_classes[j].slots, (struct kmem_cache_cpu *)((uintptr_t)s->oslots | 1),
		                 __ATOMIC_RELEASE);
	} else if (mode == USL_MODE_HARDEN && !s->offset) {
		__atomic_store_n(&usl_malloc_classes[j].secret, s->fp_secret, __ATOMIC_RELAXED);
		__atomic_store_n(&usl_malloc_classes[j].slots, s->cpu_slab, __ATOMIC_RELEASE);
	} else if (mode == 0) {
		__atomic_store_n(&usl_malloc_plain[j], s->cpu_slab, __ATOMIC_RELEASE);
	}
}

/* Make the class serving n, then publish it in every table entry it serves
 * (after it is made, so a reader that sees an entry sees a made cache). Once
 * per class, under the classes lock; the kmalloc classes first, as some classes
 * are theirs. NULL if it cannot be made. A thread already holding the
 * registry's locks (a report handler that mallocs) gets the kmalloc class.
 * The class size grows with n, so the entries a class serves are one run of
 * the table around entry i: walked from i both ways, a few entries per class,
 * not the whole table (a division an entry) for every class. */
static void malloc_class_nomem(struct kmem_cache *s);

static USL_SLOW_PATH struct kmem_cache *malloc_make_class(size_t n)
{
	size_t i = n ? (n + 15) >> 4 : 1;
	struct kmem_cache *s;

	if (usl_registry_held)
		return kmalloc_cache(n ? n : 1);
	if (!kmalloc_cache(1))
		return NULL;
	/* The owned front end's malloc pops report their failures here. */
	__atomic_store_n(&usl_percpu_malloc_nomem, malloc_class_nomem, __ATOMIC_RELEASE);
	usl_cache_classes_lock();
	s = usl_malloc_tab[i];
	if (!s) {
		unsigned int size = malloc_class_size(i * 16);
		s = malloc_class(size);
		if (s) {
			size_t lo = i, hi = i;
			while (lo > 1 && malloc_class_size((lo - 1) * 16) == size)
				lo--;
			while (hi + 1 < USL_MALLOC_TAB && malloc_class_size((hi + 1) * 16) == size)
				hi++;
			for (size_t j = lo; j <= hi; j++)
				malloc_publish(j, s);
			if (lo == 1)        /* entry 0 (malloc(0)) as entry 1 */
				malloc_publish(0, s);
		}
	}
	usl_cache_classes_unlock();
	return s;
}

/* The malloc path's cache for 0 .. 8192 bytes; NULL if it cannot be made. */
static inline struct kmem_cache *malloc_cache(size_t n)
{
	struct kmem_cache *s = __atomic_load_n(&usl_malloc_tab[(n + 15) >> 4], __ATOMIC_ACQUIRE);
	return usl_likely(s != NULL) ? s : malloc_make_class(n);
}

void usl_malloc_nomem(const char *fn, size_t n)
{
	if (usl_opt.oom != USL_OOM_NULL) {
		const char *then = usl_opt.oom == USL_OOM_ABORT ? "aborting (USLAB_OOM=abort)" : "NULL returned (USLAB_OOM=report)";
		if (n == SIZE_MAX)
			usl_report(USLAB_ERR_NOMEM, "%s: the size overflows; %s", fn, then);
		else
			usl_report(USLAB_ERR_NOMEM, "%s(%zu): out of memory; %s", fn, n, then);
		if (usl_opt.oom == USL_OOM_ABORT)
			abort();
	}
	errno = ENOMEM;
}

/* A class's allocation failed (its size stands for the size asked for). */
static void malloc_class_nomem(struct kmem_cache *s)
{
	usl_malloc_nomem("malloc", s ? usl_cache_ksize(s) : 0);
}

void *usl_malloc_slow(const struct usl_malloc_class *c)
{
	struct kmem_cache *s = __atomic_load_n(&usl_malloc_tab[c - usl_malloc_classes], __ATOMIC_ACQUIRE);
	void *p = kmem_cache_alloc(s, GFP_KERNEL | __GFP_NOWARN);
	if (usl_unlikely(!p))
		malloc_class_nomem(s);
	return p;
}

void *usl_malloc_refused(const struct usl_malloc_class *c, void *obj)
{
	size_t i = (size_t)(c - usl_malloc_classes);
	struct kmem_cache *s = __atomic_load_n(&usl_malloc_tab[i], __ATOMIC_ACQUIRE);
	void *p = usl_pop_refused(s, GFP_KERNEL | __GFP_NOWARN, obj, "malloc");
	if (!p)
		malloc_class_nomem(s);
	return p;
}

void *usl_malloc_bytes(size_t n, gfp_t gfp, uintptr_t caller)
{
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = malloc_cache(n);
		if (s && (s->flags & USL_SLAB_DEBUG_FLAGS))
			return usl_kmalloc_debug(s, n, gfp, caller ? caller : (uintptr_t)__builtin_return_address(0));
		return s ? kmem_cache_alloc(s, gfp) : NULL;
	}
	return kmalloc(n, gfp);
}

struct kmem_cache *usl_malloc_cache_for(size_t n)
{
	return n && n <= KMALLOC_MAX_CACHE_SIZE ? malloc_cache(n) : NULL;
}

/* ===========================================================================
 * What a pointer is
 */

/* The cache owning the page at the committed offset off, or NULL: not a slab,
 * or a slab of uslab's own (cache structures, sheaves), which no kfree may
 * touch (kfree of a struct kmem_cache is reported, not done). */
static inline struct kmem_cache *page_owner(uintptr_t off)
{
	return usl_pagemap_user_cache(usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]));
}

/* The cache owning the page p is in, or NULL: not a slab of a user or kmalloc
 * cache, or outside the heap's range (a direct mapping, a foreign pointer). */
static inline struct kmem_cache *owner_of(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	return off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE) ? page_owner(off) : NULL;
}

/* The usable bytes of the block p starts (a slab object, a large block or a
 * mapping); 0 if p starts none. */
static size_t block_size(const void *p)
{
	size_t n = usl_obj_ksize(p);         /* the common case, as free checks it */
	if (usl_likely(n))
		return n;
	struct kmem_cache *s = owner_of(p);
	if (s && (s->flags & USL_SLAB_DEBUG_FLAGS))
		return usl_debug_is_object(s, p) ? usl_debug_ksize(s, (void *)p) : 0;
	if (s)   /* an object's start, not inside one */
		return usl_cache_obj_ok(s, p) ? usl_cache_ksize(s) : 0;
	return usl_large_size(p);
}

/* block_size, with a pointer that starts no block reported naming the cache
 * whose slab it is in (fn(cache): ... is not the start of an object). */
size_t usl_block_size_named(const void *p, const char *fn)
{
	size_t n = block_size(p);
	if (usl_likely(n))
		return n;
	struct kmem_cache *s = owner_of(p);
	if (s)
		usl_refuse_not_object(fn, s->name, p, "is not the start of an allocated object");
	else
		usl_report_bad_ptr(fn, p);
	return 0;
}

struct kmem_cache *usl_block_owner(const void *p)
{
	return owner_of(p);
}

/* The name of the cache whose object p starts (for reports), "kmalloc"
 * for a large block: p is a block block_size knows. */
const char *usl_block_owner_name(const void *p)
{
	struct kmem_cache *s = owner_of(p);
	return s ? s->name : "kmalloc (large block)";
}

/* ===========================================================================
 * The family
 */
static USL_OUT_OF_LINE void *kmalloc_large(size_t size, gfp_t gfp, int node)
{
	void *p;

	if (size > PTRDIFF_MAX) {
		if (!(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmalloc: %zu bytes is above PTRDIFF_MAX; no block", size);
		return NULL;
	}
	usl_ensure_init();                  /* the page size is known from here on */
	unsigned int order = usl_bytes_order(size);
	if (order > USL_MAX_ORDER) {
		p = usl_map_alloc(size, USL_PAGE_SIZE, gfp & __GFP_ZERO);
		if (!p && usl_reclaim_for_retry())   /* once more, with uslab's free memory given back */
			p = usl_map_alloc(size, USL_PAGE_SIZE, gfp & __GFP_ZERO);
		if (!p && !(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmalloc: out of memory for %zu bytes (a direct mapping)", size);
		return p;
	}
	bool zeroed = false;
	if (node != NUMA_NO_NODE && !usl_node_valid(node)) {
		usl_report(USLAB_ERR_BAD_ARG, "kmalloc_node: node %d does not exist (node ids 0-%u); allocated on the local node",
		           node, usl_nr_nodes - 1);
		node = NUMA_NO_NODE;
	}
	unsigned int nid = node == NUMA_NO_NODE ? usl_this_node() : (unsigned int)node;
	p = usl_pages_alloc_z(order, USL_PAGE_LARGE, nid, &zeroed);
	if (!p && usl_reclaim_for_retry())
		p = usl_pages_alloc_z(order, USL_PAGE_LARGE, nid, &zeroed);
	if (!p && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmalloc: out of memory for %zu bytes (order %u)", size, order);
	if (p && (gfp & __GFP_ZERO) && !zeroed)   /* a clean block is zero already, */
		memset(p, 0, size);                   /* and stays out of the RSS until used */
	return p;
}

void usl_kmalloc_note_size(void *p, size_t n)
{
	struct kmem_cache *s = owner_of(p);
	if (s && (s->flags & USL_SLAB_DEBUG_FLAGS) && usl_debug_is_object(s, p))
		usl_debug_resize(s, p, n);
}

void *usl_kmalloc_debug(struct kmem_cache *s, size_t size, gfp_t gfp, uintptr_t caller)
{
	return usl_debug_alloc(s, gfp, size, caller);
}

void *kmalloc(size_t size, gfp_t gfp)
{
	if (usl_unlikely(!size))
		return ZERO_SIZE_PTR;
	if (usl_likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = kmalloc_cache(size);
		if (usl_unlikely(s && (s->flags & USL_SLAB_DEBUG_FLAGS)))
			return usl_kmalloc_debug(s, size, gfp, (uintptr_t)__builtin_return_address(0));
		return s ? kmem_cache_alloc(s, gfp) : NULL;
	}
	return kmalloc_large(size, gfp, NUMA_NO_NODE);
}

/* malloc's classes for a program that keeps its own malloc (the Rust
 * crate's global allocator): the override's fast path, a table load and the
 * pop (hardened or plain, or the owned front end's); zeroing, sizes above
 * 8 KiB, classes not yet made and debug classes through usl_malloc_bytes. */
void *uslab_malloc(size_t size, gfp_t gfp)
{
	if (usl_likely(size <= KMALLOC_MAX_CACHE_SIZE && !(gfp & __GFP_ZERO))) {
		size_t i = (size + 15) >> 4;
		void *p;
		if (usl_malloc_fast(i, &p))
			return p;
		struct kmem_cache_cpu *slots = __atomic_load_n(&usl_malloc_plain[i], __ATOMIC_ACQUIRE);
		if (slots)
			return usl_malloc_pop_plain(usl_malloc_class(i), slots);
	}
	void *p = usl_malloc_bytes(size < 16 ? 16 : size, gfp | __GFP_NOWARN, (uintptr_t)__builtin_return_address(0));
	if (usl_unlikely(!p) && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "uslab_malloc: out of memory for %zu bytes", size);
	return p;
}

/* align: a power of two above 8. A block of max(n, align) rounded up to a
 * power of two is aligned (power-of-two classes and page blocks are naturally
 * aligned); beyond the largest block, an aligned mapping. NULL without a
 * report when out of memory or above PTRDIFF_MAX. */
void *usl_kmalloc_aligned(size_t align, size_t n, gfp_t gfp)
{
	size_t want = n > align ? n : align;
	if (want > PTRDIFF_MAX)
		return NULL;
	usl_ensure_init();                  /* the page size is known from here on */
	if (want <= (USL_PAGE_SIZE << USL_MAX_ORDER)) {
		size_t pow2 = 1;
		while (pow2 < want)
			pow2 <<= 1;
		void *p = kmalloc(pow2, gfp | __GFP_NOWARN);
		if (p && pow2 != n)
			usl_kmalloc_note_size(p, n ? n : 1);   /* a debug class red-zones the rest */
		return p;
	}
	void *p = usl_map_alloc(n, align, gfp & __GFP_ZERO);
	if (!p && usl_reclaim_for_retry())   /* once more, with uslab's free memory given back */
		p = usl_map_alloc(n, align, gfp & __GFP_ZERO);
	return p;
}

void *uslab_aligned_alloc(size_t align, size_t size, gfp_t gfp)
{
	if (usl_unlikely(!align || (align & (align - 1)))) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_aligned_alloc: alignment %zu is not a power of two; NULL returned",
		           align);
		return NULL;
	}
	if (align <= 8)
		return kmalloc(size, gfp);
	void *p = usl_kmalloc_aligned(align, size, gfp);
	if (usl_unlikely(!p) && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "uslab_aligned_alloc: out of memory for %zu bytes aligned to %zu", size,
		           align);
	return p;
}

void *kzalloc(size_t size, gfp_t gfp)
{
	return kmalloc(size, gfp | __GFP_ZERO);
}

/* A class's object from the node's slabs (kmem_cache_alloc_node: another
 * node's are reported and served locally); a large block from the node's
 * regions (a direct mapping, beyond the largest block, lands where the
 * kernel puts it). */
void *kmalloc_node(size_t size, gfp_t gfp, int node)
{
	if (usl_likely(node == NUMA_NO_NODE) || !size)
		return kmalloc(size, gfp);
	if (usl_likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = kmalloc_cache(size);
		if (usl_unlikely(s && (s->flags & USL_SLAB_DEBUG_FLAGS)))
			return usl_kmalloc_debug(s, size, gfp, (uintptr_t)__builtin_return_address(0));
		return s ? kmem_cache_alloc_node(s, gfp, node) : NULL;
	}
	return kmalloc_large(size, gfp, node);
}

void *kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	return kmalloc(bytes, gfp);
}

void *kcalloc(size_t n, size_t size, gfp_t gfp)
{
	return kmalloc_array(n, size, gfp | __GFP_ZERO);
}

void kfree(const void *p)
{
	usl_free_ptr((void *)p, "kfree");
}

size_t ksize(const void *p)
{
	return usl_ksize_as(p, "ksize");
}

size_t usl_ksize_as(const void *p, const char *fn)
{
	if (ZERO_OR_NULL_PTR(p))
		return 0;
	size_t n = block_size(p);
	if (!n)
		usl_report_bad_ptr(fn, p);
	return n;
}

void *krealloc(const void *p, size_t n, gfp_t gfp)
{
	size_t ks = 0;
	void *q;

	if (!n) {
		kfree(p);
		return ZERO_SIZE_PTR;
	}
	if (!ZERO_OR_NULL_PTR(p)) {
		ks = block_size(p);
		if (!ks) {
			usl_report_bad_ptr("krealloc", p);
			return NULL;
		}
		struct kmem_cache *s = owner_of(p);   /* (a direct mapping has none) */
		if (s && (s->flags & USL_SLAB_DEBUG_FLAGS) && n <= s->object_size) {
			/* In place: the size asked for, and the kmalloc red zone
			 * after it, follow (the kernel's krealloc with orig_size). */
			usl_debug_resize(s, (void *)p, n);
			if ((gfp & __GFP_ZERO) && n > ks)
				memset((char *)p + ks, 0, n - ks);
			return (void *)p;
		}
		/* A direct mapping that stays one: mremap, no copy (a buffer
		 * grown step by step is not copied each time). */
		size_t max_block = USL_PAGE_SIZE << USL_MAX_ORDER;
		if (ks > max_block && n > max_block && n > ks) {
			void *r = usl_map_resize((void *)p, n);
			if (r)
				return r;
		}
		if (ks >= n) {
			/* Fits: in place, as the kernel does. */
			if (gfp & __GFP_ZERO)
				memset((char *)p + n, 0, ks - n);
			return (void *)p;
		}
	}
	q = kmalloc(n, gfp);
	if (!q)
		return NULL;
	if (ks)
		memcpy(q, p, ks < n ? ks : n);
	kfree(p);
	return q;
}

char *kstrdup(const char *s, gfp_t gfp)
{
	if (!s)
		return NULL;
	size_t len = strlen(s) + 1;
	char *d = kmalloc(len, gfp);
	if (d)
		memcpy(d, s, len);
	return d;
}

void *kmemdup(const void *src, size_t len, gfp_t gfp)
{
	void *d = kmalloc(len, gfp);
	if (d && len)
		memcpy(d, src, len);
	return d;
}

/* Tests: the class cache that serves size (NULL above kmalloc-8k). */
struct kmem_cache *usl_kmalloc_cache_for(size_t size)
{
	return size && size <= KMALLOC_MAX_CACHE_SIZE ? kmalloc_cache(size) : NULL;
}
