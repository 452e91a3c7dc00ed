/* debug_owners.c - the owner summaries of a debug cache with SLAB_STORE_USER
 * (the kernel's list_locations, for alloc_calls and free_calls): every object
 * in use counted by its owner track's caller (or call stack), with ages,
 * pids, CPUs and nodes. Locks: objmap_lock and the node's list_lock, taken by
 * the walk (debug.c's usl_debug_each_in_use) and held while a table fills. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "debug.h"

/* ===========================================================================
 * Owner summaries: a hash table of locations in an anonymous mapping, grown
 * by doubling (rehashed), filled under objmap_lock and list_lock.
 */

struct loc_table {
	struct usl_location *e;
	size_t cap, n, bytes;
	bool failed;
};

static size_t loc_hash(uintptr_t addr, uint32_t handle, uint32_t waste)
{
	uint64_t h = ((uint64_t)addr ^ ((uint64_t)handle << 32 | waste)) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h ^ (h >> 29));
}

static struct usl_location *loc_slot(struct loc_table *t, uintptr_t addr, uint32_t handle, uint32_t waste)
{
	for (size_t i = loc_hash(addr, handle, waste) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct usl_location *l = &t->e[i];
		if (!l->count || (l->addr == addr && l->handle == handle && l->waste == waste))
			return l;
	}
}

static bool loc_grow(struct loc_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 256, bytes = cap * sizeof(struct usl_location);
	struct usl_location *e = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e == MAP_FAILED)
		return false;
	struct loc_table nt = { e, cap, t->n, bytes, false };
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].count)
			*loc_slot(&nt, t->e[i].addr, t->e[i].handle, t->e[i].waste) = t->e[i];
	if (t->e)
		munmap(t->e, t->bytes);
	*t = nt;
	return true;
}

static void loc_add(struct loc_table *t, const struct usl_track *tr, uint32_t handle, uint32_t waste, unsigned int nid,
                    uint64_t now)
{
	if (t->failed)
		return;
	if ((t->n + 1) * 4 > t->cap * 3 && !loc_grow(t)) {
		t->failed = true;
		return;
	}
	struct usl_location *l = loc_slot(t, tr->addr, handle, waste);
	uint64_t age = now > tr->when ? now - tr->when : 0;
	if (!l->count) {
		l->addr = tr->addr;
		l->handle = handle;
		l->waste = waste;
		l->min_age = l->max_age = age;
		l->min_pid = l->max_pid = tr->pid;
		t->n++;
	}
	l->count++;
	l->sum_age += age;
	if (age < l->min_age)
		l->min_age = age;
	if (age > l->max_age)
		l->max_age = age;
	if (tr->pid < l->min_pid)
		l->min_pid = tr->pid;
	if (tr->pid > l->max_pid)
		l->max_pid = tr->pid;
	unsigned int cpu = tr->cpu >= 0 && tr->cpu < USL_LOC_CPUS ? (unsigned int)tr->cpu : USL_LOC_CPUS - 1;
	l->cpus[cpu / 64] |= 1ull << (cpu % 64);
	l->nodes |= 1ull << (nid % 64);
}

struct locations {
	struct loc_table t;
	bool free_track, by_stack;
	uint64_t now;
};

static bool add_location(struct kmem_cache *s, struct slab *slab, uint8_t *p, void *arg)
{
	struct locations *lc = arg;
	const struct usl_track *tr = track_of(s, p, lc->free_track ? TRACK_FREE : TRACK_ALLOC);
	uint32_t waste = !lc->free_track && orig_size_kept(s) ? s->object_size - orig_size(s, p) : 0;
	loc_add(&lc->t, tr, lc->by_stack ? tr->handle : 0, waste, slab->nid, lc->now);
	return !lc->t.failed;
}

int usl_debug_locations(struct kmem_cache *s, bool free_track, bool by_stack, struct usl_loc_list *list)
{
	struct locations lc = { { 0 }, free_track, by_stack, usl_now_ms() };

	*list = (struct usl_loc_list){ NULL, 0, 0 };
	if (!(s->flags & SLAB_STORE_USER))
		return -ENOSYS;              /* no tracks */
	if (!loc_grow(&lc.t))
		return -ENOMEM;
	usl_debug_each_in_use(s, add_location, &lc);
	struct loc_table t = lc.t;
	if (t.failed) {
		munmap(t.e, t.bytes);
		return -ENOMEM;
	}
	size_t k = 0;                     /* the entries to the front */
	for (size_t i = 0; i < t.cap; i++)
		if (t.e[i].count) {
			if (k != i)
				t.e[k] = t.e[i];
			k++;
		}
	*list = (struct usl_loc_list){ t.e, k, t.bytes };
	return 0;
}

void usl_debug_locations_free(struct usl_loc_list *list)
{
	if (list->loc)
		munmap(list->loc, list->bytes);
	*list = (struct usl_loc_list){ NULL, 0, 0 };
}
