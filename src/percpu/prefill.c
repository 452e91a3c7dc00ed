/* prefill.c - prefilled sheaves (the kernel's API for callers that must not
 * fail later) and the per-CPU layer's set-up: sheaf capacity by object size,
 * sheaf size classes, a cache's barn. Locks: through sheaf.c and barn.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "percpu.h"
#include "sheaf.h"

/* ===========================================================================
 * Prefilled sheaves (the kernel's API for callers that must not fail later)
 */

static bool sheaf_arg_ok(const char *fn, struct kmem_cache *s, struct slab_sheaf *sh)
{
	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL cache", fn);
		return false;
	}
	if (!sh) {
		usl_report(USLAB_ERR_BAD_ARG, "%s(%s): NULL sheaf", fn, s->name);
		return false;
	}
	if (sh->cache != s) {
		usl_report(USLAB_ERR_WRONG_CACHE, "%s(%s): sheaf %p belongs to another cache", fn, s->name, (void *)sh);
		return false;
	}
	return true;
}

struct slab_sheaf *kmem_cache_prefill_sheaf(struct kmem_cache *s, gfp_t gfp, unsigned int size)
{
	struct slab_sheaf *sh = NULL;
	struct usl_pcs b;

	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_prefill_sheaf: NULL cache");
		return NULL;
	}
	if (!s->sheaf_capacity || size > s->sheaf_capacity || usl_is_slab(s)) {
		/* Oversize (or a cache without sheaves, or SLAB's, which has no
		 * spare or barn to keep one in): a one-off sheaf. */
		if (size > USL_SHEAF_MAX_CAPACITY) {
			usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_prefill_sheaf(%s): %u objects is above the limit %u",
			           s->name, size, USL_SHEAF_MAX_CAPACITY);
			return NULL;
		}
		usl_stat(s, USL_SHEAF_PREFILL_OVERSIZE);
		sh = usl_sheaf_new(s, size, gfp);
		if (sh && usl_sheaf_refill(s, sh, size, gfp) != 0) {
			usl_sheaf_dispose(s, sh);
			sh = NULL;
		}
		goto out;
	}
	/* The kernel's order: this CPU's spare, then the barn's full, then empty. */
	if (usl_pcs_take(s, &b)) {
		if (b.spare && b.spare->size >= size) {
			sh = b.spare;
			b.spare = NULL;
		}
		usl_pcs_put(s, &b);
	}
	usl_stat(s, sh ? USL_SHEAF_PREFILL_FAST : USL_SHEAF_PREFILL_SLOW);
	if (!sh)
		sh = usl_barn_get(s, true);
	if (!sh)
		sh = usl_barn_get(s, false);
	if (!sh)
		sh = usl_sheaf_new(s, s->sheaf_capacity, gfp);
	if (sh && usl_sheaf_refill(s, sh, sh->capacity, gfp) != 0 && usl_sheaf_refill(s, sh, size, gfp) != 0) {
		usl_sheaf_give_back(s, sh);
		sh = NULL;
	}
out:
	if (!sh && !(gfp & __GFP_NOWARN))
		usl_report(USLAB_ERR_NOMEM, "kmem_cache_prefill_sheaf(%s): out of memory for %u objects", s->name, size);
	return sh;
}

void *kmem_cache_alloc_from_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sh)
{
	if (!sheaf_arg_ok("kmem_cache_alloc_from_sheaf", s, sh))
		return NULL;
	if (!sh->size) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_alloc_from_sheaf(%s): the sheaf is empty", s->name);
		return NULL;
	}
	void *obj = sh->objects[--sh->size];
	if (usl_opt.harden && !(s->flags & USL_SLAB_DEBUG_FLAGS) && !s->oslots) {
		/* Its free marker (freestate.h), written by the refill. */
		if (usl_unlikely(!usl_marker_pop(s, obj))) {
			usl_report_pop_refused(s, obj, "kmem_cache_alloc_from_sheaf");
			return NULL;
		}
	}
	if (gfp & __GFP_ZERO)
		memset(obj, 0, __atomic_load_n(&s->object_size, __ATOMIC_RELAXED));
	return obj;
}

int kmem_cache_refill_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf **sheafp, unsigned int size)
{
	if (!sheafp) {
		usl_report(USLAB_ERR_BAD_ARG, "kmem_cache_refill_sheaf(%s): NULL sheaf pointer", s ? s->name : "NULL");
		return -EINVAL;
	}
	struct slab_sheaf *sh = *sheafp;
	if (!sh) {
		*sheafp = kmem_cache_prefill_sheaf(s, gfp, size);
		return *sheafp ? 0 : -ENOMEM;
	}
	if (!sheaf_arg_ok("kmem_cache_refill_sheaf", s, sh))
		return -EINVAL;
	if (sh->size >= size)
		return 0;
	if (size <= sh->capacity) {
		/* Top it up, to full if memory allows. */
		if (usl_sheaf_refill(s, sh, sh->capacity, gfp) == 0 || usl_sheaf_refill(s, sh, size, gfp) == 0)
			return 0;
		if (!(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmem_cache_refill_sheaf(%s): out of memory for %u objects", s->name,
			           size);
		return -ENOMEM;
	}
	struct slab_sheaf *big = kmem_cache_prefill_sheaf(s, gfp, size);
	if (!big)
		return -ENOMEM;
	kmem_cache_return_sheaf(s, gfp, sh);
	*sheafp = big;
	return 0;
}

void kmem_cache_return_sheaf(struct kmem_cache *s, gfp_t gfp, struct slab_sheaf *sh)
{
	struct usl_pcs b;

	if (!sheaf_arg_ok("kmem_cache_return_sheaf", s, sh))
		return;
	if (usl_sheaf_is_oversize(s, sh) || usl_is_slab(s)) {
		usl_sheaf_flush(s, sh);
		usl_sheaf_dispose(s, sh);
		return;
	}
	/* As this CPU's spare if it has none; else filled up into the barn; else
	 * its objects back to slabs. */
	if (usl_pcs_take(s, &b)) {
		if (!b.spare) {
			b.spare = sh;
			sh = NULL;
		}
		usl_pcs_put(s, &b);
		if (!sh) {
			usl_stat(s, USL_SHEAF_RETURN_FAST);
			return;
		}
	}
	usl_stat(s, USL_SHEAF_RETURN_SLOW);
	if (usl_sheaf_refill(s, sh, sh->capacity, gfp | __GFP_NOWARN) == 0) {
		usl_barn_visit(s, sh, -1);
		return;
	}
	usl_sheaf_give_back(s, sh);
}

unsigned int kmem_cache_sheaf_size(struct slab_sheaf *sh)
{
	return sh ? sh->size : 0;
}

unsigned int uslab_sheaf_capacity(struct kmem_cache *s)
{
	return s ? s->sheaf_capacity : 0;
}

/* ===========================================================================
 * Set-up
 */

/* The kernel's calculate_sheaf_capacity: by object size, at least what the
 * creator asked for, rounded up so the sheaf fills its size class. */
unsigned int usl_sheaf_capacity_for(unsigned int size, unsigned int requested, bool delayed)
{
	unsigned int cap;

	if (size >= USL_PAGE_SIZE)
		cap = 4;
	else if (size >= 1024)
		cap = 12;
	else if (size >= 256)
		cap = delayed ? 124 : 26;   /* room for delayed reuse's 32 waiting */
	else
		cap = delayed ? 124 : 60;
	if (requested > cap)
		cap = requested;
	if (cap > USL_SHEAF_MAX_CAPACITY)
		return 0;
	for (unsigned int i = 0; i < USL_SHEAF_CLASSES; i++)
		if (usl_sheaf_bytes(cap) <= usl_sheaf_class_bytes((int)i))
			return (usl_sheaf_class_bytes((int)i) - USL_SHEAF_HEADER) / 8u;
	return 0;
}

static void barn_init(struct usl_barn *barn)
{
	barn->low_full = 0;
	barn->last_decay = usl_now_ms();
	barn->lock = 0;
	barn->full = barn->empty = NULL;
	barn->packed = barn->packed_old = NULL;
	barn->nr_packed = barn->nr_packed_old = 0;
	barn->packed_objects = 0;
	barn->last_packed_age = barn->last_decay;
}

void usl_sheaf_cache_init(struct kmem_cache *s)
{
	s->barn_max_full = 10;
	s->barn_max_empty = 10;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		barn_init(usl_node_barn(s, nid));
}

