/* owned_model.c - an exhaustive interleaving model checker for the protocol of
 * the owned per-CPU front end (src/percpu/owned.c, src/engine/slub/oslab.c, the
 * sections of src/arch/rseq_owned_x86.h, struct usl_oslab / usl_oslot in
 * src/types.h). ThreadSanitizer cannot see rseq sections; this model is how
 * the protocol is shown correct, or a counterexample is found.
 *
 * The model: 2 CPUs, one cache, up to 3 slabs of 4 objects (one bitmap word
 * each), up to 3 threads: clients (each pinned to a CPU, or one that may run
 * each section on either CPU: a thread that migrates between steps), a
 * flusher (usl_owned_flush_all), a decay sweep (usl_owned_decay: idle slots
 * orphaned, or a busy slot's avail trimmed by slot_trim_empty) or a fork
 * (usl_owned_fork_lock/unlock). Discards follow wholly_free() (no bit in use,
 * not pending). The protocol is the current one: the take section commits
 * with lock cmpxchg 0 -> 2; a discarded slab's metadata is retired, never
 * freed, and reused by the cache's next new slab once its pending is clear
 * (usl_oslab_new's reset in its steps: the retired block taken, all but
 * pending and the inbox link zeroed, the fields set and the slab put on the
 * node's list, then its owner); a local section that finds its bit set
 * reports the double free there. The old behaviours are mutations
 * (plaintake, freemeta, rerunslow). Every thread runs the real code's
 * steps with one access to a variable other actors touch concurrently per
 * step (Lipton reduction: lock acquires and releases and accesses to data a
 * held lock protects are folded into the neighbouring step).
 *
 * An rseq section is two steps: its reads (the slot's lock, the slab's owner,
 * pending, remote and local words, the cursor word), then its one committing
 * store. Between them no other thread of the same CPU runs (a preemption
 * restarts the section: the same as the section starting later, which is
 * explored anyway) and the thread does not migrate; threads of the other CPU
 * and the flusher do run, so a remote fetch_or or a flusher's mark may land
 * between a section's reads and its commit. membarrier() restarts every
 * section in flight (its thread goes back to the section's first step).
 *
 * Exploration: breadth first over the whole state (hashed, deduplicated), so
 * each counterexample printed is a shortest one. A state that violates a
 * property or hands an object out twice (accepted or not) is not expanded
 * further; past an accepted fork-announce the parent goes on. Memory is sequentially consistent (x86's
 * store buffer is not modelled: it only widens the races found).
 *
 * Properties, after every step:
 *  - spec: per object the specification's state (free / allocated) and the
 *    number of extra free copies an undetected double free left. The free
 *    bits (local | remote | bits a merge holds between its exchange and its
 *    OR) of every object must equal (free ? 1 : 0) + extra copies: nothing
 *    lost, nothing invented.
 *  - a free that makes an extra copy is classified by why its check missed
 *    the first copy, from what happened between its check and its set:
 *      window         a local section and a remote free of one object
 *                     overlapping: the remote free read the local word
 *                     before the section's commit and set its bit after it,
 *                     or the section read the remote word before the remote
 *                     fetch_or, or while its pending store was still to come
 *                     (the remote free between its fetch_or and its xchg);
 *      remote-merge   a remote double free whose local-word read and
 *                     fetch_or straddle a merge (xchg of the remote word,
 *                     then OR into the local word) of the first copy;
 *      orphan-remote  an orphan free (list_lock) and a stale remote free (it
 *                     read the owner before the slab became an orphan)
 *                     overlapping: the remote free read the local word
 *                     before the orphan free's set and set its bit after it,
 *                     or set it between the orphan free's check and its set.
 *    These are accepted (a double free, a program bug, racing a few
 *    instructions of uslab's own work; docs/ARCHITECTURE.md, invariant 1):
 *    a hand-out of an object the spec says is allocated whose every extra
 *    copy came from one of them is printed as "accepted: <name>" (its
 *    shortest trace once per run) and does not fail the run. A double
 *    hand-out from any other extra copy (a check that missed a copy already
 *    visible to it, or a copy of unknown origin) is a violation, as is any
 *    set by a free that saw its bit set before (the double free was seen:
 *    it is reported there, never re-run).
 *  - a double-free report for an object that is allocated and never had an
 *    extra copy is a false report (the object would leak).
 *  - the slot lock: a slot held (taken) must read 2 and not be marked; a
 *    marked slot must read 1; every write of a slab's local word must come
 *    from an actor entitled to it (a section of the owner CPU with the slot
 *    neither held nor given to a flusher; the slot's holder; the flusher
 *    after membarrier; list_lock's holder for an orphan).
 *  - slab metadata is type-stable (usl_oslab_discard retires it: owner
 *    0xffff on the node's retired list; usl_oslab_new reuses a retired block
 *    whose pending is clear, resetting all but pending and the inbox link):
 *    a late announce or a drain may meet it retired or in a later life, but
 *    must not read a field the new slab's reset has zeroed and not yet set
 *    (slots, cache, slab), and a slab on the orphan list must be an orphan.
 *    (-m freemeta: metadata freed at discard, and any later touch of it is a
 *    use after free.) A discarded slab is on no avail stack or cursor.
 *  - fork: the child must not inherit a held slot, nor a slab pending on no
 *    inbox, except (accepted, "fork-announce": memory stranded until the
 *    child's next flush or decay orphaning, nothing corrupted) a slab whose
 *    announcer is between its xchg of pending and its push.
 *  - at quiescence (every thread done): no lock held, every free object is
 *    findable (its slab the cursor slab or on the avail stack of its owner,
 *    on an inbox, or an orphan on the orphan list; a remote bit only on a
 *    slab on an inbox), pending set exactly when the slab is on an inbox,
 *    listed exactly when it is the owner's cursor slab or on its avail stack;
 *    a retired block pending only on an inbox; no allocated object with a
 *    latent extra copy (classified as above).
 *  - no deadlock (threads left, none can move).
 *
 * Not modelled: the bulk paths (pop_bulk, free_mask: the same sections with
 * several bits), more than one bitmap word per slab, more than one node,
 * the sentinel slots (no rseq), the decay sweep's idleness test (its marks
 * are tried on every slot), malloc's class table, the fields of line 0 other
 * than owner that a stale double free reads while a block is being reset
 * (start_off, the divisor: a program bug's free, at worst a report of the
 * wrong kind), usl_new_slab failing after a retired block was taken.
 *
 * The fixes of the model's findings in the metadata reuse (keepowner,
 * newlists) are the code as it is, on by default; -x turns one off, to show
 * the model still finds what it fixed.
 *
 * Usage: owned_model [-s scenario] [-m mutation] [-x fix] [-A] [-q] [-c] [-l]
 *   -s NAME   one scenario (default: all)
 *   -m NAME   a deliberately broken protocol (see -l); the run must fail
 *   -x NAME   turn off a fix the model found (see -l): the code before it
 *   -A        the split local word variant (allocation word A and freed word F,
 *             as tried in the working tree: F moved into A by the refill)
 *   -q        no traces (default: each violation kind's shortest trace per
 *             scenario, each accepted shape's shortest trace once)
 *   -c        list the model's steps no scenario took (coverage)
 *   -l        list scenarios, mutations and fixes
 * Exit status: 0 when every property holds (the accepted shapes are printed
 * but do not fail), 1 on a violation, 2 on a usage error or when the state
 * space overflows. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"

enum { NCPU = 2, NSLAB = 3, NOBJ = 4, NOBJS = NSLAB * NOBJ, MAXT = 3, NVAR = 12, MAXOPS = 24 };
#define NONE 0xff
#define NULLOBJ 0xfe             /* an allocation that failed (ENOMEM) */
#define GIVEN 0xf                /* owner 0xffff: given up (being discarded) */
#define ALL ((1u << NOBJ) - 1)

/* ---------------------------------------------------------------- state -- */
typedef struct {
	uint8_t alive;           /* 0 never made, 1 live, 2 retired, 3 freed (-m freemeta), 4 being made */
	uint8_t init;            /* being made: slots, cache, slab zeroed by the reset, not set yet */
	uint8_t chunk;           /* the chunk map points to it */
	uint8_t owner;           /* 0 orphan, c + 1, GIVEN */
	uint8_t a, f, r;         /* local word (A), freed word (F, -A only), remote word */
	uint8_t pending, listed, olisted;
	uint8_t inext, anext;    /* inbox link, avail link */
} Slab;

typedef struct {
	uint8_t lock;            /* 0 free, 1 marked, 2 taken */
	uint8_t wp;              /* the cursor: a slab's local word, or NONE (usl_zero_word) */
	uint8_t cur, avail, inbox;
	uint8_t holder;          /* model: the thread that took it */
	uint8_t marker;          /* model: the thread that marked it */
	uint8_t fowns;           /* model: the marker is past its membarrier */
} Slot;

typedef struct {
	uint8_t pc, ip;          /* step within the operation, operation index */
	uint8_t insec, secpc;    /* a section in flight: its CPU, its first step */
	uint8_t slowp;           /* the section of usl_owned_free_slow (else free_at's) */
	uint8_t o, h, x, own;    /* slot, slab, object, owner read */
	uint8_t w, rr, any, nx;  /* word read by a section, a merge's bits, merge result, drain's next */
	uint8_t i, mk, mask, round, dall;
	uint8_t cause;           /* a free: what happened to its object's first copy since its check (C_*) */
	uint8_t saw;             /* a free that saw its bit set (-m rerunslow: and went on) */
	uint8_t tgt;             /* usl_oslab_new: the owner the new slab gets */
	uint8_t trim, kept, pv;  /* the decay sweep's trim: keep one wholly free slab; the avail walk */
	uint8_t sp, stk[3];
} Thr;

typedef struct {
	Slab s[NSLAB];
	Slot c[NCPU];
	uint8_t llock;           /* list_lock holder */
	uint8_t nol, olist[NSLAB];
	uint8_t nrq, rq[NSLAB];  /* the node's retired list (metadata of discarded slabs), oldest first */
	uint8_t var[NVAR];
	uint8_t spec[NOBJS];     /* 0 free, 1 allocated */
	uint8_t dup[NOBJS];      /* extra free copies (undetected double frees) */
	uint8_t dkind[NOBJS];    /* where extra copies came from: DK_* */
	uint8_t maker[NOBJS];    /* the free that made it free: kind << 6 | thread << 4 | op */
	Thr t[MAXT];
} State;

enum { SP_FREE = 0, SP_ALLOC = 1 };
/* Where an extra copy came from: the accepted shapes, or none of them. */
enum { DK_WINDOW = 1, DK_MERGE = 2, DK_ORPHAN = 4, DK_BUG = 8 };
/* What happened to a free's object between its check and its set (Thr.cause):
 * C_WIN the section read the remote word before the remote fetch_or, or while
 * the remote free's pending store was still to come; C_SECT a section set the
 * bit after the remote free's local-word read; C_MERGE a merge moved the
 * bit out of the remote word (or held it) across the remote free's read and
 * fetch_or; C_ORPH an orphan free set it after the remote free's read; C_REM
 * a remote fetch_or set it between an orphan free's check and its set;
 * C_FTOA (-A) F moved into A between the remote free's two loads. */
enum { C_WIN = 1, C_SECT = 2, C_MERGE = 4, C_ORPH = 8, C_REM = 16, C_FTOA = 32 };
/* How a free set its bit: the local section, a remote fetch_or, an orphan free. */
enum { FK_SECTION, FK_REMOTE, FK_ORPHAN };
static const char *const fk_names[] = {"local section", "remote free", "orphan free"};

/* -------------------------------------------------------------- program -- */
enum { OP_ALLOC = 1, OP_FREE, OP_FREE2, OP_FLUSH, OP_DECAY, OP_FORK };
typedef struct {
	uint8_t op, v;
} Op;
#define CPU_MIGRATE (-1)
#define CPU_NONE (-2)            /* the flusher / fork thread: no sections */
typedef struct {
	const char *name;
	int cpu;
	int nops;
	Op ops[MAXOPS];
} Prog;
typedef struct {
	const char *name, *what;
	int min_partial;
	Prog setup;              /* run alone first, to completion (cpu given) */
	int nthr;
	Prog th[MAXT];
} Scenario;

/* ------------------------------------------------------------- mutations -- */
enum {
	M_NONE, M_NOPENDING, M_LATEPENDING, M_NOMEMBARRIER, M_NOREMOTELOCAL, M_NOOWNERCHECK, M_FORKREVERSE,
	M_PLAINTAKE, M_FREEMETA, M_RERUNSLOW, M_NR
};
static const char *const mut_names[M_NR] = {"none", "nopending", "latepending", "nomembarrier", "noremotelocal",
                                            "noownercheck", "forkreverse", "plaintake", "freemeta", "rerunslow"};
static const char *const mut_what[M_NR] = {
	"",
	"the local free section skips the pending/remote check",
	"the drain clears pending after the merge instead of before",
	"the flusher skips membarrier after marking",
	"the remote free skips its (racy) read of the local word",
	"the local free section does not check that this CPU owns the slab",
	"fork marks the slots in the reverse order of the flusher's",
	"the take section commits with a plain store lock = 2 after its test (the old take)",
	"a discarded slab's metadata is freed at the discard (the old discard)",
	"a local section that finds its bit set re-runs the slow path instead of reporting (the old dbl)",
};
static int mut;
/* The fixes of the metadata reuse the model found, in src/ since: on by
 * default; -x NAME turns one off (the code before it), for the mutation
 * test that shows the model still catches it. */
enum { X_KEEPOWNER = 1, X_NEWLISTS = 2, X_NR = 2 };
static const char *const fix_names[X_NR] = {"keepowner", "newlists"};
static const char *const fix_what[X_NR] = {
	"usl_oslab_new's reset of a retired block leaves owner 0xffff and slots, cache, slab valid until its "
	"owner store (a late announce, a drain, a stale free meeting it pass it by)",
	"usl_oslab_new puts a new orphan on the orphan list under the list_lock of its owner store; "
	"usl_oslab_alloc_orphan does not touch it after (a late announce's reannounce may list it, a discard "
	"retire it, before)",
};
static int fix = X_KEEPOWNER | X_NEWLISTS;   /* -x clears (1 << k) for fix_names[k] */
static int af;                   /* -A: the local word split into A (allocation) and F (freed) */

/* ------------------------------------------------------------ reporting -- */
enum {
	V_WINDOW, V_MERGE, V_ORPHAN, V_FORK_ANNOUNCE,   /* the accepted shapes */
	V_HANDOUT, V_SEEN, V_BITS, V_FALSE, V_UNREPORTED, V_LOCK, V_DANGLE, V_REUSE, V_OLIST, V_FORK, V_FORK_PENDING,
	V_STRAND, V_DEADLOCK, V_NR
};
#define V_ACCEPTED ((1 << V_WINDOW) | (1 << V_MERGE) | (1 << V_ORPHAN) | (1 << V_FORK_ANNOUNCE))
#define V_GOES_ON (1 << V_FORK_ANNOUNCE)    /* the state is expanded further */
static const char *const vshort[V_NR] = {
	"window", "remote-merge", "orphan-remote", "fork-announce",
};
static const char *const vnames[V_NR] = {
	"a double hand-out of a local section and a remote free of one object overlapping",
	"a double hand-out of a remote double free whose local-word read and fetch_or straddle the merge of the "
	"first copy",
	"a double hand-out of an orphan free under list_lock and a stale remote free overlapping",
	"fork while an announce is between its xchg of pending and its push: the child's slab pending on no inbox "
	"(its remote bits wait for the next flush or decay orphaning)",
	"double hand-out: an extra copy that fits no accepted shape",
	"a free that saw its bit set (a double free) set it later",
	"free bits do not match the objects that are free",
	"false double-free report",
	"a double free never reported (its extra copy discarded)",
	"slot lock discipline",
	"a slab discarded while listed, or (-m freemeta) its metadata freed while still referenced",
	"a retired metadata block's reuse: a field read while the reset has it zeroed",
	"the orphan list holds a slab that is not an orphan",
	"fork: the child inherits a taken slot",
	"fork: the child inherits a slab pending on no inbox (no announce in flight)",
	"quiescence: free object not findable / list flags wrong",
	"deadlock",
};
static int vflag;                /* violation kinds found in the current step */
static char vmsg[V_NR][256];
static int tracing;
static char desc[512], vdesc[512];   /* a traced step, its violations */
static const Scenario *SC;

static void D(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void D(const char *fmt, ...)
{
	if (!tracing)
		return;
	size_t n = strlen(desc);
	if (n >= sizeof(desc) - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(desc + n, sizeof(desc) - n, fmt, ap);
	va_end(ap);
}

static void viol(int k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void viol(int k, const char *fmt, ...)
{
	if (!(vflag & (1 << k))) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(vmsg[k], sizeof(vmsg[k]), fmt, ap);
		va_end(ap);
	}
	vflag |= 1 << k;
	if (tracing) {
		size_t n = strlen(vdesc);
		va_list ap;
		va_start(ap, fmt);
		n += (size_t)snprintf(vdesc + n, sizeof(vdesc) - n, "\n           <<< %s: %s: ",
		                      V_ACCEPTED >> k & 1 ? "accepted" : "VIOLATION",
		                      V_ACCEPTED >> k & 1 ? vshort[k] : vnames[k]);
		if (n < sizeof(vdesc))
			n += (size_t)vsnprintf(vdesc + n, sizeof(vdesc) - n, fmt, ap);
		if (n < sizeof(vdesc))
			snprintf(vdesc + n, sizeof(vdesc) - n, " >>>");
		va_end(ap);
	}
}

static const char *oname(int x)
{
	static char b[4][16];
	static int k;
	k = (k + 1) & 3;
	if (x == NULLOBJ)
		snprintf(b[k], 16, "NULL");
	else
		snprintf(b[k], 16, "s%d.%d", x / NOBJ, x % NOBJ);
	return b[k];
}

/* ------------------------------------------------------------- helpers -- */
static int ctz(unsigned w) { return __builtin_ctz(w); }
static unsigned loc(const Slab *b) { return (unsigned)b->a | b->f; }

static void push(Thr *t, int pc)
{
	if (t->sp >= 3) {
		fprintf(stderr, "model: call stack overflow\n");
		exit(2);
	}
	t->stk[t->sp++] = (uint8_t)pc;
}

static const Prog *prog_of(int t)
{
	return &SC->th[t];
}

static void orphan_list(State *S, int h)
{
	if (!S->s[h].olisted) {
		S->olist[S->nol++] = (uint8_t)h;
		S->s[h].olisted = 1;
	}
}

static void orphan_unlist(State *S, int h)
{
	if (S->s[h].olisted) {
		int j = 0;
		while (S->olist[j] != h)
			j++;
		for (; j + 1 < S->nol; j++)
			S->olist[j] = S->olist[j + 1];
		S->olist[--S->nol] = 0;
		S->s[h].olisted = 0;
	}
}

/* The node's retired list: discard appends (retire), usl_oslab_new takes
 * the oldest block whose pending is clear (retired_take). */
static void retire(State *S, int h)
{
	S->s[h].owner = GIVEN;
	if (S->s[h].alive == 2) {
		viol(V_REUSE, "s%d retired twice", h);
		return;
	}
	S->rq[S->nrq++] = (uint8_t)h;
	S->s[h].alive = 2;
}

static void retired_unlist(State *S, int j)
{
	for (; j + 1 < S->nrq; j++)
		S->rq[j] = S->rq[j + 1];
	S->rq[--S->nrq] = 0;
}

/* usl_oslab_new's reset of a block: all but pending and the inbox link
 * zeroed (line 0's slots, owner, listed; line 1's cache and slab; the local
 * and remote words). The spec forgets the slab's old objects. */
static void slab_reset(State *S, int h)
{
	Slab *b = &S->s[h];
	if (b->olisted) {
		viol(V_REUSE, "the reset of s%d zeroes its orphan list link while it is on the orphan list", h);
		orphan_unlist(S, h);
	}
	b->a = b->f = b->r = 0;
	b->listed = b->olisted = 0;
	b->anext = NONE;
	b->chunk = 0;
	if (!(fix & X_KEEPOWNER)) {
		b->owner = 0;
		b->init = 1;
	}
	for (int i = 0; i < NOBJ; i++) {
		S->spec[h * NOBJ + i] = SP_FREE;
		S->dup[h * NOBJ + i] = 0;
		S->dkind[h * NOBJ + i] = 0;
		S->maker[h * NOBJ + i] = NONE;
	}
}

static const char *dk_text(int kind)
{
	return kind == DK_WINDOW ? "window: a local section and a remote free overlapping" :
	       kind == DK_MERGE ? "remote-merge: the first copy moved from the remote word into the local one "
	                          "between this remote free's local-word read and its fetch_or" :
	       kind == DK_ORPHAN ? "orphan-remote: an orphan free and a stale remote free overlapping" :
	                           "no accepted shape: the first copy was there for its check to see";
}

/* The violation an object handed out (or left allocated) with extra copies
 * of kinds dk is: an accepted shape when every copy came from one. */
static int dup_viol(int dk)
{
	if (!dk || (dk & DK_BUG))
		return V_HANDOUT;
	return dk & DK_WINDOW ? V_WINDOW : dk & DK_MERGE ? V_MERGE : V_ORPHAN;
}

/* The spec's side of a free (of kind fk) whose bit has just been set (its
 * commit). A second copy is classified by what happened to the first one
 * between this free's check and its set (Thr.cause; the header's list). */
static void spec_free(State *S, int t, int x, int fk)
{
	Thr *T = &S->t[t];
	if (T->saw)
		viol(V_SEEN, "the free of %s saw its bit set (a double free) and went on to the slow path, which sets it "
		     "now (%s)", oname(x), S->spec[x] == SP_FREE ? "an extra copy" :
		     "the object was handed out again meanwhile: another owner's object freed");
	if (S->spec[x] == SP_FREE) {
		int m = S->maker[x], mk = m == NONE ? -1 : m >> 6, c = T->cause, kind;
		if (fk == FK_SECTION)
			kind = (c & C_WIN) && mk == FK_REMOTE ? DK_WINDOW : DK_BUG;
		else if (fk == FK_REMOTE)
			kind = c & C_FTOA ? DK_BUG : c & C_SECT ? DK_WINDOW : c & C_MERGE ? DK_MERGE :
			       c & C_ORPH ? DK_ORPHAN : DK_BUG;
		else
			kind = c & C_REM ? DK_ORPHAN : DK_BUG;
		S->dup[x]++;
		S->dkind[x] |= (uint8_t)kind;
		D(" [spec: %s was free already (by a %s): an undetected double free, 2 copies now (%s)]", oname(x),
		  mk < 0 ? "new slab" : fk_names[mk], dk_text(kind));
	} else {
		S->spec[x] = SP_FREE;
		S->maker[x] = (uint8_t)(fk << 6 | t << 4 | S->t[t].ip);
	}
}

static void spec_handout(State *S, int x)
{
	if (S->spec[x] == SP_ALLOC) {
		int v = dup_viol(S->dkind[x]);
		viol(v, "%s handed out while allocated (its extra copy: %s)", oname(x),
		     !S->dkind[x] ? "of unknown origin" : dk_text(S->dkind[x] & DK_BUG ? DK_BUG : S->dkind[x] & -S->dkind[x]));
		if (S->dup[x])
			S->dup[x]--;
	} else {
		S->spec[x] = SP_ALLOC;
	}
	S->maker[x] = NONE;
	D(" [hand-out %s]", oname(x));
}

static void spec_report_free(State *S, int x)
{
	D(" [reported: double free of %s]", oname(x));
	if (x == NULLOBJ)
		return;
	if (S->spec[x] == SP_ALLOC && !S->dkind[x])
		viol(V_FALSE, "the free of %s, which is allocated, was reported as a double free", oname(x));
}

static void spec_report_merge(State *S, int x)
{
	D(" [merge reports: double free of %s; one copy kept]", oname(x));
	if (S->dup[x])
		S->dup[x]--;
	else
		viol(V_FALSE, "a merge reported %s, which had one free copy", oname(x));
}

/* Is thread t entitled to write the local word of slab h now? */
static void auth_local(State *S, int t, int h, int sec_cpu, const char *what)
{
	Slab *b = &S->s[h];
	if (sec_cpu >= 0) {
		Slot *o = &S->c[sec_cpu];
		if (b->owner != sec_cpu + 1 || o->holder != NONE || o->fowns)
			viol(V_LOCK, "%s: a section of cpu%d writes s%d's local word (owner %d, slot held by %d, "
			     "flusher past membarrier %d)", what, sec_cpu, h, b->owner, o->holder == NONE ? -1 : o->holder,
			     o->fowns);
		return;
	}
	if (S->llock == t && b->owner == 0)
		return;
	for (int c = 0; c < NCPU; c++)
		if (b->owner == c + 1 && ((S->c[c].holder == t && S->c[c].lock == 2) ||
		                          (S->c[c].marker == t && S->c[c].fowns)))
			return;
	viol(V_LOCK, "%s: T%d writes the local word of slab %d (owner %d) without holding it", what, t, h, b->owner);
}

/* ----------------------------------------------------------------- steps -- */
enum {
	P_START,
	P_POP_R, P_POP_C, P_TAKE_R, P_TAKE_C, P_RF_INBOX, P_RF_CUR, P_RF_AVAIL, P_AD_LOCK, P_AD_AFTER, P_AD_NEXT,
	P_RF_NEW, P_TK_OBJ, P_TK_REL, P_AO_LOCK, P_AO_TAKE, P_AO_NEW,
	P_FR_START, P_FR_SEC_R, P_FR_SEC_C, P_F_FIRST, P_F_LIST, P_FS_CHUNK, P_FS_OWN, P_FS_OTHER, P_FS_OTHER2,
	P_FRM_A, P_FRM_F, P_FRM_OR, P_FO_LOCK, P_FO_SET, P_FO_GIVE,
	P_AN_X, P_AN_PUSH, P_MG_X, P_MG_OR, P_DR_X, P_DR_PEND, P_DR_OWN, P_DR_LATE, P_DR_LIST, P_RA_LOCK,
	P_RA_ORPH, P_RA_UNL, P_DS_LOCK, P_OR_LOCK, P_OR_UNL, P_OR_AFTER,
	P_FL_MARK, P_FL_MB, P_FL_ORPH, P_FL_RESET, P_FL_UNMARK, P_DE_LOCK, P_DE_AFTER, P_TR_START, P_TR_NEXT,
	P_FO_CHECK,
	P_FK_MARK, P_FK_POINT, P_FK_UNMARK,
	P_NW_TAKE, P_NW_RESET, P_NW_INIT, P_NW_OWNER,
	P_DONE,                      /* a return target: the operation is done */
	P_END                        /* the thread has finished */
};

static const char *const pc_names[] = {
	"start", "pop section reads", "pop section commit", "take section reads", "take section commit",
	"refill: inbox", "refill: cursor slab", "refill: avail", "adopt: lock", "adopt: after merge", "adopt: next",
	"refill: new slab listed", "refill: take object", "release", "orphan alloc: lock", "orphan alloc: take_one",
	"orphan alloc: new slab listed", "free: chunk map", "free section reads", "free section commit", "free: first bit",
	"usl_owned_list", "free_slow: chunk map", "free_slow: owner", "free_slow: other: chunk", "free_slow: other: owner",
	"free_remote: local", "free_remote: F (-A)", "free_remote: fetch_or", "orphan free: lock, check",
	"orphan free: set", "orphan free: give up", "announce: pending", "announce: push", "merge: xchg", "merge: or",
	"drain: xchg inbox", "drain: pending = 0", "drain: owner", "drain: late pending (mutation)", "drain: list",
	"reannounce: lock", "reannounce: orphan", "reannounce: unlock", "discard", "orphan: lock, owner 0",
	"orphan: listed 0", "orphan: after merge", "flush: mark", "flush: membarrier", "flush: next slab",
	"flush: reset slot", "flush: unmark", "discard_empty: lock", "discard_empty: after merge", "trim: start",
	"trim: next avail slab", "orphan free: wholly free?", "fork: mark",
	"fork: fork()", "fork: unmark",
	"new slab: retired_take", "new slab: reset (reuse)", "new slab: fields, node list", "new slab: owner",
};
static uint64_t pc_hits[P_END];
_Static_assert(sizeof(pc_names) / sizeof(pc_names[0]) == P_DONE, "a name for each step");

static int is_section_start(int pc) { return pc == P_POP_R || pc == P_TAKE_R || pc == P_FR_SEC_R; }

static void op_begin(State *S, int t);

static void op_done(State *S, int t)
{
	Thr *T = &S->t[t];
	uint8_t ip = T->ip;
	memset(T, 0, sizeof(*T));
	T->ip = (uint8_t)(ip + 1);
	T->insec = NONE;
	op_begin(S, t);
}

static void op_begin(State *S, int t)
{
	Thr *T = &S->t[t];
	const Prog *p = prog_of(t);
	T->h = T->x = T->o = T->own = T->nx = NONE;
	T->insec = NONE;
	if (T->ip >= p->nops) {
		T->pc = P_END;
		return;
	}
	switch (p->ops[T->ip].op) {
	case OP_ALLOC: T->pc = P_POP_R; break;
	case OP_FREE:
	case OP_FREE2: T->pc = P_FR_START; break;
	case OP_FLUSH: T->pc = P_FL_MARK; T->dall = 1; break;
	case OP_DECAY:   /* v 0: every slot idle (slot_orphan); 1: busy with avail (slot_trim_empty) */
		T->pc = P_FL_MARK;
		T->trim = p->ops[T->ip].v;
		T->dall = T->trim;   /* the trim orphans with discard_all */
		break;
	case OP_FORK: T->pc = P_FK_MARK; break;
	}
}

static void set_var(State *S, int t, int x)
{
	S->var[prog_of(t)->ops[S->t[t].ip].v] = (uint8_t)x;
}

static void ret(State *S, int t);

static void drain_next(State *S, int t)
{
	Thr *T = &S->t[t];
	if (T->nx == NONE) {
		T->h = NONE;
		ret(S, t);
		return;
	}
	T->h = T->nx;
	T->nx = NONE;
	T->pc = P_DR_PEND;
}

static void ret(State *S, int t)
{
	Thr *T = &S->t[t];
	T->pc = T->stk[--T->sp];
	T->stk[T->sp] = 0;
	if (T->pc == P_DONE)
		op_done(S, t);
}

static void call(Thr *T, int sub, int back)
{
	push(T, back);
	T->pc = (uint8_t)sub;
}

/* Is thread u a remote free of object x past its local-word read, before
 * its fetch_or? */
static int remote_between(const State *S, int u, int x)
{
	const Thr *U = &S->t[u];
	return U->x == x && (U->pc == P_FRM_OR || U->pc == P_FRM_F);
}

/* Free bits of slab h moved between words (remote into a merge's register,
 * or -A: F into A): a remote free of one of them that has checked the local
 * word but not yet done its fetch_or can no longer see that copy. */
static void moved(State *S, int h, unsigned bits, int from_f)
{
	for (int u = 0; u < MAXT; u++) {
		Thr *U = &S->t[u];
		if (U->h != h || U->x == NONE || U->x >= NOBJS || !(bits >> (U->x % NOBJ) & 1))
			continue;
		if (U->pc == P_FRM_F || (!from_f && U->pc == P_FRM_OR))
			U->cause |= from_f ? C_FTOA : C_MERGE;   /* F into A: only one between its A and F loads misses it */
	}
}

/* cursor_set: the cursor at h's word if it has a free bit (-A: F moved into A
 * first). */
static int cursor_set(State *S, int o, int h)
{
	Slab *b = &S->s[h];
	if (b->f) {
		moved(S, h, b->f, 1);
		b->a |= b->f;
		b->f = 0;
	}
	if (b->a) {
		S->c[o].wp = (uint8_t)h;
		return 1;
	}
	return 0;
}

static void ad_next(State *S, int t)
{
	Thr *T = &S->t[t];
	if (!S->nol) {
		S->llock = NONE;
		T->tgt = (uint8_t)(T->o + 1);
		call(T, P_NW_TAKE, P_RF_NEW);
		D("adopt: no orphan; unlock");
		return;
	}
	T->h = S->olist[0];
	orphan_unlist(S, T->h);
	S->s[T->h].owner = (uint8_t)(T->o + 1);
	D("adopt: s%d off the orphan list, owner = %d", T->h, T->o + 1);
	call(T, P_MG_X, P_AD_AFTER);
}

static void ao_next(State *S, int t)
{
	Thr *T = &S->t[t];
	if (S->nol) {
		T->h = S->olist[0];
		D("orphan alloc: try s%d", T->h);
		call(T, P_MG_X, P_AO_TAKE);
		return;
	}
	S->llock = NONE;
	if (T->round) {
		D("orphan alloc: nothing; ENOMEM");
		set_var(S, t, NULLOBJ);
		op_done(S, t);
	} else {
		D("orphan alloc: no orphan; unlock");
		T->tgt = 0;
		call(T, P_NW_TAKE, P_AO_NEW);
	}
}

static void de_next(State *S, int t)
{
	Thr *T = &S->t[t];
	if (T->i >= S->nol) {
		S->llock = NONE;
		D("discard_empty: done; unlock");
		op_done(S, t);
		return;
	}
	T->h = S->olist[T->i];
	call(T, P_MG_X, P_DE_AFTER);
}

static void dr_x(State *S, int t)
{
	Thr *T = &S->t[t];
	int h = S->c[T->o].inbox;
	S->c[T->o].inbox = NONE;
	pc_hits[P_DR_X]++;   /* a step of its caller's */
	D("drain slot %d: xchg inbox -> %s", T->o, h == NONE ? "empty" : "");
	if (h == NONE) {
		ret(S, t);
		return;
	}
	D("s%d", h);
	T->h = (uint8_t)h;
	T->pc = P_DR_PEND;
}

/* The flusher: the next marked slot from i on to give up, or on to the unmarks. */
static void fl_slot(State *S, int t)
{
	Thr *T = &S->t[t];
	while (T->i < NCPU && !(T->mk >> T->i & 1))
		T->i++;
	if (T->i == NCPU) {
		T->i = 0;
		T->pc = P_FL_UNMARK;
		return;
	}
	T->o = T->i;
	if (T->trim) {
		T->pc = P_TR_START;
		return;
	}
	push(T, P_FL_RESET);
	dr_x(S, t);
}

/* A step that writes or follows slab h's metadata (an announce, a fetch_or,
 * a drain, a merge): -m freemeta: h's metadata must not have been freed. */
static void live_access(State *S, int h, const char *what)
{
	if (S->s[h].alive == 3)
		viol(V_DANGLE, "%s on slab %d, whose metadata was freed (discarded)", what, h);
}

/* A step that reads the fields of h that usl_oslab_new's reset zeroes
 * (slots, cache, slab): h must not be between that reset and the stores
 * that set them again. */
static void reset_read(State *S, int h, const char *what)
{
	if (S->s[h].init)
		viol(V_REUSE, "%s of slab %d, whose retired metadata a new slab's reset has zeroed (not set again yet): "
		     "a NULL dereference", what, h);
}

/* A discard (usl_oslab_discard): the pages back, the metadata retired
 * (-m freemeta: freed). */
static void discard(State *S, int t, int h)
{
	Slab *b = &S->s[h];
	for (int i = 0; i < NOBJ; i++)
		if (S->spec[h * NOBJ + i] != SP_FREE)
			viol(V_BITS, "slab %d discarded while %s is allocated", h, oname(h * NOBJ + i));
	if (b->r)
		viol(V_UNREPORTED, "slab %d discarded with remote bits %x beside a full local word: each an undetected "
		     "double free, dropped without a report", h, b->r);
	for (int c = 0; c < NCPU; c++) {
		for (int k = S->c[c].inbox, n = 0; mut == M_FREEMETA && k != NONE && n < 8; k = S->s[k].inext, n++)
			if (k == h)
				viol(V_DANGLE, "slab %d discarded while on slot %d's inbox (its next drain reads freed "
				     "metadata)", h, c);
		for (int k = S->c[c].avail, n = 0; k != NONE && n < 8; k = S->s[k].anext, n++)
			if (k == h)
				viol(V_DANGLE, "slab %d discarded while on slot %d's avail stack", h, c);
		if (S->c[c].cur == h || S->c[c].wp == h)
			viol(V_DANGLE, "slab %d discarded while slot %d's cursor slab", h, c);
	}
	for (int u = 0; mut == M_FREEMETA && u < MAXT; u++) {
		Thr *U = &S->t[u];
		if (U->pc >= P_DR_PEND && U->pc <= P_RA_UNL && u != t && (U->h == h || U->nx == h))
			viol(V_DANGLE, "slab %d discarded while T%d drains it", h, u);
	}
	b->chunk = 0;
	if (mut == M_FREEMETA) {
		b->alive = 3;
		D(" [slab %d metadata freed]", h);
	} else {
		retire(S, h);
		D(" [slab %d retired: owner 0xffff, its metadata on the retired list]", h);
	}
}

/* step()'s groups: a pc not theirs is STEP_OTHER. */
#define STEP_OTHER (-1)

/* kmem_cache_alloc's rseq sections: the pop, then the take of
 * usl_owned_alloc_slow. */
static int step_alloc_sections(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_POP_R: {
		Slot *o = &S->c[cpu];
		if (o->lock != 0 || o->wp == NONE || S->s[o->wp].a == 0) {
			D("alloc: pop section on cpu%d: slow (lock %d, cursor %s)", cpu, o->lock,
			  o->wp == NONE ? "none" : "empty");
			T->pc = P_TAKE_R;
			return 1;
		}
		T->h = o->wp;
		T->w = S->s[o->wp].a;
		T->insec = (uint8_t)cpu;
		T->secpc = P_POP_R;
		T->pc = P_POP_C;
		D("alloc: pop section on cpu%d reads lock 0, cursor s%d word %x", cpu, T->h, T->w);
		return 1;
	}
	case P_POP_C: {
		int c = T->insec;
		auth_local(S, t, T->h, c, "pop commit");
		b->a = (uint8_t)(T->w & (T->w - 1));
		int x = T->h * NOBJ + ctz(T->w);
		D("alloc: pop section commits word %x", b->a);
		spec_handout(S, x);
		T->insec = NONE;
		set_var(S, t, x);
		op_done(S, t);
		return 1;
	}
	case P_TAKE_R: {
		Slot *o = &S->c[cpu];
		if (o->lock != 0) {
			D("alloc slow: take section on cpu%d: slot busy (lock %d) -> usl_oslab_alloc_orphan", cpu, o->lock);
			T->round = 0;
			T->pc = P_AO_LOCK;
			return 1;
		}
		T->insec = (uint8_t)cpu;
		T->secpc = P_TAKE_R;
		T->o = (uint8_t)cpu;
		T->pc = P_TAKE_C;
		D("alloc slow: take section on cpu%d reads lock 0", cpu);
		return 1;
	}
	case P_TAKE_C: {
		Slot *o = &S->c[T->o];
		if (mut != M_PLAINTAKE && o->lock != 0) {
			D("alloc slow: take section's lock cmpxchg 0 -> 2 fails (lock %d): busy, again", o->lock);
			T->insec = NONE;
			T->pc = P_TAKE_R;
			return 1;
		}
		if (o->marker != NONE)
			viol(V_LOCK, "the take section's store lock = 2 overwrote T%d's mark of slot %d (the mark "
			     "landed between the section's lock test and its commit)", o->marker, T->o);
		o->lock = 2;
		o->holder = (uint8_t)t;
		T->insec = NONE;
		T->pc = P_RF_INBOX;
		D("alloc slow: take section commits lock %s 2 (slot %d taken)", mut == M_PLAINTAKE ? "=" : "cmpxchg 0 ->",
		  T->o);
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* The refill of a taken slot: its inbox, cursor slab, avail list, adoption. */
static int step_refill(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_RF_INBOX:
		if (S->c[T->o].inbox != NONE) {
			D("refill: inbox not empty: ");
			push(T, P_RF_CUR);
			dr_x(S, t);
		} else {
			D("refill: inbox empty");
			T->pc = P_RF_CUR;
		}
		return 1;
	case P_RF_CUR: {
		int h = S->c[T->o].cur;
		if (h != NONE) {
			if (cursor_set(S, T->o, h)) {
				D("refill: cursor slab s%d has bits %x", h, S->s[h].a);
				T->pc = P_TK_OBJ;
			} else {
				S->s[h].listed = 0;
				S->c[T->o].cur = NONE;
				D("refill: cursor slab s%d empty: unlisted", h);
				T->pc = P_RF_AVAIL;
			}
			return 1;
		}
		__attribute__((fallthrough));   /* no cursor slab */
	}
	case P_RF_AVAIL: {
		Slot *o = &S->c[T->o];
		int h = o->avail;
		if (h == NONE) {
			o->wp = NONE;
			D("refill: avail empty; adopt");
			T->pc = P_AD_LOCK;
			return 1;
		}
		o->avail = S->s[h].anext;
		S->s[h].anext = NONE;
		if (cursor_set(S, T->o, h)) {
			o->cur = (uint8_t)h;
			D("refill: avail pop s%d: bits %x, the cursor slab", h, S->s[h].a);
			T->pc = P_TK_OBJ;
		} else {
			S->s[h].listed = 0;
			D("refill: avail pop s%d: empty, unlisted", h);
			T->pc = P_RF_AVAIL;
		}
		return 1;
	}
	case P_AD_LOCK:
		if (S->llock != NONE)
			return 0;
		S->llock = (uint8_t)t;
		D("adopt: lock list_lock; ");
		ad_next(S, t);
		return 1;
	case P_AD_AFTER:
		if (T->any) {
			S->llock = NONE;
			b->listed = 1;
			S->c[T->o].cur = T->h;
			cursor_set(S, T->o, T->h);
			D("adopt: s%d has free bits: unlock, listed, the cursor slab", T->h);
			T->pc = P_TK_OBJ;
		} else {
			b->owner = 0;
			D("adopt: s%d full: owner = 0", T->h);
			T->pc = P_AD_NEXT;
		}
		return 1;
	case P_AD_NEXT:
		ad_next(S, t);
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* The refill's new slab, its object, and the slot's release. */
static int step_refill_take(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];

	switch (T->pc) {
	case P_RF_NEW: {
		int h = T->h;
		if (h == NONE) {
			D("refill: no slab can be made: ENOMEM");
			T->x = NULLOBJ;
			T->pc = P_TK_REL;
			return 1;
		}
		S->s[h].listed = 1;
		S->c[T->o].cur = (uint8_t)h;
		S->c[T->o].wp = (uint8_t)h;
		D("refill: new slab s%d listed, the cursor slab", h);
		T->pc = P_TK_OBJ;
		return 1;
	}
	case P_TK_OBJ: {
		int h = S->c[T->o].wp;
		if (h == NONE) {
			viol(V_LOCK, "the holder of slot %d finds its cursor reset under it", T->o);
			T->x = NULLOBJ;
			T->pc = P_TK_REL;
			return 1;
		}
		auth_local(S, t, h, -1, "refill's take");
		unsigned w = S->s[h].a;
		S->s[h].a = (uint8_t)(w & (w - 1));
		T->x = (uint8_t)(h * NOBJ + ctz(w));
		D("alloc slow: takes the cursor word's lowest bit");
		spec_handout(S, T->x);
		T->pc = P_TK_REL;
		return 1;
	}
	case P_TK_REL: {
		Slot *o = &S->c[T->o];
		o->lock = 0;
		if (o->holder == t)
			o->holder = NONE;
		D("alloc slow: release slot %d (lock = 0) -> %s", T->o, oname(T->x));
		set_var(S, t, T->x);
		op_done(S, t);
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* usl_oslab_alloc_orphan: an allocation from the orphan list. */
static int step_alloc_orphan(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_AO_LOCK:
		if (S->llock != NONE)
			return 0;
		S->llock = (uint8_t)t;
		D("orphan alloc: lock list_lock; ");
		ao_next(S, t);
		return 1;
	case P_AO_TAKE: {
		auth_local(S, t, T->h, -1, "orphan take_one");
		unsigned w = loc(b);
		moved(S, T->h, b->f, 1);
		b->f = 0;
		b->a = (uint8_t)w;
		int x = NONE;
		if (w) {
			b->a = (uint8_t)(w & (w - 1));
			x = T->h * NOBJ + ctz(w);
		}
		D("orphan alloc: take_one of s%d -> %s", T->h, x == NONE ? "none" : oname(x));
		if (x != NONE)
			spec_handout(S, x);
		if (!w || !loc(b))
			orphan_unlist(S, T->h);
		if (x != NONE) {
			S->llock = NONE;
			set_var(S, t, x);
			op_done(S, t);
		} else {
			ao_next(S, t);
		}
		return 1;
	}
	case P_AO_NEW: {
		int h = T->h;
		if (h == NONE) {
			D("orphan alloc: no slab can be made: ENOMEM");
			set_var(S, t, NULLOBJ);
			op_done(S, t);
			return 1;
		}
		if (fix & X_NEWLISTS) {
			T->round = 1;
			D("orphan alloc: new slab s%d (listed by usl_oslab_new); again", h);
			T->pc = P_AO_LOCK;
			return 1;
		}
		if (S->llock != NONE)
			return 0;
		orphan_list(S, h);
		T->round = 1;
		D("orphan alloc: lock; new slab s%d on the orphan list; unlock", h);
		T->pc = P_AO_LOCK;
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* usl_oslab_new: a retired slab reused, or a new one. */
static int step_new_slab(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_NW_TAKE: {
		if (S->llock != NONE)
			return 0;   /* retired_take's list_lock */
		int h = -1;
		for (int j = 0; j < S->nrq; j++)
			if (!S->s[S->rq[j]].pending) {
				h = S->rq[j];
				retired_unlist(S, j);
				break;
			}
		if (h >= 0) {
			S->s[h].alive = 4;
			D("new slab: lock; retired_take: s%d's metadata (pending clear), off the retired list; unlock", h);
			T->h = (uint8_t)h;
			T->pc = P_NW_RESET;
			return 1;
		}
		for (int k = 0; k < NSLAB && h < 0; k++)
			if (!S->s[k].alive)
				h = k;
		if (h < 0) {
			D("new slab: lock; retired_take: none%s; no more metadata: NULL", S->nrq ? " with pending clear" : "");
			T->h = NONE;
			ret(S, t);
			return 1;
		}
		/* A fresh block (pending 0, inbox link NULL): no one else reaches it
		 * before its owner store, so its reset and fields are one step. */
		Slab *nb = &S->s[h];
		memset(nb, 0, sizeof(*nb));
		nb->inext = nb->anext = NONE;
		nb->alive = 4;
		slab_reset(S, h);
		nb->init = 0;
		D("new slab: retired_take: none; fresh metadata s%d (reset)", h);
		T->h = (uint8_t)h;
		T->pc = P_NW_INIT;
		return 1;
	}
	case P_NW_RESET:
		slab_reset(S, T->h);
		D("new slab s%d: reset: all but pending (%d) and the inbox link zeroed%s", T->h, b->pending,
		  fix & X_KEEPOWNER ? " (-x keepowner: owner 0xffff, slots, cache, slab kept)" : " (owner 0, slots, cache, slab NULL)");
		T->pc = P_NW_INIT;
		return 1;
	case P_NW_INIT:
		if (S->llock != NONE)
			return 0;
		b->init = 0;
		b->a = ALL;
		D("new slab s%d: slots, cache, slab set, local words all free; lock; on the node's list; unlock", T->h);
		T->pc = P_NW_OWNER;
		return 1;
	case P_NW_OWNER:
		if ((fix & X_NEWLISTS) && !T->tgt && S->llock != NONE)
			return 0;
		if (b->alive != 4)
			viol(V_REUSE, "the creator of s%d stores its owner and chunk-map entries, but s%d was discarded and "
			     "retired meanwhile (its new pages freed under its creator)", T->h, T->h);
		b->alive = 1;
		b->owner = T->tgt;
		if ((fix & X_NEWLISTS) && !T->tgt) {
			orphan_list(S, T->h);
			D("new slab s%d: lock; on the orphan list, owner = 0; unlock; ", T->h);
		}
		b->chunk = 1;
		D("new slab s%d: owner = %d; chunk map written", T->h, T->tgt);
		ret(S, t);
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* The free's chunk map and its rseq section (usl_owned_free_at). */
static int step_free_section(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	const Prog *P = prog_of(t);
	Op op = P->ops[T->ip < P->nops ? T->ip : 0];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;
	unsigned bit = T->x != NONE && T->x < NOBJS ? 1u << (T->x % NOBJ) : 0;

	switch (T->pc) {
	case P_FR_START: {
		int x = S->var[op.v];
		if (x == NONE)
			return 0;   /* not allocated yet (the handoff from another thread) */
		if (x == NULLOBJ) {
			D("free(NULL)");
			op_done(S, t);
			return 1;
		}
		T->x = (uint8_t)x;
		T->h = (uint8_t)(x / NOBJ);
		if (!S->s[T->h].chunk) {
			D("free %s: chunk map entry 0: ", oname(x));
			spec_report_free(S, x);
			op_done(S, t);
			return 1;
		}
		T->slowp = 0;
		T->pc = P_FR_SEC_R;
		D("free %s%s: chunk map -> s%d", oname(x), op.op == OP_FREE2 ? " (again: the client's double free)" : "",
		  T->h);
		return 1;
	}
	case P_FR_SEC_R: {
		Slot *o = &S->c[cpu];
		int other = o->lock != 0 || (mut != M_NOOWNERCHECK && b->owner != cpu + 1);
		if (other) {
			D("free %s: section on cpu%d: other (lock %d, owner %d)", oname(T->x), cpu, o->lock, b->owner);
			T->pc = T->slowp ? P_FS_OTHER : P_FS_CHUNK;
			return 1;
		}
		int dbl = (mut != M_NOPENDING && b->pending && (b->r & bit)) || (b->a & bit) || (b->f & bit);
		if (dbl) {
			D("free %s: section on cpu%d: dbl (pending %d remote %x local %x)", oname(T->x), cpu, b->pending, b->r,
			  loc(b));
			if (T->slowp || mut != M_RERUNSLOW) {
				D(": ");
				spec_report_free(S, T->x);
				op_done(S, t);
			} else {
				D(" -> the slow path (mutation: re-run)");
				T->saw = 1;
				T->pc = P_FS_CHUNK;
			}
			return 1;
		}
		/* The window: its remote-word check did not see a copy a remote free
		 * set after this read, or set but not announced yet (its xchg of
		 * pending still to come). */
		T->cause = 0;
		if (!(b->r & bit))
			T->cause = C_WIN;
		else if (!b->pending && S->maker[T->x] != NONE && S->maker[T->x] >> 6 == FK_REMOTE) {
			const Thr *M = &S->t[S->maker[T->x] >> 4 & 3];
			if (M->ip == (S->maker[T->x] & 15) && M->pc == P_AN_X && M->h == T->h)
				T->cause = C_WIN;
		}
		T->w = af ? b->f : b->a;
		T->insec = (uint8_t)cpu;
		T->secpc = P_FR_SEC_R;
		T->pc = P_FR_SEC_C;
		D("free %s: section on cpu%d reads lock 0, owner %d, pending %d%s, local %x", oname(T->x), cpu, b->owner,
		  b->pending, b->pending ? (b->r & bit ? " remote bit set" : " remote bit clear") : "", loc(b));
		return 1;
	}
	case P_FR_SEC_C: {
		auth_local(S, t, T->h, T->insec, "free section commit");
		if (af)
			b->f = (uint8_t)(T->w | bit);
		else
			b->a = (uint8_t)(T->w | bit);
		T->insec = NONE;
		D("free %s: section commits %s = %x", oname(T->x), af ? "F" : "local", T->w | bit);
		for (int u = 0; u < MAXT; u++)
			if (u != t && remote_between(S, u, T->x))
				S->t[u].cause |= C_SECT;
		spec_free(S, t, T->x, FK_SECTION);
		if (T->w == 0)
			T->pc = P_F_FIRST;
		else
			op_done(S, t);
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* usl_owned_free_slow: the first bit of a word, the list, the owner. */
static int step_free_slow(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_F_FIRST:
		if (!b->listed) {
			D("free %s: first bit of the word, slab not listed", oname(T->x));
			T->pc = P_F_LIST;
		} else {
			D("free %s: first bit of the word, slab listed", oname(T->x));
			op_done(S, t);
		}
		return 1;
	case P_F_LIST:
		T->own = b->owner;
		if (T->own && T->own != GIVEN) {
			D("usl_owned_list: owner %d: announce", T->own);
			call(T, P_AN_X, P_DONE);
		} else {
			D("usl_owned_list: owner %d: nothing", T->own);
			op_done(S, t);
		}
		return 1;
	case P_FS_CHUNK:
		if (!b->chunk) {
			D("free_slow %s: chunk map entry 0: ", oname(T->x));
			spec_report_free(S, T->x);
			op_done(S, t);
		} else {
			D("free_slow %s: chunk map -> s%d", oname(T->x), T->h);
			T->pc = P_FS_OWN;
		}
		return 1;
	case P_FS_OWN:
		T->own = b->owner;
		if (T->own == 0) {
			D("free_slow %s: owner 0: orphan free", oname(T->x));
			T->pc = P_FO_LOCK;
		} else if (T->own == GIVEN) {
			D("free_slow %s: given up: ", oname(T->x));
			spec_report_free(S, T->x);
			op_done(S, t);
		} else {
			D("free_slow %s: owner %d", oname(T->x), T->own);
			T->slowp = 1;
			T->pc = P_FR_SEC_R;
		}
		return 1;
	case P_FS_OTHER:
		D("free_slow %s: other: chunk map %s", oname(T->x), b->chunk ? "same" : "changed");
		T->pc = b->chunk ? P_FS_OTHER2 : P_FS_CHUNK;
		return 1;
	case P_FS_OTHER2:
		D("free_slow %s: other: owner %d (read %d before)", oname(T->x), b->owner, T->own);
		T->pc = b->owner == T->own ? P_FRM_A : P_FS_CHUNK;
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* A remote free (fetch_or into the remote word) and its announce. */
static int step_free_remote(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;
	unsigned bit = T->x != NONE && T->x < NOBJS ? 1u << (T->x % NOBJ) : 0;

	switch (T->pc) {
	case P_FRM_A:
		if (mut != M_NOREMOTELOCAL && (b->a & bit)) {
			D("free_remote %s: local bit set: ", oname(T->x));
			spec_report_free(S, T->x);
			op_done(S, t);
			return 1;
		}
		D("free_remote %s: local%s bit clear", oname(T->x), af ? " A" : "");
		T->cause = 0;   /* what happens to the object's bit before the fetch_or (a merge, a set) */
		for (int u = 0; u < SC->nthr; u++)
			if (S->t[u].pc == P_MG_OR && S->t[u].h == T->h && (S->t[u].rr & bit))
				T->cause |= C_MERGE;
		T->pc = af ? P_FRM_F : P_FRM_OR;
		return 1;
	case P_FRM_F:
		if (mut != M_NOREMOTELOCAL && (b->f & bit)) {
			D("free_remote %s: F bit set: ", oname(T->x));
			spec_report_free(S, T->x);
			op_done(S, t);
			return 1;
		}
		D("free_remote %s: F bit clear", oname(T->x));
		T->pc = P_FRM_OR;
		return 1;
	case P_FRM_OR: {
		live_access(S, T->h, "a remote free's fetch_or");
		unsigned old = b->r;
		b->r |= (uint8_t)bit;
		if (old & bit) {
			D("free_remote %s: fetch_or: remote bit was set: ", oname(T->x));
			spec_report_free(S, T->x);
			op_done(S, t);
			return 1;
		}
		D("free_remote %s: fetch_or remote -> %x", oname(T->x), b->r);
		for (int u = 0; u < MAXT; u++)
			if (u != t && S->t[u].pc == P_FO_SET && S->t[u].x == T->x)
				S->t[u].cause |= C_REM;
		spec_free(S, t, T->x, FK_REMOTE);
		call(T, P_AN_X, P_DONE);
		return 1;
	}
	case P_AN_X:
		live_access(S, T->h, "an announce's xchg of pending");
		if (b->pending) {
			D("announce s%d: pending already", T->h);
			ret(S, t);
		} else {
			b->pending = 1;
			D("announce s%d: xchg pending 0 -> 1", T->h);
			T->pc = P_AN_PUSH;
		}
		return 1;
	case P_AN_PUSH: {
		live_access(S, T->h, "an announce's push on an inbox");
		reset_read(S, T->h, "an announce's read of h->slots");
		Slot *o = &S->c[T->own - 1];
		b->inext = o->inbox;
		o->inbox = T->h;
		D("announce s%d: pushed on slot %d's inbox", T->h, T->own - 1);
		ret(S, t);
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* An orphan's free under list_lock, and the discard of a wholly free slab. */
static int step_free_orphan(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;
	unsigned bit = T->x != NONE && T->x < NOBJS ? 1u << (T->x % NOBJ) : 0;

	switch (T->pc) {
	case P_FO_LOCK:
		if (S->llock != NONE)
			return 0;
		if (b->owner != 0) {
			D("orphan free %s: lock; owner %d now: unlock, again", oname(T->x), b->owner);
			T->pc = P_FS_CHUNK;
		} else if (b->alive == 4) {
			S->llock = (uint8_t)t;
			viol(V_REUSE, "an orphan free (a stale double free) reads owner 0 of s%d, retired metadata a new slab "
			     "is being made in (its reset zeroed owner): it sets its bit and puts it on the orphan list", T->h);
			T->pc = P_FO_SET;
		} else if ((loc(b) | b->r) & bit) {
			D("orphan free %s: lock; bit set (local %x remote %x): unlock, ", oname(T->x), loc(b), b->r);
			spec_report_free(S, T->x);
			op_done(S, t);
		} else {
			S->llock = (uint8_t)t;
			D("orphan free %s: lock; bit clear", oname(T->x));
			T->cause = 0;
			T->pc = P_FO_SET;
		}
		return 1;
	case P_FO_SET:
		auth_local(S, t, T->h, -1, "orphan free");
		b->a |= (uint8_t)bit;
		D("orphan free %s: local |= bit, on the orphan list", oname(T->x));
		for (int u = 0; u < MAXT; u++)
			if (u != t && remote_between(S, u, T->x))
				S->t[u].cause |= C_ORPH;
		spec_free(S, t, T->x, FK_ORPHAN);
		orphan_list(S, T->h);
		T->pc = P_FO_CHECK;
		return 1;
	case P_FO_CHECK:   /* wholly_free: no bit in use, not pending */
		if (S->nol > SC->min_partial && !b->pending && loc(b) == ALL) {
			orphan_unlist(S, T->h);
			D("orphan free: s%d wholly free, not pending: off the list", T->h);
			T->pc = P_FO_GIVE;
		} else {
			S->llock = NONE;
			D("orphan free: s%d kept (pending %d, local %x); unlock", T->h, b->pending, loc(b));
			op_done(S, t);
		}
		return 1;
	case P_FO_GIVE:
		b->owner = GIVEN;
		b->chunk = 0;
		S->llock = NONE;
		D("orphan free: s%d given up (owner 0xffff, chunk map 0); unlock; discard", T->h);
		call(T, P_DS_LOCK, P_DONE);
		return 1;
	case P_DS_LOCK:
		if (S->llock != NONE)
			return 0;
		D("discard s%d", T->h);
		discard(S, t, T->h);
		ret(S, t);
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* Merge (remote word into local), drain of an inbox. */
static int step_merge_drain(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_MG_X:
		live_access(S, T->h, "a merge");
		T->rr = b->r;
		b->r = 0;
		moved(S, T->h, T->rr, 0);
		if (!T->rr) {
			T->any = loc(b) != 0;
			D("merge s%d: remote 0 (local %x)", T->h, loc(b));
			ret(S, t);
		} else {
			D("merge s%d: xchg remote -> %x", T->h, T->rr);
			T->pc = P_MG_OR;
		}
		return 1;
	case P_MG_OR: {
		auth_local(S, t, T->h, -1, "merge");
		unsigned both = T->rr & loc(b);
		for (; both; both &= both - 1)
			spec_report_merge(S, T->h * NOBJ + ctz(both));
		moved(S, T->h, b->f, 1);
		b->a |= (uint8_t)(T->rr | b->f);
		b->f = 0;
		T->rr = 0;
		T->any = b->a != 0;
		D("merge s%d: local -> %x", T->h, b->a);
		ret(S, t);
		return 1;
	}
	case P_DR_PEND:
		live_access(S, T->h, "a drain's read of the inbox link and store of pending");
		T->nx = b->inext;
		b->inext = NONE;
		if (mut != M_LATEPENDING) {
			b->pending = 0;
			D("drain: s%d: pending = 0", T->h);
		} else {
			D("drain: s%d: next", T->h);
		}
		T->pc = P_DR_OWN;
		return 1;
	case P_DR_OWN:
		if (b->owner != T->o + 1) {
			D("drain: s%d owner %d, not this slot's: reannounce", T->h, b->owner);
			T->pc = P_RA_LOCK;
		} else {
			D("drain: s%d ours: merge", T->h);
			call(T, P_MG_X, mut == M_LATEPENDING ? P_DR_LATE : P_DR_LIST);
		}
		return 1;
	case P_DR_LATE:
		b->pending = 0;
		D("drain: s%d: pending = 0 (after the merge)", T->h);
		T->pc = P_DR_LIST;
		return 1;
	case P_DR_LIST:
		if (T->any && !b->listed) {
			Slot *o = &S->c[T->o];
			b->listed = 1;
			b->anext = o->avail;
			o->avail = T->h;
			D("drain: s%d listed, on the avail stack", T->h);
		} else {
			D("drain: s%d %s", T->h, T->any ? "listed already" : "no free bits");
		}
		drain_next(S, t);
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* Reannounce: a pending slab whose owner is gone. */
static int step_reannounce(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_RA_LOCK: {
		if (S->llock != NONE)
			return 0;
		reset_read(S, T->h, "reannounce's usl_get_node(h->cache, h->slab)");
		S->llock = (uint8_t)t;
		int own = b->owner;
		if (own == 0 && b->alive == 4)
			viol(V_REUSE, "reannounce reads owner 0 of s%d, retired metadata a new slab is being made in (its "
			     "reset zeroed owner; the creator's owner store is still to come): it merges it and puts it on "
			     "the orphan list", T->h);
		if (own == 0) {
			D("reannounce s%d: lock; an orphan: merge", T->h);
			call(T, P_MG_X, P_RA_ORPH);
		} else if (own != GIVEN) {
			T->own = (uint8_t)own;
			D("reannounce s%d: lock; owner %d: announce", T->h, own);
			call(T, P_AN_X, P_RA_UNL);
		} else {
			S->llock = NONE;
			D("reannounce s%d: given up; unlock", T->h);
			drain_next(S, t);
		}
		return 1;
	}
	case P_RA_ORPH:
		if (T->any)
			orphan_list(S, T->h);
		S->llock = NONE;
		D("reannounce s%d: %s; unlock", T->h, T->any ? "on the orphan list" : "full");
		drain_next(S, t);
		return 1;
	case P_RA_UNL:
		S->llock = NONE;
		D("reannounce: unlock");
		drain_next(S, t);
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* The flusher (usl_owned_flush_all): mark, membarrier, reset. */
static int step_flush(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	const Prog *P = prog_of(t);
	Op op = P->ops[T->ip < P->nops ? T->ip : 0];

	switch (T->pc) {
	case P_FL_MARK: {
		Slot *o = &S->c[T->i];
		if (op.op == OP_DECAY) {
			if (o->lock == 0) {
				o->lock = 1;
				o->marker = (uint8_t)t;
				T->mk |= (uint8_t)(1 << T->i);
				D("decay: CAS slot %d lock 0 -> 1", T->i);
			} else {
				D("decay: slot %d busy (lock %d): left", T->i, o->lock);
			}
		} else {
			if (o->lock != 0)
				return 0;   /* wait for the taker / another marker */
			o->lock = 1;
			o->marker = (uint8_t)t;
			T->mk |= (uint8_t)(1 << T->i);
			D("flush: CAS slot %d lock 0 -> 1", T->i);
		}
		if (++T->i == NCPU) {
			T->i = 0;
			if (!T->mk)
				op_done(S, t);
			else
				T->pc = P_FL_MB;
		}
		return 1;
	}
	case P_FL_MB:
		if (mut != M_NOMEMBARRIER) {
			for (int u = 0; u < MAXT; u++)
				if (S->t[u].insec != NONE) {
					D("membarrier restarts T%d's section; ", u);
					S->t[u].pc = S->t[u].secpc;
					S->t[u].insec = NONE;
					S->t[u].w = 0;
					if (S->t[u].secpc == P_POP_R)
						S->t[u].h = NONE;
				}
			D("membarrier; ");
		} else {
			D("(no membarrier: mutation)");
		}
		for (int c = 0; c < NCPU; c++)
			if (T->mk >> c & 1)
				S->c[c].fowns = 1;
		T->i = 0;
		fl_slot(S, t);
		return 1;
	case P_FL_RESET: {
		if (S->llock != NONE)
			return 0;
		Slot *o = &S->c[T->o];
		o->cur = o->avail = o->wp = NONE;
		T->mask = 0;
		for (int h = 0; h < NSLAB; h++)
			if (S->s[h].alive == 1 && S->s[h].owner == T->o + 1)
				T->mask |= (uint8_t)(1 << h);
		D("flush slot %d: cursor, cur, avail reset; its slabs: %x", T->o, T->mask);
		T->pc = P_FL_ORPH;
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* A slab orphaned by the flusher or a decay sweep (usl_oslab_orphan). */
static int step_orphan(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_FL_ORPH:
		if (!T->mask) {
			T->i++;
			D("flush: slot %d done; ", T->o);
			fl_slot(S, t);
			return 1;
		}
		if (S->llock != NONE)
			return 0;
		T->h = (uint8_t)ctz(T->mask);
		T->mask &= (uint8_t)(T->mask - 1);
		push(T, P_FL_ORPH);
		__attribute__((fallthrough));   /* usl_oslab_orphan(h) */
	case P_OR_LOCK:
		if (S->llock != NONE)
			return 0;
		pc_hits[P_OR_LOCK]++;   /* a step of P_FL_ORPH's */
		S->llock = (uint8_t)t;
		S->s[T->h].owner = 0;
		D("orphan s%d: lock; owner = 0", T->h);
		T->pc = P_OR_UNL;
		return 1;
	case P_OR_UNL:
		b->listed = 0;
		D("orphan s%d: listed = 0; ", T->h);
		call(T, P_MG_X, P_OR_AFTER);
		return 1;
	case P_OR_AFTER:
		if (T->any && !b->pending && loc(b) == ALL && (T->dall || S->nol >= SC->min_partial)) {
			b->owner = GIVEN;
			b->chunk = 0;
			S->llock = NONE;
			D("orphan s%d: wholly free: given up; unlock; discard", T->h);
			T->pc = P_DS_LOCK;   /* returns where usl_oslab_orphan would */
		} else {
			if (T->any)
				orphan_list(S, T->h);
			S->llock = NONE;
			D("orphan s%d: %s; unlock", T->h, T->any ? "on the orphan list" : "full");
			ret(S, t);
		}
		return 1;
	default:
		return STEP_OTHER;
	}
}

/* Unmark after a flush; usl_owned_decay: discard_empty and the trim. */
static int step_decay(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];
	const Prog *P = prog_of(t);
	Op op = P->ops[T->ip < P->nops ? T->ip : 0];
	Slab *b = T->h != NONE && T->h < NSLAB ? &S->s[T->h] : NULL;

	switch (T->pc) {
	case P_FL_UNMARK:
		while (T->i < NCPU && !(T->mk >> T->i & 1))
			T->i++;
		if (T->i < NCPU) {
			Slot *o = &S->c[T->i];
			o->lock = 0;
			if (o->marker == t)
				o->marker = NONE;
			o->fowns = 0;
			D("%s: unmark slot %d (lock = 0)", op.op == OP_DECAY ? "decay" : "flush", T->i);
			T->i++;
		}
		while (T->i < NCPU && !(T->mk >> T->i & 1))
			T->i++;
		if (T->i == NCPU) {
			T->i = 0;
			if (op.op == OP_FLUSH)
				T->pc = P_DE_LOCK;
			else
				op_done(S, t);
		}
		return 1;
	case P_DE_LOCK:
		if (S->llock != NONE)
			return 0;
		S->llock = (uint8_t)t;
		T->i = 0;
		D("discard_empty: lock; ");
		de_next(S, t);
		return 1;
	case P_DE_AFTER:
		if (!b->pending && loc(b) == ALL) {
			orphan_unlist(S, T->h);
			b->owner = GIVEN;
			b->chunk = 0;
			S->llock = NONE;
			D("discard_empty: s%d wholly free: given up; unlock; discard", T->h);
			call(T, P_DS_LOCK, P_DE_LOCK);
		} else {
			T->i++;
			D("discard_empty: s%d in use; ", T->h);
			de_next(S, t);
		}
		return 1;

	/* slot_trim_empty: the slot (marked after membarrier) keeps one wholly
	 * free slab (its cursor slab, else the first on avail); each other wholly
	 * free one on avail, not pending, is unlinked and orphaned (discard_all). */
	case P_TR_START: {
		Slot *o = &S->c[T->o];
		T->kept = o->cur != NONE && loc(&S->s[o->cur]) == ALL;
		T->nx = o->avail;
		T->pv = NONE;
		D("trim slot %d: cursor slab %s", T->o, T->kept ? "wholly free (kept)" : "in use or none");
		T->pc = P_TR_NEXT;
		return 1;
	}
	case P_TR_NEXT: {
		int h = T->nx;
		if (h == NONE) {
			D("trim slot %d: done; ", T->o);
			T->i++;
			fl_slot(S, t);
			return 1;
		}
		Slab *hb = &S->s[h];
		T->nx = hb->anext;
		if (loc(hb) == ALL && !hb->pending) {
			if (T->kept) {
				if (T->pv == NONE)
					S->c[T->o].avail = hb->anext;
				else
					S->s[T->pv].anext = hb->anext;
				hb->anext = NONE;
				T->h = (uint8_t)h;
				D("trim: s%d wholly free, not pending: off avail, orphaned", h);
				call(T, P_OR_LOCK, P_TR_NEXT);
				return 1;
			}
			T->kept = 1;
			D("trim: s%d wholly free: kept", h);
		} else {
			D("trim: s%d in use or pending", h);
		}
		T->pv = (uint8_t)h;
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* fork: usl_owned_fork_lock / unlock. */
static int step_fork(State *S, int t, int cpu)
{
	Thr *T = &S->t[t];

	switch (T->pc) {
	case P_FK_MARK: {
		int i = mut == M_FORKREVERSE ? NCPU - 1 - T->i : T->i;
		Slot *o = &S->c[i];
		if (o->lock != 0)
			return 0;
		o->lock = 1;
		o->marker = (uint8_t)t;
		D("fork: CAS slot %d lock 0 -> 1", i);
		if (++T->i == NCPU) {
			T->i = 0;
			T->pc = P_FK_POINT;
		}
		return 1;
	}
	case P_FK_POINT:
		if (S->llock != NONE)
			return 0;   /* the fork handlers take list_lock too */
		D("fork(): the child's copy taken here");
		for (int c = 0; c < NCPU; c++)
			if (S->c[c].holder != NONE || S->c[c].lock != 1)
				viol(V_FORK, "the child inherits slot %d taken (lock %d, held by T%d)", c, S->c[c].lock,
				     S->c[c].holder == NONE ? -1 : S->c[c].holder);
		for (int h = 0; h < NSLAB; h++) {
			if (!S->s[h].alive || S->s[h].alive == 3 || !S->s[h].pending)
				continue;
			int on = 0, an = -1;
			for (int c = 0; c < NCPU; c++)
				for (int k = S->c[c].inbox, n = 0; k != NONE && n < 8; k = S->s[k].inext, n++)
					on |= k == h;
			for (int u = 0; u < SC->nthr; u++)
				if (S->t[u].pc == P_AN_PUSH && S->t[u].h == h)
					an = u;
			if (on)
				continue;
			if (an >= 0)
				viol(V_FORK_ANNOUNCE, "the child inherits s%d%s pending on no inbox: T%d was between its xchg of "
				     "pending and its push; in the child its remote bits wait for a flush or a decay orphaning", h,
				     S->s[h].alive == 2 ? " (retired)" : "", an);
			else
				viol(V_FORK_PENDING, "the child inherits s%d pending on no inbox, and no announce is in flight", h);
		}
		T->pc = P_FK_UNMARK;
		return 1;
	case P_FK_UNMARK: {
		Slot *o = &S->c[T->i];
		o->lock = 0;
		if (o->marker == t)
			o->marker = NONE;
		D("fork: unmark slot %d (lock = 0)", T->i);
		if (++T->i == NCPU)
			op_done(S, t);
		return 1;
	}
	default:
		return STEP_OTHER;
	}
}

/* One step of thread t; the CPU of a section's first step is cpu. 0: t
 * cannot move now. The steps are grouped by the code they model: each group
 * runs the steps of its own pcs and returns STEP_OTHER for any other. */
static int step(State *S, int t, int cpu)
{
	static int (*const groups[])(State *, int, int) = {
		step_alloc_sections,
		step_refill,
		step_refill_take,
		step_alloc_orphan,
		step_new_slab,
		step_free_section,
		step_free_slow,
		step_free_remote,
		step_free_orphan,
		step_merge_drain,
		step_reannounce,
		step_flush,
		step_orphan,
		step_decay,
		step_fork,
	};
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		int r = groups[g](S, t, cpu);
		if (r != STEP_OTHER)
			return r;
	}
	const Thr *T = &S->t[t];
	fprintf(stderr, "model: bad pc %d (T%d op %d sp %d h %d)\n", T->pc, t, T->ip, T->sp, T->h);
	exit(2);
}

/* ---------------------------------------------------------- invariants -- */
static int on_inbox(const State *S, int h)
{
	int n = 0;
	for (int c = 0; c < NCPU; c++)
		for (int k = S->c[c].inbox, g = 0; k != NONE && g < 8; k = S->s[k].inext, g++)
			n += k == h;
	return n;
}

static int on_avail(const State *S, int c, int h)
{
	for (int k = S->c[c].avail, g = 0; k != NONE && g < 8; k = S->s[k].anext, g++)
		if (k == h)
			return 1;
	return 0;
}

static void check_state(const State *S)
{
	for (int c = 0; c < NCPU; c++) {
		const Slot *o = &S->c[c];
		if (o->holder != NONE && o->marker != NONE)
			viol(V_LOCK, "slot %d is held by T%d and marked by T%d at once", c, o->holder, o->marker);
		else if (o->holder != NONE && o->lock != 2)
			viol(V_LOCK, "slot %d is held by T%d but its lock reads %d (sections run beside the holder)", c,
			     o->holder, o->lock);
		else if (o->marker != NONE && o->lock != 1)
			viol(V_LOCK, "slot %d is marked by T%d but its lock reads %d", c, o->marker, o->lock);
	}
	for (int h = 0; h < NSLAB; h++) {
		const Slab *b = &S->s[h];
		if (b->olisted && b->owner != 0)
			viol(V_OLIST, "s%d is on the orphan list with owner %d%s", h, b->owner,
			     b->owner == GIVEN ? " (0xffff)" : "");
		if (b->alive != 1)
			continue;
		for (int i = 0; i < NOBJ; i++) {
			int x = h * NOBJ + i, copies = (b->a >> i & 1) + (b->f >> i & 1) + (b->r >> i & 1);
			for (int u = 0; u < MAXT; u++)
				if (S->t[u].pc == P_MG_OR && S->t[u].h == h)
					copies += S->t[u].rr >> i & 1;
			int want = (S->spec[x] == SP_FREE) + S->dup[x];
			if (copies != want)
				viol(V_BITS, "%s is %s with %d extra copies but has %d free bits", oname(x),
				     S->spec[x] == SP_FREE ? "free" : "allocated", S->dup[x], copies);
		}
	}
}

static void check_end(const State *S)
{
	if (S->llock != NONE)
		viol(V_STRAND, "list_lock held at the end");
	for (int c = 0; c < NCPU; c++)
		if (S->c[c].lock != 0)
			viol(V_STRAND, "slot %d's lock is %d at the end", c, S->c[c].lock);
	for (int h = 0; h < NSLAB; h++) {
		const Slab *b = &S->s[h];
		if (b->alive == 2 && b->pending && !on_inbox(S, h))
			viol(V_STRAND, "retired s%d pending but on no inbox: its metadata is never reused", h);
		if (b->alive != 1)
			continue;
		int inb = on_inbox(S, h);
		if (inb > 1)
			viol(V_STRAND, "s%d is on two inboxes", h);
		if (b->pending && !inb)
			viol(V_STRAND, "s%d pending but on no inbox: its remote frees are never announced again", h);
		if (!b->pending && inb)
			viol(V_STRAND, "s%d on an inbox but not pending", h);
		int c = b->owner >= 1 && b->owner <= NCPU ? b->owner - 1 : -1;
		int listed_really = c >= 0 && (S->c[c].cur == h || on_avail(S, c, h));
		if (c >= 0 && b->listed != listed_really)
			viol(V_STRAND, "s%d listed %d but %s its owner's cursor slab or avail stack", h, b->listed,
			     listed_really ? "is" : "is not");
		if (b->owner == 0 && b->listed)
			viol(V_STRAND, "orphan s%d still listed", h);
		for (int i = 0; i < NOBJ; i++) {
			int x = h * NOBJ + i;
			if (S->spec[x] == SP_ALLOC && S->dup[x])
				viol(dup_viol(S->dkind[x]), "%s is allocated and also has a free bit left (it would be handed "
				     "out again; its extra copy: %s)", oname(x), !S->dkind[x] ? "of unknown origin" :
				     dk_text(S->dkind[x] & DK_BUG ? DK_BUG : S->dkind[x] & -S->dkind[x]));
			if (S->spec[x] != SP_FREE)
				continue;
			int found = inb;
			if ((loc(b) >> i & 1) && (listed_really || (b->owner == 0 && b->olisted)))
				found = 1;
			if ((b->r >> i & 1) && b->owner == 0 && b->olisted)
				found = 1;
			if (!found)
				viol(V_STRAND, "%s is free but unreachable (local %x remote %x, owner %d, listed %d, orphan "
				     "listed %d, pending %d)", oname(x), loc(b), b->r, b->owner, b->listed, b->olisted,
				     b->pending);
		}
	}
}

/* ------------------------------------------------------------- explorer -- */
/* The states found, in chunks (no copying as it grows), with each one's
 * parent and the step (thread * 4 + CPU) that led to it; an open-addressing
 * table of indices finds a state. */
#define CHUNK_BITS 16
#define CHUNK (1u << CHUNK_BITS)
#define MAX_CHUNKS 1024
typedef struct {
	State *st[MAX_CHUNKS];
	uint32_t *parent[MAX_CHUNKS];
	uint8_t *label[MAX_CHUNKS];
	uint32_t n;
	uint32_t *tab;
	uint64_t tabsz;
} Space;

static State *ST(Space *sp, uint32_t k) { return &sp->st[k >> CHUNK_BITS][k & (CHUNK - 1)]; }
static uint32_t PARENT(Space *sp, uint32_t k) { return sp->parent[k >> CHUNK_BITS][k & (CHUNK - 1)]; }
static uint8_t LABEL(Space *sp, uint32_t k) { return sp->label[k >> CHUNK_BITS][k & (CHUNK - 1)]; }

static uint64_t hash_state(const State *S)
{
	const unsigned char *p = (const unsigned char *)S;
	uint64_t h = 0x9e3779b97f4a7c15ULL;
	size_t i = 0;
	for (; i + 8 <= sizeof(*S); i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	for (; i < sizeof(*S); i++)
		h = (h ^ p[i]) * 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 32;
	return h;
}

static uint32_t max_states = 30000000;

static void space_grow_tab(Space *sp)
{
	uint64_t nsz = sp->tabsz ? sp->tabsz * 2 : 1 << 20;
	uint32_t *nt = malloc(nsz * sizeof(uint32_t));
	if (!nt) {
		fprintf(stderr, "model: out of memory\n");
		exit(2);
	}
	memset(nt, 0xff, nsz * sizeof(uint32_t));
	for (uint32_t k = 0; k < sp->n; k++) {
		uint64_t j = hash_state(ST(sp, k)) & (nsz - 1);
		while (nt[j] != UINT32_MAX)
			j = (j + 1) & (nsz - 1);
		nt[j] = k;
	}
	free(sp->tab);
	sp->tab = nt;
	sp->tabsz = nsz;
}

/* Index of S in the space, added (with its parent and label) if new; *isnew. */
static uint32_t space_add(Space *sp, const State *S, uint32_t parent, uint8_t label, int *isnew)
{
	if ((uint64_t)sp->n * 2 >= sp->tabsz)
		space_grow_tab(sp);
	uint64_t j = hash_state(S) & (sp->tabsz - 1);
	while (sp->tab[j] != UINT32_MAX) {
		if (!memcmp(ST(sp, sp->tab[j]), S, sizeof(*S))) {
			*isnew = 0;
			return sp->tab[j];
		}
		j = (j + 1) & (sp->tabsz - 1);
	}
	uint32_t c = sp->n >> CHUNK_BITS, i = sp->n & (CHUNK - 1);
	if (!i) {
		if (sp->n >= max_states || c >= MAX_CHUNKS) {
			fprintf(stderr, "model: more than %u states: the scenario is too big\n", max_states);
			exit(2);
		}
		sp->st[c] = malloc(CHUNK * sizeof(State));
		sp->parent[c] = malloc(CHUNK * sizeof(uint32_t));
		sp->label[c] = malloc(CHUNK);
		if (!sp->st[c] || !sp->parent[c] || !sp->label[c]) {
			fprintf(stderr, "model: out of memory\n");
			exit(2);
		}
	}
	sp->st[c][i] = *S;
	sp->parent[c][i] = parent;
	sp->label[c][i] = label;
	sp->tab[j] = sp->n;
	*isnew = 1;
	return sp->n++;
}

static void space_free(Space *sp)
{
	for (uint32_t c = 0; c < MAX_CHUNKS && sp->st[c]; c++) {
		free(sp->st[c]);
		free(sp->parent[c]);
		free(sp->label[c]);
	}
	free(sp->tab);
	memset(sp, 0, sizeof(*sp));
}

/* The CPUs t may run its next step on (a bit mask; 0: it cannot move now). */
static unsigned cpus_for(const State *S, int t)
{
	const Thr *T = &S->t[t];
	int pin = SC->th[t].cpu;
	if (T->pc == P_END)
		return 0;
	if (T->insec != NONE)
		return 1u << T->insec;
	unsigned busy = 0;   /* CPUs where another thread is inside a section */
	for (int u = 0; u < SC->nthr; u++)
		if (u != t && S->t[u].insec != NONE)
			busy |= 1u << S->t[u].insec;
	unsigned idle = ((1u << NCPU) - 1) & ~busy;
	if (pin >= 0)
		return busy >> pin & 1 ? 0 : 1u << pin;
	if (!idle)
		return 0;    /* it would preempt (restart) a section: the same as running later */
	if (pin == CPU_NONE || !is_section_start(T->pc))
		return 1;    /* runs on some CPU without a section; only sections care which */
	return idle;
}

typedef struct {
	uint64_t states, edges, depth;
	double secs;
	int found;               /* violation kinds */
	uint32_t at[V_NR];       /* state index of each kind's first (shortest) violation */
	uint8_t lastlabel[V_NR]; /* the violating step (not stored as a state) */
	uint32_t from[V_NR];
	int endstate[V_NR];      /* found by the quiescence check of state at[] */
	char msg[V_NR][256];
} Result;

static void initial(State *S)
{
	memset(S, 0, sizeof(*S));
	for (int h = 0; h < NSLAB; h++)
		S->s[h].inext = S->s[h].anext = NONE;
	for (int c = 0; c < NCPU; c++) {
		S->c[c].wp = S->c[c].cur = S->c[c].avail = S->c[c].inbox = NONE;
		S->c[c].holder = S->c[c].marker = NONE;
	}
	S->llock = NONE;
	memset(S->var, NONE, sizeof(S->var));
	memset(S->maker, NONE, sizeof(S->maker));
	for (int t = 0; t < MAXT; t++) {
		S->t[t].insec = NONE;
		S->t[t].pc = P_END;
	}
}

/* The setup program, run alone in thread slot 0 before the threads start. */
static void run_setup(State *S)
{
	if (!SC->setup.nops)
		goto threads;
	/* thread slot 0 runs the setup program, as thread 0 of a scenario copy */
	Scenario tmp = *SC;
	tmp.th[0] = SC->setup;
	tmp.nthr = 1;
	const Scenario *keep = SC;
	SC = &tmp;
	S->t[0].ip = 0;
	op_begin(S, 0);
	for (int guard = 0; S->t[0].pc != P_END; guard++) {
		if (guard > 10000 || !step(S, 0, SC->th[0].cpu >= 0 ? SC->th[0].cpu : 0)) {
			fprintf(stderr, "model: the setup of %s does not finish\n", keep->name);
			exit(2);
		}
	}
	SC = keep;
	memset(&S->t[0], 0, sizeof(S->t[0]));
	S->t[0].insec = NONE;
	S->t[0].pc = P_END;
	for (int x = 0; x < NOBJS; x++)
		S->maker[x] = NONE;
threads:
	for (int t = 0; t < SC->nthr; t++) {
		memset(&S->t[t], 0, sizeof(S->t[t]));
		S->t[t].ip = 0;
		op_begin(S, t);
	}
}

static void explore(Space *sp, Result *R)
{
	State S0, S;
	initial(&S0);
	run_setup(&S0);
	int isnew;
	memset(R, 0, sizeof(*R));
	space_add(sp, &S0, UINT32_MAX, 0, &isnew);
	clock_t t0 = clock();
	for (uint32_t k = 0; k < sp->n; k++) {
		State base = *ST(sp, k);
		const State *cur = &base;
		int any = 0, alldone = 1;
		for (int t = 0; t < SC->nthr; t++) {
			if (cur->t[t].pc == P_END)
				continue;
			alldone = 0;
			unsigned cpus = cpus_for(cur, t);
			for (int c = 0; c < NCPU; c++) {
				if (!(cpus >> c & 1))
					continue;
				S = *cur;
				vflag = 0;
				int pc = cur->t[t].pc;
				if (!step(&S, t, c))
					continue;
				pc_hits[pc]++;
				any = 1;
				R->edges++;
				check_state(&S);
				uint8_t label = (uint8_t)(t * 4 + c);
				if (vflag) {
					for (int v = 0; v < V_NR; v++)
						if ((vflag >> v & 1) && !(R->found >> v & 1)) {
							R->found |= 1 << v;
							R->from[v] = k;
							R->lastlabel[v] = label;
							R->endstate[v] = 0;
							memcpy(R->msg[v], vmsg[v], sizeof(vmsg[v]));
						}
					if (vflag & ~V_GOES_ON)
						continue;    /* not expanded further */
				}
				space_add(sp, &S, k, label, &isnew);
			}
		}
		if (alldone) {
			vflag = 0;
			check_end(cur);
		} else if (!any) {
			vflag = 0;
			viol(V_DEADLOCK, "no thread can move");
		} else {
			continue;
		}
		for (int v = 0; v < V_NR; v++)
			if ((vflag >> v & 1) && !(R->found >> v & 1)) {
				R->found |= 1 << v;
				R->from[v] = k;
				R->endstate[v] = 1;
				memcpy(R->msg[v], vmsg[v], sizeof(vmsg[v]));
			}
	}
	R->states = sp->n;
	R->secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
}

static const char *thread_name(int t)
{
	static char b[4][32];
	static int k;
	k = (k + 1) & 3;
	const Prog *p = &SC->th[t];
	if (p->cpu >= 0)
		snprintf(b[k], 32, "T%d %s (cpu%d)", t, p->name, p->cpu);
	else if (p->cpu == CPU_MIGRATE)
		snprintf(b[k], 32, "T%d %s (migrates)", t, p->name);
	else
		snprintf(b[k], 32, "T%d %s", t, p->name);
	return b[k];
}

/* Replay the path to state index k (and one more step, label, if last >= 0)
 * to out; its number of steps. */
static uint32_t print_trace(FILE *out, Space *sp, uint32_t k, int last)
{
	uint32_t n = 0;
	for (uint32_t j = k; PARENT(sp, j) != UINT32_MAX; j = PARENT(sp, j))
		n++;
	uint8_t *labels = malloc(n + 1);
	uint32_t m = n;
	for (uint32_t j = k; PARENT(sp, j) != UINT32_MAX; j = PARENT(sp, j))
		labels[--m] = LABEL(sp, j);
	if (last >= 0)
		labels[n++] = (uint8_t)last;
	State S;
	initial(&S);
	run_setup(&S);
	fprintf(out, "    threads:");
	for (int t = 0; t < SC->nthr; t++)
		fprintf(out, "%s %s", t ? ";" : "", thread_name(t));
	fprintf(out, "\n    (sN.i: object i of slab N; words are hex bitmaps, bit i set: object i free)\n");
	tracing = 1;
	for (uint32_t i = 0; i < n; i++) {
		int t = labels[i] / 4, c = labels[i] % 4;
		desc[0] = vdesc[0] = 0;
		vflag = 0;
		int sec = S.t[t].insec != NONE || is_section_start(S.t[t].pc);
		step(&S, t, c);
		check_state(&S);
		if (sec)
			fprintf(out, "    %3u  %-22s [cpu%d] %s%s\n", i + 1, thread_name(t), c, desc, vdesc);
		else
			fprintf(out, "    %3u  %-22s        %s%s\n", i + 1, thread_name(t), desc, vdesc);
	}
	tracing = 0;
	free(labels);
	return n;
}

/* ------------------------------------------------------------ scenarios -- */
#define A(v) {OP_ALLOC, v}
#define F(v) {OP_FREE, v}
#define F2(v) {OP_FREE2, v}
#define FLUSH {OP_FLUSH, 0}
#define DECAY {OP_DECAY, 0}
#define TRIM {OP_DECAY, 1}
#define FORK {OP_FORK, 0}
enum { va, vb, vc, vd, ve, vf, vg, vh, vi, vj, vk, vl };

static const Scenario scenarios[] = {
	{"remote", "a correct client: local and remote frees, refills, a migrating thread, inbox merges", 5,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 3, {F(va), A(vc), A(vd)}},
	  {"remote", 1, 2, {F(vb), F(vc)}},
	  {"migrant", CPU_MIGRATE, 2, {A(ve), F(ve)}}}},
	{"refill", "a correct client: both CPUs allocate past a slab, remote frees announce to each other", 5,
	 {"setup", 0, 3, {A(va), A(vb), A(vc)}},
	 3,
	 {{"owner", 0, 3, {A(vd), A(ve), F(vf)}},
	  {"remote", 1, 3, {F(va), A(vf), F(vd)}},
	  {"migrant", CPU_MIGRATE, 2, {F(vb), A(vg)}}}},
	{"flush", "a correct client against usl_owned_flush_all: orphans, orphan frees, adoption, discard", 5,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 2, {F(va), A(vc)}},
	  {"remote", 1, 2, {F(vb), A(vd)}},
	  {"flusher", CPU_NONE, 1, {FLUSH}}}},
	{"flush-migrant", "a migrating thread allocating and freeing against a flusher", 0,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"migrant", CPU_MIGRATE, 3, {A(vc), F(va), F(vc)}},
	  {"remote", 1, 1, {F(vb)}},
	  {"flusher", CPU_NONE, 1, {FLUSH}}}},
	{"decay", "a correct client against the decay sweep (try-once marks, min_partial kept)", 0,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 2, {A(vc), F(va)}},
	  {"remote", 1, 2, {F(vb), F(vc)}},
	  {"sweep", CPU_NONE, 1, {DECAY}}}},
	{"flush-more", "a longer correct client against usl_owned_flush_all (orphans adopted by either CPU)", 5,
	 {"setup", 0, 3, {A(va), A(vb), A(vc)}},
	 3,
	 {{"owner", 0, 3, {F(va), A(vd), F(vd)}},
	  {"remote", 1, 3, {F(vb), A(ve), F(vc)}},
	  {"flusher", CPU_NONE, 1, {FLUSH}}}},
	{"orphans", "a correct client on an orphan: orphan frees, adoption, orphan allocation, discard (min_partial 0)", 0,
	 {"setup", 0, 3, {A(va), A(vb), FLUSH}},
	 3,
	 {{"owner", 0, 2, {F(va), A(vc)}},
	  {"remote", 1, 3, {F(vb), A(vd), F(vc)}},
	  {"migrant", CPU_MIGRATE, 2, {A(ve), F(ve)}}}},
	{"sweeps", "a correct client against a decay sweep and a flush in a row", 0,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 3, {A(vc), F(va), A(vd)}},
	  {"remote", 1, 3, {F(vb), F(vc), A(ve)}},
	  {"sweep", CPU_NONE, 2, {DECAY, FLUSH}}}},
	{"trim", "the decay sweep's trim of a busy slot (cursor slab and an avail slab wholly free) against "
	 "allocations, frees and a double free into the avail slab", 5,
	 /* s0 and s1 filled, then freed while unlisted (announced); s2 filled; the
	  * refill lists s0 and s1, takes s0's first object, which is freed: the
	  * cursor slab s0 and s1 on avail are wholly free, s2's objects in use. */
	 {"setup", 0, 22, {A(va), A(vb), A(vc), A(vd), A(ve), A(vf), A(vg), A(vh), A(vi), F(va), F(vb), F(vc), F(vd),
	                   F(ve), F(vf), F(vg), F(vh), A(vj), A(vk), A(vl), A(va), F(va)}},
	 3,
	 {{"owner", 0, 2, {F(vi), A(vb)}},
	  {"remote", 1, 2, {F(vj), F2(vh)}},
	  {"sweep", CPU_NONE, 1, {TRIM}}}},
	{"fork", "a correct client against fork's marks (a refill may race them)", 5,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 3, {A(vc), A(vd), A(ve)}},
	  {"remote", 1, 2, {F(va), F(vc)}},
	  {"fork", CPU_NONE, 1, {FORK}}}},
	{"fork-flush", "fork's marks and a flusher's marks at once (the same order: no deadlock)", 5,
	 {"setup", 0, 1, {A(va)}},
	 3,
	 {{"owner", 0, 2, {F(va), A(vb)}},
	  {"flusher", CPU_NONE, 1, {FLUSH}},
	  {"fork", CPU_NONE, 1, {FORK}}}},
	{"double-local", "a double free on the owner CPU, a remote free and allocations beside it", 5,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 2,
	 {{"owner", 0, 4, {F(va), F2(va), A(vc), A(vd)}},
	  {"remote", 1, 2, {F(vb), A(ve)}}}},
	{"double-cross", "one object freed on both CPUs (owner and remote) while the owner allocates", 5,
	 {"setup", 0, 4, {A(va), A(vb), A(vc), A(vd)}},
	 2,
	 {{"owner", 0, 3, {F(va), A(ve), A(vf)}},
	  {"remote", 1, 1, {F2(va)}}}},
	{"double-remote", "one object freed twice from the remote CPU while the owner refills", 5,
	 {"setup", 0, 4, {A(va), A(vb), A(vc), A(vd)}},
	 2,
	 {{"owner", 0, 2, {A(ve), A(vf)}},
	  {"remote", 1, 2, {F(va), F2(va)}}}},
	{"double-orphan", "one object of an orphan freed on both CPUs while a third thread allocates", 5,
	 {"setup", 0, 3, {A(va), A(vb), FLUSH}},
	 3,
	 {{"owner", 0, 2, {F(va), A(vc)}},
	  {"remote", 1, 2, {F2(va), F(vb)}},
	  {"migrant", CPU_MIGRATE, 2, {A(vd), A(ve)}}}},
	{"double-flush", "a double free across CPUs while a flusher gives the slots up", 5,
	 {"setup", 0, 2, {A(va), A(vb)}},
	 3,
	 {{"owner", 0, 2, {F(va), A(vc)}},
	  {"remote", 1, 2, {F2(va), A(vd)}},
	  {"flusher", CPU_NONE, 1, {FLUSH}}}},
};
#define NSCEN (int)(sizeof(scenarios) / sizeof(scenarios[0]))

/* ------------------------------------------------------------------ main -- */
typedef struct {
	const char *only;                        /* -s: one scenario */
	int quiet, cover;                        /* -q, -c */
} Opts;

/* The index of name in names[0..n), or n. */
static int name_index(const char *const *names, int n, const char *name)
{
	int k;
	for (k = 0; k < n && strcmp(name, names[k]); k++)
		;
	return k;
}

static void list_names(void)
{
	for (int k = 0; k < NSCEN; k++)
		printf("scenario %-14s %s\n", scenarios[k].name, scenarios[k].what);
	for (int k = 1; k < M_NR; k++)
		printf("mutation %-14s %s\n", mut_names[k], mut_what[k]);
	for (int k = 0; k < X_NR; k++)
		printf("fix      %-14s %s\n", fix_names[k], fix_what[k]);
}

/* The options into o, mut, fix and af: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, Opts *o)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			o->only = argv[++i];
		} else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
			const char *m = argv[++i];
			int k = name_index(mut_names, M_NR, m);
			if (k == M_NR) {
				fprintf(stderr, "owned_model: no mutation %s (-l lists them)\n", m);
				return 2;
			}
			mut = k;
		} else if (!strcmp(argv[i], "-x") && i + 1 < argc) {
			const char *m = argv[++i];
			int k = name_index(fix_names, X_NR, m);
			if (k == X_NR) {
				fprintf(stderr, "owned_model: no fix %s (-l lists them)\n", m);
				return 2;
			}
			fix &= ~(1 << k);
		} else if (!strcmp(argv[i], "-A")) {
			af = 1;
		} else if (!strcmp(argv[i], "-c")) {
			o->cover = 1;
		} else if (!strcmp(argv[i], "-q")) {
			o->quiet = 1;
		} else if (!strcmp(argv[i], "-l")) {
			list_names();
			return 0;
		} else {
			fprintf(stderr, "usage: owned_model [-s scenario] [-m mutation] [-x fix] [-A] [-q] [-c] [-l]\n");
			return 2;
		}
	}
	return -1;
}

static void print_header(void)
{
	printf("owned slot protocol model: %d CPUs, %d slabs of %d objects, %s local word%s%s%s", NCPU, NSLAB, NOBJ,
	       af ? "split (A/F)" : "one", mut ? "; MUTATION " : "", mut ? mut_names[mut] : "",
	       mut ? " (this run must fail)" : "");
	for (int k = 0; k < X_NR; k++)
		if (fix >> k & 1)
			printf("; fix %s", fix_names[k]);
	printf("\n");
}

/* What the scenarios found, summed up over the run. */
typedef struct {
	uint64_t total;                          /* states */
	double secs;
	int ran, bad, acc;                       /* scenarios run, violations, accepted kinds (bits) */
	char *acc_trace[V_NR];                   /* each accepted shape's shortest trace, and where from */
	uint32_t acc_len[V_NR];
	const Scenario *acc_sc[V_NR];
} Run;

/* The violation or accepted race v of scenario SC: its message, and its
 * trace (printed now for a violation, kept if the shortest for an accepted
 * one). 0, or 2 when out of memory. */
static int report_found(Run *run, Space *sp, const Result *R, int v, int quiet)
{
	int fatal = !(V_ACCEPTED >> v & 1);
	if (fatal)
		run->bad++;
	else
		run->acc |= 1 << v;
	if (fatal)
		printf("  VIOLATION: %s\n    %s\n", vnames[v], R->msg[v]);
	else
		printf("  accepted: %s\n    %s\n", vshort[v], R->msg[v]);
	if (quiet)
		return 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = fatal ? stdout : open_memstream(&buf, &len);
	if (!out) {
		fprintf(stderr, "model: out of memory\n");
		return 2;
	}
	if (fatal)
		fprintf(out, "    shortest trace (%s):\n", SC->what);
	uint32_t n = print_trace(out, sp, R->from[v], R->endstate[v] ? -1 : R->lastlabel[v]);
	if (R->endstate[v])
		fprintf(out, "         (%s)\n", v == V_DEADLOCK ? "threads left, none can move" :
		        "all threads done: the quiescence check fails");
	if (fatal)
		return 0;
	fclose(out);
	if (!run->acc_trace[v] || n < run->acc_len[v]) {
		free(run->acc_trace[v]);
		run->acc_trace[v] = buf;
		run->acc_len[v] = n;
		run->acc_sc[v] = SC;
	} else {
		free(buf);
	}
	return 0;
}

/* Explores scenario k and reports what it found. 0, or 2 when out of memory. */
static int run_scenario(Run *run, int k, int quiet)
{
	SC = &scenarios[k];
	run->ran++;
	static Space sp;
	Result R;
	explore(&sp, &R);
	run->total += R.states;
	run->secs += R.secs;
	printf("%-14s %9llu states %10llu steps %6.2fs  %s\n", SC->name, (unsigned long long)R.states,
	       (unsigned long long)R.edges, R.secs, R.found & ~V_ACCEPTED ? "FAIL" : "ok");
	for (int v = 0; v < V_NR; v++) {
		if (!(R.found >> v & 1))
			continue;
		if (report_found(run, &sp, &R, v, quiet))
			return 2;
	}
	if (R.found & ~V_ACCEPTED)
		t_fail++;
	else
		t_pass++;
	space_free(&sp);
	return 0;
}

static void print_summary(Run *run, const struct timespec *w0, const struct timespec *w1)
{
	for (int v = 0; v < V_NR; v++) {
		if (!(run->acc >> v & 1))
			continue;
		printf("accepted: %s: %s\n", vshort[v], vnames[v]);
		if (run->acc_trace[v]) {
			printf("    shortest trace (%u steps; scenario %s: %s):\n%s", run->acc_len[v], run->acc_sc[v]->name,
			       run->acc_sc[v]->what, run->acc_trace[v]);
			free(run->acc_trace[v]);
		}
	}
	printf("%llu states in %.2fs (%.2fs wall); %d violation kinds", (unsigned long long)run->total, run->secs,
	       (double)(w1->tv_sec - w0->tv_sec) + (double)(w1->tv_nsec - w0->tv_nsec) / 1e9, run->bad);
	for (int v = 0, first = 1; v < V_NR; v++)
		if (run->acc >> v & 1) {
			printf("%s%s", first ? "; accepted: " : ", ", vshort[v]);
			first = 0;
		}
	printf("\n");
}

/* -c: the steps no scenario took. */
static void print_coverage(void)
{
	printf("steps never taken:");
	int none = 1;
	for (int pc = P_POP_R; pc < P_DONE; pc++)
		if (!pc_hits[pc] && (pc != P_FRM_F || af) && (pc != P_DR_LATE || mut == M_LATEPENDING)) {
			printf("%s %s", none ? "" : ",", pc_names[pc]);
			none = 0;
		}
	printf("%s\n", none ? " none" : "");
}

int main(int argc, char **argv)
{
	Opts o = { 0 };
	int rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	print_header();
	static Run run;
	struct timespec w0, w1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	for (int k = 0; k < NSCEN; k++) {
		if (o.only && strcmp(o.only, scenarios[k].name))
			continue;
		if (run_scenario(&run, k, o.quiet))
			return 2;
	}
	if (!run.ran) {
		fprintf(stderr, "owned_model: no scenario %s (-l lists them)\n", o.only);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &w1);
	print_summary(&run, &w0, &w1);
	if (o.cover)
		print_coverage();
	printf("scenarios: ");
	return test_summary();
}
