/* kmalloc.c - the kmalloc family (reference section 8): size classes kmalloc-8 ..
 * kmalloc-8k, larger blocks straight from the page provider, and beyond its
 * largest order direct mappings kept in a small registry. Locks: kmalloc_lock
 * (creating the classes; taken before slab_mutex) and huge_lock (the registry,
 * innermost, never held across a call out). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

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
static pthread_mutex_t kmalloc_lock = PTHREAD_MUTEX_INITIALIZER;

static inline unsigned int kmalloc_index(size_t size)
{
	if (size <= 192)
		return size_index[(size - 1) / 8];
	return (unsigned int)(64 - __builtin_clzl(size - 1));   /* fls(size - 1) */
}

/* kmalloc_lock, counted in usl_registry_held while held. */
static void classes_lock(void)
{
	pthread_mutex_lock(&kmalloc_lock);
	usl_registry_held++;
}

static void classes_unlock(void)
{
	usl_registry_held--;
	pthread_mutex_unlock(&kmalloc_lock);
}

/* Run make (which fills a class table, skipping entries made by an earlier
 * try) once under kmalloc_lock, and publish *ready when it succeeded. */
static bool create_once(int *ready, bool (*make)(void))
{
	bool ok = true;
	classes_lock();
	if (!__atomic_load_n(ready, __ATOMIC_ACQUIRE)) {
		ok = make();
		if (ok)
			__atomic_store_n(ready, 1, __ATOMIC_RELEASE);
	}
	classes_unlock();
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
		 * page (the block does the rest). */
		unsigned int align = (size & (size - 1)) ? 8 : size;
		if (align > usl_page_size)
			align = (unsigned int)usl_page_size;
		kmalloc_caches[i] = usl_cache_create(kmalloc_info[i].name, size, align, 0, NULL, NULL, USL_CACHE_KMALLOC, 0);
		ok = kmalloc_caches[i] != NULL;
	}
	return ok;
}

static __attribute__((noinline, cold)) bool kmalloc_create_caches(void)
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
 * / 15, so sqlite's 4368-byte page buffers waste nothing (the eighth steps
 * before gave them 4608), and a slab wastes under 16 bytes an object. A size
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
struct kmem_cache_cpu *usl_malloc_slots[USL_MALLOC_TAB];

/* A class cache: the kmalloc one of that size, or a malloc-<size> cache. */
static struct kmem_cache *malloc_class(unsigned int size)
{
	if (!(size & (size - 1)) || size == 96 || size == 192)
		return kmalloc_caches[kmalloc_index(size)];
	char name[32];
	usl_name_number(name, sizeof(name), "malloc-", size);
	return usl_cache_create(name, size, 16, 0, NULL, NULL, USL_CACHE_KMALLOC, size > 256 ? malloc_slab_bytes(size) : 0);
}

/* Make the class serving n, then publish it in every table entry it serves
 * (after it is made, so a reader that sees an entry sees a made cache). Once
 * per class, under kmalloc_lock; the kmalloc classes first, as some classes
 * are theirs. NULL if it cannot be made. A thread already holding the
 * registry's locks (a report handler that mallocs) gets the kmalloc class. */
static __attribute__((noinline, cold)) struct kmem_cache *malloc_make_class(size_t n)
{
	size_t i = n ? (n + 15) >> 4 : 1;
	struct kmem_cache *s;

	if (usl_registry_held)
		return kmalloc_cache(n ? n : 1);
	if (!kmalloc_cache(1))
		return NULL;
	classes_lock();
	s = usl_malloc_tab[i];
	if (!s) {
		unsigned int size = malloc_class_size(i * 16);
		s = malloc_class(size);
		for (size_t j = 0; s && j < USL_MALLOC_TAB; j++)      /* entry 0 (malloc(0)) as entry 1 */
			if (malloc_class_size(j ? j * 16 : 16) == size) {
				/* the cache first: malloc's slow path reads it
				 * after it has seen the slots */
				__atomic_store_n(&usl_malloc_tab[j], s, __ATOMIC_RELEASE);
				__atomic_store_n(&usl_malloc_slots[j], s->cpu_slab, __ATOMIC_RELEASE);
			}
	}
	classes_unlock();
	return s;
}

/* The malloc path's cache for 0 .. 8192 bytes; NULL if it cannot be made. */
static inline struct kmem_cache *malloc_cache(size_t n)
{
	struct kmem_cache *s = __atomic_load_n(&usl_malloc_tab[(n + 15) >> 4], __ATOMIC_ACQUIRE);
	return usl_likely(s != NULL) ? s : malloc_make_class(n);
}

void *usl_malloc_bytes(size_t n, gfp_t gfp)
{
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = malloc_cache(n);
		return s ? kmem_cache_alloc(s, gfp) : NULL;
	}
	return kmalloc(n, gfp);
}

struct kmem_cache *usl_malloc_cache_for(size_t n)
{
	return n && n <= KMALLOC_MAX_CACHE_SIZE ? malloc_cache(n) : NULL;
}

/* ===========================================================================
 * Direct mappings: above the page provider's largest block. The registry is an
 * open-addressing table of {address, length} in its own mapping, doubled when
 * half full; a pointer outside the reserved range is one of these or foreign.
 */
struct huge_entry {
	uintptr_t addr;      /* 0: empty; 1: deleted */
	size_t len;
};
static struct huge_entry *huge_tab;
static size_t huge_cap, huge_used, huge_live, huge_bytes;
static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
#define HUGE_DELETED ((uintptr_t)1)

static inline size_t huge_slot(uintptr_t a, size_t cap)
{
	return (size_t)((a >> 12) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

/* Under huge_lock. */
static struct huge_entry *huge_find(uintptr_t a)
{
	if (!huge_cap)
		return NULL;
	for (size_t i = huge_slot(a, huge_cap);; i = (i + 1) & (huge_cap - 1)) {
		if (huge_tab[i].addr == a)
			return &huge_tab[i];
		if (!huge_tab[i].addr)
			return NULL;
	}
}

/* Under huge_lock: room for one more entry. */
static bool huge_reserve(void)
{
	if ((huge_used + 1) * 2 <= huge_cap)
		return true;
	size_t cap = huge_cap ? huge_cap * 2 : 256;
	if (huge_live * 4 < huge_cap)
		cap = huge_cap;                     /* mostly deleted entries: rehash in place size */
	struct huge_entry *t = mmap(NULL, cap * sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return false;
	for (size_t i = 0; i < huge_cap; i++) {
		if (huge_tab[i].addr <= HUGE_DELETED)
			continue;
		size_t j = huge_slot(huge_tab[i].addr, cap);
		while (t[j].addr)
			j = (j + 1) & (cap - 1);
		t[j] = huge_tab[i];
	}
	if (huge_tab)
		munmap(huge_tab, huge_cap * sizeof(*huge_tab));
	huge_tab = t;
	huge_cap = cap;
	huge_used = huge_live;
	return true;
}

/* Under huge_lock, with room reserved: enter [p, p + len) (counters aside). */
static void huge_insert_locked(void *p, size_t len)
{
	size_t i = huge_slot((uintptr_t)p, huge_cap);
	while (huge_tab[i].addr > HUGE_DELETED)
		i = (i + 1) & (huge_cap - 1);
	if (!huge_tab[i].addr)
		huge_used++;
	huge_tab[i].addr = (uintptr_t)p;
	huge_tab[i].len = len;
}

/* Record the mapping [p, p + len) (len a page multiple); false if the table
 * cannot grow. */
static bool huge_record(void *p, size_t len)
{
	pthread_mutex_lock(&huge_lock);
	bool ok = huge_reserve();
	if (ok) {
		huge_insert_locked(p, len);
		__atomic_store_n(&huge_live, huge_live + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&huge_bytes, huge_bytes + len, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&huge_lock);
	return ok;
}

/* A direct mapping of size bytes aligned to align (a power of two; a page
 * unless more is asked): above a page, map size + align and unmap the
 * unaligned head and the tail. Fresh anonymous memory reads as zeros. */
void *usl_kmalloc_huge_aligned(size_t size, size_t align, gfp_t gfp)
{
	(void)gfp;
	size_t len = USL_ALIGN(size ? size : 1, usl_page_size);
	size_t extra = align > usl_page_size ? align : 0;
	if (len < size || len + extra < len || len + extra > PTRDIFF_MAX)
		return NULL;
	char *raw = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	char *p = extra ? (char *)USL_ALIGN((uintptr_t)raw, align) : raw;
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + len + extra > p + len)
		munmap(p + len, (size_t)(raw + len + extra - (p + len)));
	if (!huge_record(p, len)) {
		munmap(p, len);
		return NULL;
	}
	return p;
}

size_t usl_kmalloc_huge_bytes(void)
{
	return __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
}

size_t usl_kmalloc_huge_count(void)
{
	return __atomic_load_n(&huge_live, __ATOMIC_RELAXED);
}

/* The length of the direct mapping starting at p, 0 if there is none. */
static size_t huge_size(const void *p)
{
	pthread_mutex_lock(&huge_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	size_t len = e ? e->len : 0;
	pthread_mutex_unlock(&huge_lock);
	return len;
}

/* Resize the direct mapping at p to hold n bytes (mremap, which may move it);
 * the new address, or NULL (p unchanged) if p is not a mapping or the kernel
 * refuses. Under huge_lock throughout, so the table never names a stale range. */
void *usl_kmalloc_huge_resize(void *p, size_t n)
{
	size_t len = USL_ALIGN(n, usl_page_size);
	void *q = NULL;

	if (len < n || len > PTRDIFF_MAX)
		return NULL;
	pthread_mutex_lock(&huge_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	if (e) {
		int saved_errno = errno;
		q = e->len == len ? p : mremap(p, e->len, len, MREMAP_MAYMOVE);
		errno = saved_errno;
		if (q == MAP_FAILED) {
			q = NULL;
		} else if (q != p) {
			/* Moved: the entry goes to its new slot (the table has room: a
			 * deletion frees one, and reserve never fails below half full). */
			size_t old_len = e->len;
			e->addr = HUGE_DELETED;
			huge_insert_locked(q, len);
			__atomic_store_n(&huge_bytes, huge_bytes - old_len + len, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n(&huge_bytes, huge_bytes - e->len + len, __ATOMIC_RELAXED);
			e->len = len;
		}
	}
	pthread_mutex_unlock(&huge_lock);
	return q;
}

/* Unmap the direct mapping at p; false if there is none. */
static bool huge_free(const void *p)
{
	pthread_mutex_lock(&huge_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	size_t len = 0;
	if (e) {
		len = e->len;
		e->addr = HUGE_DELETED;
		__atomic_store_n(&huge_live, huge_live - 1, __ATOMIC_RELAXED);
		__atomic_store_n(&huge_bytes, huge_bytes - len, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&huge_lock);
	if (!e)
		return false;
	int saved_errno = errno;            /* free() must keep errno */
	munmap((void *)p, len);
	errno = saved_errno;
	return true;
}

void usl_kmalloc_fork_lock(void)
{
	pthread_mutex_lock(&kmalloc_lock);
}
void usl_kmalloc_fork_lock_inner(void)
{
	pthread_mutex_lock(&huge_lock);
}
void usl_kmalloc_fork_unlock_inner(void)
{
	pthread_mutex_unlock(&huge_lock);
}
void usl_kmalloc_fork_unlock(void)
{
	pthread_mutex_unlock(&kmalloc_lock);
}

/* ===========================================================================
 * What a pointer is
 */

/* The cache owning the page at the committed offset off, or NULL: not a slab,
 * or a slab of uslab's own (cache structures, sheaves), which no kfree may
 * touch (kfree of a struct kmem_cache is reported, not done). */
static inline struct kmem_cache *page_owner(uintptr_t off)
{
	return usl_pagemap_user_cache(usl_pm_read(&usl_pagemap[off >> usl_page_shift]));
}

/* The bytes of a slab object the caller may use: the stride, unless metadata
 * (a free pointer kept outside the object) follows the object. */
static inline size_t slab_ksize(const struct kmem_cache *s)
{
	unsigned int inuse = __atomic_load_n(&s->inuse, __ATOMIC_RELAXED);   /* raised by make_alias */
	return s->offset >= inuse ? inuse : s->size;
}

/* The usable bytes of the block p starts (a slab object, a large block or a
 * mapping); 0 if p starts none. */
static size_t block_size(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;

	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)) {
		struct kmem_cache *s = page_owner(off);
		if (s)   /* an object's start, not inside one */
			return usl_slub_obj_ok(s, p) ? slab_ksize(s) : 0;
		struct slab *h = usl_virt_to_slab(p);
		if (h && __atomic_load_n(&h->kind, __ATOMIC_ACQUIRE) == USL_PAGE_LARGE && (const char *)p == h->addr)
			return usl_order_bytes(h->order);
		return 0;
	}
	return huge_size(p);
}

static __attribute__((noinline, cold)) void report_bad(const char *fn, const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))
		usl_report(USLAB_ERR_NOT_OBJECT, "%s: %p is not an allocated kmalloc block (free already, or inside one); ignored",
		           fn, p);
	else
		usl_report(USLAB_ERR_FOREIGN, "%s: %p is not a uslab pointer; ignored", fn, p);
}

/* ===========================================================================
 * The family
 */
static __attribute__((noinline)) void *kmalloc_large(size_t size, gfp_t gfp)
{
	void *p;

	if (size > PTRDIFF_MAX)
		return NULL;
	usl_ensure_init();                  /* the page size is known from here on */
	unsigned int order = usl_bytes_order(size);
	if (order > USL_MAX_ORDER)
		return usl_kmalloc_huge_aligned(size, usl_page_size, gfp);
	bool zeroed = false;
	p = usl_pages_alloc_z(order, USL_PAGE_LARGE, &zeroed);
	if (!p && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmalloc: out of memory for %zu bytes (order %u)", size, order);
	if (p && (gfp & __GFP_ZERO) && !zeroed)   /* a clean block is zero already, */
		memset(p, 0, size);                   /* and stays out of the RSS until used */
	return p;
}

void *kmalloc(size_t size, gfp_t gfp)
{
	if (usl_unlikely(!size))
		return ZERO_SIZE_PTR;
	if (usl_likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = kmalloc_cache(size);
		return s ? kmem_cache_alloc(s, gfp) : NULL;
	}
	return kmalloc_large(size, gfp);
}

void *kzalloc(size_t size, gfp_t gfp)
{
	return kmalloc(size, gfp | __GFP_ZERO);
}

void *kmalloc_node(size_t size, gfp_t gfp, int node)
{
	(void)node;               /* one node: a hint */
	return kmalloc(size, gfp);
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
	usl_kfree_as(p, "kfree");
}

/* kfree's other cases: NULL and ZERO_SIZE_PTR, large blocks, mappings and
 * pointers that are none of these (reported under fn). Kept out of line so
 * the slab-object path below saves no registers. */
static __attribute__((noinline)) void kfree_other(void *p, const char *fn)
{
	if (ZERO_OR_NULL_PTR(p))
		return;
	uintptr_t off = (uintptr_t)p - usl_base;
	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)) {
		if (usl_pages_free_large((void *)p))
			return;
	} else if (huge_free(p)) {
		return;
	}
	report_bad(fn, p);
}

/* kfree, with reports naming fn (free() reports as "free"). */
void usl_kfree_as(const void *p, const char *fn)
{
	usl_slub_kfree_or((void *)p, fn, kfree_other);   /* a slab object: checked, freed or reported */
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
		report_bad(fn, p);
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
			report_bad("krealloc", p);
			return NULL;
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

/* kfree_bulk's entries that are not slab objects (large blocks, direct
 * mappings, ZERO_SIZE_PTR, bad pointers) are freed or reported here one by one
 * and cleared, so the bulk path sees only slab objects and NULLs. */
void usl_kfree_bulk_nonslab(size_t nr, void **p)
{
	const uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	for (size_t i = 0; i < nr; i++) {
		if (!p[i])
			continue;
		uintptr_t off = (uintptr_t)p[i] - usl_base;
		if (off < top && page_owner(off))
			continue;
		kfree(p[i]);
		p[i] = NULL;
	}
}

/* Tests: the class cache that serves size (NULL above kmalloc-8k). */
struct kmem_cache *usl_kmalloc_cache_for(size_t size)
{
	return size && size <= KMALLOC_MAX_CACHE_SIZE ? kmalloc_cache(size) : NULL;
}
