/* stats.h - the statistics layer (src/stats/): what uslab holds, per cache and
 * per CPU, read from outside the allocation paths: the kernel's sysfs
 * attributes of /sys/kernel/slab/<cache>/ (attr.c) and /proc/slabinfo
 * (slabinfo.c), over the event counters every layer below keeps
 * (engine/slub/stat.h) and the counts the engine and the per-CPU layer give. It
 * calls down only; the malloc override calls it for malloc_stats and
 * mallinfo2. Locks: slab_mutex (usl_cache_for_each) around a walk of the
 * caches, then a node's list_lock or a barn's lock for a snapshot; none is
 * held while a caller's FILE is written. docs/ARCHITECTURE.md, "Statistics". */
#ifndef USL_STATS_H
#define USL_STATS_H

#include <stdio.h>
#include <sys/types.h>

#include "../common/common.h"
#include "../kmalloc/kmalloc.h"

/* The counters' sysfs names, by enum usl_stat_item. */
extern const char *const usl_stat_names[USL_NR_STATS] USL_HIDDEN;

/* A counter summed over the CPUs (0 without USLAB_STATS). */
USL_HIDDEN unsigned long long usl_stat_sum(const struct kmem_cache *s, enum usl_stat_item i);

/* What /proc/slabinfo says of one cache (the kernel's struct slabinfo for SLUB). */
struct usl_slabinfo {
	unsigned long active_objs, num_objs, active_slabs, num_slabs;
	unsigned int objects_per_slab, order;
	unsigned int limit, batchcount, shared;   /* SLAB's tunables (SLUB: 0) */
	unsigned long shared_avail;              /* objects in SLAB's shared arrays */
};
USL_HIDDEN void usl_cache_slabinfo(struct kmem_cache *s, struct usl_slabinfo *out);

/* The totals slabinfo's rows add up to: slab bytes (num_slabs times the
 * slab size) and bytes in active objects (active_objs * objsize), for the
 * program's caches (user and kmalloc: the heap range) and uslab's own (its
 * metadata regions) apart. */
struct usl_heap_totals {
	unsigned long long slab_bytes, active_bytes;         /* the program's caches */
	unsigned long long own_slab_bytes, own_active_bytes; /* uslab's own caches */
	unsigned long long caches;
	/* The program's caches per node (usl_nr_nodes of them): slab bytes and
	 * bytes in objects in use by the slabs' counts. */
	unsigned long long node_slab_bytes[USL_MAX_NODES], node_active_bytes[USL_MAX_NODES];
};
USL_HIDDEN void usl_heap_totals(struct usl_heap_totals *out);

/* The live view's constructor (live.c): with USLAB_STATS, makes the file and
 * sets usl_stats_tick. Named by the malloc override so that a static link
 * keeps it. */
USL_HIDDEN void usl_live_init(void);
/* USLAB_STATS's slabinfo at exit (slabinfo.c), from live.c's destructor; the
 * process that read the options writes to the path, a forked child to
 * <path>.<pid> (usl_stats_pid: the first, set by usl_live_init). */
USL_HIDDEN void usl_stats_exit_report(void);
extern pid_t usl_stats_pid USL_HIDDEN;

#endif /* USL_STATS_H */
