/* objects.h - what the common layer's object paths (alloc.c, free.c,
 * bulk.c) share and nothing else includes: the push and the pop every fast
 * and bulk path makes, and the checks and reports a single free and a bulk
 * free make alike. No locks. */
#ifndef USL_COMMON_OBJECTS_H
#define USL_COMMON_OBJECTS_H

#include "../arch/arch.h"
#include "../freestate.h"
#include "../percpu/percpu.h"
#include "common.h"

/* The push of every sheaf free, once x is known to be an object of s: with
 * mark, its free marker written blindly (a two-word cache, hardening on:
 * freestate.h), then x onto this CPU's main sheaf (an rseq section).
 * USL_RS_OK, or the section's code for the caller's slow path. */
static USL_FAST_PATH int usl_push(struct kmem_cache *s, void *x, bool mark)
{
	if (mark)
		usl_marker_set(s, x);
	return usl_rseq_sheaf_push(s, x);
}

/* The same from free's per-id entry f (free by pointer: no load of the
 * cache). */
static USL_FAST_PATH int usl_push_entry(const struct usl_free_entry *f, void *x, bool mark)
{
	if (mark) {
		uintptr_t at = (uintptr_t)x + f->fp_offset;
		*(uintptr_t *)at = (uintptr_t)x ^ usl_key(f->secret, (const void *)at);
	}
	return usl_rseq_sheaf_push_at(f->slots, x);
}

/* The check after every sheaf pop (USL_RSEQ_SHEAF_POP): with harden, obj
 * must carry its marker, which is cleared (usl_marker_pop); false: refused,
 * for the caller's report. */
static USL_FAST_PATH bool usl_pop_ok(struct kmem_cache *s, void *obj, bool harden)
{
	return !harden || usl_likely(usl_marker_pop(s, obj));
}

/* x, an object start of s beyond the page map's carved count (usl_pm_is_object
 * failed): true if it was handed out all the same; else the free is refused
 * with a report naming fn. */
USL_HIDDEN bool usl_uncarved_check(struct kmem_cache *s, void *x, const char *fn);

#endif /* USL_COMMON_OBJECTS_H */
