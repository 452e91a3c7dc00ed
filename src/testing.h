/* testing.h - hooks for the tests, and nothing the library itself calls across
 * files: parsers exposed for unit tests, counts of a cache's slabs and sheaves
 * (a snapshot, racy under load), a fault injector, and lookups of the class
 * serving a size. Each is defined in the layer it reads; this header includes
 * only the glossary, so any layer may include it to check its definitions. */
#ifndef USL_TESTING_H
#define USL_TESTING_H

#include "types.h"

/* platform: one option value ("12"), and a sysfs CPU list file ("0-3,8-11"):
 * its highest id and how many ids it names; false if unreadable. */
USL_HIDDEN bool usl_parse_int(const char *s, long lo, long hi, long *out);
USL_HIDDEN bool usl_cpu_list(const char *path, long *max, long *count);
USL_HIDDEN bool usl_cpu_list_parse(const char *buf, long *max, long *count);
/* platform: sysfs node text (topology.c): a node list as a mask and its
 * highest id, and a node's cpulist into the CPU-to-node table. */
USL_HIDDEN bool usl_topology_node_list(const char *text, uint64_t *mask, long *max);
USL_HIDDEN bool usl_topology_node_cpus(unsigned int nid, const char *cpulist);

/* pages: fail page allocations after n more succeed (-1 = never). */
USL_HIDDEN void usl_pages_fail_after(long n);

/* slub: the kernel's calculate_order for an object stride; the slab states. */
USL_HIDDEN unsigned int usl_calculate_order(unsigned int size);
struct usl_state_counts {
	unsigned long cpu_slabs, cpu_partial, node_partial, full, total, empty_node_partial;
};
USL_HIDDEN void usl_slub_state_counts(struct kmem_cache *s, struct usl_state_counts *out);

/* slub: detached freelists this thread's bulk frees built. */
extern __thread unsigned long usl_bulk_lists USL_HIDDEN __attribute__((tls_model("initial-exec")));

/* percpu: sheaves on the CPUs and in the barn. */
struct usl_sheaf_counts {
	unsigned long cpu_sheaves, cpu_objects, barn_full, barn_empty, barn_objects;
	unsigned long barn_packed, packed_objects;   /* packed sheaves (both stacks) and their objects */
};
USL_HIDDEN void usl_sheaf_counts(struct kmem_cache *s, struct usl_sheaf_counts *out);
/* An empty sheaf taken from s's barn without its lock: the barn's
 * usl_assert_held fires (a build with assertions); else the sheaf or NULL. */
USL_HIDDEN struct slab_sheaf *usl_test_barn_take_unlocked(struct kmem_cache *s);

/* common: the decay thread: running now, sweeps it ran, times it parked;
 * and every decay sweep, the thread's or a slow path's (a sequence count:
 * odd while one runs). */
USL_HIDDEN bool usl_decay_thread_running(void);
extern unsigned long usl_decay_thread_sweeps USL_HIDDEN;
extern unsigned long usl_decay_thread_parks USL_HIDDEN;
extern unsigned long usl_decay_sweeps USL_HIDDEN;

/* kmalloc: the class cache serving size (NULL above 8 KiB): kmalloc's, and
 * malloc's finer classes (usl_malloc_cache_for, kmalloc/kmalloc.h). */
USL_HIDDEN struct kmem_cache *usl_kmalloc_cache_for(size_t size);

#endif /* USL_TESTING_H */
