/* types.h - the glossary: every structure the layers share (struct slab, the
 * per-CPU slot, the sheaf, the barn, the node, struct kmem_cache, the page-map
 * entry), the compiler helpers and the intrusive list. Types and inline helpers
 * on them only: no functions of any layer, no state, no locks. Each layer's
 * interface is its folder's header (src/README.md gives the order).
 * Vocabulary (page, block, slab, object, slot): docs/ARCHITECTURE.md, "Vocabulary". */
#ifndef USL_TYPES_H
#define USL_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "uslab.h"

#define USL_HIDDEN __attribute__((visibility("hidden")))
#define usl_likely(x) __builtin_expect(!!(x), 1)
#define usl_unlikely(x) __builtin_expect(!!(x), 0)
/* A function's role on a path. USL_FAST_PATH: a piece of a fast path, inlined
 * into it. USL_OUT_OF_LINE: a path a fast one leaves for, kept out of line so
 * the fast path saves no register for it. USL_SLOW_PATH: the same, off the
 * usual course (a report, a refusal, a rare case): placed apart, cold. */
#define USL_FAST_PATH inline __attribute__((always_inline))
#define USL_OUT_OF_LINE __attribute__((noinline))
#define USL_SLOW_PATH __attribute__((noinline, cold))
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
/* Every entry of from moved to the tail of to, in order; from left empty
 * (the kernel's list_splice_tail_init). */
static inline void usl_list_splice_tail_init(struct usl_list *from, struct usl_list *to)
{
	if (from->next == from)
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	from->next = from->prev = from;
}
static inline void usl_list_del(struct usl_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
#define usl_container_of(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

/* The largest block of the page provider: 2^USL_MAX_ORDER pages. */
#define USL_MAX_ORDER 10
/* The OS page: 4 KiB on every x86-64 Linux (start-up checks the aux vector's
 * size and refuses another), so the fast paths index the page map with a
 * constant shift. */
#define USL_PAGE_SHIFT 12u
#define USL_PAGE_SIZE ((size_t)1 << USL_PAGE_SHIFT)

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
	uint8_t nid;                 /* slabs: the node of its pages (its region's, pages.c) */
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
 * free, counted out of inuse, handed out by carving (engine/slub/newslab.c). */
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
	uint16_t main_size;          /* 48: main's object count while it is attached (its
	                                own size field is stale then); 0 for usl_empty_sheaf */
	uint16_t main_lo;            /* 50: main_delay > 0: the oldest object, the next a pop
	                                takes (objects[0..main_lo) were handed out); else 0 */
	uint16_t main_cap;           /* 52: main's capacity (0 for usl_empty_sheaf): a push
	                                compares its count with it in this line */
	uint16_t main_delay;         /* 54: the cache's reuse_delay: 0, pops take the newest
	                                (the kernel's order); else the oldest, and only while
	                                more than main_delay objects wait (delayed reuse:
	                                docs/ARCHITECTURE.md, "Hardening") */
	struct slab_sheaf *main;     /* 56: never NULL (usl_empty_sheaf when detached, and
	                                in a cache without sheaves) */
	/* 64..127: nothing. A slot fills its line and the next: Intel's L2 fetches
	 * lines in 128-byte pairs, so two CPUs' slots in one pair would move it
	 * between the CPUs on every fast path (docs/ARCHITECTURE.md, "Memory and
	 * metadata"). */
} __attribute__((aligned(128)));

/* The sections index the slots by cpu_id << USL_CPU_SHIFT; every offset the asm
 * uses is an "i"(offsetof(...)) operand (arch/rseq_x86.h). */
#define USL_CPU_SHIFT 7
_Static_assert(sizeof(struct kmem_cache_cpu) == (1u << USL_CPU_SHIFT), "slot size is the fast path's shift");
_Static_assert(offsetof(struct kmem_cache_cpu, slab) == offsetof(struct kmem_cache_cpu, freelist) + 8,
               "freelist and slab: one 16-byte store");
_Static_assert(offsetof(struct kmem_cache_cpu, main) == offsetof(struct kmem_cache_cpu, main_size) + 8 &&
               offsetof(struct kmem_cache_cpu, main_cap) == offsetof(struct kmem_cache_cpu, main_size) + 4,
               "{main_size, main_lo, main_cap, main_delay} and main: one 16-byte store");

/* A sheaf: an array of object pointers. The cache pointer
 * sits just before objects[], so objects[-1] of an empty sheaf is never an object
 * (the free section's double-free check reads it). Under SLAB a slot's sheaf is
 * the kernel's array_cache (avail = size, limit = capacity) and never visits a
 * barn; a node's shared array and alien arrays are sheaves too. */
struct slab_sheaf {
	union {
		struct slab_sheaf *next;     /* 0: on a barn stack */
		struct usl_list barn_list;   /* 0: on a private list (flushing) */
		struct {                     /* 0: SLAB's array cache (percpu/array.c) */
			uint32_t touched;    /* a slow path used it since the last reap */
			uint32_t reap_size;  /* its size at the last reap */
		} ac;
	};
	uint32_t size;               /* 16: objects in it */
	uint32_t capacity;           /* 20 */
	struct kmem_cache *cache;    /* 24 */
	void *objects[];             /* 32 */
};

/* Per node: full and empty sheaves, shared by the node's CPUs. */
struct usl_barn {
	int lock;                    /* spin lock (usl_spin_lock): held for a few list
	                                operations or to pack a sheaf, never across a
	                                call out */
	struct slab_sheaf *full, *empty;   /* LIFO stacks through sheaf->next: a push or pop
	                                      touches only that sheaf */
	unsigned int nr_full, nr_empty;
	unsigned int low_full;       /* fewest full sheaves since last_decay */
	unsigned int high_full;      /* most full sheaves since last_decay: as many empties
	                                may stay, for the frees that will refill them */
	unsigned int low_empty;      /* fewest empty sheaves since last_empty_check */
	unsigned int dry_refills;    /* refills from slabs since a full sheaf was put */
	uint64_t last_empty_check;   /* ms */
	unsigned int puts;           /* full puts above the level: the clock is read every 16 */
	unsigned int visits;         /* barn visits, and their count at the last sweep: */
	unsigned int visits_swept;   /* equal at a sweep means the cache sat idle */
	unsigned int refill_shift;   /* set by a sweep that flushed the CPUs: the next
	                                refills take capacity >> shift, shift - 1, ... */
	uint64_t last_decay;         /* ms */
	/* Packed sheaves (barn.c): a full sheaf the barn has no room for is
	 * written into its own free objects, and only its head object is kept,
	 * in one of two stacks linked through the head's first word: young
	 * (packed since the last aging) and old (packed before it; what is
	 * still there at the next aging goes back to slabs). */
	void *packed, *packed_old;
	unsigned int nr_packed, nr_packed_old;
	unsigned long packed_objects;   /* objects in both stacks (written under the lock) */
	uint64_t last_packed_age;       /* ms */
};

/* Per NUMA node: each cache has one for every node id below usl_nr_nodes
 * (common/cache.c makes them with the cache). */
struct kmem_cache_node {
	pthread_mutex_t list_lock;   /* protects partial, nr_partial, slab->node_partial */
	struct usl_list partial;
	unsigned long nr_partial;
	unsigned long nr_slabs;      /* atomic: slabs allocated for this node */
	unsigned long total_objects; /* atomic: objects in those slabs */
	struct usl_barn barn;
	struct usl_list full;        /* debug caches: their full slabs (under list_lock);
	                                SLAB: slabs_full */
	/* SLAB (src/engine/slab/): partial is slabs_partial, full slabs_full; all
	 * under list_lock but colour_next (advanced without it). */
	struct usl_list slabs_free;
	unsigned long free_objects;  /* free objects on the three lists */
	unsigned long free_limit;    /* free_block keeps at most this many (then frees slabs) */
	unsigned long free_slabs;    /* slabs on slabs_free */
	unsigned int colour_next;    /* the next new slab's colour (racy, in [0, colour)) */
	int free_touched;            /* a refill took a free slab since the last reap */
	uint64_t next_reap;          /* ms: the shared array and free slabs are reaped after it */
	struct slab_sheaf *shared;   /* the node's shared array (limit shared * batchcount), or NULL */
	/* The owned front end (engine/slub/oslab.c), under list_lock: every owned
	 * slab of the node, and its orphans with free objects. */
	struct usl_list owned;
	struct usl_list orphans;
	struct usl_list retired;     /* metadata of discarded slabs, kept for the next
	                                (a late announce may still touch it) */
	unsigned long nr_owned, nr_orphans, nr_retired;
	struct usl_alien {           /* SLAB, more than one node: objects of another node's */
		int lock;            /* slabs freed on this one, an array per node (usl_nr_nodes);
		                        spin lock, taken before the remote node's list_lock */
		struct slab_sheaf *ac;
	} *alien;
} __attribute__((aligned(64)));

/* The engines (s->engine): every cache is on one of them for its life. */
enum usl_engine { USL_ENGINE_SLUB = 0, USL_ENGINE_SLAB = 1 };
/* Node ids: 0 .. USL_MAX_NODES - 1 (platform/topology.c). */
#define USL_MAX_NODES 64

#define USL_NAME_MAX 48
/* s->flags bits. uslab's own caches (sheaf structures): no sheaves, no merging,
 * and their growth does not reclaim the barns their sheaves serve. */
#define USL_SLAB_INTERNAL 0x80000000U
#define USL_SLAB_KMALLOC 0x40000000U    /* a kmalloc class: never destroyed, never a merge target */
/* Debug caches (engine/slub/debug.c): every allocation and free takes the checked path. */
#define USL_SLAB_DEBUG_FLAGS (SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER | SLAB_TRACE)

/* s->path, the path a cache's alloc and free take (set in one place, path.c's
 * usl_path_set; docs/ARCHITECTURE.md, "Which path a cache takes"): the sheaf
 * sections with hardening on in a two-word cache (the usual case: the marker
 * written blindly at free, checked at the pop), the sheaf sections otherwise
 * (hardening off, or a one-word cache, whose marker a free checks first), the
 * cpu slab's, or (USLAB_STATS) any of them through the paths that count
 * (common/alloc.c, common/free.c). */
enum usl_path { USL_PATH_CPU_SLAB = 0, USL_PATH_SHEAF = 1, USL_PATH_COUNTED = 2, USL_PATH_SHEAF_OTHER = 3,
                     USL_PATH_OWNED = 8 };   /* the owned front end (percpu/owned.c) */
/* More than one node: or'ed into the kind (never into USL_PATH_COUNTED, whose
 * free checks the node itself), so no kind's usual test matches and the
 * other paths free another node's object back to its node (common/free.c). */
#define USL_PATH_NUMA 4u

struct kmem_cache {
	/* Read by the fast paths: keep together. */
	struct kmem_cache_cpu *cpu_slab; /* usl_nr_cpus slots: usl_id_slots(id) */
	unsigned int offset;         /* free pointer offset inside (or after) the object */
	unsigned int size;           /* object stride */
	uint32_t div_inv;            /* (size >> div_shift)^-1 mod 2^32: object index test */
	uint32_t div_shift;          /* trailing zero bits of size */
	unsigned int sheaf_capacity; /* 0: no sheaves (the cpu slab is the fast path) */
	slab_flags_t flags;
	unsigned int id;             /* in usl_caches and the page map (common/path.c) */
	unsigned int object_size;    /* what the creator asked for */
	uintptr_t fp_secret;         /* free pointers are stored as p ^ fp_secret ^ bswap(their address) */
	uintptr_t fp_mask;           /* ~(bytes of a slab of the preferred order - 1): a decoded
	                                free pointer lies in its object's block (engine/slub/internal.h) */
	uint32_t path;               /* which path (enum usl_path): tested where
	                                sheaf_capacity would be, so counting costs nothing off */
	unsigned int flag_off;           /* a two-word cache's (usl_two_word) flag word: offset + 8
	                                or offset - 8; else offset (none) */
	unsigned int inuse;          /* object_size rounded to a word */
	unsigned int align;
	unsigned int order;          /* preferred slab order */
	unsigned int objects;        /* objects per slab at that order */
	unsigned int min_order;      /* fallback order when the preferred one fails */
	unsigned int min_objects;
	unsigned int min_partial;    /* node partial slabs kept before empties are freed */
	unsigned int cpu_partial;    /* objects the cpu partial lists aim for */
	unsigned int cpu_partial_slabs;
	int virt_lock;               /* SLAB_VIRTUAL: guards virt_free (a leaf) */
	struct slab *virt_free;      /* SLAB_VIRTUAL: its empty slabs' blocks, pages given back,
	                                kept for its next slabs (chained by ->next; engine/slub/slub.c) */
	unsigned int reuse_delay;    /* sheaves: objects handed out on a CPU before one freed there
	                                again (0: the newest first; percpu/pcs.c) */
	bool random;                 /* an unpredictable layout (USLAB_RANDOM, no SLAB_ORDERED):
	                                random carving and refill order */
	unsigned int barn_max_full;  /* barn limits (the kernel's 10 and 10) */
	unsigned int barn_max_empty;
	struct kmem_cache *sheaf_cache; /* where this cache's sheaves come from */
	void (*ctor)(void *);
	int refcount;
	int published;               /* on the registry's list: walks may read it (common/registry.c, cache.c) */
	struct usl_list list;        /* registry (slab_mutex) */
	char name[USL_NAME_MAX];
	void *meta;                  /* a page block (only "kmem_cache" itself), else NULL */
	int recent_use;              /* set by a sampled free (1 in 256 of a thread), cleared by the decay sweep */
	unsigned int red_left_pad;   /* debug caches (engine/slub/debug.c): bytes of left red zone before each object */
	unsigned int info_end;       /* debug: offset from an object of its tracks (after the free pointer) */
	uint64_t *stats;             /* USLAB_STATS: a row of counters per CPU (engine/slub/stat.h), else NULL */
	/* SLAB (src/engine/slab/): its tunables (written under slab_mutex, read racily
	 * as the kernel's array_cache copies are), layout and colour. */
	uint32_t engine;             /* enum usl_engine */
	unsigned int limit;          /* the per-CPU arrays' capacity (sheaf_capacity follows it) */
	unsigned int batchcount;     /* objects a refill takes and a flush gives */
	unsigned int shared;         /* the shared array holds shared * batchcount */
	unsigned int colour;         /* colours: slab offsets 0, colour_off, ..., (colour - 1) * colour_off */
	unsigned int colour_off;
	unsigned int mgmt;           /* where the free-index array lives (engine/slab/slab.c USL_MGMT_*) */
	unsigned int freelist_size;  /* bytes of that array */
	unsigned int mgmt_off;       /* OBJFREELIST: its offset inside the object that holds it */
	struct kmem_cache *freelist_cache;   /* OFF_SLAB: where the arrays come from (one of uslab's own) */
	struct usl_oslot *oslots;    /* the owned front end: usl_nr_cpus slots, else NULL */
	struct kmem_cache *oslab_cache;  /* where its slabs' bitmaps come from */
	struct kmem_cache_node *node[USL_MAX_NODES];   /* the first usl_nr_nodes */
};

/* Does a free object of s keep its bytes (a constructor's state, or what an
 * RCU reader may still read: SLAB_TYPESAFE_BY_RCU)? Then uslab's words go
 * outside it and it is not poisoned. */
static inline bool usl_keeps_state(const struct kmem_cache *s)
{
	return s->ctor || (s->flags & SLAB_TYPESAFE_BY_RCU);
}


/* The object index of byte offset off in a slab of stride d0 << k (d0 odd;
 * div_inv = d0^-1 mod 2^32, div_shift = k): ror32(off * d0^-1, k), which is
 * below the slab's object count exactly when off is an object start
 * (Granlund-Montgomery), with no division. */
static inline uint32_t usl_obj_index(uint32_t off, uint32_t div_inv, uint32_t div_shift)
{
	uint32_t q = off * div_inv;
	return (q >> div_shift) | (q << ((32 - div_shift) & 31));
}


/* ---------------------------------------------------------------------------
 * The page map entry: per page, where its block begins and, for a slab, its
 * cache id and object count (the pages layer keeps the map, pages/pages.h). */
struct usl_pagemap_entry {
	uint32_t start;              /* low 32 bits of the block's offset from usl_base
	                                (blocks are far smaller than 4 GiB); pages.c */
	uint16_t cache;              /* slab: its cache's id (usl_caches); else 0 */
	uint16_t objects;            /* slab: its object count, | USL_PM_INTERNAL for a
	                                slab of uslab's own caches; else 0 (slub.c) */
} __attribute__((aligned(8)));       /* one plain 8-byte load or store */
_Static_assert(sizeof(struct usl_pagemap_entry) == 8, "one 8-byte word");
#define USL_PM_INTERNAL 0x8000u
#define USL_PM_OBJECTS(e) ((unsigned int)(e).objects & (USL_PM_INTERNAL - 1))

/* ---------------------------------------------------------------------------
 * The owned front end (percpu/owned.c, engine/slub/oslab.c; docs/ARCHITECTURE.md,
 * "The owned front end"). An owned slab's free state is a bitmap outside its
 * blocks: struct usl_oslab, in a metadata region, never beside a user block.
 * Line 0 is what a free reads: where the slab is, its divisor, its owner and
 * whether remote frees wait to be merged (pending, with the inbox link:
 * written by other CPUs once per merge). local[] (bit i set: object i free)
 * is written by the owner alone (sections on its CPU, or the thread holding
 * its slot taken, or under list_lock while it is an orphan); the remote
 * words, roff bytes after local[], are set by any other CPU with one locked
 * instruction. */
struct usl_oslot;
struct usl_oslab {
	struct usl_oslot *slots;     /* 0: the cache's owned slots */
	uint32_t div_inv, div_shift; /* 8: the object index (usl_obj_index) */
	uint32_t start_off;          /* 16: the slab's offset in the range (low 32 bits, as the page map's) */
	uint32_t objects;            /* 20 */
	uint32_t roff;               /* 24: bytes from local[0] to remote[0] */
	uint32_t nwords;             /* 28: words of local[] (and of remote[]) */
	uint16_t owner;              /* 32: CPU + 1; 0 an orphan; 0xffff given up */
	uint8_t listed;              /* 34: owner's: the slot's cursor slab or on its avail stack */
	uint8_t orphan_listed;       /* 35: an orphan on its node's orphan list (list_lock) */
	uint32_t pad0;
	uint64_t pending;            /* 40: remote bits not merged yet: on an inbox, or about to be */
	struct usl_oslab *inbox_next; /* 48: the inbox link (written by the CPU that set pending) */
	struct usl_oslab *avail_next; /* 56: the owner's avail stack */
	/* line 1: slow paths (list_lock for the lists) */
	char *start;                 /* 64: the slab's first object */
	struct kmem_cache *cache;    /* 72 */
	struct slab *slab;           /* 80: its struct slab (slab->unused points back) */
	struct usl_list all;         /* 88: n->owned, every owned or orphan slab of the node */
	struct usl_list orphans;     /* 104: n->orphans, orphans with free objects */
	uint64_t pad1;
	uint64_t local[];            /* 128 */
};
_Static_assert(offsetof(struct usl_oslab, local) == 128, "local words start at line 2");
_Static_assert(offsetof(struct usl_oslab, avail_next) < 64, "what a free reads: line 0");
static inline uint64_t *usl_oslab_remote(struct usl_oslab *h) { return (uint64_t *)((char *)h->local + h->roff); }
/* The bytes of an owned slab's metadata with nwords bitmap words. */
static inline size_t usl_oslab_bytes(unsigned int nwords)
{
	return offsetof(struct usl_oslab, local) + 2 * USL_ALIGN((size_t)nwords * 8, USL_CACHELINE);
}

/* A CPU's owned slot of a cache: 128 bytes; the fast paths read line 0 only.
 * lock: 0 free, 1 marked by a flusher (mark + membarrier), 2 taken by one
 * thread that works on the slot's slabs privately (a section on the slot's
 * CPU commits it; the taker may migrate and releases it with a store).
 * {wp, wbase}: the cursor, moved with one 16-byte store while taken. */
struct usl_oslot {
	uint64_t *wp;                /* 0: the local word allocations take from (usl_zero_word: none) */
	char *wbase;                 /* 8: the address of that word's object 0 */
	uint64_t size;               /* 16: the object stride */
	uint64_t me;                 /* 24: CPU + 1 (the owner value of this slot's slabs) */
	int lock;                    /* 32: as the sheaf slots' lock (the sections' prologue) */
	uint32_t idle;               /* 36: decay sweeps that saw no slow path (decay thread's) */
	uint32_t slow;               /* 40: slow paths (the taker's: the sweep's idea of busy) */
	uint32_t slow_seen;          /* 44: slow at the last sweep (decay thread's) */
	struct kmem_cache *cache;    /* 48 */
	uint64_t pad1;
	/* line 1: slow paths; inbox is pushed by other CPUs */
	struct usl_oslab *cur;       /* 64: the cursor's slab */
	struct usl_oslab *avail;     /* 72: listed slabs with free bits, through avail_next */
	struct usl_oslab *inbox;     /* 80: slabs with remote bits to merge (atomic stack) */
	struct usl_oslab *empty;     /* 88: the one wholly free slab kept */
	uint64_t pad2[4];
} __attribute__((aligned(128)));
_Static_assert(sizeof(struct usl_oslot) == 128, "an owned slot is a sheaf slot's size");
_Static_assert(offsetof(struct usl_oslot, lock) == 32, "the lock where the sections' prologue tests it");
/* The owned chunk map (pages.c): per 64 KiB of the range, the usl_oslab of
 * the owned slab there (owned slabs are naturally aligned blocks of at least
 * 64 KiB); 0 for anything else. */
#define USL_OCHUNK_SHIFT 16
#define USL_OSLAB_MIN_ORDER (USL_OCHUNK_SHIFT - 12)

/* Caches by id: ids from 1 (common/path.c); 0 names no cache. */
#define USL_MAX_CACHES 65536

#endif /* USL_TYPES_H */
