/* debugopt.c - USLAB_DEBUG, the kernel's slub_debug= syntax: which debugging a
 * cache gets by its name. Read once at start-up (options.c calls
 * usl_debug_parse) into a static table, without allocating; asked at each
 * cache creation (usl_debug_flags_for). No locks: written before any cache
 * exists, read-only after.
 *
 * Syntax: blocks separated by ';', each "<letters>[,<cache>[,<cache>...]]".
 * Letters (either case): F consistency checks, Z red zones, P poisoning, U
 * owner tracking, T tracing, O no debugging for a cache whose slab order it
 * would raise, '-' everything before it in the block off. A block without a
 * list sets the flags of every cache no list names; a block with a list
 * applies to the caches it names (the first block that names a cache wins),
 * and "<empty>,<list>" means FZPU for them. A name may hold '*', matching any
 * run of characters ("kmalloc-*"). An empty value means FZPU for every cache.
 * Unknown letters and malformed names get one line each and are skipped. */
#include "../testing.h"
#include "platform.h"

#define DEBUG_TEXT 1024
#define DEBUG_BLOCKS 32

static struct {
	bool set;                   /* USLAB_DEBUG was given */
	bool order_off;             /* 'O' in some block */
	uint32_t global;            /* flags of a cache no list names */
	unsigned int nblocks;
	struct {
		uint32_t flags;
		uint16_t list, end;     /* its names: text[list..end), ',' separated */
	} block[DEBUG_BLOCKS];
	char text[DEBUG_TEXT];
} dbg;

#define DEBUG_DEFAULT (SLAB_CONSISTENCY_CHECKS | SLAB_RED_ZONE | SLAB_POISON | SLAB_STORE_USER)

static uint32_t letter_flag(char c)
{
	switch (c | 0x20) {
	case 'f': return SLAB_CONSISTENCY_CHECKS;
	case 'z': return SLAB_RED_ZONE;
	case 'p': return SLAB_POISON;
	case 'u': return SLAB_STORE_USER;
	case 't': return SLAB_TRACE;
	default: return 0;
	}
}

static bool name_char_ok(char c)
{
	return c > ' ' && c < 0x7f && c != ',' && c != ';';
}

/* One block's letters, text[from..to): its flags; reports unknown letters. */
static uint32_t parse_letters(const char *t, size_t from, size_t to)
{
	uint32_t flags = 0;
	for (size_t i = from; i < to; i++) {
		char c = t[i];
		if (c == '-')
			flags = 0;
		else if ((c | 0x20) == 'o')
			dbg.order_off = true;
		else if (letter_flag(c))
			flags |= letter_flag(c);
		else if (c == ' ' || c == '\t')
			continue;
		else if (name_char_ok(c))
			usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG: option '%c' unknown; skipped", c);
		else
			usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG: option byte 0x%02x unknown; skipped", (unsigned char)c);
	}
	return flags;
}

/* text[from..to) for a report: at most 48 bytes, unprintable ones as '?'. */
static const char *snippet(char out[52], const char *t, size_t from, size_t to)
{
	size_t n = 0;
	for (size_t i = from; i < to && n < 48; i++)
		out[n++] = t[i] >= ' ' && t[i] < 0x7f ? t[i] : '?';
	if (to - from > 48)
		out[n++] = '.', out[n++] = '.', out[n++] = '.';
	out[n] = 0;
	return out;
}

/* Check a block's names, text[from..to): each non-empty, printable, no
 * spaces. False (reported) if one is not: the block is skipped. */
static bool names_ok(const char *t, size_t from, size_t to)
{
	size_t start = from;
	for (size_t i = from; i <= to; i++) {
		if (i < to && t[i] != ',') {
			if (!name_char_ok(t[i])) {
				char sn[52];
				usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG: cache list '%s' holds byte 0x%02x; block skipped",
				           snippet(sn, t, from, to), (unsigned char)t[i]);
				return false;
			}
			continue;
		}
		if (i == start) {
			char sn[52];
			usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG: empty cache name in list '%s'; block skipped",
			           snippet(sn, t, from, to));
			return false;
		}
		start = i + 1;
	}
	return true;
}

void usl_debug_parse(const char *v)
{
	dbg.set = false;
	dbg.order_off = false;
	dbg.global = 0;
	dbg.nblocks = 0;
	if (!v)
		return;
	dbg.set = true;
	size_t len = 0;
	while (v[len])
		len++;
	if (len == 0) {
		dbg.global = DEBUG_DEFAULT;  /* no value: full debugging everywhere */
		return;
	}
	if (len >= DEBUG_TEXT) {
		usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG is %zu bytes long, above %d; debugging stays off", len,
		           DEBUG_TEXT - 1);
		dbg.set = false;
		return;
	}
	for (size_t i = 0; i <= len; i++)
		dbg.text[i] = v[i];

	const char *t = dbg.text;
	for (size_t b = 0; b < len;) {
		size_t e = b;
		while (e < len && t[e] != ';')
			e++;
		if (e > b) {                         /* empty blocks (";;") are skipped */
			size_t comma = b;
			while (comma < e && t[comma] != ',')
				comma++;
			if (comma == e) {                /* letters only: every cache */
				dbg.global = parse_letters(t, b, e);
			} else if (names_ok(t, comma + 1, e)) {
				uint32_t flags = comma == b ? DEBUG_DEFAULT : parse_letters(t, b, comma);
				if (dbg.nblocks == DEBUG_BLOCKS) {
					char sn[52];
					usl_report(USLAB_ERR_OPTION, "USLAB_DEBUG: more than %d blocks with cache lists; "
					           "'%s' and after skipped", DEBUG_BLOCKS, snippet(sn, t, b, e));
					break;
				}
				dbg.block[dbg.nblocks].flags = flags;
				dbg.block[dbg.nblocks].list = (uint16_t)(comma + 1);
				dbg.block[dbg.nblocks].end = (uint16_t)e;
				dbg.nblocks++;
			}
		}
		b = e + 1;
	}
}

/* Does name match pattern p[0..n), where '*' matches any run of characters? */
static bool glob_match(const char *p, size_t n, const char *name)
{
	size_t i = 0, star = (size_t)-1;
	const char *back = NULL;
	while (*name) {
		if (i < n && p[i] == '*') {
			star = i++;
			back = name;
		} else if (i < n && p[i] == *name) {
			i++;
			name++;
		} else if (star != (size_t)-1) {
			i = star + 1;
			name = ++back;
		} else {
			return false;
		}
	}
	while (i < n && p[i] == '*')
		i++;
	return i == n;
}

uint32_t usl_debug_flags_for(const char *name)
{
	if (!dbg.set)
		return 0;
	for (unsigned int k = 0; k < dbg.nblocks; k++) {
		const char *t = dbg.text;
		size_t from = dbg.block[k].list, end = dbg.block[k].end;
		while (from < end) {
			size_t to = from;
			while (to < end && t[to] != ',')
				to++;
			if (glob_match(t + from, to - from, name))
				return dbg.block[k].flags;
			from = to + 1;
		}
	}
	/* Blocks with lists alone change only the caches they name (global 0). */
	return dbg.global;
}

bool usl_debug_order_off(void)
{
	return dbg.order_off;
}

/* USLAB_QUARANTINE: bytes, with an optional k, m or g (powers of 1024). */
static size_t quarantine_bytes;

size_t usl_debug_quarantine(void)
{
	return quarantine_bytes;
}

void usl_quarantine_parse(const char *v)
{
	quarantine_bytes = 0;
	if (!v)
		return;
	size_t n = 0, i = 0;
	bool ok = v[0] >= '0' && v[0] <= '9';
	for (; ok && v[i] >= '0' && v[i] <= '9'; i++) {
		if (n > ((size_t)1 << 40))
			ok = false;
		n = n * 10 + (size_t)(v[i] - '0');
	}
	unsigned int shift = 0;
	if (ok && v[i]) {
		char c = (char)(v[i] | 0x20);
		shift = c == 'k' ? 10 : c == 'm' ? 20 : c == 'g' ? 30 : 99;
		ok = shift != 99 && !v[i + 1];
	}
	if (ok && shift)
		n <<= shift;
	if (!ok || n > ((size_t)1 << 40)) {
		char sn[52];
		size_t len = 0;
		while (v[len])
			len++;
		usl_report(USLAB_ERR_OPTION, "USLAB_QUARANTINE='%s' is not a size in bytes (a number, with k, m or g, "
		           "up to 1 TiB); no quarantine", snippet(sn, v, 0, len));
		return;
	}
	quarantine_bytes = n;
}
