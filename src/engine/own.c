/* own.c - objects of uslab's own caches for either engine: those caches are
 * always SLUB's (common/cache.c makes them so), so this is SLUB's cpu-slab
 * allocation and free; SLAB takes its off-slab index arrays here. Takes what
 * SLUB's paths take (a slot's lock in locked mode, a node's list_lock). */
#include "../pages/pages.h"
#include "own.h"
#include "slub/slub.h"

void *usl_own_alloc(struct kmem_cache *s, gfp_t gfp)
{
	return usl_slub_alloc(s, gfp);
}

void usl_own_free(struct kmem_cache *s, void *obj)
{
	usl_slub_free(s, usl_virt_to_slab(obj), obj);
}
