/* driver.c - uslab-bench's driver: the variants (uslab's modes and engines,
 * its malloc, the peers), each child run with its environment and checked
 * (the path it ran, the count of numbers), medians over interleaved runs,
 * the tables' rows and ratios, --data's lines, and the summary. */
#include "seed.h"
#include "spawn.h"

/* uslab: the four combinations of sheaves / cpu-slab and rseq / locked on SLUB,
 * and SLAB (USLAB_ALLOCATOR=slab: its arrays are always on) in both modes, each
 * chosen by its child's environment, which the library reads when it starts;
 * for seed 003's table SLAB with its colour under the node lock, and for the
 * colour table SLAB without colour; the static link (single and bulk only);
 * uslab's malloc on both engines. Then the peers (gperftools: Debian's
 * libtcmalloc-minimal4). */
#define SO USLAB_SO_PATH
struct variant variants[] = {
	{ "uslab sheaves (rseq)", "sheaves/rseq", SO, 1, 0, 0, NULL, "1", 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "uslab cpu-slab (rseq)", "cpuslab/rseq", SO, 1, 0, 0, NULL, "0", 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "uslab sheaves (locked)", "sheaves/locked", SO, 1, 0, 0, "0", "1", 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "uslab cpu-slab (locked)", "cpuslab/locked", SO, 1, 0, 0, "0", "0", 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "uslab slab (rseq)", "slab/rseq", SO, 1, 0, 0, NULL, "1", 1, "slab", NULL, NULL, NULL, NULL, NULL },
	{ "uslab slab (locked)", "slab/locked", SO, 1, 0, 0, "0", "1", 1, "slab", NULL, NULL, NULL, NULL, NULL },
	{ "uslab slab, colour locked", "slab/lockcol", SO, 1, 0, 0, NULL, "1", 1, "slab", "2", "seed003", NULL, NULL, NULL },
	{ "uslab slab, no colour", "slab/nocol", SO, 1, 0, 0, NULL, "1", 1, "slab", "0", "colour", NULL, NULL, NULL },
	{ "uslab static (extra)", "static/rseq", NULL, 1, 0, 1, NULL, "1", 1, NULL, NULL, "single bulk", NULL, NULL, NULL },
	{ "uslab sheaves, simple", "sheaves/simple", SO, 1, 0, 0, NULL, "1", 1, NULL, NULL, "detached", "1", NULL, NULL },
	{ "uslab cpu-slab, simple", "cpuslab/simple", SO, 1, 0, 0, NULL, "0", 1, NULL, NULL, "detached", "1", NULL, NULL },
	{ "uslab owned (rseq)", "owned/rseq", SO, 1, 0, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL, "owned" },
	{ "uslab malloc", "uslab-malloc", SO, 0, 0, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "uslab malloc, owned", "owned-malloc", SO, 0, 0, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL, "owned" },
	{ "uslab malloc, slab", "slab-malloc", SO, 0, 0, 0, NULL, NULL, 1, "slab", NULL, NULL, NULL, NULL, NULL },
	{ "glibc", "glibc", NULL, 0, 1, 0, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL },
	{ "jemalloc", "jemalloc", JEMALLOC_SO, 0, 1, 0, NULL, NULL, 1, NULL, NULL,
	  NULL, NULL, NULL, NULL },
	/* Debian's libtcmalloc-minimal4: gperftools' tcmalloc (GPERFTOOLS_NOTE,
	 * peers.h), keyed "tcmalloc" in --data as before the name changed. */
	{ "gperftools", "gperftools", GPERFTOOLS_SO, 0, 1, 0, NULL, NULL, 1,
	  NULL, NULL, NULL, NULL, "tcmalloc", NULL },
	{ "mimalloc", "mimalloc", MIMALLOC_SO, 0, 1, 0, NULL, NULL, 1, NULL, NULL,
	  NULL, NULL, NULL, NULL },
};
_Static_assert(sizeof(variants) / sizeof(variants[0]) == NVAR, "NVAR (seed.h) counts the variants");

const char *self_path;
char static_path[4200];      /* uslab-bench-static beside this program */

/* Progress on stderr, so that stdout holds only the tables: one line per
 * measured step, "[2/6] nalloc: 7 runs of <allocators>; run 1 2 ... done in 9.1 s". */

/* Per variant, for the scenario being printed: runs tried and failed (over all
 * its measure() calls), why the last failure happened, and the sheaf capacity
 * the uslab children reported. */
int ntried[NVAR], nfail[NVAR];
static char fail_why[NVAR][128];
static unsigned int cap_seen[NVAR];

/* The child's side of run_child: the variant's environment, then this
 * program (or uslab-bench-static) with --child. */
struct child_exec {
	const struct variant *v;
	const char *scenario, *arg;
};

static void exec_child(void *p)
{
	const struct child_exec *c = p;
	const struct variant *v = c->v;
	/* The environment is in place before exec, hence before the
	 * library's start-up reads USLAB_RSEQ and USLAB_SHEAVES. */
	env_set("LD_PRELOAD", v->preload);
	env_set("USLAB_RSEQ", v->rseq);
	env_set("USLAB_SHEAVES", v->sheaves);
	env_set("USLAB_ALLOCATOR", v->engine ? v->engine : "slub");
	env_set("USLAB_SLAB_COLOUR", v->colour);
	env_set("USLAB_BULK_LOOKAHEAD", v->lookahead);
	env_set("USLAB_FRONT", v->front);
	const char *exe = v->exe ? static_path : self_path;
	execl(exe, exe, "--child", c->scenario, v->uslab ? "uslab" : "malloc", c->arg, (char *)NULL);
}

#define WHYLEN sizeof(fail_why[0])

/* Whether the child exited with status 0; else why not. */
static int exited_well(int status, char *why)
{
	if (WIFSIGNALED(status)) {
		snprintf(why, WHYLEN, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 0;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(why, WHYLEN, "exit status %d", WEXITSTATUS(status));
		return 0;
	}
	return 1;
}

/* A malloc child says whether uslab served it (child_main, main.c): uslab's
 * malloc rows must, the peers' must not. Skips that line at *p; whether it
 * is right. */
static int malloc_line_ok(const struct variant *v, char **p, char *why)
{
	int want_um = !v->uslab && v->preload && !strcmp(v->preload, USLAB_SO_PATH);
	const char *want_engine = v->engine ? v->engine : "slub";
	char um_mode[16], um_engine[16];
	int um_used = 0;
	if (!v->uslab && sscanf(*p, "uslab-malloc %15s %15s%n", um_mode, um_engine, &um_used) == 2 && um_used) {
		*p += um_used;
		if (!want_um) {
			snprintf(why, WHYLEN, "was served by uslab's malloc, not %s", v->name);
			return 0;
		}
		if (strcmp(um_engine, want_engine) != 0) {
			snprintf(why, WHYLEN, "ran on %s, not %s", um_engine, want_engine);
			return 0;
		}
	} else if (want_um) {
		snprintf(why, WHYLEN, "was not served by uslab's malloc (%s not preloaded?)", USLAB_SO_PATH);
		return 0;
	}
	return 1;
}

/* A uslab child's first line (report_path): the per-CPU mode, sheaf capacity
 * and engine it ran, which must be its variant's. Skips it at *p and keeps
 * the capacity; whether it is right (malloc children have none). */
static int uslab_line_ok(int vi, char **p, char *why)
{
	const struct variant *v = &variants[vi];
	if (!v->uslab)
		return 1;
	char mode[16], engine[16];
	unsigned int cap;
	int used = 0;
	const char *want_mode = v->rseq && !strcmp(v->rseq, "0") ? "locked" : "rseq";
	const char *want_engine = v->engine ? v->engine : "slub";
	int want_sheaves = v->sheaves && strcmp(v->sheaves, "0") != 0;
	if (sscanf(*p, "uslab %15s %u %15s%n", mode, &cap, engine, &used) != 3 || !used) {
		snprintf(why, WHYLEN, "did not report its per-CPU mode, sheaf capacity and engine");
		return 0;
	}
	if (strcmp(engine, want_engine) != 0) {
		snprintf(why, WHYLEN, "ran on %s, not %s", engine, want_engine);
		return 0;
	}
	*p += used;
	cap_seen[vi] = cap;
	if (strcmp(mode, want_mode) != 0) {
		snprintf(why, WHYLEN, "ran in %s mode, not %s", mode, want_mode);
		return 0;
	}
	if ((cap > 0) != want_sheaves) {
		snprintf(why, WHYLEN, "ran with sheaf capacity %u (USLAB_SHEAVES=%s)", cap, v->sheaves ? v->sheaves : "unset");
		return 0;
	}
	return 1;
}

/* Exactly want numbers at p, and nothing else, into vals: want, or -1 and why. */
static int parse_values(char *p, int want, double *vals, char *why)
{
	char *end;
	int n = 0;
	while (n < MAXVALS) {
		double d = strtod(p, &end);
		if (end == p)
			break;
		vals[n++] = d;
		p = end;
	}
	while (*p == ' ' || *p == '\n')
		p++;
	if (n != want || *p) {
		snprintf(why, WHYLEN, "printed %d values%s, expected %d", n, *p ? " and text" : "", want);
		return -1;
	}
	return n;
}

/* Run one child and parse exactly want numbers from its stdout into vals.
 * Returns want, or -1 after saying why on stderr: a crash, an exit status, the
 * wrong number of values, or a uslab child that ran a path other than its
 * variant's (per-CPU mode, sheaves or not). */
int run_child(int vi, const char *scenario, const char *arg, int want, double *vals)
{
	struct variant *v = &variants[vi];
	char *why = fail_why[vi];
	struct child_exec c = { v, scenario, arg };
	struct spawn_result r;
	char buf[4096], *p = buf;
	int n = -1;

	why[0] = 0;
	if (spawn_capture(exec_child, &c, buf, sizeof(buf), &r) < 0)
		snprintf(why, WHYLEN, "%s: %s", r.failed, strerror(errno));
	else if (exited_well(r.status, why) && malloc_line_ok(v, &p, why) && uslab_line_ok(vi, &p, why))
		n = parse_values(p, want, vals, why);
	if (n >= 0)
		return n;
	progress_break();
	fprintf(stderr, "uslab-bench: %s, %s %s: %s\n", v->name, scenario, arg, why);
	return -1;
}

/* medians[v][k]: median over runs of value k of variant v, for the runs that
 * gave numbers (nran[v] of them) in the last measure(); lows, highs: the least
 * and the greatest of those runs. */
double medians[NVAR][MAXVALS];
static double lows[NVAR][MAXVALS], highs[NVAR][MAXVALS];
static int nran[NVAR];

/* Which variants a scenario shows: those installed, and not kept to other
 * scenarios (installed[] is set once at start-up). */
int installed[NVAR];

void begin_scenario_of(const char *name)
{
	for (int v = 0; v < NVAR; v++) {
		const char *o = variants[v].only;
		size_t len = strlen(name);
		int in = !o;
		for (const char *q = o; q && *q && !in; q += strcspn(q, " "), q += *q == ' ')
			in = !strncmp(q, name, len) && (q[len] == ' ' || !q[len]);
		variants[v].present = installed[v] && in;
	}
	memset(ntried, 0, sizeof(ntried));
	memset(nfail, 0, sizeof(nfail));
	memset(cap_seen, 0, sizeof(cap_seen));
}

void begin_scenario(void)
{
	begin_scenario_of("");
}

/* want_uslab / want_malloc: how many values a uslab / malloc child prints;
 * what: the step's name in the progress line. */
void measure(const char *what, const char *scenario, const char *arg, int runs, int want_uslab,
                    int want_malloc)
{
	static double all[NVAR][MAXRUNS][MAXVALS];
	memset(nran, 0, sizeof(nran));
	const char *names[NVAR];
	for (int v = 0; v < NVAR; v++)
		names[v] = variants[v].present ? variants[v].tag : NULL;
	progress_begin(what, runs, names, NVAR);
	for (int r = 0; r < runs; r++) {
		progress_run(r);
		for (int v = 0; v < NVAR; v++) {
			if (!variants[v].present)
				continue;
			int want = variants[v].uslab ? want_uslab : want_malloc;
			ntried[v]++;
			if (run_child(v, scenario, arg, want, all[v][nran[v]]) == want)
				nran[v]++;
			else
				nfail[v]++;
		}
	}
	progress_end();
	for (int v = 0; v < NVAR; v++) {
		int want = variants[v].uslab ? want_uslab : want_malloc;
		for (int k = 0; k < want && nran[v]; k++) {
			double col[MAXRUNS];
			for (int r = 0; r < nran[v]; r++)
				col[r] = all[v][r][k];
			qsort(col, (size_t)nran[v], sizeof(double), cmp_double);
			medians[v][k] = col[nran[v] / 2];
			lows[v][k] = col[0];
			highs[v][k] = col[nran[v] - 1];
		}
	}
}

void measure_n(const char *scenario, long n, int runs, int want_uslab, int want_malloc)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", n);
	measure(scenario, scenario, arg, runs, want_uslab, want_malloc);
}

/* Numbers of the last measure() for variant v. */
int ran(int v)
{
	return variants[v].present && nran[v] > 0;
}

/* --data FILE: one line per number a table shows, "uslab-bench, table,
 * allocator, metric, x (a size, a count N; empty for none), median, least,
 * greatest, runs", tab-separated, from the last measure(). The allocator is
 * the row's key (its name, but "tcmalloc" for gperftools, so that the report
 * reads old and new files alike and names it itself). */
FILE *data_file;

void data_row(const char *table, int v, const char *metric, const char *x, int k)
{
	if (!data_file || !ran(v))
		return;
	fprintf(data_file, "uslab-bench\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%d\n", table,
	        variants[v].key ? variants[v].key : variants[v].name, metric, x, medians[v][k], lows[v][k], highs[v][k],
	        nran[v]);
}

/* The same for value k of every variant that ran, with x a number (or none: -1). */
void data_rows(const char *table, const char *metric, long x, int k)
{
	char xs[32] = "";
	if (x >= 0)
		snprintf(xs, sizeof(xs), "%ld", x);
	for (int v = 0; v < NVAR; v++)
		data_row(table, v, metric, xs, k);
}

/* Under each table: the sheaf capacity each uslab variant's children reported
 * (checked against the variant in run_child), the failed child runs (their
 * reasons also went to stderr as they happened), and what gperftools is if
 * the table has its row. */
void print_footer(void)
{
	printf("uslab sheaf capacity reported by the children (their first cache):");
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && ntried[v] > nfail[v])
			printf(" %s %u;", variants[v].tag, cap_seen[v]);
	printf("\n");
	for (int v = 0; v < NVAR; v++)
		if (nfail[v])
			printf("FAILED: %s: %d of %d child runs (last: %s)%s\n", variants[v].name, nfail[v], ntried[v],
			       fail_why[v], nfail[v] == ntried[v] ? "" : "; medians of the others");
	for (int v = 0; v < NVAR; v++)
		if (ntried[v] && !strcmp(variants[v].name, "gperftools"))
			printf("%s\n", GPERFTOOLS_NOTE);
}


/* One row per allocator: its median value k and its ratios to each peer. */
void print_rows(int k, const char *fmt)
{
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		printf("%-*s ", NAMEW, variants[v].name);
		if (!ran(v)) {
			printf("FAILED\n");
			continue;
		}
		printf(fmt, medians[v][k], medians[v][k + 1]);
		ratios(medians[v][k], k);
		printf("\n");
	}
}

/* The name column of variant v's row in a table of RATIOW-wide names, and
 * FAILED if it gave no numbers; whether it did. */
int row_head(int v)
{
	printf("%-*s", RATIOW, variants[v].name);
	if (!ran(v))
		printf(" FAILED");
	return ran(v);
}

int find_variant(const char *name)
{
	for (int v = 0; v < NVAR; v++)
		if (!strcmp(variants[v].name, name) && ran(v))
			return v;
	return -1;
}

/* The peer with the smallest median value k among those that ran; -1 if none did. */
static int best_peer_v(int k)
{
	int best = -1;
	for (int v = 0; v < NVAR; v++)
		if (variants[v].peer && ran(v) && medians[v][k] > 0 && (best < 0 || medians[v][k] < medians[best][k]))
			best = v;
	return best;
}

/* The smallest median value k among the peers that ran; 0 if none did. */
double best_peer(int k)
{
	int b = best_peer_v(k);
	return b < 0 ? 0 : medians[b][k];
}


/* The legend under a table header whose columns cols are ratios of unit. */
void ratio_legend(const char *cols, const char *unit)
{
	printf("%s: this row's %s / the column's (below 1.00: this row is faster; above 1.00: slower)\n", cols,
	       unit);
}

/* ---------------------------------------------------------------- summary */
/* The summary after the last table: one line per workload, made while its
 * table is printed, from the same medians. It reports the first uslab variant
 * that ran (sheaves, rseq: what a program gets by default) against the best
 * peer of each row of the workload (a size, a bulk count N). */
#define MAXSUM 24
#define SUMLEN 512
static char sum_lines[MAXSUM][SUMLEN];
static int nsum;

/* The first uslab variant that ran in the last measure(), -1 if none did. */
int sum_variant(void)
{
	for (int v = 0; v < NVAR; v++)
		if (variants[v].uslab && ran(v))
			return v;
	return -1;
}

/* Row at of a summary line from the last measure(): variant uv's value ku over
 * the smallest value kp among the peers. 0 if either is missing. */
int sum_row_from(struct sum_row *row, const char *at, int uv, int ku, int kp)
{
	int p = best_peer_v(kp);
	if (uv < 0 || p < 0 || medians[uv][ku] <= 0)
		return 0;
	snprintf(row->at, sizeof(row->at), "%s", at);
	row->ratio = medians[uv][ku] / medians[p][kp];
	row->peer = variants[p].name;
	return 1;
}

/* -1: uslab leads (below 1.00 as printed), 1: trails, 0: even. */
static int sum_side(double r)
{
	return r < 0.995 ? -1 : r >= 1.005 ? 1 : 0;
}

static void append(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(char *buf, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, SUMLEN - used, fmt, ap);
	va_end(ap);
}

/* The rows of one side, as "leads at N=8,16 (uslab/best 0.56..0.92; best peer
 * mimalloc)"; nothing if none, or "<word> nowhere" if must. */
static void sum_group(char *line, const char *word, int side, int must, const char *pre, const char *post,
                      const struct sum_row *rows, int n)
{
	const char *peers[NVAR];
	double lo = 0, hi = 0;
	int np = 0, cnt = 0;
	for (int i = 0; i < n; i++) {
		if (sum_side(rows[i].ratio) != side)
			continue;
		if (cnt)
			append(line, ",%s", rows[i].at);
		else
			append(line, "%s at %s%s", word, pre, rows[i].at);
		lo = cnt && lo < rows[i].ratio ? lo : rows[i].ratio;
		hi = cnt && hi > rows[i].ratio ? hi : rows[i].ratio;
		int seen = 0;
		for (int j = 0; j < np; j++)
			seen |= peers[j] == rows[i].peer;
		if (!seen)
			peers[np++] = rows[i].peer;
		cnt++;
	}
	if (!cnt) {
		if (must)
			append(line, "%s nowhere; ", word);
		return;
	}
	append(line, "%s (uslab/best %.2f", post, lo);
	if (hi > lo)
		append(line, "..%.2f", hi);
	append(line, "; best peer%s", np > 1 ? "s" : "");
	for (int j = 0; j < np; j++)
		append(line, "%s%s", j ? ", " : " ", peers[j]);
	append(line, "); ");
}

/* Adds the summary line of workload what (its unit in brackets) from n rows
 * of variant uv; pre and post frame the rows' names ("N=", " B"). */
void summary_add(const char *what, int uv, const char *pre, const char *post, const struct sum_row *rows,
                        int n)
{
	char *line, words[32];
	if (nsum == MAXSUM)
		return;
	line = sum_lines[nsum++];
	snprintf(line, SUMLEN, "%-30s ", what);
	if (!n) {
		append(line, "no comparison: uslab or every peer FAILED");
		return;
	}
	if (n == 1 && !rows[0].at[0]) {
		int side = sum_side(rows[0].ratio);
		append(line, "uslab/best %.2f, best peer %s: ", rows[0].ratio, rows[0].peer);
		if (side)
			append(line, "uslab %s (%s)", side < 0 ? "leads" : "trails",
			       in_words(words, sizeof(words), rows[0].ratio, "slower", "faster"));
		else
			append(line, "even");
	} else {
		sum_group(line, "leads", -1, 1, pre, post, rows, n);
		sum_group(line, "even", 0, 0, pre, post, rows, n);
		sum_group(line, "trails", 1, 1, pre, post, rows, n);
		line[strlen(line) - 2] = 0;   /* the last "; " */
	}
	if (uv > 0)
		append(line, " [uslab = %s]", variants[uv].name);
}

/* A workload of one row: value ku of the summarised variant, kp of the peers. */
void summary_one(const char *what, int ku, int kp)
{
	struct sum_row row;
	int uv = sum_variant();
	summary_add(what, uv, "", "", &row, sum_row_from(&row, "", uv, ku, kp));
}

/* The same for the variant named name (uslab's malloc rows), if it ran. */
void summary_one_of(const char *what, const char *name, int ku, int kp)
{
	struct sum_row row;
	int uv = find_variant(name);
	if (uv >= 0)
		summary_add(what, uv, "", "", &row, sum_row_from(&row, "", uv, ku, kp));
}

void print_summary(void)
{
	if (!nsum)
		return;
	printf("\n== summary: %s (the default) against the best peer of each row; uslab/best = uslab's median / "
	       "the best peer's median, lower is better: below 1.00 uslab leads (is faster), above 1.00 it trails ==\n",
	       variants[0].name);
	int gp = 0;
	for (int i = 0; i < nsum; i++) {
		printf("%s\n", sum_lines[i]);
		gp |= strstr(sum_lines[i], "gperftools") != NULL;
	}
	if (gp)
		printf("%s\n", GPERFTOOLS_NOTE);
}

void ratio_header(void)
{
	printf("  %-11s  %-11s  %-11s  %-11s", "/glibc", "/jemalloc", "/gperftools", "/mimalloc");
}

void ratios(double x, int k)
{
	const char *peers[] = { "glibc", "jemalloc", "gperftools", "mimalloc" };
	for (int i = 0; i < 4; i++) {
		int p = find_variant(peers[i]);
		if (p < 0 || medians[p][k] <= 0)
			printf("  %-11s", "-");
		else
			printf("  %-11.2f", x / medians[p][k]);
	}
}

const char *plural(int n)
{
	return n == 1 ? "" : "s";
}
