/* test_numa.c - NUMA on a fake topology (USLAB_NODES=2 or 4, set by CTest;
 * with one node only the parsers and the one-node facts are checked): the
 * topology's parsers and its CPU-to-node table; kmem_cache_alloc_node and
 * kmalloc_node take objects and blocks from the node asked for, counted on
 * it; a node that does not exist is reported and served locally; objects
 * freed on another node go back to their node (the CPU's sheaves then hand
 * out only its node's objects); shrink per node; a storm of threads (more
 * than CPUs) that move between the nodes' CPUs while they allocate on every
 * node and free each other's objects. Runs on both engines and per-CPU modes,
 * with sheaves on and off (CTest's variants). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <linux/mempolicy.h>

#include "../harness.h"
#include "engine/engine.h"
#include "pages/pages.h"
#include "percpu/percpu.h"
#include "platform/platform.h"
#include "testing.h"

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void unpin(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (unsigned int c = 0; c < usl_nr_cpus && c < CPU_SETSIZE; c++)
		CPU_SET(c, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* A CPU of node nid (CPU i is on node i % N in the fake topology), or -1. */
static int cpu_of(unsigned int nid)
{
	for (unsigned int c = 0; c < usl_nr_cpus; c++)
		if (usl_node_of_cpu((int)c) == nid)
			return (int)c;
	return -1;
}

static void test_parsers(void)
{
	uint64_t mask;
	long max;
	CHECK(usl_topology_node_list("0-1\n", &mask, &max) && mask == 3 && max == 1);
	CHECK(usl_topology_node_list("0,2\n", &mask, &max) && mask == 5 && max == 2);
	CHECK(usl_topology_node_list("0-3,8", &mask, &max) && mask == 0x10f && max == 8);
	/* Ids past uslab's 64 keep the highest for the report, not the mask. */
	CHECK(usl_topology_node_list("0,70", &mask, &max) && mask == 1 && max == 70);
	CHECK(!usl_topology_node_list("", &mask, &max));
	CHECK(!usl_topology_node_list("abc", &mask, &max));
	CHECK(!usl_topology_node_list("99999999", &mask, &max));
	/* A cpulist sets its CPUs' node; the table is restored after. */
	uint8_t saved[4];
	memcpy(saved, usl_cpu_node, sizeof(saved));
	CHECK(usl_topology_node_cpus(3, "0-1"));
	CHECK(usl_nr_cpus < 2 || (usl_cpu_node[0] == 3 && usl_cpu_node[1] == 3));
	CHECK(!usl_topology_node_cpus(USL_MAX_NODES, "0"));
	CHECK(!usl_topology_node_cpus(1, "1-99999999"));
	memcpy(usl_cpu_node, saved, sizeof(saved));
}

static unsigned int want_nodes(void)
{
	const char *v = getenv("USLAB_NODES");
	return v ? (unsigned int)atoi(v) : 1;
}

/* The machine's topology (no USLAB_NODES): what sysfs says, bound to
 * memory with libnuma when there is more than one node. */
static void test_machine_topology(void)
{
	char buf[4096];
	uint64_t mask = 1;
	long max = 0;
	if (usl_sysfs_read("/sys/devices/system/node/online", buf, sizeof(buf)))
		CHECK(usl_topology_node_list(buf, &mask, &max));
	CHECK_EQ(usl_nodes_online, max ? mask : 1);
	CHECK_EQ(usl_nr_nodes, max ? (unsigned long)(64 - __builtin_clzll(mask)) : 1);
#ifdef USLAB_HAVE_LIBNUMA
	CHECK_EQ(usl_numa_bind, usl_nr_nodes > 1);
#else
	CHECK(!usl_numa_bind);
#endif
	CHECK_EQ(!!(usl_opt.mode & USL_MODE_NUMA), usl_nr_nodes > 1);
}

static void test_topology(void)
{
	if (!getenv("USLAB_NODES")) {
		test_machine_topology();
		return;
	}
	unsigned int n = want_nodes();
	CHECK_EQ(usl_nr_nodes, n);
	CHECK_EQ(__builtin_popcountll(usl_nodes_online), n);
	for (unsigned int c = 0; c < usl_nr_cpus; c++)
		CHECK_EQ(usl_node_of_cpu((int)c), c % n);
	CHECK(usl_node_valid(0) && !usl_node_valid((int)n) && !usl_node_valid(-1) && !usl_node_valid(1000));
	CHECK(!usl_numa_bind);                     /* a fake topology binds nothing */
	CHECK_EQ(!!(usl_opt.mode & USL_MODE_NUMA), n > 1);
	/* Every cache has a node structure per node, and no more. */
	struct kmem_cache *s = kmem_cache_create("numa-shape", 64, 0, SLAB_NO_MERGE, NULL);
	for (unsigned int i = 0; i < n; i++)
		CHECK(s->node[i] != NULL);
	CHECK(n == USL_MAX_NODES || s->node[n] == NULL);
	kmem_cache_destroy(s);
}

/* Objects in use on node nid by its slabs' counts (SLAB: its alien and
 * shared arrays are drained first by the callers that want them exact). */
static long in_use_on(struct kmem_cache *s, unsigned int nid)
{
	struct usl_node_counts nc;
	usl_engine_node_counts(s, (int)nid, &nc);
	return (long)nc.total_objects - (long)nc.partial_free;
}

#define PER 300

static void test_alloc_node(void)
{
	unsigned int n = usl_nr_nodes;
	struct kmem_cache *s = kmem_cache_create("numa-node", 200, 0, SLAB_NO_MERGE, NULL);
	void *objs[4][PER];
	for (unsigned int nid = 0; nid < n; nid++) {
		int bad = 0;
		for (int i = 0; i < PER; i++) {
			objs[nid][i] = kmem_cache_alloc_node(s, GFP_KERNEL, (int)nid);
			bad += !objs[nid][i] || usl_addr_node(objs[nid][i]) != nid ||
			       usl_virt_to_slab(objs[nid][i])->nid != nid;
		}
		CHECK_EQ(bad, 0);
		struct usl_node_counts nc;
		usl_engine_node_counts(s, (int)nid, &nc);
		CHECK(nc.total_objects >= PER && nc.nr_slabs >= 1);
	}
	/* The attribute's per-node text names each node that has slabs. */
	char buf[256];
	CHECK(uslab_cache_attr(s, "slabs", buf, sizeof(buf)) > 0);
	for (unsigned int nid = 0; nid < n && n > 1; nid++) {
		char want[8];
		snprintf(want, sizeof(want), " N%u=", nid);
		CHECK(strstr(buf, want) != NULL);
	}
	/* __GFP_ZERO and the usual markers on the node path. */
	unsigned char *z = kmem_cache_alloc_node(s, GFP_KERNEL | __GFP_ZERO, (int)(n - 1));
	CHECK(z && all_bytes(z, 0, 200) && usl_addr_node(z) == n - 1);
	kmem_cache_free(s, z);
	/* Not a node: reported, then the local node. */
	unsigned long before = reports(USLAB_ERR_BAD_ARG);
	void *x = kmem_cache_alloc_node(s, GFP_KERNEL, (int)n);
	void *y = kmem_cache_alloc_node(s, GFP_KERNEL, 1000);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 2);
	CHECK(x && y && strstr(last_report, "node 1000 does not exist"));
	kmem_cache_free(s, x);
	kmem_cache_free(s, y);
	/* NUMA_NO_NODE: an object, no report. */
	x = kmem_cache_alloc_node(s, GFP_KERNEL, NUMA_NO_NODE);
	CHECK(x != NULL && reports(USLAB_ERR_BAD_ARG) == before + 2);
	kmem_cache_free(s, x);
	for (unsigned int nid = 0; nid < n; nid++)
		for (int i = 0; i < PER; i++)
			kmem_cache_free(s, objs[nid][i]);
	/* In bulk: all from the node, all or nothing; a bad node once reported. */
	void *bulk[100];
	for (unsigned int nid = 0; nid < n; nid++) {
		CHECK_EQ(uslab_alloc_bulk_node(s, GFP_KERNEL, (int)nid, 100, bulk), 100);
		int off = 0;
		for (int i = 0; i < 100; i++)
			off += usl_addr_node(bulk[i]) != nid;
		CHECK_EQ(off, 0);
		kmem_cache_free_bulk(s, 100, bulk);
	}
	before = reports(USLAB_ERR_BAD_ARG);
	CHECK_EQ(uslab_alloc_bulk_node(s, GFP_KERNEL, 99, 100, bulk), 100);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 1);
	kmem_cache_free_bulk(s, 100, bulk);
	/* A NULL cache or array: reported, nothing allocated. */
	CHECK_EQ(uslab_alloc_bulk_node(NULL, GFP_KERNEL, 0, 4, bulk), 0);
	CHECK_EQ(uslab_alloc_bulk_node(s, GFP_KERNEL, 0, 4, NULL), 0);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 3);
	CHECK_EQ(uslab_alloc_bulk_node(s, GFP_KERNEL, 0, 100, bulk), 100);
	kmem_cache_free_bulk(s, 100, bulk);
	kmem_cache_destroy(s);
}

static void test_kmalloc_node(void)
{
	unsigned int n = usl_nr_nodes;
	const size_t sizes[] = { 8, 200, 3000, 20000, 3u << 20 };
	for (unsigned int nid = 0; nid < n; nid++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *p = kmalloc_node(sizes[k], GFP_KERNEL, (int)nid);
			CHECK(p != NULL);
			CHECK(!p || usl_addr_node(p) == nid);
			memset(p, 1, sizes[k]);
			kfree(p);
		}
	unsigned long before = reports(USLAB_ERR_BAD_ARG);
	void *p = kmalloc_node(100000, GFP_KERNEL, (int)n + 3);
	CHECK(p != NULL && reports(USLAB_ERR_BAD_ARG) == before + 1);
	kfree(p);
}

/* Objects of another node in CPU slot `cpu`'s sheaves (arrays). */
static int far_in_slot(struct kmem_cache *s, int cpu, unsigned int far)
{
	struct kmem_cache_cpu *c = &s->cpu_slab[cpu];
	int k = 0;
	if (!s->sheaf_capacity)
		return 0;
	if (c->main)
		for (unsigned int i = 0; i < c->main_size; i++)
			k += usl_addr_node(c->main->objects[i]) == far;
	if (c->spare)
		for (unsigned int i = 0; i < c->spare->size; i++)
			k += usl_addr_node(c->spare->objects[i]) == far;
	return k;
}

/* Objects of node `far` freed on a CPU of node `near` go back to their node:
 * none is in that CPU's sheaves after, SLUB's are on their slabs (none in
 * use on `far` once the cpu partial lists are flushed), SLAB's in alien
 * arrays until those drain; once
 * the cache is shrunk, node `far` has no object in use and no slab. */
static void remote_round(struct kmem_cache *s, int cpu, unsigned int far, bool kmalloc_path)
{
	enum { N = 2000 };
	static void *o[N];
	for (int i = 0; i < N; i++)
		o[i] = kmalloc_path ? kmalloc_node(s->object_size, GFP_KERNEL, (int)far)
		                    : kmem_cache_alloc_node(s, GFP_KERNEL, (int)far);
	CHECK(in_use_on(s, far) >= N);
	if (kmalloc_path) {
		for (int i = 0; i < N / 2; i++)
			kfree(o[i]);
		kfree_bulk(N / 2, o + N / 2);
	} else {
		for (int i = 0; i < N / 2; i++)
			kmem_cache_free(s, o[i]);
		kmem_cache_free_bulk(s, N / 2, o + N / 2);
	}
	CHECK_EQ(far_in_slot(s, cpu, far), 0);
	if (usl_is_slab(s)) {
		struct usl_slab_counts c;
		usl_slab_counts(s, -1, &c);
		CHECK(c.alien_avail > 0);
	} else {
		/* A full slab that gets a free goes to the freeing CPU's partial
		 * list, as the kernel's: flushed there, the sheaves untouched. */
		usl_engine_flush_cpus(s);
		CHECK_EQ(in_use_on(s, far), 0);
	}
	kmem_cache_shrink(s);
	CHECK_EQ(in_use_on(s, far), 0);
	struct usl_node_counts nc;
	usl_engine_node_counts(s, (int)far, &nc);
	CHECK_EQ(nc.nr_slabs, 0);
}

static void test_remote_free(void)
{
	unsigned int n = usl_nr_nodes;
	if (n < 2 || usl_nr_cpus < 2)
		return;
	int cpu = cpu_of(0);
	pin(cpu);
	if (sched_getcpu() != cpu) {
		printf("remote frees: skipped (CPU %d not usable)\n", cpu);
		unpin();
		return;
	}
	struct kmem_cache *s = kmem_cache_create("numa-remote", 96, 0, SLAB_NO_MERGE, NULL);
	remote_round(s, cpu, n - 1, false);
	kmem_cache_destroy(s);
	/* kfree, kfree_bulk: a kmalloc class (its slabs on node n - 1 are its own). */
	void *probe = kmalloc(64, GFP_KERNEL);
	struct kmem_cache *k64 = usl_virt_to_slab(probe)->slab_cache;
	kfree(probe);
	remote_round(k64, cpu, n - 1, true);
	unpin();
}

/* The machine's nodes: the page of an object or block asked for on node
 * nid is on node nid, by the kernel's own answer (get_mempolicy with
 * MPOL_F_NODE | MPOL_F_ADDR). On one node this checks the calls and that
 * nothing else was bound; on a NUMA machine, the binding (libnuma). */
static int page_node(void *p)
{
	int node = -1;
	if (syscall(SYS_get_mempolicy, &node, NULL, 0UL, p, (unsigned long)(MPOL_F_NODE | MPOL_F_ADDR)) != 0)
		return -2;
	return node;
}

static void test_machine_placement(void)
{
	if (getenv("USLAB_NODES"))
		return;                              /* a fake topology places nothing */
	struct kmem_cache *s = kmem_cache_create("numa-place", 1024, 0, SLAB_NO_MERGE, NULL);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		if (!usl_node_valid((int)nid))
			continue;
		int bad = 0;
		void *o[64];
		for (int i = 0; i < 64; i++) {
			o[i] = kmem_cache_alloc_node(s, GFP_KERNEL, (int)nid);
			memset(o[i], 0x33, 1024);        /* faulted in here: placed by the policy */
			bad += page_node(o[i]) != (int)nid;
		}
		CHECK_EQ(bad, 0);
		for (int i = 0; i < 64; i++)
			kmem_cache_free(s, o[i]);
		char *big = kmalloc_node(1u << 20, GFP_KERNEL, (int)nid);
		CHECK(big != NULL);
		memset(big, 1, 1u << 20);
		CHECK_EQ(page_node(big), nid);
		CHECK_EQ(page_node(big + (1u << 20) - 1), nid);
		kfree(big);
	}
	kmem_cache_destroy(s);
}

/* malloc_info (uslab's, where the malloc override is linked): a <node>
 * element per node with more than one node, none on one. */
static void test_malloc_info(void)
{
	char *buf = NULL;
	size_t len = 0;
	void *keep = kmalloc_node(100, GFP_KERNEL, (int)usl_nr_nodes - 1);
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	int rc = malloc_info(0, f);
	fclose(f);
	if (rc == 0 && strstr(buf, "uslab-1")) {
		char want[32];
		snprintf(want, sizeof(want), "<node nr=\"%u\">", usl_nr_nodes - 1);
		CHECK_EQ(strstr(buf, want) != NULL, usl_nr_nodes > 1);
		CHECK_EQ(strstr(buf, "<node nr=\"0\">") != NULL, usl_nr_nodes > 1);
	}
	free(buf);
	kfree(keep);
}

/* Shrink one node: its empty slabs go, the other nodes' stay. */
static void test_shrink_node(void)
{
	unsigned int n = usl_nr_nodes;
	if (n < 2)
		return;
	struct kmem_cache *s = kmem_cache_create("numa-shrink", 128, 0, SLAB_NO_MERGE, NULL);
	enum { N = 1500 };
	static void *o[2][N];
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < N; i++)
			o[k][i] = kmem_cache_alloc_node(s, GFP_KERNEL, k ? (int)n - 1 : 0);
	/* Node 0 keeps 200 objects in use; everything else is freed. */
	kmem_cache_free_bulk(s, N - 200, o[0] + 200);
	kmem_cache_free_bulk(s, N, o[1]);
	usl_sheaf_flush_all(s);              /* sheaves first: their objects may land on a cpu slab */
	usl_engine_flush_cpus(s);
	struct usl_node_counts before0, after0, after1;
	usl_engine_node_counts(s, 0, &before0);
	CHECK_EQ(uslab_cache_shrink_node(s, (int)n - 1), 0);
	usl_engine_node_counts(s, 0, &after0);
	usl_engine_node_counts(s, (int)n - 1, &after1);
	CHECK_EQ(after1.nr_slabs, 0);
	/* Node 0's objects in use keep their slabs. SLUB leaves node 0 as it
	 * was; SLAB's drain of node n - 1's alien arrays may free node 0 slabs
	 * that those objects were the last of. */
	CHECK(after0.total_objects - after0.partial_free >= 200 && after0.nr_slabs >= 1);
	if (!usl_is_slab(s))
		CHECK_EQ(after0.nr_slabs, before0.nr_slabs);
	kmem_cache_free_bulk(s, 200, o[0]);
	unsigned long bad = reports(USLAB_ERR_BAD_ARG);
	CHECK_EQ(uslab_cache_shrink_node(s, 99), -EINVAL);
	CHECK_EQ(uslab_cache_shrink_node(NULL, 0), -EINVAL);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), bad + 2);
	kmem_cache_destroy(s);
}

/* The storm: threads (three per CPU) hop between the CPUs of every node,
 * allocate on random nodes (and on none), keep a window of objects, and give
 * half of them to the next thread to free. At the end nothing is in use and
 * no report was made. */
#define THREADS_PER_CPU 3
#define WINDOW 64
static struct kmem_cache *storm_cache;
static void *volatile handoff[64];
static int storm_ops = 20000;

static void *storm(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg, seed = id * 2654435761u + 1;
	void *mine[WINDOW] = { NULL };
	for (int op = 0; op < storm_ops; op++) {
		seed = seed * 1103515245u + 12345u;
		if (op % 500 == 0)
			pin((int)((seed >> 8) % usl_nr_cpus));   /* move to another node's CPU */
		int slot = (int)((seed >> 4) % WINDOW);
		if (mine[slot]) {
			if (seed & 0x10000) {            /* hand it over: another thread frees it */
				void *old = __atomic_exchange_n(&handoff[id % 64], mine[slot], __ATOMIC_ACQ_REL);
				if (old)
					kmem_cache_free(storm_cache, old);
			} else {
				kmem_cache_free(storm_cache, mine[slot]);
			}
		}
		int node = (seed >> 20) % (usl_nr_nodes + 1);   /* usl_nr_nodes: NUMA_NO_NODE */
		mine[slot] = kmem_cache_alloc_node(storm_cache, GFP_KERNEL,
		                                   node == (int)usl_nr_nodes ? NUMA_NO_NODE : node);
		if (mine[slot])
			memset(mine[slot], (int)id, 48);
		void *other = __atomic_exchange_n(&handoff[(id + 1) % 64], NULL, __ATOMIC_ACQ_REL);
		if (other)
			kmem_cache_free(storm_cache, other);
	}
	for (int i = 0; i < WINDOW; i++)
		if (mine[i])
			kmem_cache_free(storm_cache, mine[i]);
	return NULL;
}

static void test_storm(void)
{
	unsigned int nt = usl_nr_cpus * THREADS_PER_CPU;
	if (nt > 48)
		nt = 48;
	storm_cache = kmem_cache_create("numa-storm", 48, 0, SLAB_NO_MERGE, NULL);
	unsigned long errors = uslab_error_count();
	pthread_t t[48];
	for (unsigned int i = 0; i < nt; i++)
		pthread_create(&t[i], NULL, storm, (void *)(uintptr_t)i);
	for (unsigned int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 64; i++)
		if (handoff[i]) {
			kmem_cache_free(storm_cache, handoff[i]);
			handoff[i] = NULL;
		}
	CHECK_EQ(uslab_error_count(), errors);
	usl_sheaf_flush_all(storm_cache);
	usl_engine_flush_cpus(storm_cache);
	kmem_cache_shrink(storm_cache);
	CHECK_EQ(usl_engine_objects_in_use(storm_cache), 0);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		CHECK_EQ(in_use_on(storm_cache, nid), 0);
	kmem_cache_destroy(storm_cache);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		storm_ops = atoi(argv[1]);
	capture_reports();
	usl_ensure_init();                   /* the topology is read at start-up */
	test_parsers();
	test_topology();
	test_alloc_node();
	test_kmalloc_node();
	test_remote_free();
	test_shrink_node();
	test_machine_placement();
	test_malloc_info();
	test_storm();
	printf("nodes %u, engine %s, per-CPU mode %s\n", usl_nr_nodes, uslab_allocator(), uslab_percpu_mode());
	return test_summary();
}
