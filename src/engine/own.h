/* own.h - what both engines share: objects of uslab's own caches, which are
 * always SLUB's (own.c), for either engine's use (SLAB's off-slab index
 * arrays). So SLAB stands on this file, not on SLUB. No locks of its own. */
#ifndef USL_ENGINE_OWN_H
#define USL_ENGINE_OWN_H

#include "../types.h"

/* An object of s, one of uslab's own caches (no zeroing), or NULL. */
USL_HIDDEN void *usl_own_alloc(struct kmem_cache *s, gfp_t gfp);
/* obj back to s. */
USL_HIDDEN void usl_own_free(struct kmem_cache *s, void *obj);

#endif /* USL_ENGINE_OWN_H */
