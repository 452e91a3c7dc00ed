/* malloc.c - the malloc surface on the kmalloc family (built when
 * USLAB_MALLOC_OVERRIDE is on): malloc, free, calloc, realloc, the aligned
 * forms, malloc_usable_size, the C23 sized frees, the glibc extras, the
 * __libc_* names and C++ operator new/delete. Takes no lock of its own; a
 * thread re-entering malloc while uslab starts up is served from a static
 * bootstrap area (nothing here calls dlsym or allocates during start-up). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../kmalloc/kmalloc.h"
#include "../stats/stats.h"

#define MALLOC_ALIGN 16u                 /* glibc's guarantee on x86-64 */
#define EXPORT __attribute__((visibility("default")))

/* ===========================================================================
 * Start-up: the first malloc creates the kmalloc classes, and whatever libc
 * calls underneath (pthread_atfork, a report's stdio) may call malloc again on
 * this thread. Such calls get memory from a static area that is never freed.
 */
static __thread int in_startup;
static _Alignas(64) char boot_area[64 * 1024];
static size_t boot_used;

static bool is_boot(const void *p)
{
	return (const char *)p >= boot_area && (const char *)p < boot_area + sizeof(boot_area);
}

/* Each boot block is preceded by its size (for malloc_usable_size and
 * realloc); the address, not the offset, is aligned. */
static void *boot_alloc(size_t size, size_t align)
{
	const uintptr_t base = (uintptr_t)boot_area;
	size_t cur = __atomic_load_n(&boot_used, __ATOMIC_RELAXED), start;
	if (align < MALLOC_ALIGN)
		align = MALLOC_ALIGN;
	do {
		start = USL_ALIGN(base + cur + sizeof(size_t), align) - base;
		if (start + size > sizeof(boot_area) || start + size < start)
			return NULL;
	} while (!__atomic_compare_exchange_n(&boot_used, &cur, start + size, false, __ATOMIC_RELAXED,
	                                      __ATOMIC_RELAXED));
	memcpy(boot_area + start - sizeof(size_t), &size, sizeof(size_t));
	return boot_area + start;            /* static storage: zero until written */
}

static int classes_ready;

/* Before the first allocation: start uslab and make the kmalloc classes once,
 * with re-entry served from the boot area (malloc's own classes are made as
 * they are first used). */
static USL_SLOW_PATH bool startup(void)
{
	usl_free_ignore_area(boot_area, sizeof(boot_area));   /* free() of a boot block is no error */
	in_startup = 1;
	void *p = usl_malloc_bytes(16, GFP_KERNEL | __GFP_NOWARN, 0);  /* the kmalloc classes */
	kfree(p);
	in_startup = 0;
	if (p)
		__atomic_store_n(&classes_ready, 1, __ATOMIC_RELEASE);
	return p != NULL;
}

static inline bool ready(void)
{
	return usl_likely(__atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE)) || (!in_startup && startup());
}

/* ===========================================================================
 * The allocation core: size and alignment to a kmalloc block.
 */

/* Before the classes exist: the boot area while they are being made, else
 * (start-up failed) nothing. */
static USL_SLOW_PATH void *not_ready(size_t n, size_t align)
{
	void *b = in_startup ? boot_alloc(n ? n : 1, align) : NULL;
	if (!b)
		usl_malloc_nomem("malloc", n);
	return b;
}

/* Sizes up to 8 are served from the 16-byte class (16-byte alignment). The
 * common case is one table load and the cache's fast path; the table is empty
 * until start-up has made the classes. */
static inline void *alloc_bytes(size_t n, gfp_t gfp)
{
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE)) {
		struct kmem_cache *s = __atomic_load_n(&usl_malloc_tab[(n + 15) >> 4], __ATOMIC_ACQUIRE);
		if (usl_likely(s != NULL)) {
			/* A debug class (USLAB_DEBUG) learns the size asked for. */
			void *p = usl_unlikely(s->flags & USL_SLAB_DEBUG_FLAGS)
			                  ? usl_kmalloc_debug(s, n ? n : 1, gfp | __GFP_NOWARN,
			                                      (uintptr_t)__builtin_return_address(0))
			                  : kmem_cache_alloc(s, gfp | __GFP_NOWARN);
			if (usl_unlikely(!p))
				usl_malloc_nomem("malloc", n);
			return p;
		}
	}
	if (usl_unlikely(!ready()))
		return not_ready(n, MALLOC_ALIGN);
	void *p = usl_malloc_bytes(n < MALLOC_ALIGN ? MALLOC_ALIGN : n, gfp | __GFP_NOWARN,
	                           (uintptr_t)__builtin_return_address(0));
	if (usl_unlikely(!p))
		usl_malloc_nomem(gfp & __GFP_ZERO ? "calloc" : "malloc", n);
	return p;
}


/* align: a power of two. Power-of-two kmalloc classes and page blocks are
 * naturally aligned (usl_kmalloc_aligned); up to 8 KiB, malloc's class of the
 * power of two is the kmalloc cache kmalloc(pow2) takes (a power of two is a
 * class size), so its fast path serves first (the class made first if it is
 * not yet; a debug class publishes no slots and goes on below). */
static void *alloc_aligned(size_t align, size_t n, gfp_t gfp)
{
	if (align <= MALLOC_ALIGN)
		return alloc_bytes(n, gfp);
	if (usl_unlikely(!ready()))
		return not_ready(n, align);
	size_t want = n > align ? n : align;
	if (want <= KMALLOC_MAX_CACHE_SIZE && !(gfp & __GFP_ZERO)) {
		size_t pow2 = 1;
		while (pow2 < want)
			pow2 <<= 1;
		void *p;
		if (usl_malloc_fast((pow2 + 15) >> 4, &p))
			return p;
	}
	void *p = usl_kmalloc_aligned(align, n, gfp | __GFP_NOWARN);
	if (!p)
		usl_malloc_nomem("an aligned allocation", n);
	return p;
}

/* ===========================================================================
 * The C and POSIX surface
 */
/* malloc's cases other than a class that exists: hardening off (the plain
 * pop), large sizes, counters on, start-up. Out of line, so malloc itself is
 * a table load and the pop. */
static USL_OUT_OF_LINE void *malloc_other(size_t n)
{
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE)) {   /* hardening off: the plain pop */
		size_t i = (n + 15) >> 4;
		struct kmem_cache_cpu *slots = __atomic_load_n(&usl_malloc_plain[i], __ATOMIC_ACQUIRE);
		if (slots)
			return usl_malloc_pop_plain(usl_malloc_class(i), slots);
	}
	return alloc_bytes(n, GFP_KERNEL);
}

EXPORT void *malloc(size_t n)
{
	void *p;
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE) && usl_malloc_fast((n + 15) >> 4, &p))
		return p;
	return malloc_other(n);
}

/* free keeps errno (POSIX 2024): the paths that make system calls (munmap of
 * a mapping, madvise in a purge) save and restore it. kfree's path (the
 * common layer's usl_free_ptr, which also ticks the decay clock), with reports
 * naming free; blocks of the boot area are ignored there (startup). */
EXPORT void free(void *p)
{
	usl_free(p);
}

/* calloc: malloc's fast path, then the n bytes asked for cleared (a block of
 * a class is never fresh from the OS here: the sheaf's objects were used);
 * everything else (no class yet, large sizes, debug classes) by alloc_bytes
 * with __GFP_ZERO. */
EXPORT void *calloc(size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		usl_malloc_nomem("calloc", SIZE_MAX);
		return NULL;
	}
	if (usl_likely(n <= KMALLOC_MAX_CACHE_SIZE)) {
		const struct usl_malloc_class *c = usl_malloc_class((n + 15) >> 4);
		struct kmem_cache_cpu *slots = __atomic_load_n(&c->slots, __ATOMIC_ACQUIRE);
		if (usl_malloc_owned(slots)) {
			void *p = usl_owned_pop_tagged((uintptr_t)slots);
			return usl_likely(p != NULL) ? memset(p, 0, n) : NULL;
		}
		if (usl_likely(slots != NULL)) {
			void *p = usl_malloc_pop(c, slots);
			return usl_likely(p != NULL) ? memset(p, 0, n) : NULL;
		}
	}
	return alloc_bytes(n, GFP_KERNEL | __GFP_ZERO);
}

/* The usable size of p when it is no plain slab object (usl_obj_ksize's): a
 * boot block's, a debug class's or a large block's (0 with a report for a
 * pointer that is not ours). */
static size_t usable_other(const void *p)
{
	if (is_boot(p)) {
		size_t n;
		memcpy(&n, (const char *)p - sizeof(size_t), sizeof(size_t));
		return n;
	}
	return usl_ksize_as(p, "malloc_usable_size/realloc");
}

/* The usable size of p (0 with a report for a pointer that is not ours). */
static size_t usable(const void *p)
{
	size_t n = usl_obj_ksize(p);
	return usl_likely(n) ? n : usable_other(p);
}

EXPORT void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	if (!n) {                            /* glibc: frees and returns NULL */
		free(p);
		return NULL;
	}
	/* plain: an object of a class without debugging (usl_obj_ksize) */
	size_t old = usl_obj_ksize(p);
	bool plain = old != 0;
	if (!plain && !(old = usable_other(p)))
		return NULL;                     /* reported by ksize; errno untouched */
	/* A direct mapping that stays one: mremap, no copy (growing a big buffer
	 * step by step would otherwise copy it each time). */
	size_t max_block = USL_PAGE_SIZE << USL_MAX_ORDER;
	if (old > max_block && n > max_block && !is_boot(p)) {
		void *q = usl_map_resize(p, n);
		if (q)
			return q;
	}
	/* In place while it fits and the block is not more than twice too big
	 * (a shrink to a much smaller size moves, so memory is given back). */
	if (n <= old && (n > old / 2 || old <= 2 * MALLOC_ALIGN) && !is_boot(p)) {
		if (n < old && !plain)
			usl_kmalloc_note_size(p, n);     /* a debug class red-zones the rest */
		return p;
	}
	void *q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	free(p);
	return q;
}

EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(nmemb, size, &n)) {
		usl_malloc_nomem("reallocarray", SIZE_MAX);
		return NULL;
	}
	return realloc(p, n);
}

EXPORT int posix_memalign(void **memptr, size_t align, size_t n)
{
	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	void *p = alloc_aligned(align, n, GFP_KERNEL);
	if (!p)
		return ENOMEM;                   /* errno ENOMEM too, as glibc sets it */
	*memptr = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return alloc_aligned(align, n, GFP_KERNEL);
}

EXPORT void *memalign(size_t align, size_t n)
{
	if (align & (align - 1)) {           /* glibc rounds up to a power of two */
		size_t a = 1;
		while (a && a < align)
			a <<= 1;
		if (!a) {
			errno = EINVAL;
			return NULL;
		}
		align = a;
	}
	return alloc_aligned(align ? align : 1, n, GFP_KERNEL);
}

/* valloc and pvalloc take the page size from usl_os_page_size (the aux
 * vector): they may run before uslab has started, and must not start it from
 * inside its own start-up. */
EXPORT void *valloc(size_t n)
{
	return alloc_aligned(usl_os_page_size(), n, GFP_KERNEL);
}

EXPORT void *pvalloc(size_t n)
{
	size_t ps = usl_os_page_size();
	size_t r = USL_ALIGN(n ? n : 1, ps);
	if (r < n) {
		usl_malloc_nomem("pvalloc", SIZE_MAX);
		return NULL;
	}
	return alloc_aligned(ps, r, GFP_KERNEL);
}

EXPORT size_t malloc_usable_size(void *p)
{
	return p ? usable(p) : 0;
}

EXPORT void free_sized(void *p, size_t size)
{
	usl_free_sized(p, size, "free_sized");
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
	(void)align;
	usl_free_sized(p, size, "free_aligned_sized");
}

EXPORT void cfree(void *p)
{
	free(p);
}

/* ---- glibc's extras ---- */

EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	return uslab_release_free_memory() > 0;
}

/* A static link keeps the live view's file (its constructor is named nowhere
 * else). */
__attribute__((used)) static void (*const keep_live_view)(void) = usl_live_init;

/* The heap as slabinfo counts it (stats/slabinfo.c: the program's caches'
 * slabs and active objects) and the page provider's blocks around it. */
struct heap {
	size_t committed, free_dirty, free_clean, slabs, objects, large;
	unsigned long long node_slabs[USL_MAX_NODES], node_objects[USL_MAX_NODES];   /* more than one node */
};

static void heap_read(struct heap *h)
{
	struct usl_heap_totals t;
	usl_ensure_init();
	usl_pages_stats(&h->committed, &h->free_dirty, &h->free_clean);
	usl_heap_totals(&t);
	h->slabs = (size_t)t.slab_bytes;
	h->objects = (size_t)t.active_bytes;
	memcpy(h->node_slabs, t.node_slab_bytes, sizeof(h->node_slabs));
	memcpy(h->node_objects, t.node_active_bytes, sizeof(h->node_objects));
	size_t used = h->committed - h->free_dirty - h->free_clean;   /* slabs and large blocks */
	h->large = used > h->slabs ? used - h->slabs : 0;
}

static size_t heap_free(const struct heap *h)
{
	return h->committed > h->objects + h->large ? h->committed - h->objects - h->large : 0;
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi;
	struct heap h;

	memset(&mi, 0, sizeof(mi));
	heap_read(&h);
	mi.arena = h.committed;                       /* the heap range's pages in use or free */
	mi.uordblks = h.objects + h.large;            /* slabinfo's active objects, and large blocks */
	mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
	mi.fsmblks = h.slabs > h.objects ? h.slabs - h.objects : 0;   /* free objects in slabs */
	mi.keepcost = h.free_clean;                   /* free pages given back to the OS */
	mi.hblkhd = usl_map_bytes();                  /* direct mappings */
	mi.hblks = usl_map_count();
	return mi;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m2 = mallinfo2();
	struct mallinfo mi;
	memset(&mi, 0, sizeof(mi));
	mi.arena = (int)m2.arena;
	mi.fordblks = (int)m2.fordblks;
	mi.uordblks = (int)m2.uordblks;
	mi.keepcost = (int)m2.keepcost;
	mi.hblkhd = (int)m2.hblkhd;
	mi.hblks = (int)m2.hblks;
	return mi;
}

/* glibc's lines first, as tools parse them (uslab has one "arena": the
 * range), then uslab's own. Not a cancellation point: cancellation is off
 * for the call, as glibc's is. */
EXPORT void malloc_stats(void)
{
	int cancel;
	struct heap h;
	size_t max_maps, max_map_bytes;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	heap_read(&h);
	usl_map_peaks(&max_maps, &max_map_bytes);
	size_t inuse = h.objects + h.large;
	/* glibc's layout, not a report's "uslab: " prefix (that one means a problem). */
	fprintf(stderr, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
	        "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
	        "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n",
	        h.committed, inuse, h.committed + usl_map_bytes(), inuse + usl_map_bytes(), max_maps, max_map_bytes);
	fprintf(stderr, "uslab malloc_stats\ncommitted bytes    = %10zu\nin use bytes       = %10zu\n"
	        "  in objects       = %10zu   (slabinfo: active_objs * objsize)\n"
	        "  in large blocks  = %10zu\nslab bytes         = %10zu   (slabinfo: num_slabs * pagesperslab pages)\n"
	        "free bytes         = %10zu\nreturned to the OS = %10zu\nmmap regions       = %10zu\n"
	        "mmap bytes         = %10zu\n", h.committed, inuse, h.objects, h.large, h.slabs,
	        heap_free(&h), h.free_clean, usl_map_count(), usl_map_bytes());
	pthread_setcancelstate(cancel, NULL);
}

EXPORT int malloc_info(int options, FILE *fp)
{
	if (options != 0 || !fp) {
		errno = EINVAL;
		return -1;
	}
	struct heap h;
	heap_read(&h);
	fprintf(fp, "<malloc version=\"uslab-1\">\n<total type=\"committed\" size=\"%zu\"/>\n"
	        "<total type=\"inuse\" size=\"%zu\"/>\n<total type=\"objects\" size=\"%zu\"/>\n"
	        "<total type=\"large\" size=\"%zu\"/>\n<total type=\"slabs\" size=\"%zu\"/>\n"
	        "<total type=\"free\" size=\"%zu\"/>\n<total type=\"returned\" size=\"%zu\"/>\n"
	        "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n",
	        h.committed, h.objects + h.large, h.objects, h.large, h.slabs, heap_free(&h),
	        h.free_clean, usl_map_count(), usl_map_bytes());
	/* More than one node: each node's part (its regions, and the slabs and
	 * objects of the program's caches on it). */
	for (unsigned int nid = 0; usl_nr_nodes > 1 && nid < usl_nr_nodes; nid++)
		if (usl_node_valid((int)nid))
			fprintf(fp, "<node nr=\"%u\">\n<total type=\"committed\" size=\"%zu\"/>\n"
			        "<total type=\"slabs\" size=\"%llu\"/>\n<total type=\"objects\" size=\"%llu\"/>\n</node>\n",
			        nid, usl_pages_node_bytes(nid), h.node_slabs[nid], h.node_objects[nid]);
	fputs("</malloc>\n", fp);
	return 0;
}

EXPORT int mallopt(int param, int value)
{
	(void)param;
	(void)value;
	return 1;                            /* accepted; uslab has no such knobs */
}

/* ---- glibc's internal names (static linking, and programs that call them) ---- */
/* Wrappers rather than aliases: glibc's declarations carry attributes an alias
 * would have to repeat. */
#define LIBC_NAME(sym, ret, params, call) \
	EXPORT ret usl_libc_##sym params __asm__(#sym); \
	ret usl_libc_##sym params { return call; }
LIBC_NAME(__libc_malloc, void *, (size_t n), malloc(n))
LIBC_NAME(__libc_free, void, (void *p), free(p))
LIBC_NAME(__libc_calloc, void *, (size_t a, size_t b), calloc(a, b))
LIBC_NAME(__libc_realloc, void *, (void *p, size_t n), realloc(p, n))
LIBC_NAME(__libc_memalign, void *, (size_t a, size_t n), memalign(a, n))
LIBC_NAME(__libc_valloc, void *, (size_t n), valloc(n))
LIBC_NAME(__libc_pvalloc, void *, (size_t n), pvalloc(n))
LIBC_NAME(__libc_cfree, void, (void *p), free(p))
LIBC_NAME(__posix_memalign, int, (void **r, size_t a, size_t n), posix_memalign(r, a, n))

/* ===========================================================================
 * C++ operator new and delete, defined here under their mangled names so that
 * libuslab needs no C++ runtime. The throwing forms call the program's new
 * handler and throw std::bad_alloc through libstdc++ (weak references: a C
 * program without libstdc++ never throws; it aborts with a message instead).
 */
typedef void (*new_handler_fn)(void);
extern new_handler_fn usl_cxx_get_new_handler(void) __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
extern void usl_cxx_throw_bad_alloc(void) __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak, noreturn));

static USL_SLOW_PATH void *new_failed(size_t align, size_t n)
{
	for (;;) {
		new_handler_fn h = usl_cxx_get_new_handler ? usl_cxx_get_new_handler() : NULL;
		if (!h) {
			if (usl_cxx_throw_bad_alloc)
				usl_cxx_throw_bad_alloc();
			usl_report(USLAB_ERR_NOMEM, "operator new(%zu): out of memory and no C++ runtime to throw; aborting", n);
			abort();
		}
		h();
		void *p = align > MALLOC_ALIGN ? alloc_aligned(align, n, GFP_KERNEL) : alloc_bytes(n, GFP_KERNEL);
		if (p)
			return p;
	}
}

static inline void *op_new(size_t n)
{
	void *p = alloc_bytes(n, GFP_KERNEL);
	return usl_likely(p != NULL) ? p : new_failed(0, n);
}

static inline void *op_new_aligned(size_t n, size_t align)
{
	void *p = alloc_aligned(align, n, GFP_KERNEL);
	return usl_likely(p != NULL) ? p : new_failed(align, n);
}

static void *op_new_nothrow(size_t n)
{
	return alloc_bytes(n, GFP_KERNEL);
}

static void *op_new_aligned_nothrow(size_t n, size_t align)
{
	return alloc_aligned(align, n, GFP_KERNEL);
}

static void op_delete(void *p)
{
	free(p);
}

#define CXX(sym, fn, ret, args) \
	EXPORT ret usl_cxx_##sym args __asm__(#sym) __attribute__((alias(#fn)))
/* new: (size), (size, nothrow), (size, align), (size, align, nothrow); [] alike. */
static void *op_new_1(size_t n) { return op_new(n); }
static void *op_new_2(size_t n, const void *nt) { (void)nt; return op_new_nothrow(n); }
static void *op_new_3(size_t n, size_t al) { return op_new_aligned(n, al); }
static void *op_new_4(size_t n, size_t al, const void *nt) { (void)nt; return op_new_aligned_nothrow(n, al); }
/* delete: (p), (p, size), (p, align), (p, size, align), (p, nothrow), (p, align, nothrow). */
static void op_del_1(void *p) { op_delete(p); }
/* (p, size) and (p, size, align) name the size: checked for debug caches. The
 * (p, align) forms share op_del_2's signature but not its meaning. */
static void op_del_2(void *p, size_t x) { usl_free_sized(p, x, "operator delete"); }
static void op_del_al(void *p, size_t al) { (void)al; op_delete(p); }
static void op_del_3(void *p, size_t x, size_t y) { (void)y; usl_free_sized(p, x, "operator delete"); }
static void op_del_nt(void *p, const void *nt) { (void)nt; op_delete(p); }
static void op_del_al_nt(void *p, size_t al, const void *nt) { (void)al; (void)nt; op_delete(p); }
CXX(_Znwm, op_new_1, void *, (size_t));
CXX(_Znam, op_new_1, void *, (size_t));
CXX(_ZnwmRKSt9nothrow_t, op_new_2, void *, (size_t, const void *));
CXX(_ZnamRKSt9nothrow_t, op_new_2, void *, (size_t, const void *));
CXX(_ZnwmSt11align_val_t, op_new_3, void *, (size_t, size_t));
CXX(_ZnamSt11align_val_t, op_new_3, void *, (size_t, size_t));
CXX(_ZnwmSt11align_val_tRKSt9nothrow_t, op_new_4, void *, (size_t, size_t, const void *));
CXX(_ZnamSt11align_val_tRKSt9nothrow_t, op_new_4, void *, (size_t, size_t, const void *));
CXX(_ZdlPv, op_del_1, void, (void *));
CXX(_ZdaPv, op_del_1, void, (void *));
CXX(_ZdlPvm, op_del_2, void, (void *, size_t));
CXX(_ZdaPvm, op_del_2, void, (void *, size_t));
CXX(_ZdlPvSt11align_val_t, op_del_al, void, (void *, size_t));
CXX(_ZdaPvSt11align_val_t, op_del_al, void, (void *, size_t));
CXX(_ZdlPvmSt11align_val_t, op_del_3, void, (void *, size_t, size_t));
CXX(_ZdaPvmSt11align_val_t, op_del_3, void, (void *, size_t, size_t));
CXX(_ZdlPvRKSt9nothrow_t, op_del_nt, void, (void *, const void *));
CXX(_ZdaPvRKSt9nothrow_t, op_del_nt, void, (void *, const void *));
CXX(_ZdlPvSt11align_val_tRKSt9nothrow_t, op_del_al_nt, void, (void *, size_t, const void *));
CXX(_ZdaPvSt11align_val_tRKSt9nothrow_t, op_del_al_nt, void, (void *, size_t, const void *));
