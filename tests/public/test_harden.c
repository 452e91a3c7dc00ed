/* test_harden.c - heap misuse tried as an attacker would, with the public API
 * alone. A use-after-free write of an address into freed objects must never
 * make an allocation return that address, whatever route brought the objects
 * to a free list: sheaves off (the cpu slab's list), a trim (uslab_release_free_memory),
 * the decay sweep, or a burst of frees the barn keeps packed in the objects
 * themselves. And the words uslab keeps in freed objects are never plain
 * addresses. Double frees are refused wherever the first free left the
 * object, and objects written whole after their free are kept out of use.
 * Arguments: "trim", "decay", "packed", "plain" (sheaves off: run with
 * USLAB_SHEAVES=0), "words", "double", "uaf", "meta" (uslab's own structures
 * apart from user blocks); none runs words, order, meta, trim, packed, uaf
 * and double. */
#include <stdint.h>
#include <time.h>

#include "../harness.h"   /* uslab.h only */

/* What an attacker would like malloc to return: the program's own data. */
static uint64_t target[64] __attribute__((aligned(64)));

/* Write the target's address into every word of a freed object. */
static void poison(void *p, size_t bytes)
{
	uint64_t *w = p;
	for (size_t i = 0; i < bytes / 8; i++)
		w[i] = (uint64_t)(uintptr_t)target;
}

/* Does any word of [p, p + bytes) equal one of the n addresses in a[]? */
/* uslab's layout is unpredictable (USLAB_RANDOM, on by default): a freed
 * block waits behind others before it is handed out again. */
static bool layout_random(void)
{
	const char *r = getenv("USLAB_RANDOM");
	return !(r && !strcmp(r, "0"));
}

static bool holds_address(const void *p, size_t bytes, void **a, size_t n)
{
	const uint64_t *w = p;
	for (size_t i = 0; i < bytes / 8; i++)
		for (size_t j = 0; j < n; j++)
			if (a[j] && w[i] == (uint64_t)(uintptr_t)a[j])
				return true;
	return false;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

/* Pointers of v[0..n) equal to another one (sorted in place). */
static size_t duplicates(void **v, size_t n)
{
	size_t d = 0;
	qsort(v, n, sizeof(*v), cmp_ptr);
	for (size_t i = 1; i < n; i++)
		d += v[i] && v[i] == v[i - 1];
	return d;
}

/* Allocations after the poisoning: none may be the target, and uslab says
 * what it found (at least one report of a corrupted free list). On the owned
 * front a freed object holds no free pointer or marker (its free state is a
 * bit outside it): the write changes no allocation, so nothing is reported,
 * and no object is handed out twice. */
static void take_back(size_t size, size_t n, const char *route)
{
	unsigned long corrupt0 = reports(USLAB_ERR_CORRUPT), all0 = reports_all();
	void **got = calloc(n, sizeof(void *));
	size_t hits = 0;
	CHECK(got != NULL);
	for (size_t i = 0; i < n; i++) {
		got[i] = kmalloc(size, GFP_KERNEL);
		CHECK(got[i] != NULL);
		if ((char *)got[i] >= (char *)target && (char *)got[i] < (char *)(target + 64))
			hits++;
	}
	if (hits || (!owned_front() && reports(USLAB_ERR_CORRUPT) == corrupt0))
		fprintf(stderr, "  %s: %zu allocations returned the target, %lu corruption reports\n", route, hits,
		        reports(USLAB_ERR_CORRUPT) - corrupt0);
	CHECK_EQ(hits, 0);
	if (owned_front())
		CHECK_EQ(reports_all(), all0);
	else
		CHECK(reports(USLAB_ERR_CORRUPT) > corrupt0);
	/* Nor did the write reach the allocator's own bookkeeping (the SLAB
	 * engine's free-index array, kept out of free objects when hardened). */
	CHECK_EQ(duplicates(got, n), 0);
	/* Nothing the attacker planted was followed into the program's data. */
	for (int i = 0; i < 64; i++)
		CHECK_EQ(target[i], 0);
	for (size_t i = 0; i < n; i++)
		kfree(got[i]);
	free(got);
}

/* n objects of size; every tenth kept live so their slabs stay; the others
 * freed. Returns the array (kept ones at i % 10 == 0). */
static void **alloc_free(size_t size, size_t n)
{
	void **v = calloc(n, sizeof(void *));
	CHECK(v != NULL);
	for (size_t i = 0; i < n; i++) {
		v[i] = kmalloc(size, GFP_KERNEL);
		CHECK(v[i] != NULL);
		memset(v[i], 0x11, size);
	}
	for (size_t i = 0; i < n; i++)
		if (i % 10)
			kfree(v[i]);
	return v;
}

static void free_kept(void **v, size_t n)
{
	for (size_t i = 0; i < n; i += 10)
		kfree(v[i]);
	free(v);
}

/* The attack on alloc_free's freed objects, then the allocations after it. */
static void poison_and_take_back(void **v, size_t size, size_t n, const char *route)
{
	for (size_t i = 0; i < n; i++)
		if (i % 10)
			poison(v[i], size);
	take_back(size, n, route);
	free_kept(v, n);
}

/* The freed objects reached their slabs' free lists by a trim. */
static void route_trim(void)
{
	enum { SIZE = 96, N = 400 };
	void **v = alloc_free(SIZE, N);
	uslab_release_free_memory();
	poison_and_take_back(v, SIZE, N, "trim");
}

/* ... by the decay sweep (no decay thread: the program's own slow paths
 * sweep; USLAB_DECAY_MS small). Freed objects are filled with a pattern after
 * the free, but for the two words a freed object keeps (its free marker at
 * word 0 and the flag beside it: an object without its marker is kept out of
 * use instead, uaf_in_sheaf below); the sweep's flush writes a free pointer
 * over the marker. On the owned front nothing is ever written into a freed
 * object: the sweeps leave every one as the program left it. */
static void route_decay(void)
{
	enum { SIZE = 160, N = 400, KEPT = 2 * sizeof(void *) };
	void **v = alloc_free(SIZE, N);
	uintptr_t *word0 = calloc(N, sizeof(uintptr_t));
	CHECK(word0 != NULL);
	for (size_t i = 0; i < N; i++)
		if (i % 10) {
			memset((char *)v[i] + KEPT, 0xa5, SIZE - KEPT);
			word0[i] = *(uintptr_t *)v[i];
		}
	bool flushed = false;
	for (int k = 0; k < (owned_front() ? 50 : 200) && !flushed; k++) {   /* owned: 1 s of sweeps */
		for (int j = 0; j < 2000; j++)
			kfree(kmalloc(24 + (size_t)j % 40, GFP_KERNEL));   /* another class: ticks */
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		for (size_t i = 1; i < N && !flushed; i++)
			if (i % 10 && *(uintptr_t *)v[i] != word0[i])
				flushed = true;
	}
	if (owned_front()) {
		CHECK(!flushed);
		size_t touched = 0;
		for (size_t i = 0; i < N; i++)
			touched += i % 10 && (*(uintptr_t *)v[i] != word0[i] ||
			                      !all_bytes((char *)v[i] + KEPT, 0xa5, SIZE - KEPT));
		CHECK_EQ(touched, 0);
	} else {
		CHECK(flushed);
	}
	free(word0);
	poison_and_take_back(v, SIZE, N, "decay");
}

/* ... directly (USLAB_SHEAVES=0: kfree pushes onto the cpu slab's list or the
 * slab's). */
static void route_plain(void)
{
	enum { SIZE = 128, N = 400 };
	poison_and_take_back(alloc_free(SIZE, N), SIZE, N, "sheaves off");
}

/* A burst of frees the barn has no arrays for: packed into the freed
 * objects. Every freed object poisoned, then all taken back. */
static void route_packed(void)
{
	enum { SIZE = 64, N = 20000 };
	void **v = calloc(N, sizeof(void *));
	CHECK(v != NULL);
	for (size_t i = 0; i < N; i++)
		v[i] = kmalloc(SIZE, GFP_KERNEL);
	for (size_t i = 0; i < N; i++)
		kfree(v[i]);
	for (size_t i = 0; i < N; i++)
		poison(v[i], SIZE);
	take_back(SIZE, N, "packed");
	free(v);
}

/* The words uslab writes into freed objects (free pointers, packed sheaves)
 * are not the addresses they stand for. On the owned front it writes none. */
static void encoded_words(void)
{
	enum { SIZE = 64, N = 256 };
	struct kmem_cache *s = kmem_cache_create("harden-words", SIZE, 0, SLAB_NO_MERGE, NULL);
	void *v[N];
	CHECK(s != NULL);
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(v[i] != NULL);
		memset(v[i], 0, SIZE);
	}
	for (int i = 0; i < N; i++)
		if (i % 16)
			kmem_cache_free(s, v[i]);
	kmem_cache_shrink(s);   /* sheaves to slabs: the objects are linked */
	size_t plain = 0, written = 0;
	for (int i = 0; i < N; i++) {
		if (!(i % 16))
			continue;
		plain += holds_address(v[i], SIZE, v, N);
		written += !all_bytes(v[i], 0, SIZE);
	}
	if (plain)
		fprintf(stderr, "  %zu of %d freed objects hold a plain object address\n", plain, N - N / 16);
	CHECK_EQ(plain, 0);
	if (cache_owned(s))
		CHECK_EQ(written, 0);     /* the free state is outside the objects */
	else
		CHECK(written > N / 2);   /* the free lists are there, written */
	/* The lists still work: no object is handed out twice, none reported. */
	void *w[N];
	size_t twice = 0;
	for (int i = 0; i < N - N / 16; i++) {
		w[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(w[i] != NULL);
		for (int j = 0; j < i; j++)
			twice += w[j] == w[i];
		for (int j = 0; j < N; j += 16)
			twice += v[j] == w[i];
	}
	CHECK_EQ(twice, 0);
	CHECK_EQ(reports_all(), 0);
	for (int i = 0; i < N - N / 16; i++)
		kmem_cache_free(s, w[i]);
	for (int i = 0; i < N; i += 16)
		kmem_cache_free(s, v[i]);
	kmem_cache_destroy(s);
}

/* The handler allocates from the cache being reported on, and from malloc:
 * reports made under a lock (the barn's, a slot's) must wait until it is
 * released, or this hangs (the alarm makes a hang a failure). */
static void allocating_handler(enum uslab_error kind, const char *line, void *arg)
{
	capture_fn(kind, line, arg);
	for (int i = 0; i < 64; i++) {
		void *p = kmalloc(64, GFP_KERNEL), *q = malloc(100);
		kfree(p);
		free(q);
	}
}

/* free(a); free(b); free(a): refused wherever a sits by then (a sheaf below
 * its top, a slab's free list after a trim, a packed sheaf after a burst),
 * and no later allocation returns a twice. */
static void double_free(const char *where)
{
	enum { SIZE = 48, N = 6000 };
	void **v = calloc(N, sizeof(void *));
	CHECK(v != NULL);
	for (size_t i = 0; i < N; i++)
		v[i] = kmalloc(SIZE, GFP_KERNEL);
	void *a = v[N / 2], *b = v[N / 2 + 1];
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	if (!strcmp(where, "sheaf")) {
		kfree(a);
		kfree(b);
	} else if (!strcmp(where, "slab")) {
		kfree(a);
		kfree(b);
		uslab_release_free_memory();   /* both on their slab's free list */
	} else {                              /* packed: a burst of frees */
		for (size_t i = 0; i < N; i++)
			kfree(v[i]);
	}
	unsigned long gone = reports(USLAB_ERR_NOT_OBJECT), corrupt = reports(USLAB_ERR_CORRUPT);
	kfree(a);
	/* Take everything back: a at most once. The second free is reported
	 * at once where the free's checks see it (kmem_cache_free, a cache
	 * without sheaves), else when a copy of a is taken out: a free of a
	 * two-word cache writes its marker without reading the object
	 * (types.h, usl_two_word). (Without sheaves a burst can empty a's slab
	 * and free it: then a is not in a slab at all, and said so.) */
	size_t n = strcmp(where, "packed") ? 2 : N, seen = 0;
	void **w = calloc(n + 64, sizeof(void *));
	for (size_t i = 0; i < n + 64; i++) {
		w[i] = kmalloc(SIZE, GFP_KERNEL);
		seen += w[i] == a;
	}
	unsigned long seen_df = reports(USLAB_ERR_DOUBLE_FREE) - before + reports(USLAB_ERR_NOT_OBJECT) - gone;
	if (layout_random()) {
		/* With delayed reuse the copy may still wait in a sheaf: it is
		 * refused where it leaves it, here for its slab (its marker gone:
		 * a corrupt object; a's own link may be reported so too). */
		uslab_release_free_memory();
		seen_df = reports(USLAB_ERR_DOUBLE_FREE) - before + reports(USLAB_ERR_NOT_OBJECT) - gone +
		          reports(USLAB_ERR_CORRUPT) - corrupt;
		if (seen_df < 1)
			fprintf(stderr, "  double free (%s): %lu reports\n", where, seen_df);
		CHECK(seen_df >= 1);
	} else {
		if (seen_df != 1)
			fprintf(stderr, "  double free (%s): %lu reports\n", where, seen_df);
		CHECK_EQ(seen_df, 1);
	}
	CHECK(seen <= 1);
	for (size_t i = 0; i < n + 64; i++)
		kfree(w[i]);
	if (strcmp(where, "packed"))
		for (size_t i = 0; i < N; i++)
			if (v[i] != a && v[i] != b)
				kfree(v[i]);
	free(w);
	free(v);
}

/* Freed objects overwritten whole while they wait in the per-CPU layer (a
 * write after free over every word, the free marker's too) are kept out of
 * use when they go back to their slabs: reported, and never handed out
 * again (their marker cannot tell a write from a second copy of an object
 * already handed out). Caches with sheaves; on the owned front, where a
 * freed object holds nothing of uslab's, the writes change nothing: no
 * report, and no object handed out twice. */
static void uaf_owned(struct kmem_cache *s)
{
	enum { SIZE = 72, N = 200 };
	static void *v[N], *w[2 * N], *all[3 * N];
	for (size_t i = 0; i < N; i++)
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long before = reports_all();
	for (size_t i = 0; i < N; i++) {
		kmem_cache_free(s, v[i]);
		memset(v[i], 0x3c, SIZE);
	}
	uslab_release_free_memory();
	for (size_t i = 0; i < 2 * N; i++)
		w[i] = kmem_cache_alloc(s, GFP_KERNEL);
	memcpy(all, w, sizeof(w));
	CHECK_EQ(duplicates(all, 2 * N), 0);
	CHECK_EQ(reports_all(), before);
	kmem_cache_free_bulk(s, 2 * N, w);
	CHECK_EQ(reports_all(), before);
	kmem_cache_destroy(s);
	CHECK_EQ(reports_all(), before);   /* nothing kept out of use */
}

static void uaf_in_sheaf(void)
{
	enum { SIZE = 72, N = 200 };
	struct kmem_cache *s = kmem_cache_create("harden-uaf", SIZE, 0, SLAB_NO_MERGE, NULL);
	CHECK(s != NULL);
	if (s && cache_owned(s)) {
		uaf_owned(s);
		return;
	}
	if (!s || !uslab_sheaf_capacity(s)) {
		if (s)
			kmem_cache_destroy(s);
		return;
	}
	static void *v[N], *w[2 * N];
	for (size_t i = 0; i < N; i++)
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long before = reports(USLAB_ERR_CORRUPT) + reports(USLAB_ERR_DOUBLE_FREE);
	for (size_t i = 0; i < N; i++) {
		kmem_cache_free(s, v[i]);
		memset(v[i], 0x3c, SIZE);
	}
	uslab_release_free_memory();             /* the barn's sheaves back to the slabs */
	size_t again = 0;
	for (size_t i = 0; i < 2 * N; i++) {     /* and what the CPUs' sheaves hold, popped */
		w[i] = kmem_cache_alloc(s, GFP_KERNEL);
		for (size_t j = 0; j < N; j++)
			again += w[i] == v[j];
	}
	/* Each reported where it left its sheaf (a packed sheaf whose words
	 * were overwritten: once, for the whole sheaf). */
	unsigned long seen = reports(USLAB_ERR_CORRUPT) + reports(USLAB_ERR_DOUBLE_FREE) - before;
	if (again || !seen)
		fprintf(stderr, "  overwritten in sheaves: %zu handed out again, %lu reports\n", again, seen);
	CHECK_EQ(again, 0);
	CHECK(seen >= 1);
	kmem_cache_free_bulk(s, 2 * N, w);
	kmem_cache_destroy(s);       /* (reports the objects kept out of use) */
}

/* The same through kmem_cache_free and kmem_cache_free_bulk. */
static void double_free_cache(void)
{
	/* (The kernel's order: the copies below come out where the checks count
	 * them; with delayed reuse they wait, and are refused all the same.) */
	struct kmem_cache *s = kmem_cache_create("harden-df", 200, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	void *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	void *c[8];
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 8, c) == 8);
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, a);
	/* At once where the free reads the object (a one-word cache, sheaves
	 * off), else when a copy of a is taken out (below). */
	unsigned long single = reports(USLAB_ERR_DOUBLE_FREE) - before;
	CHECK(single <= 1);
	kmem_cache_free_bulk(s, 8, c);
	/* All free already: a bulk free of more than a few reads them (at
	 * once); three go one by one (as kmem_cache_free). */
	void *again[4] = { c[5], c[2], c[7], c[0] };
	kmem_cache_free_bulk(s, 4, again);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + single + 4);
	void *again3[3] = { c[1], c[3], c[4] };
	kmem_cache_free_bulk(s, 3, again3);
	/* Everything back: each copy a second free left is refused as it
	 * leaves its sheaf, and nothing is handed out twice. */
	void *d[16];
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 16, d) == 16);
	size_t dup = 0;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < i; j++)
			dup += d[i] == d[j];
	CHECK_EQ(dup, 0);
	CHECK_EQ(reports(USLAB_ERR_DOUBLE_FREE), before + 8);
	kmem_cache_free_bulk(s, 16, d);
	kmem_cache_destroy(s);
}

/* Small bulk calls (up to four objects, eight without sheaves) check as
 * single calls do: a block written after its free, which a bulk allocation of
 * two pops, is reported and not handed out (another comes in its place); a
 * block freed twice in one small bulk free is reported and handed out once. */
static void small_bulk(void)
{
	struct kmem_cache *s = kmem_cache_create("harden-small-bulk", 64, 0, SLAB_NO_MERGE, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	void *a[2], *b[2], *c[3];
	if (!uslab_sheaf_capacity(s))      /* without sheaves: the double free below */
		goto twice;
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 2, a) == 2);
	kmem_cache_free_bulk(s, 2, a);               /* a[1], then a[0], on top of this CPU's sheaf */
	memset(a[0], 0x5a, 64);                      /* written after its free: its marker too */
	unsigned long before = reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_CORRUPT);
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 2, b) == 2);
	unsigned long seen = reports(USLAB_ERR_DOUBLE_FREE) + reports(USLAB_ERR_CORRUPT) - before;
	/* (In locked mode, or after a migration, the pops may come from
	 * elsewhere; then nothing is seen now, and a[0] is refused later.) */
	CHECK(b[0] != a[0] && b[1] != a[0]);
	CHECK(b[0] && b[1] && b[0] != b[1]);
	CHECK(seen <= 1);
	kmem_cache_free_bulk(s, 2, b);
twice:;
	void *d[3] = { 0 };
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 3, c) == 3);
	void *twice[3] = { c[0], c[1], c[1] };
	before = reports(USLAB_ERR_DOUBLE_FREE);
	kmem_cache_free_bulk(s, 3, twice);           /* c[1] twice: refused where it is seen */
	kmem_cache_free(s, c[2]);
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 3, d) == 3);
	CHECK(d[0] != d[1] && d[1] != d[2] && d[0] != d[2]);
	CHECK(reports(USLAB_ERR_DOUBLE_FREE) - before >= 1);
	kmem_cache_free_bulk(s, 3, d);
	/* A pointer uslab never handed out, and one inside an object, among a
	 * few good ones: each reported once and not freed; the good ones are. */
	char stack[64];
	void *e[2];
	CHECK(kmem_cache_alloc_bulk(s, GFP_KERNEL, 2, e) == 2);
	void *bad[3] = { e[0], stack, (char *)e[1] + 8 };
	unsigned long all = reports_all(), foreign = reports(USLAB_ERR_FOREIGN), inner = reports(USLAB_ERR_NOT_OBJECT);
	kmem_cache_free_bulk(s, 3, bad);
	CHECK_EQ(reports(USLAB_ERR_FOREIGN) - foreign, 1);
	CHECK_EQ(reports(USLAB_ERR_NOT_OBJECT) - inner, 1);
	CHECK_EQ(reports_all() - all, 2);
	kmem_cache_free(s, e[1]);                    /* e[1] was not freed: this is its one free */
	CHECK_EQ(reports_all() - all, 2);
	kmem_cache_destroy(s);                       /* (reports the blocks kept out of use above) */
}

/* With an unpredictable layout (the default) a new cache's objects do not
 * come in address order: consecutive allocations are rarely neighbours
 * (with USLAB_RANDOM=0 nearly all are). */
static void carving_order(void)
{
	enum { SIZE = 64, N = 256 };
	struct kmem_cache *s = kmem_cache_create("harden-order", SIZE, 0, SLAB_NO_MERGE, NULL);
	void *v[N];
	unsigned int next_to = 0;
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(v[i] != NULL);
		if (i) {
			long d = (char *)v[i] - (char *)v[i - 1];
			next_to += d == SIZE || d == -SIZE;
		}
	}
	if (layout_random() && strcmp(uslab_front(), "owned"))   /* (the owned front: no random order yet) */
		CHECK(next_to < N / 8);
	else
		CHECK(next_to > N / 2);
	for (int i = 0; i < N; i++)
		kmem_cache_free(s, v[i]);
	kmem_cache_destroy(s);
}

/* uslab's own structures (a cache structure, a prefilled sheaf, an oversize
 * one) apart from user blocks: in /proc/self/maps, the accessible run of
 * mappings around each holds no user block, so no linear overflow out of a
 * user block reaches them without faulting first. And kfree of one is
 * refused. */
struct vma {
	uintptr_t lo, hi;
	bool rw;
};

static size_t read_maps(struct vma *v, size_t max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	size_t n = 0;
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		v[n].lo = lo;
		v[n].hi = hi;
		v[n].rw = perms[0] == 'r' || perms[1] == 'w';
		n++;
	}
	fclose(f);
	return n;
}

/* The accessible, contiguous run of mappings holding p: [*lo, *hi). */
static bool run_around(const struct vma *v, size_t n, const void *p, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t a = (uintptr_t)p;
	size_t i = 0;
	while (i < n && !(v[i].lo <= a && a < v[i].hi))
		i++;
	if (i == n || !v[i].rw)
		return false;
	size_t j = i;
	while (i > 0 && v[i - 1].hi == v[i].lo && v[i - 1].rw)
		i--;
	while (j + 1 < n && v[j + 1].lo == v[j].hi && v[j + 1].rw)
		j++;
	*lo = v[i].lo;
	*hi = v[j].hi;
	return true;
}

static void metadata_apart(void)
{
	enum { NU = 3000 };
	static void *user[NU];
	static struct vma maps[8192];
	struct kmem_cache *s = kmem_cache_create("harden-meta", 200, &(struct kmem_cache_args){ .sheaf_capacity = 16 }, 0);
	CHECK(s != NULL);
	size_t nu = 0;
	for (; nu < 2000; nu++)
		user[nu] = kmem_cache_alloc(s, GFP_KERNEL);
	for (size_t size = 8; nu < NU; nu++, size = size * 5 / 4 + 8)
		user[nu] = kmalloc(size % (2u << 20), GFP_KERNEL);
	struct slab_sheaf *sh = kmem_cache_prefill_sheaf(s, GFP_KERNEL, 10);
	struct slab_sheaf *big = kmem_cache_prefill_sheaf(s, GFP_KERNEL, 300);   /* oversize */
	CHECK(sh != NULL && big != NULL);
	size_t nm = read_maps(maps, sizeof(maps) / sizeof(maps[0]));
	CHECK(nm > 0);
	const void *own[] = { s, sh, big };
	for (int k = 0; k < 3; k++) {
		uintptr_t lo, hi;
		bool found = run_around(maps, nm, own[k], &lo, &hi);
		CHECK(found);
		size_t beside = 0;
		for (size_t i = 0; found && i < nu; i++)
			beside += user[i] && (uintptr_t)user[i] >= lo && (uintptr_t)user[i] < hi;
		if (beside)
			fprintf(stderr, "structure %d at %p: %zu user blocks in its mapping run %#lx-%#lx\n", k, own[k],
			        beside, (unsigned long)lo, (unsigned long)hi);
		CHECK(beside == 0);
	}
	/* A pointer to a structure is not a block to free. */
	unsigned long before = uslab_error_count();
	kfree(s);
	kfree(sh);
	CHECK(uslab_error_count() == before + 2);
	void *o = kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, sh);
	CHECK(o != NULL);
	kmem_cache_free(s, o);
	kmem_cache_return_sheaf(s, GFP_KERNEL, sh);
	kmem_cache_return_sheaf(s, GFP_KERNEL, big);
	for (size_t i = 0; i < 2000; i++)
		kmem_cache_free(s, user[i]);
	for (size_t i = 2000; i < nu; i++)
		kfree(user[i]);
	kmem_cache_destroy(s);
}

int main(int argc, char **argv)
{
	capture_reports();
	uslab_set_report_handler(allocating_handler, NULL);
	alarm(120);
	const char *what = argc > 1 ? argv[1] : "default";
	bool all = !strcmp(what, "default");
	if (all || !strcmp(what, "words"))
		encoded_words();
	if (all || !strcmp(what, "order"))
		carving_order();
	if (all || !strcmp(what, "meta"))
		metadata_apart();
	if (all || !strcmp(what, "trim"))
		route_trim();
	if (all || !strcmp(what, "packed"))
		route_packed();
	if (all || !strcmp(what, "uaf"))
		uaf_in_sheaf();
	if (all || !strcmp(what, "double")) {
		double_free("sheaf");
		double_free("slab");
		double_free("packed");
		double_free_cache();
		small_bulk();
	}
	if (!strcmp(what, "decay"))
		route_decay();
	if (!strcmp(what, "plain"))
		route_plain();
	return test_summary();
}
