/* fuzz_live.c - libFuzzer target for the files uslabinfo reads: a process's
 * live view or a saved snapshot, and the owner summaries a process writes
 * for it (tools/uslabinfo/live_read.c). The input is
 * read as a file as it is, and also as patches (offset, bytes) on a valid
 * snapshot, so the checks past the header are reached. A load that succeeds
 * must give counts within the file and names that end inside their fields,
 * and its image must load back to the same rows. Built with clang
 * -fsanitize=fuzzer,address in the AddressSanitizer build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/uslabinfo/live_read.h"

static void check(const struct live_snapshot *s, size_t len)
{
	const struct usl_live_header *h = &s->hdr;
	if (h->nr_rows > h->max_rows || h->nr_aliases > h->max_aliases || h->nr_stats > USL_LIVE_STATS)
		abort();
	if (sizeof(*h) + (size_t)h->max_rows * sizeof(struct usl_live_row) > len)
		abort();
	for (uint32_t i = 0; i < h->nr_rows; i++)
		if (memchr(s->rows[i].name, 0, USL_LIVE_NAME) == NULL)
			abort();
	for (uint32_t i = 0; i < h->nr_aliases; i++)
		if (!memchr(s->aliases[i].name, 0, USL_LIVE_NAME) || !memchr(s->aliases[i].target, 0, USL_LIVE_NAME))
			abort();
	size_t n;
	void *img = live_image(s, &n);
	if (!img)
		return;
	struct live_snapshot back;
	char err[200];
	if (live_load(img, n, false, &back, err, sizeof(err)) != 0 || back.hdr.nr_rows != h->nr_rows ||
	    memcmp(back.rows, s->rows, (size_t)h->nr_rows * sizeof(struct usl_live_row)))
		abort();
	live_free(&back);
	free(img);
}

static void one(const void *p, size_t len, int live)
{
	struct live_snapshot s;
	char err[200];
	if (live_load(p, len, live, &s, err, sizeof(err)) == 0)
		check(&s, len);
	else if (!memchr(err, 0, sizeof(err)))
		abort();
	live_free(&s);
}

/* The input as the owner summaries' reply text: what is found lies inside
 * the text and ends at a heading or its end. */
static void calls(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = 0;
	size_t n = strlen(text);
	static const char *const caches[] = { "kmalloc-64", "a", "" }, *const which[] = { "alloc_calls", "free_calls" };
	for (int c = 0; c < 3; c++)
		for (int w = 0; w < 2; w++) {
			size_t len = 0;
			const char *t = live_calls_find(text, caches[c], which[w], &len);
			if (t && (t < text || t > text + n || len > (size_t)(text + n - t) ||
			          (t[len] && strncmp(t + len, "== ", 3))))
				abort();
		}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size, 0);
	calls(data, size);
	/* A valid snapshot of 3 rows and 2 aliases, patched by the input. */
	enum { ROWS = 3, ALIASES = 2 };
	static unsigned char file[sizeof(struct usl_live_header) + ROWS * sizeof(struct usl_live_row) +
	                          ALIASES * sizeof(struct usl_live_alias)];
	struct usl_live_header *h = (struct usl_live_header *)file;
	memset(file, 0, sizeof(file));
	memcpy(h->magic, USL_LIVE_MAGIC, 8);
	h->version = USL_LIVE_VERSION;
	h->header_size = sizeof(*h);
	h->row_size = sizeof(struct usl_live_row);
	h->alias_size = sizeof(struct usl_live_alias);
	h->max_rows = h->nr_rows = ROWS;
	h->max_aliases = h->nr_aliases = ALIASES;
	h->nr_stats = 43;
	h->nr_cpus = 2;
	h->page_size = 4096;
	struct usl_live_row *r = (struct usl_live_row *)(file + sizeof(*h));
	for (int i = 0; i < ROWS; i++)
		memcpy(r[i].name, "kmalloc-64", 11);
	size_t len = sizeof(file);
	for (size_t i = 0; i + 3 <= size;) {
		size_t off = ((size_t)data[i] << 8 | data[i + 1]) * 7 % sizeof(file);
		size_t n = data[i + 2] % 16;
		i += 3;
		if (n > size - i)
			n = size - i;
		if (n > sizeof(file) - off)
			n = sizeof(file) - off;
		memcpy(file + off, data + i, n);
		i += n;
	}
	if (size && data[0] & 1)
		len = ((size_t)data[size - 1] * 97) % sizeof(file);     /* a truncated file */
	one(file, len, 0);
	/* As a live view too, unless its count says it is being rewritten (a
	 * reader of a live view waits that out: two seconds here). */
	if (len < sizeof(*h) || !(h->seq & 1))
		one(file, len, 1);
	return 0;
}
