/* debug_out.h - report text for the debug caches (debug_out.c), shared by
 * debug.c: a report is begun, written with printf-like calls, ended; all of a
 * call's reports are delivered at once after its list_lock is released. */
#ifndef USL_SLUB_DEBUG_OUT_H
#define USL_SLUB_DEBUG_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uslab.h"

struct usl_dbg_out {
	char *buf;          /* records: kind byte, text, NUL */
	size_t len, rec;    /* bytes used; start of the open record */
	int reports;
	bool open;
};

/* Names are looked up only at delivery (the symbolizer allocates): the text
 * holds tokens, USL_TOK_ADDR and 16 hex digits for an address (its symbol),
 * USL_TOK_STACK and 8 for a depot handle (a line per frame). */
#define USL_TOK_ADDR '\001'
#define USL_TOK_STACK '\002'

void usl_out_begin(struct usl_dbg_out *o, enum uslab_error kind);
void usl_out_printf(struct usl_dbg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void usl_out_end(struct usl_dbg_out *o);
/* The kernel's print_hex_dump with DUMP_PREFIX_ADDRESS, 16 bytes a line. */
void usl_out_section(struct usl_dbg_out *o, const char *text, const uint8_t *p, size_t n);
/* Each record as one report; returns how many (a trace record is not one). */
int usl_out_deliver(struct usl_dbg_out *o);

#endif
