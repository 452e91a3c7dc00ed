/* test_fork.c - fork() while other threads allocate, free, shrink, and create and
 * destroy caches: every
 * child can allocate, free, shrink, create and destroy caches (no inherited
 * lock or flush mark), and the parent goes on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"

#define NT 6
static struct kmem_cache *caches[3];
static int stop;

static void *churn(void *arg)
{
	long id = (long)arg;
	void *held[64];
	unsigned long n = 0;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct kmem_cache *s = caches[(id + n) % 3];
		for (int i = 0; i < 64; i++)
			held[i] = kmem_cache_alloc(s, GFP_KERNEL);
		for (int i = 0; i < 64; i++)
			kmem_cache_free(s, held[i]);
		if (id == 0 && n % 8 == 0)
			kmem_cache_shrink(s);      /* flushes: marks every slot */
		n++;
	}
	return NULL;
}

/* Cache creation and destruction while the main thread forks: a child must not
 * inherit the locks creation holds (slab_mutex, the sheaf class lock). */
static void *creator(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct kmem_cache_args a = { .sheaf_capacity = 8 };
		struct kmem_cache *c = kmem_cache_create("fork-creator", 40, &a, 0);
		kmem_cache_free(c, kmem_cache_alloc(c, GFP_KERNEL));
		kmem_cache_destroy(c);
	}
	return NULL;
}

static int child_work(void)
{
	alarm(10);   /* a hang fails the test */
	for (int k = 0; k < 3; k++) {
		void *p[500];
		for (int i = 0; i < 500; i++)
			if (!(p[i] = kmem_cache_alloc(caches[k], GFP_KERNEL)))
				return 3;
		for (int i = 0; i < 500; i++)
			kmem_cache_free(caches[k], p[i]);
		kmem_cache_shrink(caches[k]);
	}
	struct kmem_cache *c = kmem_cache_create("child", 100, 0, 0, NULL);
	void *o = kmem_cache_alloc(c, GFP_KERNEL);
	kmem_cache_free(c, o);
	kmem_cache_destroy(c);
	return uslab_error_count() == 0 ? 0 : 4;
}

int main(void)
{
	pthread_t t[NT], cr;
	caches[0] = kmem_cache_create("fork-64", 64, 0, 0, NULL);
	caches[1] = kmem_cache_create("fork-300", 300, 0, 0, NULL);
	caches[2] = kmem_cache_create("fork-2k", 2048, 0, 0, NULL);
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, churn, (void *)i);
	pthread_create(&cr, NULL, creator, NULL);

	int ok = 0, children = 200;
	for (int i = 0; i < children; i++) {
		usleep(500);
		pid_t pid = fork();
		if (pid == 0)
			_exit(child_work());
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
		else
			fprintf(stderr, "child %d: %s %d\n", i, WIFSIGNALED(st) ? "signal" : "exit",
			        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	pthread_join(cr, NULL);
	CHECK_EQ(ok, children);
	for (int k = 0; k < 3; k++)
		kmem_cache_destroy(caches[k]);
	CHECK_EQ(uslab_error_count(), 0);
	return test_summary();
}
