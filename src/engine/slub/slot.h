/* slot.h - the SLUB engine's slot helpers in locked mode: the per-thread CPU
 * hint that chooses a slot, the tid steps of {tid, freelist}, and the
 * cmpxchg16b paths on a slot (slot.c). In rseq mode the slot changes only in
 * the sections of arch/rseq_x86.h. Locks: a slot's lock, held by the callers
 * of usl_locked_detach and usl_locked_install. */
#ifndef USL_SLUB_SLOT_H
#define USL_SLUB_SLOT_H

#include "internal.h"
#include "stat.h"

/* tid starts at the slot number and steps by a power of two >= the slot count,
 * so a tid names both the slot and the generation (the kernel's TID_STEP).
 * Written once, at the first cache's creation (sizing.c). */
extern unsigned long usl_tid_step_v USL_HIDDEN;
static inline unsigned long usl_tid_step(void) { return __atomic_load_n(&usl_tid_step_v, __ATOMIC_RELAXED); }

static inline struct kmem_cache_cpu *usl_hint_slot(struct kmem_cache *s)
{
	int h = usl_cpu_hint;
	if (usl_unlikely(h < 0 || (unsigned int)h >= usl_nr_cpus))
		h = usl_cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
	return &s->cpu_slab[h];
}

/* locked mode: push the chain head..tail of slab onto the hinted slot's freelist
 * if slab is its cpu slab. The same return codes as usl_rseq_free_chain. */
static USL_FAST_PATH int usl_locked_push_chain(struct kmem_cache *s, struct slab *slab,
                                               void *head, void *tail)
{
	struct kmem_cache_cpu *c = usl_hint_slot(s);

	for (;;) {
		unsigned long tid = usl_load(&c->tid);
		if (__atomic_load_n(&c->slab, __ATOMIC_ACQUIRE) != slab)
			return USL_RS_OTHER;
		void *fl = usl_load_ptr(&c->freelist);
		if (usl_unlikely(fl == head))
			return USL_RS_DOUBLE;
		if (usl_unlikely(fl == tail))
			return USL_RS_DOUBLE_TAIL;
		usl_set_freepointer(s, tail, fl);
		if (usl_cas16(c, tid, (unsigned long)fl, tid + usl_tid_step(), (unsigned long)head))
			return USL_RS_OK;
		usl_stat(s, USL_CMPXCHG_DOUBLE_CPU_FAIL);
	}
}

/* Under c->lock: take the freelist and the slab out of the slot (the slab
 * pointer cleared first, so fast frees that see the new tid go slow); and,
 * the slot empty, install a freelist and then its slab. */
USL_HIDDEN void usl_locked_detach(struct kmem_cache_cpu *c, void **fl, struct slab **slab);
USL_HIDDEN void usl_locked_install(struct kmem_cache_cpu *c, void *fl, struct slab *slab);

#endif /* USL_SLUB_SLOT_H */
