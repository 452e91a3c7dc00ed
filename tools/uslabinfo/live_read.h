/* live_read.h - reading a live-view file (src/stats/live.h) safely: every size
 * and count checked against the bytes there are, a consistent copy taken with
 * the sequence counts, names cut to their fields; the sections of the owner
 * summaries' reply. For uslabinfo and its fuzz target; nothing here trusts
 * the file. */
#ifndef USLABINFO_LIVE_READ_H
#define USLABINFO_LIVE_READ_H

#include <stdbool.h>
#include <stddef.h>

#include "stats/live.h"

struct live_snapshot {
	struct usl_live_header hdr;
	struct usl_live_row *rows;           /* hdr.nr_rows of them (malloc'd) */
	struct usl_live_alias *aliases;      /* hdr.nr_aliases */
};

/* Copies a snapshot out of the len bytes at p (a shared mapping that another
 * process may be rewriting, or a saved file: then live is false and an odd
 * sequence count is an error). Returns 0, or -1 with a one-line reason in err.
 * Never reads outside [p, p + len). */
int live_load(const void *p, size_t len, bool live, struct live_snapshot *out, char *err, size_t errlen);
void live_free(struct live_snapshot *s);

/* The bytes of a snapshot as a file (live_load reads it back): header, rows
 * (max_rows set to nr_rows), aliases. Returns a malloc'd buffer and its size. */
void *live_image(const struct live_snapshot *s, size_t *len);

/* In the owner summaries a process wrote for a request (USL_LIVE_CALLS, a
 * NUL-terminated text of sections headed "== <cache> <which>"), the text of
 * cache's summary which ("alloc_calls", "free_calls") and its length, up to
 * the next heading; NULL if there is none. */
const char *live_calls_find(const char *text, const char *cache, const char *which, size_t *len);

#endif
