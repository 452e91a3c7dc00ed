/* vfork.c - vfork and clone as libc's, except that a child which shares its
 * parent's memory and thread pointer (vfork, or clone with CLONE_VM |
 * CLONE_VFORK and no CLONE_SETTLS) marks the rseq area it inherited as not
 * registered before it runs anything else. Takes no locks; never allocates.
 *
 * Such a child runs on its parent's TLS, so it reads the parent's rseq area,
 * whose cpu_id is the parent's last CPU, but the kernel does not register the
 * child (a CLONE_VM child starts unregistered): its sections would run on a
 * CPU's slot with no restart on preemption, migration or a remote flush, and
 * corrupt the slot the parent's other threads use. With cpu_id at -2
 * (RSEQ_CPU_ID_REGISTRATION_FAILED, what glibc writes where registration
 * failed) every section falls through to the node paths at once (USL_RS_NOCPU,
 * docs/ARCHITECTURE.md, "Hardening"), and glibc's own sched_getcpu asks the
 * kernel. The parent is suspended until the child execs or exits; when it
 * runs again the kernel writes its cpu_id afresh (a registered task that was
 * switched out gets its fields written before it returns to user space).
 *
 * Not built in sanitizer builds: their runtimes bring their own vfork. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <sys/rseq.h>
#include <sys/types.h>

#include "../types.h"

/* The child side, in C for clone's children. The area is glibc's (locked mode
 * does not matter: the mark only sends sections to paths that are safe). */
static void rseq_disown(void)
{
	if (__rseq_size == 0)
		return;
	struct rseq *rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	__atomic_store_n(&rs->cpu_id, (uint32_t)RSEQ_CPU_ID_REGISTRATION_FAILED, __ATOMIC_RELAXED);
}

/* vfork: the child returns into its caller's frame, so the return address
 * waits in a register across the system call, as libc's does. The child
 * side stores the mark with two loads through the GOT. */
__asm__(
	".text\n\t"
	".globl vfork\n\t"
	".type vfork, @function\n"
	"vfork:\n\t"
	".cfi_startproc\n\t"
	"popq %rdi\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	".cfi_register %rip, %rdi\n\t"
	"movl $58, %eax\n\t"                         /* SYS_vfork */
	"syscall\n\t"
	"pushq %rdi\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	".cfi_rel_offset %rip, 0\n\t"
	"cmpq $-4095, %rax\n\t"
	"jae 2f\n\t"
	"testl %eax, %eax\n\t"
	"jnz 1f\n\t"
	"movq __rseq_size@GOTPCREL(%rip), %rcx\n\t"
	"cmpl $0, (%rcx)\n\t"
	"je 1f\n\t"
	"movq __rseq_offset@GOTPCREL(%rip), %rcx\n\t"
	"movq (%rcx), %rcx\n\t"
	"movl $-2, %fs:4(%rcx)\n"                     /* cpu_id */
	"1:\n\t"
	"ret\n"
	"2:\n\t"
	"negl %eax\n\t"
	"pushq %rax\n\t"
	".cfi_adjust_cfa_offset 8\n\t"
	"call __errno_location@PLT\n\t"
	"popq %rcx\n\t"
	".cfi_adjust_cfa_offset -8\n\t"
	"movl %ecx, (%rax)\n\t"
	"movl $-1, %eax\n\t"
	"ret\n\t"
	".cfi_endproc\n\t"
	".size vfork, .-vfork\n");
_Static_assert(offsetof(struct rseq, cpu_id) == 4, "vfork's mark writes cpu_id at offset 4");

/* glibc's clone itself, under its other exported name. */
extern int __clone(int (*fn)(void *), void *stack, int flags, void *arg, ...);

struct vfork_start {
	int (*fn)(void *);
	void *arg;
};

static int vfork_child(void *p)
{
	const struct vfork_start *v = p;   /* in the suspended parent's frame */
	rseq_disown();
	return v->fn(v->arg);
}

/* clone: children that share the thread pointer and whose parent waits
 * (CLONE_VFORK) start with the mark. One that shares it and runs beside its
 * parent cannot be served safely by any per-thread state (glibc's malloc
 * neither): it is passed through unchanged, and docs/ARCHITECTURE.md says so. */
__attribute__((visibility("default"))) int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);

	struct vfork_start v = { fn, arg };
	if ((flags & (CLONE_VM | CLONE_VFORK | CLONE_SETTLS)) == (CLONE_VM | CLONE_VFORK) && fn) {
		fn = vfork_child;
		arg = &v;
	}
	return __clone(fn, stack, flags, arg, ptid, tls, ctid);
}
