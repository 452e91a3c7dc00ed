/* test_assert.c - usl_assert and usl_assert_held run in a build with
 * assertions (USLAB_ASSERTS): each case runs in a child, and one that breaks
 * a rule must end in SIGABRT with "uslab: assertion failed: <condition>" on
 * stderr, one that keeps it must exit 0. Spin locks and mutexes, held by this
 * thread, by another one or by nobody, and a library path (the barn) entered
 * without its lock. Registered only where assertions are compiled in. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include "../harness.h"
#include "percpu/percpu.h"
#include "platform/platform.h"
#include "testing.h"

static int spin;
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static struct kmem_cache *cache;

/* Runs fn in a child; its stderr into out. Returns its wait status. */
static int in_child(void (*fn)(void), char *out, size_t n)
{
	int fd[2];
	if (pipe(fd))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		fn();
		_exit(0);
	}
	close(fd[1]);
	size_t got = 0;
	ssize_t r;
	while (got + 1 < n && (r = read(fd[0], out + got, n - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = 0;
	close(fd[0]);
	int st = -1;
	waitpid(pid, &st, 0);
	return st;
}

/* fn keeps the rules: the child exits 0 and says nothing of an assertion. */
static void expect_ok(void (*fn)(void), const char *what)
{
	char out[1024];
	int st = in_child(fn, out, sizeof(out));
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || strstr(out, "assertion failed"))
		fprintf(stderr, "%s: status %#x, stderr: %s\n", what, st, out);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(!strstr(out, "assertion failed"));
}

/* fn breaks one: the child aborts, naming the condition. */
static void expect_abort(void (*fn)(void), const char *cond, const char *what)
{
	char out[1024];
	int st = in_child(fn, out, sizeof(out));
	bool ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, "uslab: assertion failed: ") &&
	          strstr(out, cond);
	if (!ok)
		fprintf(stderr, "%s: status %#x, stderr: %s\n", what, st, out);
	CHECK(ok);
}

static void *hold_spin(void *arg)
{
	(void)arg;
	usl_spin_lock(&spin);
	return NULL;   /* exits holding it */
}
static void *hold_mutex(void *arg)
{
	(void)arg;
	usl_lock(&mtx);
	return NULL;
}
static void other_thread_holds(void *(*fn)(void *))
{
	pthread_t t;
	pthread_create(&t, NULL, fn, NULL);
	pthread_join(t, NULL);
}

static void spin_mine(void)
{
	usl_spin_lock(&spin);
	usl_assert_held(&spin);
	usl_spin_unlock(&spin);
	usl_spin_lock_leaf(&spin);
	usl_assert_held(&spin);
	usl_spin_unlock_leaf(&spin);
}
static void spin_nobodys(void) { usl_assert_held(&spin); }
static void spin_theirs(void)
{
	other_thread_holds(hold_spin);
	usl_assert_held(&spin);
}
static void spin_unlock_theirs(void)
{
	other_thread_holds(hold_spin);
	usl_spin_unlock(&spin);   /* the library's own check */
}
static void mutex_mine(void)
{
	usl_lock(&mtx);
	usl_assert_held(&mtx);
	usl_unlock(&mtx);
}
static void mutex_nobodys(void) { usl_assert_held(&mtx); }
static void mutex_theirs(void)
{
	other_thread_holds(hold_mutex);
	usl_assert_held(&mtx);
}
static void barn_unlocked(void) { (void)usl_test_barn_take_unlocked(cache); }
static void invariant(void)
{
	volatile int x = 1;
	usl_assert(x == 2);
}

int main(void)
{
	cache = kmem_cache_create("assert-test", 64, 0, 0, NULL);
	CHECK(cache != NULL);
	expect_ok(spin_mine, "spin lock held by this thread");
	expect_abort(spin_nobodys, "usl_held(&spin)", "spin lock held by nobody");
	expect_abort(spin_theirs, "usl_held(&spin)", "spin lock held by another thread");
	expect_abort(spin_unlock_theirs, "usl_held(lock)", "unlock of a spin lock another thread holds");
	expect_ok(mutex_mine, "mutex held by this thread");
	expect_abort(mutex_nobodys, "usl_held(&mtx)", "mutex held by nobody");
	expect_abort(mutex_theirs, "usl_held(&mtx)", "mutex held by another thread");
	expect_abort(barn_unlocked, "usl_held(&barn->lock)", "the barn without its lock");
	expect_abort(invariant, "x == 2", "a false invariant");
	kmem_cache_destroy(cache);
	return test_summary();
}
