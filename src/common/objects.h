/* objects.h - what the common layer's object paths (alloc.c, free.c,
 * bulk.c) share and nothing else includes: the checks and reports a single
 * free and a bulk free make alike. No locks. */
#ifndef USL_COMMON_OBJECTS_H
#define USL_COMMON_OBJECTS_H

#include "common.h"

/* x, an object start of s beyond the page map's carved count (usl_pm_is_object
 * failed): true if it was handed out all the same; else the free is refused
 * with a report naming fn. */
USL_HIDDEN bool usl_uncarved_check(struct kmem_cache *s, void *x, const char *fn);

#endif /* USL_COMMON_OBJECTS_H */
