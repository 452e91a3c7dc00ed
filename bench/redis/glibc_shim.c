/*
 * glibc_shim.c: LD_PRELOAD this to make a program that links libjemalloc.so.2
 * (Debian's redis-server) use glibc's malloc instead.
 *
 * Debian's redis-server imports plain malloc/calloc/realloc/free/
 * malloc_usable_size, which the dynamic linker binds to libjemalloc.so.2
 * because it comes before libc.so.6 in the search order.  Preloading glibc
 * itself does nothing (it is already loaded, behind jemalloc), so this shim
 * defines every malloc-family entry point and forwards it to glibc's own
 * implementation: the exported __libc_* aliases, and for malloc_usable_size
 * (which has no such alias) the definition inside libc.so.6 found with
 * dlsym on libc's handle.  glibc calls malloc through its PLT, so its
 * internal allocations (strdup, fopen, ...) land here too and stay
 * consistent.  jemalloc remains loaded: redis's mallctl() calls (INFO stats,
 * background thread, the purge after FLUSHALL) still reach it, and act on
 * jemalloc's own, empty, arenas.
 *
 * Build: cc -O2 -shared -fPIC -o libglibcshim.so glibc_shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define EXPORT __attribute__((visibility("default")))

EXPORT void *malloc(size_t n) { return __libc_malloc(n); }
EXPORT void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
EXPORT void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
EXPORT void free(void *p) { __libc_free(p); }
EXPORT void cfree(void *p) { __libc_free(p); }
EXPORT void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
EXPORT void *valloc(size_t n) { return __libc_valloc(n); }
EXPORT void *pvalloc(size_t n) { return __libc_pvalloc(n); }

EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
	size_t total;
	if (__builtin_mul_overflow(n, m, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, total);
}

EXPORT void *aligned_alloc(size_t a, size_t n)
{
	if (a == 0 || (a & (a - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return __libc_memalign(a, n);
}

EXPORT int posix_memalign(void **out, size_t a, size_t n)
{
	if (a < sizeof(void *) || (a & (a - 1)) != 0)
		return EINVAL;
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static size_t (*libc_usable)(void *);

EXPORT size_t malloc_usable_size(void *p)
{
	if (!libc_usable) {
		/* RTLD_NOLOAD: libc.so.6 is loaded; dlsym on its handle finds
		 * libc's own definition, not the first one in global scope
		 * (which would be this function, or jemalloc's). */
		void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			libc_usable = (size_t (*)(void *))dlsym(h, "malloc_usable_size");
		if (!libc_usable || libc_usable == malloc_usable_size) {
			static const char msg[] = "glibc_shim: glibc's malloc_usable_size not found\n";
			(void)!write(2, msg, sizeof msg - 1);
			_exit(127);
		}
	}
	return libc_usable(p);
}
