/* live_read.c - a consistent, checked copy of a live-view file, and the
 * owner summaries in a process's reply (live_read.h). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "live_read.h"

/* A live view being rewritten: tried again at once a few times, then every
 * millisecond, for two seconds in all (a publication takes microseconds, but
 * a slow process, under a sanitizer say, may take longer). */
#define QUICK_TRIES 10
#define TRIES (QUICK_TRIES + 2000)

static void cut(char *s, size_t n)
{
	s[n - 1] = 0;
}

static int fail(char *err, size_t n, const char *what)
{
	snprintf(err, n, "%s", what);
	return -1;
}

static uint64_t seq_read(const void *at)
{
	return __atomic_load_n((const uint64_t *)at, __ATOMIC_ACQUIRE);
}

int live_load(const void *p, size_t len, bool live, struct live_snapshot *out, char *err, size_t errlen)
{
	const char *base = p;
	char why[160];

	memset(out, 0, sizeof(*out));
	if (len < sizeof(struct usl_live_header)) {
		snprintf(why, sizeof(why), "the file is truncated (%zu bytes; a header alone is %zu)", len,
		         sizeof(struct usl_live_header));
		return fail(err, errlen, why);
	}
	if (memcmp(base, USL_LIVE_MAGIC, 8))
		return fail(err, errlen, "not a uslab live-view file (no USLABLV1 magic at its start)");
	for (int tries = 0;; tries++) {
		if (tries == TRIES)
			return fail(err, errlen, "the process kept rewriting the file; no consistent copy in two seconds");
		if (tries > QUICK_TRIES) {
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
		}
		uint64_t s1 = seq_read(base + offsetof(struct usl_live_header, seq));
		if (s1 & 1) {
			if (!live)
				return fail(err, errlen, "the file was saved in the middle of an update (odd sequence count)");
			continue;
		}
		memcpy(&out->hdr, base, sizeof(out->hdr));
		const struct usl_live_header *h = &out->hdr;
		if (h->version != USL_LIVE_VERSION) {
			snprintf(why, sizeof(why), "file version %u; this uslabinfo reads version %u", h->version,
			         USL_LIVE_VERSION);
			return fail(err, errlen, why);
		}
		if (h->header_size != sizeof(struct usl_live_header) || h->row_size != sizeof(struct usl_live_row) ||
		    h->alias_size != sizeof(struct usl_live_alias))
			return fail(err, errlen, "the file's record sizes are not this version's (corrupt?)");
		if (h->max_rows > (1u << 20) || h->max_aliases > (1u << 20) || h->nr_rows > h->max_rows ||
		    h->nr_aliases > h->max_aliases || h->nr_stats > USL_LIVE_STATS || h->nr_cpus == 0 ||
		    h->page_size < 512 || (h->page_size & (h->page_size - 1)))
			return fail(err, errlen, "the file's counts are out of range (corrupt?)");
		size_t rows_at = sizeof(struct usl_live_header);
		size_t aliases_at = rows_at + (size_t)h->max_rows * sizeof(struct usl_live_row);
		size_t need = aliases_at + (size_t)h->max_aliases * sizeof(struct usl_live_alias);
		if (len < need) {
			snprintf(why, sizeof(why), "the file is truncated (%zu bytes; its header says %zu)", len, need);
			return fail(err, errlen, why);
		}
		free(out->rows);
		free(out->aliases);
		out->rows = calloc(h->nr_rows ? h->nr_rows : 1, sizeof(struct usl_live_row));
		out->aliases = calloc(h->nr_aliases ? h->nr_aliases : 1, sizeof(struct usl_live_alias));
		if (!out->rows || !out->aliases)
			return fail(err, errlen, "out of memory");
		memcpy(out->rows, base + rows_at, (size_t)h->nr_rows * sizeof(struct usl_live_row));
		memcpy(out->aliases, base + aliases_at, (size_t)h->nr_aliases * sizeof(struct usl_live_alias));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq_read(base + offsetof(struct usl_live_header, seq)) != s1)
			continue;                        /* rewritten meanwhile: again */
		break;
	}
	struct usl_live_header *h = &out->hdr;
	cut(h->percpu_mode, sizeof(h->percpu_mode));
	cut(h->req_name, sizeof(h->req_name));
	for (int i = 0; i < USL_LIVE_STATS; i++)
		cut(h->stat_names[i], USL_LIVE_STAT_NAME);
	for (uint32_t i = 0; i < h->nr_rows; i++)
		cut(out->rows[i].name, USL_LIVE_NAME);
	for (uint32_t i = 0; i < h->nr_aliases; i++) {
		cut(out->aliases[i].name, USL_LIVE_NAME);
		cut(out->aliases[i].target, USL_LIVE_NAME);
	}
	return 0;
}

void live_free(struct live_snapshot *s)
{
	free(s->rows);
	free(s->aliases);
	s->rows = NULL;
	s->aliases = NULL;
}

void *live_image(const struct live_snapshot *s, size_t *len)
{
	struct usl_live_header h = s->hdr;
	h.max_rows = h.nr_rows;
	h.max_aliases = h.nr_aliases;
	h.seq &= ~(uint64_t)1;
	size_t n = sizeof(h) + (size_t)h.nr_rows * sizeof(struct usl_live_row) +
	           (size_t)h.nr_aliases * sizeof(struct usl_live_alias);
	char *b = malloc(n);
	if (!b)
		return NULL;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), s->rows, (size_t)h.nr_rows * sizeof(struct usl_live_row));
	memcpy(b + sizeof(h) + (size_t)h.nr_rows * sizeof(struct usl_live_row), s->aliases,
	       (size_t)h.nr_aliases * sizeof(struct usl_live_alias));
	*len = n;
	return b;
}

const char *live_calls_find(const char *text, const char *cache, const char *which, size_t *len)
{
	char head[USL_LIVE_NAME + 32];
	int h = snprintf(head, sizeof(head), "== %s %s\n", cache, which);
	if (h <= 0 || (size_t)h >= sizeof(head))
		return NULL;
	for (const char *p = text; p && *p;) {
		if (!strncmp(p, head, (size_t)h)) {
			const char *t = p + h, *end = t;
			while (*end && strncmp(end, "== ", 3)) {
				const char *nl = strchr(end, '\n');
				end = nl ? nl + 1 : end + strlen(end);
			}
			*len = (size_t)(end - t);
			return t;
		}
		const char *nl = strchr(p, '\n');
		p = nl ? nl + 1 : NULL;
	}
	return NULL;
}
