/* large.c - large blocks by pointer: the page blocks that kmalloc takes above
 * 8 KiB (USL_PAGE_LARGE, from pages.c), and direct mappings beyond the largest
 * block, recorded in an open-addressing table (the range cannot hold them, so
 * they are found by address), with a few freed mappings kept for reuse
 * (docs/ARCHITECTURE.md, "Memory and metadata"). Lock: mappings_lock, the innermost lock of the
 * library, held for a table or kept-set operation only (no system call under
 * it but mremap in usl_map_resize). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "pages.h"

/* ===========================================================================
 * Direct mappings: above the page provider's largest block. The registry is an
 * open-addressing table of {address, length} in its own mapping, doubled when
 * half full; a pointer outside the reserved range is one of these or foreign.
 */
struct huge_entry {
	uintptr_t addr;      /* 0: empty; 1: deleted */
	size_t len;
};
static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct huge_entry *huge_tab;
static size_t huge_cap, huge_used, huge_live, huge_bytes;
static size_t huge_max_live, huge_max_bytes;   /* their peaks (malloc_stats' "max mmap" lines) */

static void huge_peaks(void)        /* mappings_lock held */
{
	usl_assert_held(&mappings_lock);
	if (huge_live > huge_max_live)
		__atomic_store_n(&huge_max_live, huge_live, __ATOMIC_RELAXED);
	if (huge_bytes > huge_max_bytes)
		__atomic_store_n(&huge_max_bytes, huge_bytes, __ATOMIC_RELAXED);
}
#define HUGE_DELETED ((uintptr_t)1)

static inline size_t huge_slot(uintptr_t a, size_t cap)
{
	return (size_t)((a >> 12) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

/* Under mappings_lock. */
static struct huge_entry *huge_find(uintptr_t a)
{
	usl_assert_held(&mappings_lock);
	if (!huge_cap)
		return NULL;
	for (size_t i = huge_slot(a, huge_cap);; i = (i + 1) & (huge_cap - 1)) {
		if (huge_tab[i].addr == a)
			return &huge_tab[i];
		if (!huge_tab[i].addr)
			return NULL;
	}
}

/* Under mappings_lock: room for one more entry. */
static bool huge_reserve(void)
{
	usl_assert_held(&mappings_lock);
	if ((huge_used + 1) * 2 <= huge_cap)
		return true;
	size_t cap = huge_cap ? huge_cap * 2 : 256;
	if (huge_live * 4 < huge_cap)
		cap = huge_cap;                     /* mostly deleted entries: rehash in place size */
	/* Guarded: its neighbours may be the program's own direct mappings. */
	struct huge_entry *t = usl_map_guarded(cap * sizeof(*t), PROT_READ | PROT_WRITE);
	if (!t)
		return false;
	for (size_t i = 0; i < huge_cap; i++) {
		if (huge_tab[i].addr <= HUGE_DELETED)
			continue;
		size_t j = huge_slot(huge_tab[i].addr, cap);
		while (t[j].addr)
			j = (j + 1) & (cap - 1);
		t[j] = huge_tab[i];
	}
	if (huge_tab)
		usl_unmap_guarded(huge_tab, huge_cap * sizeof(*huge_tab));
	huge_tab = t;
	huge_cap = cap;
	huge_used = huge_live;
	return true;
}

/* Under mappings_lock, with room reserved: enter [p, p + len) (counters aside). */
static void huge_insert_locked(void *p, size_t len)
{
	usl_assert_held(&mappings_lock);
	size_t i = huge_slot((uintptr_t)p, huge_cap);
	while (huge_tab[i].addr > HUGE_DELETED)
		i = (i + 1) & (huge_cap - 1);
	if (!huge_tab[i].addr)
		huge_used++;
	huge_tab[i].addr = (uintptr_t)p;
	huge_tab[i].len = len;
}

/* Record the mapping [p, p + len) (len a page multiple); false if the table
 * cannot grow. */
static bool huge_record(void *p, size_t len)
{
	usl_lock(&mappings_lock);
	bool ok = huge_reserve();
	if (ok) {
		huge_insert_locked(p, len);
		__atomic_store_n(&huge_live, huge_live + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&huge_bytes, huge_bytes + len, __ATOMIC_RELAXED);
		huge_peaks();
	}
	usl_unlock(&mappings_lock);
	return ok;
}

/* ===========================================================================
 * Kept mappings: a freed direct mapping is not unmapped at once but kept, up
 * to KEPT_BYTES and KEPT_SLOTS, so the next large block reuses its pages
 * instead of faulting fresh zeroed ones in (glibc gets the same by raising its
 * mmap threshold as blocks are freed and serving them from its heap). A
 * request takes the smallest kept mapping that holds it; the rest of that
 * mapping stays kept, as a mapping of its own, and joins the block again when
 * the block is freed (kept neighbours merge). With none big enough, the largest
 * smaller one grows with mremap (its pages come along, only the rest is new).
 * The purge unmaps kept mappings that no request took over two of its calls
 * (the decay sweep's pace: between half a decay interval and one), malloc_trim
 * all of them. Off under USLAB_DEBUG for the large kmalloc classes: a freed
 * block then faults on use. Under mappings_lock; the oldest first in kept[].
 * (Neighbours may come from two mmap calls the kernel did not merge: an mremap
 * of such a block fails, and the callers fall back to a fresh mapping or a
 * copy.)
 */
#define KEPT_SLOTS 8
#define KEPT_BYTES ((size_t)64 << 20)
static struct kept {
	uintptr_t addr;
	size_t len;
	bool old;                            /* a purge saw it: the next one unmaps it */
} kept[KEPT_SLOTS];
static unsigned int kept_n;
static size_t kept_bytes;
static int kept_on = -1;                 /* -1: not yet decided */

static bool keeping(void)
{
	int on = __atomic_load_n(&kept_on, __ATOMIC_RELAXED);
	if (usl_unlikely(on < 0)) {
		on = usl_opt.decay_ms != 0 && !usl_debug_flags_for("kmalloc-4k");
		__atomic_store_n(&kept_on, on, __ATOMIC_RELAXED);
	}
	return on;
}

/* Under mappings_lock: take kept[i] out of the set. */
static struct kept kept_take(unsigned int i)
{
	usl_assert_held(&mappings_lock);
	struct kept k = kept[i];
	for (unsigned int j = i + 1; j < kept_n; j++)
		kept[j - 1] = kept[j];
	__atomic_store_n(&kept_n, kept_n - 1, __ATOMIC_RELAXED);   /* (peeked at unlocked) */
	__atomic_store_n(&kept_bytes, kept_bytes - k.len, __ATOMIC_RELAXED);
	return k;
}

/* Under mappings_lock, with a slot free: add [addr, addr + len) as the newest. */
static void kept_add(uintptr_t addr, size_t len)
{
	usl_assert_held(&mappings_lock);
	kept[kept_n] = (struct kept){ addr, len, false };
	__atomic_store_n(&kept_n, kept_n + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&kept_bytes, kept_bytes + len, __ATOMIC_RELAXED);
}

/* munmap out[0..n), keeping errno (free() may end here). */
static void kept_unmap(const struct kept *out, unsigned int n)
{
	int saved_errno = errno;
	for (unsigned int i = 0; i < n; i++)
		munmap((void *)out[i].addr, out[i].len);
	errno = saved_errno;
}

/* A mapping of len bytes aligned to align from the kept set, recorded, or
 * NULL. */
static void *kept_reuse(size_t len, size_t align)
{
	if (!__atomic_load_n(&kept_n, __ATOMIC_RELAXED))
		return NULL;
	int fit = -1, grow = -1;
	usl_lock(&mappings_lock);
	for (unsigned int i = 0; i < kept_n; i++) {
		if (kept[i].addr & (align - 1))
			continue;
		if (kept[i].len >= len) {
			if (fit < 0 || kept[i].len < kept[fit].len)
				fit = (int)i;
		} else if (align <= USL_PAGE_SIZE && (grow < 0 || kept[i].len > kept[grow].len)) {
			grow = (int)i;              /* (mremap may move it: page alignment only) */
		}
	}
	struct kept k = { 0, 0, false };
	if (fit >= 0 || grow >= 0)
		k = kept_take((unsigned int)(fit >= 0 ? fit : grow));
	if (k.len > len)                     /* the rest stays kept (a slot was just freed) */
		kept_add(k.addr + len, k.len - len);
	usl_unlock(&mappings_lock);
	if (!k.addr)
		return NULL;
	void *p = (void *)k.addr;
	if (k.len < len) {
		int saved_errno = errno;
		p = mremap(p, k.len, len, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			munmap((void *)k.addr, k.len);
			p = NULL;
		}
		errno = saved_errno;
	}
	if (p && !huge_record(p, len)) {
		munmap(p, len);
		p = NULL;
	}
	return p;
}

/* Keep the mapping [p, p + len) freed by the program, merged with kept
 * neighbours, making room by unmapping the oldest; false if it is not to be
 * kept (the caller unmaps it). */
static bool kept_put(void *p, size_t len)
{
	struct kept out[KEPT_SLOTS + 1];
	unsigned int nout = 0;
	uintptr_t a = (uintptr_t)p;

	if (len > KEPT_BYTES || !keeping())
		return false;
	usl_lock(&mappings_lock);
	for (unsigned int i = 0; i < kept_n;) {
		if (kept[i].addr + kept[i].len == a || a + len == kept[i].addr) {
			struct kept k = kept_take(i);
			a = k.addr < a ? k.addr : a;
			len += k.len;
		} else {
			i++;
		}
	}
	while (kept_n && (kept_n == KEPT_SLOTS || kept_bytes + len > KEPT_BYTES))
		out[nout++] = kept_take(0);
	if (len <= KEPT_BYTES)
		kept_add(a, len);
	else
		out[nout++] = (struct kept){ a, len, false };
	usl_unlock(&mappings_lock);
	kept_unmap(out, nout);
	return true;
}

size_t usl_map_purge(bool all)
{
	struct kept out[KEPT_SLOTS];
	unsigned int nout = 0;
	size_t bytes = 0;

	if (!__atomic_load_n(&kept_n, __ATOMIC_RELAXED))
		return 0;
	usl_lock(&mappings_lock);
	for (unsigned int i = 0; i < kept_n;) {
		if (all || kept[i].old) {
			out[nout] = kept_take(i);
			bytes += out[nout++].len;
		} else {
			kept[i++].old = true;
		}
	}
	usl_unlock(&mappings_lock);
	kept_unmap(out, nout);
	return bytes;
}

size_t usl_map_kept_bytes(void)
{
	return __atomic_load_n(&kept_bytes, __ATOMIC_RELAXED);
}

/* A direct mapping of size bytes aligned to align (a power of two; a page
 * unless more is asked): a kept one, its first size bytes cleared if zero,
 * else a fresh one, zeros already (above a page, map size + align and unmap
 * the unaligned head and the tail). */
void *usl_map_alloc(size_t size, size_t align, bool zero)
{
	size_t len = USL_ALIGN(size ? size : 1, USL_PAGE_SIZE);
	size_t extra = align > USL_PAGE_SIZE ? align : 0;
	if (len < size || len + extra < len || len + extra > PTRDIFF_MAX)
		return NULL;
	void *k = kept_reuse(len, align > USL_PAGE_SIZE ? align : USL_PAGE_SIZE);
	if (k) {
		if (zero)
			memset(k, 0, size);
		return k;
	}
	char *raw = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	char *p = extra ? (char *)USL_ALIGN((uintptr_t)raw, align) : raw;
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + len + extra > p + len)
		munmap(p + len, (size_t)(raw + len + extra - (p + len)));
	if (!huge_record(p, len)) {
		munmap(p, len);
		return NULL;
	}
	return p;
}

size_t usl_map_bytes(void)
{
	return __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
}

size_t usl_map_count(void)
{
	return __atomic_load_n(&huge_live, __ATOMIC_RELAXED);
}

void usl_map_peaks(size_t *count, size_t *bytes)
{
	*count = __atomic_load_n(&huge_max_live, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&huge_max_bytes, __ATOMIC_RELAXED);
}

/* The length of the direct mapping starting at p, 0 if there is none. */
static size_t huge_size(const void *p)
{
	usl_lock(&mappings_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	size_t len = e ? e->len : 0;
	usl_unlock(&mappings_lock);
	return len;
}

/* Resize the direct mapping at p to hold n bytes (mremap, which may move it);
 * the new address, or NULL (p unchanged) if p is not a mapping or the kernel
 * refuses. Under mappings_lock throughout, so the table never names a stale range. */
void *usl_map_resize(void *p, size_t n)
{
	size_t len = USL_ALIGN(n, USL_PAGE_SIZE);
	void *q = NULL;

	if (len < n || len > PTRDIFF_MAX)
		return NULL;
	usl_lock(&mappings_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	if (e) {
		int saved_errno = errno;
		q = e->len == len ? p : mremap(p, e->len, len, MREMAP_MAYMOVE);
		errno = saved_errno;
		if (q == MAP_FAILED) {
			q = NULL;
		} else if (q != p) {
			/* Moved: the entry goes to its new slot (the table has room: a
			 * deletion frees one, and reserve never fails below half full). */
			size_t old_len = e->len;
			e->addr = HUGE_DELETED;
			huge_insert_locked(q, len);
			__atomic_store_n(&huge_bytes, huge_bytes - old_len + len, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n(&huge_bytes, huge_bytes - e->len + len, __ATOMIC_RELAXED);
			e->len = len;
		}
		huge_peaks();
	}
	usl_unlock(&mappings_lock);
	return q;
}

/* Unmap the direct mapping at p; false if there is none. */
static bool huge_free(const void *p)
{
	usl_lock(&mappings_lock);
	struct huge_entry *e = huge_find((uintptr_t)p);
	size_t len = 0;
	if (e) {
		len = e->len;
		e->addr = HUGE_DELETED;
		__atomic_store_n(&huge_live, huge_live - 1, __ATOMIC_RELAXED);
		__atomic_store_n(&huge_bytes, huge_bytes - len, __ATOMIC_RELAXED);
	}
	usl_unlock(&mappings_lock);
	if (!e)
		return false;
	if (!kept_put((void *)p, len))
		kept_unmap(&(struct kept){ (uintptr_t)p, len, false }, 1);
	return true;
}

void usl_map_fork_lock(void)
{
	usl_lock(&mappings_lock);
}

void usl_map_fork_unlock(void)
{
	usl_unlock(&mappings_lock);
}

/* ===========================================================================
 * Large blocks by pointer
 */

size_t usl_large_size(const void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;

	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE)) {
		struct slab *h = usl_virt_to_slab(p);
		if (h && __atomic_load_n(&h->kind, __ATOMIC_ACQUIRE) == USL_PAGE_LARGE && (const char *)p == h->addr)
			return usl_order_bytes(h->order);
		return 0;
	}
	return huge_size(p);
}

bool usl_large_free(void *p)
{
	uintptr_t off = (uintptr_t)p - usl_base;

	if (off < __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE))
		return usl_pages_free_large(p);
	return huge_free(p);
}
