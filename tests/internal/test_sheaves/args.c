/* args.c - test_sheaves: creation with kmem_cache_args and USLAB_SHEAVES,
 * and the prefilled-sheaf API (it cannot fail while it has objects). */
#include "sheaves.h"

static void *drained[200000];

static void test_prefill(struct kmem_cache *s)
{
	unsigned cap = uslab_sheaf_capacity(s);
	unsigned sizes[] = { 1, 5, cap ? cap : 7, cap + 30 };   /* the last is oversize */

	for (unsigned k = 0; k < 4; k++) {
		unsigned want = sizes[k];
		struct slab_sheaf *sh = kmem_cache_prefill_sheaf(s, GFP_KERNEL, want);
		CHECK(sh != NULL);
		if (!sh)
			continue;
		unsigned have = kmem_cache_sheaf_size(sh);
		CHECK(have >= want);
		/* From here no page may be allocated: the sheaf must suffice. */
		usl_pages_fail_after(0);
		void *o[512];
		unsigned got = 0;
		for (unsigned i = 0; i < have && i < 512; i++) {
			o[got] = kmem_cache_alloc_from_sheaf(s, GFP_KERNEL | (i & 1 ? __GFP_ZERO : 0), sh);
			if (!o[got])
				break;
			if (i & 1) {
				int nonzero = 0;
				for (unsigned b = 0; b < s->object_size; b++)
					nonzero += ((unsigned char *)o[got])[b] != 0;
				CHECK_EQ(nonzero, 0);
			}
			memset(o[got], 0x5a, s->object_size);
			got++;
		}
		CHECK_EQ(got, have);
		CHECK_EQ(kmem_cache_sheaf_size(sh), 0);
		/* Empty: a clear report and NULL, not a fallback allocation. */
		unsigned long before = reports(USLAB_ERR_BAD_ARG);
		CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, sh) == NULL);
		CHECK_EQ(reports(USLAB_ERR_BAD_ARG), before + 1);
		/* A refill that cannot get memory fails and leaves the sheaf as it
		 * was: first take every object the cache still holds. */
		size_t nd = 0;
		void *x;
		while (nd < 200000 && (x = kmem_cache_alloc(s, GFP_KERNEL | __GFP_NOWARN)))
			drained[nd++] = x;
		CHECK(nd < 200000);
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL | __GFP_NOWARN, &sh, want), -ENOMEM);
		CHECK_EQ(kmem_cache_sheaf_size(sh), 0);
		usl_pages_fail_after(-1);
		kmem_cache_free_bulk(s, nd, drained);
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &sh, want), 0);
		CHECK(kmem_cache_sheaf_size(sh) >= want);
		/* Growing beyond the capacity swaps in a bigger sheaf. */
		CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &sh, cap + 50), 0);
		CHECK(kmem_cache_sheaf_size(sh) >= cap + 50);
		qsort(o, got, sizeof(void *), cmp_ptr);
		int dups = 0;
		for (unsigned i = 1; i < got; i++)
			dups += o[i] == o[i - 1];
		CHECK_EQ(dups, 0);
		kmem_cache_return_sheaf(s, GFP_KERNEL, sh);
		kmem_cache_free_bulk(s, got, o);
		CHECK_EQ(in_use(s), 0);
	}
	/* Bad input. */
	struct kmem_cache *other = kmem_cache_create("prefill-other", 64, 0, 0, NULL);
	struct slab_sheaf *sh = kmem_cache_prefill_sheaf(other, GFP_KERNEL, 3);
	unsigned long wc = reports(USLAB_ERR_WRONG_CACHE), ba = reports(USLAB_ERR_BAD_ARG);
	CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, sh) == NULL);      /* other's sheaf */
	kmem_cache_return_sheaf(s, GFP_KERNEL, sh);                           /* refused */
	struct slab_sheaf *theirs = sh;
	CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, &theirs, 5), -EINVAL);  /* refused */
	CHECK(theirs == sh);
	CHECK_EQ(reports(USLAB_ERR_WRONG_CACHE), wc + 3);
	CHECK(kmem_cache_alloc_from_sheaf(s, GFP_KERNEL, NULL) == NULL);
	CHECK(kmem_cache_prefill_sheaf(NULL, GFP_KERNEL, 3) == NULL);
	CHECK_EQ(kmem_cache_refill_sheaf(s, GFP_KERNEL, NULL, 3), -EINVAL);
	CHECK(kmem_cache_prefill_sheaf(s, GFP_KERNEL, 100000000) == NULL);
	kmem_cache_return_sheaf(s, GFP_KERNEL, NULL);
	kmem_cache_return_sheaf(NULL, GFP_KERNEL, sh);
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 6);
	CHECK_EQ(kmem_cache_sheaf_size(NULL), 0);
	CHECK_EQ(uslab_sheaf_capacity(NULL), 0);
	CHECK(kmem_cache_sheaf_size(sh) >= 3);
	kmem_cache_return_sheaf(other, GFP_KERNEL, sh);
	CHECK_EQ(in_use(other), 0);
	kmem_cache_destroy(other);
}

/* ---- creation with kmem_cache_args, USLAB_SHEAVES ---- */

static int ctor_calls;
static void ctor(void *p)
{
	*(uint64_t *)p = 0xC7;
	__atomic_fetch_add(&ctor_calls, 1, __ATOMIC_RELAXED);
}

void test_args(void)
{
	struct kmem_cache *plain = kmem_cache_create("args-plain", 100, 0, 0, NULL);
	CHECK_EQ(uslab_sheaf_capacity(plain) != 0, sheaves_default);
	if (sheaves_default)
		/* < 256 bytes: 60, fills 512; with delayed reuse 124, fills 1024 */
		CHECK_EQ(uslab_sheaf_capacity(plain), usl_opt.random && usl_opt.allocator != USL_ENGINE_SLAB ? 124 : 60);
	kmem_cache_destroy(plain);

	struct kmem_cache_args a = { .align = 64, .ctor = ctor, .sheaf_capacity = 30 };
	struct kmem_cache *s = kmem_cache_create("args-ctor", 200, &a, 0);
	CHECK(s != NULL);
	CHECK(uslab_sheaf_capacity(s) >= 30);           /* configured: whatever USLAB_SHEAVES says */
	void *o = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(((uintptr_t)o & 63) == 0);
	CHECK_EQ(*(uint64_t *)o, 0xC7);
	CHECK(ctor_calls > 0);
	kmem_cache_free(s, o);
	test_prefill(s);
	kmem_cache_destroy(s);

	/* freeptr_offset: the free pointer where the creator says. */
	struct kmem_cache_args f = { .freeptr_offset = 8, .use_freeptr_offset = true };
	s = kmem_cache_create("args-freeptr", 64, &f, 0);
	CHECK(s != NULL && s->offset == 8 && s->size == 64);
	void *objs[100];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, objs), 100);
	kmem_cache_free_bulk(s, 100, objs);
	CHECK_EQ(in_use(s), 0);
	/* ... and the only word uslab writes in a free object: the others keep
	 * what the program left, in a sheaf and on its slab's free list. */
	CHECK(!usl_two_word(s));
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 100, objs), 100);
	void *k = objs[50];                            /* its neighbours stay live: so does its slab */
	memset(k, 0xab, 64);
	kmem_cache_free(s, k);
	uslab_release_free_memory();                   /* onto its slab's list */
	int kept = 0;
	for (int i = 0; i < 64; i++)
		kept += (i >= 8 && i < 16) || ((unsigned char *)k)[i] == 0xab;
	CHECK_EQ(kept, 64);
	objs[50] = NULL;
	kmem_cache_free_bulk(s, 100, objs);
	kmem_cache_destroy(s);

	/* NULL args: defaults. Bad arguments: a clear report, no cache. */
	s = kmem_cache_create("args-null", 32, NULL, 0);
	CHECK(s != NULL);
	kmem_cache_destroy(s);
	unsigned long ba = reports(USLAB_ERR_BAD_ARG);
	struct kmem_cache_args bad1 = { .freeptr_offset = 3, .use_freeptr_offset = true };
	CHECK(kmem_cache_create("bad-freeptr", 64, &bad1, 0) == NULL);
	struct kmem_cache_args bad2 = { .useroffset = 10, .usersize = 60 };
	CHECK(kmem_cache_create("bad-user", 64, &bad2, 0) == NULL);
	struct kmem_cache_args bad3 = { .sheaf_capacity = 1u << 30 };
	CHECK(kmem_cache_create("bad-sheaf", 64, &bad3, 0) == NULL);
	struct kmem_cache_args ok = { .sheaf_capacity = 8 };
	CHECK(kmem_cache_create(NULL, 64, &ok, 0) == NULL);                  /* no name */
	CHECK(kmem_cache_create("bad-size", 0, &ok, 0) == NULL);             /* size 0 */
	CHECK(kmem_cache_create("bad-flags", 64, &ok, 0x4U) == NULL);        /* unknown flag */
	CHECK_EQ(reports(USLAB_ERR_BAD_ARG), ba + 6);
	/* Debug caches never get sheaves (as in the kernel). */
	struct kmem_cache_args dbg = { .sheaf_capacity = 30 };
	s = kmem_cache_create("args-debug", 64, &dbg, SLAB_POISON);
	CHECK(s != NULL && uslab_sheaf_capacity(s) == 0);
	test_prefill(s);                                  /* works without sheaves too */
	/* ... even for 0 objects: a one-off sheaf, never parked in a slot. */
	for (int k = 0; k < 3; k++) {
		struct slab_sheaf *z = kmem_cache_prefill_sheaf(s, GFP_KERNEL, 0);
		CHECK(z != NULL);
		CHECK_EQ(kmem_cache_sheaf_size(z), 0);
		kmem_cache_return_sheaf(s, GFP_KERNEL, z);
	}
	int parked = 0;
	for (unsigned i = 0; i < usl_nr_cpus; i++)
		parked += s->cpu_slab[i].main != &usl_empty_sheaf || s->cpu_slab[i].spare != NULL;
	CHECK_EQ(parked, 0);
	kmem_cache_destroy(s);
}
