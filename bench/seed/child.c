/* child.c - what every workload's child shares: which API it calls (uslab's
 * kmem_cache_* or malloc), its cache, malloc and free called through
 * pointers, and the line that proves which uslab path ran. */
#include "seed.h"

int use_uslab;              /* child: kmem_cache_* instead of malloc */
struct kmem_cache *cache;

alloc_fn volatile sys_malloc = malloc;
free_fn volatile sys_free = free;

/* A uslab child first prints "uslab <per-CPU mode> <sheaf capacity> <engine>"
 * for its first cache, before any number: the parent checks it against the
 * variant's environment, so a row labelled "sheaves (rseq)" or "slab (rseq)" is
 * proven to have run that path. */
void report_path(struct kmem_cache *c)
{
	static int done;
	if (done++)
		return;
	printf("uslab %s %u %s\n", uslab_percpu_mode(), uslab_sheaf_capacity(c), uslab_allocator());
}
