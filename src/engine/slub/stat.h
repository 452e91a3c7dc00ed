/* stat.h - the per-cache event counters (the kernel's CONFIG_SLUB_STATS), as
 * every layer from the engine up counts them: enum usl_stat_item in the
 * kernel's order and words, and usl_stat / usl_stat_add. Counting is on only
 * with USLAB_STATS (usl_opt.stats; s->stats is NULL otherwise), into a row per
 * CPU of s->stats, so that no two CPUs write one cache line: the CPU the
 * thread runs on (rseq mode) or its slot hint (locked mode). As in the kernel,
 * an increment is a plain read and write, not an atomic one: a thread that
 * migrates between the two may lose another CPU's increment (rare; exact for
 * one thread). Summed on read (stats/attr.c). The fast paths count only in
 * their counting copies (common/alloc.c and free.c, s->path), with usl_stat_inc. No locks. */
#ifndef USL_SLUB_STAT_H
#define USL_SLUB_STAT_H

#include "../../arch/arch.h"
#include "../../platform/platform.h"
#include "../../types.h"

enum usl_stat_item {
	USL_ALLOC_PCS,              /* allocation from the CPU's sheaf */
	USL_ALLOC_FASTPATH,         /* allocation from the cpu slab's freelist */
	USL_ALLOC_SLOWPATH,         /* allocation that needed a new cpu slab (or a slab directly) */
	USL_FREE_PCS,               /* free to the CPU's sheaf */
	USL_FREE_RCU_SHEAF,         /* (kfree_rcu: none in user space) */
	USL_FREE_RCU_SHEAF_FAIL,
	USL_FREE_FASTPATH,          /* free to the cpu slab's freelist */
	USL_FREE_SLOWPATH,          /* free to a slab that is not this CPU's cpu slab */
	USL_FREE_FROZEN,            /* ... to a frozen slab (another CPU's cpu slab) */
	USL_FREE_ADD_PARTIAL,       /* a free put a full slab on the node partial list */
	USL_FREE_REMOVE_PARTIAL,    /* a free emptied a slab and took it off the list */
	USL_ALLOC_FROM_PARTIAL,     /* a cpu slab taken from the node partial list */
	USL_ALLOC_SLAB,             /* a new slab from the page provider */
	USL_ALLOC_REFILL,           /* the cpu slab's freelist refilled from its slab */
	USL_ALLOC_NODE_MISMATCH,    /* kmem_cache_alloc_node for a node not the CPU's */
	USL_FREE_SLAB,              /* a slab given back to the page provider */
	USL_CPUSLAB_FLUSH,          /* a cpu slab taken away by a flush */
	USL_DEACTIVATE_FULL,        /* a cpu slab was full when it stopped being one */
	USL_DEACTIVATE_EMPTY,       /* ... empty */
	USL_DEACTIVATE_TO_HEAD,     /* ... put at the head of the node partial list */
	USL_DEACTIVATE_TO_TAIL,     /* ... at its tail */
	USL_DEACTIVATE_REMOTE_FREES, /* ... with frees from other CPUs waiting on it */
	USL_DEACTIVATE_BYPASS,      /* a cpu slab dropped when its freelist ran out */
	USL_ORDER_FALLBACK,         /* a slab of the smaller order after the preferred failed */
	USL_CMPXCHG_DOUBLE_CPU_FAIL, /* a slot's {tid, freelist} compare-and-swap failed */
	USL_CMPXCHG_DOUBLE_FAIL,    /* a slab's {freelist, counters} compare-and-swap failed */
	USL_CPU_PARTIAL_ALLOC,      /* a cpu slab taken from the CPU's partial list */
	USL_CPU_PARTIAL_FREE,       /* a free put a slab on the CPU's partial list */
	USL_CPU_PARTIAL_NODE,       /* slabs moved from the node list to the CPU's partial list */
	USL_CPU_PARTIAL_DRAIN,      /* the CPU's partial list drained to the node */
	USL_SHEAF_FLUSH,            /* objects flushed from sheaves to slabs */
	USL_SHEAF_REFILL,           /* objects refilled into sheaves from slabs */
	USL_SHEAF_ALLOC,            /* sheaves allocated */
	USL_SHEAF_FREE,             /* sheaves freed */
	USL_BARN_GET,               /* a full sheaf taken from the barn */
	USL_BARN_GET_FAIL,          /* ... none there */
	USL_BARN_PUT,               /* a full sheaf put in the barn */
	USL_BARN_PUT_FAIL,          /* ... the barn was at its limit */
	USL_SHEAF_PREFILL_FAST,     /* kmem_cache_prefill_sheaf from the CPU's spare */
	USL_SHEAF_PREFILL_SLOW,     /* ... from a new or barn sheaf */
	USL_SHEAF_PREFILL_OVERSIZE, /* ... larger than the sheaf capacity */
	USL_SHEAF_RETURN_FAST,      /* kmem_cache_return_sheaf kept the sheaf */
	USL_SHEAF_RETURN_SLOW,      /* ... flushed and freed it */
	/* uslab's own, not the kernel's: what the delayed freezing of CPU
	 * partial slabs saves (docs/GUIDE.md, "Statistics") */
	USL_CMPXCHG_DOUBLE,         /* a slab's {freelist, counters} compare-and-swap tried */
	USL_LIST_LOCK,              /* a node's list_lock taken by the allocation and free paths */
	USL_NR_STATS
};

/* A CPU's row: whole cache lines. */
#define USL_STAT_STRIDE ((USL_NR_STATS + 7) & ~7u)


extern __thread int usl_cpu_hint USL_HIDDEN __attribute__((tls_model("initial-exec")));

/* The increment, for s->stats set (the fast paths' counting tail calls use
 * it directly, the rest through usl_stat_add). */
static inline void usl_stat_inc(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
{
	int c = usl_rseq_mode ? usl_rseq_cpu() : usl_cpu_hint;
	unsigned int cpu = c >= 0 && (unsigned int)c < usl_nr_cpus ? (unsigned int)c : 0;
	uint64_t *cell = s->stats + (size_t)cpu * USL_STAT_STRIDE + i;
	__atomic_store_n(cell, __atomic_load_n(cell, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* Counting: a test of s->stats inline, the increment out of line (stat.c). */
USL_HIDDEN void usl_stat_add_slow(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
	USL_SLOW_PATH;

static inline void usl_stat_add(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
{
	if (usl_unlikely(s->stats != NULL))
		usl_stat_add_slow(s, i, n);
}

static inline void usl_stat(const struct kmem_cache *s, enum usl_stat_item i)
{
	usl_stat_add(s, i, 1);
}

#endif
