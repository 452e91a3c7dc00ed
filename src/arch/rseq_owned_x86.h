/* rseq_owned_x86.h - the owned front end's restartable sequences (x86-64):
 * the pop of the lowest free bit of the cursor word, the free that sets one
 * bit of a slab the CPU owns, and the take of a slot. Each ends in one
 * committing store; the prologue is the sheaf sections' (its lock test is
 * struct usl_oslot's lock, at the same offset). Needs BMI1 (tzcnt, blsr):
 * the owned front end is chosen only where the CPU has it. No locks; the
 * protocol is in docs/ARCHITECTURE.md, "The owned front end". Included
 * through arch/arch.h. */
#ifndef USL_RSEQ_OWNED_X86_H
#define USL_RSEQ_OWNED_X86_H

#include "rseq_x86.h"

/* The inputs of the owned sections: the prologue's (as USL_RSEQ_IN_AT's,
 * without the sheaf and cpu-slab offsets) and the owned slot's fields. */
#define USL_OSLOT_IN_AT(slots_)                                                                   \
	[rs] "r"(usl_rseq_off), [nr] "rm"(usl_rseq_nr), [slots] "rm"(slots_),      \
	[o_cs] "i"(offsetof(struct rseq, rseq_cs)),                                \
	[o_cpu] "i"(offsetof(struct rseq, cpu_id)),                                \
	[o_shift] "i"(USL_CPU_SHIFT),                                              \
	[o_lock] "i"(offsetof(struct usl_oslot, lock)),                            \
	[o_wp] "i"(offsetof(struct usl_oslot, wp)),                                \
	[o_wbase] "i"(offsetof(struct usl_oslot, wbase)),                          \
	[o_size] "i"(offsetof(struct usl_oslot, size)),                            \
	[o_me] "i"(offsetof(struct usl_oslot, me))

/* Take the lowest free object of this CPU's cursor word into obj, or jump
 * to `slow` (an empty word, a marked or taken slot, no CPU). tzcnt sets CF
 * when the word is 0; the object's address is computed from the slot's line
 * before the commit, which clears the bit (blsr). */
#define USL_RSEQ_OWNED_POP(slots_, obj, slow)                                              \
	do {                                                                       \
		unsigned long wp_, w_;                                             \
		__asm__ __volatile__ goto(                                         \
			USL_RSEQ_PROLOGUE_TO("%l[" #slow "]", "%l[" #slow "]")      \
			"movq %c[o_wp](%%rax), %[wp]\n\t"                          \
			"movq (%[wp]), %[w]\n\t"                                   \
			"tzcntq %[w], %[o]\n\t"                                    \
			"jb %l[" #slow "]\n\t"                                     \
			"imulq %c[o_size](%%rax), %[o]\n\t"                        \
			"addq %c[o_wbase](%%rax), %[o]\n\t"                        \
			"blsrq %[w], %[w]\n\t"                                     \
			"movq %[w], (%[wp])\n"                                     \
			"2:\n"                                                     \
			: [o] "=&r"(obj), [wp] "=&r"(wp_), [w] "=&r"(w_)            \
			: USL_OSLOT_IN_AT(slots_)                     \
			: "rax", "memory", "cc"                                     \
			: slow);                                                    \
	} while (0)

/* Free bit `bit` of the local word bw of a slab whose chunk-map entry *ce
 * read e, owned by the CPU whose slot's `me` is own: the section checks the
 * slot (not marked or taken), that this CPU is the owner, that the entry is
 * still e (the slab was not given up or remade since), that the bit is clear
 * in the remote word (roff bytes on) and in the local word, then commits the
 * word. USL_RS_OK with *was the word as committed (only this bit: the
 * word was empty); USL_RS_MARKED: not this CPU's
 * (another owner, no CPU, a marked or taken slot); USL_RS_OTHER: the entry
 * changed; USL_RS_DOUBLE: the bit was set (a double free). */
static inline int usl_rseq_owned_free(struct usl_oslot *slots, const uint64_t *ce, uint64_t e, uint64_t own,
                                      uint64_t *bw, unsigned long bit, unsigned long roff, uint64_t *was)
{
	uint64_t w;

	__asm__ __volatile__ goto(
		USL_RSEQ_PROLOGUE_TO("%l[other]", "%l[other]")
		"cmpq %[own], %c[o_me](%%rax)\n\t"
		"jne %l[other]\n\t"
		"cmpq %[e], (%[ce])\n\t"
		"jne %l[changed]\n\t"
		"btq %[bit], (%[bw],%[roff])\n\t"
		"jc %l[dbl]\n\t"
		"movq (%[bw]), %[w]\n\t"
		"btsq %[bit], %[w]\n\t"
		"jc %l[dbl]\n\t"
		"movq %[w], (%[bw])\n"
		"2:\n"
		: [w] "=&r"(w)
		: USL_OSLOT_IN_AT(slots), [own] "r"(own), [e] "r"(e), [ce] "r"(ce), [bw] "r"(bw),
		  [bit] "r"(bit), [roff] "r"(roff)
		: "rax", "memory", "cc"
		: other, changed, dbl);
	*was = w;
	return USL_RS_OK;
other:
	return USL_RS_MARKED;
changed:
	return USL_RS_OTHER;
dbl:
	return USL_RS_DOUBLE;
}

/* Take this CPU's slot (lock 0 -> 2) and return it in *slot: USL_RS_OK,
 * USL_RS_MARKED (marked or taken already) or USL_RS_NOCPU. */
static inline int usl_rseq_oslot_take(struct usl_oslot *slots, struct usl_oslot **slot)
{
	int ret;
	struct usl_oslot *sl = NULL;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %%rax, %[sl]\n\t"
		"movl $2, %c[o_lock](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [sl] "+r"(sl)
		: USL_OSLOT_IN_AT(slots)
		: "rax", "memory", "cc");
	*slot = sl;
	return ret;
}

#endif /* USL_RSEQ_OWNED_X86_H */
