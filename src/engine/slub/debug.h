/* debug.h - what the debug files (debug.c, debug_owners.c) share and
 * nothing else includes: the poison and red-zone bytes, the owner track, and
 * the layout of a debug object's metadata (docs/ARCHITECTURE.md, "Object
 * layout"). No state, no locks. */
#ifndef USL_SLUB_DEBUG_H
#define USL_SLUB_DEBUG_H

#include "internal.h"
#include "slub.h"

#define POISON_INUSE 0x5a   /* padding, and objects never handed out */
#define POISON_FREE 0x6b    /* the body of a free object */
#define POISON_END 0xa5     /* its last byte */
#define RED_INACTIVE 0xbb   /* red zones of a free object */
#define RED_ACTIVE 0xcc     /* red zones of an allocated one */

/* The owner of an object's last allocation and last free (SLAB_STORE_USER). */
struct usl_track {
	uintptr_t addr;     /* the caller of the allocator's entry point */
	uint64_t when;      /* ms, usl_now_ms */
	int32_t cpu, pid;
	uint32_t handle;    /* its call stack in the depot (platform/stack.c); 0: none */
	uint32_t pad;
};
enum { TRACK_ALLOC, TRACK_FREE };

static inline bool orig_size_kept(const struct kmem_cache *s)
{
	return (s->flags & SLAB_STORE_USER) && (s->flags & USL_SLAB_KMALLOC);
}

static inline bool fp_outside(const struct kmem_cache *s)
{
	return s->offset >= s->inuse;
}

/* Object poisoning: P, and no constructor (its state must survive a free). */
static inline bool poisons(const struct kmem_cache *s)
{
	return (s->flags & SLAB_POISON) && !usl_keeps_state(s);
}

/* Bytes from an object to the next slot (its metadata and padding included). */
static inline unsigned int size_from_object(const struct kmem_cache *s)
{
	return s->size - s->red_left_pad;
}

static inline struct usl_track *track_of(const struct kmem_cache *s, void *obj, int which)
{
	return (struct usl_track *)((char *)obj + s->info_end) + which;
}

static inline unsigned long *orig_word(const struct kmem_cache *s, void *obj)
{
	unsigned int off = s->info_end + ((s->flags & SLAB_STORE_USER) ? 2 * (unsigned int)sizeof(struct usl_track) : 0);
	return (unsigned long *)((char *)obj + off);
}

/* Where the padding after the metadata starts (offset from the object). */
static inline unsigned int pad_start(const struct kmem_cache *s)
{
	unsigned int off = s->info_end;
	if (s->flags & SLAB_STORE_USER)
		off += 2 * (unsigned int)sizeof(struct usl_track);
	if (orig_size_kept(s))
		off += (unsigned int)sizeof(unsigned long);
	return off;
}

static inline unsigned int orig_size(const struct kmem_cache *s, void *obj)
{
	if (!orig_size_kept(s))
		return s->object_size;
	unsigned long v = *orig_word(s, obj);
	return v <= s->object_size ? (unsigned int)v : s->object_size;
}

/* The free pointer of obj as stored, decoded (a quarantined object's links
 * to itself). */
static inline void *fp_raw(const struct kmem_cache *s, void *obj)
{
	return usl_fp_decode(s, obj, usl_fp_word(s, obj));
}

static inline bool quarantined(const struct kmem_cache *s, void *obj)
{
	return fp_raw(s, obj) == obj;
}

/* Calls visit for every object of s in use (not on its slab's free list,
 * not waiting in the quarantine) until it returns false; takes objmap_lock
 * and the node's list_lock, and holds them across the visits (debug.c). */
USL_HIDDEN void usl_debug_each_in_use(struct kmem_cache *s,
                                      bool (*visit)(struct kmem_cache *s, struct slab *slab, uint8_t *p, void *arg),
                                      void *arg);

#endif /* USL_SLUB_DEBUG_H */
