/* sheaves.h - the parts of test_sheaves, one file per subject (main.c runs
 * them): what they share. */
#ifndef TEST_SHEAVES_H
#define TEST_SHEAVES_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../harness.h"
#include "common/common.h"
#include "pages/pages.h"
#include "percpu/percpu.h"
#include "platform/platform.h"
#include "engine/engine.h"
#include "testing.h"

/* Sheaves are on for caches not configured (USLAB_SHEAVES is not 0). */
extern bool sheaves_default;
/* Objects of s in use, the CPUs' sheaves flushed first. */
unsigned long in_use(struct kmem_cache *s);
/* qsort and bsearch order of pointers. */
int cmp_ptr(const void *a, const void *b);

void test_million_cross_thread(void);                             /* cross_thread.c */
void test_barn_and_shrink(void);                                  /* barn.c */
void test_empties_after_burst(void);
void test_packed_burst(void);
void test_reclaim_before_growth(void);
void test_args(void);                                             /* args.c */
void test_bad_free(void);                                         /* bad_input.c */
void test_pushed_twice(void);
void test_rising_order(void);                                     /* order.c */

#endif
