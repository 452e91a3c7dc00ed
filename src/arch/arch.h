/* arch.h - the architecture layer (src/arch/): the 16-byte compare-and-swap
 * on a slab's {freelist, counters} and on a locked-mode slot's {tid, freelist},
 * acquire loads, and the restartable sequences on a per-CPU slot
 * (rseq_x86.h). x86-64 only. No locks. */
#ifndef USL_ARCH_H
#define USL_ARCH_H

#include "../types.h"

/* ---------------------------------------------------------------------------
 * 16-byte compare-and-swap. lock cmpxchg16b on x86-64; under ThreadSanitizer the
 * compiler builtin (so TSan sees it).
 */
struct usl_pair {
	unsigned long lo, hi;
} __attribute__((aligned(16)));

static inline bool usl_cas16(void *addr, unsigned long old_lo, unsigned long old_hi,
                             unsigned long new_lo, unsigned long new_hi)
{
#if USL_TSAN || !defined(__x86_64__)
	unsigned __int128 o = ((unsigned __int128)old_hi << 64) | old_lo;
	unsigned __int128 n = ((unsigned __int128)new_hi << 64) | new_lo;
	return __atomic_compare_exchange_n((unsigned __int128 *)addr, &o, n, false,
	                                   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
#else
	bool ok;
	__asm__ __volatile__("lock cmpxchg16b %1"
	                     : "=@ccz"(ok), "+m"(*(struct usl_pair *)addr), "+a"(old_lo), "+d"(old_hi)
	                     : "b"(new_lo), "c"(new_hi)
	                     : "memory");
	return ok;
#endif
}

static inline unsigned long usl_load(const unsigned long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void *usl_load_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

#include "rseq_x86.h"
#include "rseq_owned_x86.h"

#endif /* USL_ARCH_H */
