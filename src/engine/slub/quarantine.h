/* quarantine.h - the debug quarantine's ring (quarantine.c), for debug.c and
 * nothing else: it holds freed objects and hands them back, oldest first; its
 * user checks and releases what it hands back. */
#ifndef USL_SLUB_QUARANTINE_H
#define USL_SLUB_QUARANTINE_H

#include "../../types.h"

struct usl_q_entry {
	void *obj;
	struct kmem_cache *s;
};
#define USL_Q_BATCH 32u   /* entries a call hands back at most */

/* Hold obj of s back; the oldest beyond the budget (USLAB_QUARANTINE's
 * bytes) go to out[], how many returned. Where the ring cannot be mapped,
 * obj itself comes back at once. */
USL_HIDDEN unsigned int usl_quarantine_put(struct kmem_cache *s, void *obj, struct usl_q_entry out[USL_Q_BATCH]);
/* Up to USL_Q_BATCH entries out of the ring, oldest first: s's only (the
 * others kept in order), or any with s NULL. 0: none left. */
USL_HIDDEN unsigned int usl_quarantine_take(const struct kmem_cache *s, struct usl_q_entry out[USL_Q_BATCH]);
USL_HIDDEN void usl_quarantine_fork_lock(void);     /* q_lock, after objmap_lock */
USL_HIDDEN void usl_quarantine_fork_unlock(void);

#endif /* USL_SLUB_QUARANTINE_H */
