/* stat.c - the event counters' increment (engine/slub/stat.h), out of line for the
 * slow paths: usl_stat tests s->stats and calls here only when it is set
 * (USLAB_STATS), so that with counting off a counting point there is a load
 * and a branch not taken. No locks. */
#include "stat.h"

void usl_stat_add_slow(const struct kmem_cache *s, enum usl_stat_item i, unsigned long n)
{
	usl_stat_inc(s, i, n);
}
