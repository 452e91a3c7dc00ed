/* path.c - what the fast paths find a cache by, and which path it takes: the
 * cache ids (usl_caches) and the slot area they index (usl_slots), free's
 * per-id entries (usl_free_entries), and the one function that sets a
 * cache's path (usl_path_set: s->path and its entry, from the cache's kind and
 * the mode bits usl_opt.mode). docs/ARCHITECTURE.md, "Which path a cache
 * takes", has the table.
 * Locks: slab_mutex (the registry's, usl_registry_lock) around the ids;
 * entry_lock, a leaf, around the entries' fast_path flags and the mode. */
#include <string.h>
#include <sys/mman.h>

#include "../percpu/percpu.h"
#include "common.h"
#include "registry.h"

struct usl_free_entry usl_free_entries[USL_MAX_CACHES];

/* Cache ids: the page map names a slab's cache by a 16-bit id, so an entry is
 * 8 bytes (a pointer would make it 16). The lowest free id is given,
 * so usl_caches stays in its first page. Under slab_mutex. */
struct kmem_cache *usl_caches[USL_MAX_CACHES];
static uint64_t ids_used[USL_MAX_CACHES / 64] = { 1 };   /* id 0: no cache */
char *usl_slots;
size_t usl_slot_stride;
static size_t max_ids;               /* ids the slot area holds */
unsigned int usl_ids_end;            /* one past the highest id given (written under slab_mutex) */

/* The slot area: every possible id's slots, reserved once (only the pages of
 * ids in use are touched, and ids are given lowest-first). Where address
 * space is short (ulimit -v) fewer ids fit: halved down to 256. Under
 * slab_mutex. */
static bool slots_map(void)
{
	if (usl_slots)
		return true;
	size_t lines = usl_nr_cpus;
	if (!(lines & 1))
		lines++;
	usl_slot_stride = lines * sizeof(struct kmem_cache_cpu);
	/* Under RLIMIT_AS at most a 64th of the limit, and the least where the
	 * limit leaves less than a region (the range grows in pieces). */
	size_t n = USL_MAX_CACHES, limit = usl_pages_limit();
	while (n > 256 && (usl_pages_pieces() || (limit && n * usl_slot_stride > limit / 64)))
		n /= 2;
	for (; n >= 256; n /= 2) {
		void *p = usl_map_guarded(USL_ALIGN(n * usl_slot_stride, USL_PAGE_SIZE), PROT_READ | PROT_WRITE);
		if (p) {
			usl_slots = p;
			max_ids = n;
			return true;
		}
	}
	return false;
}

/* The lowest free id for s, with its slots zeroed (an id is reused) and
 * s->cpu_slab pointing at them. */
bool usl_id_assign(struct kmem_cache *s)
{
	usl_registry_lock();
	if (!slots_map()) {
		usl_registry_unlock();
		return false;
	}
	for (size_t w = 0; w < max_ids / 64; w++) {
		if (~ids_used[w]) {
			unsigned int b = (unsigned int)__builtin_ctzll(~ids_used[w]);
			ids_used[w] |= 1ULL << b;
			s->id = (unsigned int)(w * 64 + b);
			s->cpu_slab = usl_id_slots(s->id);
			if (s->id >= usl_ids_end)
				__atomic_store_n(&usl_ids_end, s->id + 1, __ATOMIC_RELAXED);
			memset(s->cpu_slab, 0, usl_nr_cpus * sizeof(struct kmem_cache_cpu));
			for (unsigned int i = 0; i < usl_nr_cpus; i++)   /* the sections' "no sheaf" */
				s->cpu_slab[i].main = &usl_empty_sheaf;
			__atomic_store_n(&usl_caches[s->id], s, __ATOMIC_RELEASE);
			usl_registry_unlock();
			return true;
		}
	}
	usl_registry_unlock();
	return false;
}

/* s's id back to the free ones: no slab of s is left, so nothing names it. */
void usl_id_release(struct kmem_cache *s)
{
	usl_registry_lock();
	__atomic_store_n(&usl_caches[s->id], NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_free_entries[s->id].div, 0, __ATOMIC_RELAXED);
	ids_used[s->id / 64] &= ~(1ULL << (s->id % 64));
	usl_registry_unlock();
	s->id = 0;
}

size_t usl_ids_max(void)
{
	return max_ids;
}

/* ===========================================================================
 * Free's entries and the path
 */

/* The fast_path flags of usl_free_entries follow usl_opt.mode: both are written
 * under entry_lock, a leaf (nothing is taken under it; fork's child
 * re-initialises it and sets the flags again). */
static int entry_lock;

static void entry_fast_path_set(struct usl_free_entry *f, unsigned int mode)   /* entry_lock held */
{
	usl_assert_held(&entry_lock);
	__atomic_store_n(&f->fast_path, (uint8_t)(f->blind && mode == USL_MODE_HARDEN), __ATOMIC_RELAXED);
}

static void entries_fast_path_set(unsigned int mode)                          /* entry_lock held */
{
	usl_assert_held(&entry_lock);
	unsigned int end = __atomic_load_n(&usl_ids_end, __ATOMIC_RELAXED);
	for (unsigned int id = 1; id < end; id++)
		entry_fast_path_set(&usl_free_entries[id], mode);
}

void usl_mode_tick(bool on)
{
	usl_spin_lock(&entry_lock);
	unsigned int mode = __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED);
	unsigned int want = on ? mode | USL_MODE_TICK : mode & ~USL_MODE_TICK;
	if (want != mode) {
		__atomic_store_n(&usl_opt.mode, want, __ATOMIC_RELAXED);
		entries_fast_path_set(want);
	}
	usl_spin_unlock(&entry_lock);
}

/* A thread of the parent may have held entry_lock, part-way through the flags. */
void usl_entries_after_fork(void)
{
	entry_lock = 0;
	usl_spin_lock(&entry_lock);
	entries_fast_path_set(__atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED));
	usl_spin_unlock(&entry_lock);
}

/* The entry of s, before its divisor publishes it (uslab's own caches never
 * take free's fast path: no marker is written into their objects). */
static void entry_set(struct kmem_cache *s)
{
	struct usl_free_entry *f = &usl_free_entries[s->id];
	f->slots = s->cpu_slab;
	f->secret = s->fp_secret;
	f->fp_offset = s->offset;
	f->blk_shift = (unsigned int)__builtin_ctzl(s->fp_mask);
	f->ksize = (uint32_t)usl_cache_ksize(s);
	usl_spin_lock(&entry_lock);
	f->blind = usl_flagged(s) && !(s->flags & USL_SLAB_INTERNAL);
	entry_fast_path_set(f, __atomic_load_n(&usl_opt.mode, __ATOMIC_RELAXED));
	usl_spin_unlock(&entry_lock);
	__atomic_store_n(&f->div, s->div_inv | (uint64_t)s->div_shift << 32, __ATOMIC_RELEASE);
}

/* Everything a cache's path depends on, once its layout, sheaves and owned
 * slots are set: s->path (the kind; a NUMA machine's bit or'ed in) and free's
 * entry, published last by its divisor. owned: the owned front end serves s.
 * The kinds: enum usl_path (types.h). */
void usl_path_set(struct kmem_cache *s, bool owned)
{
	unsigned int path;
	if (owned)
		path = USL_PATH_OWNED;
	else if (s->stats)
		path = USL_PATH_COUNTED;
	else
		path = (!s->sheaf_capacity ? USL_PATH_CPU_SLAB : usl_flagged(s) ? USL_PATH_SHEAF : USL_PATH_SHEAF_OTHER) |
		       (usl_nr_nodes > 1 ? USL_PATH_NUMA : 0);
	s->path = path;
	entry_set(s);
}

/* A destroyed owned cache: its fast paths must not reach its freed owned
 * slots, so its path becomes the cpu slab's, whose slots (by id) stay mapped
 * and empty: a use after destroy reaches a slow path that reports it. */
void usl_path_retire(struct kmem_cache *s)
{
	__atomic_store_n(&s->path, USL_PATH_CPU_SLAB, __ATOMIC_RELEASE);
}
