/* quarantine.c - the ring of the debug quarantine (USLAB_QUARANTINE): freed
 * objects of debug caches wait, poisoned and marked by debug.c, until the
 * bytes waiting pass the budget; the oldest are then handed back, to be
 * checked again and put on their slabs' free lists by debug.c. Lock: q_lock,
 * a leaf, taken with no list_lock held and never held across a release. */
#include <sys/mman.h>

#include "../../platform/platform.h"
#include "quarantine.h"

#define Q_SLOTS (1u << 16)
static struct usl_q_entry *q_ring;
static unsigned int q_head, q_count;
static size_t q_bytes;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

static struct usl_q_entry q_pop(void)     /* q_lock held, the ring not empty */
{
	usl_assert_held(&q_lock);
	struct usl_q_entry e = q_ring[q_head];
	q_bytes -= e.s->size;
	q_head = (q_head + 1) % Q_SLOTS;
	q_count--;
	return e;
}

unsigned int usl_quarantine_put(struct kmem_cache *s, void *obj, struct usl_q_entry out[USL_Q_BATCH])
{
	unsigned int n = 0;
	size_t budget = usl_debug_quarantine();

	usl_lock(&q_lock);
	if (!q_ring)
		q_ring = usl_map_guarded(Q_SLOTS * sizeof(struct usl_q_entry), PROT_READ | PROT_WRITE);
	if (!q_ring) {
		usl_unlock(&q_lock);
		out[0] = (struct usl_q_entry){ obj, s };
		return 1;
	}
	q_ring[(q_head + q_count) % Q_SLOTS] = (struct usl_q_entry){ obj, s };
	q_count++;
	q_bytes += s->size;
	while ((q_bytes > budget || q_count == Q_SLOTS) && q_count && n < USL_Q_BATCH)
		out[n++] = q_pop();
	usl_unlock(&q_lock);
	return n;
}

unsigned int usl_quarantine_take(const struct kmem_cache *s, struct usl_q_entry out[USL_Q_BATCH])
{
	unsigned int n = 0;

	usl_lock(&q_lock);
	if (!s) {
		while (q_count && n < USL_Q_BATCH)
			out[n++] = q_pop();
	} else {
		/* Compact the ring: s's entries out, the others kept in order. */
		unsigned int keep = 0;
		for (unsigned int i = 0; i < q_count; i++) {
			struct usl_q_entry e = q_ring[(q_head + i) % Q_SLOTS];
			if (e.s == s && n < USL_Q_BATCH) {
				out[n++] = e;
				q_bytes -= e.s->size;
			} else {
				q_ring[(q_head + keep) % Q_SLOTS] = e;
				keep++;
			}
		}
		q_count = keep;
	}
	usl_unlock(&q_lock);
	return n;
}

void usl_quarantine_fork_lock(void)
{
	usl_lock(&q_lock);
}

void usl_quarantine_fork_unlock(void)
{
	usl_unlock(&q_lock);
}
