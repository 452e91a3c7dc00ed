/* attr.c - the kernel's /sys/kernel/slab/<cache>/ attributes as a C API
 * (uslab_cache_attr, uslab_cache_attr_write): the same names and the same
 * text ("%u\n"; "total N0=n" for node counts; "sum C0=n C1=m" for a counter),
 * the writable ones writable (min_partial, cpu_partial, shrink, validate, a
 * counter reset by "0"), and the owner summaries of a cache with U (the
 * kernel's alloc_calls and free_calls, and its debugfs alloc_traces and
 * free_traces). Locks: a node's list_lock for a snapshot of its partial list
 * (usl_slub_node_counts); shrink, validate and the summaries take theirs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

const char *const usl_stat_names[USL_NR_STATS] = {
	[USL_ALLOC_PCS] = "alloc_cpu_sheaf",
	[USL_ALLOC_FASTPATH] = "alloc_fastpath",
	[USL_ALLOC_SLOWPATH] = "alloc_slowpath",
	[USL_FREE_PCS] = "free_cpu_sheaf",
	[USL_FREE_RCU_SHEAF] = "free_rcu_sheaf",
	[USL_FREE_RCU_SHEAF_FAIL] = "free_rcu_sheaf_fail",
	[USL_FREE_FASTPATH] = "free_fastpath",
	[USL_FREE_SLOWPATH] = "free_slowpath",
	[USL_FREE_FROZEN] = "free_frozen",
	[USL_FREE_ADD_PARTIAL] = "free_add_partial",
	[USL_FREE_REMOVE_PARTIAL] = "free_remove_partial",
	[USL_ALLOC_FROM_PARTIAL] = "alloc_from_partial",
	[USL_ALLOC_SLAB] = "alloc_slab",
	[USL_ALLOC_REFILL] = "alloc_refill",
	[USL_ALLOC_NODE_MISMATCH] = "alloc_node_mismatch",
	[USL_FREE_SLAB] = "free_slab",
	[USL_CPUSLAB_FLUSH] = "cpuslab_flush",
	[USL_DEACTIVATE_FULL] = "deactivate_full",
	[USL_DEACTIVATE_EMPTY] = "deactivate_empty",
	[USL_DEACTIVATE_TO_HEAD] = "deactivate_to_head",
	[USL_DEACTIVATE_TO_TAIL] = "deactivate_to_tail",
	[USL_DEACTIVATE_REMOTE_FREES] = "deactivate_remote_frees",
	[USL_DEACTIVATE_BYPASS] = "deactivate_bypass",
	[USL_ORDER_FALLBACK] = "order_fallback",
	[USL_CMPXCHG_DOUBLE_CPU_FAIL] = "cmpxchg_double_cpu_fail",
	[USL_CMPXCHG_DOUBLE_FAIL] = "cmpxchg_double_fail",
	[USL_CPU_PARTIAL_ALLOC] = "cpu_partial_alloc",
	[USL_CPU_PARTIAL_FREE] = "cpu_partial_free",
	[USL_CPU_PARTIAL_NODE] = "cpu_partial_node",
	[USL_CPU_PARTIAL_DRAIN] = "cpu_partial_drain",
	[USL_SHEAF_FLUSH] = "sheaf_flush",
	[USL_SHEAF_REFILL] = "sheaf_refill",
	[USL_SHEAF_ALLOC] = "sheaf_alloc",
	[USL_SHEAF_FREE] = "sheaf_free",
	[USL_BARN_GET] = "barn_get",
	[USL_BARN_GET_FAIL] = "barn_get_fail",
	[USL_BARN_PUT] = "barn_put",
	[USL_BARN_PUT_FAIL] = "barn_put_fail",
	[USL_SHEAF_PREFILL_FAST] = "sheaf_prefill_fast",
	[USL_SHEAF_PREFILL_SLOW] = "sheaf_prefill_slow",
	[USL_SHEAF_PREFILL_OVERSIZE] = "sheaf_prefill_oversize",
	[USL_SHEAF_RETURN_FAST] = "sheaf_return_fast",
	[USL_SHEAF_RETURN_SLOW] = "sheaf_return_slow",
	[USL_CMPXCHG_DOUBLE] = "cmpxchg_double",
	[USL_LIST_LOCK] = "list_lock",
};

static inline uint64_t *stat_cell(const struct kmem_cache *s, unsigned int cpu, enum usl_stat_item i)
{
	return s->stats + (size_t)cpu * USL_STAT_STRIDE + i;
}

unsigned long long usl_stat_sum(const struct kmem_cache *s, enum usl_stat_item i)
{
	unsigned long long sum = 0;
	if (!s->stats)
		return 0;
	for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++)
		sum += __atomic_load_n(stat_cell(s, cpu, i), __ATOMIC_RELAXED);
	return sum;
}

/* ===========================================================================
 * Text into the caller's buffer: the length it would take is counted, as
 * snprintf counts, and the text cut (NUL-terminated) where it does not fit.
 */
struct out {
	char *buf;
	size_t size, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->size ? o->size - o->len : 0;
	int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* ===========================================================================
 * The attributes
 */

/* A node count in the kernel's text: the total, then " N<node>=<count>" for
 * each node that has some. */
static void show_nodes(struct out *o, const unsigned long *per)
{
	unsigned long total = 0;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		total += per[nid];
	put(o, "%lu", total);
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++)
		if (per[nid])
			put(o, " N%u=%lu", nid, per[nid]);
	put(o, "\n");
}

static void show_counter(struct out *o, const struct kmem_cache *s, enum usl_stat_item i)
{
	put(o, "%llu", usl_stat_sum(s, i));
	for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++) {
		uint64_t v = __atomic_load_n(stat_cell(s, cpu, i), __ATOMIC_RELAXED);
		if (v)
			put(o, " C%u=%llu", cpu, (unsigned long long)v);
	}
	put(o, "\n");
}

enum attr_id {
	A_SLAB_SIZE, A_OBJECT_SIZE, A_OBJS_PER_SLAB, A_ORDER, A_MIN_PARTIAL, A_CPU_PARTIAL, A_OBJECTS,
	A_OBJECTS_PARTIAL, A_PARTIAL, A_CPU_SLABS, A_SLABS_CPU_PARTIAL, A_CTOR, A_ALIASES, A_ALIGN,
	A_HWCACHE_ALIGN, A_RECLAIM_ACCOUNT, A_DESTROY_BY_RCU, A_SHEAF_CAPACITY, A_SANITY_CHECKS, A_TRACE,
	A_RED_ZONE, A_POISON, A_STORE_USER, A_SLABS, A_TOTAL_OBJECTS, A_VALIDATE, A_SHRINK, A_ALLOCATOR,
	A_TUNABLES, A_ALLOC_CALLS, A_FREE_CALLS, A_ALLOC_TRACES, A_FREE_TRACES, A_NR
};

static const char *const attr_names[A_NR + USL_NR_STATS + 1] = {
	"slab_size", "object_size", "objs_per_slab", "order", "min_partial", "cpu_partial", "objects",
	"objects_partial", "partial", "cpu_slabs", "slabs_cpu_partial", "ctor", "aliases", "align",
	"hwcache_align", "reclaim_account", "destroy_by_rcu", "sheaf_capacity", "sanity_checks", "trace",
	"red_zone", "poison", "store_user", "slabs", "total_objects", "validate", "shrink",
	/* uslab's: the cache's engine, and SLAB's tunables ("limit batchcount shared",
	 * the kernel's /proc/slabinfo columns and write) */
	"allocator", "tunables",
	/* the owner summaries of a cache with U: the kernel's sysfs files (one
	 * line per call site) and its debugfs ones (one per call stack, the
	 * stack below it) */
	"alloc_calls", "free_calls", "alloc_traces", "free_traces",
	/* then the counters (usl_stat_names), filled in by attr_list */
};

static int attr_lookup(const char *name)
{
	for (int i = 0; i < A_NR; i++)
		if (!strcmp(attr_names[i], name))
			return i;
	for (int i = 0; i < USL_NR_STATS; i++)
		if (!strcmp(usl_stat_names[i], name))
			return A_NR + i;
	return -1;
}

static void show_cpu_partial(struct out *o, struct kmem_cache *s)
{
	unsigned int total = 0, objs = s->objects;
	for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++) {
		bool has;
		unsigned int n;
		usl_slub_cpu_counts(s, cpu, &has, &n);
		total += n;
	}
	/* Objects as the kernel estimates them: half-full slabs. */
	put(o, "%u(%u)", total * objs / 2, total);
	for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++) {
		bool has;
		unsigned int n;
		usl_slub_cpu_counts(s, cpu, &has, &n);
		if (n)
			put(o, " C%u=%u(%u)", cpu, n * objs / 2, n);
	}
	put(o, "\n");
}

static void show(struct out *o, struct kmem_cache *s, int id)
{
	unsigned long per[USL_MAX_NODES] = { 0 };
	slab_flags_t f = s->flags;

	switch (id) {
	case A_SLAB_SIZE: put(o, "%u\n", s->size); return;
	case A_OBJECT_SIZE: put(o, "%u\n", __atomic_load_n(&s->object_size, __ATOMIC_RELAXED)); return;
	case A_OBJS_PER_SLAB: put(o, "%u\n", s->objects); return;
	case A_ORDER: put(o, "%u\n", s->order); return;
	case A_MIN_PARTIAL: put(o, "%u\n", __atomic_load_n(&s->min_partial, __ATOMIC_RELAXED)); return;
	case A_CPU_PARTIAL: put(o, "%u\n", __atomic_load_n(&s->cpu_partial, __ATOMIC_RELAXED)); return;
	case A_SHEAF_CAPACITY: put(o, "%u\n", s->sheaf_capacity); return;
	case A_ALIGN: put(o, "%u\n", s->align); return;
	case A_ALIASES: put(o, "%d\n", s->refcount > 0 ? s->refcount - 1 : 0); return;
	case A_HWCACHE_ALIGN: put(o, "%d\n", !!(f & SLAB_HWCACHE_ALIGN)); return;
	case A_RECLAIM_ACCOUNT: put(o, "0\n"); return;   /* no such flag here */
	case A_DESTROY_BY_RCU: put(o, "%d\n", !!(f & SLAB_TYPESAFE_BY_RCU)); return;
	case A_SANITY_CHECKS: put(o, "%d\n", !!(f & SLAB_CONSISTENCY_CHECKS)); return;
	case A_TRACE: put(o, "%d\n", !!(f & SLAB_TRACE)); return;
	case A_RED_ZONE: put(o, "%d\n", !!(f & SLAB_RED_ZONE)); return;
	case A_POISON: put(o, "%d\n", !!(f & SLAB_POISON)); return;
	case A_STORE_USER: put(o, "%d\n", !!(f & SLAB_STORE_USER)); return;
	case A_VALIDATE: case A_SHRINK: return;      /* write-only in effect: empty */
	case A_ALLOCATOR: put(o, "%s\n", usl_is_slab(s) ? "slab" : "slub"); return;
	case A_TUNABLES:
		put(o, "%u %u %u\n", __atomic_load_n(&s->limit, __ATOMIC_RELAXED),
		    __atomic_load_n(&s->batchcount, __ATOMIC_RELAXED), __atomic_load_n(&s->shared, __ATOMIC_RELAXED));
		return;
	case A_CTOR:
		if (s->ctor) {
			Dl_info di;
			if (dladdr((void *)(uintptr_t)s->ctor, &di) && di.dli_sname)
				put(o, "%s+0x%lx\n", di.dli_sname, (unsigned long)((uintptr_t)s->ctor - (uintptr_t)di.dli_saddr));
			else
				put(o, "0x%lx\n", (unsigned long)(uintptr_t)s->ctor);
		}
		return;
	case A_CPU_SLABS:                 /* counted on their CPU's node */
		for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++) {
			bool has;
			unsigned int n;
			usl_slub_cpu_counts(s, cpu, &has, &n);
			per[usl_node_of_cpu((int)cpu)] += has + n;
		}
		show_nodes(o, per);
		return;
	case A_SLABS_CPU_PARTIAL: show_cpu_partial(o, s); return;
	default: break;
	}
	if (id >= A_NR) {
		show_counter(o, s, (enum usl_stat_item)(id - A_NR));
		return;
	}
	if (id != A_OBJECTS && id != A_OBJECTS_PARTIAL && id != A_PARTIAL && id != A_SLABS && id != A_TOTAL_OBJECTS)
		return;
	for (unsigned int nid = 0; nid < usl_nr_nodes; nid++) {
		struct usl_node_counts nc;
		usl_engine_node_counts(s, (int)nid, &nc);
		per[nid] = id == A_OBJECTS ? nc.total_objects - nc.partial_free
		         : id == A_OBJECTS_PARTIAL ? nc.partial_inuse
		         : id == A_PARTIAL ? nc.nr_partial
		         : id == A_SLABS ? nc.nr_slabs : nc.total_objects;
	}
	show_nodes(o, per);
}

/* ===========================================================================
 * The owner summaries, in the kernel's text: per location its count, call
 * site, waste (kmalloc), age in ms (min/avg/max), pids, CPUs and nodes; the
 * call sites by address, the stacks by count, most first, each followed by
 * its frames.
 */

static int by_addr(const void *a, const void *b)
{
	const struct usl_location *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->waste < y->waste ? -1 : x->waste > y->waste;
}

static int by_count(const void *a, const void *b)
{
	const struct usl_location *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return by_addr(a, b);
}

/* A set of ids as the kernel's %*pbl prints it: "0-3,6". */
static void put_ranges(struct out *o, const uint64_t *bits, unsigned int nbits)
{
	bool first = true;
	for (unsigned int i = 0; i < nbits; i++) {
		if (!(bits[i / 64] >> (i % 64) & 1))
			continue;
		unsigned int j = i;
		while (j + 1 < nbits && (bits[(j + 1) / 64] >> ((j + 1) % 64) & 1))
			j++;
		put(o, j > i ? "%s%u-%u" : "%s%u", first ? "" : ",", i, j);
		first = false;
		i = j;
	}
}

static int show_locations(struct out *o, struct kmem_cache *s, bool free_track, bool traces)
{
	struct usl_loc_list list;
	int err = usl_debug_locations(s, free_track, traces, &list);
	if (err)
		return err;
	qsort(list.loc, list.n, sizeof(*list.loc), traces ? by_count : by_addr);
	char sym[320];
	for (size_t i = 0; i < list.n; i++) {
		const struct usl_location *l = &list.loc[i];
		put(o, "%7lu ", l->count);
		if (l->addr) {
			usl_symbolize(l->addr, sym, sizeof(sym));
			put(o, "%s", sym);
		} else {
			put(o, "<not-available>");
		}
		if (l->waste)
			put(o, " waste=%lu/%u", l->count * l->waste, l->waste);
		if (l->sum_age != l->min_age)
			put(o, " age=%llu/%llu/%llu", (unsigned long long)l->min_age,
			    (unsigned long long)(l->sum_age / l->count), (unsigned long long)l->max_age);
		else
			put(o, " age=%llu", (unsigned long long)l->min_age);
		if (l->min_pid != l->max_pid)
			put(o, " pid=%d-%d", l->min_pid, l->max_pid);
		else
			put(o, " pid=%d", l->min_pid);
		if (usl_nr_cpus > 1) {
			put(o, " cpus=");
			put_ranges(o, l->cpus, USL_LOC_CPUS);
		}
		if (usl_nr_nodes > 1) {
			put(o, " nodes=");
			put_ranges(o, &l->nodes, 64);
		}
		put(o, "\n");
		if (traces && l->handle) {
			uintptr_t pc[USL_STACK_MAX];
			unsigned int depth = usl_stack_get(l->handle, pc, USL_STACK_MAX);
			for (unsigned int k = 0; k < depth; k++) {
				usl_symbolize(pc[k], sym, sizeof(sym));
				put(o, "        %s\n", sym);
			}
		}
		if (traces)
			put(o, "\n");
	}
	if (!list.n)
		put(o, "No data\n");
	usl_debug_locations_free(&list);
	return 0;
}

/* A cache argument: NULL or destroyed is reported (EINVAL). */
static bool cache_ok(struct kmem_cache *s, const char *fn)
{
	if (!s) {
		usl_report(USLAB_ERR_BAD_ARG, "%s: NULL cache", fn);
		errno = EINVAL;
		return false;
	}
	if (!usl_cache_live(s)) {
		usl_report_dead_cache(fn, s, "nothing read or written");
		errno = EINVAL;
		return false;
	}
	return true;
}

int uslab_cache_attr(struct kmem_cache *s, const char *attr, char *buf, size_t size)
{
	if (!cache_ok(s, "uslab_cache_attr"))
		return -1;
	int id = attr ? attr_lookup(attr) : -1;
	if (id < 0) {
		errno = ENOENT;
		return -1;
	}
	if (id >= A_NR && !s->stats) {
		errno = EOPNOTSUPP;      /* counters are kept with USLAB_STATS only */
		return -1;
	}
	struct out o = { buf, buf ? size : 0, 0 };
	if (o.size)
		buf[0] = 0;
	if (id >= A_ALLOC_CALLS && id <= A_FREE_TRACES) {
		/* Only a cache with U has owners (ENOSYS, as the kernel's files). */
		int err = show_locations(&o, s, id == A_FREE_CALLS || id == A_FREE_TRACES, id >= A_ALLOC_TRACES);
		if (err) {
			errno = -err;
			return -1;
		}
	} else {
		show(&o, s, id);
	}
	return o.len > (size_t)0x7fffffff ? 0x7fffffff : (int)o.len;
}

/* A whole number in [0, max] with an optional '\n' after it, as sysfs's
 * kstrtouint takes it. */
static bool parse_uint(const char *v, unsigned long max, unsigned long *out)
{
	char *end;
	if (!v || *v < '0' || *v > '9')
		return false;
	int saved = errno;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	bool bad = errno || (*end && !(end[0] == '\n' && !end[1])) || x > max;
	errno = saved;
	if (bad)
		return false;
	*out = x;
	return true;
}

int uslab_cache_attr_write(struct kmem_cache *s, const char *attr, const char *value)
{
	unsigned long x;

	if (!cache_ok(s, "uslab_cache_attr_write"))
		return -1;
	int id = attr ? attr_lookup(attr) : -1;
	if (id < 0) {
		errno = ENOENT;
		return -1;
	}
	if (!value) {
		errno = EINVAL;
		return -1;
	}
	if (id >= A_NR) {
		if (!s->stats) {
			errno = EOPNOTSUPP;
			return -1;
		}
		if (value[0] != '0' || (value[1] && strcmp(value + 1, "\n"))) {
			errno = EINVAL;          /* only "0": the kernel's clear_stat */
			return -1;
		}
		for (unsigned int cpu = 0; cpu < usl_nr_cpus; cpu++)
			__atomic_store_n(stat_cell(s, cpu, (enum usl_stat_item)(id - A_NR)), 0, __ATOMIC_RELAXED);
		return 0;
	}
	switch (id) {
	case A_MIN_PARTIAL:
		if (!parse_uint(value, 1u << 20, &x))
			break;
		__atomic_store_n(&s->min_partial, (unsigned int)x, __ATOMIC_RELAXED);
		return 0;
	case A_CPU_PARTIAL:
		/* The kernel refuses a nonzero value for a cache without cpu
		 * partial lists (debug caches here). */
		if (!parse_uint(value, 1u << 20, &x) || (x && (s->flags & USL_SLAB_DEBUG_FLAGS)))
			break;
		usl_slub_set_cpu_partial(s, (unsigned int)x);
		return 0;
	case A_TUNABLES: {
		/* "limit batchcount shared", as the kernel's slabinfo write takes
		 * them; a SLUB cache has none (EOPNOTSUPP). */
		unsigned long v[3];
		const char *q = value;
		if (!usl_is_slab(s)) {
			errno = EOPNOTSUPP;
			return -1;
		}
		for (int i = 0; i < 3; i++) {
			char *end;
			while (*q == ' ' || *q == '\t')
				q++;
			if (*q < '0' || *q > '9')
				goto bad;
			errno = 0;
			v[i] = strtoul(q, &end, 10);
			if (errno || v[i] > 1u << 20)
				goto bad;
			q = end;
		}
		while (*q == ' ' || *q == '\t' || *q == '\n')
			q++;
		if (*q)
			break;
		int r = usl_cache_tune(s, (unsigned int)v[0], (unsigned int)v[1], (unsigned int)v[2]);
		if (r) {
			errno = -r;
			return -1;
		}
		return 0;
	}
	case A_SHRINK:
		if (value[0] != '1')
			break;
		return kmem_cache_shrink(s) < 0 ? -1 : 0;
	case A_VALIDATE:
		if (value[0] != '1' || !(s->flags & USL_SLAB_DEBUG_FLAGS))
			break;       /* the kernel validates debug caches only */
		return kmem_cache_validate(s) < 0 ? -1 : 0;
	default:
		errno = EACCES;  /* read-only */
		return -1;
	}
bad:
	errno = EINVAL;
	return -1;
}

const char *const *uslab_cache_attrs(void)
{
	static const char *all[A_NR + USL_NR_STATS + 1];
	if (!__atomic_load_n(&all[0], __ATOMIC_ACQUIRE)) {
		const char *tmp[A_NR + USL_NR_STATS + 1];
		for (int i = 0; i < A_NR; i++)
			tmp[i] = attr_names[i];
		for (int i = 0; i < USL_NR_STATS; i++)
			tmp[A_NR + i] = usl_stat_names[i];
		tmp[A_NR + USL_NR_STATS] = NULL;
		for (int i = A_NR + USL_NR_STATS - 1; i >= 0; i--)   /* all[0] last: the flag */
			__atomic_store_n(&all[i], tmp[i], __ATOMIC_RELEASE);
	}
	return all;
}

/* A static link that uses the statistics keeps the live view's file too (its
 * constructor is named nowhere else; the malloc override names it as well). */
__attribute__((used)) static void (*const keep_live_view)(void) = usl_live_init;

int uslab_stats_enabled(void)
{
	usl_ensure_init();
	return usl_opt.stats;
}

struct find_arg {
	const char *name;
	struct kmem_cache *found;
};

static int find_one(struct kmem_cache *s, void *arg)
{
	struct find_arg *a = arg;
	if (strcmp(s->name, a->name))
		return 0;
	a->found = s;
	return 1;
}

struct kmem_cache *uslab_cache_find(const char *name)
{
	struct find_arg a = { name, NULL };
	if (!name)
		return NULL;
	usl_ensure_init();
	usl_cache_for_each(find_one, &a);
	return a.found;
}

int uslab_for_each_cache(int (*fn)(struct kmem_cache *s, void *arg), void *arg)
{
	if (!fn)
		return 0;
	usl_ensure_init();
	return usl_cache_for_each(fn, arg);
}
