/* fork.c - test_corners: fork from a signal handler, against stdio, with
 * busy threads; vfork and posix_spawn. */
#include "corners.h"

/* ===========================================================================
 * sigfork: fork from a signal handler that interrupted the allocator
 */
static volatile sig_atomic_t in_child, child_bad;
static volatile sig_atomic_t forks_done;
static struct kmem_cache *sig_cache;

/* The next tick, one-shot, 50 to 1000 us after the handler ends: the loop
 * runs between forks, and each lands somewhere else in it. */
static void arm_timer(void)
{
	static unsigned int seed = 12345;
	seed = seed * 1103515245u + 12345u;
	struct itimerval it = { { 0, 0 }, { 0, 50 + (long)((seed >> 8) % 950) } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void on_timer(int sig)
{
	(void)sig;
	int e = errno;
	if (in_child)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		in_child = 1;                /* back in the interrupted call, then the loop's child branch */
		errno = e;
		return;
	}
	if (pid > 0) {
		if (child_status(pid) != 0)
			child_bad = 1;
		forks_done++;
	}
	arm_timer();
	errno = e;
}

/* The child, after its interrupted call came back: it allocates, frees and
 * makes a cache, then exits. */
static void sig_child(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_DFL);
	alarm(20);                           /* a hang in the child fails it */
	void *p[64];
	for (int i = 0; i < 64; i++)
		if (!(p[i] = vmalloc((size_t)(i * 997 % 70000) + 1)))
			_exit(3);
	for (int i = 0; i < 64; i++)
		vfree(p[i]);
	struct kmem_cache *c = kmem_cache_create("sigfork-child", 72, 0, 0, NULL);
	void *o = c ? kmem_cache_alloc(c, GFP_KERNEL) : NULL;
	if (!o)
		_exit(4);
	kmem_cache_free(c, o);
	kmem_cache_destroy(c);
	_exit(0);
}

void test_sigfork(void)
{
	sig_cache = kmem_cache_create("sigfork", 200, 0, 0, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_timer;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* Timer ticks land anywhere in the loop, inside the allocator's locks
	 * a good part of the time (page blocks, large blocks, cache creation
	 * and destruction, malloc_trim). */
	arm_timer();
	double start = now_s();
	void *keep[32] = { 0 };
	unsigned long n = 0;
	while (run_seconds ? now_s() - start < run_seconds : forks_done < 300) {
		size_t sz = (n * 7919) % 5 == 0 ? 40000 + n % 3000000 : 16 + n % 9000;
		unsigned int k = (unsigned int)(n % 32);
		keep[k] = vrealloc(keep[k], sz);
		if (in_child)
			sig_child();
		void *o = kmem_cache_alloc(sig_cache, GFP_KERNEL);
		kmem_cache_free(sig_cache, o);
		if (n % 64 == 0) {
			struct kmem_cache *c = kmem_cache_create("sigfork-tmp", 48, 0, 0, NULL);
			kmem_cache_free(c, kmem_cache_alloc(c, GFP_KERNEL));
			kmem_cache_destroy(c);
		}
		if (n % 256 == 0)
			malloc_trim(0);
		if (in_child)
			sig_child();
		n++;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	for (int k = 0; k < 32; k++)
		vfree(keep[k]);
	CHECK(forks_done >= 1);
	CHECK(!child_bad);
	kmem_cache_destroy(sig_cache);
	printf("sigfork: %d forks from the handler, %lu rounds\n", (int)forks_done, n);
}

/* ===========================================================================
 * stdio: getline, fflush(NULL) and fork
 */
static int stop;
static char stdio_path[64];

static void *getline_loop(void *arg)
{
	(void)arg;
	FILE *f = fopen(stdio_path, "r");
	if (!f)
		return (void *)1;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		char *line = NULL;
		size_t cap = 0;
		rewind(f);
		/* Each getline holds the stream's lock while it mallocs its buffer. */
		while (getline(&line, &cap, f) > 0) {
			free(line);
			line = NULL;
			cap = 0;
		}
		free(line);
	}
	fclose(f);
	return NULL;
}

static void *flush_loop(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
		fflush(NULL);                    /* the list lock, then every stream's */
	return NULL;
}

void test_stdio(void)
{
	snprintf(stdio_path, sizeof(stdio_path), "/tmp/uslab-corners-%d", (int)getpid());
	FILE *w = fopen(stdio_path, "w");
	CHECK(w != NULL);
	if (!w)
		return;
	/* Lines of 40 KB: getline grows its buffer past the classes, so under
	 * the stream's lock it takes the page provider's. */
	for (int i = 0; i < 20; i++) {
		for (int k = 0; k < 1000; k++)
			fputs("getline stream ", w), fputs(k % 2 ? "abcdefghijklmnopqrstuvwxy" : "0123456789", w);
		fprintf(w, " line %d\n", i);
	}
	fclose(w);
	/* First a fork while the process has one thread: the child's stdio
	 * list lock is free for a new thread there (released by the child
	 * handler, as glibc resets it only for a multithreaded parent). */
	pid_t first = fork();
	if (first == 0) {
		alarm(20);
		pthread_t ct;
		bool ok = pthread_create(&ct, NULL, flush_loop, NULL) == 0;
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		if (ok)
			pthread_join(ct, NULL);
		FILE *f = fopen(stdio_path, "r");
		_exit(ok && f ? 0 : 3);
	}
	CHECK(first > 0 && child_status(first) == 0);
	pthread_t t[2];
	pthread_create(&t[0], NULL, getline_loop, NULL);
	pthread_create(&t[1], NULL, flush_loop, NULL);
	double start = now_s();
	int forks = 0, bad = 0;
	for (int i = 0; more(i, 100, start); i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(20);
			/* The child's stdio and malloc work, from a new thread too
			 * (the list lock must not be left held). */
			char *p = malloc(100);
			FILE *f = fopen(stdio_path, "r");
			char *line = NULL;
			size_t cap = 0;
			int ok = p && f && getline(&line, &cap, f) > 0;
			pthread_t ct;
			ok = ok && pthread_create(&ct, NULL, flush_loop, NULL) == 0;
			__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
			if (ok)
				pthread_join(ct, NULL);
			fflush(NULL);
			_exit(ok ? 0 : 3);
		}
		if (pid > 0) {
			forks++;
			bad += child_status(pid) != 0;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	unlink(stdio_path);
	CHECK(forks > 0);
	CHECK_EQ(bad, 0);
	printf("stdio: %d forks\n", forks);
}

/* ===========================================================================
 * mtfork: threads in every kind of call while the main thread forks
 */
#define MT_THREADS 6
static struct kmem_cache *mt_cache;

static void *mt_worker(void *arg)
{
	long id = (long)arg;
	void *held[48] = { 0 };
	unsigned long n = (unsigned long)id * 7;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		unsigned int k = (unsigned int)(n % 48);
		switch ((n + (unsigned long)id) % 4) {
		case 0:
			vfree(held[k]);
			held[k] = vmalloc(16 + n % 20000);
			break;
		case 1:
			held[k] = vrealloc(held[k], 8 + (n * 31) % 70000);
			break;
		case 2: {
			void *o = kmem_cache_alloc(mt_cache, GFP_KERNEL);
			kmem_cache_free(mt_cache, o);
			break;
		}
		default: {
			void *b[8];
			if (kmem_cache_alloc_bulk(mt_cache, GFP_KERNEL, 8, b) == 8)
				kmem_cache_free_bulk(mt_cache, 8, b);
		}
		}
		n++;
	}
	for (int k = 0; k < 48; k++)
		vfree(held[k]);
	return NULL;
}

/* The child: allocates, frees, makes a cache, and forks once more. */
static int mt_child(int depth)
{
	alarm(20);
	void *p[200];
	for (int i = 0; i < 200; i++)
		if (!(p[i] = vmalloc(16 + (size_t)i * 131)))
			return 3;
	for (int i = 0; i < 200; i++)
		vfree(p[i]);
	for (int i = 0; i < 100; i++)
		kmem_cache_free(mt_cache, kmem_cache_alloc(mt_cache, GFP_KERNEL));
	struct kmem_cache *c = kmem_cache_create("mtfork-child", 88, 0, 0, NULL);
	if (!c)
		return 4;
	kmem_cache_free(c, kmem_cache_alloc(c, GFP_KERNEL));
	kmem_cache_destroy(c);
	if (depth == 0) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(mt_child(1));
		if (pid < 0 || child_status(pid) != 0)
			return 5;
	}
	return 0;
}

void test_mtfork(void)
{
	mt_cache = kmem_cache_create("mtfork", 120, 0, 0, NULL);
	pthread_t t[MT_THREADS];
	for (long i = 0; i < MT_THREADS; i++)
		pthread_create(&t[i], NULL, mt_worker, (void *)i);
	double start = now_s();
	int forks = 0, bad = 0;
	for (int i = 0; more(i, 150, start); i++) {
		usleep(300);
		pid_t pid = fork();
		if (pid == 0)
			_exit(mt_child(0));
		if (pid > 0) {
			forks++;
			bad += child_status(pid) != 0;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(t[i], NULL);
	kmem_cache_destroy(mt_cache);
	CHECK(forks > 0);
	CHECK_EQ(bad, 0);
	printf("mtfork: %d forks\n", forks);
}

/* ===========================================================================
 * spawn: vfork and posix_spawn from threads while others allocate
 */
static void *spawner(void *arg)
{
	long id = (long)arg;
	int bad = 0;
	double start = now_s();
	for (int i = 0; more(i, 100, start); i++) {
		pid_t pid;
		if (id % 2) {
			char *argv[] = { "/bin/true", NULL };
			if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0) {
				bad++;
				continue;
			}
		} else {
			pid = vfork();
			if (pid == 0) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(127);
			}
			if (pid < 0) {
				bad++;
				continue;
			}
		}
		bad += child_status(pid) != 0;
	}
	return (void *)(long)bad;
}

void test_spawn(void)
{
	mt_cache = kmem_cache_create("spawn", 120, 0, 0, NULL);
	pthread_t w[MT_THREADS], s[4];
	for (long i = 0; i < MT_THREADS; i++)
		pthread_create(&w[i], NULL, mt_worker, (void *)i);
	for (long i = 0; i < 4; i++)
		pthread_create(&s[i], NULL, spawner, (void *)i);
	long bad = 0;
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(s[i], &r);
		bad += (long)r;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < MT_THREADS; i++)
		pthread_join(w[i], NULL);
	kmem_cache_destroy(mt_cache);
	CHECK_EQ(bad, 0);
	void *p = vmalloc(1000);             /* the parent goes on */
	CHECK(p != NULL);
	vfree(p);
}
