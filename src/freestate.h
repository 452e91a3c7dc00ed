/* freestate.h - the free state of an object, as every path that frees or
 * hands out an object reads and writes it: the key that hides uslab's words
 * in a free object, the free marker a free leaves (M), a two-word cache's
 * "free on its slab" flag (F), and the checks a pop, a checked free and a
 * slab's entry and exit make on them. Beside types.h, not a layer: inline
 * helpers on struct kmem_cache and the object, no state, no locks. The
 * design: docs/ARCHITECTURE.md, "Hardening". */
#ifndef USL_FREESTATE_H
#define USL_FREESTATE_H

#include "platform/platform.h"
#include "types.h"

/* ===========================================================================
 * Free markers (docs/ARCHITECTURE.md, "Hardening")
 *
 * A free object's word at the free pointer offset decodes (the word ^ its
 * cache's secret ^ bswap(the word's address)) to an address in the object's
 * own slab block or to NULL: to the object itself while it waits in a sheaf
 * or a packed sheaf (the marker every free writes, and carving for a refill),
 * to the next free object on a free list. Every allocation clears the word,
 * so a live object's decodes to noise (forging it takes the secret). A
 * checked free whose word decodes so is a double free, wherever the first
 * free left the object: refused before the object is pushed anywhere. free's
 * fast path writes a two-word cache's marker without reading it, and the
 * copies a second free leaves are refused where they are taken out (below,
 * usl_two_word). USLAB_HARDEN=0: nothing written, nothing checked.
 */

/* The key that hides a word uslab stores in a free object of s (a free
 * pointer, a packed sheaf's word) at address at: stored = value ^ key. */
static inline uintptr_t usl_key(uintptr_t secret, const void *at)
{
	return secret ^ __builtin_bswap64((uintptr_t)at);
}

static inline uintptr_t usl_cache_key(const struct kmem_cache *s, const void *at)
{
	return usl_key(s->fp_secret, at);
}

/* The free marker (docs/ARCHITECTURE.md, "Hardening") of obj, an object of
 * s in a sheaf: the word at the free pointer offset, decoding to obj itself
 * ("M"). A pop hands obj out only if it is there, and obj is not free on its
 * slab (a two-word cache's flag word, below), and clears it: else obj was
 * pushed twice, or the sheaf entry was overwritten, and nothing is written. */
/* Not an address (so no M equals an F), and a sign-extended 32-bit immediate
 * (one instruction on the pop's path). */
#define USL_FLAG_FREE 0xfffffffff1a6f1a6ul

static inline void usl_marker_set(const struct kmem_cache *s, void *obj)
{
	uintptr_t *at = (uintptr_t *)((char *)obj + s->offset);
	*at = (uintptr_t)obj ^ usl_cache_key(s, at);
}

/* Two-word caches (every cache with sheaves whose objects hold a word beside
 * the free pointer's, no constructor, no debugging): a second word, the flag
 * (s->flag_off), says "free on its slab" ("F": the marker word's key ^
 * USL_FLAG_FREE). No free writes it, so free's fast path writes the marker
 * without reading the object, and what a blind write cannot see is checked
 * where objects change hands below the per-CPU layer:
 *   in a sheaf (any per-CPU array, barn, packed or prefilled sheaf):
 *       marker = M (written by every free), flag not F;
 *   free on its slab (a SLUB free list, a SLAB index array):
 *       flag = F; marker word = the encoded link (SLUB) or M (SLAB);
 *   handed out: marker cleared by the pop, flag cleared when it left its slab.
 * An object enters its slab only with its M and without F (usl_flag_enter_slab,
 * which writes F) and leaves it only with F (usl_flag_leave_slab, which clears
 * it); a pop takes only an M without F. So a second free of an object free
 * on its slab (which overwrote its link with an M: a list walk stops at a
 * link to itself) leaves a copy in a sheaf that can never be taken out, and a
 * second free of one in a sheaf leaves two copies of one M, of which the first
 * popped clears it: nothing is handed out twice or while its slab counts it
 * free (docs/ARCHITECTURE.md). */
static inline bool usl_two_word(const struct kmem_cache *s)
{
	return s->flag_off != s->offset;
}

static inline uintptr_t usl_flag_free(const struct kmem_cache *s, const void *obj)
{
	return usl_cache_key(s, (const char *)obj + s->offset) ^ USL_FLAG_FREE;
}

/* The check of every pop and of an object's entry into its slab: obj's
 * marker word at (key: its key) holds its M, and its flag word, flag_off bytes
 * into obj, no F. */
static USL_FAST_PATH bool usl_marker_check(const uintptr_t *at, uintptr_t key,
                                           const void *obj, size_t flag_off)
{
	return usl_likely(*at == ((uintptr_t)obj ^ key) &&
	                  *(const uintptr_t *)((const char *)obj + flag_off) != (key ^ USL_FLAG_FREE));
}

static inline bool usl_marker_pop(const struct kmem_cache *s, void *obj)
{
	uintptr_t *at = (uintptr_t *)((char *)obj + s->offset);
	uintptr_t key = usl_cache_key(s, at);
	/* (In a one-word cache flag_off is offset: the M read again, never an F.) */
	if (!usl_marker_check(at, key, obj, s->flag_off))
		return false;
	*at = 0;
	return true;
}

/* p[0..n), objects of s taken out of a sheaf or array, checked as a pop
 * checks them (usl_marker_pop: their markers cleared): those that pass
 * compacted to the front, each other one given to refused. The new count. */
static inline size_t usl_markers_pop(struct kmem_cache *s, void **p, size_t n,
                                     void (*refused)(struct kmem_cache *, const void *))
{
	size_t k = 0;
	for (size_t j = 0; j < n; j++) {
		if (__builtin_expect(!usl_marker_pop(s, p[j]), 0)) {
			refused(s, p[j]);
			continue;
		}
		p[k++] = p[j];
	}
	return k;
}

/* obj, freed, goes back to its slab: true if it holds its M and no F (it is
 * not free on a slab already); its flag becomes F (the engine then writes its
 * free pointer). False: a copy of an object that is free (reported by the
 * caller, and left out). Hardening on, two-word caches only. */
static inline bool usl_flag_enter_slab(const struct kmem_cache *s, void *obj)
{
	uintptr_t *at = (uintptr_t *)((char *)obj + s->offset), *fl = (uintptr_t *)((char *)obj + s->flag_off);
	uintptr_t key = usl_cache_key(s, at);
	if (!usl_marker_check(at, key, obj, s->flag_off))
		return false;
	*fl = key ^ USL_FLAG_FREE;
	return true;
}

/* obj, refused by usl_flag_enter_slab, is free on its slab already (else its
 * marker was overwritten: written after its free, or a second copy whose
 * first was handed out). For the report. */
static inline bool usl_flag_free_on_slab(const struct kmem_cache *s, const void *obj)
{
	return *(const uintptr_t *)((const char *)obj + s->flag_off) == usl_flag_free(s, obj);
}

/* obj, taken from its slab's free list: true if it holds its F, which is
 * cleared. False: its flag was written after its free; the engine's walk
 * reports it and leaves it out (still counted in use). */
static inline bool usl_flag_leave_slab(const struct kmem_cache *s, void *obj)
{
	uintptr_t *fl = (uintptr_t *)((char *)obj + s->flag_off);
	if (__builtin_expect(*fl != usl_flag_free(s, obj), 0))
		return false;
	*fl = 0;
	return true;
}

/* The reports of both engines for a two-word cache's object: refused by
 * usl_flag_enter_slab on its way back to its slab (free there already: a
 * double free; else its marker was overwritten), and taken from its slab
 * without its F (written after its free; left out, counted in use). The
 * words are platform/refuse.c's. */
static inline void usl_report_flag_enter(const struct kmem_cache *s, const void *x, const char *fn)
{
	if (usl_flag_free_on_slab(s, x))
		usl_refuse_double_free(fn, s->name, x, NULL);
	else
		usl_refuse_lost_marker(fn, s->name, x);
}

static inline void usl_flag_refused(const struct kmem_cache *s, const void *obj)
{
	usl_refuse_written(s->name, obj);
}

/* obj, carved (never handed out) onto a free list: its F. */
static inline void usl_flag_carved(const struct kmem_cache *s, void *obj)
{
	*(uintptr_t *)((char *)obj + s->flag_off) = usl_flag_free(s, obj);
}

/* obj, carved straight into an array (never on a free list): its flag
 * cleared, so an F left in reused memory is not taken for one. */
static inline void usl_flag_fresh(const struct kmem_cache *s, void *obj)
{
	*(uintptr_t *)((char *)obj + s->flag_off) = 0;
}

/* Hardening on and s a two-word cache: the checks above apply (a macro: the
 * options are the platform layer's, above this glossary's includes). */
#define usl_flagged(s) (usl_opt.harden && usl_two_word(s))


/* Check x and mark it free: false (nothing written) if it is free already. */
static USL_FAST_PATH bool usl_marker_take(uintptr_t x, uint32_t off, uintptr_t secret,
                                          uint32_t blk_shift)
{
	uintptr_t at = x + off, key = usl_key(secret, (const void *)at);
	uintptr_t dec = *(uintptr_t *)at ^ key;
	if (usl_unlikely(!((dec ^ x) >> blk_shift) || !dec))
		return false;
	*(uintptr_t *)at = x ^ key;
	return true;
}

/* An allocation's object: its marker (or free pointer) cleared. */
static USL_FAST_PATH void *usl_marker_clear(void *obj, uint32_t off)
{
	if (usl_opt.harden && obj)
		*(uintptr_t *)((char *)obj + off) = 0;
	return obj;
}

#endif /* USL_FREESTATE_H */
