/* test_options.c - the USLAB_* variables as a user mistypes them, with the
 * public API alone. CTest runs it with USLAB_SHEAVE=0 (a typo), USLAB_SLUB_DEBUG=FZPU
 * (the kernel's word, not uslab's option name), USLAB_RSEQ=yes, USLAB_MIN_OBJECTS=0,
 * USLAB_HARDEN=3, USLAB_BULK_LOOKAHEAD=0, USLAB_NODES=65 and USLAB_STACK_DEPTH=17 (out of range)
 * USLAB_RCU_MAX=12 (below its least), and USLAB_OOM=never (not a name it takes): each gets one line naming the variable, a malformed value names
 * the default as README gives it, and the defaults stay. */
#include "../harness.h"   /* uslab.h only */

static char lines[12][512];
static int nlines;
static void keep(enum uslab_error kind, const char *line, void *arg)
{
	(void)arg;
	if (kind == USLAB_ERR_OPTION && nlines < 12)
		strncpy(lines[nlines++], line, sizeof(lines[0]) - 1);
}

static int lines_with(const char *a, const char *b)
{
	int n = 0;
	for (int i = 0; i < nlines; i++)
		n += strstr(lines[i], a) && (!b || strstr(lines[i], b));
	return n;
}

int main(void)
{
	uslab_set_report_handler(keep, NULL);
	const char *mode = uslab_percpu_mode();   /* the options are read here */
	uslab_set_report_handler(NULL, NULL);
	for (int i = 0; i < nlines; i++)
		printf("%s\n", lines[i]);
	CHECK_EQ(nlines, 11);
	CHECK_EQ(lines_with("unknown option USLAB_SHEAVE ", NULL), 1);
	CHECK_EQ(lines_with("unknown option USLAB_SLUB_DEBUG ", NULL), 1);
	CHECK_EQ(lines_with("USLAB_RSEQ='yes'", "keeping the default (automatic)"), 1);
	CHECK_EQ(lines_with("USLAB_MIN_OBJECTS='0'", "keeping the default (automatic: 4 * (fls(CPUs) + 1))"), 1);
	CHECK_EQ(lines_with("USLAB_HARDEN='3'", "keeping the default (1)"), 1);
	CHECK_EQ(lines_with("USLAB_BULK_LOOKAHEAD='0'", "keeping the default (3)"), 1);
	CHECK_EQ(lines_with("USLAB_NODES='65'", "keeping the default (the machine's)"), 1);
	CHECK_EQ(lines_with("USLAB_STACK_DEPTH='17'", "[0, 16]; keeping the default (16)"), 1);
	CHECK_EQ(lines_with("USLAB_OOM='never'", "none of null, report and abort; keeping the default (null)"), 1);
	CHECK_EQ(lines_with("USLAB_RANDOM='on'", "[0, 1]; keeping the default (1)"), 1);
	CHECK_EQ(lines_with("USLAB_RCU_MAX='12'", "[1024, 1073741824]; keeping the default (524288)"), 1);
	CHECK_EQ(lines_with("keeping -1", NULL) + lines_with("keeping 0", NULL), 0);
	CHECK_EQ(lines_with("uslab: ", NULL), 11);   /* every line is a report */
	/* The defaults stayed: rseq chosen automatically (as without the option),
	 * sheaves on (a cache gets a sheaf capacity). */
	CHECK(strcmp(mode, "rseq") == 0 || strcmp(mode, "locked") == 0);
	/* (The kernel's order, whose pops the double free below expects.) */
	struct kmem_cache *s = kmem_cache_create("options", 64, 0, SLAB_NO_MERGE | SLAB_ORDERED, NULL);
	const char *front = getenv("USLAB_FRONT");
	if (front && !strcmp(front, "owned") && !strcmp(mode, "rseq"))
		CHECK(cache_owned(s));           /* (the ".owned" run: no sheaves there) */
	else
		CHECK(uslab_sheaf_capacity(s) > 0);
	/* Hardening stayed on: free(a); free(b); free(a) is refused (when the
	 * copy the second free left is taken out, or at the free on the owned
	 * front), and a comes back once (at most once there). */
	void *a = kmem_cache_alloc(s, GFP_KERNEL), *b = kmem_cache_alloc(s, GFP_KERNEL);
	unsigned long errors = uslab_error_count();
	kmem_cache_free(s, a);
	kmem_cache_free(s, b);
	kmem_cache_free(s, a);
	void *back[3];
	int as = 0;
	for (int i = 0; i < 3; i++)
		as += (back[i] = kmem_cache_alloc(s, GFP_KERNEL)) == a;
	CHECK_EQ(uslab_error_count(), errors + 1);
	if (cache_owned(s))   /* refused at the free; a bitmap's cursor, not a LIFO */
		CHECK(as <= 1 && back[0] != back[1] && back[0] != back[2] && back[1] != back[2]);
	else
		CHECK_EQ(as, 1);
	for (int i = 0; i < 3; i++)
		kmem_cache_free(s, back[i]);
	kmem_cache_destroy(s);
	return test_summary();
}
