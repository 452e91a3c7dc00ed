/* slot.c - the per-CPU slot, in both modes: locked mode's `tid` and
 * `freelist` change with cmpxchg16b, `slab` and `partial` only under c->lock;
 * rseq mode changes the slot only in the sections of arch/rseq_x86.h. Here:
 * the per-thread CPU hint, the tid step, and locked mode's detach and install.
 * Locks: none of its own (the callers hold c->lock). */
#define _GNU_SOURCE

#include "slot.h"
#include "slub.h"

__thread int usl_cpu_hint __attribute__((tls_model("initial-exec"))) = -1;
unsigned long usl_tid_step_v = 1;

struct kmem_cache_cpu *usl_slub_hint_slot(struct kmem_cache *s)
{
	return usl_hint_slot(s);
}

/* The hint re-read from the CPU the thread runs on now (slow paths). */
struct kmem_cache_cpu *usl_slub_hint_refresh(struct kmem_cache *s)
{
	usl_cpu_hint = usl_current_cpu() % (int)usl_nr_cpus;
	return &s->cpu_slab[usl_cpu_hint];
}

/* locked mode, under c->lock: take the freelist and the slab out of the slot.
 * The slab pointer is cleared first so fast frees that see the new tid go slow. */
void usl_locked_detach(struct kmem_cache_cpu *c, void **fl, struct slab **slab)
{
	usl_assert_held(&c->lock);
	unsigned long tid;
	void *old;

	*slab = c->slab;
	__atomic_store_n(&c->slab, NULL, __ATOMIC_RELEASE);
	do {
		tid = usl_load(&c->tid);
		old = usl_load_ptr(&c->freelist);
	} while (!usl_cas16(c, tid, (unsigned long)old, tid + usl_tid_step(), 0));
	*fl = old;
}

/* locked mode, under c->lock, slot empty: install a freelist, then its slab. */
void usl_locked_install(struct kmem_cache_cpu *c, void *fl, struct slab *slab)
{
	usl_assert_held(&c->lock);
	unsigned long tid;

	do {
		tid = usl_load(&c->tid);
	} while (!usl_cas16(c, tid, 0, tid + usl_tid_step(), (unsigned long)fl));
	__atomic_store_n(&c->slab, slab, __ATOMIC_RELEASE);
}

