/* debug.c - debug caches: those created with SLAB_CONSISTENCY_CHECKS,
 * SLAB_RED_ZONE, SLAB_POISON, SLAB_STORE_USER or SLAB_TRACE, or named by
 * USLAB_DEBUG. Their object layout (docs/ARCHITECTURE.md, "Object layout"), and
 * every allocation and free of them: under the node's list_lock, with no cpu
 * slab and no sheaves, each object checked (red zones, poison, padding, free
 * pointer), its owner recorded, and what was overwritten reported in the
 * kernel's shape and repaired (the kernel's alloc_debug_processing,
 * free_debug_processing, check_object, print_trailer, restore_bytes);
 * validation of every slab (validate_slab_cache), the leak listing at
 * destroy and the walk the owner summaries make (debug_owners.c); what the
 * quarantine hands back (its ring is quarantine.c's). Objects come
 * from slabs set up whole (no lazy carving), linked through their free
 * pointers; an object in use holds a mark in its free-pointer word.
 * Locks: the node's list_lock; reports are collected while it is held and
 * delivered after it is released (a handler may allocate; debug_out.c);
 * objmap_lock (the free-object map of validation, the leak listing and the
 * summaries), then the quarantine's q_lock (quarantine.c) at fork,
 * ordered as docs/ARCHITECTURE.md, "Locks, in order" says. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "slub.h"
#include "debug_out.h"
#include "debug.h"
#include "quarantine.h"

/* ===========================================================================
 * Layout (the kernel's calculate_sizes, for the debug flags)
 */

unsigned int usl_debug_layout(struct kmem_cache *s, bool creator_fp)
{
	const unsigned int word = sizeof(void *);
	slab_flags_t f = s->flags;
	unsigned int size = USL_ALIGN(s->object_size, word);
	/* A kmalloc class of a power-of-two size is naturally aligned (the
	 * kernel's rule), above the page too, where s->align stops: its left red
	 * zone and its stride are whole multiples of the size. */
	unsigned int align = s->align;
	if ((f & USL_SLAB_KMALLOC) && !(s->object_size & (s->object_size - 1)) && s->object_size > align)
		align = s->object_size;

	/* A right red zone of at least a word, even when the size is aligned. */
	if ((f & SLAB_RED_ZONE) && size == s->object_size)
		size += word;
	s->inuse = size;
	/* The free pointer leaves the object when the object's bytes must keep
	 * something while free: poison, constructed state, a kmalloc red zone. */
	if (!creator_fp && ((f & SLAB_POISON) || usl_keeps_state(s) ||
	                    ((f & SLAB_RED_ZONE) && (s->object_size < word || orig_size_kept(s))))) {
		s->offset = size;
		size += word;
	} else if (!creator_fp) {
		s->offset = (s->object_size / 2) & ~(word - 1);
	}
	s->info_end = size;
	if (f & SLAB_STORE_USER)
		size += 2 * (unsigned int)sizeof(struct usl_track);
	if (orig_size_kept(s))
		size += (unsigned int)sizeof(unsigned long);
	s->red_left_pad = 0;
	if (f & SLAB_RED_ZONE) {
		size += word;          /* a word of padding after the metadata */
		s->red_left_pad = USL_ALIGN(word, align);
		size += s->red_left_pad;
	}
	return USL_ALIGN(size, align);
}

static void out_bug(struct usl_dbg_out *o, const struct kmem_cache *s, const char *msg)
{
	usl_out_printf(o, "=============================================================================\n"
	              "BUG %s (Not tainted): %s\n"
	              "-----------------------------------------------------------------------------\n\n",
	           s->name, msg);
}

static void out_track(struct usl_dbg_out *o, const struct kmem_cache *s, void *obj, int which, uint64_t now)
{
	const struct usl_track *t = track_of(s, obj, which);
	if (!t->addr)
		return;
	usl_out_printf(o, "%s in %c%016lx age=%llu cpu=%d pid=%d\n", which == TRACK_ALLOC ? "Allocated" : "Freed", USL_TOK_ADDR,
	           (unsigned long)t->addr, (unsigned long long)(now - t->when), t->cpu, t->pid);
	if (t->handle)
		usl_out_printf(o, "%c%08x", USL_TOK_STACK, t->handle);
}

/* The free pointer of obj as stored, decoded (no check). */

/* The kernel's print_slab_info line. */
static void out_slab_line(struct usl_dbg_out *o, const struct kmem_cache *s, const struct slab *slab)
{
	unsigned long c = slab->counters;
	usl_out_printf(o, "Slab 0x%lx objects=%u used=%u fp=0x%lx flags=0x%lx\n", (unsigned long)(uintptr_t)slab->addr,
	           usl_counters_objects(c), usl_counters_inuse(c), (unsigned long)(uintptr_t)slab->freelist,
	           (unsigned long)s->flags & 0xffffffUL);
}

static void out_trailer(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, uint8_t *p)
{
	uint64_t now = usl_now_ms();
	uint8_t *addr = (uint8_t *)slab->addr;
	if (s->flags & SLAB_STORE_USER) {
		out_track(o, s, p, TRACK_ALLOC, now);
		out_track(o, s, p, TRACK_FREE, now);
	}
	out_slab_line(o, s, slab);
	usl_out_printf(o, "Object 0x%lx @offset=%lu fp=0x%lx\n\n", (unsigned long)(uintptr_t)p,
	           (unsigned long)(p - addr), (unsigned long)(uintptr_t)fp_raw(s, p));
	if (s->flags & SLAB_RED_ZONE)
		usl_out_section(o, "Redzone  ", p - s->red_left_pad, s->red_left_pad);
	else if (p >= addr + 16)
		usl_out_section(o, "Bytes b4 ", p - 16, 16);
	size_t shown = s->object_size < USL_PAGE_SIZE ? s->object_size : USL_PAGE_SIZE;
	usl_out_section(o, "Object   ", p, shown);
	if (s->flags & SLAB_RED_ZONE)
		usl_out_section(o, "Redzone  ", p + s->object_size, s->inuse - s->object_size);
	unsigned int off = pad_start(s);
	if (off != size_from_object(s))
		usl_out_section(o, "Padding  ", p + off, size_from_object(s) - off);
}

/* One problem of one object: the BUG report with its trailer. */
static void object_err(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, uint8_t *p, const char *lead,
                       const char *msg)
{
	usl_out_begin(o, USLAB_ERR_SLAB_BUG);
	if (lead)
		usl_out_printf(o, "%s\n", lead);
	out_bug(o, s, msg);
	out_trailer(o, s, slab, p);
	usl_out_end(o);
}

static void slab_err(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void slab_err(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, const char *fmt, ...)
{
	char msg[192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	usl_out_begin(o, USLAB_ERR_SLAB_BUG);
	out_bug(o, s, msg);
	out_slab_line(o, s, slab);
	usl_out_end(o);
}

static void slab_fix(struct usl_dbg_out *o, const struct kmem_cache *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void slab_fix(struct usl_dbg_out *o, const struct kmem_cache *s, const char *fmt, ...)
{
	char msg[192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	usl_out_begin(o, USLAB_ERR_SLAB_FIX);
	usl_out_printf(o, "FIX %s: %s", s->name, msg);
	usl_out_end(o);
}

/* ===========================================================================
 * Checks
 */

/* An object's problems, gathered so that it gets one BUG report with every
 * overwritten range named, then a FIX line each. */
struct obj_check {
	char lines[512];
	size_t n;
	struct {
		const char *what;
		uint8_t *from, *to;
		uint8_t value;
	} fix[6];
	int nfix;
};

/* [start, start + n) must all be value: else noted, at its offset from base
 * (the slab), and restored by finish_object. */
static bool check_bytes(struct obj_check *c, uint8_t *base, const char *what, uint8_t *start, uint8_t value, size_t n)
{
	/* 64 bytes with one branch, then eight at a time (the kernel's
	 * memchr_inv does eight): the poison check was a fifth of FZPU's time
	 * on a 256-byte pair. */
	const uint64_t pattern = 0x0101010101010101ull * value;
	size_t i = 0;
	while (i + 64 <= n) {
		uint64_t acc = 0;
		for (int k = 0; k < 8; k++) {
			uint64_t w;
			memcpy(&w, start + i + 8 * k, 8);
			acc |= w ^ pattern;
		}
		if (acc)
			break;
		i += 64;
	}
	while (i + 8 <= n) {
		uint64_t w;
		memcpy(&w, start + i, 8);
		if (w != pattern)
			break;
		i += 8;
	}
	while (i < n && start[i] == value)
		i++;
	if (i == n)
		return true;
	uint8_t *fault = start + i, *end = start + n;
	while (end > fault && end[-1] == value)
		end--;
	if (c->n < sizeof(c->lines))
		c->n += (size_t)snprintf(c->lines + c->n, sizeof(c->lines) - c->n,
		                         "%s[%s overwritten] 0x%lx-0x%lx @offset=%lu. First byte 0x%x instead of 0x%x",
		                         c->n ? "\n" : "", what, (unsigned long)(uintptr_t)fault,
		                         (unsigned long)(uintptr_t)(end - 1), (unsigned long)(fault - base), *fault, value);
	if (c->n > sizeof(c->lines))
		c->n = sizeof(c->lines);
	if (c->nfix < 6) {
		c->fix[c->nfix].what = what;
		c->fix[c->nfix].from = fault;
		c->fix[c->nfix].to = end;
		c->fix[c->nfix].value = value;
		c->nfix++;
	}
	return false;
}

/* Report what check_object found, then restore it. */
static void finish_object(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, uint8_t *p, struct obj_check *c)
{
	object_err(o, s, slab, p, c->lines, "Object corrupt");
	for (int i = 0; i < c->nfix; i++) {
		memset(c->fix[i].from, c->fix[i].value, (size_t)(c->fix[i].to - c->fix[i].from));
		slab_fix(o, s, "Restoring %s 0x%lx-0x%lx=0x%x", c->fix[i].what, (unsigned long)(uintptr_t)c->fix[i].from,
		         (unsigned long)(uintptr_t)(c->fix[i].to - 1), c->fix[i].value);
	}
}

/* What an object's free-pointer word holds from its allocation on (odd:
 * never a link), so that its free need not walk the free list (maybe_free).
 * In the object's bytes its owner may overwrite it; outside them it must
 * stay (check_object). */
static inline void *in_use_mark(void *p)
{
	return (char *)p + 1;
}

/* Is x an object start of slab? */
static bool valid_pointer(const struct kmem_cache *s, const struct slab *slab, const void *x)
{
	if (!x)
		return true;
	uintptr_t base = (uintptr_t)slab->addr + s->red_left_pad;
	if ((uintptr_t)x < base)
		return false;
	uintptr_t off = (uintptr_t)x - base;
	return off % s->size == 0 && off / s->size < usl_counters_objects(slab->counters);
}

/* The kernel's check_object: val RED_ACTIVE for an allocated object,
 * RED_INACTIVE for a free one. False (reported and repaired) on a problem. */
static bool check_object(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, uint8_t *p, uint8_t val)
{
	struct obj_check c;
	c.n = 0;
	c.nfix = 0;
	c.lines[0] = 0;
	uint8_t *endobject = p + s->object_size;
	uint8_t *base = (uint8_t *)slab->addr;   /* offsets from the slab, as the kernel prints them */
	bool ok = true;

	if (s->flags & SLAB_RED_ZONE) {
		ok &= check_bytes(&c, base, "Left Redzone", p - s->red_left_pad, val, s->red_left_pad);
		ok &= check_bytes(&c, base, "Right Redzone", endobject, val, s->inuse - s->object_size);
		if (orig_size_kept(s) && val == RED_ACTIVE) {
			unsigned int orig = orig_size(s, p);
			if (orig < s->object_size)
				ok &= check_bytes(&c, base, "kmalloc Redzone", p + orig, val, s->object_size - orig);
		}
	} else if ((s->flags & SLAB_POISON) && s->object_size < s->inuse) {
		ok &= check_bytes(&c, base, "Alignment padding", endobject, POISON_INUSE, s->inuse - s->object_size);
	}
	if (s->flags & SLAB_POISON) {
		if (val != RED_ACTIVE && poisons(s) && s->object_size) {
			ok &= check_bytes(&c, base, "Poison", p, POISON_FREE, s->object_size - 1);
			ok &= check_bytes(&c, base, "End Poison", p + s->object_size - 1, POISON_END, 1);
		}
		unsigned int off = pad_start(s), end = size_from_object(s);
		if (off < end)
			ok &= check_bytes(&c, base, "Object padding", p + off, POISON_INUSE, end - off);
	}
	if (!ok)
		finish_object(o, s, slab, p, &c);
	/* The free pointer, where it is not the object's own data: a link, or
	 * in an object in use the mark its allocation left. */
	if ((fp_outside(s) || val == RED_INACTIVE) && !valid_pointer(s, slab, fp_raw(s, p)) &&
	    !(val == RED_ACTIVE && fp_raw(s, p) == in_use_mark(p))) {
		object_err(o, s, slab, p, NULL, "Freepointer corrupt");
		/* (a free object: the rest of that list is lost) */
		usl_set_freepointer(s, p, val == RED_ACTIVE ? in_use_mark(p) : NULL);
		ok = false;
	}
	return ok;
}

/* The kernel's check_slab. */
static bool check_slab(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab)
{
	unsigned int max = (unsigned int)(usl_order_bytes(slab->order) / s->size);
	unsigned long c = slab->counters;
	if (slab->slab_cache != s || slab->kind != USL_PAGE_SLAB) {
		slab_err(o, s, slab, "Not a valid slab page");
		return false;
	}
	if (usl_counters_objects(c) > max) {
		slab_err(o, s, slab, "objects %u > max %u", usl_counters_objects(c), max);
		return false;
	}
	if (usl_counters_inuse(c) > usl_counters_objects(c)) {
		slab_err(o, s, slab, "inuse %u > max %u", usl_counters_inuse(c), usl_counters_objects(c));
		return false;
	}
	return true;
}

static inline uint8_t *object_at(const struct kmem_cache *s, const struct slab *slab, unsigned int i)
{
	return (uint8_t *)slab->addr + (size_t)i * s->size + s->red_left_pad;
}

/* The kernel's on_freelist: walk slab's free list; true if search is on it.
 * Repairs a corrupt link (cuts the list there) and a wrong in-use count. */
static bool on_freelist(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, void *search)
{
	unsigned int objects = usl_counters_objects(slab->counters), nr = 0;
	void *fp = slab->freelist, *prev = NULL;

	while (fp && nr <= objects) {
		if (fp == search)
			return true;
		if (!valid_pointer(s, slab, fp)) {
			if (prev) {
				object_err(o, s, slab, prev, NULL, "Freechain corrupt");
				usl_set_freepointer(s, prev, NULL);
			} else {
				slab_err(o, s, slab, "Freepointer corrupt");
				slab->freelist = NULL;
				slab->counters = usl_counters_remake(slab->counters, objects, false);
				slab_fix(o, s, "Isolate corrupted freechain");
				return false;
			}
			break;
		}
		prev = fp;
		fp = fp_raw(s, fp);
		nr++;
	}
	if (nr > objects) {
		slab_err(o, s, slab, "Freelist cycle detected");
		slab->freelist = NULL;
		slab->counters = usl_counters_remake(slab->counters, objects, false);
		slab_fix(o, s, "Freelist cleared");
		return false;
	}
	unsigned int inuse = usl_counters_inuse(slab->counters);
	if (inuse != objects - nr) {
		slab_err(o, s, slab, "Wrong object count. Counter is %u but counted were %u", inuse, objects - nr);
		slab->counters = usl_counters_remake(slab->counters, objects - nr, false);
		slab_fix(o, s, "Object count adjusted");
	}
	return search == NULL;
}

/* Could x be on slab's free list? Only if its free-pointer word decodes to a
 * link such a list can hold (NULL, or an object of the slab): the link
 * every free object holds. An object in use holds in_use_mark there, or
 * its owner's data, which, XORed with the cache's key, is almost never such
 * a link. So most frees skip on_freelist's walk, which was most of F's
 * time, and a free object with an intact link is still found by it. */
static inline bool maybe_free(const struct kmem_cache *s, const struct slab *slab, void *x)
{
	return valid_pointer(s, slab, fp_raw(s, x));
}

/* ===========================================================================
 * Object set-up: new slabs, allocation, free
 */

static void init_object(struct kmem_cache *s, uint8_t *p, uint8_t val)
{
	unsigned int poison_size = s->object_size;
	if (s->flags & SLAB_RED_ZONE) {
		memset(p - s->red_left_pad, val, s->red_left_pad);
		if (orig_size_kept(s) && val == RED_ACTIVE)
			poison_size = orig_size(s, p);
		memset(p + poison_size, val, s->inuse - poison_size);
	}
	if (poisons(s) && poison_size) {
		memset(p, POISON_FREE, poison_size - 1);
		p[poison_size - 1] = POISON_END;
	}
}

/* The process's pid for the tracks, read once (getpid is a system call: it
 * was half of U's time) and again in a fork's child (usl_debug_fork_unlock).
 * A vfork child, which runs no fork handler, records its parent's. */
static int32_t track_pid;

static int32_t track_pid_now(void)
{
	int32_t pid = __atomic_load_n(&track_pid, __ATOMIC_RELAXED);
	if (usl_unlikely(!pid)) {
		pid = (int32_t)getpid();
		__atomic_store_n(&track_pid, pid, __ATOMIC_RELAXED);
	}
	return pid;
}

static void set_track(struct kmem_cache *s, void *obj, int which, uintptr_t caller, uint32_t handle)
{
	struct usl_track *t = track_of(s, obj, which);
	t->addr = caller;
	t->handle = handle;
	t->when = usl_now_ms();
	t->cpu = usl_current_cpu();
	t->pid = track_pid_now();
}

/* A new slab, every object set up and on its free list, in order. */
static struct slab *debug_new_slab(struct kmem_cache *s)
{
	void *unused;
	struct slab *slab = usl_new_slab(s, &unused, 0);   /* debug caches keep to node 0 */
	if (!slab)
		return NULL;
	unsigned int objects = usl_counters_objects(slab->counters);
	if (s->flags & SLAB_POISON)
		memset(slab->addr, POISON_INUSE, usl_order_bytes(slab->order));
	void *head = NULL;
	for (unsigned int i = objects; i-- > 0;) {
		uint8_t *p = object_at(s, slab, i);
		init_object(s, p, RED_INACTIVE);
		if (s->flags & SLAB_STORE_USER)
			memset(track_of(s, p, TRACK_ALLOC), 0, 2 * sizeof(struct usl_track));
		if (s->ctor)
			s->ctor(p);
		usl_set_freepointer(s, p, head);
		head = p;
	}
	slab->freelist = head;
	slab->counters = usl_counters_make(0, objects, false);
	return slab;
}

/* SLAB_TRACE: the kernel's trace line, the object's bytes at a free, then
 * the call stack as its dump_stack prints it (handle: the stack from the
 * allocator's caller on; without an unwinder, the caller alone). */
static void trace(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab, void *obj, bool alloc,
                  uintptr_t caller, uint32_t handle)
{
	usl_out_begin(o, USLAB_ERR_NONE);
	usl_out_printf(o, "TRACE %s %s 0x%lx inuse=%u fp=0x%lx\n", s->name, alloc ? "alloc" : "free",
	           (unsigned long)(uintptr_t)obj, usl_counters_inuse(slab->counters),
	           (unsigned long)(uintptr_t)slab->freelist);
	if (!alloc)
		usl_out_section(o, "Object   ", obj, s->object_size < USL_PAGE_SIZE ? s->object_size : USL_PAGE_SIZE);
	usl_out_printf(o, "CPU: %d PID: %d Comm: %s\nCall Trace:\n <TASK>\n", usl_current_cpu(), (int)track_pid_now(),
	               program_invocation_short_name);
	if (handle)
		usl_out_printf(o, "%c%08x", USL_TOK_STACK, handle);
	else if (caller)
		usl_out_printf(o, " %c%016lx\n", USL_TOK_ADDR, (unsigned long)caller);
	usl_out_printf(o, " </TASK>\n");
	usl_out_end(o);
	o->reports--;    /* a trace is no problem */
}

void *usl_debug_alloc(struct kmem_cache *s, gfp_t gfp, size_t orig, uintptr_t caller)
{
	struct kmem_cache_node *n = s->node[0];
	struct usl_dbg_out o = { 0 };
	void *obj = NULL;
	/* The call stack before any lock (the depot takes a leaf lock). */
	uint32_t handle = (s->flags & (SLAB_STORE_USER | SLAB_TRACE)) ? usl_stack_save(1, caller) : 0;

	for (;;) {
		usl_lock(&n->list_lock);
		struct slab *slab = NULL;
		if (!usl_list_empty(&n->partial))
			slab = usl_container_of(n->partial.next, struct slab, slab_list);
		if (!slab) {
			usl_unlock(&n->list_lock);
			slab = debug_new_slab(s);
			if (!slab)
				break;
			usl_lock(&n->list_lock);
			usl_add_partial(n, slab, false);
		}
		obj = slab->freelist;
		if (!obj) {
			/* A repair emptied its list (validation cleared a corrupt
			 * one): it is full now. */
			usl_remove_partial(n, slab);
			usl_list_add_tail(&slab->slab_list, &n->full);
			usl_unlock(&n->list_lock);
			continue;
		}
		bool ok = true;
		if (s->flags & SLAB_CONSISTENCY_CHECKS) {
			ok = check_slab(&o, s, slab) && valid_pointer(s, slab, obj);
			if (ok && !check_object(&o, s, slab, obj, RED_INACTIVE))
				ok = false;
		}
		void *next = obj ? fp_raw(s, obj) : NULL;
		if (ok && !valid_pointer(s, slab, next)) {
			object_err(&o, s, slab, obj, NULL, "Freepointer corrupt");
			ok = false;
		}
		if (!ok) {
			/* Nothing of this slab is handed out again (the kernel's
			 * "Marking all objects used"): it leaves the lists. */
			slab_fix(&o, s, "Marking all objects used");
			slab->freelist = NULL;
			slab->counters = usl_counters_remake(slab->counters, usl_counters_objects(slab->counters), false);
			usl_remove_partial(n, slab);
			usl_list_add_tail(&slab->slab_list, &n->full);
			usl_unlock(&n->list_lock);
			obj = NULL;
			continue;
		}
		slab->freelist = next;
		/* Outside the object, or in its bytes (which are undefined
		 * until its owner writes them): no longer a link. */
		usl_set_freepointer(s, obj, in_use_mark(obj));
		slab->counters = usl_counters_remake(slab->counters, usl_counters_inuse(slab->counters) + 1, false);
		if (!next) {
			usl_remove_partial(n, slab);
			usl_list_add_tail(&slab->slab_list, &n->full);
		}
		if (s->flags & SLAB_STORE_USER)
			set_track(s, obj, TRACK_ALLOC, caller, handle);
		if (orig_size_kept(s))
			*orig_word(s, obj) = orig ? orig : s->object_size;
		init_object(s, obj, RED_ACTIVE);
		if (s->flags & SLAB_TRACE)
			trace(&o, s, slab, obj, true, caller, handle);
		usl_unlock(&n->list_lock);
		break;
	}
	usl_out_deliver(&o);
	if (!obj) {
		if (!(gfp & __GFP_NOWARN))
			usl_report(USLAB_ERR_NOMEM, "kmem_cache_alloc(%s): out of memory", s->name);
		return NULL;
	}
	if (gfp & __GFP_ZERO)
		memset(obj, 0, orig && orig < s->object_size ? orig : s->object_size);
	return obj;
}

/* x, free and set up, onto slab's free list (under list_lock): the slab
 * moves from the full list to the partial one, and an empty slab beyond
 * min_partial is returned for the caller to discard once unlocked. */
static struct slab *put_free(struct kmem_cache *s, struct kmem_cache_node *n, struct slab *slab, void *x)
{
	usl_assert_held(&n->list_lock);
	/* On the full list unless a repair emptied its list in place. */
	bool on_full = !slab->node_partial;
	usl_set_freepointer(s, x, slab->freelist);
	slab->freelist = x;
	unsigned int inuse = usl_counters_inuse(slab->counters) - 1;
	slab->counters = usl_counters_remake(slab->counters, inuse, false);
	if (on_full) {
		usl_list_del(&slab->slab_list);
		usl_add_partial(n, slab, true);
	}
	if (inuse == 0 && n->nr_partial > s->min_partial) {
		usl_remove_partial(n, slab);
		return slab;
	}
	return NULL;
}

/* Put obj (marked, poisoned, counted in use) on its slab's free list, after
 * checking it once more. Takes and releases its list_lock. */
static void link_free(struct kmem_cache *s, void *x, struct usl_dbg_out *o);

/* What the quarantine handed back, released. */
static void release_batch(const struct usl_q_entry *batch, unsigned int n, struct usl_dbg_out *o)
{
	for (unsigned int k = 0; k < n; k++)
		link_free(batch[k].s, batch[k].obj, o);
}

void usl_debug_free(struct kmem_cache *s, void *x, const char *fn, uintptr_t caller)
{
	struct kmem_cache_node *n = s->node[0];
	struct slab *slab = usl_virt_to_slab(x);
	struct usl_dbg_out o = { 0 };
	struct slab *discard = NULL;
	uint32_t handle = (s->flags & (SLAB_STORE_USER | SLAB_TRACE)) ? usl_stack_save(1, caller) : 0;

	usl_lock(&n->list_lock);
	bool ok = slab && slab->slab_cache == s && slab->kind == USL_PAGE_SLAB && valid_pointer(s, slab, x) && x;
	if (!ok) {
		usl_unlock(&n->list_lock);
		usl_refuse_not_object(fn, s->name, x, NULL);
		return;
	}
	if (s->flags & SLAB_CONSISTENCY_CHECKS)
		ok = check_slab(&o, s, slab);
	if (ok && ((maybe_free(s, slab, x) && on_freelist(&o, s, slab, x)) ||
	           (usl_debug_quarantine() && quarantined(s, x)))) {
		object_err(&o, s, slab, x, NULL, "Object already free");
		ok = false;
	}
	if (ok && (s->flags & SLAB_CONSISTENCY_CHECKS) && !check_object(&o, s, slab, x, RED_ACTIVE))
		ok = false;
	if (!ok) {
		/* Kept out of use: it may be damaged, or still someone's. */
		slab_fix(&o, s, "Object at 0x%lx not freed", (unsigned long)(uintptr_t)x);
		usl_unlock(&n->list_lock);
		usl_out_deliver(&o);
		return;
	}
	if (s->flags & SLAB_STORE_USER)
		set_track(s, x, TRACK_FREE, caller, handle);
	if (s->flags & SLAB_TRACE)
		trace(&o, s, slab, x, false, caller, handle);
	init_object(s, x, RED_INACTIVE);
	if (usl_debug_quarantine()) {
		usl_set_freepointer(s, x, x);     /* the mark: waiting in the quarantine */
		usl_unlock(&n->list_lock);
		struct usl_q_entry out[USL_Q_BATCH];
		release_batch(out, usl_quarantine_put(s, x, out), &o);
		usl_out_deliver(&o);
		return;
	}
	discard = put_free(s, n, slab, x);
	usl_unlock(&n->list_lock);
	usl_out_deliver(&o);
	if (discard)
		usl_discard_slab(s, discard);
}

static void link_free(struct kmem_cache *s, void *x, struct usl_dbg_out *o)
{
	struct kmem_cache_node *n = s->node[0];
	struct slab *slab = usl_virt_to_slab(x), *discard = NULL;

	usl_lock(&n->list_lock);
	/* Written while it waited? Checked as free, then unmarked. */
	usl_set_freepointer(s, x, NULL);
	if (!check_object(o, s, slab, x, RED_INACTIVE))
		slab_fix(o, s, "Object at 0x%lx released from the quarantine, repaired", (unsigned long)(uintptr_t)x);
	discard = put_free(s, n, slab, x);
	usl_unlock(&n->list_lock);
	if (discard)
		usl_discard_slab(s, discard);
}

/* Every object of s out of the quarantine (destroy, shrink; validation
 * checks what waits in place). */
void usl_debug_quarantine_flush(struct kmem_cache *s)
{
	struct usl_dbg_out o = { 0 };
	struct usl_q_entry out[USL_Q_BATCH];
	unsigned int n;
	while ((n = usl_quarantine_take(s, out)))
		release_batch(out, n, &o);
	usl_out_deliver(&o);
}

/* At exit, what still waits is released, so checked: a write after free into
 * an object that never left the quarantine is reported all the same. A
 * destructor of the library: it runs after the program's exit handlers (the
 * preloaded library's last of all), when the program frees no more. */
__attribute__((destructor)) static void quarantine_at_exit(void)
{
	struct usl_dbg_out o = { 0 };
	struct usl_q_entry out[USL_Q_BATCH];
	unsigned int n;
	while ((n = usl_quarantine_take(NULL, out))) {
		release_batch(out, n, &o);
		usl_out_deliver(&o);
	}
}

/* ===========================================================================
 * Validation and leaks
 */

/* One byte per object of slab, set for those on its free list (the walk
 * stops at a link that is not an object of the slab). Under objmap_lock and
 * list_lock. */
static uint8_t free_objects[USL_MAX_OBJS_PER_SLAB + 1];
static pthread_mutex_t objmap_lock = PTHREAD_MUTEX_INITIALIZER;

static uint8_t *free_map(const struct kmem_cache *s, const struct slab *slab)
{
	usl_assert_held(&objmap_lock);
	unsigned int objects = usl_counters_objects(slab->counters), guard = 0;
	memset(free_objects, 0, objects);
	for (void *p = slab->freelist; p && guard++ < objects && valid_pointer(s, slab, p); p = fp_raw(s, p))
		free_objects[((uintptr_t)p - (uintptr_t)slab->addr - s->red_left_pad) / s->size] = 1;
	return free_objects;
}

static void validate_slab(struct usl_dbg_out *o, struct kmem_cache *s, struct slab *slab)
{
	if (!check_slab(o, s, slab) || !on_freelist(o, s, slab, NULL))
		return;
	unsigned int objects = usl_counters_objects(slab->counters);
	const uint8_t *map = free_map(s, slab);
	for (unsigned int i = 0; i < objects; i++) {
		uint8_t *p = object_at(s, slab, i);
		bool waiting = !map[i] && usl_debug_quarantine() && quarantined(s, p);
		check_object(o, s, slab, p, map[i] || waiting ? RED_INACTIVE : RED_ACTIVE);
		if (waiting)
			usl_set_freepointer(s, p, p);     /* check_object may have judged the mark */
	}
	if ((s->flags & SLAB_POISON)) {
		/* The slab's tail after its last object (the kernel's slab_pad_check). */
		uint8_t *end = (uint8_t *)slab->addr + usl_order_bytes(slab->order);
		uint8_t *tail = (uint8_t *)slab->addr + (size_t)objects * s->size;
		uint8_t *q = tail;
		while (q < end && *q == POISON_INUSE)
			q++;
		if (q < end) {
			uint8_t *last = end;
			while (last > q && last[-1] == POISON_INUSE)
				last--;
			slab_err(o, s, slab, "Padding overwritten. 0x%lx-0x%lx @offset=%lu", (unsigned long)(uintptr_t)q,
			         (unsigned long)(uintptr_t)(last - 1), (unsigned long)(q - (uint8_t *)slab->addr));
			memset(q, POISON_INUSE, (size_t)(last - q));
			slab_fix(o, s, "Restoring slab padding 0x%lx-0x%lx=0x%x", (unsigned long)(uintptr_t)q,
			         (unsigned long)(uintptr_t)(last - 1), POISON_INUSE);
		}
	}
}

int usl_debug_validate(struct kmem_cache *s)
{
	struct kmem_cache_node *n = s->node[0];
	struct usl_dbg_out o = { 0 };

	usl_lock(&objmap_lock);
	usl_lock(&n->list_lock);
	struct usl_list *lists[2] = { &n->partial, &n->full };
	for (int l = 0; l < 2; l++)
		for (struct usl_list *it = lists[l]->next; it != lists[l]; it = it->next)
			validate_slab(&o, s, usl_container_of(it, struct slab, slab_list));
	usl_unlock(&n->list_lock);
	usl_unlock(&objmap_lock);
	return usl_out_deliver(&o);
}

/* Calls visit for every object of s in use (not on its slab's free list,
 * not waiting in the quarantine) until it returns false; under objmap_lock
 * and the node's list_lock, which it takes. */
void usl_debug_each_in_use(struct kmem_cache *s, bool (*visit)(struct kmem_cache *s, struct slab *slab, uint8_t *p,
                                                                void *arg), void *arg)
{
	struct kmem_cache_node *n = s->node[0];

	usl_lock(&objmap_lock);
	usl_lock(&n->list_lock);
	struct usl_list *lists[2] = { &n->partial, &n->full };
	bool more = true;
	for (int l = 0; l < 2 && more; l++)
		for (struct usl_list *it = lists[l]->next; it != lists[l] && more; it = it->next) {
			struct slab *slab = usl_container_of(it, struct slab, slab_list);
			unsigned int objects = usl_counters_objects(slab->counters);
			const uint8_t *map = free_map(s, slab);
			for (unsigned int i = 0; i < objects && more; i++) {
				uint8_t *p = object_at(s, slab, i);
				if (!map[i] && !(usl_debug_quarantine() && quarantined(s, p)))
					more = visit(s, slab, p, arg);
			}
		}
	usl_unlock(&n->list_lock);
	usl_unlock(&objmap_lock);
}

struct leaks {
	struct usl_dbg_out *o;
	uint64_t now;
	unsigned int shown;
};

static bool show_leak(struct kmem_cache *s, struct slab *slab, uint8_t *p, void *arg)
{
	struct leaks *lk = arg;
	usl_out_printf(lk->o, "Object 0x%lx @offset=%lu\n", (unsigned long)(uintptr_t)p,
	               (unsigned long)(p - (uint8_t *)slab->addr));
	if (s->flags & SLAB_STORE_USER)
		out_track(lk->o, s, p, TRACK_ALLOC, lk->now);
	return ++lk->shown < 64;
}

void usl_debug_leaks(struct kmem_cache *s)
{
	struct usl_dbg_out o = { 0 };
	struct leaks lk = { &o, usl_now_ms(), 0 };

	usl_out_begin(&o, USLAB_ERR_SLAB_BUG);
	out_bug(&o, s, "Objects remaining on kmem_cache_destroy()");
	usl_debug_each_in_use(s, show_leak, &lk);
	usl_out_end(&o);
	usl_out_deliver(&o);
}

/* ===========================================================================
 * kmalloc's view: usable size and resizing in place
 */

size_t usl_debug_ksize(struct kmem_cache *s, void *x)
{
	return orig_size_kept(s) ? orig_size(s, x) : s->object_size;
}

void usl_debug_resize(struct kmem_cache *s, void *x, size_t n)
{
	if (!orig_size_kept(s) || n > s->object_size)
		return;
	struct kmem_cache_node *n_ = s->node[0];
	usl_lock(&n_->list_lock);
	*orig_word(s, x) = n;
	if (s->flags & SLAB_RED_ZONE)
		memset((uint8_t *)x + n, RED_ACTIVE, s->object_size - n);
	usl_unlock(&n_->list_lock);
}

bool usl_debug_is_object(struct kmem_cache *s, const void *x)
{
	struct slab *slab = usl_virt_to_slab(x);
	return x && slab && slab->kind == USL_PAGE_SLAB && slab->slab_cache == s && valid_pointer(s, slab, x);
}

void usl_debug_check_size(struct kmem_cache *s, void *x, size_t size, const char *fn)
{
	struct kmem_cache_node *n = s->node[0];
	struct slab *slab = usl_virt_to_slab(x);
	struct usl_dbg_out o = { 0 };

	usl_lock(&n->list_lock);
	if (slab && slab->slab_cache == s && valid_pointer(s, slab, x) && x) {
		size_t have = orig_size(s, x);
		if (orig_size_kept(s) ? size != have : size > have) {
			char msg[160];
			snprintf(msg, sizeof(msg), "%s with size %zu, allocated with %s%zu", fn, size,
			         orig_size_kept(s) ? "" : "at most ", have);
			object_err(&o, s, slab, x, NULL, msg);
		}
	}
	usl_unlock(&n->list_lock);
	usl_out_deliver(&o);
}

void usl_debug_fork_lock(void)
{
	usl_lock(&objmap_lock);
	usl_quarantine_fork_lock();
}

void usl_debug_fork_unlock(void)
{
	__atomic_store_n(&track_pid, 0, __ATOMIC_RELAXED);   /* read again: a child's is its own */
	usl_quarantine_fork_unlock();
	usl_unlock(&objmap_lock);
}
