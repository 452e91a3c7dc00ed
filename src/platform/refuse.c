/* refuse.c - the words of every refused free and pop, in one place: a free
 * that frees nothing (a double free, a pointer that is no object, an object
 * of another cache, one never handed out) and a pop or list walk that hands
 * nothing out (an object not free any more, or written after its free). The
 * layers above find out why and call here; each message exists only here.
 * fn names the call the program made, cache the cache's name (NULL: none
 * known). Reports go through usl_report (report.c); no lock of its own. */
#include "platform.h"

void usl_refuse_double_free(const char *fn, const char *cache, const void *x, const char *why)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): double free of %p (%s); not freed", fn, cache, x,
	           why ? why : "already free");
}

void usl_refuse_never_allocated(const char *fn, const char *cache, const void *x)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p was never allocated (free of an object not yet handed out); "
	           "not freed", fn, cache, x);
}

void usl_refuse_twice_in_array(const char *fn, const char *cache, const void *x)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p appears twice in the array; freed once", fn, cache, x);
}

void usl_refuse_foreign(const char *fn, const char *cache, const void *x, bool ignored)
{
	if (cache)
		usl_report(USLAB_ERR_FOREIGN, "%s(%s): %p is not a uslab pointer; %s", fn, cache, x,
		           ignored ? "ignored" : "not freed");
	else
		usl_report(USLAB_ERR_FOREIGN, "%s: %p is not a uslab pointer; %s", fn, x, ignored ? "ignored" : "not freed");
}

void usl_refuse_wrong_cache(const char *fn, const char *cache, const void *x, const char *owner)
{
	usl_report(USLAB_ERR_WRONG_CACHE, "%s(%s): %p belongs to cache %s; not freed", fn, cache, x, owner);
}

void usl_refuse_not_object(const char *fn, const char *cache, const void *x, const char *what)
{
	if (!what)
		what = "is not an object of this cache";
	if (cache)
		usl_report(USLAB_ERR_NOT_OBJECT, "%s(%s): %p %s; not freed", fn, cache, x, what);
	else
		usl_report(USLAB_ERR_NOT_OBJECT, "%s: %p %s; ignored", fn, x, what);
}

void usl_refuse_inside(const char *fn, const char *cache, const void *x, unsigned long offset)
{
	usl_report(USLAB_ERR_NOT_OBJECT, "%s(%s): %p is not the start of an object (offset %lu in its slab); not freed",
	           fn, cache, x, offset);
}

void usl_refuse_pop(const char *fn, const char *cache, const void *obj, const char *how)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %p is not free any more (%s); not handed out again", fn, cache, obj,
	           how);
}

void usl_refuse_written(const char *cache, const void *obj)
{
	usl_report(USLAB_ERR_CORRUPT, "%s: free object %p was written after it was freed (its free flag is gone); "
	           "not handed out, and kept out of use", cache, obj);
}

void usl_refuse_lost_marker(const char *fn, const char *cache, const void *x)
{
	usl_report(USLAB_ERR_CORRUPT, "%s(%s): free object %p lost its free marker (written after its free, or "
	           "freed twice and handed out); not freed, kept out of use", fn, cache, x);
}

void usl_refuse_overfree(const char *fn, const char *cache, unsigned int freed, unsigned int inuse)
{
	usl_report(USLAB_ERR_DOUBLE_FREE, "%s(%s): %u objects of one slab freed but only %u in use; none of them freed",
	           fn, cache, freed, inuse);
}
