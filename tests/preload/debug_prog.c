/* debug_prog.c - heap misuse in an unmodified program, one scenario per run,
 * for debug_misuse.sh: run under LD_PRELOAD=libuslab.so with USLAB_DEBUG=FZPU,
 * uslab must report each and the program must go on ("survived" last). The
 * blocks come from functions of their own, which the reports must name.
 * The benchmark's detection table (bench/dbench/dbench.c) runs the same scenarios
 * under each peer; "clean" misuses nothing (a report there is a false alarm).
 * Exit status 3: the allocator and libc offer no such function (free_sized
 * before glibc 2.38), so the scenario could not run. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes through this pointer are not optimised away before a free. */
static void poke(char *p, long i, char v)
{
	*(volatile char *)(p + i) = v;
}

__attribute__((noinline)) static char *alloc_overflow(void) { return malloc(32); }
__attribute__((noinline)) static char *alloc_kmalloc_rz(void) { return malloc(24); }
__attribute__((noinline)) static char *alloc_underflow(void) { return malloc(48); }
__attribute__((noinline)) static char *alloc_after_free(void) { return malloc(100); }
__attribute__((noinline)) static char *alloc_twice_freed(void) { return malloc(40); }
__attribute__((noinline)) static char *alloc_interior(void) { return malloc(40); }
__attribute__((noinline)) static char *alloc_sized(void) { return malloc(24); }
__attribute__((noinline)) static char *alloc_for_delete(void) { return malloc(56); }
__attribute__((noinline)) static char *alloc_stale(void) { return malloc(200); }

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	if (!strcmp(what, "overflow")) {
		char *p = alloc_overflow();
		poke(p, 32, 'X');                 /* one byte past a 32-byte block */
		free(p);
	} else if (!strcmp(what, "kmalloc-redzone")) {
		char *p = alloc_kmalloc_rz();
		poke(p, 24, 'X');                 /* past the 24 asked for, inside the class */
		free(p);
	} else if (!strcmp(what, "underflow")) {
		char *p = alloc_underflow();
		poke(p, -1, 'X');
		free(p);
	} else if (!strcmp(what, "use-after-free")) {
		char *p = alloc_after_free();
		free(p);
		poke(p, 5, 'X');
		char *q[64];                      /* allocations that would reuse it */
		for (int i = 0; i < 64; i++)
			q[i] = malloc(100);
		for (int i = 0; i < 64; i++)
			free(q[i]);
	} else if (!strcmp(what, "double-free")) {
		char *a = alloc_twice_freed(), *b = alloc_twice_freed();
		free(a);
		free(b);
		free(a);                          /* not the last one freed */
	} else if (!strcmp(what, "interior")) {
		char *a = alloc_interior();
		char *volatile inside = a + 8;
		free(inside);
		int local;
		int *volatile stack = &local;
		free(stack);
		free(a);
	} else if (!strcmp(what, "free-sized")) {
		char *p = alloc_sized();
		void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
		if (!fs)
			return 3;
		fs(p, 30);                        /* allocated with 24 */
	} else if (!strcmp(what, "delete-size")) {
		char *p = alloc_for_delete();
		/* operator delete(void *, size_t), as a sized delete of the wrong type calls it */
		void (*del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
		if (!del) {   /* no C++ runtime loaded and none preloaded: the one a C++ program links */
			void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
			del = cxx ? (void (*)(void *, size_t))dlsym(cxx, "_ZdlPvm") : NULL;
		}
		if (!del)
			return 3;
		del(p, 64);
	} else if (!strcmp(what, "stale-write")) {
		/* A write through a stale pointer after the block was freed and
		 * another allocation made: without a quarantine that allocation
		 * reuses the block and the write lands in it unseen; with one
		 * (USLAB_QUARANTINE) it lands in poison, found when the block
		 * leaves the quarantine. */
		char *p = alloc_stale();
		free(p);
		char *q = malloc(200);
		poke(p, 5, 'X');
		printf("%s\n", q == p ? "reused" : "not reused");
		for (int i = 0; i < 200; i++)   /* enough frees to push p out */
			free(malloc(200));
		free(q);
	} else if (strcmp(what, "clean")) {
		return 2;
	}
	/* The program goes on: the heap still works. */
	for (int i = 0; i < 1000; i++)
		free(malloc((size_t)(i % 200) + 1));
	puts("survived");
	return 0;
}
