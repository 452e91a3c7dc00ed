/* topology.c - the NUMA topology: which nodes exist and which node each CPU
 * is on, read once at start-up (usl_platform_init, under init_lock, which
 * reports what it returns) from
 * /sys/devices/system/node, or made up by USLAB_NODES=N for tests on a
 * one-node machine (CPU i on node i % N; no memory is bound then). Plain
 * system calls and no allocation, as the rest of start-up (platform.c).
 * And the binding of memory to a node: libnuma's mbind, loaded with dlopen by
 * a constructor on a machine with more than one node only (headers found at
 * build time, USLAB_HAVE_LIBNUMA), so a one-node process never maps it (nor
 * pays its RSS). Takes no lock of its own. docs/ARCHITECTURE.md,
 * "NUMA", says what the layers above do with it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/rseq.h>
#ifdef USLAB_HAVE_LIBNUMA
#include <numaif.h>
#endif

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../testing.h"
#include "topology.h"

unsigned int usl_nr_nodes = 1;
uint64_t usl_nodes_online = 1;
bool usl_numa_bind;
uint8_t usl_cpu_node[USL_MAX_CPUS];

/* A small sysfs file into buf (size bytes, a C string); false when it cannot
 * be read or is empty. Plain system calls: nothing here may allocate, and
 * glibc's sysconf and get_nprocs sit in parts of libc a program may never
 * touch, which fault-around would then make resident (docs/ARCHITECTURE.md,
 * "Layers"). open, read and close are cancellation points, and start-up holds
 * init_lock (and whatever lock the first call held): no stdio either. */
bool usl_sysfs_read(const char *path, char *buf, size_t size)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t len = (ssize_t)syscall(SYS_read, fd, buf, size - 1);
	syscall(SYS_close, fd);
	if (len <= 0)
		return false;
	buf[len] = 0;
	return true;
}

/* The ranges of a sysfs list in buf (a C string: "0-3,8-11", "5"), each
 * given to each(lo, hi, arg) in turn; false (after the ranges before it)
 * where an id is above 2^20. A range written backwards ("3-1") is its upper
 * id alone. */
bool usl_list_ranges(const char *buf, void (*each)(long lo, long hi, void *arg), void *arg)
{
	long cur = 0, from = -1;
	bool digits = false;
	for (const char *p = buf;; p++) {
		if (*p >= '0' && *p <= '9') {
			cur = cur * 10 + (*p - '0');
			digits = true;
			if (cur > 1L << 20)
				return false;
			continue;
		}
		if (*p == '-' && digits) {
			from = cur;
		} else if (digits) {
			each(from >= 0 && from <= cur ? from : cur, cur, arg);
			from = -1;
		}
		cur = 0;
		digits = false;
		if (!*p)
			return true;
	}
}

static unsigned int nr_cpus = 1;       /* CPU ids the table covers (usl_topology_init) */

struct node_walk {
	unsigned int nid;
	long max;                 /* the highest id seen */
	uint64_t mask;            /* ids below USL_MAX_NODES seen */
};

static void node_range(long lo, long hi, void *arg)
{
	struct node_walk *w = arg;
	if (hi > w->max)
		w->max = hi;
	for (long i = lo; i <= hi && i < USL_MAX_NODES; i++)
		w->mask |= 1ULL << i;
}

static void cpu_range(long lo, long hi, void *arg)
{
	const struct node_walk *w = arg;
	for (long c = lo; c <= hi && c < (long)nr_cpus && c < USL_MAX_CPUS; c++)
		usl_cpu_node[c] = (uint8_t)w->nid;
}

/* A node's cpulist (sysfs text) into usl_cpu_node: its CPUs are on nid. */
bool usl_topology_node_cpus(unsigned int nid, const char *cpulist)
{
	struct node_walk w = { .nid = nid, .max = -1 };
	return nid < USL_MAX_NODES && usl_list_ranges(cpulist, cpu_range, &w);
}

/* A node list (sysfs text: "0-1", "0,2") as a mask of the ids below
 * USL_MAX_NODES and its highest id; false if it names none or is malformed. */
bool usl_topology_node_list(const char *text, uint64_t *mask, long *max)
{
	struct node_walk w = { .max = -1 };
	bool ok = usl_list_ranges(text, node_range, &w);
	*mask = w.mask;
	*max = w.max;
	return ok && w.max >= 0 && w.mask;
}

static void fake(unsigned int n)
{
	usl_nr_nodes = n;
	usl_nodes_online = n == 64 ? ~0ULL : (1ULL << n) - 1;
	for (unsigned int c = 0; c < nr_cpus && c < USL_MAX_CPUS; c++)
		usl_cpu_node[c] = (uint8_t)(c % n);
}

/* "/sys/devices/system/node/node<nid>/cpulist" into path (no stdio at
 * start-up). */
static void cpulist_path(char *path, size_t n, unsigned int nid)
{
	static const char head[] = "/sys/devices/system/node/node", tail[] = "/cpulist";
	char digits[4];
	size_t len = 0, k = sizeof(digits);
	do {
		digits[--k] = (char)('0' + nid % 10);
		nid /= 10;
	} while (nid && k);
	for (size_t i = 0; head[i] && len + 1 < n; i++)
		path[len++] = head[i];
	for (; k < sizeof(digits) && len + 1 < n; k++)
		path[len++] = digits[k];
	for (size_t i = 0; tail[i] && len + 1 < n; i++)
		path[len++] = tail[i];
	path[len] = 0;
}

long usl_topology_init(unsigned int cpus, int fake_nodes)
{
	char buf[4096], path[64];
	uint64_t mask;
	long max;

	nr_cpus = cpus;
	if (fake_nodes > 0) {
		fake((unsigned int)fake_nodes);
		return 0;
	}
	/* No sysfs node directory (a kernel without NUMA, a container that
	 * hides it): one node. */
	if (!usl_sysfs_read("/sys/devices/system/node/online", buf, sizeof(buf)) ||
	    !usl_topology_node_list(buf, &mask, &max) || max == 0)
		return 0;
	uint64_t online = mask;
	long top = max < USL_MAX_NODES ? max : USL_MAX_NODES - 1;
	while (!((online >> top) & 1))
		top--;
	for (unsigned int nid = 0; nid <= (unsigned int)top; nid++) {
		if (!((online >> nid) & 1))
			continue;
		cpulist_path(path, sizeof(path), nid);
		if (usl_sysfs_read(path, buf, sizeof(buf)))
			usl_topology_node_cpus(nid, buf);
	}
	usl_nr_nodes = (unsigned int)top + 1;
	usl_nodes_online = online;
	return max;
}

/* libnuma's mbind, once loaded (numa_at_start). */
static long (*mbind_fn)(void *, unsigned long, int, const unsigned long *, unsigned long, unsigned);

bool usl_numa_bind_range(void *addr, size_t len, unsigned int node)
{
#ifdef USLAB_HAVE_LIBNUMA
	long (*fn)(void *, unsigned long, int, const unsigned long *, unsigned long, unsigned) =
		__atomic_load_n(&mbind_fn, __ATOMIC_ACQUIRE);
	unsigned long mask = 1UL << node;
	return fn && node < USL_MAX_NODES && fn(addr, len, MPOL_PREFERRED, &mask, sizeof(mask) * 8 + 1, 0) == 0;
#else
	(void)addr;
	(void)len;
	(void)node;
	return false;
#endif
}

/* The real topology with more than one node: load libnuma once the loader is
 * done with the program's own libraries (a constructor: dlopen from inside
 * the loader's first allocations would not be safe). The regions made before
 * (the start-up's first few) stay unbound: their pages are where they were
 * first touched. */
__attribute__((constructor)) static void numa_at_start(void)
{
#ifdef USLAB_HAVE_LIBNUMA
	/* Read here without the rest of start-up (its option reports would come
	 * before the program could set a report handler). */
	char buf[4096];
	uint64_t mask;
	long max, fake;
	const char *v = getenv("USLAB_NODES");
	if ((v && usl_parse_int(v, 1, USL_MAX_NODES, &fake)) || !usl_sysfs_read("/sys/devices/system/node/online", buf, sizeof(buf)) ||
	    !usl_topology_node_list(buf, &mask, &max) || max == 0)
		return;
	void *h = dlopen("libnuma.so.1", RTLD_NOW | RTLD_LOCAL);
	void *fn = h ? dlsym(h, "mbind") : NULL;
	if (!fn)
		return;                          /* not installed: first touch places pages */
	__atomic_store_n(&mbind_fn, (long (*)(void *, unsigned long, int, const unsigned long *, unsigned long,
	                                      unsigned))fn, __ATOMIC_RELEASE);
	__atomic_store_n(&usl_numa_bind, true, __ATOMIC_RELEASE);
#endif
}

