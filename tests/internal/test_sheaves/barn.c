/* barn.c - test_sheaves: barn limits and decay, shrink, packed bursts,
 * reclaim before growth. */
#include "sheaves.h"

static void check_barn(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	if (usl_opt.decay_ms == 0) {
		/* exact without decay */
		CHECK(sc.barn_full <= s->barn_max_full);
		CHECK(sc.barn_empty <= s->barn_max_empty);
	}
	CHECK(sc.barn_objects == sc.barn_full * s->sheaf_capacity);
	if (!s->ctor)     /* the surplus is packed: arrays stay at the level */
		CHECK(sc.barn_full <= s->barn_max_full);
}

static unsigned long barn_full(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_full;
}

/* Full sheaves the barn holds, as arrays and packed. */
static unsigned long barn_held(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_full + sc.barn_packed;
}

/* Empty slabs of s on its CPUs' partial lists and its node list (the test's
 * own thread is the only user of s's slots here). */
static unsigned long empty_slabs(struct kmem_cache *s)
{
	struct usl_state_counts st;
	unsigned long n = 0;
	for (unsigned int i = 0; i < usl_nr_cpus; i++)
		for (struct slab *p = s->cpu_slab[i].partial; p; p = p->next)
			n += usl_counters_inuse(p->counters) == 0;
	usl_slub_state_counts(s, &st);
	return n + st.empty_node_partial;
}

static unsigned long barn_empty(struct kmem_cache *s)
{
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	return sc.barn_empty;
}

static void ctor_mark(void *p)
{
	memset(p, 0x5a, 128);
}

/* The empty sheaves a burst of frees leaves in the barn once its objects are
 * allocated again stay while the program takes back what it freed (the next
 * burst reuses them), and are freed down to the kernel's ten once it goes on
 * allocating from slabs: arrays must not stay while a program grows. */
void test_empties_after_burst(void)
{
	/* A cache with a constructor: its surplus stays in arrays (its objects
	 * must stay constructed, so none is packed into them). */
	struct kmem_cache_args args = { .sheaf_capacity = 20, .ctor = ctor_mark };
	struct kmem_cache *s = kmem_cache_create("empties-128", 128, &args, 0);
	CHECK(s != NULL);
	/* The budget is a 32nd of the cache's slab memory: live objects make
	 * room for a burst of N (25 sheaves) in arrays. */
	unsigned int cap = uslab_sheaf_capacity(s);
	const unsigned int N = 25 * cap, LIVE = N * 16 / 3, MORE = 4 * N;
	void **live = malloc(LIVE * sizeof(void *)), **p = malloc((N + MORE) * sizeof(void *));
	CHECK(live && p);
	for (unsigned i = 0; i < LIVE; i++)
		live[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < N; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < N; i++)
		kmem_cache_free(s, p[i]);
	if (usl_opt.decay_ms)
		CHECK(barn_full(s) > 2 * s->barn_max_full);   /* the burst's sheaves */
	for (unsigned i = 0; i < N; i++)                 /* taken back: empties stay */
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long kept = barn_empty(s);
	if (usl_opt.decay_ms)
		CHECK(kept > 2 * s->barn_max_empty);
	/* Growing past it: refills from slabs, and the surplus empties go. */
	for (unsigned i = N; i < N + MORE; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(MORE / cap > 32 + kept / 8);                /* enough refills to free them all */
	CHECK(barn_empty(s) <= s->barn_max_empty);
	for (unsigned i = 0; i < N + MORE; i++)
		kmem_cache_free(s, p[i]);
	for (unsigned i = 0; i < LIVE; i++)
		kmem_cache_free(s, live[i]);
	kmem_cache_destroy(s);
	free(live);
	free(p);
}

/* Rounds of allocations and frees, single and bulk: the barn within its
 * limits, and at least its level of full sheaves after a burst of frees. */
static void barn_rounds(struct kmem_cache *s, void **p)
{
	for (int round = 0; round < 4; round++) {
		unsigned n = round % 2 ? 20000 : 3000;
		for (unsigned i = 0; i < n; i++)
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		check_barn(s);
		for (unsigned i = 0; i < n; i++)
			kmem_cache_free(s, p[n - 1 - i]);
		check_barn(s);
		/* The barn holds at least its level of full sheaves after a burst
		 * of frees (exactly that without decay; the rest went to slabs). */
		if (usl_opt.decay_ms == 0)
			CHECK_EQ(barn_full(s), s->barn_max_full);
		else
			CHECK(barn_held(s) > s->barn_max_full);
		CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, n, p), (int)n);
		check_barn(s);
		kmem_cache_free_bulk(s, n, p);
		check_barn(s);
	}
}

/* The surplus above the level that stays unused for a decay interval goes
 * back to slabs (two intervals: the sheaves parked after a check become
 * eligible at the next one). */
static void barn_surplus_decays(struct kmem_cache *s, void **p)
{
	unsigned long burst = barn_held(s);
	CHECK(burst > s->barn_max_full + 100);
	for (int k = 0; k < 3; k++) {
		struct timespec ts = { (time_t)(usl_opt.decay_ms / 1000), (long)(usl_opt.decay_ms % 1000) * 1000000L + 100000000L };
		nanosleep(&ts, NULL);
		/* frees that park full sheaves (and no allocation from the barn) */
		for (unsigned i = 0; i < 1500; i++)
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
		for (unsigned i = 0; i < 1500; i++)
			kmem_cache_free(s, p[i]);
	}
	CHECK(barn_held(s) < burst / 2);
}

/* A tenth of the decay interval, then 600 kmalloc/kfree pairs of 200 bytes
 * (the main sheaf only). */
static void tick_kmalloc_200(void)
{
	struct timespec ts = { 0, (long)(usl_opt.decay_ms % 10000) * 100000L + 1000000L };
	nanosleep(&ts, NULL);
	for (int j = 0; j < 600; j++)
		kfree(kmalloc(200, GFP_KERNEL));
}

/* A barn nobody visits for an interval gives back all of its full sheaves,
 * even while the cache is in use through the CPU's own sheaves: here a
 * kmalloc class, whose kfree calls are sampled as use (and tick the sweep). */
static void barn_unvisited_empties(void **p)
{
	void *q0 = kmalloc(200, GFP_KERNEL);
	struct kmem_cache *km = usl_virt_to_slab(q0)->slab_cache;
	kfree(q0);
	if (!uslab_sheaf_capacity(km))
		return;
	for (unsigned i = 0; i < 3000; i++)
		p[i] = kmalloc(200, GFP_KERNEL);
	for (unsigned i = 0; i < 3000; i++)
		kfree(p[i]);
	CHECK(barn_held(km) >= 1);
	/* The barn holds its ten arrays (the rest of the burst is packed into
	 * the objects themselves). */
	CHECK_EQ(barn_full(km), km->barn_max_full);
	struct slab_sheaf *held = NULL;    /* in the barn of the node the thread ran on */
	for (unsigned int nid = 0; !held && nid < usl_nr_nodes; nid++)
		held = km->node[nid]->barn.full;
	CHECK(held != NULL);
	struct kmem_cache *shc = usl_virt_to_slab(held)->slab_cache;
	struct usl_state_counts st0, st1;
	usl_slub_state_counts(shc, &st0);
	CHECK(st0.total >= 1);
	for (int k = 0; k < 40 && barn_held(km); k++)
		tick_kmalloc_200();
	CHECK_EQ(barn_held(km), 0);
	/* The same sweep flushed the CPUs' sheaves, which were both full after
	 * the frees. */
	struct usl_sheaf_counts kc;
	usl_sheaf_counts(km, &kc);
	/* What they hold now is what the traffic refilled since, in small
	 * refills (an eighth of a sheaf, then a quarter, ... on each CPU the
	 * thread ran on; the steps are each node's barn's), not the two full
	 * sheaves. */
	CHECK(kc.cpu_objects < uslab_sheaf_capacity(km) * 3 / 2 * usl_nr_nodes);
	/* The sweeps free the sheaves, and then the slabs of the sheaf
	 * structures' cache they empty, cpu partial ones too (later in the same
	 * sweep): after a sweep no slab of that cache is empty. (How many hold
	 * live sheaves depends on where they were made.) */
	unsigned long empty = empty_slabs(shc);
	for (int k = 0; k < 40 && empty; k++) {
		tick_kmalloc_200();
		empty = empty_slabs(shc);
	}
	CHECK_EQ(empty, 0);
	usl_slub_state_counts(shc, &st1);
	CHECK(st1.total <= st0.total);
}

/* Shrink: every sheaf flushed, every empty slab returned; with objects in
 * use, shrink keeps exactly their slabs. */
static void shrink_flushes_sheaves(struct kmem_cache *s, void **p)
{
	CHECK_EQ(kmem_cache_shrink(s), 0);
	struct usl_sheaf_counts sc;
	usl_sheaf_counts(s, &sc);
	CHECK_EQ(sc.cpu_objects + sc.barn_objects + sc.barn_full, 0);
	CHECK_EQ(sc.barn_empty, 0);                  /* and the sheaves freed, empty ones too */
	struct usl_state_counts st;
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
	for (unsigned i = 0; i < 5000; i++)
		p[i] = kmem_cache_alloc(s, GFP_KERNEL);
	for (unsigned i = 0; i < 5000; i += 2)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(kmem_cache_shrink(s), 1);
	CHECK_EQ(usl_engine_objects_in_use(s), 2500);
	for (unsigned i = 1; i < 5000; i += 2)
		kmem_cache_free(s, p[i]);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	usl_slub_state_counts(s, &st);
	CHECK_EQ(st.total, 0);
}

void test_barn_and_shrink(void)
{
	unsigned long errors_before = uslab_error_count();
	struct kmem_cache_args args = { .sheaf_capacity = 20 };
	struct kmem_cache *s = kmem_cache_create("barn-256", 256, &args, 0);
	static void *p[20000];

	CHECK(s != NULL);
	CHECK(uslab_sheaf_capacity(s) >= 20);
	CHECK_EQ(s->barn_max_full, 10);
	CHECK_EQ(s->barn_max_empty, 10);
	barn_rounds(s, p);
	if (usl_opt.decay_ms) {
		barn_surplus_decays(s, p);
		barn_unvisited_empties(p);
	}
	shrink_flushes_sheaves(s, p);
	kmem_cache_destroy(s);
	CHECK_EQ(uslab_error_count(), errors_before);
}

/* A burst of frees in random order: the arrays stay at the barn's level and
 * two sheaves a CPU, the rest is packed into the freed objects, every object
 * is accounted for, and allocating them back returns each object exactly
 * once. Sizes from the smallest packed (two words a block) to several lines;
 * the 8-byte one is not packed and keeps its budget. */
void test_packed_burst(void)
{
	static const unsigned int sizes[] = { 8, 16, 24, 40, 64, 200, 256, 1000 };
	enum { N = 6000 };
	static void *p[N], *q[N];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	/* On one CPU: a thread that moves between the burst and the
	 * allocations would leave the burst's objects in the other CPU's
	 * sheaves, out of its reach, and take slab objects instead. */
	cpu_set_t was;
	bool pinned = pin_this_cpu(&was);

	for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		char name[32];
		snprintf(name, sizeof(name), "packed-%u", sizes[z]);
		struct kmem_cache *s = kmem_cache_create(name, sizes[z], NULL, SLAB_NO_MERGE);
		CHECK(s != NULL);
		if (!s)
			continue;
		for (unsigned i = 0; i < N; i++) {
			p[i] = kmem_cache_alloc(s, GFP_KERNEL);
			memset(p[i], 0xa5, sizes[z]);        /* the program's own data */
		}
		for (unsigned i = N - 1; i > 0; i--) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			unsigned j = (unsigned)(seed % (i + 1));
			void *x = p[i];
			p[i] = p[j];
			p[j] = x;
		}
		unsigned long sweeps = __atomic_load_n(&usl_decay_sweeps, __ATOMIC_SEQ_CST);
		for (unsigned i = 0; i < N; i++)
			kmem_cache_free(s, p[i]);
		struct usl_sheaf_counts sc;
		usl_slub_flush_cpus(s);      /* cpu slabs to the node lists: the count below is exact */
		usl_sheaf_counts(s, &sc);
		unsigned long held = sc.cpu_objects + sc.barn_objects + sc.packed_objects;
		CHECK_EQ(held, usl_engine_objects_in_use(s));        /* nothing lost or counted twice */
		if (uslab_sheaf_capacity(s) && usl_opt.decay_ms && sizes[z] >= 24) {   /* a node: two words and the marker */
			CHECK(sc.barn_full <= s->barn_max_full);
			CHECK(sc.barn_empty <= s->barn_max_empty);
			CHECK(sc.cpu_sheaves <= 2 * usl_nr_cpus);
			CHECK(sc.barn_packed >= (N - (2 * usl_nr_cpus + s->barn_max_full) * uslab_sheaf_capacity(s)) /
			                        uslab_sheaf_capacity(s));
			CHECK(held >= N);
		} else if (uslab_sheaf_capacity(s) && usl_opt.decay_ms) {
			/* Not packed: arrays up to a 32nd of the slab memory. */
			CHECK_EQ(sc.barn_packed, 0);
			CHECK(sc.barn_full * (8 * uslab_sheaf_capacity(s) + 32) <=
			      usl_engine_objects_in_use(s) * s->size / 32 + (s->barn_max_full + 1) * (8 * uslab_sheaf_capacity(s) + 32) + 8192);
		}
		for (unsigned i = 0; i < N; i++) {
			q[i] = kmem_cache_alloc(s, GFP_KERNEL);
			CHECK(q[i] != NULL);
			memset(q[i], 0x3c, sizes[z]);
		}
		/* Each object comes back once; all but what the sheaves held
		 * before the burst are the burst's own. */
		qsort(p, N, sizeof(void *), cmp_ptr);
		qsort(q, N, sizeof(void *), cmp_ptr);
		unsigned dup = 0, ours = 0;
		for (unsigned i = 0; i < N; i++) {
			dup += i && q[i] == q[i - 1];
			ours += bsearch(&q[i], p, N, sizeof(void *), cmp_ptr) != NULL;
		}
		CHECK_EQ(dup, 0);
		/* (On one CPU, and unless a decay sweep ran meanwhile, as on a loaded machine
		 * under a sanitizer: it may have given the burst's packed sheaves
		 * back to slabs, and empty slabs away. Counted, not timed: a
		 * sweep can start at any point of an interval, and one already
		 * running when the burst began makes the count odd.) */
		if (pinned && held >= N && !(sweeps & 1) &&
		    __atomic_load_n(&usl_decay_sweeps, __ATOMIC_SEQ_CST) == sweeps)
			CHECK(ours >= N - (held - N));
		usl_sheaf_counts(s, &sc);
		CHECK_EQ(sc.packed_objects, 0);
		CHECK_EQ(sc.barn_packed, 0);
		for (unsigned i = 0; i < N; i++)
			kmem_cache_free(s, q[i]);
		/* shrink gives back the packed ones too */
		CHECK_EQ(kmem_cache_shrink(s), 0);
		usl_sheaf_counts(s, &sc);
		CHECK_EQ(sc.packed_objects + sc.barn_packed + sc.barn_full + sc.cpu_objects, 0);
		CHECK_EQ(usl_engine_objects_in_use(s), 0);
		kmem_cache_destroy(s);
	}
	if (pinned)
		unpin_cpu(&was);
}

/* The barn's surplus is given back before the page provider grows. */
void test_reclaim_before_growth(void)
{
	struct kmem_cache_args args = { .sheaf_capacity = 20 };
	struct kmem_cache *a = kmem_cache_create("reclaim-a", 256, &args, 0);
	struct kmem_cache *b = kmem_cache_create("reclaim-b", 4096, NULL, 0);
	static void *p[20000];

	for (unsigned i = 0; i < 20000; i++)
		p[i] = kmem_cache_alloc(a, GFP_KERNEL);
	for (unsigned i = 0; i < 20000; i++)
		kmem_cache_free(a, p[i]);
	if (usl_opt.decay_ms)
		CHECK(barn_held(a) > a->barn_max_full);    /* a burst, parked */
	/* b needs more pages than are free: a's surplus goes back first, and
	 * its emptied slabs' pages serve b. */
	size_t committed_before, d, c;
	usl_pages_stats(&committed_before, &d, &c);
	for (unsigned i = 0; i < 3000; i++)
		p[i] = kmem_cache_alloc(b, GFP_KERNEL);
	CHECK(barn_held(a) <= a->barn_max_full);
	size_t committed_after;
	usl_pages_stats(&committed_after, &d, &c);
	/* 3000 x 4 KiB = 12 MiB for b; a's 5 MiB came back and were reused. */
	CHECK(committed_after - committed_before < (size_t)3000 * 4096);
	for (unsigned i = 0; i < 3000; i++)
		kmem_cache_free(b, p[i]);
	kmem_cache_destroy(a);
	kmem_cache_destroy(b);
}
