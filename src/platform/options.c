/* options.c - the USLAB_* environment variables, read once at start-up without
 * allocating; a malformed value gets one line naming the variable and the
 * default is kept. No locks (start-up holds init_lock). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "../testing.h"
#include "platform.h"

struct usl_options usl_opt = { .min_objects = 0, .min_order = 0, .max_order = 3, .rseq = -1, .sheaves = -1,
                               .decay_ms = 1000 };


bool usl_parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return false;
	int saved = errno;               /* the first malloc must not change errno */
	errno = 0;
	v = strtol(s, &end, 10);
	bool bad = errno || *end || end == s || v < lo || v > hi;
	errno = saved;
	if (bad)
		return false;
	*out = v;
	return true;
}

static void option_int(const char *name, int *dst, long lo, long hi)
{
	const char *v = getenv(name);
	long x;

	if (!v)
		return;
	if (usl_parse_int(v, lo, hi, &x))
		*dst = (int)x;
	else
		usl_report(USLAB_ERR_OPTION, "%s='%s' is not a whole number in [%ld, %ld]; keeping %d",
		           name, v, lo, hi, *dst);
}

void usl_read_options(void)
{
	int decay = (int)usl_opt.decay_ms;

	option_int("USLAB_MIN_OBJECTS", &usl_opt.min_objects, 1, USL_MAX_OBJS_PER_SLAB);
	option_int("USLAB_MIN_ORDER", &usl_opt.min_order, 0, USL_MAX_ORDER);
	option_int("USLAB_MAX_ORDER", &usl_opt.max_order, 0, USL_MAX_ORDER);
	usl_opt.max_order_given = getenv("USLAB_MAX_ORDER") != NULL;
	option_int("USLAB_RSEQ", &usl_opt.rseq, 0, 1);
	option_int("USLAB_SHEAVES", &usl_opt.sheaves, 0, 1);
	option_int("USLAB_NOMERGE", &usl_opt.nomerge, 0, 1);
	option_int("USLAB_DECAY_MS", &decay, 0, 3600 * 1000);
	usl_opt.decay_ms = (unsigned int)decay;
	if (usl_opt.min_order > usl_opt.max_order) {
		usl_report(USLAB_ERR_OPTION, "USLAB_MIN_ORDER=%d is above USLAB_MAX_ORDER=%d; raising the maximum",
		           usl_opt.min_order, usl_opt.max_order);
		usl_opt.max_order = usl_opt.min_order;
	}
}
