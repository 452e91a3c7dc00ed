/* internal.h - every internal layout (struct slab, kmem_cache, slot, node) and the
 * usl_* interfaces between files, grouped by owning file. Takes no locks.
 * Vocabulary (page, block, slab, object, slot): docs/ARCHITECTURE.md section 1. */
#ifndef USL_INTERNAL_H
#define USL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "uslab.h"

#define USL_HIDDEN __attribute__((visibility("hidden")))
#define usl_likely(x) __builtin_expect(!!(x), 1)
#define usl_unlikely(x) __builtin_expect(!!(x), 0)
#define USL_ALIGN(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define USL_CACHELINE 64

#if defined(__SANITIZE_THREAD__)
#define USL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define USL_TSAN 1
#endif
#endif
#ifndef USL_TSAN
#define USL_TSAN 0
#endif

/* ---------------------------------------------------------------------------
 * Intrusive doubly linked list (node partial lists, page provider free lists).
 */
struct usl_list {
	struct usl_list *next, *prev;
};

static inline void usl_list_init(struct usl_list *h) { h->next = h->prev = h; }
static inline bool usl_list_empty(const struct usl_list *h) { return h->next == h; }
static inline void usl_list_add_between(struct usl_list *n, struct usl_list *p, struct usl_list *nx)
{
	n->next = nx;
	n->prev = p;
	p->next = n;
	nx->prev = n;
}
static inline void usl_list_add_head(struct usl_list *n, struct usl_list *h) { usl_list_add_between(n, h, h->next); }
static inline void usl_list_add_tail(struct usl_list *n, struct usl_list *h) { usl_list_add_between(n, h->prev, h); }
static inline void usl_list_del(struct usl_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
#define usl_container_of(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ---------------------------------------------------------------------------
 * struct slab: the user-space struct page. One table entry per page of the
 * reserved range (usl_table_index orders them); only a block's head entry is
 * used. 64 bytes.
 */
enum usl_page_kind {
	USL_PAGE_UNUSED = 0,   /* never handed out, or free (pages.c keeps free blocks in bitmaps) */
	USL_PAGE_SLAB,         /* head of a slab */
	USL_PAGE_LARGE,        /* head of a large kmalloc block */
	USL_PAGE_INTERNAL,     /* head of a block holding uslab's own metadata */
};

struct slab {
	/* freelist and counters form one 16-byte-aligned pair, changed together by
	 * one 16-byte compare-and-swap (usl_cas16). */
	void *freelist;              /* free objects not on a cpu freelist */
	unsigned long counters;      /* inuse:16 | objects:15 << 16 | frozen:1 << 31 | uncarved:16 << 32 */
	struct kmem_cache *slab_cache;
	void *unused;                /* unused (keeps the entry at 64 bytes) */
	union {                      /* a slab is on at most one of these */
		struct usl_list slab_list;   /* node partial list */
		struct {
			struct slab *next;   /* cpu partial chain (or a private list) */
			uint32_t slabs;      /* cpu partial: slabs in the chain from here */
		};
	};
	char *addr;                  /* heads: the block's first byte */
	uint8_t kind;                /* enum usl_page_kind */
	uint8_t order;               /* block order (heads only) */
	uint8_t node_partial;        /* on n->partial; set and cleared under list_lock */
	uint8_t pad8;
	uint32_t pad;
} __attribute__((aligned(16)));

_Static_assert(sizeof(struct slab) == 64, "struct slab must be 64 bytes");
_Static_assert(offsetof(struct slab, freelist) % 16 == 0, "freelist pair must be 16-byte aligned");
_Static_assert(offsetof(struct slab, counters) == offsetof(struct slab, freelist) + 8, "pair");

#define USL_INUSE_MASK 0xffffUL
#define USL_OBJECTS_SHIFT 16
#define USL_OBJECTS_MASK 0x7fffUL
#define USL_FROZEN_BIT (1UL << 31)
#define USL_UNCARVED_SHIFT 32
#define USL_MAX_OBJS_PER_SLAB 32767

static inline unsigned int usl_counters_inuse(unsigned long c) { return (unsigned int)(c & USL_INUSE_MASK); }
static inline unsigned int usl_counters_objects(unsigned long c) { return (unsigned int)((c >> USL_OBJECTS_SHIFT) & USL_OBJECTS_MASK); }
static inline bool usl_counters_frozen(unsigned long c) { return (c & USL_FROZEN_BIT) != 0; }
/* Objects at the slab's end never linked into any freelist (so never touched):
 * free, counted out of inuse, handed out by carving (slub.c). */
static inline unsigned int usl_counters_uncarved(unsigned long c) { return (unsigned int)((c >> USL_UNCARVED_SHIFT) & USL_INUSE_MASK); }
static inline unsigned long usl_counters_make(unsigned int inuse, unsigned int objects, bool frozen)
{
	return ((unsigned long)inuse & USL_INUSE_MASK) | (((unsigned long)objects & USL_OBJECTS_MASK) << USL_OBJECTS_SHIFT) |
	       (frozen ? USL_FROZEN_BIT : 0);
}
/* The same, keeping c's uncarved count. */
static inline unsigned long usl_counters_remake(unsigned long c, unsigned int inuse, bool frozen)
{
	return usl_counters_make(inuse, usl_counters_objects(c), frozen) | (c & (USL_INUSE_MASK << USL_UNCARVED_SHIFT));
}
static inline unsigned long usl_counters_set_uncarved(unsigned long c, unsigned int uncarved)
{
	return (c & ~(USL_INUSE_MASK << USL_UNCARVED_SHIFT)) | ((unsigned long)uncarved << USL_UNCARVED_SHIFT);
}

/* ---------------------------------------------------------------------------
 * 16-byte compare-and-swap. lock cmpxchg16b on x86-64; under ThreadSanitizer the
 * compiler builtin (so TSan sees it).
 */
struct usl_pair {
	unsigned long lo, hi;
} __attribute__((aligned(16)));

static inline bool usl_cas16(void *addr, unsigned long old_lo, unsigned long old_hi,
                             unsigned long new_lo, unsigned long new_hi)
{
#if USL_TSAN || !defined(__x86_64__)
	unsigned __int128 o = ((unsigned __int128)old_hi << 64) | old_lo;
	unsigned __int128 n = ((unsigned __int128)new_hi << 64) | new_lo;
	return __atomic_compare_exchange_n((unsigned __int128 *)addr, &o, n, false,
	                                   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#else
	bool ok;
	__asm__ __volatile__("lock cmpxchg16b %1"
	                     : "=@ccz"(ok), "+m"(*(struct usl_pair *)addr), "+a"(old_lo), "+d"(old_hi)
	                     : "b"(new_lo), "c"(new_hi)
	                     : "memory");
	return ok;
#endif
}

static inline unsigned long usl_load(const unsigned long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void *usl_load_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/* ---------------------------------------------------------------------------
 * Per-CPU slot: struct kmem_cache_cpu, 64 bytes, one per possible CPU.
 *
 * rseq mode: {freelist, slab} (offsets 8..23) are changed only by rseq critical
 * sections on the owning CPU (or by a flusher holding the slot's mark, see
 * docs/ARCHITECTURE.md); detach and install commit both with one 16-byte store,
 * as do the sheaf sections' take and install of {main_size, main}; spare is
 * taken and installed by a section of its own.
 * locked mode: {tid, freelist} (offsets 0..15) are changed with lock cmpxchg16b as
 * the kernel does; slab and partial change only under `lock`.
 */
struct kmem_cache_cpu {
	unsigned long tid;           /* 0: locked mode transaction id */
	void *freelist;              /* 8: free objects of the cpu slab */
	struct slab *slab;           /* 16: the cpu slab (frozen) */
	struct slab *partial;        /* 24: cpu partial slabs (not frozen), chained by ->next */
	int lock;                    /* 32: locked mode: slow-path lock; rseq mode: flush mark */
	int sheaf_lock;              /* 36: locked mode: guards main_size, main and spare */
	struct slab_sheaf *spare;    /* 40: empty, full, or NULL */
	unsigned long main_size;     /* 48: main's object count while it is attached (its
	                                own size field is stale then); 0 for usl_empty_sheaf */
	struct slab_sheaf *main;     /* 56: never NULL (usl_empty_sheaf when detached, and
	                                in a cache without sheaves) */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct kmem_cache_cpu) == 64, "slot size is the fast path's shift");
#define USL_CPU_SHIFT 6
#define USL_CPU_OFF_FREELIST 8
#define USL_CPU_OFF_SLAB 16
#define USL_CPU_OFF_PARTIAL 24
#define USL_CPU_OFF_LOCK 32
#define USL_CPU_OFF_SPARE 40
#define USL_CPU_OFF_MAIN_SIZE 48
#define USL_CPU_OFF_MAIN 56
_Static_assert(offsetof(struct kmem_cache_cpu, freelist) == USL_CPU_OFF_FREELIST, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, slab) == USL_CPU_OFF_SLAB, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, partial) == USL_CPU_OFF_PARTIAL, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, lock) == USL_CPU_OFF_LOCK, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, spare) == USL_CPU_OFF_SPARE, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, main_size) == USL_CPU_OFF_MAIN_SIZE, "asm offset");
_Static_assert(offsetof(struct kmem_cache_cpu, main) == USL_CPU_OFF_MAIN_SIZE + 8, "main_size and main: one 16-byte store");
#define USL_SLAB_OFF_NEXT 32
#define USL_SLAB_OFF_SLABS 40
_Static_assert(offsetof(struct slab, next) == USL_SLAB_OFF_NEXT, "asm offset");
_Static_assert(offsetof(struct slab, slabs) == USL_SLAB_OFF_SLABS, "asm offset");

/* A sheaf: an array of object pointers (reference section 3). The cache pointer
 * sits just before objects[], so objects[-1] of an empty sheaf is never an object
 * (the free section's double-free check reads it). */
struct slab_sheaf {
	union {
		struct slab_sheaf *next;     /* 0: on a barn stack */
		struct usl_list barn_list;   /* 0: on a private list (flushing) */
	};
	uint32_t size;               /* 16: objects in it */
	uint32_t capacity;           /* 20 */
	struct kmem_cache *cache;    /* 24 */
	void *objects[];             /* 32 */
};
#define USL_SHEAF_OFF_SIZE 16
#define USL_SHEAF_OFF_CAP 20
#define USL_SHEAF_OFF_OBJECTS 32
_Static_assert(offsetof(struct slab_sheaf, size) == USL_SHEAF_OFF_SIZE, "asm offset");
_Static_assert(offsetof(struct slab_sheaf, capacity) == USL_SHEAF_OFF_CAP, "asm offset");
_Static_assert(offsetof(struct slab_sheaf, objects) == USL_SHEAF_OFF_OBJECTS, "asm offset");
/* The zero-capacity sheaf a slot's main points at while no sheaf is installed:
 * both fast paths see it as empty and full, and need no NULL check. */
extern struct slab_sheaf usl_empty_sheaf USL_HIDDEN;

/* Per node: full and empty sheaves, shared by the node's CPUs. */
struct usl_barn {
	int lock;                    /* spin lock (usl_spin_lock): held for a few list
	                                operations, never across a call out */
	struct slab_sheaf *full, *empty;   /* LIFO stacks through sheaf->next: a push or pop
	                                      touches only that sheaf */
	unsigned int nr_full, nr_empty;
	unsigned int low_full;       /* fewest full sheaves since last_decay */
	unsigned int high_full;      /* most full sheaves since last_decay: as many empties
	                                may stay, for the frees that will refill them */
	unsigned int puts;           /* full puts above the level: the clock is read every 16 */
	unsigned int visits;         /* barn visits, and their count at the last sweep: */
	unsigned int visits_swept;   /* equal at a sweep means the cache sat idle */
	unsigned int refill_shift;   /* set by a sweep that flushed the CPUs: the next
	                                refills take capacity >> shift, shift - 1, ... */
	uint64_t last_decay;         /* ms */
};

/* Per NUMA node (one node until NUMA placement lands). */
struct kmem_cache_node {
	pthread_mutex_t list_lock;   /* protects partial, nr_partial, slab->node_partial */
	struct usl_list partial;
	unsigned long nr_partial;
	unsigned long nr_slabs;      /* atomic: slabs allocated for this node */
	unsigned long total_objects; /* atomic: objects in those slabs */
	struct usl_barn barn;
} __attribute__((aligned(64)));

#define USL_NAME_MAX 48
/* s->flags bits. uslab's own caches (sheaf structures): no sheaves, no merging,
 * and their growth does not reclaim the barns their sheaves serve. */
#define USL_SLAB_INTERNAL 0x80000000U
#define USL_SLAB_KMALLOC 0x40000000U    /* a kmalloc class: never destroyed, a merge target */

struct kmem_cache {
	/* Read by the fast paths: keep together. */
	struct kmem_cache_cpu *cpu_slab; /* usl_nr_cpus slots: usl_id_slots(id) */
	unsigned int offset;         /* free pointer offset inside (or after) the object */
	unsigned int size;           /* object stride */
	uint32_t div_inv;            /* (size >> div_shift)^-1 mod 2^32: object index test */
	uint32_t div_shift;          /* trailing zero bits of size */
	unsigned int sheaf_capacity; /* 0: no sheaves (the cpu slab is the fast path) */
	slab_flags_t flags;
	unsigned int id;             /* in usl_caches and the page map (cache.c) */
	unsigned int object_size;    /* what the creator asked for */
	unsigned int inuse;          /* object_size rounded to a word */
	unsigned int align;
	unsigned int order;          /* preferred slab order */
	unsigned int objects;        /* objects per slab at that order */
	unsigned int min_order;      /* fallback order when the preferred one fails */
	unsigned int min_objects;
	unsigned int min_partial;    /* node partial slabs kept before empties are freed */
	unsigned int cpu_partial;    /* objects the cpu partial lists aim for */
	unsigned int cpu_partial_slabs;
	unsigned int barn_max_full;  /* barn limits (reference section 3: 10 and 10) */
	unsigned int barn_max_empty;
	struct kmem_cache *sheaf_cache; /* where this cache's sheaves come from */
	void (*ctor)(void *);
	int refcount;
	struct usl_list list;        /* registry (slab_mutex) */
	char name[USL_NAME_MAX];
	void *meta;                  /* a page block (only "kmem_cache" itself), else NULL */
	int recent_use;              /* set by a sampled free (1 in 256 of a thread), cleared by the decay sweep */
	struct kmem_cache_node *node[1];
};

/* ---------------------------------------------------------------------------
 * platform.c: options, reports, clock, per-CPU mode detection.
 */
struct usl_options {
	int min_objects;             /* 0 = kernel formula */
	int min_order;
	int max_order;
	bool max_order_given;        /* USLAB_MAX_ORDER set: it bounds malloc's own slab orders too */
	int rseq;                    /* -1 auto, 0 off, 1 on */
	int sheaves;                 /* USLAB_SHEAVES: -1 default (on), 0 off, 1 on */
	unsigned int decay_ms;       /* free block age before madvise */
	int nomerge;                 /* USLAB_NOMERGE: 1 = no cache merging */
};
extern struct usl_options usl_opt USL_HIDDEN;
extern unsigned int usl_nr_cpus USL_HIDDEN;    /* possible CPUs: per-CPU slots */
extern unsigned int usl_online_cpus USL_HIDDEN; /* for min_objects (the kernel's present CPUs) */
extern bool usl_rseq_mode USL_HIDDEN;           /* chosen once in usl_init() */
extern long usl_rseq_off USL_HIDDEN;            /* %fs offset of the rseq area (or a dummy) */
extern unsigned int usl_rseq_nr USL_HIDDEN;     /* usl_nr_cpus in rseq mode, 0 in locked mode:
                                                   the sections' cpu check then always fails */

USL_HIDDEN void usl_init(void);                 /* once; no allocation */
USL_HIDDEN size_t usl_os_page_size(void);       /* AT_PAGESZ; callable before usl_init */
/* A sysfs CPU list file ("0-3,8-11"): highest id and how many; false if unreadable. */
USL_HIDDEN bool usl_cpu_list(const char *path, long *max, long *count);
extern int usl_inited USL_HIDDEN;
static inline void usl_ensure_init(void)
{
	if (usl_unlikely(!__atomic_load_n(&usl_inited, __ATOMIC_ACQUIRE)))
		usl_init();
}
USL_HIDDEN void usl_name_number(char *buf, size_t len, const char *prefix, unsigned int n);
USL_HIDDEN void usl_report(enum uslab_error kind, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
USL_HIDDEN uint64_t usl_now_ms(void);
USL_HIDDEN int usl_current_cpu(void);           /* sched_getcpu() or 0 */
USL_HIDDEN int usl_membarrier_rseq(void);       /* abort all rseq sections of this process */
USL_HIDDEN void usl_spin_lock_slow(int *lock);
/* A spin-then-yield lock: one exchange when free (inlined), else the slow loop. */
static inline void usl_spin_lock(int *lock)
{
	if (usl_unlikely(__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE)))
		usl_spin_lock_slow(lock);
}
static inline void usl_spin_unlock(int *lock) { __atomic_store_n(lock, 0, __ATOMIC_RELEASE); }
/* Parse one option value; exposed for the option unit test. */
USL_HIDDEN bool usl_parse_int(const char *s, long lo, long hi, long *out);

/* ---------------------------------------------------------------------------
 * pages.c: the page provider. Lock: pages_lock (innermost).
 */
#define USL_MAX_ORDER 10           /* largest block: 2^10 pages */
extern uintptr_t usl_base USL_HIDDEN;           /* start of the reserved range */
extern uintptr_t usl_range USL_HIDDEN;          /* its length in bytes */
extern uintptr_t usl_top USL_HIDDEN;            /* bytes committed so far (grows) */
extern struct slab *usl_table USL_HIDDEN;       /* one entry per page */
/* The page map: per page, where its block begins and, for a slab, its cache and
 * object count. 8 bytes a page (8 pages a cache line, against one for the
 * table), read and written whole (usl_pm_read, usl_pm_write), so a free checks
 * a pointer without touching the slab's struct slab: the cache id compares with
 * the cache's, (uint32_t)off - start is the offset in the block, and objects
 * bounds the index. */
struct usl_pagemap_entry {
	uint32_t start;              /* low 32 bits of the block's offset from usl_base
	                                (blocks are far smaller than 4 GiB); pages.c */
	uint16_t objects;            /* slab: its object count, | USL_PM_INTERNAL for a
	                                slab of uslab's own caches; else 0 (slub.c) */
	uint16_t cache;              /* slab: its cache's id (usl_caches); else 0 */
} __attribute__((aligned(8)));       /* one plain 8-byte load or store */
_Static_assert(sizeof(struct usl_pagemap_entry) == 8, "one 8-byte word");
#define USL_PM_INTERNAL 0x8000u
#define USL_PM_OBJECTS(e) ((unsigned int)(e).objects & (USL_PM_INTERNAL - 1))
extern struct usl_pagemap_entry *usl_pagemap USL_HIDDEN;
static inline struct usl_pagemap_entry usl_pm_read(const struct usl_pagemap_entry *e)
{
	struct usl_pagemap_entry v;
	__atomic_load(e, &v, __ATOMIC_ACQUIRE);
	return v;
}
/* The entry as one integer: start in bits 0..31, objects 32..47, cache 48..63
 * (x86-64 is little-endian), for the free fast path, which unpacks it with
 * shifts. */
static inline uint64_t usl_pm_word(const struct usl_pagemap_entry *e)
{
	struct usl_pagemap_entry v = usl_pm_read(e);
	uint64_t w;
	__builtin_memcpy(&w, &v, sizeof(w));   /* not an integer lvalue on the entry: no aliasing */
	return w;
}
static inline void usl_pm_write(struct usl_pagemap_entry *e, uint32_t start, unsigned int objects, unsigned int cache)
{
	struct usl_pagemap_entry v = { start, (uint16_t)objects, (uint16_t)cache };
	__atomic_store(e, &v, __ATOMIC_RELEASE);
}
/* Caches by id: ids from 1, given by cache.c at creation and taken back at
 * destroy; usl_caches[0] is NULL. */
#define USL_MAX_CACHES 65536
extern struct kmem_cache *usl_caches[USL_MAX_CACHES] USL_HIDDEN;
/* Every cache's per-CPU slots, by id (cache.c): cache id's usl_nr_cpus slots
 * start at usl_slots + id * usl_slot_stride (an odd number of cache lines, so
 * the slots of one CPU spread over the L1 sets), mapped at the first cache's
 * creation. So malloc (from its table) and free (from the page map's id) reach
 * a CPU's slot without loading the cache. usl_cache_div[id] holds the cache's
 * div_inv | div_shift << 32 for free's object check; 0 for no cache. */
extern char *usl_slots USL_HIDDEN;
extern size_t usl_slot_stride USL_HIDDEN;
extern uint64_t usl_cache_div[USL_MAX_CACHES] USL_HIDDEN;
static inline struct kmem_cache_cpu *usl_id_slots(unsigned int id)
{
	return (struct kmem_cache_cpu *)(usl_slots + (size_t)id * usl_slot_stride);
}
/* The cache whose slab holds the page of this entry, if kfree may free its
 * objects: NULL for a page that is not a slab, and for a slab of uslab's own
 * caches (cache structures, sheaves). */
static inline struct kmem_cache *usl_pagemap_user_cache(struct usl_pagemap_entry v)
{
	return v.objects & USL_PM_INTERNAL ? NULL : __atomic_load_n(&usl_caches[v.cache], __ATOMIC_ACQUIRE);
}
extern unsigned int usl_page_shift USL_HIDDEN;   /* the OS page size, from sysconf */
extern size_t usl_page_size USL_HIDDEN;

USL_HIDDEN int usl_pages_init(void);
USL_HIDDEN void *usl_pages_alloc(unsigned int order, enum usl_page_kind kind);
/* The same; *zeroed tells whether the block is known to read as zeros (a clean
 * block: fresh, or purged with MADV_DONTNEED). */
USL_HIDDEN void *usl_pages_alloc_z(unsigned int order, enum usl_page_kind kind, bool *zeroed);
USL_HIDDEN void usl_pages_free(void *addr);
/* Free the large kmalloc block starting at addr; false (nothing done) if addr is
 * not the start of one (checked under pages_lock, so two frees cannot both win). */
USL_HIDDEN bool usl_pages_free_large(void *addr);
/* Set by the decay sweep while it frees: the blocks it frees count as free for a
 * whole decay interval already (their objects sat unused that long). */
extern __thread bool usl_pages_aging USL_HIDDEN;
USL_HIDDEN size_t usl_pages_purge(bool all);    /* madvise free blocks; bytes */
USL_HIDDEN size_t usl_pages_release(void);      /* init if needed, purge all */
USL_HIDDEN bool usl_pages_short(unsigned int order); /* no free block that size (racy) */
USL_HIDDEN void usl_pages_stats(size_t *committed, size_t *free_dirty, size_t *free_clean);
USL_HIDDEN void usl_pages_fork_lock(void);
USL_HIDDEN void usl_pages_fork_unlock(void);
/* Test hook: fail page allocations after n more succeed (-1 = never). */
USL_HIDDEN void usl_pages_fail_after(long n);

/* The offset of the block containing the committed offset off. */
static inline uintptr_t usl_block_offset(uintptr_t off)
{
	return off - (uint32_t)((uint32_t)off - usl_pm_read(&usl_pagemap[off >> usl_page_shift]).start);
}

/* The table is ordered inside each region (one largest block, 2^10 pages) by
 * the page number's trailing zeros, most first, then by the number: page 0,
 * then 512, 256 and 768, then the odd multiples of 128, ..., and the odd
 * numbers last. The head of a block of 2^k pages is at a multiple of 2^k, so
 * the heads of such blocks all fall in the first 1024 >> k entries: a region of
 * 16-page slabs keeps one table page resident (64 entries), not sixteen. Only a
 * block's head entry is ever used. Entry i of the region holds page
 * (1024 + i) >> (ctz(i) + 1) ... see usl_table_pfn. */
static inline size_t usl_table_index(size_t pfn)
{
	size_t n = (size_t)1 << USL_MAX_ORDER, i = pfn & (n - 1);
	return pfn - i + ((n + i) >> (__builtin_ctzl(i | n) + 1));
}
static inline size_t usl_table_pfn(size_t index)
{
	size_t n = (size_t)1 << USL_MAX_ORDER, j = index & (n - 1);
	if (!j)
		return index;
	unsigned int tz = USL_MAX_ORDER - 1 - (63 - (unsigned int)__builtin_clzl(j));   /* the page's trailing zeros */
	return index - j + ((j << (tz + 1)) - n + ((size_t)1 << tz));
}

/* The table entry of the block containing p; NULL for a foreign pointer. */
static inline struct slab *usl_virt_to_slab(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	/* Only the committed part has table entries (the rest is PROT_NONE). */
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)))
		return NULL;
	return &usl_table[usl_table_index(usl_block_offset(off) >> usl_page_shift)];
}
/* The page number of a head entry. */
static inline size_t usl_slab_pfn(const struct slab *slab) { return usl_table_pfn((size_t)(slab - usl_table)); }
static inline void *usl_slab_address(const struct slab *slab)
{
	return (void *)(usl_base + (usl_slab_pfn(slab) << usl_page_shift));
}
static inline size_t usl_order_bytes(unsigned int order) { return usl_page_size << order; }
/* The smallest order whose block holds size bytes (above USL_MAX_ORDER when no
 * block does). */
static inline unsigned int usl_bytes_order(size_t size)
{
	unsigned int order = 0;
	while (usl_order_bytes(order) < size)
		order++;
	return order;
}

/* ---------------------------------------------------------------------------
 * slub/slub.c: the SLUB core. Locks: per-CPU slot lock (locked mode) ->
 * list_lock -> pages_lock.
 */
USL_HIDDEN int usl_slub_cache_init(struct kmem_cache *s, const struct kmem_cache_args *args); /* sizes, order, slots */
USL_HIDDEN int usl_slub_set_order(struct kmem_cache *s, unsigned int order);   /* before first use */
/* kfree/free of a slab object of a user or kmalloc cache (reports name fn);
 * any other pointer goes to other(x, fn). */
USL_HIDDEN void usl_slub_kfree_or(void *x, const char *fn, void (*other)(void *, const char *));
/* malloc from the class at usl_malloc_tab[i], whose slots are slots:
 * kmem_cache_alloc(class, GFP_KERNEL | __GFP_NOWARN), errno ENOMEM on failure. */
USL_HIDDEN void *usl_slub_malloc(struct kmem_cache_cpu *slots, size_t i);
USL_HIDDEN void usl_slub_flush_all(struct kmem_cache *s);     /* every CPU's slabs -> node */
USL_HIDDEN int usl_slub_shrink(struct kmem_cache *s);
USL_HIDDEN unsigned long usl_slub_objects_in_use(struct kmem_cache *s);
USL_HIDDEN bool usl_slub_obj_ok(struct kmem_cache *s, const void *x); /* an object start of s */
USL_HIDDEN unsigned int usl_slub_alignment(slab_flags_t flags, unsigned int align, unsigned int object_size);
USL_HIDDEN void usl_slub_release(struct kmem_cache *s);       /* discard every empty slab */
/* fork(): take / release flush_mutex, and one cache's slot locks and list_lock. */
USL_HIDDEN void usl_slub_fork_lock_global(void);
USL_HIDDEN void usl_slub_fork_unlock_global(void);
USL_HIDDEN void usl_slub_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_slub_fork_unlock(struct kmem_cache *s);
USL_HIDDEN unsigned int usl_calculate_order(unsigned int size);
/* The cpu-slab layer's paths, used by the sheaf layer: single objects (obj checked
 * to be s's), bulk (all or nothing; p[] checked, no NULLs needed), the locked-mode
 * slot hint, and holding every slot (flush protocol; false: could not). */
USL_HIDDEN void *usl_slub_alloc(struct kmem_cache *s, gfp_t gfp);
USL_HIDDEN void usl_slub_free(struct kmem_cache *s, struct slab *slab, void *x);
USL_HIDDEN int usl_slub_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);
USL_HIDDEN void usl_slub_free_bulk(struct kmem_cache *s, size_t nr, void **p);
USL_HIDDEN void usl_report_double_free(struct kmem_cache *s, void *x, const char *fn);
USL_HIDDEN struct kmem_cache_cpu *usl_slub_hint_slot(struct kmem_cache *s);
USL_HIDDEN struct kmem_cache_cpu *usl_slub_hint_refresh(struct kmem_cache *s);
USL_HIDDEN bool usl_slub_hold_slots(struct kmem_cache *s);
USL_HIDDEN void usl_slub_release_slots(struct kmem_cache *s);

/* ---------------------------------------------------------------------------
 * slub/sheaf.c: per-CPU sheaves and barns. Locks: slot sheaf_lock (locked mode),
 * barn lock; neither is held across a call into the cpu-slab layer.
 */
USL_HIDDEN unsigned int usl_sheaf_capacity_for(unsigned int object_size, unsigned int requested);
USL_HIDDEN int usl_sheaf_cache_init(struct kmem_cache *s);
USL_HIDDEN void *usl_sheaf_alloc(struct kmem_cache *s, gfp_t gfp);      /* after the pop section */
USL_HIDDEN void usl_sheaf_free(struct kmem_cache *s, void *x);
USL_HIDDEN int usl_sheaf_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t nr, void **p);
USL_HIDDEN void usl_sheaf_free_bulk(struct kmem_cache *s, size_t nr, void **p);
USL_HIDDEN void usl_sheaf_flush_all(struct kmem_cache *s);   /* every sheaf to slabs, and freed */
USL_HIDDEN void usl_sheaf_trim_barn(struct kmem_cache *s);  /* flush full sheaves above the level */
USL_HIDDEN void usl_sheaf_fork_lock_global(void);
USL_HIDDEN void usl_sheaf_fork_unlock_global(void);
USL_HIDDEN void usl_sheaf_fork_lock(struct kmem_cache *s);
USL_HIDDEN void usl_sheaf_fork_unlock(struct kmem_cache *s);
struct usl_sheaf_counts {
	unsigned long cpu_sheaves, cpu_objects, barn_full, barn_empty, barn_objects;
};
USL_HIDDEN void usl_sheaf_counts(struct kmem_cache *s, struct usl_sheaf_counts *out);
USL_HIDDEN void usl_sheaf_decay(struct kmem_cache *s, uint64_t now);  /* usl_decay_tick's sweep */

/* Slab states, for tests and introspection (a snapshot, racy under load). */
struct usl_state_counts {
	unsigned long cpu_slabs, cpu_partial, node_partial, full, total, empty_node_partial;
};
USL_HIDDEN void usl_slub_state_counts(struct kmem_cache *s, struct usl_state_counts *out);

/* ---------------------------------------------------------------------------
 * cache.c: the registry. Lock: slab_mutex (outermost).
 */
USL_HIDDEN void usl_cache_lock(void);
USL_HIDDEN void usl_cache_unlock(void);
/* Non-zero while this thread holds slab_mutex or kmalloc_lock: a report handler
 * that mallocs then must not make a malloc class (it would take them again). */
extern __thread int usl_registry_held USL_HIDDEN;
USL_HIDDEN void *usl_meta_alloc(size_t size);   /* zeroed, from the page provider */
/* Create a cache. kind: USL_CACHE_USER (may become an alias of a compatible
 * cache), USL_CACHE_KMALLOC (a kmalloc class) or USL_CACHE_INTERNAL (sheaf
 * structures: no sheaves, never merged). */
enum usl_cache_kind { USL_CACHE_USER, USL_CACHE_KMALLOC, USL_CACHE_INTERNAL };
/* slab_bytes: 0 for the calculated slab order, else the smallest order that
 * holds that many bytes (malloc's classes; bounded by USLAB_MAX_ORDER if given). */
USL_HIDDEN struct kmem_cache *usl_cache_create(const char *name, unsigned int size, unsigned int align,
                                               slab_flags_t flags, void (*ctor)(void *),
                                               const struct kmem_cache_args *args, enum usl_cache_kind kind,
                                               size_t slab_bytes);
USL_HIDDEN void usl_meta_free(void *p);
/* Before the page provider grows: give back what caches hold beyond need (the
 * barns' surplus of full sheaves). Skipped if slab_mutex is busy. */
USL_HIDDEN void usl_cache_reclaim(void);
/* Called by slow paths: at most every half decay interval (USLAB_DECAY_MS), one
 * caller sweeps every cache (barn surplus unused for an interval back to slabs)
 * and the page provider (free blocks older than the interval to the OS). There
 * is no background thread: a process that makes no slow-path call keeps its
 * memory until malloc_trim / uslab_release_free_memory. */
USL_HIDDEN void usl_decay_tick(void);

/* ---------------------------------------------------------------------------
 * kmalloc.c: the kmalloc family. Locks: kmalloc_lock (outermost: creating the
 * classes takes slab_mutex inside it), huge_lock (innermost).
 */
USL_HIDDEN void usl_kmalloc_fork_lock(void);        /* kmalloc_lock */
USL_HIDDEN void usl_kmalloc_fork_lock_inner(void);  /* huge_lock */
USL_HIDDEN void usl_kmalloc_fork_unlock_inner(void);
USL_HIDDEN void usl_kmalloc_fork_unlock(void);
USL_HIDDEN void usl_kfree_bulk_nonslab(size_t nr, void **p);
USL_HIDDEN struct kmem_cache *usl_kmalloc_cache_for(size_t size);   /* tests */
/* malloc's allocation: kmalloc, with finer classes up to 8 KiB (steps of 16 and
 * 32 bytes to 256, then eight a doubling). */
USL_HIDDEN void *usl_malloc_bytes(size_t n, gfp_t gfp);
/* The class cache for n <= KMALLOC_MAX_CACHE_SIZE at [(n + 15) >> 4]; all
 * NULL until usl_malloc_bytes has made the classes (malloc's inline path). */
#define KMALLOC_SHIFT_HIGH 13                       /* the largest class: 8 KiB */
#define KMALLOC_MAX_CACHE_SIZE (1UL << KMALLOC_SHIFT_HIGH)
#define USL_MALLOC_TAB (KMALLOC_MAX_CACHE_SIZE / 16 + 1)
USL_HIDDEN extern struct kmem_cache *usl_malloc_tab[USL_MALLOC_TAB];
/* The same classes' slots (their cpu_slab), for malloc's fast path. */
USL_HIDDEN extern struct kmem_cache_cpu *usl_malloc_slots[USL_MALLOC_TAB];
USL_HIDDEN struct kmem_cache *usl_malloc_cache_for(size_t n);       /* tests */
USL_HIDDEN void *usl_kmalloc_huge_aligned(size_t size, size_t align, gfp_t gfp);
USL_HIDDEN size_t usl_kmalloc_huge_bytes(void);
USL_HIDDEN size_t usl_kmalloc_huge_count(void);
USL_HIDDEN void *usl_kmalloc_huge_resize(void *p, size_t n);   /* mremap; NULL: not a mapping */
USL_HIDDEN void usl_kfree_as(const void *p, const char *fn);     /* reports name fn */
USL_HIDDEN size_t usl_ksize_as(const void *p, const char *fn);

#endif /* USL_INTERNAL_H */
