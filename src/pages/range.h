/* range.h - the reserved range (range.c): where it lies, and its reservation
 * at start-up. Included by pages.h; range.c includes nothing else of the
 * pages layer. */
#ifndef USL_PAGES_RANGE_H
#define USL_PAGES_RANGE_H

#include "../types.h"

extern uintptr_t usl_base USL_HIDDEN;           /* start of the reserved range */
extern uintptr_t usl_range USL_HIDDEN;          /* its length in bytes */

/* At start-up: usl_base and usl_range set; side(range) reserves what is sized
 * from the range (pages.c's table, page map and bitmaps; false: nothing left
 * mapped), side_release gives it back when the range then fails. *limit the
 * RLIMIT_AS in force (0: none), *reserved where the range's PROT_NONE
 * reservation ends (an offset; beyond, regions are mapped as it grows). */
USL_HIDDEN bool usl_range_reserve(size_t *limit, uintptr_t *reserved, bool (*side)(size_t range),
                                  void (*side_release)(void));
/* An anonymous mapping (PROT_NONE: a reservation; MAP_NORESERVE), or NULL. */
USL_HIDDEN void *usl_map_anon(void *at, size_t bytes, int prot, int flags);

#endif /* USL_PAGES_RANGE_H */
