/* debug_out.c - the text of debug-cache reports (debug_out.h): records
 * collected while a list_lock is held, in a guarded mapping of their own (no
 * malloc), and delivered after it is released, each as one report through
 * usl_report_text, with addresses and depot handles turned into names then
 * (the symbolizer allocates). Locks: none; the caller's o is its own. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "debug_out.h"

#define OUT_CAP (64 * 1024)

void usl_out_begin(struct usl_dbg_out *o, enum uslab_error kind)
{
	if (!o->buf) {
		o->buf = usl_map_guarded(OUT_CAP, PROT_READ | PROT_WRITE);
		o->len = 0;
	}
	if (!o->buf || o->len + 2 >= OUT_CAP)
		return;
	o->rec = o->len;
	o->buf[o->len++] = (char)kind;
	o->open = true;
	o->reports++;
}

void usl_out_printf(struct usl_dbg_out *o, const char *fmt, ...)
{
	if (!o->buf || !o->open)
		return;
	size_t room = OUT_CAP - 1 - o->len;
	if (room < 2)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->len, room, fmt, ap);
	va_end(ap);
	o->len += n < 0 ? 0 : ((size_t)n < room ? (size_t)n : room - 1);
}

void usl_out_end(struct usl_dbg_out *o)
{
	if (!o->buf || !o->open)
		return;
	while (o->len > o->rec + 1 && o->buf[o->len - 1] == '\n')
		o->len--;
	o->buf[o->len++] = 0;
	o->open = false;
}


static size_t expand(char *out, size_t cap, const char *text)
{
	size_t n = 0;
	char sym[320];
	for (const char *t = text; *t && n + 1 < cap;) {
		if (*t != USL_TOK_ADDR && *t != USL_TOK_STACK) {
			out[n++] = *t++;
			continue;
		}
		char kind = *t++, hex[17];
		size_t digits = kind == USL_TOK_ADDR ? 16 : 8, k = 0;
		for (; k < digits && t[k]; k++)
			hex[k] = t[k];
		hex[k] = 0;
		t += k;
		unsigned long v = strtoul(hex, NULL, 16);
		if (kind == USL_TOK_ADDR) {
			usl_symbolize(v, sym, sizeof(sym));
			n += (size_t)snprintf(out + n, cap - n, "%s", sym);
		} else {
			uintptr_t pc[USL_STACK_MAX];
			unsigned int depth = usl_stack_get((uint32_t)v, pc, USL_STACK_MAX);
			for (unsigned int i = 0; i < depth && n + 1 < cap; i++) {
				usl_symbolize(pc[i], sym, sizeof(sym));
				n += (size_t)snprintf(out + n, cap - n, " %s\n", sym);
			}
		}
		if (n >= cap)
			n = cap - 1;
	}
	out[n] = 0;
	return n;
}

/* After list_lock is released: each record as one report. */
int usl_out_deliver(struct usl_dbg_out *o)
{
	int n = o->reports;
	if (o->buf) {
		char *x = usl_map_guarded(OUT_CAP, PROT_READ | PROT_WRITE);
		for (size_t i = 0; i < o->len;) {
			enum uslab_error kind = (enum uslab_error)(unsigned char)o->buf[i];
			const char *text = o->buf + i + 1;
			if (x) {
				size_t len = expand(x, OUT_CAP, text);
				while (len && x[len - 1] == '\n')
					x[--len] = 0;
			}
			usl_report_text(kind, x ? x : text);
			i += 2 + strlen(text);
		}
		if (x)
			usl_unmap_guarded(x, OUT_CAP);
		usl_unmap_guarded(o->buf, OUT_CAP);
	}
	o->buf = NULL;
	o->len = 0;
	o->reports = 0;
	return n;
}

/* The kernel's print_hex_dump with DUMP_PREFIX_ADDRESS, 16 bytes a line. */
void usl_out_section(struct usl_dbg_out *o, const char *text, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 16) {
		size_t k = n - i < 16 ? n - i : 16;
		char hex[16 * 3 + 1], asc[17];
		for (size_t j = 0; j < k; j++) {
			snprintf(hex + 3 * j, 4, "%02x%s", p[i + j], j + 1 < k ? " " : "");
			asc[j] = p[i + j] >= ' ' && p[i + j] < 0x7f ? (char)p[i + j] : '.';
		}
		asc[k] = 0;
		/* pad the hex column so the ASCII lines up on a short last line */
		usl_out_printf(o, "%s%016lx: %-47s  %s\n", text, (unsigned long)(uintptr_t)(p + i), hex, asc);
	}
}

