/* test_rcu.c - kfree_rcu on liburcu (memb flavour): refused before
 * uslab_rcu_init; readers (more threads than CPUs) walk slots of nodes under
 * rcu_read_lock while writers replace them and kfree_rcu (or
 * kfree_rcu_mightsleep) the old ones, nodes of a kmem_cache and kmalloc
 * blocks: no reader may see a node that is not whole (under USLAB_DEBUG=FZPU a
 * freed node is poisoned: 0x6b); every object queued is freed (stats, objects
 * in use), in RCU sheaves where the cache has sheaves; bad pointers, a second
 * kfree_rcu and an object freed and reused while queued reported with the
 * cache named, nothing freed twice; kmem_cache_destroy right after kfree_rcu reports no
 * objects remaining; the bound (USLAB_RCU_MAX) holds while a reader stalls
 * grace periods; a fork's child frees its copies once; SLAB_TYPESAFE_BY_RCU's
 * memory stays while a reader holds it.
 * Modes: "bound" (run with USLAB_RCU_MAX=2000), default: everything else. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <urcu/urcu-memb.h>

#include "../harness.h"

#define MAGIC 0x600dcafe12345678ull
#define SLOTS 256

struct node {
	uint64_t magic;
	uint64_t id, check;         /* check == id * 3 + 1 */
	struct rcu_head rcu;
	char pad[40];
};

static struct kmem_cache *cache;
static struct node *_Atomic slots[SLOTS];
static atomic_int stop;
static atomic_ulong bad_reads, reads;

static struct node *make(uint64_t id, bool kmalloc_node)
{
	struct node *n = kmalloc_node ? kmalloc(sizeof(*n), GFP_KERNEL) : kmem_cache_alloc(cache, GFP_KERNEL);
	CHECK(n != NULL);
	n->id = id;
	n->check = id * 3 + 1;
	n->magic = MAGIC;
	return n;
}

static void *reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	unsigned long r = 0, bad = 0;
	while (!atomic_load(&stop)) {
		urcu_memb_read_lock();
		for (int i = 0; i < SLOTS; i++) {
			struct node *n = atomic_load_explicit(&slots[i], memory_order_acquire);   /* rcu_dereference */
			if (!n)
				continue;
			uint64_t m = __atomic_load_n(&n->magic, __ATOMIC_RELAXED);
			uint64_t id = __atomic_load_n(&n->id, __ATOMIC_RELAXED);
			uint64_t c = __atomic_load_n(&n->check, __ATOMIC_RELAXED);
			bad += m != MAGIC || c != id * 3 + 1;
			r++;
		}
		urcu_memb_read_unlock();
	}
	urcu_memb_unregister_thread();
	atomic_fetch_add(&reads, r);
	atomic_fetch_add(&bad_reads, bad);
	return NULL;
}

static void *writer(void *arg)
{
	uintptr_t k = (uintptr_t)arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (k + 1);
	for (unsigned long i = 0; i < 60000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int slot = (int)(x % SLOTS);
		struct node *n = make(k << 40 | i, x & 2);
		struct node *old = atomic_exchange(&slots[slot], n);   /* (a release: rcu_assign_pointer) */
		if (!old)
			continue;
		if (x & 4)
			kfree_rcu_mightsleep(old);
		else
			kfree_rcu(old, rcu);
	}
	return NULL;
}

static unsigned long in_use(struct kmem_cache *s)
{
	kmem_cache_shrink(s);
	char buf[64];
	uslab_cache_attr(s, "objects", buf, sizeof(buf));
	return strtoul(buf, NULL, 10);
}

static void before_init(void)
{
	capture_reports();
	unsigned long bad = reports(USLAB_ERR_BAD_ARG);
	struct node *n = make(1, false);
	kfree_rcu(n, rcu);
	kfree_rcu(n, rcu);                           /* reported once only */
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), bad + 1);
	CHECK_EQ(n->magic, MAGIC);                   /* refused: still allocated, untouched */
	struct uslab_rcu_stats st;
	CHECK_EQ(uslab_rcu_stats(&st), 0);
	CHECK(st.refused == 2 && st.queued == 0 && !st.flavor_set);
	errno = 0;
	CHECK_EQ(uslab_rcu_stats(NULL), -1);
	CHECK_EQ(errno, EINVAL);
	/* A flavour without the calls uslab needs. */
	static struct rcu_flavor_struct lacking;
	lacking = urcu_memb_flavor;
	lacking.barrier = NULL;
	errno = 0;
	CHECK_EQ(uslab_rcu_init(&lacking), -1);
	CHECK_EQ(errno, EINVAL);
	kmem_cache_free(cache, n);
	/* A SLAB_TYPESAFE_BY_RCU cache needs the flavour first. */
	CHECK(kmem_cache_create("rcu-ts-early", 64, 0, SLAB_TYPESAFE_BY_RCU, NULL) == NULL);
	errno = 0;
	CHECK_EQ(uslab_rcu_init(NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(uslab_rcu_init(&urcu_memb_flavor), 0);
	CHECK_EQ(uslab_rcu_init(&urcu_memb_flavor), 0);   /* the same again: fine */
	static struct rcu_flavor_struct other;
	other = urcu_memb_flavor;                           /* another flavour (at another address) */
	errno = 0;
	CHECK_EQ(uslab_rcu_init(&other), -1);               /* refused */
	CHECK_EQ(errno, EBUSY);
}

static void readers_and_writers(void)
{
	int nr = (int)sysconf(_SC_NPROCESSORS_ONLN) * 2 + 1, nw = 3;
	pthread_t r[64], w[8];
	if (nr > 64)
		nr = 64;
	for (int i = 0; i < SLOTS; i++)
		slots[i] = make((uint64_t)i, i & 1);
	for (int i = 0; i < nr; i++)
		pthread_create(&r[i], NULL, reader, NULL);
	for (int i = 0; i < nw; i++)
		pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i);
	for (int i = 0; i < nw; i++)
		pthread_join(w[i], NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < nr; i++)
		pthread_join(r[i], NULL);
	fprintf(stderr, "  %lu reads, %lu of a node not whole\n", atomic_load(&reads), atomic_load(&bad_reads));
	CHECK(atomic_load(&reads) > 0);
	CHECK_EQ(atomic_load(&bad_reads), 0);
	for (int i = 0; i < SLOTS; i++)
		kfree_rcu(atomic_exchange(&slots[i], NULL), rcu);
	kvfree_rcu_barrier();
	struct uslab_rcu_stats st;
	uslab_rcu_stats(&st);
	fprintf(stderr, "  queued %lu in %lu batches, freed %lu, waiting %lu\n", st.queued, st.batches, st.freed,
	        st.waiting);
	CHECK(st.queued >= 3 * 60000 - SLOTS);
	CHECK_EQ(st.waiting, 0);
	CHECK_EQ(st.freed, st.queued);
	CHECK(st.batches > 0 && st.batches < st.queued / 8);   /* batched, not one call_rcu each */
	CHECK_EQ(in_use(cache), 0);
	/* slabinfo's closing line says the same. */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	uslab_slabinfo(f);
	fclose(f);
	char want[128];
	snprintf(want, sizeof(want), "# kfree_rcu: queued %lu batches %lu freed %lu waiting 0", st.queued, st.batches,
	         st.freed);
	CHECK(strstr(text, want) != NULL);   /* (then refused, waits, slabs_waiting, sheaves) */
	/* The cache's nodes and the kmalloc blocks waited in RCU sheaves, which
	 * went whole to the barns; on SLAB and debug caches in batches alone. */
	const char *sh = strstr(text, " sheaves ");
	CHECK(sh != NULL);
	unsigned long sheaves = sh ? strtoul(sh + 9, NULL, 10) : 0;
	const char *eng = getenv("USLAB_ALLOCATOR"), *dbg = getenv("USLAB_DEBUG");
	bool plain = !(eng && !strcmp(eng, "slab")) && !(dbg && *dbg);
	fprintf(stderr, "  %lu of the batches were RCU sheaves\n", sheaves);
	CHECK(plain ? sheaves > 0 && sheaves <= st.batches : sheaves == 0);
	free(text);
}

static void bad_input(void)
{
	capture_reports();
	unsigned long no = reports(USLAB_ERR_NOT_OBJECT), df = reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_SLAB_BUG),
	              fo = reports(USLAB_ERR_FOREIGN);
	struct node *n = make(7, false);
	uslab_kvfree_call_rcu(NULL, (char *)n + 8);            /* inside an object */
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT), no + 1);
	CHECK(strstr(last_report, "kfree_rcu(rcu-node)") != NULL);
	char stack[64];
	uslab_kvfree_call_rcu(NULL, stack);                    /* not uslab's */
	CHECK_EQ(reports(USLAB_ERR_FOREIGN), fo + 1);
	kfree_rcu(n, rcu);
	kfree_rcu(n, rcu);                                     /* queued already */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), df + 1);
	CHECK(strstr(last_report, "kfree_rcu(rcu-node)") != NULL);
	kvfree_rcu_barrier();
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_SLAB_BUG), df + 1);   /* freed once, nothing else */
	/* Reused, the object's next kfree_rcu is not taken for a second one. */
	struct node *again = make(8, false);
	kfree_rcu(again, rcu);
	struct node *m = make(9, true);
	kfree_rcu_mightsleep(m);
	kfree_rcu_mightsleep(m);                               /* headless: caught where it is freed */
	kvfree_rcu_barrier();
	/* (a debug cache reports it in the kernel's shape: a BUG report) */
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_SLAB_BUG), df + 2);
	CHECK_EQ(in_use(cache), 0);
	/* Freed by kmem_cache_free while queued, and handed out again: the
	 * grace period's free finds its rcu_head written and leaves the new
	 * owner's object alone (under USLAB_DEBUG the free's poison overwrote
	 * it, and the object may wait in quarantine). */
	unsigned long co = reports(USLAB_ERR_CORRUPT);
	struct node *twice = make(10, false), *got = NULL;
	kfree_rcu(twice, rcu);
	kmem_cache_free(cache, twice);
	for (int i = 0; i < 100000 && got != twice; i++) {   /* frees in between: reuse may be delayed */
		if (got)
			kmem_cache_free(cache, got);
		got = make(11, false);
		memset(&got->rcu, 0x5a, sizeof(got->rcu));
	}
	kvfree_rcu_barrier();
	const char *dbg = getenv("USLAB_DEBUG");
	CHECK(got == twice || (dbg && *dbg));
	CHECK_EQ(reports(USLAB_ERR_CORRUPT), co + 1);
	CHECK(strstr(last_report, "kfree_rcu(rcu-node)") != NULL && strstr(last_report, "written after") != NULL);
	CHECK_EQ(got->id, 11);                                 /* the new owner's, untouched */
	kmem_cache_free(cache, got);
	CHECK_EQ(in_use(cache), 0);
	/* Inside a read-side section, the barrier refuses to wait for itself. */
	unsigned long ba = reports(USLAB_ERR_BAD_ARG);
	urcu_memb_read_lock();
	kvfree_rcu_barrier();
	urcu_memb_read_unlock();
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 1);
}

/* A cache destroyed right after kfree_rcu of its objects: they are freed
 * first, not objects remaining. */
static void destroy_after(void)
{
	capture_reports();
	unsigned long leak = reports(USLAB_ERR_LEAK);
	struct kmem_cache *s = kmem_cache_create("rcu-destroy", sizeof(struct node), 0, SLAB_NO_MERGE, NULL);
	for (int i = 0; i < 500; i++) {
		struct node *n = kmem_cache_alloc(s, GFP_KERNEL);
		kfree_rcu(n, rcu);
	}
	kmem_cache_destroy(s);
	CHECK_EQ(reports(USLAB_ERR_LEAK), leak);
}

/* SLAB_TYPESAFE_BY_RCU: a reader inside a read-side section holds an object
 * while every object of the cache is freed, the cache shrunk and free memory
 * released: the object's memory stays mapped and of this type (its
 * constructor's tag; reused or not) until the reader leaves; a freed object
 * keeps its bytes; after the grace period the slabs' pages do go back. */
#define TAG 0x7e57ab1e5afe0000ull
struct tnode {
	uint64_t tag;             /* the constructor's: what a reader checks */
	uint64_t key;
	uint64_t words[6];
};
static void tnode_ctor(void *p)
{
	struct tnode *n = p;
	memset(n, 0, sizeof(*n));
	n->tag = TAG;
}
static struct tnode *_Atomic held;
static atomic_int phase;
static atomic_ulong seen_tag;

static void *holding_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	urcu_memb_read_lock();
	struct tnode *n = atomic_load_explicit(&held, memory_order_acquire);
	atomic_store(&phase, 1);
	while (atomic_load(&phase) != 2)
		usleep(1000);
	atomic_store(&seen_tag, __atomic_load_n(&n->tag, __ATOMIC_RELAXED));
	urcu_memb_read_unlock();
	urcu_memb_unregister_thread();
	return NULL;
}

static void typesafe(void)
{
	capture_reports();
	struct kmem_cache *s = kmem_cache_create("rcu-typesafe", sizeof(struct tnode), 0, SLAB_TYPESAFE_BY_RCU,
	                                         tnode_ctor);
	CHECK(s != NULL);
	if (!s)
		return;
	char attr[16];
	CHECK(uslab_cache_attr(s, "destroy_by_rcu", attr, sizeof(attr)) > 0 && !strcmp(attr, "1\n"));
	enum { N = 2000 };
	static struct tnode *v[N];
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(v[i] && v[i]->tag == TAG);
		v[i]->key = (uint64_t)i;
	}
	atomic_store(&held, v[N / 2]);
	pthread_t t;
	pthread_create(&t, NULL, holding_reader, NULL);
	while (atomic_load(&phase) != 1)
		usleep(1000);
	/* Freed objects keep their bytes (uslab's words are outside them). */
	kmem_cache_free(s, v[0]);
	CHECK(v[0]->tag == TAG && v[0]->key == 0);
	for (int i = 1; i < N; i++)
		kmem_cache_free(s, v[i]);
	kmem_cache_shrink(s);
	uslab_release_free_memory();
	struct uslab_rcu_stats st;
	uslab_rcu_stats(&st);
	fprintf(stderr, "  typesafe: %lu slabs wait for the reader's grace period\n", st.slabs_waiting);
	CHECK(st.slabs_waiting > 0);
	/* Reused at once, of the same type. */
	struct tnode *again = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(again && again->tag == TAG);
	kmem_cache_free(s, again);
	kmem_cache_shrink(s);
	uslab_release_free_memory();
	atomic_store(&phase, 2);
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&seen_tag), TAG);
	kvfree_rcu_barrier();
	uslab_rcu_stats(&st);
	CHECK_EQ(st.slabs_waiting, 0);
	kmem_cache_destroy(s);
	/* Refused with SLAB_VIRTUAL. */
	CHECK(kmem_cache_create("rcu-ts-virtual", 64, 0, SLAB_TYPESAFE_BY_RCU | SLAB_VIRTUAL, NULL) == NULL);
}

/* A fork while objects wait: each process frees its own copies, once. */
static void fork_while_queued(void)
{
	capture_reports();
	for (int i = 0; i < 300; i++)
		kfree_rcu(make((uint64_t)i, i & 1), rcu);
	unsigned long errs = uslab_error_count();
	urcu_memb_call_rcu_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		urcu_memb_call_rcu_after_fork_child();
		kvfree_rcu_barrier();
		struct uslab_rcu_stats st;
		uslab_rcu_stats(&st);
		unsigned long used = in_use(cache);
		if (st.waiting || used || uslab_error_count() != errs) {
			fprintf(stderr, "  child: %lu waiting, %lu in use, %lu new reports\n", st.waiting, used,
			        uslab_error_count() - errs);
			_exit(1);
		}
		_exit(0);
	}
	urcu_memb_call_rcu_after_fork_parent();
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kvfree_rcu_barrier();
	CHECK_EQ(in_use(cache), 0);
}

/* USLAB_RCU_MAX=2000: a reader holds a read-side section for 300 ms, a
 * writer queues 20000 objects meanwhile: it waits at the bound instead of
 * letting the queue grow. */
static atomic_int hold;
static void *stalling_reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	urcu_memb_read_lock();
	atomic_store(&hold, 1);
	usleep(300 * 1000);
	urcu_memb_read_unlock();
	urcu_memb_unregister_thread();
	return NULL;
}

static void bound(void)
{
	CHECK_EQ(uslab_rcu_init(&urcu_memb_flavor), 0);
	pthread_t t;
	pthread_create(&t, NULL, stalling_reader, NULL);
	while (!atomic_load(&hold))
		usleep(1000);
	unsigned long most = 0;
	long nproc = sysconf(_SC_NPROCESSORS_CONF);
	for (int i = 0; i < 20000; i++) {
		kfree_rcu(make((uint64_t)i, false), rcu);
		struct uslab_rcu_stats st;
		uslab_rcu_stats(&st);
		if (st.waiting > most)
			most = st.waiting;
	}
	pthread_join(t, NULL);
	kvfree_rcu_barrier();
	struct uslab_rcu_stats st;
	uslab_rcu_stats(&st);
	unsigned long max = strtoul(getenv("USLAB_RCU_MAX") ? getenv("USLAB_RCU_MAX") : "524288", NULL, 10);
	fprintf(stderr, "  at most %lu waiting (bound %lu), %lu waits\n", most, max, st.waits);
	CHECK(st.waits > 0);
	/* Each CPU's share of the bound, and one object above it (its
	 * caller waits then). */
	CHECK(most <= max + (unsigned long)nproc);
	CHECK_EQ(st.waiting, 0);
	CHECK_EQ(in_use(cache), 0);
}

int main(int argc, char **argv)
{
	urcu_memb_register_thread();
	cache = kmem_cache_create("rcu-node", sizeof(struct node), 0, SLAB_NO_MERGE, NULL);
	CHECK(cache != NULL);
	if (argc > 1 && !strcmp(argv[1], "bound")) {
		bound();
	} else {
		before_init();
		readers_and_writers();
		bad_input();
		destroy_after();
		typesafe();
		fork_while_queued();
	}
	kvfree_rcu_barrier();
	kmem_cache_destroy(cache);
	urcu_memb_unregister_thread();
	return test_summary();
}
