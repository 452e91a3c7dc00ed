/* quarantine.c - the quarantine of debug caches (USLAB_QUARANTINE): freed
 * objects wait, poisoned and marked (their free pointer links to
 * themselves), until the bytes waiting pass the budget; the oldest are then
 * checked again (a write after free while they waited is reported) and put
 * on their slab's free list (debug.c's usl_debug_link_free). A ring under
 * q_lock, taken with no list_lock held; a release takes each object's
 * list_lock after q_lock is let go. */
#include <sys/mman.h>

#include "debug_out.h"
#include "debug.h"

#define Q_SLOTS (1u << 16)
struct q_entry {
	void *obj;
	struct kmem_cache *s;
};
static struct q_entry *q_ring;
static unsigned int q_head, q_count;
static size_t q_bytes;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

static void release_batch(struct q_entry *batch, unsigned int n, struct usl_dbg_out *o)
{
	for (unsigned int i = 0; i < n; i++)
		usl_debug_link_free(batch[i].s, batch[i].obj, o);
}

/* Hold x back; the oldest beyond the budget are released. */
void usl_quarantine_put(struct kmem_cache *s, void *x, struct usl_dbg_out *o)
{
	struct q_entry batch[32];
	unsigned int nb = 0;
	size_t budget = usl_debug_quarantine();

	usl_lock(&q_lock);
	if (!q_ring)
		q_ring = usl_map_guarded(Q_SLOTS * sizeof(struct q_entry), PROT_READ | PROT_WRITE);
	if (!q_ring) {
		usl_unlock(&q_lock);
		usl_debug_link_free(s, x, o);
		return;
	}
	q_ring[(q_head + q_count) % Q_SLOTS] = (struct q_entry){ x, s };
	q_count++;
	q_bytes += s->size;
	while ((q_bytes > budget || q_count == Q_SLOTS) && q_count && nb < 32) {
		batch[nb++] = q_ring[q_head];
		q_bytes -= q_ring[q_head].s->size;
		q_head = (q_head + 1) % Q_SLOTS;
		q_count--;
	}
	usl_unlock(&q_lock);
	release_batch(batch, nb, o);
}

/* Every object of s out of the quarantine (destroy, shrink, validation of
 * what waits is done in place). */
static void quarantine_flush(struct kmem_cache *s, struct usl_dbg_out *o)
{
	for (;;) {
		struct q_entry batch[32];
		unsigned int nb = 0;
		usl_lock(&q_lock);
		/* Compact the ring: s's entries out, the others kept in order. */
		unsigned int keep = 0;
		for (unsigned int i = 0; i < q_count; i++) {
			struct q_entry e = q_ring[(q_head + i) % Q_SLOTS];
			if (e.s == s && nb < 32) {
				batch[nb++] = e;
				q_bytes -= s->size;
			} else {
				q_ring[(q_head + keep) % Q_SLOTS] = e;
				keep++;
			}
		}
		q_count = keep;
		usl_unlock(&q_lock);
		if (!nb)
			return;
		release_batch(batch, nb, o);
	}
}

/* At exit, what still waits is released, so checked: a write after free into
 * an object that never left the quarantine is reported all the same. A
 * destructor of the library: it runs after the program's exit handlers (the
 * preloaded library's last of all), when the program frees no more. */
__attribute__((destructor)) static void quarantine_at_exit(void)
{
	struct usl_dbg_out o = { 0 };
	if (!q_ring)
		return;
	for (;;) {
		struct q_entry batch[32];
		unsigned int nb = 0;
		usl_lock(&q_lock);
		while (q_count && nb < 32) {
			batch[nb++] = q_ring[q_head];
			q_bytes -= q_ring[q_head].s->size;
			q_head = (q_head + 1) % Q_SLOTS;
			q_count--;
		}
		usl_unlock(&q_lock);
		if (!nb)
			break;
		release_batch(batch, nb, &o);
		usl_out_deliver(&o);
	}
}

void usl_debug_quarantine_flush(struct kmem_cache *s)
{
	struct usl_dbg_out o = { 0 };
	if (q_ring)
		quarantine_flush(s, &o);
	usl_out_deliver(&o);
}

void usl_quarantine_fork_lock(void)
{
	usl_lock(&q_lock);
}

void usl_quarantine_fork_unlock(void)
{
	usl_unlock(&q_lock);
}
