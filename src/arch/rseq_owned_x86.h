/* rseq_owned_x86.h - the owned front end's restartable sequences (x86-64):
 * the pop of the lowest free bit of the cursor word, the free that sets one
 * bit of a slab the CPU owns, and the take of a slot. Each ends in one
 * committing store. Their prologue indexes the slots with the sign-extended
 * cpu_id: -1 and -2 (no rseq registration, a vfork child) land on two
 * sentinel slots below slot 0 that are always marked, so no bound is
 * tested. Slot pointers from malloc's class table carry a tag of 1 in the
 * low bit (an owned class), which the sections' displacements take off.
 * Needs BMI1 (tzcnt, blsr): the owned front end is chosen only where the
 * CPU has it. No locks; the protocol is in docs/ARCHITECTURE.md, "The owned
 * front end". Included through arch/arch.h. */
#ifndef USL_RSEQ_OWNED_X86_H
#define USL_RSEQ_OWNED_X86_H

#include "rseq_x86.h"

/* Arm the section, then %[sl] = this CPU's slot (slots + cpu_id * 128, tag
 * included) and to `fail` if its lock is not 0 (marked, taken, a sentinel). */
#define USL_OWNED_PROLOGUE(tag, fail)                                              \
	USL_RSEQ_DESCRIPTOR                                                      \
	"leaq 3b(%%rip), %[sl]\n\t"                                              \
	"movq %[sl], %%fs:%c[o_cs](%[rs])\n"                                     \
	"1:\n\t"                                                                 \
	"movslq %%fs:%c[o_cpu](%[rs]), %[sl]\n\t"                                \
	"shlq %[o_shift], %[sl]\n\t"                                             \
	"addq %[slots], %[sl]\n\t"                                               \
	"cmpl $0, %c[o_lock]-" tag "(%[sl])\n\t"                                 \
	"jne " fail "\n\t"

#define USL_OWNED_IN(slots_)                                                           \
	[rs] "r"(usl_rseq_off), [slots] "rm"(slots_),                              \
	[o_cs] "i"(offsetof(struct rseq, rseq_cs)),                                \
	[o_cpu] "i"(offsetof(struct rseq, cpu_id)),                                \
	[o_shift] "i"(USL_CPU_SHIFT),                                              \
	[o_lock] "i"(offsetof(struct usl_oslot, lock)),                            \
	[o_wp] "i"(offsetof(struct usl_oslot, wp)),                                \
	[o_wbase] "i"(offsetof(struct usl_oslot, wbase)),                          \
	[o_size] "i"(offsetof(struct usl_oslot, size)),                            \
	[o_me] "i"(offsetof(struct usl_oslot, me))

/* Take the lowest free object of this CPU's cursor word into obj (rax), or
 * jump to `slow` (an empty word, a marked or taken slot, no CPU). tag: "1"
 * for slots from malloc's class table, "0" for a cache's own. tzcnt sets CF
 * when the word is 0; the object's address is computed from the slot's line
 * before the commit, which clears the bit (blsr). */
#define USL_RSEQ_OWNED_POP(slots_, tag, obj, slow)                                         \
	do {                                                                       \
		unsigned long sl_, wp_, w_;                                        \
		__asm__ __volatile__ goto(                                         \
			USL_OWNED_PROLOGUE(tag, "%l[" #slow "]")                     \
			"movq %c[o_wp]-" tag "(%[sl]), %[wp]\n\t"                  \
			"movq (%[wp]), %[w]\n\t"                                   \
			"tzcntq %[w], %[o]\n\t"                                    \
			"jb %l[" #slow "]\n\t"                                     \
			"imulq %c[o_size]-" tag "(%[sl]), %[o]\n\t"                \
			"addq %c[o_wbase]-" tag "(%[sl]), %[o]\n\t"                \
			"blsrq %[w], %[w]\n\t"                                     \
			"movq %[w], (%[wp])\n"                                     \
			"2:\n"                                                     \
			: [o] "=&a"(obj), [sl] "=&r"(sl_), [wp] "=&r"(wp_), [w] "=&r"(w_) \
			: USL_OWNED_IN(slots_)                                      \
			: "memory", "cc"                                            \
			: slow);                                                    \
	} while (0)

/* Free object idx of the owned slab h: the section checks the slot (not
 * marked or taken), that this CPU owns h (the slot's `me` is h->owner), that
 * the bit is clear in the remote word (h->roff bytes on; read only while
 * h->pending says remote frees wait to be merged: a remote free sets its bit
 * and then pending) and in the local word, then commits the local word. After the commit, a word that now holds
 * this bit alone jumps to `first` (the slab may be unlisted). Labels: other
 * (not this CPU's, no CPU, a marked or taken slot), dbl (the bit was set:
 * a double free). */
#define USL_RSEQ_OWNED_FREE(h, idx, other, dbl, first)                                    \
	do {                                                                       \
		unsigned long sl_, w_;                                             \
		uint64_t *bw_ = &(h)->local[(idx) >> 6];                           \
		__asm__ __volatile__ goto(                                         \
			USL_OWNED_PROLOGUE("0", "%l[" #other "]")                    \
			"movzwl %c[o_owner](%[h]), %k[w]\n\t"                      \
			"cmpq %[w], %c[o_me](%[sl])\n\t"                           \
			"jne %l[" #other "]\n\t"                                   \
			"cmpq $0, %c[o_pending](%[h])\n\t"                        \
			"je 8f\n\t"                                               \
			"btq %[bit], (%[bw],%[roff])\n\t"                          \
			"jc %l[" #dbl "]\n"                                        \
			"8:\n\t"                                                  \
			"movq (%[bw]), %[w]\n\t"                                   \
			"btsq %[bit], %[w]\n\t"                                    \
			"jc %l[" #dbl "]\n\t"                                      \
			"movq %[w], (%[bw])\n"                                     \
			"2:\n\t"                                                   \
			"blsrq %[w], %[w]\n\t"                                     \
			"jz %l[" #first "]\n"                                      \
			: [sl] "=&r"(sl_), [w] "=&r"(w_)                            \
			: USL_OWNED_IN((h)->slots), [h] "r"(h), [bw] "r"(bw_),     \
			  [bit] "r"((unsigned long)((idx) & 63)), [roff] "r"((unsigned long)(h)->roff), \
			  [o_owner] "i"(offsetof(struct usl_oslab, owner)),         \
			  [o_pending] "i"(offsetof(struct usl_oslab, pending))      \
			: "memory", "cc"                                            \
			: other, dbl, first);                                       \
	} while (0)

/* Take this CPU's slot (lock 0 -> 2) and return it in *slot: USL_RS_OK,
 * USL_RS_MARKED (marked, taken, or a sentinel: no CPU). The commit is a
 * locked compare-and-exchange: a flusher or fork marks slots from other
 * CPUs with a compare-and-exchange, and a plain store here could overwrite
 * a mark set between the test and the commit. */
static inline int usl_rseq_oslot_take(struct usl_oslot *slots, struct usl_oslot **slot)
{
	unsigned long sl;
	int two = 2, zero;

	__asm__ __volatile__ goto(
		USL_OWNED_PROLOGUE("0", "%l[busy]")
		"xorl %%eax, %%eax\n\t"
		"lock cmpxchgl %[two], %c[o_lock](%[sl])\n"
		"2:\n\t"
		"jnz %l[busy]\n"
		: [sl] "=&r"(sl), "=&a"(zero)
		: USL_OWNED_IN(slots), [two] "r"(two)
		: "memory", "cc"
		: busy);
	*slot = (struct usl_oslot *)sl;
	return USL_RS_OK;
busy:
	return USL_RS_MARKED;
}

/* Take up to n objects from this CPU's cursor word into p[] (lowest first),
 * in one section: the loop writes p[] before the commit (the caller's array:
 * a restart rewrites it), the commit stores the word without them. Returns
 * how many (0: an empty word, a marked or taken slot, no CPU). */
static inline unsigned long usl_rseq_owned_pop_bulk(struct usl_oslot *slots, unsigned long n, void **p)
{
	unsigned long sl, wp, w, i, cnt;

	__asm__ __volatile__(
		USL_OWNED_PROLOGUE("0", "5f")
		"movq %c[o_wp](%[sl]), %[wp]\n\t"
		"movq (%[wp]), %[w]\n\t"
		"xorl %k[cnt], %k[cnt]\n"
		"12:\n\t"
		"cmpq %[n], %[cnt]\n\t"
		"jae 13f\n\t"
		"tzcntq %[w], %[i]\n\t"
		"jb 13f\n\t"
		"imulq %c[o_size](%[sl]), %[i]\n\t"
		"addq %c[o_wbase](%[sl]), %[i]\n\t"
		"movq %[i], (%[p],%[cnt],8)\n\t"
		"blsrq %[w], %[w]\n\t"
		"incq %[cnt]\n\t"
		"jmp 12b\n"
		"13:\n\t"
		"testq %[cnt], %[cnt]\n\t"
		"jz 2f\n\t"
		"movq %[w], (%[wp])\n"
		"2:\n\t"
		"jmp 6f\n"
		"5:\n\t"
		"xorl %k[cnt], %k[cnt]\n"
		"6:\n"
		: [sl] "=&r"(sl), [wp] "=&r"(wp), [w] "=&r"(w), [i] "=&r"(i), [cnt] "=&r"(cnt)
		: USL_OWNED_IN(slots), [n] "r"(n), [p] "r"(p)
		: "memory", "cc");
	return cnt;
}

/* Free the objects of mask (bits of one local word bw of the owned slab h)
 * in one section: as USL_RSEQ_OWNED_FREE with a mask. USL_RS_OK with *was
 * the word before; USL_RS_MARKED: not this CPU's (or no CPU, a marked or
 * taken slot); USL_RS_DOUBLE: a bit of mask is set in the local or the
 * remote word (nothing written: the caller frees them one by one). */
static inline int usl_rseq_owned_free_mask(struct usl_oslab *h, uint64_t *bw, uint64_t mask, uint64_t *was)
{
	unsigned long sl, w;

	__asm__ __volatile__ goto(
		USL_OWNED_PROLOGUE("0", "%l[other]")
		"movzwl %c[o_owner](%[h]), %k[w]\n\t"
		"cmpq %[w], %c[o_me](%[sl])\n\t"
		"jne %l[other]\n\t"
		"cmpq $0, %c[o_pending](%[h])\n\t"
		"je 8f\n\t"
		"testq %[mask], (%[bw],%[roff])\n\t"
		"jnz %l[dbl]\n"
		"8:\n\t"
		"movq (%[bw]), %[w]\n\t"
		"testq %[mask], %[w]\n\t"
		"jnz %l[dbl]\n\t"
		"orq %[mask], %[w]\n\t"
		"movq %[w], (%[bw])\n"
		"2:\n"
		: [sl] "=&r"(sl), [w] "=&r"(w)
		: USL_OWNED_IN(h->slots), [h] "r"(h), [bw] "r"(bw), [mask] "r"(mask),
		  [roff] "r"((unsigned long)h->roff), [o_owner] "i"(offsetof(struct usl_oslab, owner)),
		  [o_pending] "i"(offsetof(struct usl_oslab, pending))
		: "memory", "cc"
		: other, dbl);
	*was = w & ~mask;
	return USL_RS_OK;
other:
	return USL_RS_MARKED;
dbl:
	return USL_RS_DOUBLE;
}

#endif /* USL_RSEQ_OWNED_X86_H */
