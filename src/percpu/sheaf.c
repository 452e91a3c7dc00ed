/* sheaf.c - sheaf structures (arrays of free object pointers) and their size
 * classes: made from their class's cache or a page block, refilled from and flushed to the
 * slabs with the engine's bulk paths (a refill in a random order with an
 * unpredictable layout); the empty sheaf; the slow-path hook.
 * No locks. */
#define _GNU_SOURCE
#include <errno.h>

#include "sheaf.h"

struct slab_sheaf usl_empty_sheaf;

/* Sheaf structures come in these sizes (bytes): one internal cache each. */
static const unsigned int sheaf_classes[USL_SHEAF_CLASSES] = { 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192,
                                                               16384, 32768, 65536, 131072, 262144, 524288 };

struct kmem_cache *usl_sheaf_class_caches[USL_SHEAF_CLASSES];

int usl_sheaf_class(unsigned int capacity)
{
	for (int i = 0; i < USL_SHEAF_CLASSES; i++)
		if (usl_sheaf_bytes(capacity) <= sheaf_classes[i])
			return i;
	return -1;
}

unsigned int usl_sheaf_class_bytes(int cls)
{
	return sheaf_classes[cls];
}

/* ===========================================================================
 * Sheaf structures: from the sheaf class cache of their capacity (an internal
 * cache per size class, so a sheaf fills its class, as the kernel rounds
 * sheaves up to a kmalloc bucket), once it exists; else (a class not made yet,
 * a prefilled sheaf above the largest class) a block of their own.
 */

struct slab_sheaf *usl_sheaf_new(struct kmem_cache *s, unsigned int capacity, gfp_t gfp)
{
	struct slab_sheaf *sh;
	int cls = usl_sheaf_class(capacity);
	struct kmem_cache *c = cls >= 0 ? __atomic_load_n(&usl_sheaf_class_caches[cls], __ATOMIC_ACQUIRE) : NULL;

	if (c)
		sh = usl_slub_alloc(c, gfp | __GFP_NOWARN);
	else
		sh = usl_meta_alloc(usl_sheaf_bytes(capacity));
	if (!sh)
		return NULL;
	usl_stat(s, USL_SHEAF_ALLOC);
	usl_list_init(&sh->barn_list);
	/* Atomic: SLAB's refill peeks at a node's shared array's size without
	 * its lock, and the array it peeks at may have been freed by tuning and
	 * its block reused here (docs/ARCHITECTURE.md, "SLAB: the second engine"). */
	__atomic_store_n(&sh->size, 0, __ATOMIC_RELAXED);
	sh->capacity = capacity;
	sh->cache = s;
	return sh;
}

/* Where a sheaf came from is where it lies: a slab of a sheaf class cache,
 * or a page block of its own. */
void usl_sheaf_dispose(struct kmem_cache *s, struct slab_sheaf *sh)
{
	usl_stat(s, USL_SHEAF_FREE);
	struct slab *slab = usl_virt_to_slab(sh);
	struct kmem_cache *c = slab && slab->kind == USL_PAGE_SLAB ? __atomic_load_n(&slab->slab_cache, __ATOMIC_ACQUIRE)
	                                                           : NULL;
	if (c)
		usl_slub_free(c, slab, sh);
	else
		usl_meta_free(sh);
}

/* ===========================================================================
 * Refill and flush: the bulk paths of the cpu-slab layer (detached freelists).
 */

/* Fill sh up to want objects. All or nothing: 0, or -ENOMEM with sh unchanged. */
/* An unpredictable layout (s->random): a refill's objects in a random order
 * (Fisher-Yates), wherever they came from: carved, or a slab's free list,
 * whose objects would otherwise come out in the slab's order, neighbours
 * side by side. Then no two consecutive ones within two strides of each
 * other where a later one can take the place (a random order of k carved
 * objects puts neighbours side by side 2 / k of the time). */
static void shuffle(void **p, unsigned int n, unsigned int stride)
{
	for (unsigned int i = n; i > 1; i--) {
		unsigned int j = usl_rand_below((uint32_t)usl_rand64(), i);
		void *t = p[i - 1];
		p[i - 1] = p[j];
		p[j] = t;
	}
	uintptr_t near = 2 * (uintptr_t)stride;
	for (unsigned int i = 1; i + 1 < n; i++) {
		uintptr_t a = (uintptr_t)p[i - 1], b = (uintptr_t)p[i];
		if ((a > b ? a - b : b - a) > near)
			continue;
		unsigned int j = i + 1 + usl_rand_below((uint32_t)usl_rand64(), n - i - 1);
		void *t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
}

int usl_sheaf_refill(struct kmem_cache *s, struct slab_sheaf *sh, unsigned int want, gfp_t gfp)
{
	usl_assert(want <= sh->capacity);
	if (sh->size >= want)
		return 0;
	if (s->flags & USL_SLAB_DEBUG_FLAGS) {
		/* A debug cache's prefilled sheaf: checked allocations, all or none. */
		unsigned int from = sh->size;
		for (; sh->size < want; sh->size++)
			if (!(sh->objects[sh->size] = usl_debug_alloc(s, gfp | __GFP_NOWARN, 0,
			                                              (uintptr_t)__builtin_return_address(0)))) {
				while (sh->size > from)
					usl_debug_free(s, sh->objects[--sh->size], "kmem_cache_refill_sheaf", 0);
				return -ENOMEM;
			}
		usl_stat_add(s, USL_SHEAF_REFILL, want - from);
		return 0;
	}
	if (s->oslots) {                     /* the owned front end: no marker, nothing written */
		if (!usl_owned_alloc_bulk(s, want - sh->size, &sh->objects[sh->size]))
			return -ENOMEM;
		sh->size = want;
		return 0;
	}
	if (!usl_engine_alloc_bulk(s, gfp | __GFP_NOWARN, want - sh->size, &sh->objects[sh->size]))
		return -ENOMEM;
	if (s->random)
		shuffle(&sh->objects[sh->size], want - sh->size, s->size);
	else
		usl_sheaf_reverse(&sh->objects[sh->size], want - sh->size);
	/* Hardening: every object in a sheaf carries its free marker (its word
	 * decodes to itself, freestate.h), checked when a pop hands it out. */
	if (usl_opt.harden)
		for (unsigned int i = sh->size; i < want; i++)
			usl_marker_set(s, sh->objects[i]);
	usl_stat_add(s, USL_SHEAF_REFILL, want - sh->size);
	sh->size = want;
	return 0;
}

/* Give every object of sh back to its slab (detached freelists: objects of one
 * slab within the look-ahead become one chain). The pointers were checked when
 * they were pushed. */
void usl_sheaf_flush(struct kmem_cache *s, struct slab_sheaf *sh)
{
	usl_stat_add(s, USL_SHEAF_FLUSH, sh->size);
	if (sh->size && (s->flags & USL_SLAB_DEBUG_FLAGS)) {
		for (unsigned int i = 0; i < sh->size; i++)
			usl_debug_free(s, sh->objects[i], "kmem_cache_return_sheaf", 0);
	} else if (sh->size && s->oslots) {
		usl_owned_free_bulk(s, sh->size, sh->objects, "kmem_cache_return_sheaf");
	} else if (sh->size) {
		usl_engine_free_bulk(s, sh->size, sh->objects);
	}
	sh->size = 0;
}

