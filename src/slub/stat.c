/* stat.c - the event counters' increment (slub/stat.h), out of line: the
 * paths that count test s->stats and call here only when it is set
 * (USLAB_STATS), so that with counting off a counting point is a load and a
 * branch not taken. No locks. */
#include "stat.h"

void usl_stat_add_slow(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
{
	usl_stat_inc(s, i, n);
}
