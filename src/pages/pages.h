/* pages.h - the pages layer (src/pages/): the library's start-up, the reserved
 * range, the struct slab table and the page map, buddy blocks of 2^order pages
 * given back to the OS by decay (pages.c), large blocks by pointer: page
 * blocks of kmalloc above 8 KiB and direct mappings beyond the largest block
 * (large.c), and the metadata regions for uslab's own structures (meta.c).
 * Calls only the platform layer. Locks: meta_lock, then pages_lock, then
 * mappings_lock (the mapping table), the innermost locks of the library. */
#ifndef USL_PAGES_H
#define USL_PAGES_H

#include "../platform/platform.h"
#include "../types.h"
#include "range.h"

/* Start-up: the platform (options, CPUs, per-CPU mode), then the reserved
 * range; once, and aborting with a report if not even 256 MiB of address
 * space can be reserved. No allocation. */
extern int usl_inited USL_HIDDEN;
USL_HIDDEN void usl_init(void);
static inline void usl_ensure_init(void)
{
	if (usl_unlikely(!__atomic_load_n(&usl_inited, __ATOMIC_ACQUIRE)))
		usl_init();
}

/* ---- the range, the table and the page map (pages.c) ---- */
extern uintptr_t usl_top USL_HIDDEN;            /* bytes committed so far (grows) */
extern struct slab *usl_table USL_HIDDEN;       /* one entry per page */
/* The page map: per page, where its block begins and, for a slab, its cache and
 * object count. 8 bytes a page (8 pages a cache line, against one for the
 * table), read and written whole (usl_pm_read, usl_pm_write), so a free checks
 * a pointer without touching the slab's struct slab: the cache id compares with
 * the cache's, (uint32_t)off - start is the offset in the block, and objects
 * bounds the index. */
extern struct usl_pagemap_entry *usl_pagemap USL_HIDDEN;
static inline struct usl_pagemap_entry usl_pm_read(const struct usl_pagemap_entry *e)
{
	struct usl_pagemap_entry v;
	__atomic_load(e, &v, __ATOMIC_ACQUIRE);
	return v;
}
/* The entry as one integer: start in bits 0..31, cache 32..47, objects 48..63
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
	struct usl_pagemap_entry v = { .start = start, .cache = (uint16_t)cache, .objects = (uint16_t)objects };
	__atomic_store(e, &v, __ATOMIC_RELEASE);
}
/* A slab of a user or kmalloc cache keeps in its entries' object count the
 * objects carved so far (handed out at least once, or linked), not all of
 * them: the free fast paths' object test (index < count) then refuses the
 * never handed out ones by itself, at no cost, and their slow paths ask the
 * slab (usl_pm_is_slot) before reporting. The slab's carver raises the count
 * (engine/slub/slub.c). */
static inline void usl_pm_set_count(struct usl_pagemap_entry *e, unsigned int objects)
{
	struct usl_pagemap_entry v = usl_pm_read(e);
	v.objects = (uint16_t)((v.objects & USL_PM_INTERNAL) | objects);
	__atomic_store(e, &v, __ATOMIC_RELEASE);
}
/* The owned chunk map (types.h, USL_OCHUNK_SHIFT): a word per 64 KiB of the
 * range, zero but where an owned slab lies; written by engine/slub/oslab.c. Mapped
 * whole (never-touched pages of it cost nothing). */
extern uint64_t *usl_ochunk USL_HIDDEN;


/* A block of 2^order pages from the node's regions (node < usl_nr_nodes; a
 * region is made for one node, its pages bound there with usl_numa_bind),
 * its head entry of this kind with nid = node. */
USL_HIDDEN void *usl_pages_alloc(unsigned int order, enum usl_page_kind kind, unsigned int node);
/* The same; *zeroed tells whether the block is known to read as zeros (a clean
 * block: fresh, or purged with MADV_DONTNEED). */
USL_HIDDEN void *usl_pages_alloc_z(unsigned int order, enum usl_page_kind kind, unsigned int node, bool *zeroed);
USL_HIDDEN void usl_pages_free(void *addr);
/* A slab of a SLAB_TYPESAFE_BY_RCU cache, discarded: its pages go back (to
 * usl_pages_free) only after a grace period of the program's RCU. Set by
 * uslab_rcu_init (kmalloc/rcu.c; one of the calls that run up: the grace
 * period is the program's liburcu, the slabs the engines'), which such a
 * cache's creation requires. The slab's slab_list links it meanwhile. */
extern void (*usl_free_slab_after_gp)(struct slab *slab) USL_HIDDEN;
/* Free the large kmalloc block starting at addr; false (nothing done) if addr is
 * not the start of one (checked under pages_lock, so two frees cannot both win). */
USL_HIDDEN bool usl_pages_free_large(void *addr);
/* Set by the decay sweep while it frees: the blocks it frees count as free for a
 * whole decay interval already (their objects sat unused that long). */
extern __thread bool usl_pages_aging USL_HIDDEN;
USL_HIDDEN size_t usl_pages_purge(bool all);    /* madvise free blocks; bytes */
USL_HIDDEN size_t usl_pages_release(void);      /* init if needed, purge all */
USL_HIDDEN bool usl_pages_short(unsigned int order, unsigned int node); /* no free block that size (racy) */
/* The range grows in pieces smaller than a region (RLIMIT_AS refused one). */
USL_HIDDEN bool usl_pages_pieces(void);
/* RLIMIT_AS as it was at start-up, rounded down to a region (0: none). */
USL_HIDDEN size_t usl_pages_limit(void);
USL_HIDDEN void usl_pages_stats(size_t *committed, size_t *free_dirty, size_t *free_clean);
/* Bytes of the range made for the node's regions (metadata regions count on
 * node 0); a racy read. */
USL_HIDDEN size_t usl_pages_node_bytes(unsigned int node);
USL_HIDDEN void usl_pages_fork_lock(void);
USL_HIDDEN void usl_pages_fork_unlock(void);

/* The offset of the block containing the committed offset off. A SLAB slab's
 * entries hold its first object's offset instead (colouring moves it less
 * than a page past the block's start), which this returns for it: its page is
 * the block's head all the same, and a pointer into the colour gap before it
 * (a negative distance) finds that page too. */
static inline uintptr_t usl_block_offset(uintptr_t off)
{
	uint32_t start = usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]).start;
	return off - (uintptr_t)(intptr_t)(int32_t)((uint32_t)off - start);
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
	return &usl_table[usl_table_index(usl_block_offset(off) >> USL_PAGE_SHIFT)];
}
/* The object index of p in a slab of s, by its page-map entry *e; false if p
 * is outside the committed range or its page is not s's. */
static inline bool usl_pm_index(const struct kmem_cache *s, const void *p, struct usl_pagemap_entry *e,
                                uint32_t *idx)
{
	uintptr_t off = (uintptr_t)p - usl_base;
	if (usl_unlikely(off >= __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)))
		return false;
	*e = usl_pm_read(&usl_pagemap[off >> USL_PAGE_SHIFT]);
	*idx = usl_obj_index((uint32_t)off - e->start, s->div_inv, s->div_shift);
	return e->cache == s->id;
}

/* Is p an object start of a slab of s that was handed out at least once (or
 * linked)? By the page map alone (one entry). */
static inline bool usl_pm_is_object(const struct kmem_cache *s, const void *p)
{
	struct usl_pagemap_entry e;
	uint32_t idx;
	return usl_pm_index(s, p, &e, &idx) && idx < USL_PM_OBJECTS(e);
}

/* Is p an object start of a slab of s, carved or not? (The slab's count.) */
static inline bool usl_pm_is_slot(const struct kmem_cache *s, const void *p)
{
	struct usl_pagemap_entry e;
	uint32_t idx;
	return usl_pm_index(s, p, &e, &idx) &&
	       idx < usl_counters_objects(__atomic_load_n(&usl_virt_to_slab(p)->counters, __ATOMIC_ACQUIRE));
}

/* The node of each region (one largest block) of the range, set before the
 * region is committed (pages.c), and the node of a committed address: one
 * byte load, for the free paths that keep objects on their node. */
extern uint8_t *usl_region_node USL_HIDDEN;
static inline unsigned int usl_addr_node(const void *p)
{
	return usl_region_node[((uintptr_t)p - usl_base) >> (USL_PAGE_SHIFT + USL_MAX_ORDER)];
}

/* The page number of a head entry. */
static inline size_t usl_slab_pfn(const struct slab *slab) { return usl_table_pfn((size_t)(slab - usl_table)); }
static inline void *usl_slab_address(const struct slab *slab)
{
	return (void *)(usl_base + (usl_slab_pfn(slab) << USL_PAGE_SHIFT));
}
static inline size_t usl_order_bytes(unsigned int order) { return USL_PAGE_SIZE << order; }
/* The smallest order whose block holds size bytes (above USL_MAX_ORDER when no
 * block does). */
static inline unsigned int usl_bytes_order(size_t size)
{
	unsigned int order = 0;
	while (usl_order_bytes(order) < size)
		order++;
	return order;
}


/* Make addr, inside a block already handed out, the head of a block of 2^order
 * pages of this kind (its page-map entries point at it), and undo that: its
 * entries point at owner, the enclosing block, again. For meta.c. */
USL_HIDDEN void usl_pages_head(void *addr, unsigned int order, enum usl_page_kind kind);
USL_HIDDEN void usl_pages_unhead(void *addr, const void *owner);

/* ---- uslab's own structures (meta.c) ---- */
/* Blocks in metadata regions: whole regions of the range that hold no user
 * block, with a PROT_NONE page at each end (docs/ARCHITECTURE.md, "Memory and metadata").
 * usl_meta_block: 2^order pages, naturally aligned if aligned (slabs of
 * uslab's own caches: up to 2^8 pages), else up to 2^9; its head entry of
 * this kind. usl_meta_alloc: a zeroed block of at least size bytes (NULL
 * above 2^9 pages). usl_meta_free frees either, its pages back to the OS. */
USL_HIDDEN void *usl_meta_block(unsigned int order, bool aligned, enum usl_page_kind kind);
USL_HIDDEN void *usl_meta_alloc(size_t size);
USL_HIDDEN void usl_meta_free(void *p);
USL_HIDDEN size_t usl_meta_reserved(void);      /* bytes of the range in metadata regions */
USL_HIDDEN void usl_meta_fork_lock(void);       /* meta_lock, before pages_lock */
USL_HIDDEN void usl_meta_fork_unlock(void);

/* ---- large blocks (large.c) ---- */
/* A direct mapping of size bytes aligned to align (a power of two; at least a
 * page), recorded so free and size find it by address; NULL if the kernel
 * refuses or the table cannot grow. A freed mapping kept for reuse may serve
 * it; with zero its size bytes read as zeros either way (a fresh one is not
 * written). */
USL_HIDDEN void *usl_map_alloc(size_t size, size_t align, bool zero);
/* Unmap the kept freed mappings that no request took since the last call
 * (all of them with all); the bytes unmapped. Called by the decay sweep and
 * malloc_trim, beside usl_pages_purge. */
USL_HIDDEN size_t usl_map_purge(bool all);
USL_HIDDEN size_t usl_map_kept_bytes(void);     /* bytes in kept freed mappings */
/* Resize the mapping at p to hold n bytes (mremap, which may move it): the new
 * address, or NULL (p unchanged) if p is not a mapping or the kernel refuses. */
USL_HIDDEN void *usl_map_resize(void *p, size_t n);
USL_HIDDEN size_t usl_map_bytes(void);          /* bytes in direct mappings */
USL_HIDDEN size_t usl_map_count(void);
/* The most direct mappings and bytes in them at any one time. */
USL_HIDDEN void usl_map_peaks(size_t *count, size_t *bytes);
USL_HIDDEN void usl_map_fork_lock(void);        /* mappings_lock, after pages_lock */
USL_HIDDEN void usl_map_fork_unlock(void);
/* The usable bytes of the large block (a USL_PAGE_LARGE page block, or a
 * mapping) that p starts; 0 if p starts none. */
USL_HIDDEN size_t usl_large_size(const void *p);
/* Free the large block p starts; false (nothing done) if it starts none. A
 * page block is checked under pages_lock, so two frees cannot both win. */
USL_HIDDEN bool usl_large_free(void *p);

#endif /* USL_PAGES_H */
