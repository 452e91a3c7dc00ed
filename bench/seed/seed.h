/* seed.h - uslab-bench's own interface between its files: the uslab API as
 * weak references (resolved by the preloaded libuslab.so in uslab's
 * children), the TSC, the child's globals, the driver (driver.c: the
 * variants, running children, medians, tables, the summary) and each
 * workload's two entry points, its child (child_*) and its table (bench_*),
 * one file a workload: single.c, nalloc.c (nalloc and seed003), bulk.c,
 * detached.c, remote.c, random_free.c (random-free and partial-drain),
 * messaging.c, colour.c; child.c has what their children share. main.c has
 * main. What every benchmark shares is in ../common/. */
#ifndef USLAB_BENCH_SEED_H
#define USLAB_BENCH_SEED_H

#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "clock.h"
#include "peers.h"
#include "progress.h"
#include "stats.h"
#include "uslab.h"

#ifndef BENCH_STATIC
/* Resolved by the preloaded libuslab.so, NULL in the peers' children. */
#pragma weak kmem_cache_create
#pragma weak kmem_cache_destroy
#pragma weak kmem_cache_alloc
#pragma weak kmem_cache_free
#pragma weak kmem_cache_alloc_bulk
#pragma weak kmem_cache_free_bulk
#pragma weak kmalloc
#pragma weak kfree
#pragma weak uslab_percpu_mode
#pragma weak uslab_sheaf_capacity
#pragma weak uslab_allocator
#pragma weak uslab_for_each_cache
#pragma weak uslab_cache_find
#pragma weak kmem_cache_name
#pragma weak uslab_cache_attr
#define USLAB_LOADED (kmem_cache_create != NULL)
#else
#define USLAB_LOADED 1                 /* linked in (malloc stays glibc's) */
#endif

static inline uint64_t ticks(void) { return __rdtsc(); }
#define ESCAPE(p) __asm__ __volatile__("" : : "r"(p) : "memory")


/* ---------------------------------------------------------------- the child (child.c) */
extern int use_uslab;              /* kmem_cache_* instead of malloc */
extern struct kmem_cache *cache;
typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);
/* Called through pointers so the compiler cannot pair up and drop malloc/free. */
extern alloc_fn volatile sys_malloc;
extern free_fn volatile sys_free;
void report_path(struct kmem_cache *c);

/* ---------------------------------------------------------------- the driver */
struct variant {
	const char *name;
	const char *tag;       /* short column heading */
	const char *preload;   /* NULL: none */
	int uslab;             /* 1: kmem_cache_* (else malloc) */
	int peer;              /* 1: one of the four peers (the ratios' columns, "best peer") */
	int exe;               /* 0: this program, 1: uslab-bench-static (an extra row) */
	const char *rseq;      /* USLAB_RSEQ value or NULL (default: rseq) */
	const char *sheaves;   /* USLAB_SHEAVES value or NULL (peers: irrelevant) */
	int present;           /* 0: peer library not installed */
	const char *engine;    /* USLAB_ALLOCATOR (uslab rows; NULL: slub) */
	const char *colour;    /* USLAB_SLAB_COLOUR or NULL */
	const char *only;      /* the scenarios it runs in (space-separated), NULL: all */
	const char *lookahead; /* USLAB_BULK_LOOKAHEAD or NULL (the default, 3) */
	const char *key;       /* --data's allocator name, NULL: name (gperftools keeps "tcmalloc") */
	const char *front;     /* USLAB_FRONT or NULL (the default) */
};

struct sum_row {
	char at[16];        /* the row within the workload ("16" for N=16); "" for one row */
	double ratio;       /* uslab / best peer, median over median */
	const char *peer;   /* the best peer */
};

#define NVAR 19    /* the variants (driver.c) */
#define NAMEW 26   /* width of the allocator column: the longest name, plus one */
#define MAXVALS 64
#define MAXRUNS 31
#define RATIOW 28  /* width of the name column of nalloc's and colour's rows */
extern struct variant variants[NVAR];
extern int installed[NVAR];          /* set once at start-up */
extern int ntried[NVAR], nfail[NVAR];   /* child runs tried and failed in the scenario being printed */
extern double medians[NVAR][MAXVALS];   /* of the last measure() */
extern FILE *data_file;              /* --data FILE, or NULL */
extern const char *self_path;
extern char static_path[4200];       /* uslab-bench-static beside this program */
int run_child(int vi, const char *scenario, const char *arg, int want, double *vals);
void begin_scenario_of(const char *name);
void begin_scenario(void);
void measure(const char *what, const char *scenario, const char *arg, int runs, int want_uslab, int want_malloc);
void measure_n(const char *scenario, long n, int runs, int want_uslab, int want_malloc);
int ran(int v);
void data_row(const char *table, int v, const char *metric, const char *x, int k);
void data_rows(const char *table, const char *metric, long x, int k);
void print_footer(void);
void ratios(double x, int k);
void print_rows(int k, const char *fmt);
int row_head(int v);
int find_variant(const char *name);
double best_peer(int k);
void ratio_legend(const char *cols, const char *unit);
int sum_variant(void);
int sum_row_from(struct sum_row *row, const char *at, int uv, int ku, int kp);
void summary_add(const char *what, int uv, const char *pre, const char *post, const struct sum_row *rows, int n);
void summary_one(const char *what, int ku, int kp);
void summary_one_of(const char *what, const char *name, int ku, int kp);
void print_summary(void);
void ratio_header(void);
const char *plural(int n);

/* ---------------------------------------------------------------- the workloads */
#define NALLOC_REPS 5          /* nalloc: each size's N allocs + N frees, repeated */
#define DETACHED_MAXRUNS 100   /* detached: processes per variant */
void child_single(long iters);
void bench_single(int runs, long iters);
void child_nalloc(long n, int reps);
void bench_nalloc(int runs, long n);
void child_seed003(long n);
void bench_seed003(int runs, long n);
void child_bulk(long total);
void bench_bulk(int runs, long n);
void child_detached(long total);
void bench_detached(int runs, long total);
void child_remote(long n);
void bench_remote(int runs, long n);
void child_random_free(long n, long rounds);
void bench_random_free(int runs, int quick);
void child_partial_drain(long n, long rounds);
void bench_partial_drain(int runs, int quick);
void child_messaging(long loops);
void bench_messaging(int runs, long loops);
void child_colour(long reads);
void bench_colour(int runs, long reads);

#endif /* USLAB_BENCH_SEED_H */
