/* test_vfork.c - children that run on their parent's thread pointer: vfork, and
 * clone(CLONE_VM | CLONE_VFORK) without CLONE_SETTLS. Such a child is not
 * registered for rseq, but the area it reads is its parent's: it must find it
 * marked unregistered (cpu_id -2, so uslab's sections take the node paths),
 * allocate and free correctly while the parent's other threads (more than
 * CPUs) allocate and free on every CPU, and leave the parent a working area
 * (the kernel's cpu_id again once the parent runs).
 *
 * Built twice: linked with uslab (kmem_cache and kmalloc in the child; the
 * malloc override where built), and as a plain program run under
 * LD_PRELOAD=libuslab.so (malloc only), the way a shell or an interpreter's
 * subprocess module meets uslab. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef VFORK_PRELOAD
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int t_pass, t_fail;
#define CHECK(expr)                                                                       \
	do {                                                                              \
		if (expr)                                                                 \
			t_pass++;                                                         \
		else {                                                                    \
			t_fail++;                                                         \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #expr);   \
		}                                                                         \
	} while (0)
static int test_summary(void)
{
	printf("%d passed, %d failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
}
#else
#include "../harness.h"
static struct kmem_cache *cache;
#endif

#define NT 5           /* workers: more than the machine's CPUs */
#define LIVE 128
static int stop;
static unsigned long corrupt;

static volatile struct rseq *area(void)
{
	return (volatile struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

static void *get(size_t n, int k)
{
#ifndef VFORK_PRELOAD
	if (k % 3 == 1)
		return kmem_cache_alloc(cache, GFP_KERNEL);
	if (k % 3 == 2)
		return kmalloc(n, GFP_KERNEL);
#endif
	(void)k;
	return malloc(n);
}

static void put(void *p, int k)
{
#ifndef VFORK_PRELOAD
	if (k % 3 == 1) {
		kmem_cache_free(cache, p);
		return;
	}
	if (k % 3 == 2) {
		kfree(p);
		return;
	}
#endif
	(void)k;
	free(p);
}

/* Each block holds its owner's tag in every word: two owners of one block
 * (an object handed out twice, or a slot corrupted by an unprotected section)
 * show as a word with the other's tag. */
static void fill(void *p, uint64_t tag)
{
	for (int i = 0; i < 8; i++)
		((uint64_t *)p)[i] = tag;
}

static bool intact(const void *p, uint64_t tag)
{
	for (int i = 0; i < 8; i++)
		if (((const uint64_t *)p)[i] != tag)
			return false;
	return true;
}

static void churn_once(void **live, int *kind, uint64_t base, unsigned long n)
{
	int i = (int)(n % LIVE);
	uint64_t tag = base + (uint64_t)i;
	if (live[i]) {
		if (!intact(live[i], tag))
			__atomic_add_fetch(&corrupt, 1, __ATOMIC_RELAXED);
		put(live[i], kind[i]);
	}
	kind[i] = (int)((n / LIVE + (unsigned long)i) % 3);
	live[i] = get(64 + (n % 5) * 16, kind[i]);
	if (live[i])
		fill(live[i], tag);
}

static void *worker(void *arg)
{
	uint64_t base = (uint64_t)(uintptr_t)arg << 32;
	void *live[LIVE] = { 0 };
	int kind[LIVE] = { 0 };
	unsigned long n = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		churn_once(live, kind, base, n++);
	for (int i = 0; i < LIVE; i++)
		if (live[i]) {
			if (!intact(live[i], base + (uint64_t)i))
				__atomic_add_fetch(&corrupt, 1, __ATOMIC_RELAXED);
			put(live[i], kind[i]);
		}
	return NULL;
}

/* The child: exit status 0 when it found its area marked and its blocks
 * intact; 2 for the mark, 3 for corruption, 4 for an allocation failure. */
static int child_work(void)
{
	if (__rseq_size && area()->cpu_id != (uint32_t)RSEQ_CPU_ID_REGISTRATION_FAILED)
		return 2;
	void *live[LIVE] = { 0 };
	int kind[LIVE] = { 0 };
	unsigned long before = corrupt;
	for (unsigned long n = 0; n < 4 * LIVE; n++) {
		churn_once(live, kind, 0xc0ffee00000000ULL, n);
		if (!live[n % LIVE])
			return 4;
	}
	for (int i = 0; i < LIVE; i++) {
		if (!intact(live[i], 0xc0ffee00000000ULL + (uint64_t)i))
			return 3;
		put(live[i], kind[i]);
	}
	return corrupt == before ? 0 : 3;
}

static int clone_child(void *arg)
{
	(void)arg;
	return child_work();
}

/* After the child, the parent's area holds a CPU again. */
static bool parent_area_ok(void)
{
	if (!__rseq_size)
		return true;
	int32_t cpu = (int32_t)area()->cpu_id;
	return cpu >= 0 && cpu < CPU_SETSIZE;
}

/* Is a thread of this process named uslab-decay? */
static bool decay_thread_here(void)
{
	char path[300], comm[32];
	bool found = false;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		found = fgets(comm, sizeof(comm), f) && strncmp(comm, "uslab-decay", 11) == 0;
		fclose(f);
	}
	closedir(d);
	return found;
}

/* A vfork child whose allocations first take the heap past the size at which
 * uslab starts its decay thread (8 MiB) must not start it: the thread would
 * be the child's (in the parent's memory, where its state says "running"),
 * so the parent would never get one, and a child that exits while the
 * thread starts may never finish exiting (its parent then waits for ever;
 * SIGALRM ends the test). The parent starts its own on its next slow paths.
 * First in main: the heap is small yet. */
static void test_child_crosses_threshold(void)
{
	alarm(60);
	pid_t pid = vfork();
	if (pid == 0) {
		for (int i = 0; i < 16 * 1024; i++)   /* 16 MiB, left to the parent's heap */
			if (!malloc(1024))
				_exit(4);
		for (int i = 0; i < 64 * 1024; i++)   /* frees: sampled toward the tick */
			free(malloc(64 + (size_t)(i % 16) * 64));
		_exit(0);
	}
	int status = -1;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	alarm(0);
	if (getenv("USLAB_BACKGROUND") || getenv("USLAB_DECAY_MS"))
		return;                          /* the thread may be off */
	bool found = false;
	for (int round = 0; round < 200 && !found; round++) {
		void *p[256];
		for (int i = 0; i < 256; i++)
			p[i] = malloc(64 + (size_t)(i % 16) * 64);   /* slow paths tick */
		for (int i = 0; i < 256; i++)
			free(p[i]);
		found = decay_thread_here();
	}
	CHECK(found);
}

int main(void)
{
	test_child_crosses_threshold();
#ifndef VFORK_PRELOAD
	cache = kmem_cache_create("vfork-72", 72, 0, 0, NULL);
	CHECK(cache != NULL);
#else
	/* Under LD_PRELOAD the library is uslab's: it exports kmem_cache_create. */
	CHECK(dlsym(RTLD_DEFAULT, "kmem_cache_create") != NULL);
#endif
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));

	size_t stack_size = 256 * 1024;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(stack != MAP_FAILED);
	int bad_vfork = 0, bad_clone = 0, bad_area = 0;
	for (int round = 0; round < 150; round++) {
		int status = -1;
		pid_t pid = vfork();
		if (pid == 0)
			_exit(child_work());
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
			if (bad_vfork++ == 0)
				fprintf(stderr, "vfork child: status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		}
		if (!parent_area_ok())
			bad_area++;

		pid = clone(clone_child, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
			if (bad_clone++ == 0)
				fprintf(stderr, "clone child: status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		}
		if (!parent_area_ok())
			bad_area++;
		/* The parent's own allocations still work on its CPU's slot. */
		void *p = malloc(100);
		CHECK(p != NULL);
		free(p);
	}
	CHECK(bad_vfork == 0);
	CHECK(bad_clone == 0);
	CHECK(bad_area == 0);

	/* vfork's errors still reach errno: none to provoke cheaply, but a
	 * child that exits with a status hands it back. */
	pid_t pid = vfork();
	if (pid == 0)
		_exit(7);
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 7);

	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	CHECK(corrupt == 0);
#ifndef VFORK_PRELOAD
	CHECK(uslab_error_count() == 0);
	kmem_cache_destroy(cache);
#endif
	return test_summary();
}
