/* stat.c - the event counters' increment (slub/stat.h), out of line: the
 * paths that count test s->stats and call here only when it is set
 * (USLAB_STATS), so that with counting off a counting point is a load and a
 * branch not taken. No locks. */
#include "stat.h"

void usl_stat_add_slow(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
{
	int c = usl_rseq_mode ? usl_rseq_cpu() : usl_cpu_hint;
	unsigned int cpu = c >= 0 && (unsigned int)c < usl_nr_cpus ? (unsigned int)c : 0;
	uint64_t *cell = s->stats + (size_t)cpu * USL_STAT_STRIDE + i;
	__atomic_store_n(cell, __atomic_load_n(cell, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}
