/* test_debug.c - debug caches: the kernel's slub_kunit.c scenarios with its
 * expected counts (a count is uslab_error_count()'s growth: one per BUG report
 * and one per FIX line, as the kernel's KUnit tests count slab_errors), and
 * misuse through the kmem_cache API. Adapted where user space differs:
 * the kmalloc scenarios use the kmalloc classes named by USLAB_DEBUG (set by
 * CTest: "ZU,kmalloc-32,kmalloc-64") instead of a cache created with
 * SLAB_KMALLOC; the leak scenario needs a debug cache (the per-object
 * listing), where the kernel lists any cache's objects; KASAN and RCU
 * scenarios have no counterpart. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>

#include "../harness.h"
#include "platform/platform.h"
#include "testing.h"
#include "types.h"

static unsigned long errs(void)
{
	return uslab_error_count();
}

static struct kmem_cache *make(const char *name, unsigned int size, slab_flags_t flags)
{
	struct kmem_cache *s = kmem_cache_create(name, size, 0, flags | SLAB_NO_MERGE, NULL);
	CHECK(s != NULL);
	return s;
}

/* 1. A live object's right red zone clobbered: validate finds it (2). */
static void clobber_zone(void)
{
	struct kmem_cache *s = make("TestSlub_RZ_alloc", 64, SLAB_RED_ZONE);
	uint8_t *p = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long e0 = errs();
	p[64] = 0x12;
	CHECK_EQ(kmem_cache_validate(s), 2);
	CHECK_EQ(errs() - e0, 2);
	CHECK(strstr(last_report, "FIX TestSlub_RZ_alloc: Restoring Right Redzone") != NULL);
	CHECK_EQ(p[64], 0xcc);                    /* restored */
	CHECK_EQ(kmem_cache_validate(s), 0);
	kmem_cache_free(s, p);
	kmem_cache_destroy(s);
}

/* 2. A free object's free pointer corrupted (3), put back (2), then clean. */
static void next_pointer(void)
{
	struct kmem_cache *s = make("TestSlub_next_ptr_free", 64, SLAB_POISON);
	uint8_t *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);
	uint8_t *at = p + s->offset;
	uintptr_t saved;
	memcpy(&saved, at, sizeof(saved));
	at[0] = (uint8_t)~at[0];
	CHECK_EQ(kmem_cache_validate(s), 3);       /* Freechain corrupt, Wrong object count, fix */
	memcpy(at, &saved, sizeof(saved));
	CHECK_EQ(kmem_cache_validate(s), 2);       /* the count is wrong the other way, fix */
	CHECK_EQ(kmem_cache_validate(s), 0);
	kmem_cache_destroy(s);
}

/* 3, 4. A free object's first word, its 50th byte (2 each). */
static void poison_clobber(const char *name, size_t at, uint8_t v)
{
	struct kmem_cache *s = make(name, 64, SLAB_POISON);
	uint8_t *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);
	p[at] = v;
	CHECK_EQ(kmem_cache_validate(s), 2);
	CHECK(p[at] == 0x6b);
	CHECK_EQ(kmem_cache_validate(s), 0);
	kmem_cache_destroy(s);
}

/* 5. A free object's red zone (2). */
static void clobber_redzone_free(void)
{
	struct kmem_cache *s = make("TestSlub_RZ_free", 64, SLAB_RED_ZONE);
	uint8_t *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);
	p[64] = 0xab;
	CHECK_EQ(kmem_cache_validate(s), 2);
	CHECK_EQ(p[64], 0xbb);
	kmem_cache_destroy(s);
}

/* 6. kmalloc's red zone past the requested size (2). */
static void kmalloc_redzone(void)
{
	struct kmem_cache *s = usl_kmalloc_cache_for(18);
	CHECK(s && (s->flags & SLAB_RED_ZONE) && (s->flags & SLAB_STORE_USER));
	if (!s)
		return;
	uint8_t *p = kmalloc(18, GFP_KERNEL);
	CHECK_EQ(ksize(p), 18);
	p[18] = 0xab;
	p[19] = 0xab;
	CHECK_EQ(kmem_cache_validate(s), 2);
	CHECK(strstr(last_report, "Restoring kmalloc Redzone") != NULL);
	kfree(p);
}

/* 9. An object left at destroy: the cache's report and the debug listing. */
static void leak_destroy(void)
{
	struct kmem_cache *s = make("TestSlub_leak_destroy", 64, SLAB_RED_ZONE | SLAB_STORE_USER);
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long e0 = errs();
	kmem_cache_destroy(s);
	CHECK_EQ(errs() - e0, 2);
	CHECK(strstr(last_report, "Objects remaining") != NULL);
	kmem_cache_free(s, p);                     /* the cache stayed alive */
	kmem_cache_destroy(s);
	CHECK_EQ(errs() - e0, 2);
}

/* 10. krealloc in place keeps the kmalloc red zone after the new size. */
static void krealloc_redzone_zeroing(void)
{
	struct kmem_cache *s = usl_kmalloc_cache_for(48);
	CHECK(s && (s->flags & SLAB_RED_ZONE));
	uint8_t *p = kmalloc(48, GFP_KERNEL);
	memset(p, 0xff, 48);
	uint8_t *q = krealloc(p, 40, GFP_KERNEL | __GFP_ZERO);
	CHECK(q == p);
	CHECK(all_bytes(p + 40, 0xcc, 24));
	q = krealloc(p, 56, GFP_KERNEL | __GFP_ZERO);
	CHECK(q == p);
	CHECK(all_bytes(p + 40, 0, 16));
	CHECK(all_bytes(p + 56, 0xcc, 8));
	CHECK_EQ(kmem_cache_validate(s), 0);
	memset(p, 0xff, 56);
	q = krealloc(p, 112, GFP_KERNEL | __GFP_ZERO);
	CHECK(q != p && q);
	CHECK(all_bytes(q, 0xff, 56));
	CHECK(all_bytes(q + 56, 0, 56));
	kfree(q);
	CHECK_EQ(kmem_cache_validate(s), 0);
}

/* Misuse through the API: each reported, the program goes on, nothing lost. */
static void misuse(void)
{
	struct kmem_cache *s = make("debug-misuse", 100, SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON |
	                                                  SLAB_STORE_USER);
	uint8_t *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	CHECK(a && b);

	/* Double free, not at a list head: refused (BUG, FIX "not freed"). */
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	unsigned long e0 = errs();
	kmem_cache_free(s, a);
	CHECK_EQ(errs() - e0, 2);
	CHECK(reports_by_kind[USLAB_ERR_SLAB_BUG] > 0);

	/* A one-byte overflow of a live object: found at its free, which is
	 * refused (BUG, FIX restore, FIX not freed). */
	a = kmem_cache_alloc(s, GFP_KERNEL);
	a[100] = 0;
	e0 = errs();
	kmem_cache_free(s, a);
	CHECK_EQ(errs() - e0, 3);
	CHECK_EQ(kmem_cache_validate(s), 0);

	/* An underflow. */
	b = kmem_cache_alloc(s, GFP_KERNEL);
	b[-1] = 0x41;
	e0 = errs();
	kmem_cache_free(s, b);
	CHECK(errs() - e0 >= 2);
	CHECK(strstr(last_report, "not freed") != NULL);

	/* A write after free: found by validation (and by the next allocation
	 * that would hand it out). */
	uint8_t *c = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, c);
	c[10] = 0x42;
	CHECK_EQ(kmem_cache_validate(s), 2);

	/* An interior pointer and another cache's object. */
	uint8_t *d = kmem_cache_alloc(s, GFP_KERNEL);
	e0 = errs();
	kmem_cache_free(s, d + 8);
	CHECK_EQ(errs() - e0, 1);
	struct kmem_cache *t = make("debug-other", 100, SLAB_RED_ZONE);
	uint8_t *o = kmem_cache_alloc(t, GFP_KERNEL);
	e0 = errs();
	kmem_cache_free(s, o);
	CHECK_EQ(errs() - e0, 1);
	kmem_cache_free(t, o);
	kmem_cache_free(s, d);
	CHECK_EQ(kmem_cache_validate(s), 0);
	CHECK_EQ(kmem_cache_validate(t), 0);
	kmem_cache_destroy(t);

	/* The owner track names where it was allocated. */
	uint8_t *x = kmem_cache_alloc(s, GFP_KERNEL);
	x[100] = 1;
	kmem_cache_validate(s);
	x[100] = 0xcc;
	kmem_cache_free(s, x);

	/* Bulk calls take the checked path one object at a time. */
	void *v[16];
	CHECK_EQ(kmem_cache_alloc_bulk(s, GFP_KERNEL, 16, v), 16);
	kmem_cache_free_bulk(s, 16, v);
	CHECK_EQ(kmem_cache_validate(s), 0);
	kmem_cache_destroy(s);
}

/* Many objects, several slabs, constructors: validation stays clean, and
 * a non-debug cache has nothing to validate. */
static int ctor_calls;
static void ctor(void *p)
{
	ctor_calls++;
	memset(p, 0x33, 40);
}

static void many(void)
{
	struct kmem_cache *s = kmem_cache_create("debug-ctor", 40, 0, SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER |
	                                                                SLAB_CONSISTENCY_CHECKS, ctor);
	enum { N = 3000 };
	static void *v[N];
	for (int i = 0; i < N; i++) {
		v[i] = kmem_cache_alloc(s, GFP_KERNEL);
		CHECK(v[i] && all_bytes(v[i], 0x33, 40));
		if (!v[i])
			return;
	}
	CHECK(ctor_calls >= N);
	CHECK_EQ(kmem_cache_validate(s), 0);
	for (int i = 0; i < N; i += 2)
		kmem_cache_free(s, v[i]);
	CHECK_EQ(kmem_cache_validate(s), 0);
	for (int i = 1; i < N; i += 2)
		kmem_cache_free(s, v[i]);
	CHECK_EQ(kmem_cache_validate(s), 0);
	CHECK_EQ(kmem_cache_shrink(s), 0);
	kmem_cache_destroy(s);

	struct kmem_cache *plain = kmem_cache_create("debug-none", 40, 0, SLAB_NO_MERGE, NULL);
	CHECK_EQ(kmem_cache_validate(plain), -1);
	kmem_cache_destroy(plain);
	/* Bad input: no cache, a destroyed one. */
	unsigned long ba = reports_by_kind[USLAB_ERR_BAD_ARG];
	CHECK_EQ(kmem_cache_validate(NULL), -1);
	CHECK_EQ(reports_by_kind[USLAB_ERR_BAD_ARG], ba + 1);
	unsigned long e0 = errs();
	CHECK_EQ(kmem_cache_validate(s), -1);          /* s was destroyed above */
	CHECK(errs() == e0 + 1);
}

/* T: every allocation and free traced, as notices (not counted); each
 * notice whole, its call stack too. */
static char trace_lines[4][4096];
static int ntrace;
static void trace_handler(enum uslab_error kind, const char *line, void *arg)
{
	(void)arg;
	if (kind == USLAB_ERR_NONE && !strncmp(line, "TRACE ", 6) && ntrace < 4)
		snprintf(trace_lines[ntrace++], sizeof(trace_lines[0]), "%s", line);
}

static void trace_flag(void)
{
	struct kmem_cache *s = make("debug-trace", 48, SLAB_TRACE);
	uslab_set_report_handler(trace_handler, NULL);
	unsigned long e0 = errs();
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	kmem_cache_free(s, p);
	uslab_set_report_handler(NULL, NULL);
	capture_reports();
	CHECK_EQ(errs() - e0, 0);
	CHECK_EQ(ntrace, 2);
	CHECK(strncmp(trace_lines[0], "TRACE debug-trace alloc 0x", 26) == 0 && strstr(trace_lines[0], " inuse=1 "));
	CHECK(strncmp(trace_lines[1], "TRACE debug-trace free 0x", 25) == 0);
	kmem_cache_destroy(s);
}

/* The owner summaries of a cache with U: two full slabs allocated at one
 * call site, five of the first slab's objects freed at another and
 * allocated again at a third (a slab's free list hands them back: its only
 * partial slab). alloc_calls and free_calls give one line per call site,
 * alloc_traces one per stack with its frames; the counts are known. The
 * sites are exported (the test links with -rdynamic) so that they are named
 * with or without libdw. */
static struct kmem_cache *owners;
static void *owned[4096];

/* An owner track names the allocator's caller through the tail calls of its
 * entry points; ThreadSanitizer's instrumentation keeps calls from being tail
 * calls, so there the track names a function of uslab's and the call site is
 * further down the stack. Such a build checks the counts and that the site
 * is in the stack. */
#if defined(__SANITIZE_THREAD__)
#define TAIL_CALLS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TAIL_CALLS 0
#endif
#endif
#ifndef TAIL_CALLS
#define TAIL_CALLS 1
#endif

/* The sum of the counts that open a summary's lines. */
static long summary_total(const char *text)
{
	long sum = 0;
	for (const char *p = text; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (p[0] == ' ' && strspn(p, " ") < 7 && p[strspn(p, " ")] >= '0' && p[strspn(p, " ")] <= '9')
			sum += strtol(p, NULL, 10);
	return sum;
}
__attribute__((noinline)) void owners_site_a(int i)
{
	owned[i] = kmem_cache_alloc(owners, GFP_KERNEL);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void owners_site_c(int i)
{
	owned[i] = kmem_cache_alloc(owners, GFP_KERNEL);
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void owners_freer(int i)
{
	kmem_cache_free(owners, owned[i]);
	__asm__ volatile("" ::: "memory");
}

/* The line of text that names fn, and its count (the first field). */
static long summary_count(const char *text, const char *fn, const char **line)
{
	char key[96];
	snprintf(key, sizeof(key), " %s+0x", fn);
	const char *hit = strstr(text, key);
	if (!hit)
		return -1;
	const char *start = hit;
	while (start > text && start[-1] != '\n')
		start--;
	if (line)
		*line = start;
	return strtol(start, NULL, 10);
}

static int lines_starting_with_count(const char *text)
{
	int n = 0;
	for (const char *p = text; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (p[0] == ' ' && strspn(p, " ") < 7 && p[strspn(p, " ")] >= '0' && p[strspn(p, " ")] <= '9')
			n++;
	return n;
}

/* The summaries' lines against the known call sites and counts (a build
 * with tail calls). */
static void owner_sites(char *buf, size_t size, int all)
{
	const char *line = NULL;
	CHECK(uslab_cache_attr(owners, "alloc_calls", buf, size) > 0);
	CHECK_EQ(lines_starting_with_count(buf), 2);
	CHECK_EQ(summary_count(buf, "owners_site_a", &line), all - 5);
	char pid[32];
	snprintf(pid, sizeof(pid), " pid=%d", (int)getpid());
	CHECK(line && strstr(line, " age=") && strstr(line, pid));
	CHECK(line && (usl_nr_cpus > 1) == (strstr(line, " cpus=") != NULL));
	CHECK_EQ(summary_count(buf, "owners_site_c", NULL), 5);
	printf("alloc_calls:\n%s", buf);

	CHECK(uslab_cache_attr(owners, "free_calls", buf, size) > 0);
	CHECK_EQ(lines_starting_with_count(buf), 2);
	CHECK_EQ(summary_count(buf, "owners_freer", NULL), 5);
	CHECK(strstr(buf, " <not-available> ") && strtol(buf, NULL, 10) == all - 5);

	CHECK(uslab_cache_attr(owners, "alloc_traces", buf, size) > 0);
	CHECK_EQ(lines_starting_with_count(buf), 2);
	CHECK_EQ(strtol(buf, NULL, 10), all - 5);     /* most first */
	CHECK_EQ(summary_count(buf, "owners_site_a", &line), all - 5);
	/* its stack below it: the site, then the test's own frames */
	const char *frame = line ? strchr(line, '\n') : NULL;
	CHECK(frame && !strncmp(frame + 1, "        owners_site_a+0x", 24));
	CHECK(frame && strstr(frame, "        owner_summaries+0x") != NULL);
	printf("alloc_traces:\n%s", buf);
}


__attribute__((noinline)) static void owner_summaries(void)
{
	static char buf[1 << 16], small[24];
	owners = make("debug-owners", 100, SLAB_STORE_USER);
	char v[32];
	CHECK(uslab_cache_attr(owners, "objs_per_slab", v, sizeof(v)) > 0);
	int per = atoi(v), all = 2 * per;
	CHECK(per > 5 && all <= 4096);
	CHECK(uslab_cache_attr(owners, "alloc_calls", buf, sizeof(buf)) > 0 && !strcmp(buf, "No data\n"));
	for (int i = 0; i < all; i++)
		owners_site_a(i);
	volatile int five = 5;       /* one call site each: the loops are not unrolled */
	for (int i = 0; i < five; i++)
		owners_freer(i);
	for (int i = 0; i < five; i++)
		owners_site_c(i);
	CHECK_EQ(uslab_cache_attr(owners, "slabs", v, sizeof(v)) > 0 ? atoi(v) : -1, 2);

	int len = uslab_cache_attr(owners, "alloc_calls", buf, sizeof(buf));
	CHECK(len > 0 && (size_t)len == strlen(buf));
	CHECK_EQ(summary_total(buf), all);
	if (!TAIL_CALLS) {
		printf("alloc_calls (no tail calls in this build: the sites are uslab's):\n%s", buf);
		CHECK(uslab_cache_attr(owners, "free_calls", buf, sizeof(buf)) > 0);
		CHECK_EQ(summary_total(buf), all);
		CHECK(uslab_cache_attr(owners, "alloc_traces", buf, sizeof(buf)) > 0);
		CHECK_EQ(summary_total(buf), all);
		CHECK(strstr(buf, "\n        owners_site_a+0x") && strstr(buf, "\n        owners_site_c+0x"));
	} else {
		owner_sites(buf, sizeof(buf), all);
	}
	/* Bad input: a buffer too small gets what fits and the whole length
	 * (give or take what the ages add as time passes: "age=0" may become
	 * "age=0/0/1" between two reads); a cache without U has no owners
	 * (ENOSYS, as the kernel's files). */
	int whole = uslab_cache_attr(owners, "alloc_calls", buf, sizeof(buf));
	int cut = uslab_cache_attr(owners, "alloc_calls", small, sizeof(small));
	CHECK(cut > (int)sizeof(small) && cut >= whole - 24 && cut <= whole + 24);
	CHECK(strlen(small) == sizeof(small) - 1 && !strncmp(small, buf, sizeof(small) - 1));
	int none = uslab_cache_attr(owners, "alloc_calls", NULL, 0);
	CHECK(none > (int)sizeof(small) && none >= whole - 24 && none <= whole + 24);
	struct kmem_cache *plain = make("debug-no-owners", 100, SLAB_RED_ZONE);
	errno = 0;
	CHECK_EQ(uslab_cache_attr(plain, "alloc_calls", buf, sizeof(buf)), -1);
	CHECK_EQ(errno, ENOSYS);
	errno = 0;
	CHECK_EQ(uslab_cache_attr(plain, "free_traces", buf, sizeof(buf)), -1);
	CHECK_EQ(errno, ENOSYS);
	kmem_cache_destroy(plain);

	for (int i = 0; i < all; i++)
		kmem_cache_free(owners, owned[i]);
	CHECK(uslab_cache_attr(owners, "free_traces", buf, sizeof(buf)) > 0 && !strcmp(buf, "No data\n"));
	kmem_cache_destroy(owners);
}

/* SLAB_TRACE: each trace line is followed by the call stack, as the
 * kernel's dump_stack prints it. */
__attribute__((noinline)) void *trace_stack_site(struct kmem_cache *s)
{
	void *p = kmem_cache_alloc(s, GFP_KERNEL);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void trace_stack(void)
{
	struct kmem_cache *s = make("debug-trace-stack", 48, SLAB_TRACE);
	ntrace = 0;
	uslab_set_report_handler(trace_handler, NULL);
	void *p = trace_stack_site(s);
	kmem_cache_free(s, p);
	uslab_set_report_handler(NULL, NULL);
	capture_reports();
	CHECK_EQ(ntrace, 2);
	for (int i = 0; i < ntrace; i++) {
		const char *ct = strstr(trace_lines[i], "\nCall Trace:\n <TASK>\n ");
		CHECK(ct != NULL);
		CHECK(strstr(trace_lines[i], "CPU: ") && strstr(trace_lines[i], " Comm: "));
		CHECK(ct && strstr(ct, "\n </TASK>"));
		/* the test's own frame below the allocator's */
		CHECK(ct && strstr(ct, "\n trace_stack+0x"));
	}
	CHECK(strstr(trace_lines[0], TAIL_CALLS ? "\n <TASK>\n trace_stack_site+0x" : "\n trace_stack_site+0x") != NULL);
	printf("%s", trace_lines[0]);
	kmem_cache_destroy(s);
}

/* Run with USLAB_STACK_DEPTH=<want> (the argument): an owner's stack keeps
 * that many frames (0: the caller alone, one frame). */
static void stack_depth(int want)
{
	static char buf[8192];
	owners = make("debug-depth", 64, SLAB_STORE_USER);
	owners_site_a(0);
	CHECK(uslab_cache_attr(owners, "alloc_traces", buf, sizeof(buf)) > 0);
	const char *line = NULL;
	if (TAIL_CALLS)
		CHECK_EQ(summary_count(buf, "owners_site_a", &line), 1);
	else
		line = buf;                  /* the one line: a site of uslab's */
	int frames = 0;
	for (const char *p = line ? strchr(line, '\n') : NULL; p && !strncmp(p + 1, "        ", 8); p = strchr(p + 1, '\n'))
		frames++;
	printf("%s", buf);
	CHECK_EQ(frames, want ? want : 1);
	CHECK(!TAIL_CALLS || (line && !strncmp(strchr(line, '\n') + 1, "        owners_site_a+0x", 24)));
	kmem_cache_free(owners, owned[0]);
	kmem_cache_destroy(owners);
}

/* Run with USLAB_DEBUG=FZPUO: caches whose slab order debugging would raise
 * (a 4096-byte object needs one page, with red zones and tracks two) keep F
 * only; smaller ones get everything. */
static void order_off(void)
{
	struct kmem_cache *big = kmem_cache_create("debug-o-4096", 4096, 0, SLAB_NO_MERGE, NULL);
	struct kmem_cache *small = kmem_cache_create("debug-o-64", 64, 0, SLAB_NO_MERGE, NULL);
	CHECK(big && small);
	CHECK((big->flags & (SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER)) == 0);
	CHECK(big->flags & SLAB_CONSISTENCY_CHECKS);
	CHECK(big->size == 4096);
	CHECK((small->flags & (SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER)) ==
	      (SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER));
	void *p = kmem_cache_alloc(big, GFP_KERNEL), *q = kmem_cache_alloc(small, GFP_KERNEL);
	CHECK(p && q);
	kmem_cache_free(big, p);
	kmem_cache_free(small, q);
	CHECK_EQ(kmem_cache_validate(big), 0);
	CHECK_EQ(kmem_cache_validate(small), 0);
	kmem_cache_destroy(big);
	kmem_cache_destroy(small);
}

int main(int argc, char **argv)
{
	capture_reports();
	if (argc > 2 && !strcmp(argv[1], "depth")) {
		stack_depth(atoi(argv[2]));
		return test_summary();
	}
	if (argc > 1 && !strcmp(argv[1], "order")) {
		order_off();
		return test_summary();
	}
	unsigned long e0 = errs();
	clobber_zone();
	next_pointer();
	poison_clobber("TestSlub_1th_word_free", 0, 0x78);
	poison_clobber("TestSlub_50th_word_free", 50, 0x9a);
	clobber_redzone_free();
	kmalloc_redzone();
	leak_destroy();
	krealloc_redzone_zeroing();
	misuse();
	many();
	trace_flag();
	trace_stack();
	owner_summaries();
	printf("%lu reports in all\n", errs() - e0);
	return test_summary();
}
