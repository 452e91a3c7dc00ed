/* platform.c - CPU and page facts, the clock, the spin lock, membarrier, and the
 * once-per-process choice of per-CPU mode (rseq or locked), guarded mappings.
 * Locks: init_lock (start-up); never allocates. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>

#include "../testing.h"
#include "platform.h"

unsigned int usl_nr_cpus = 1;
unsigned int usl_online_cpus = 1;
bool usl_rseq_mode;
long usl_rseq_off;
unsigned int usl_rseq_nr;
/* Locked mode: the sections arm and read this instead of glibc's area; its
 * cpu_id is -1, so they fall through to the locked paths at once. */
static __thread struct rseq dummy_rseq __attribute__((tls_model("initial-exec"), aligned(32))) = {
	.cpu_id_start = 0, .cpu_id = (uint32_t)-1 };
static int platform_ready;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- assertions ---- */
#ifdef USLAB_ASSERTS
__thread int usl_spin_self __attribute__((tls_model("initial-exec")));
static int spin_ids;

int usl_spin_holder_slow(void)
{
	int id = __atomic_add_fetch(&spin_ids, 1, __ATOMIC_RELAXED);
	if (!id)                                  /* wrapped: 0 means free */
		id = __atomic_add_fetch(&spin_ids, 1, __ATOMIC_RELAXED);
	return usl_spin_self = id;
}

/* glibc records the owner's thread id in every mutex it locks, as its thread
 * descriptor has it: a mutex of our own, locked here, says which that is (a
 * vfork child, on its parent's descriptor, is its parent; gettid would not). */
static int mutex_self(void)
{
	pthread_mutex_t probe = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&probe);
	int me = probe.__data.__owner;
	pthread_mutex_unlock(&probe);
	pthread_mutex_destroy(&probe);
	return me;
}

/* Every fork (common/fork.c): in the child, mutexes the forking thread held
 * before the fork (those fork took, or, in a fork that took none, those the
 * interrupted code holds) name its parent's id. */
static __thread int mutex_self_before_fork;

void usl_mutex_fork_prepare(void) { mutex_self_before_fork = mutex_self(); }

bool usl_mutex_held(pthread_mutex_t *m)
{
	int owner = __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED);
	return owner == mutex_self() || (mutex_self_before_fork && owner == mutex_self_before_fork);
}

void usl_assert_fail(const char *cond, const char *file, int line, const char *fn)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "uslab: assertion failed: %s (%s:%d, %s)\n", cond, file, line, fn);
	if (n > 0)
		(void)!write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	abort();
}
#endif

/* ---- clock, cpu ---- */

uint64_t usl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int usl_current_cpu(void)
{
	int c = sched_getcpu();
	return c < 0 ? 0 : c;
}

void usl_spin_lock_slow(int *lock)
{
	usl_assert(!usl_spin_held(lock));   /* not taken twice by one thread */
	for (;;) {
		for (int i = 0; i < 64; i++) {
			if (!__atomic_load_n(lock, __ATOMIC_RELAXED) && usl_spin_try(lock))
				return;
			__builtin_ia32_pause();
		}
		sched_yield();
	}
}

int usl_membarrier_rseq(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0)
		return 0;
	/* The registration belongs to the address space: a child of fork() may
	 * need it again. */
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) != 0)
		return -1;
	return (int)syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

/* prefix followed by n in decimal, cut to len - 1 bytes. For cache names made
 * at start-up: snprintf would pull printf's machinery (a few dozen KiB of libc
 * text) into every process's RSS. */
void usl_name_number(char *buf, size_t len, const char *prefix, unsigned int n)
{
	char digits[12];
	size_t i = 0, k = sizeof(digits);
	do {
		digits[--k] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	for (; *prefix && i + 1 < len; prefix++)
		buf[i++] = *prefix;
	for (; k < sizeof(digits) && i + 1 < len; k++)
		buf[i++] = digits[k];
	if (len)
		buf[i] = 0;
}

/* ---- per-CPU mode ---- */

/* A sysfs CPU list ("0-3,8-11"): its highest id (-1 if none) and how many ids
 * it names; false when it cannot be read. */
bool usl_cpu_list(const char *path, long *max, long *count)
{
	char buf[4096];                    /* sparse lists run long: "0,2,4,...,254" is 450 bytes */
	return usl_sysfs_read(path, buf, sizeof(buf)) && usl_cpu_list_parse(buf, max, count);
}

struct list_count {
	long max, count;
};

static void count_range(long lo, long hi, void *arg)
{
	struct list_count *c = arg;
	c->count += hi - lo + 1;
	if (hi > c->max)
		c->max = hi;
}

/* The list in buf (a C string): its highest id and how many ids it names. */
bool usl_cpu_list_parse(const char *buf, long *max, long *count)
{
	struct list_count c = { -1, 0 };
	bool ok = usl_list_ranges(buf, count_range, &c);
	*max = c.max;
	*count = c.count;
	return ok && c.max >= 0;
}

/* Highest possible CPU id + 1 (rseq's cpu_id can be any of them, and ids may
 * be sparse) and the online count (for min_objects), from sysfs; glibc's counts
 * (it reads a directory) where sysfs is missing. */
static void count_cpus(void)
{
	long max, count, n = 0, online = 0;
	int cancel;

	/* sysconf reads files (cancellation points) under init_lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);

	if (usl_cpu_list("/sys/devices/system/cpu/possible", &max, &count))
		n = max + 1;
	if (n < 1)
		n = sysconf(_SC_NPROCESSORS_CONF);
	if (n < 1)
		n = 1;
	if (n > 8192)
		n = 8192;
	usl_nr_cpus = (unsigned int)n;
	if (usl_cpu_list("/sys/devices/system/cpu/online", &max, &count))
		online = count;
	if (online < 1)
		online = sysconf(_SC_NPROCESSORS_ONLN);
	usl_online_cpus = online < 1 ? 1 : (online > n ? (unsigned int)n : (unsigned int)online);
	pthread_setcancelstate(cancel, NULL);
}

/* The page size from the aux vector (sysconf would pull a cold part of libc in,
 * see usl_cpu_list); sysconf only where the vector lacks it. */
size_t usl_os_page_size(void)
{
	unsigned long ps = getauxval(AT_PAGESZ);
	return ps ? (size_t)ps : (size_t)sysconf(_SC_PAGESIZE);
}

void *usl_map_guarded(size_t bytes, int prot)
{
	size_t pg = usl_os_page_size();
	char *p = mmap(NULL, bytes + 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (prot != PROT_NONE && mprotect(p + pg, bytes, prot) != 0) {
		munmap(p, bytes + 2 * pg);
		return NULL;
	}
	return p + pg;
}

void usl_unmap_guarded(void *p, size_t bytes)
{
	size_t pg = usl_os_page_size();
	munmap((char *)p - pg, bytes + 2 * pg);
}

static bool rseq_usable(void)
{
	if (usl_opt.rseq == 0)
		return false;
	/* ThreadSanitizer cannot follow rseq sections (a restart looks like a
	 * torn write to it): its builds use locked mode. */
	if (USL_TSAN)
		return false;
	if (__rseq_size < 8 || __rseq_offset == 0)
		return false;
	/* glibc registered its threads (__rseq_size). This one's cpu_id may
	 * still read -2: a vfork child (platform/vfork.c marks the area it
	 * shares with its parent) that makes the process's first allocation.
	 * Its sections take the paths for no CPU; the process's other threads,
	 * and its parent, have rseq. A cpu_id beyond the possible CPUs is
	 * refused. */
	const struct rseq *rs = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
	int cpu = (int)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
	if (cpu >= 0 ? (unsigned int)cpu >= usl_nr_cpus : cpu != (int)RSEQ_CPU_ID_REGISTRATION_FAILED)
		return false;
	/* Remote flushes (shrink, destroy) need to abort other CPUs' sections. */
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) != 0)
		return false;
	return true;
}

void usl_platform_init(void)
{
	if (__atomic_load_n(&platform_ready, __ATOMIC_ACQUIRE))
		return;
	usl_lock(&init_lock);   /* its reports wait until it is released */
	if (!platform_ready) {
		usl_read_options();
		count_cpus();
		long top = usl_topology_init(usl_nr_cpus, usl_opt.nodes);
		if (top >= USL_MAX_NODES)
			usl_report(USLAB_ERR_OPTION, "node ids up to %ld: nodes from %d on are counted as node 0 (uslab keeps "
			           "%d nodes)", top, USL_MAX_NODES, USL_MAX_NODES);
		if (usl_nr_nodes > 1)
			usl_opt.mode |= USL_MODE_NUMA;
		usl_rseq_mode = rseq_usable();
		usl_rseq_off = usl_rseq_mode ? (long)__rseq_offset
		                             : (long)((char *)&dummy_rseq - (char *)__builtin_thread_pointer());
		usl_rseq_nr = usl_rseq_mode ? usl_nr_cpus : 0;
		if (usl_opt.rseq == 1 && !usl_rseq_mode)
			usl_report(USLAB_ERR_OPTION, "USLAB_RSEQ=1 but rseq is not registered here; using locked mode");
		__atomic_store_n(&platform_ready, 1, __ATOMIC_RELEASE);
	}
	usl_unlock(&init_lock);
}

unsigned int usl_this_node_slow(void)
{
	int cpu;
	if (usl_rseq_mode) {
		const struct rseq *rs = (const struct rseq *)((char *)__builtin_thread_pointer() + usl_rseq_off);
		cpu = (int)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
	} else {
		cpu = sched_getcpu();
	}
	return usl_node_of_cpu(cpu);
}

void usl_platform_fork_lock(void)
{
	pthread_mutex_lock(&init_lock);
	usl_report_fork_lock();
}

void usl_platform_fork_unlock(void)
{
	usl_report_fork_unlock();
	pthread_mutex_unlock(&init_lock);
}

const char *uslab_percpu_mode(void)
{
	usl_platform_init();
	return usl_rseq_mode ? "rseq" : "locked";
}

/* ---- secrets ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* usl_rand64's seed epoch: a fork's child moves it on, so the forking thread
 * (the child's only one) seeds again at its next draw. */
static unsigned int rand_epoch = 1;
static __thread uint64_t rand_state __attribute__((tls_model("initial-exec")));
static __thread unsigned int rand_seen __attribute__((tls_model("initial-exec")));

uint64_t usl_rand64(void)
{
	uint64_t x = rand_state;
	unsigned int e = __atomic_load_n(&rand_epoch, __ATOMIC_RELAXED);
	if (usl_unlikely(rand_seen != e)) {
		x = usl_random64();
		rand_seen = e;
	}
	x ^= x >> 12, x ^= x << 25, x ^= x >> 27;                /* xorshift64* */
	rand_state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

void usl_random_fork_child(void)
{
	__atomic_add_fetch(&rand_epoch, 1, __ATOMIC_RELAXED);
}

uint64_t usl_random64(void)
{
	static uint64_t fallback;
	uint64_t v = 0;

	int saved = errno;
	/* The system call, not glibc's getrandom, which is a cancellation point:
	 * cache creation calls this under slab_mutex, and a thread cancelled
	 * there would leave every other thread waiting for it. */
	ssize_t n = (ssize_t)syscall(SYS_getrandom, &v, sizeof(v), GRND_NONBLOCK);
	errno = saved;
	if (n != (ssize_t)sizeof(v)) {
		/* A sandbox without getrandom, or entropy not ready at boot. */
		const uint64_t *at = (const uint64_t *)getauxval(AT_RANDOM);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t k = __atomic_add_fetch(&fallback, 0x9e3779b97f4a7c15ULL, __ATOMIC_RELAXED);
		v = mix64((at ? at[0] ^ mix64(at[1]) : 0) ^ mix64(k ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30)));
	}
	return v ? v : 0x9e3779b97f4a7c15ULL;
}
