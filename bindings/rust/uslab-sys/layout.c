/* layout.c - what the C compiler says of uslab.h's structures and constants,
 * for uslab-sys's test tests/header.rs (which compares each entry with the
 * Rust declarations in src/lib.rs). */
#include <stddef.h>
#include <stdint.h>

#include "uslab.h"

struct uslab_sys_entry {
	const char *name;
	uint64_t value;
};

#define SIZE(t) { "sizeof " #t, sizeof(struct t) }
#define ALIGN(t) { "alignof " #t, _Alignof(struct t) }
#define OFF(t, f) { #t "." #f, offsetof(struct t, f) }
#define VAL(c) { #c, (uint64_t)(c) }

__attribute__((visibility("default"))) const struct uslab_sys_entry uslab_sys_layout[] = {
	SIZE(kmem_cache_args), ALIGN(kmem_cache_args),
	OFF(kmem_cache_args, align), OFF(kmem_cache_args, useroffset), OFF(kmem_cache_args, usersize),
	OFF(kmem_cache_args, freeptr_offset), OFF(kmem_cache_args, use_freeptr_offset),
	OFF(kmem_cache_args, ctor), OFF(kmem_cache_args, sheaf_capacity),
	SIZE(uslab_slabinfo), ALIGN(uslab_slabinfo),
	OFF(uslab_slabinfo, active_objs), OFF(uslab_slabinfo, num_objs), OFF(uslab_slabinfo, objsize),
	OFF(uslab_slabinfo, objperslab), OFF(uslab_slabinfo, pagesperslab), OFF(uslab_slabinfo, limit),
	OFF(uslab_slabinfo, batchcount), OFF(uslab_slabinfo, sharedfactor), OFF(uslab_slabinfo, active_slabs),
	OFF(uslab_slabinfo, num_slabs), OFF(uslab_slabinfo, sharedavail),
	SIZE(uslab_rcu_stats), OFF(uslab_rcu_stats, waits), OFF(uslab_rcu_stats, slabs_waiting),
	OFF(uslab_rcu_stats, flavor_set),
	{ "sizeof enum uslab_error", sizeof(enum uslab_error) },
	{ "sizeof gfp_t", sizeof(gfp_t) },
	{ "sizeof slab_flags_t", sizeof(slab_flags_t) },
	{ "ZERO_SIZE_PTR", (uint64_t)(uintptr_t)ZERO_SIZE_PTR },
	{ NULL, 0 },
};
