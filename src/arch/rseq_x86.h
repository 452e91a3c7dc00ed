/* rseq_x86.h - the restartable sequences on a per-CPU slot (x86-64): each ends in
 * one committing store and restarts on preemption, migration or a signal.
 * Structure offsets reach the asm as "i"(offsetof(...)) operands (USL_RSEQ_IN_AT),
 * so a layout change cannot silently break a section. No locks; the protocol is
 * in docs/ARCHITECTURE.md, "The per-CPU protocol". Included through arch/arch.h. */
#ifndef USL_RSEQ_X86_H
#define USL_RSEQ_X86_H

#include <stddef.h>
#include <sys/rseq.h>

#include "../platform/platform.h"
#include "../types.h"

/* Return codes of the sections. */
#define USL_RS_OK 0
#define USL_RS_MARKED 1   /* a flusher owns the slot: wait, then retry */
#define USL_RS_OTHER 2    /* section-specific: empty / full / double free */
#define USL_RS_NOCPU 3    /* rseq not registered for this thread (or cpu out of range) */
#define USL_RS_DOUBLE 4   /* usl_rseq_free_chain: the chain's head is already the freelist head */
#define USL_RS_DOUBLE_TAIL 5 /* usl_rseq_free_chain: the chain's tail is already the freelist head */

/* main_lo and main_delay are addressed from main_size (an asm takes at most
 * 30 operands). */
_Static_assert(offsetof(struct kmem_cache_cpu, main_lo) == offsetof(struct kmem_cache_cpu, main_size) + 2 &&
               offsetof(struct kmem_cache_cpu, main_delay) == offsetof(struct kmem_cache_cpu, main_size) + 6,
               "main_lo at main_size + 2, main_delay at + 6");

/* Descriptor (struct rseq_cs: version, flags, start, post-commit offset, abort) in
 * __rseq_cs; the abort handler, preceded by the signature, in __rseq_failure. The
 * handler jumps back to label 0, which re-arms rseq_cs and starts again.
 * Labels: 0 arm, 1 start, 2 post-commit, 3 descriptor, 4 abort. Every
 * section's prologue (this file's and rseq_owned_x86.h's) begins with it. */
#define USL_RSEQ_DESCRIPTOR                                                            \
	".pushsection __rseq_cs, \"aw\"\n\t"                                     \
	".balign 32\n"                                                           \
	"3:\n\t"                                                                 \
	".long 0, 0\n\t"                                                         \
	".quad 1f, 2f - 1f, 4f\n\t"                                              \
	".popsection\n\t"                                                        \
	".pushsection __rseq_failure, \"ax\"\n\t"                                \
	".byte 0x0f, 0xb9, 0x3d\n\t"                                             \
	".long 0x53053053\n"                                                     \
	"4:\n\t"                                                                 \
	"jmp 0f\n\t"                                                             \
	".popsection\n"                                                          \
	"0:\n\t"

#define USL_RSEQ_PROLOGUE_TO(nocpu, marked)                                          \
	USL_RSEQ_DESCRIPTOR                                                      \
	"leaq 3b(%%rip), %%rax\n\t"                                              \
	"movq %%rax, %%fs:%c[o_cs](%[rs])\n"                                            \
	"1:\n\t"                                                                 \
	"movl %%fs:%c[o_cpu](%[rs]), %%eax\n\t"                                          \
	"cmpl %[nr], %%eax\n\t"                                                  \
	"jae " nocpu "\n\t"                                                      \
	"shlq %[o_shift], %%rax\n\t"                                                     \
	"addq %[slots], %%rax\n\t"                                               \
	"cmpl $0, %c[o_lock](%%rax)\n\t"                                                 \
	"jne " marked "\n\t"

#define USL_RSEQ_PROLOGUE USL_RSEQ_PROLOGUE_TO("9f", "5f")

/* The end of a section that returns a code in %[ret]: label 2 is the
 * post-commit address (USL_RS_OK); 5: marked slot, 7: the section's own refusal,
 * 9: no CPU. */
#define USL_RSEQ_RET_EPILOGUE                                                        \
	"2:\n\t"                                                                 \
	"xorl %[ret], %[ret]\n\t"                                                \
	"jmp 6f\n"                                                               \
	"5:\n\t"                                                                 \
	"movl $1, %[ret]\n\t"                                                    \
	"jmp 6f\n"                                                               \
	"7:\n\t"                                                                 \
	"movl $2, %[ret]\n\t"                                                    \
	"jmp 6f\n"                                                               \
	"9:\n\t"                                                                 \
	"movl $3, %[ret]\n"                                                      \
	"6:\n"

/* The inputs every section takes: the rseq area's offset, the slot count (0 in
 * locked mode), the cache's slots, and every structure offset a section uses
 * (unused ones cost nothing). */
#define USL_RSEQ_IN_AT(slots_)                                                       \
	[rs] "r"(usl_rseq_off), [nr] "rm"(usl_rseq_nr), [slots] "rm"(slots_),      \
	[o_cs] "i"(offsetof(struct rseq, rseq_cs)),                                \
	[o_cpu] "i"(offsetof(struct rseq, cpu_id)),                                \
	[o_shift] "i"(USL_CPU_SHIFT),                                              \
	[o_lock] "i"(offsetof(struct kmem_cache_cpu, lock)),                       \
	[o_fl] "i"(offsetof(struct kmem_cache_cpu, freelist)),                     \
	[o_slab] "i"(offsetof(struct kmem_cache_cpu, slab)),                       \
	[o_partial] "i"(offsetof(struct kmem_cache_cpu, partial)),                 \
	[o_spare] "i"(offsetof(struct kmem_cache_cpu, spare)),                     \
	[o_msize] "i"(offsetof(struct kmem_cache_cpu, main_size)),                 \
	[o_mcap] "i"(offsetof(struct kmem_cache_cpu, main_cap)),                   \
	[o_main] "i"(offsetof(struct kmem_cache_cpu, main)),                       \
	[o_next] "i"(offsetof(struct slab, next)),                                 \
	[o_slabs] "i"(offsetof(struct slab, slabs)),                               \
	[o_cap] "i"(offsetof(struct slab_sheaf, capacity)),                        \
	[o_objs] "i"(offsetof(struct slab_sheaf, objects)),                        \
	[o_top] "i"(offsetof(struct slab_sheaf, objects) - sizeof(void *))
#define USL_RSEQ_COMMON_IN USL_RSEQ_IN_AT(s->cpu_slab)

/* xmm0 = {lo, hi} from two registers, for a 16-byte store. Not through
 * memory: a 16-byte load of two recent 8-byte stores cannot take its value
 * from the store buffer and waits for them to reach the cache. */
#define USL_RSEQ_PAIR(lo, hi)                                                    \
	"movq %[" lo "], %%xmm0\n\t"                                              \
	"movq %[" hi "], %%xmm1\n\t"                                              \
	"punpcklqdq %%xmm1, %%xmm0\n\t"

/* Free pointers are stored encoded: next ^ s->fp_secret ^ bswap(address of the
 * word) (engine/slub/internal.h). The sections decode with the cache's secret and
 * check that a decoded pointer is NULL or another address in the same slab
 * block (fp_mask; a link to the object itself is what a free's marker left
 * over a free object looks like); one that is not ends the section without a
 * commit, and the slow path's checked read reports it. */
#define USL_RSEQ_FP_IN(s)                                                              \
	[sec] "m"((s)->fp_secret), [fmask] "m"((s)->fp_mask)

/* The CPU the kernel last saw this thread on (rseq mode; -1 or a stale
 * value otherwise): the rseq area's cpu_id. For counters, never for a slot. */
static inline int usl_rseq_cpu(void)
{
	int c;
	__asm__ __volatile__("movl %%fs:%c[o](%[rs]), %[c]"
	                     : [c] "=r"(c)
	                     : [o] "i"(offsetof(struct rseq, cpu_id)), [rs] "r"(usl_rseq_off));
	return c;
}

/* Pop one object from this CPU's freelist into obj, or jump to the caller's C
 * label `slow` (also taken in locked mode, where usl_rseq_nr is 0, and for a
 * free pointer that fails its check). */
#define USL_RSEQ_ALLOC(s, obj)                                                         \
	do {                                                                       \
		unsigned long next_, tmp_;                                         \
		__asm__ __volatile__ goto(USL_RSEQ_ALLOC_ASM                           \
			: [obj] "=&r"(obj), [next] "=&r"(next_), [tmp] "=&r"(tmp_) \
			: USL_RSEQ_COMMON_IN, USL_RSEQ_FP_IN(s),                    \
			  [off] "r"((unsigned long)(s)->offset)                    \
			: "rax", "memory", "cc"                                    \
			: slow);                                                   \
	} while (0)

#define USL_RSEQ_ALLOC_ASM                                                             \
	USL_RSEQ_PROLOGUE_TO("%l[slow]", "%l[slow]")                                \
	"movq %c[o_fl](%%rax), %[obj]\n\t"                                               \
	"testq %[obj], %[obj]\n\t"                                                \
	"jz %l[slow]\n\t"                                                         \
	"leaq (%[obj],%[off]), %[tmp]\n\t"                                        \
	"movq (%[tmp]), %[next]\n\t"                                              \
	"bswapq %[tmp]\n\t"                                                       \
	"xorq %[tmp], %[next]\n\t"                                                \
	"xorq %[sec], %[next]\n\t"                                                \
	"jz 8f\n\t"                                                               \
	"movq %[next], %[tmp]\n\t"                                                \
	"xorq %[obj], %[tmp]\n\t"                                                 \
	"jz %l[slow]\n\t"       /* a link to itself: a second free's marker */     \
	"testq %[fmask], %[tmp]\n\t"                                              \
	"jnz %l[slow]\n"                                                          \
	"8:\n\t"                                                                  \
	"movq %[next], %c[o_fl](%%rax)\n"                                                 \
	"2:\n\t"                                                                  \
	/* after the commit: warm the next object's free pointer (the kernel's   \
	 * prefetch_freepointer); a prefetch of NULL+off never faults */          \
	"prefetcht0 (%[next],%[off])\n"

/* Push obj onto this CPU's freelist if its slab is this CPU's slab. Returns
 * USL_RS_OK, USL_RS_OTHER when obj is already the freelist head (double free), or
 * USL_RS_MARKED for everything else (slow path). */
static inline int usl_rseq_free(struct kmem_cache *s, struct slab *slab, void *obj)
{
	unsigned long tmp, key;

	__asm__ __volatile__ goto(
		USL_RSEQ_PROLOGUE_TO("%l[slow]", "%l[slow]")
		"cmpq %[slab], %c[o_slab](%%rax)\n\t"
		"jne %l[slow]\n\t"
		"movq %c[o_fl](%%rax), %[tmp]\n\t"
		"cmpq %[tmp], %[obj]\n\t"
		"je %l[dbl]\n\t"
		"leaq (%[obj],%[off]), %[key]\n\t"
		"bswapq %[key]\n\t"
		"xorq %[sec], %[key]\n\t"
		"xorq %[tmp], %[key]\n\t"
		"movq %[key], (%[obj],%[off])\n\t"
		"movq %[obj], %c[o_fl](%%rax)\n"
		"2:\n"
		: [tmp] "=&r"(tmp), [key] "=&r"(key)
		: USL_RSEQ_COMMON_IN, USL_RSEQ_FP_IN(s), [off] "r"((unsigned long)s->offset), [obj] "r"(obj),
		  [slab] "r"(slab)
		: "rax", "memory", "cc"
		: slow, dbl);
	return USL_RS_OK;
slow:
	return USL_RS_MARKED;
dbl:
	return USL_RS_OTHER;
}

/* Push the chain head..tail (objects of slab) onto this CPU's freelist if slab is
 * this CPU's slab (USL_RS_OTHER: it is not; USL_RS_DOUBLE / _TAIL: the head / tail
 * is the freelist's head already, and nothing was written). tail's free pointer is written before
 * the commit; the chain is private, so a restart rewrites it harmlessly. */
static inline int usl_rseq_free_chain(struct kmem_cache *s, struct slab *slab, void *head, void *tail)
{
	int ret;
	unsigned long tmp, key;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"cmpq %[slab], %c[o_slab](%%rax)\n\t"
		"jne 7f\n\t"
		"movq %c[o_fl](%%rax), %[tmp]\n\t"
		"cmpq %[tmp], %[head]\n\t"
		"je 8f\n\t"
		"cmpq %[tmp], %[tail]\n\t"
		"je 11f\n\t"
		"leaq (%[tail],%[off]), %[key]\n\t"
		"bswapq %[key]\n\t"
		"xorq %[sec], %[key]\n\t"
		"xorq %[tmp], %[key]\n\t"
		"movq %[key], (%[tail],%[off])\n\t"
		"movq %[head], %c[o_fl](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		"jmp 10f\n"
		"8:\n\t"
		"movl $4, %[ret]\n\t"
		"jmp 10f\n"
		"11:\n\t"
		"movl $5, %[ret]\n"
		"10:\n"
		: [ret] "=&r"(ret), [tmp] "=&r"(tmp), [key] "=&r"(key)
		: USL_RSEQ_COMMON_IN, USL_RSEQ_FP_IN(s), [off] "r"((unsigned long)s->offset), [head] "r"(head),
		  [tail] "r"(tail), [slab] "r"(slab)
		: "rax", "memory", "cc");
	return ret;
}

/* Pop up to n objects from this CPU's freelist into p[]; returns how many (0 when
 * the slot is marked or there is no CPU: *status says which). p[] is written
 * before the commit; a restart rewrites it. */
static inline unsigned long usl_rseq_alloc_bulk(struct kmem_cache *s, unsigned long n, void **p, int *status)
{
	int ret;
	unsigned long cnt, obj, next, tmp;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %c[o_fl](%%rax), %[obj]\n\t"
		"xorl %k[cnt], %k[cnt]\n"
		"12:\n\t"
		"cmpq %[n], %[cnt]\n\t"
		"jae 13f\n\t"
		"testq %[obj], %[obj]\n\t"
		"jz 13f\n\t"
		"leaq (%[obj],%[off]), %[tmp]\n\t"
		"movq (%[tmp]), %[next]\n\t"
		"bswapq %[tmp]\n\t"
		"xorq %[tmp], %[next]\n\t"
		"xorq %[sec], %[next]\n\t"
		"jz 14f\n\t"
		"movq %[next], %[tmp]\n\t"
		"xorq %[obj], %[tmp]\n\t"
		"jz 13f\n\t"           /* a link to itself: a second free's marker */
		"testq %[fmask], %[tmp]\n\t"
		"jnz 13f\n"            /* a bad link: obj stays the head; its pop reports it */
		"14:\n\t"
		"movq %[obj], (%[p],%[cnt],8)\n\t"
		"movq %[next], %[obj]\n\t"
		"incq %[cnt]\n\t"
		"jmp 12b\n"
		"13:\n\t"
		"movq %[obj], %c[o_fl](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [cnt] "=&r"(cnt), [obj] "=&r"(obj), [next] "=&r"(next), [tmp] "=&r"(tmp)
		: USL_RSEQ_COMMON_IN, USL_RSEQ_FP_IN(s), [off] "r"((unsigned long)s->offset), [n] "r"(n), [p] "r"(p)
		: "rax", "memory", "cc");
	*status = ret;
	return ret == USL_RS_OK ? cnt : 0;
}

/* Take {freelist, slab} out of this CPU's slot, leaving it empty (one 16-byte store). */
static inline int usl_rseq_detach(struct kmem_cache *s, void **freelist, struct slab **slab)
{
	int ret;
	void *fl;
	struct slab *sl;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %c[o_fl](%%rax), %[fl]\n\t"
		"movq %c[o_slab](%%rax), %[sl]\n\t"
		"pxor %%xmm0, %%xmm0\n\t"
		"movups %%xmm0, %c[o_fl](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [fl] "=&r"(fl), [sl] "=&r"(sl)
		: USL_RSEQ_COMMON_IN
		: "rax", "xmm0", "memory", "cc");
	*freelist = fl;
	*slab = sl;
	return ret;
}

/* Put {freelist, slab} into this CPU's slot if it is empty (one 16-byte store).
 * USL_RS_OTHER: the slot is not empty (another thread on this CPU, or we migrated). */
static inline int usl_rseq_install(struct kmem_cache *s, void *freelist, struct slab *slab)
{
	int ret;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"cmpq $0, %c[o_fl](%%rax)\n\t"
		"jne 7f\n\t"
		"cmpq $0, %c[o_slab](%%rax)\n\t"
		"jne 7f\n\t"
		USL_RSEQ_PAIR("lo", "hi")
		"movups %%xmm0, %c[o_fl](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret)
		: USL_RSEQ_COMMON_IN, [lo] "r"(freelist), [hi] "r"(slab)
		: "rax", "xmm0", "xmm1", "memory", "cc");
	return ret;
}

/* Push slab on this CPU's partial chain unless that makes it longer than limit
 * (USL_RS_OTHER: drain first). slab->next and slab->slabs are written before the
 * commit; slab is private to the caller until the commit, so a restart is harmless. */
static inline int usl_rseq_partial_push(struct kmem_cache *s, struct slab *slab, unsigned int limit)
{
	int ret;
	unsigned long head;
	unsigned int cnt;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %c[o_partial](%%rax), %[head]\n\t"
		"movl $1, %[cnt]\n\t"
		"testq %[head], %[head]\n\t"
		"jz 8f\n\t"
		"movl %c[o_slabs](%[head]), %[cnt]\n\t"
		"addl $1, %[cnt]\n"
		"8:\n\t"
		"cmpl %[limit], %[cnt]\n\t"
		"ja 7f\n\t"
		"movq %[head], %c[o_next](%[slab])\n\t"
		"movl %[cnt], %c[o_slabs](%[slab])\n\t"
		"movq %[slab], %c[o_partial](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [head] "=&r"(head), [cnt] "=&r"(cnt)
		: USL_RSEQ_COMMON_IN, [slab] "r"(slab), [limit] "r"(limit)
		: "rax", "memory", "cc");
	return ret;
}

/* Pop the first cpu partial slab (USL_RS_OTHER: none), or with all=1 take the whole chain. */
static inline int usl_rseq_partial_take(struct kmem_cache *s, struct slab **out, int all)
{
	int ret;
	unsigned long head, next;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %c[o_partial](%%rax), %[head]\n\t"
		"testq %[head], %[head]\n\t"
		"jz 7f\n\t"
		"xorl %k[next], %k[next]\n\t"
		"testl %[all], %[all]\n\t"
		"jnz 8f\n\t"
		"movq %c[o_next](%[head]), %[next]\n"
		"8:\n\t"
		"movq %[next], %c[o_partial](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [head] "=&r"(head), [next] "=&r"(next)
		: USL_RSEQ_COMMON_IN, [all] "r"(all)
		: "rax", "memory", "cc");
	*out = (struct slab *)head;
	return ret;
}

/* ---------------------------------------------------------------------------
 * Sheaf sections: spare (offset 40), main_size (48), main_lo (50), main_cap
 * (52), main_delay (54) and main (56) of the slot. A sheaf is {size @16,
 * capacity @20, objects[] @32}; while it is a slot's main its count is the
 * slot's main_size and its capacity is copied to main_cap, so a pop or push
 * reads one line of the slot and touches the sheaf only at one end. A push
 * adds at the top; a pop takes the top (main_delay 0: the kernel's order) or,
 * with main_delay > 0, the oldest object, objects[main_lo], and only while
 * more than main_delay wait, so an object freed on a CPU is handed out again
 * only after main_delay others (delayed reuse; main_lo is 0 or below
 * main_size, the top is a waiting object). Each section commits by storing
 * main_size, main_lo, {main_size .. main_delay, main} with one 16-byte store
 * (all 0 whenever main is usl_empty_sheaf), or spare. The single pop and push
 * read and write {main_size, main_lo} as one 32-bit word: a load that spans
 * a narrower recent store cannot take its value from the store buffer and
 * waits for it to reach the cache (about a dozen cycles, on a pop that
 * follows a push), where a load of the same width as the store does not.
 */

/* Pop the next object of this CPU's main sheaf (of the cache whose slots are
 * slots_) into obj, or jump to `slow` (empty sheaf, or no more than
 * main_delay objects waiting; marked slot, no CPU, locked mode, a cache
 * without sheaves: its main is usl_empty_sheaf). main_delay 0: the top,
 * objects[n - 1] (main_lo is 0); else the oldest, objects[main_lo], main_lo
 * moving on round the ring. One commit for both: {main_size, main_lo} as one
 * 32-bit store. */
#define USL_RSEQ_SHEAF_POP(slots_, obj, slow)                                              \
	do {                                                                       \
		unsigned long sh_, n_, d_;                                         \
		__asm__ __volatile__ goto(                                         \
			USL_RSEQ_PROLOGUE_TO("%l[" #slow "]", "%l[" #slow "]")      \
			"movzwl %c[o_msize]+6(%%rax), %k[d]\n\t"                     \
			"movl %c[o_msize](%%rax), %k[n]\n\t"                         \
			"movq %c[o_main](%%rax), %[sh]\n\t"                          \
			"testl %k[d], %k[d]\n\t"                                    \
			"jnz 8f\n\t"                                                \
			/* the top: {n - 1, 0} (main_lo is 0 here) */               \
			"subl $1, %k[n]\n\t"                                         \
			"jb %l[" #slow "]\n\t"                                       \
			"movq %c[o_objs](%[sh],%q[n],8), %[o]\n\t"                   \
			"movl %k[n], %k[d]\n\t"                                      \
			"jmp 9f\n"                                                   \
			/* the oldest: n is {size, lo}; {size - 1, lo + 1} is one  \
			 * add of 0xffff (size > delay > 0: no borrow), lo = 0 at   \
			 * the ring's end; d leaves as the new lo + 1 */             \
			"8:\n\t"                                                     \
			"movzwl %w[n], %k[o]\n\t"                                    \
			"cmpl %k[d], %k[o]\n\t"                                      \
			"jbe %l[" #slow "]\n\t"                                      \
			"movl %k[n], %k[d]\n\t"                                      \
			"shrl $16, %k[d]\n\t"                                        \
			"movq %c[o_objs](%[sh],%q[d],8), %[o]\n\t"                   \
			"addl $0xffff, %k[n]\n\t"                                    \
			"addl $1, %k[d]\n\t"                                         \
			"cmpw %c[o_msize]+4(%%rax), %w[d]\n\t"                       \
			"jne 9f\n\t"                                                \
			"movzwl %w[n], %k[n]\n\t"                                    \
			"movl $1, %k[d]\n"                                           \
			"9:\n\t"                                                     \
			"movl %k[n], %c[o_msize](%%rax)\n"                           \
			"2:\n\t"                                                     \
			/* After the commit: the object the next pop returns, on   \
			 * its way to the cache (objects[d - 1]; objects[-1] of an  \
			 * emptied sheaf is its cache pointer; a prefetch never     \
			 * faults, and a stale entry costs nothing). */             \
			"movq %c[o_top](%[sh],%q[d],8), %%rax\n\t"                  \
			"prefetcht0 (%%rax)\n"                                      \
			: [o] "=&r"(obj), [sh] "=&r"(sh_), [n] "=&r"(n_), [d] "=&r"(d_) \
			: USL_RSEQ_IN_AT(slots_)                                    \
			: "rax", "memory", "cc"                                     \
			: slow);                                                    \
	} while (0)

/* Push obj onto this CPU's main sheaf of the cache whose slots are slots, at
 * objects[(main_lo + main_size) mod main_cap] (the ring's next place; main_lo
 * is 0 but with delayed reuse). USL_RS_OK; USL_RS_OTHER when obj is the
 * object before that place already (a double free; at the ring's place 0 the
 * place before is objects[-1], the cache pointer, so nothing is compared);
 * USL_RS_MARKED for everything else (full sheaf, marked slot, no CPU, locked
 * mode, no sheaves: usl_empty_sheaf's capacity is 0). The object is written
 * before the commit ({main_size + 1, main_lo}, one 32-bit store): that place
 * holds no waiting object, so a restart is harmless. */
static inline int usl_rseq_sheaf_push_at(struct kmem_cache_cpu *slots, void *obj)
{
	unsigned long sh, n, t, c, u;

	__asm__ __volatile__ goto(
		USL_RSEQ_PROLOGUE_TO("%l[slow]", "%l[slow]")
		"movl %c[o_msize](%%rax), %k[t]\n\t"
		"movzwl %c[o_msize]+4(%%rax), %k[c]\n\t"
		"movzwl %w[t], %k[n]\n\t"
		"cmpl %k[c], %k[n]\n\t"
		"jae %l[slow]\n\t"
		"movl %k[t], %k[u]\n\t"
		"shrl $16, %k[u]\n\t"
		"addl %k[n], %k[u]\n\t"
		"movl %k[u], %k[n]\n\t"
		"subl %k[c], %k[n]\n\t"
		"cmovael %k[n], %k[u]\n\t"
		"movq %c[o_main](%%rax), %[sh]\n\t"
		"cmpq %[obj], %c[o_top](%[sh],%[u],8)\n\t"
		"je %l[dbl]\n\t"
		"movq %[obj], %c[o_objs](%[sh],%[u],8)\n\t"
		"addl $1, %k[t]\n\t"
		"movl %k[t], %c[o_msize](%%rax)\n"
		"2:\n"
		: [sh] "=&r"(sh), [n] "=&r"(n), [t] "=&r"(t), [c] "=&r"(c), [u] "=&r"(u)
		: USL_RSEQ_IN_AT(slots), [obj] "r"(obj)
		: "rax", "memory", "cc"
		: slow, dbl);
	return USL_RS_OK;
slow:
	return USL_RS_MARKED;
dbl:
	return USL_RS_OTHER;
}

static inline int usl_rseq_sheaf_push(struct kmem_cache *s, void *obj)
{
	return usl_rseq_sheaf_push_at(s->cpu_slab, obj);
}

/* Move up to n objects from the top of this CPU's main sheaf to p[] (in block
 * order); returns how many, 0 with *status set when the slot is marked or there
 * is no CPU. p[] is written before the commit; a restart rewrites it. */
/* Copy cnt pointers from [from] to [to] inside a section, two at a time
 * through xmm0, then the odd one; i and %q[ret] are scratch. Every load and
 * store is 8 bytes: the arrays' recent stores (a caller's, the last push's)
 * forward to such loads, where a 16-byte load, or an 8-byte load of the
 * upper half of a 16-byte store, waits for them to reach the cache. */
#define USL_RSEQ_COPY(from, to)                                                        \
	"xorl %k[i], %k[i]\n"                                                    \
	"12:\n\t"                                                                \
	"leaq 2(%[i]), %q[ret]\n\t"                                              \
	"cmpq %[cnt], %q[ret]\n\t"                                               \
	"ja 14f\n\t"                                                             \
	"movq (%[" from "],%[i],8), %%xmm0\n\t"                                  \
	"movhps 8(%[" from "],%[i],8), %%xmm0\n\t"                               \
	"movq %%xmm0, (%[" to "],%[i],8)\n\t"                                    \
	"movhps %%xmm0, 8(%[" to "],%[i],8)\n\t"                                 \
	"movq %q[ret], %[i]\n\t"                                                 \
	"jmp 12b\n"                                                              \
	"14:\n\t"                                                                \
	"cmpq %[cnt], %[i]\n\t"                                                  \
	"jae 13f\n\t"                                                            \
	"movq (%[" from "],%[i],8), %q[ret]\n\t"                                 \
	"movq %q[ret], (%[" to "],%[i],8)\n"                                      \
	"13:\n\t"

static inline unsigned long usl_rseq_sheaf_pop_bulk(struct kmem_cache *s, unsigned long n, void **p, int *status)
{
	int ret;
	unsigned long sh, size, cnt, i, base;

	/* %q[ret] doubles as the copy register: it is rewritten before every use,
	 * so a restart (which re-runs from the start with the registers as they
	 * are) needs nothing back. Inputs are never written. */
	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movzwl %c[o_msize](%%rax), %k[size]\n\t"
		"movq %c[o_main](%%rax), %[sh]\n\t"
		"movq %[n], %[cnt]\n\t"
		"cmpq %[size], %[cnt]\n\t"
		"cmovaq %[size], %[cnt]\n\t"
		"testq %[cnt], %[cnt]\n\t"
		"jz 2f\n\t"            /* nothing to take: no store at all */
		"subq %[cnt], %[size]\n\t"
		"leaq %c[o_objs](%[sh],%[size],8), %[base]\n\t"
		USL_RSEQ_COPY("base", "p")
		"movw %w[size], %c[o_msize](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [sh] "=&r"(sh), [size] "=&r"(size), [cnt] "=&r"(cnt), [i] "=&r"(i),
		  [base] "=&r"(base)
		: USL_RSEQ_COMMON_IN, [n] "r"(n), [p] "r"(p)
		: "rax", "xmm0", "memory", "cc");
	*status = ret;
	return ret == USL_RS_OK ? cnt : 0;
}

/* The same for a cache with delayed reuse (main_delay > 0): up to n of the
 * oldest objects, from objects[main_lo] up to the ring's end, leaving
 * main_delay waiting; {main_size, main_lo} (main_lo round the ring) is the
 * commit, one 32-bit store. */
static inline unsigned long usl_rseq_sheaf_pop_bulk_oldest(struct kmem_cache *s, unsigned long n, void **p,
                                                           int *status)
{
	int ret;
	unsigned long sh, size, cnt, i, base;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movzwl %c[o_msize](%%rax), %k[size]\n\t"
		"movzwl %c[o_msize]+6(%%rax), %k[cnt]\n\t"
		"movq %c[o_main](%%rax), %[sh]\n\t"
		"subq %[cnt], %[size]\n\t"        /* what may go: waiting - delay */
		"movl $0, %k[cnt]\n\t"
		"jbe 2f\n\t"           /* nothing to take (or usl_empty_sheaf): no store */
		"movzwl %c[o_msize]+2(%%rax), %k[base]\n\t"
		"movzwl %c[o_msize]+4(%%rax), %k[i]\n\t"
		"subq %[base], %[i]\n\t"          /* up to the ring's end */
		"cmpq %[i], %[size]\n\t"
		"cmovaq %[i], %[size]\n\t"
		"movq %[n], %[cnt]\n\t"
		"cmpq %[size], %[cnt]\n\t"
		"cmovaq %[size], %[cnt]\n\t"
		"leaq %c[o_objs](%[sh],%[base],8), %[base]\n\t"
		USL_RSEQ_COPY("base", "p")
		/* {size - cnt, lo + cnt, 0 at the ring's end} */
		"movzwl %c[o_msize]+2(%%rax), %k[base]\n\t"
		"addq %[cnt], %[base]\n\t"
		"xorl %k[i], %k[i]\n\t"
		"cmpw %c[o_msize]+4(%%rax), %w[base]\n\t"
		"cmovel %k[i], %k[base]\n\t"
		"shll $16, %k[base]\n\t"
		"movzwl %c[o_msize](%%rax), %k[size]\n\t"
		"subq %[cnt], %[size]\n\t"
		"orl %k[size], %k[base]\n\t"
		"movl %k[base], %c[o_msize](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [sh] "=&r"(sh), [size] "=&r"(size), [cnt] "=&r"(cnt), [i] "=&r"(i),
		  [base] "=&r"(base)
		: USL_RSEQ_COMMON_IN, [n] "r"(n), [p] "r"(p)
		: "rax", "xmm0", "memory", "cc");
	*status = ret;
	return ret == USL_RS_OK ? cnt : 0;
}

/* Move up to n objects from p[] onto this CPU's main sheaf, from the ring's
 * next place up to its end; returns how many (0 with *status set when the
 * slot is marked or there is no CPU). Those places hold no waiting object,
 * so writing them before the commit is harmless. */
static inline unsigned long usl_rseq_sheaf_push_bulk(struct kmem_cache *s, unsigned long n, void **p, int *status)
{
	int ret;
	unsigned long sh, size, cnt, i, base;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movzwl %c[o_msize](%%rax), %k[size]\n\t"
		"movq %c[o_main](%%rax), %[sh]\n\t"
		"movzwl %c[o_msize]+4(%%rax), %k[cnt]\n\t"
		"subq %[size], %[cnt]\n\t"        /* room */
		"movzwl %c[o_msize]+2(%%rax), %k[base]\n\t"
		"addq %[size], %[base]\n\t"       /* the next place, round the ring */
		"movzwl %c[o_msize]+4(%%rax), %k[i]\n\t"
		"cmpq %[i], %[base]\n\t"
		"jb 15f\n\t"
		"subq %[i], %[base]\n"
		"15:\n\t"
		"subq %[base], %[i]\n\t"          /* places up to the ring's end */
		"cmpq %[i], %[cnt]\n\t"
		"cmovaq %[i], %[cnt]\n\t"
		"cmpq %[n], %[cnt]\n\t"
		"cmovaq %[n], %[cnt]\n\t"
		"testq %[cnt], %[cnt]\n\t"
		"jz 2f\n\t"            /* full (or usl_empty_sheaf): no store at all */
		"leaq %c[o_objs](%[sh],%[base],8), %[base]\n\t"
		USL_RSEQ_COPY("p", "base")
		"addq %[cnt], %[size]\n\t"
		"movw %w[size], %c[o_msize](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [sh] "=&r"(sh), [size] "=&r"(size), [cnt] "=&r"(cnt), [i] "=&r"(i),
		  [base] "=&r"(base)
		: USL_RSEQ_COMMON_IN, [n] "r"(n), [p] "r"(p)
		: "rax", "xmm0", "memory", "cc");
	*status = ret;
	return ret == USL_RS_OK ? cnt : 0;
}

/* Take {main_size .. main_delay, main} out of this CPU's slot, leaving all 0
 * and empty (one 16-byte store); empty is the per-CPU layer's "no sheaf".
 * *word: main_size in bits 0-15, main_lo in 16-31. */
static inline int usl_rseq_sheaf_take(struct kmem_cache *s, struct slab_sheaf *empty, struct slab_sheaf **main,
                                      unsigned long *word)
{
	int ret;
	struct slab_sheaf *m;
	unsigned long n;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movl %c[o_msize](%%rax), %k[n]\n\t"
		"movq %c[o_main](%%rax), %[m]\n\t"
		"movq %[empty], %%xmm0\n\t"
		"pslldq $8, %%xmm0\n\t"
		"movups %%xmm0, %c[o_msize](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [m] "=&r"(m), [n] "=&r"(n)
		: USL_RSEQ_COMMON_IN, [empty] "r"(empty)
		: "rax", "xmm0", "memory", "cc");
	*main = m;
	*word = n;
	return ret;
}

/* Take the spare out of this CPU's slot, leaving NULL (*spare NULL when the
 * section fails). */
static inline int usl_rseq_spare_take(struct kmem_cache *s, struct slab_sheaf **spare)
{
	int ret;
	struct slab_sheaf *sp;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"movq %c[o_spare](%%rax), %[sp]\n\t"
		"movq $0, %c[o_spare](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret), [sp] "=&r"(sp)
		: USL_RSEQ_COMMON_IN
		: "rax", "memory", "cc");
	*spare = ret == USL_RS_OK ? sp : NULL;   /* sp is unset on the other paths */
	return ret;
}

/* Make main, holding size objects from objects[0] on, this CPU's main if the
 * slot has none (its main is empty) (USL_RS_OTHER: it has: another thread on
 * this CPU, or we migrated). */
static inline int usl_rseq_sheaf_install(struct kmem_cache *s, struct slab_sheaf *empty, struct slab_sheaf *main,
                                         unsigned long size)
{
	int ret;
	unsigned long word = size | (unsigned long)main->capacity << 32 | (unsigned long)s->reuse_delay << 48;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"cmpq %[empty], %c[o_main](%%rax)\n\t"
		"jne 7f\n\t"
		USL_RSEQ_PAIR("lo", "hi")
		"movups %%xmm0, %c[o_msize](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret)
		: USL_RSEQ_COMMON_IN, [lo] "r"(word), [hi] "r"(main), [empty] "r"(empty)
		: "rax", "xmm0", "xmm1", "memory", "cc");
	return ret;
}

/* Make spare this CPU's spare if the slot has none (USL_RS_OTHER: it has). */
static inline int usl_rseq_spare_install(struct kmem_cache *s, struct slab_sheaf *spare)
{
	int ret;

	__asm__ __volatile__(
		USL_RSEQ_PROLOGUE
		"cmpq $0, %c[o_spare](%%rax)\n\t"
		"jne 7f\n\t"
		"movq %[sp], %c[o_spare](%%rax)\n"
		USL_RSEQ_RET_EPILOGUE
		: [ret] "=&r"(ret)
		: USL_RSEQ_COMMON_IN, [sp] "r"(spare)
		: "rax", "memory", "cc");
	return ret;
}

#endif /* USL_RSEQ_X86_H */
