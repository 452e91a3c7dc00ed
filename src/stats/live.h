/* live.h - the file a process with USLAB_STATS publishes its caches in
 * (/dev/shm/uslab.<pid>, mode 0600; stats/live.c writes it, tools/uslabinfo
 * reads it). Its layout, version 2 (per-node counts added): a header, max_rows cache rows, then
 * max_aliases alias entries; every field little-endian and naturally aligned,
 * sizes recorded in the header so a reader checks them against the file.
 *
 * Consistency (sequence counts): the writer makes hdr.seq odd, rewrites the
 * rows (each row's own seq odd while it is written), and makes hdr.seq even
 * again. A reader copies what it needs between two reads of hdr.seq and keeps
 * the copy only if both are the same even number (a row alone: its own seq).
 * The writer takes no lock an allocation takes: it runs at the allocator's
 * slow-path ticks, never on a fast path.
 *
 * Requests (uslabinfo -s, -v, -r): a reader that may write claims req_claim
 * (0 -> its pid, compare-and-swap), fills req_op and req_name, and increments
 * req_seq; the process serves it at its next tick (shrink or validate the
 * named cache, or all with an empty name; or write their owner summaries),
 * stores the result and sets done_seq = req_seq; the requester then clears
 * req_claim. */
#ifndef USL_STATS_LIVE_H
#define USL_STATS_LIVE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define USL_LIVE_MAGIC "USLABLV1"
#define USL_LIVE_VERSION 2u
#define USL_LIVE_NODES 64          /* node ids a row counts (uslab's USL_MAX_NODES) */
#define USL_LIVE_NAME 48
#define USL_LIVE_STATS 64          /* counter slots in a row (the counters in use: nr_stats) */
#define USL_LIVE_STAT_NAME 32
#define USL_LIVE_ROWS 2048
#define USL_LIVE_ALIASES 1024

enum usl_live_op {
	USL_LIVE_SHRINK = 1, USL_LIVE_VALIDATE = 2,
	/* The owner summaries (alloc_calls and free_calls) of the named cache,
	 * or of every cache with U: written to /dev/shm/uslab.<pid>.calls
	 * (USL_LIVE_CALLS_SUFFIX, mode 0600) as a "== <cache> alloc_calls"
	 * line, its text, a "== <cache> free_calls" line, its text, per
	 * cache; req_result is the number of caches written (0: none has U),
	 * -1 with no such cache. The requester reads and removes the file. */
	USL_LIVE_CALLS = 3,
};
#define USL_LIVE_CALLS_SUFFIX ".calls"

struct usl_live_header {
	char magic[8];
	uint32_t version, header_size;
	uint32_t row_size, max_rows;
	uint32_t alias_size, max_aliases;
	uint32_t nr_stats, nr_cpus;
	uint32_t page_size, stats_on;
	int64_t pid;
	uint64_t start_time;           /* the process's start, field 22 of /proc/<pid>/stat */
	uint64_t seq;                  /* odd while the rows are rewritten */
	uint64_t updated_ms;           /* CLOCK_REALTIME of the last publication, ms */
	uint64_t publications;
	uint32_t nr_rows, nr_aliases;
	uint32_t dropped_rows, dropped_aliases;   /* caches or aliases beyond the file's room */
	char percpu_mode[8];           /* "rseq" or "locked" */
	char stat_names[USL_LIVE_STATS][USL_LIVE_STAT_NAME];
	/* requests */
	uint32_t req_claim;
	uint32_t req_op;               /* enum usl_live_op */
	uint64_t req_seq, done_seq;
	int64_t req_result;            /* caches shrunk, or problems validation reported; -1: no such cache */
	char req_name[USL_LIVE_NAME];
	uint32_t nr_nodes;             /* node ids in use (1: one node) */
	uint32_t pad;
};

/* One cache as sysfs shows it (stats/attr.c), its counters summed. */
struct usl_live_row {
	uint64_t seq;
	char name[USL_LIVE_NAME];
	uint32_t object_size, slab_size, objs_per_slab, order;
	uint32_t align, sheaf_capacity, aliases, min_partial;
	uint32_t cpu_partial, flags, cpu_slabs, cpu_partial_slabs;
	uint64_t slabs, total_objects, objects, partial, objects_partial;
	uint64_t stats[USL_LIVE_STATS];
	uint64_t node_slabs[USL_LIVE_NODES], node_partial[USL_LIVE_NODES];   /* per node (nr_nodes) */
};

/* A name that kmem_cache_create merged into another cache. */
struct usl_live_alias {
	char name[USL_LIVE_NAME];
	char target[USL_LIVE_NAME];
};

/* Row flags: the cache's debug and layout flags, as slabinfo's Flg column. */
#define USL_LIVE_F_HWCACHE 0x1u
#define USL_LIVE_F_POISON 0x2u
#define USL_LIVE_F_RED_ZONE 0x4u
#define USL_LIVE_F_CHECKS 0x8u
#define USL_LIVE_F_STORE_USER 0x10u
#define USL_LIVE_F_TRACE 0x20u
#define USL_LIVE_F_OWN 0x40u           /* uslab's own cache (kmem_cache, sheaves) */
#define USL_LIVE_F_SLAB 0x80u          /* on the SLAB engine (USLAB_ALLOCATOR=slab) */

#define USL_LIVE_FILE_BYTES                                                                       \
	(sizeof(struct usl_live_header) + USL_LIVE_ROWS * sizeof(struct usl_live_row) +            \
	 USL_LIVE_ALIASES * sizeof(struct usl_live_alias))

/* A process's start (field 22 of /proc/<pid>/stat, clock ticks since boot),
 * which tells a live pid from a reused one: the writer stores its own, a
 * reader compares. 0 if unreadable. open/read: no stdio, no allocation. */
static inline uint64_t usl_live_start_time(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');        /* the command may hold spaces and parentheses */
	/* After ") " come fields 3, 4, ...: skip 19 of them to reach 22. */
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

#endif /* USL_STATS_LIVE_H */
