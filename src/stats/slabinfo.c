/* slabinfo.c - /proc/slabinfo version 2.1 in the kernel's format
 * (uslab_slabinfo; mm/slab_common.c's cache_show with SLUB's get_slabinfo:
 * tunables 0 0 0, every slab counted active, objects free on partial slabs
 * not active), the heap's totals the same rows add up to (for malloc_stats
 * and mallinfo2), and USLAB_STATS's report at exit. A merged cache is one row
 * under its first name, as in the kernel. Locks: walk_lock for reading
 * (usl_cache_for_each), a node's list_lock for each row's snapshot; each row
 * is formatted before it is written; kfree_rcu's counters close it (a
 * comment line) once a flavour is set. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

void usl_cache_slabinfo(struct kmem_cache *s, struct usl_slabinfo *out)
{
	struct usl_node_counts nc;
	memset(out, 0, sizeof(*out));
	if (usl_is_slab(s)) {
		/* The kernel's SLAB rows: objects in the arrays count as active;
		 * active slabs are those not free; its tunables and shared array. */
		struct usl_slab_counts c;
		usl_slab_counts(s, -1, &c);
		out->num_slabs = c.total_slabs;
		out->active_slabs = c.total_slabs - c.free_slabs;
		out->num_objs = c.total_objects;
		out->active_objs = c.total_objects - c.free_objects;
		out->limit = s->limit;
		out->batchcount = s->batchcount;
		out->shared = s->shared;
		out->shared_avail = c.shared_avail;
	} else {
		usl_engine_node_counts(s, -1, &nc);
		out->num_slabs = out->active_slabs = nc.nr_slabs;
		out->num_objs = nc.total_objects;
		out->active_objs = nc.total_objects - nc.partial_free;
	}
	out->objects_per_slab = s->objects;
	out->order = s->order;
}

int uslab_cache_slabinfo(struct kmem_cache *s, struct uslab_slabinfo *out)
{
	if (!s || !out) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_cache_slabinfo: NULL %s; -1 returned", s ? "out" : "cache");
		errno = EINVAL;
		return -1;
	}
	if (!usl_cache_live(s)) {
		usl_report_dead_cache("uslab_cache_slabinfo", s, "-1 returned");
		errno = EINVAL;
		return -1;
	}
	struct usl_slabinfo si;
	usl_cache_slabinfo(s, &si);
	*out = (struct uslab_slabinfo){
		.active_objs = si.active_objs, .num_objs = si.num_objs, .objsize = s->size,
		.objperslab = si.objects_per_slab, .pagesperslab = 1u << si.order, .limit = si.limit,
		.batchcount = si.batchcount, .sharedfactor = si.shared, .active_slabs = si.active_slabs,
		.num_slabs = si.num_slabs, .sharedavail = si.shared_avail,
	};
	return 0;
}

static int show_row(struct kmem_cache *s, void *arg)
{
	FILE *f = arg;
	struct usl_slabinfo si;
	char line[256];

	usl_cache_slabinfo(s, &si);
	snprintf(line, sizeof(line), "%-17s %6lu %6lu %6u %4u %4d : tunables %4u %4u %4u : slabdata %6lu %6lu %6lu\n",
	         s->name, si.active_objs, si.num_objs, s->size, si.objects_per_slab, 1 << si.order, si.limit,
	         si.batchcount, si.shared, si.active_slabs, si.num_slabs, si.shared_avail);
	fputs(line, f);
	return 0;
}

void uslab_slabinfo(FILE *f)
{
	if (!f) {
		usl_report(USLAB_ERR_BAD_ARG, "uslab_slabinfo: NULL stream");
		return;
	}
	usl_ensure_init();
	fputs("slabinfo - version: 2.1\n"
	      "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab>"
	      " : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n",
	      f);
	usl_cache_for_each(show_row, f);
#ifdef USLAB_HAVE_LIBURCU
	/* kfree_rcu's objects, once a flavour is set: a comment line, which
	 * slabinfo readers skip as they skip the header's. */
	struct uslab_rcu_stats r;
	if (uslab_rcu_stats(&r) == 0 && r.flavor_set)
		fprintf(f, "# kfree_rcu: queued %lu batches %lu freed %lu waiting %lu refused %lu waits %lu slabs_waiting %lu "
		        "sheaves %lu\n", r.queued, r.batches, r.freed, r.waiting, r.refused, r.waits, r.slabs_waiting,
		        usl_rcu_sheaves());
#endif
	fflush(f);
}

static int add_totals(struct kmem_cache *s, void *arg)
{
	struct usl_heap_totals *t = arg;
	struct usl_slabinfo si;
	usl_cache_slabinfo(s, &si);
	unsigned long long slab = (unsigned long long)si.num_slabs * usl_order_bytes(si.order);
	unsigned long long active = (unsigned long long)si.active_objs * s->size;
	if (s->flags & USL_SLAB_INTERNAL) {
		t->own_slab_bytes += slab;
		t->own_active_bytes += active;
	} else {
		t->slab_bytes += slab;
		t->active_bytes += active;
		for (unsigned int nid = 0; usl_nr_nodes > 1 && nid < usl_nr_nodes; nid++) {
			struct usl_node_counts nc;
			usl_engine_node_counts(s, (int)nid, &nc);
			t->node_slab_bytes[nid] += (unsigned long long)nc.nr_slabs * usl_order_bytes(s->order);
			t->node_active_bytes[nid] += (unsigned long long)(nc.total_objects - nc.partial_free) * s->size;
		}
	}
	t->caches++;
	return 0;
}

void usl_heap_totals(struct usl_heap_totals *out)
{
	memset(out, 0, sizeof(*out));
	usl_cache_for_each(add_totals, out);
}

/* USLAB_STATS=1: slabinfo on stderr at exit; =<path>: into that file. Called
 * by the live view's destructor (stats/live.c: after the program's own exit
 * handlers), which a static link keeps. */
pid_t usl_stats_pid;

void usl_stats_exit_report(void)
{
	const char *to = usl_opt.stats_out;
	if (!to)
		return;
	if (!*to) {
		uslab_slabinfo(stderr);
		return;
	}
	/* A forked child's report goes beside its parent's: <path>.<its pid>. */
	char child_path[600];
	if (getpid() != usl_stats_pid) {
		snprintf(child_path, sizeof(child_path), "%s.%ld", to, (long)getpid());
		to = child_path;
	}
	FILE *f = fopen(to, "w");
	if (!f) {
		usl_report(USLAB_ERR_OPTION, "USLAB_STATS: cannot write %s (%s); slabinfo not saved", to, strerror(errno));
		return;
	}
	uslab_slabinfo(f);
	fclose(f);
}

/* The kernel's /proc/slabinfo write: "name limit batchcount shared". */
int uslab_slabinfo_write(const char *line)
{
	char name[USL_NAME_MAX];
	size_t n = 0;
	if (!line) {
		errno = EINVAL;
		return -1;
	}
	while (*line == ' ' || *line == '\t')
		line++;
	while (line[n] && line[n] != ' ' && line[n] != '\t' && n + 1 < sizeof(name)) {
		name[n] = line[n];
		n++;
	}
	name[n] = 0;
	if (!n || (line[n] != ' ' && line[n] != '\t')) {
		errno = EINVAL;
		return -1;
	}
	struct kmem_cache *s = uslab_cache_find(name);
	if (!s) {
		errno = ENOENT;
		return -1;
	}
	return uslab_cache_attr_write(s, "tunables", line + n);
}
