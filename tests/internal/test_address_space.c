/* test_address_space - how much uslab can hold.
 *
 *   test_address_space limits [MiB ...]   for each limit (default 1024 MiB) and
 *       block size (64 B, 4 KiB, 64 KiB, 1 MiB): a child under
 *       setrlimit(RLIMIT_AS) (exec'ed again, so that uslab starts under it)
 *       allocates blocks until kmalloc fails, and must get at least 90% of the
 *       limit; after freeing them all it must get as many again. Above 4 GiB
 *       only the blocks of 64 KiB and 1 MiB (smaller ones make the whole
 *       limit resident).
 *       Then one child whose range's end is taken by another mapping: growth
 *       stops there with NULL, and what it holds is intact; and one that, at
 *       its limit, allocates while another thread holds memory out of reach
 *       (as a flush of sheaves does) and gives it back: the allocation waits
 *       and succeeds.
 *   test_address_space ceiling GIB BLOCK_KIB [untouched]   blocks of
 *       BLOCK_KIB, one byte of each written (or none), until GIB GiB are held
 *       (none may fail), then freed.
 *   test_address_space foreign   pointers outside the range and past its
 *       committed end (reserved or not mapped at all) are reported as
 *       foreign and never dereferenced, in both per-CPU modes.
 *
 * The blocks are linked through their first word, so the test needs no array
 * (under a limit, an array would take the address space it measures). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>
#include <time.h>

#include "../harness.h"
#include "pages/pages.h"
#include "engine/slub/slub.h"

static const size_t blocks[] = { 64, 4096, 65536, 1 << 20 };

/* Allocate blocks of size until kmalloc fails (or until max bytes); returns
 * the chain's head, *n the count. */
static void **fill(size_t size, size_t max, size_t *n)
{
	void **head = NULL;
	*n = 0;
	while ((*n + 1) * size <= max) {
		void **b = kmalloc(size, GFP_KERNEL | __GFP_NOWARN);
		if (!b)
			break;
		b[0] = head;                 /* the one write (a page of each block) */
		head = b;
		(*n)++;
	}
	return head;
}

static void drain(void **head)
{
	while (head) {
		void **next = head[0];
		kfree(head);
		head = next;
	}
}

/* Under a limit, with the address after the range's committed end taken by
 * another mapping: growth stops there with a clean NULL, the blocks held are
 * intact, and after freeing them the same number fits again. */
static int blocked_child(void)
{
	void *keep = kmalloc(64, GFP_KERNEL);
	uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE), wall = usl_base + top + (8 << 20);
	void *w = mmap((void *)wall, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	CHECK(w == (void *)wall);
	size_t n1, n2;
	void **head = fill(1 << 20, SIZE_MAX, &n1);
	CHECK(n1 >= 2 && n1 <= 16);                  /* up to the wall, not past it */
	size_t ok = 0;
	for (void **b = head; b; b = b[0])
		ok += ksize(b) >= (1 << 20);
	CHECK_EQ(ok, n1);
	drain(head);
	drain(fill(1 << 20, SIZE_MAX, &n2));
	CHECK_EQ(n2, n1);
	printf("blocked: growth stopped at the mapping %zu MiB past the committed end: %zu blocks of 1 MiB, again %zu\n",
	       (size_t)8, n1, n2);
	kfree(keep);
	munmap(w, 4096);
	return test_summary();
}

/* The child under the limit. */
static int limit_child(size_t limit, size_t size)
{
	size_t n1, n2;
	drain(fill(size, SIZE_MAX, &n1));
	drain(fill(size, SIZE_MAX, &n2));
	double got = (double)(n1 * size), share = got / (double)limit;
	printf("limit %zu MiB, blocks of %zu B: %zu blocks, %.0f MB (%.1f%% of the limit); again after freeing all: %zu\n",
	       limit >> 20, size, n1, got / 1e6, 100 * share, n2);
	CHECK(share >= 0.90);
	CHECK(n2 * 100 >= n1 * 99);          /* as many again (a sheaf's worth of slack) */
	/* Past the committed end nothing is mapped here: reported, not read. */
	capture_reports();
	uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	kfree((void *)(usl_base + top + (4 << 20)));
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), 1);
	return test_summary();
}

/* Under a limit, at its end: another thread holds memory out of reach, as a
 * flush of sheaves does (usl_slub_flush_begin), and gives it back a little
 * later. An allocation that needs a new slab meanwhile waits for it and
 * succeeds, where it would fail while the memory is held. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cond = PTHREAD_COND_INITIALIZER;
static int held_state;                       /* 1: go (held_big set), 2: held */
static void **held_big;

static void held_set(int state)
{
	pthread_mutex_lock(&held_lock);
	held_state = state;
	pthread_cond_broadcast(&held_cond);
	pthread_mutex_unlock(&held_lock);
}

static void held_wait(int state)
{
	pthread_mutex_lock(&held_lock);
	while (held_state != state)
		pthread_cond_wait(&held_cond, &held_lock);
	pthread_mutex_unlock(&held_lock);
}

static void *holder(void *arg)
{
	(void)arg;
	held_wait(1);
	usl_slub_flush_begin();
	held_set(2);
	struct timespec ts = { 0, 100 * 1000000L };
	nanosleep(&ts, NULL);
	drain(held_big);                             /* page blocks: their pages free at once */
	usl_slub_flush_end();
	return NULL;
}

static int flush_wait_child(void)
{
	size_t nbig, nsmall;
	pthread_t t;
	/* The thread (its stack) and the class before the limit is reached. */
	CHECK(pthread_create(&t, NULL, holder, NULL) == 0);
	void **small = kmalloc(64, GFP_KERNEL);
	CHECK(small != NULL);
	small[0] = NULL;
	held_big = fill(64 << 10, SIZE_MAX, &nbig);
	void **more = fill(64, SIZE_MAX, &nsmall);   /* every slab of the class full */
	CHECK(nbig > 16);
	CHECK(kmalloc(64, GFP_KERNEL | __GFP_NOWARN) == NULL);
	held_set(1);
	held_wait(2);
	void *p = kmalloc(64, GFP_KERNEL | __GFP_NOWARN);
	CHECK(p != NULL);
	printf("flush wait: %zu blocks of 64 KiB and %zu of 64 B at the limit; an allocation while another "
	       "thread held the first ones %s\n", nbig, nsmall, p ? "waited and succeeded" : "failed");
	pthread_join(t, NULL);
	kfree(p);
	drain(more);
	kfree(small);
	return test_summary();
}

static void limits(int argc, char **argv)
{
	size_t mib[8] = { 1024 };
	int nl = 1;
	if (argc > 2)
		for (nl = 0; nl < argc - 2 && nl < 8; nl++)
			mib[nl] = strtoul(argv[2 + nl], NULL, 10);
	for (int l = 0; l < nl; l++)
		for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
			/* Each block gets a write: blocks under a page make the whole
			 * limit resident. Above 4 GiB only blocks of 64 KiB and 1 MiB
			 * (a 16th and a 256th of it). */
			if (mib[l] > 4096 && blocks[b] < 65536)
				continue;
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0) {
				struct rlimit rl = { mib[l] << 20, mib[l] << 20 };
				char lim[32], sz[32];
				snprintf(lim, sizeof(lim), "%zu", mib[l] << 20);
				snprintf(sz, sizeof(sz), "%zu", blocks[b]);
				if (setrlimit(RLIMIT_AS, &rl) != 0)
					_exit(3);
				execl("/proc/self/exe", argv[0], "limit-child", lim, sz, (char *)NULL);
				_exit(4);
			}
			int st = 0;
			CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
			CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
	/* The range's end taken by another mapping (1 GiB limit), then memory
	 * held out of reach by another thread at the limit (256 MiB). */
	static const char *const more[] = { "blocked-child", "flush-wait-child" };
	static const size_t more_mib[] = { 1024, 256 };
	for (int m = 0; m < 2; m++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			struct rlimit rl = { more_mib[m] << 20, more_mib[m] << 20 };
			if (setrlimit(RLIMIT_AS, &rl) != 0)
				_exit(3);
			execl("/proc/self/exe", argv[0], more[m], (char *)NULL);
			_exit(4);
		}
		int st = 0;
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static void ceiling(size_t gib, size_t kib, bool untouched)
{
	size_t n = 0, want = gib << 30, size = kib << 10;
	if (!untouched) {
		void **head = fill(size, want, &n);
		printf("ceiling: %zu GiB in blocks of %zu KiB, a byte of each written: %zu of %zu held\n", gib, kib, n,
		       want / size);
		CHECK_EQ(n, want / size);
		drain(head);
		return;
	}
	/* Blocks never written (their addresses in an array of our own): what
	 * the range holds when RAM is short of a page a block. */
	size_t count = want / size;
	void **v = mmap(NULL, count * sizeof(void *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(v != MAP_FAILED);
	if (v == MAP_FAILED)
		return;
	while (n < count && (v[n] = kmalloc(size, GFP_KERNEL | __GFP_NOWARN)))
		n++;
	printf("ceiling: %zu GiB in blocks of %zu KiB, untouched: %zu of %zu held\n", gib, kib, n, count);
	CHECK_EQ(n, count);
	while (n)
		kfree(v[--n]);
	munmap(v, count * sizeof(void *));
}

/* Pointers no block was ever given at: before the range, past its committed
 * end (the rest of a reservation, or nothing mapped under a limit), beyond
 * the range, and far away. Each is one report, and none is read. */
static void foreign(void)
{
	void *keep = kmalloc(4096, GFP_KERNEL);      /* the range is committed up to some top */
	uintptr_t top = __atomic_load_n(&usl_top, __ATOMIC_ACQUIRE);
	uintptr_t bad[] = {
		usl_base - 4096,
		usl_base + top,
		usl_base + top + (64 << 20),
		usl_base + usl_range - 64,
		usl_base + usl_range + 4096,
		(uintptr_t)1 << 46,
		4096,
	};
	capture_reports();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned long before = reports(USLAB_ERR_FOREIGN);
		kfree((void *)bad[i]);
		CHECK_EQ(reports(USLAB_ERR_FOREIGN), before + 1);
		CHECK_EQ(ksize((void *)bad[i]), 0);
	}
	printf("foreign: range %#lx + %#lx, committed %#lx: %zu pointers reported\n", (unsigned long)usl_base,
	       (unsigned long)usl_range, (unsigned long)top, sizeof(bad) / sizeof(bad[0]));
	kfree(keep);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "limit-child"))
		return limit_child(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
	if (argc == 2 && !strcmp(argv[1], "blocked-child"))
		return blocked_child();
	if (argc == 2 && !strcmp(argv[1], "flush-wait-child"))
		return flush_wait_child();
	printf("mode %s\n", uslab_percpu_mode());
	if (argc >= 2 && !strcmp(argv[1], "limits"))
		limits(argc, argv);
	else if ((argc == 4 || argc == 5) && !strcmp(argv[1], "ceiling"))
		ceiling(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), argc == 5 && !strcmp(argv[4], "untouched"));
	else if (argc == 2 && !strcmp(argv[1], "foreign"))
		foreign();
	else {
		fprintf(stderr, "usage: test_address_space limits [MiB ...] | ceiling GIB BLOCK_KIB [untouched] | foreign\n");
		return 2;
	}
	return test_summary();
}
