/* sizing.c - the SLUB engine's sizing (the kernel's calculate_order,
 * calculate_alignment and partial limits, 6.8-6.17) and a cache's engine
 * set-up: stride, free pointer offset, order, object-index divisor, the slots'
 * tids and the node. No locks (a cache is set up before it is published). */
#define _GNU_SOURCE
#include <pthread.h>

#include "../../testing.h"
#include "internal.h"
#include "slot.h"
#include "slub.h"

/* Empty slabs kept per node before they are freed, by object size. */
#define MIN_PARTIAL 5
#define MAX_PARTIAL 10

/* ===========================================================================
 * Sizing: order, min_partial, cpu_partial.
 */

static unsigned int calc_slab_order(unsigned int size, unsigned int min_order, unsigned int max_order,
                                    unsigned int fract)
{
	unsigned int order;
	for (order = min_order; order <= max_order; order++) {
		size_t slab_size = usl_order_bytes(order);
		if (slab_size % size <= slab_size / fract)
			break;
	}
	return order;
}

static unsigned int fls_u(unsigned int x) { return x ? 32u - (unsigned int)__builtin_clz(x) : 0; }

unsigned int usl_calculate_order(unsigned int size)
{
	unsigned int min_objects, max_objects, min_order, order;
	unsigned int max_order = (unsigned int)usl_opt.max_order;

	min_objects = usl_opt.min_objects ? (unsigned int)usl_opt.min_objects : 4 * (fls_u(usl_online_cpus) + 1);
	max_objects = (unsigned int)(usl_order_bytes(max_order) / size);
	if (max_objects < min_objects)
		min_objects = max_objects ? max_objects : 1;
	min_order = usl_bytes_order((size_t)min_objects * size);
	if (min_order < (unsigned int)usl_opt.min_order)
		min_order = (unsigned int)usl_opt.min_order;
	if (usl_order_bytes(min_order) / size > USL_MAX_OBJS_PER_SLAB)
		return usl_bytes_order((size_t)size * USL_MAX_OBJS_PER_SLAB) - 1;
	for (unsigned int fract = 16; fract > 1; fract /= 2) {
		order = calc_slab_order(size, min_order, max_order, fract);
		if (order <= max_order)
			return order;
	}
	order = usl_bytes_order(size);
	return order <= USL_MAX_ORDER ? order : ~0u;
}

static uint32_t inverse_mod32(uint32_t d)
{
	uint32_t x = d;                 /* correct to 3 bits for odd d */
	for (int i = 0; i < 5; i++)
		x *= 2 - d * x;             /* each step doubles the correct bits */
	return x;
}

/* The alignment a cache gets (the kernel's calculate_alignment): at least a
 * word; with SLAB_HWCACHE_ALIGN a cache line, halved while the object fits in
 * half of it. Cache merging asks it of a cache it has not made yet. */
unsigned int usl_slub_alignment(slab_flags_t flags, unsigned int align, unsigned int object_size)
{
	if (flags & SLAB_HWCACHE_ALIGN) {
		unsigned int ralign = USL_CACHELINE;
		while (object_size <= ralign / 2)
			ralign /= 2;
		if (ralign > align)
			align = ralign;
	}
	return align < sizeof(void *) ? (unsigned int)sizeof(void *) : align;
}

static void set_cpu_partial_slabs(struct kmem_cache *s)
{
	s->cpu_partial_slabs = (s->cpu_partial * 2 + s->objects - 1) / s->objects;
}

void usl_slub_set_cpu_partial(struct kmem_cache *s, unsigned int objects)
{
	__atomic_store_n(&s->cpu_partial, objects, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cpu_partial_slabs, (objects * 2 + s->objects - 1) / s->objects, __ATOMIC_RELAXED);
}

/* The slab order of s (its size set): the calculated one at creation, or the
 * malloc classes' own, set before the class is published. */
int usl_slub_set_order(struct kmem_cache *s, unsigned int order)
{
	unsigned int size = s->size;
	if (order > USL_MAX_ORDER || usl_order_bytes(order) < size)
		return -1;
	s->order = order;
	s->fp_mask = ~(uintptr_t)(usl_order_bytes(order) - 1);
	s->objects = (unsigned int)(usl_order_bytes(order) / size);
	if (s->objects > USL_MAX_OBJS_PER_SLAB)
		s->objects = USL_MAX_OBJS_PER_SLAB;
	s->min_order = usl_bytes_order(size);
	if (s->min_order > s->order)
		s->min_order = s->order;
	if (s->cpu_partial)
		set_cpu_partial_slabs(s);
	return 0;
}

int usl_slub_cache_init(struct kmem_cache *s, const struct kmem_cache_args *args)
{
	unsigned int size = USL_ALIGN(s->object_size, (unsigned int)sizeof(void *));
	unsigned int align = s->align;

	s->red_left_pad = 0;
	s->info_end = 0;

	s->inuse = size;
	s->fp_secret = (uintptr_t)usl_random64();
	if (args && args->use_freeptr_offset) {
		/* The creator keeps the free pointer inside the object (checked by
		 * the caller: word aligned, within object_size). */
		s->offset = args->freeptr_offset;
	} else if (s->flags & USL_SLAB_KMALLOC) {
		/* kmalloc and malloc classes: word 0, so malloc's fast path clears a
		 * freed block's marker without loading the cache (its free pointer
		 * is encoded and checked, so an overflow into it is caught). */
		s->offset = 0;
	} else if (usl_keeps_state(s)) {
		/* Constructed state (or what an RCU reader reads) must survive a
		 * free: keep the pointer after it. */
		s->offset = size;
		size += sizeof(void *);
	} else {
		s->offset = (s->object_size / 2) & ~(unsigned int)(sizeof(void *) - 1);
	}
	align = usl_slub_alignment(s->flags, align, s->object_size);
	s->align = align;
	size = USL_ALIGN(size, align);
	if (s->flags & USL_SLAB_DEBUG_FLAGS)
		size = usl_debug_layout(s, args && args->use_freeptr_offset);
	s->size = size;

	if (usl_slub_set_order(s, usl_calculate_order(size)) != 0)
		return -1;
	s->div_shift = (uint32_t)__builtin_ctz(size);
	s->div_inv = inverse_mod32(size >> s->div_shift);

	unsigned int lg = 31u - (unsigned int)__builtin_clz(size);
	s->min_partial = lg / 2 < MIN_PARTIAL ? MIN_PARTIAL : (lg / 2 > MAX_PARTIAL ? MAX_PARTIAL : lg / 2);
	if (size >= USL_PAGE_SIZE)
		s->cpu_partial = 6;
	else if (size >= 1024)
		s->cpu_partial = 24;
	else if (size >= 256)
		s->cpu_partial = 52;
	else
		s->cpu_partial = 120;
	set_cpu_partial_slabs(s);

	unsigned long step = 1;
	while (step < usl_nr_cpus)
		step <<= 1;
	/* The same value for every cache (the slot count is fixed at start-up):
	 * written once, so later creations do not race with readers. */
	if (__atomic_load_n(&usl_tid_step_v, __ATOMIC_RELAXED) != step)
		__atomic_store_n(&usl_tid_step_v, step, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		s->cpu_slab[i].tid = i & (step - 1);
	return 0;
}
