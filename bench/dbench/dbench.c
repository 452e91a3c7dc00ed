/* dbench.c - uslab-dbench: what uslab's debug caches cost and what they find,
 * the debugging tables of the main benchmark.
 *
 * cost: the single pair (uslab-bench's child: a 256-byte malloc+free through
 * pointers, median batch), the larson-like workload (uslab-mbench's child,
 * 4 threads, ns per free+malloc of its threaded part) and a python3 job with
 * every object from malloc (PYTHONMALLOC=malloc; ms per job, the process's
 * whole run), under uslab with USLAB_DEBUG unset and set to each of F, Z, P,
 * U and FZPU (and FZPU with shorter stacks: USLAB_STACK_DEPTH 4 and 0), with
 * the event counters on (USLAB_STATS), and under glibc
 * plain, with MALLOC_CHECK_=3, and with MALLOC_CHECK_=3 and libc_malloc_debug
 * preloaded (on glibc 2.34 and later MALLOC_CHECK_ does nothing without it).
 * Every allocator is loaded the way its users load it: uslab and the peers
 * through LD_PRELOAD. A debug allocator is 10 to 100 times slower, so each
 * variant's count is calibrated by a first, unreported run to take about the
 * same time; the unit (ns per operation) does not depend on it.
 *
 * detect: each misuse of uslab-debug-prog (tests/preload/debug_prog.c), run
 * under uslab with USLAB_DEBUG=FZPU (without and with a quarantine), glibc
 * with MALLOC_CHECK_=3 (alone and with libc_malloc_debug), and jemalloc,
 * gperftools (Debian's libtcmalloc-minimal4, peers.h's GPERFTOOLS_NOTE),
 * mimalloc and scudo as they ship: detected (the allocator said so
 * on stderr) or not, and whether the program ran on to its end.
 *
 * Every child gets the driver's environment without USLAB_*, MALLOC_*,
 * GLIBC_TUNABLES, LD_PRELOAD and MBENCH_*, plus its variant's own.
 * Usage: uslab-dbench [cost|detect|all] [--runs N] [--quick]
 * Not a test: timings never decide pass or fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <gnu/libc-version.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "peers.h"
#include "progress.h"
#include "spawn.h"
#include "stats.h"

#define LIBC_DEBUG_SO PEER_LIBDIR "/libc_malloc_debug.so.0"
#define MAXRUNS 21
#define TIMEOUT_S 300.0

extern char **environ;

struct variant {
	const char *name;
	const char *preload;    /* NULL: glibc */
	const char *env[2];     /* NAME=value, NULL-terminated */
	int present;
};

static int quick;
static char dir[4096];      /* where this program and its siblings are */

static int scrubbed(const char *kv)
{
	return !strncmp(kv, "USLAB_", 6) || !strncmp(kv, "MALLOC_", 7) || !strncmp(kv, "MBENCH_", 7) ||
	       !strncmp(kv, "LD_PRELOAD=", 11) || !strncmp(kv, "GLIBC_TUNABLES=", 15);
}

/* What one child did: exit status (or -signal, or -1000 on timeout), the start
 * of its stdout and stderr, and how much it wrote to stderr. */
struct result {
	int status;
	char out[1024], err[1024];
	size_t nerr;
};

/* Appends what fd has to buf (keeping the first n-1 bytes); 0 at EOF. */
static int drain(int fd, char *buf, size_t n, size_t *have, size_t *total)
{
	char tmp[4096];
	ssize_t k = read(fd, tmp, sizeof(tmp));
	if (k <= 0)
		return k < 0 && errno == EINTR;
	if (*have + 1 < n) {
		size_t c = (size_t)k < n - 1 - *have ? (size_t)k : n - 1 - *have;
		memcpy(buf + *have, tmp, c);
		*have += c;
		buf[*have] = 0;
	}
	if (total)
		*total += (size_t)k;
	return 1;
}

/* Runs argv under variant v with one more NAME=value (or NULL). */
static int run(const struct variant *v, char *const argv[], const char *extra, struct result *r)
{
	int po[2], pe[2];
	memset(r, 0, sizeof(*r));
	if (pipe(po) != 0 || pipe(pe) != 0)
		return -1;
	size_t n = 0;
	while (environ[n])
		n++;
	char **envp = calloc(n + 8, sizeof(char *));
	char preload[4200];
	if (!envp)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!scrubbed(environ[i]))
			envp[k++] = environ[i];
	if (v->preload) {
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", v->preload);
		envp[k++] = preload;
	}
	for (int i = 0; i < 2 && v->env[i]; i++)
		envp[k++] = (char *)v->env[i];
	if (extra)
		envp[k++] = (char *)extra;
	envp[k] = NULL;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(po[1]);
		close(pe[0]);
		close(pe[1]);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	free(envp);
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return -1;
	}
	size_t nout = 0, nerr = 0;
	int open_o = 1, open_e = 1, timed_out = 0;
	double deadline = now_s() + TIMEOUT_S;
	while (open_o || open_e) {
		struct pollfd p[2] = { { open_o ? po[0] : -1, POLLIN, 0 }, { open_e ? pe[0] : -1, POLLIN, 0 } };
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0 || poll(p, 2, left) == 0) {
			kill(pid, SIGKILL);
			timed_out = 1;
			break;
		}
		if (open_o && p[0].revents)
			open_o = drain(po[0], r->out, sizeof(r->out), &nout, NULL);
		if (open_e && p[1].revents)
			open_e = drain(pe[0], r->err, sizeof(r->err), &nerr, &r->nerr);
	}
	close(po[0]);
	close(pe[0]);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	r->status = timed_out ? -1000 : WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
	return 0;
}


static void mark_present(struct variant *v, int n)
{
	for (int i = 0; i < n; i++) {
		v[i].present = !v[i].preload || access(v[i].preload, R_OK) == 0;
		if (!v[i].present)
			fprintf(stderr, "uslab-dbench: %s not found (%s); its rows are skipped\n", v[i].name, v[i].preload);
	}
}

/* ---------------------------------------------------------------- cost */

static struct variant cost_v[] = {
	{ "uslab, USLAB_DEBUG unset", USLAB_SO_PATH, { NULL }, 0 },
	{ "uslab, USLAB_STATS=/dev/null (counters)", USLAB_SO_PATH, { "USLAB_STATS=/dev/null", NULL }, 0 },
	{ "uslab, USLAB_DEBUG=F", USLAB_SO_PATH, { "USLAB_DEBUG=F", NULL }, 0 },
	{ "uslab, USLAB_DEBUG=Z", USLAB_SO_PATH, { "USLAB_DEBUG=Z", NULL }, 0 },
	{ "uslab, USLAB_DEBUG=P", USLAB_SO_PATH, { "USLAB_DEBUG=P", NULL }, 0 },
	{ "uslab, USLAB_DEBUG=U", USLAB_SO_PATH, { "USLAB_DEBUG=U", NULL }, 0 },
	{ "uslab, USLAB_DEBUG=FZPU", USLAB_SO_PATH, { "USLAB_DEBUG=FZPU", NULL }, 0 },
	{ "uslab, FZPU, USLAB_STACK_DEPTH=4", USLAB_SO_PATH, { "USLAB_DEBUG=FZPU", "USLAB_STACK_DEPTH=4" }, 0 },
	{ "uslab, FZPU, USLAB_STACK_DEPTH=0", USLAB_SO_PATH, { "USLAB_DEBUG=FZPU", "USLAB_STACK_DEPTH=0" }, 0 },
	{ "glibc", NULL, { NULL }, 0 },
	{ "glibc, MALLOC_CHECK_=3", NULL, { "MALLOC_CHECK_=3", NULL }, 0 },
	{ "glibc, MALLOC_CHECK_=3 + libc_malloc_debug", LIBC_DEBUG_SO, { "MALLOC_CHECK_=3", NULL }, 0 },
};
#define NCOST (int)(sizeof(cost_v) / sizeof(cost_v[0]))
#define V_PLAIN 0
#define V_GLIBC 9
#define V_GLIBC_MC3 10
#define V_GLIBC_DEBUG 11

/* A cost workload: the child's command for a count, the count's bounds, and
 * how long a measured run should take. */
struct cost_work {
	const char *name, *unit;
	long n_min, n_max;
	double target_s;
};
static const struct cost_work works[] = {
	{ "single", "ns per 256-byte malloc+free pair (median batch)", 42000, 20000000, 0.3 },
	{ "larson", "ns per free+malloc, 4 threads on this machine's CPUs (wall time / operations)", 4000, 2500000, 0.4 },
	{ "python3", "ms per job: python3 with PYTHONMALLOC=malloc (every object from malloc), dicts, sorting, sets, json",
	  1, 1, 0 },
};
#define NWORKS (int)(sizeof(works) / sizeof(works[0]))
#define W_PYTHON 2
#define PYTHON "/usr/bin/python3"

/* The python3 job of uslab-mbench's programs table, at its size there. */
static void python_script(char *buf, size_t n)
{
	int keys = quick ? 150000 : 600000;
	snprintf(buf, n, "d = {i: str(i) * (i %% 9) for i in range(%d)}\n"
	                 "l = sorted(d.values(), key=len)\n"
	                 "s = set(x[:3] for x in l)\n"
	                 "import json; j = json.loads(json.dumps([{'k': k, 'v': v} for k, v in "
	                 "list(d.items())[:%d]]))\n"
	                 "print(len(l), len(s), len(j))", keys, keys / 6);
}

/* One run of workload w with count n under v: ns per operation, or -1. */
static double cost_run(int w, const struct variant *v, long n)
{
	char path[4200], num[32], env[64];
	struct result r;
	if (w == W_PYTHON) {
		char script[1024];
		python_script(script, sizeof(script));
		char *argv[] = { (char *)PYTHON, (char *)"-c", script, NULL };
		double t0 = now_s();
		int rc = run(v, argv, "PYTHONMALLOC=malloc", &r);
		double ms = (now_s() - t0) * 1e3;
		if (rc != 0 || r.status != 0 || !strchr(r.out, ' ')) {
			progress_break();
			fprintf(stderr, "uslab-dbench: python3 under %s failed (status %d)%s%.200s\n", v->name, r.status,
			        r.nerr ? ": " : "", r.err);
			return -1;
		}
		return ms;
	}
	if (w == 0) {
		snprintf(path, sizeof(path), "%s/uslab-bench", dir);
		snprintf(num, sizeof(num), "%ld", n);
		char *argv[] = { path, (char *)"--child", (char *)"single", (char *)"malloc", num, NULL };
		if (run(v, argv, NULL, &r) != 0)
			return -1;
	} else {
		snprintf(path, sizeof(path), "%s/uslab-mbench", dir);
		snprintf(env, sizeof(env), "MBENCH_LARSON_OPS=%ld", n);
		char *argv[] = { path, (char *)"--child", (char *)"larson", NULL };
		if (run(v, argv, env, &r) != 0)
			return -1;
	}
	double x;
	const char *out = r.out;             /* uslab-bench's malloc child names uslab first */
	if (!strncmp(out, "uslab-malloc ", 13) && strchr(out, '\n'))
		out = strchr(out, '\n') + 1;
	if (r.status != 0 || sscanf(out, "%lf", &x) != 1 || !(x > 0)) {
		progress_break();
		fprintf(stderr, "uslab-dbench: %s under %s failed (status %d)%s%.200s\n", works[w].name, v->name, r.status,
		        r.nerr ? ": " : "", r.err);
		return -1;
	}
	return x;
}

static void print_cost(int w, int runs, double m[NCOST], const int ok[NCOST], const long cnt[NCOST])
{
	int check = cost_v[V_GLIBC_DEBUG].present && ok[V_GLIBC_DEBUG] ? V_GLIBC_DEBUG : V_GLIBC_MC3;
	char b1[32];
	printf("\n== debug cost, %s: %s, lower is better; median of %d run%s ==\n", works[w].name, works[w].unit, runs,
	       runs == 1 ? "" : "s");
	printf("/plain: the row's median / uslab with USLAB_DEBUG unset; /glibc: / glibc; /glibc check: / %s "
	       "(above 1.00: slower)\n", cost_v[check].name);
	printf("%-44s %11s %8s %8s %12s  %-18s %10s\n", "allocator", w == W_PYTHON ? "ms/job" : "ns/op", "/plain",
	       "/glibc", "/glibc check", "against plain", "count/run");
	for (int v = 0; v < NCOST; v++) {
		if (!cost_v[v].present)
			continue;
		if (!ok[v]) {
			printf("%-44s FAILED\n", cost_v[v].name);
			continue;
		}
		double rp = ok[V_PLAIN] ? m[v] / m[V_PLAIN] : 0, rc = ok[check] ? m[v] / m[check] : 0;
		double rg = ok[V_GLIBC] ? m[v] / m[V_GLIBC] : 0;
		printf("%-44s %11.2f %8.2f %8.2f %12.2f  %-18s %10ld\n", cost_v[v].name, m[v], rp, rg, rc,
		       rp > 0 ? in_words(b1, sizeof(b1), rp, "slower", "faster") : "-", cnt[v]);
	}
	fflush(stdout);
}

static void cost(int runs)
{
	mark_present(cost_v, NCOST);
	const char *names[NCOST];
	for (int v = 0; v < NCOST; v++)
		names[v] = cost_v[v].present ? cost_v[v].name : NULL;
	for (int w = 0; w < NWORKS; w++) {
		double t[NCOST][MAXRUNS], m[NCOST];
		int ok[NCOST] = { 0 };
		long cnt[NCOST] = { 0 };
		if (w == W_PYTHON && access(PYTHON, X_OK) != 0) {
			fprintf(stderr, "uslab-dbench: no %s; the python3 table is skipped\n", PYTHON);
			continue;
		}
		progress_begin(works[w].name, runs, names, NCOST);
		/* The count for each variant: a first run with the smallest count
		 * gives its time per operation (reported nowhere). The python3
		 * job has no count. */
		for (int v = 0; v < NCOST; v++) {
			if (!cost_v[v].present)
				continue;
			if (w == W_PYTHON) {
				cnt[v] = 1;
				continue;
			}
			double x = cost_run(w, &cost_v[v], works[w].n_min);
			double per_op_threads = w == 1 ? 4 : 1;
			long n = x > 0 ? (long)(works[w].target_s * (quick ? 0.3 : 1) * 1e9 / (x * per_op_threads)) : 0;
			if (n < works[w].n_min)
				n = works[w].n_min;
			if (n > works[w].n_max)
				n = works[w].n_max;
			cnt[v] = x > 0 ? n : 0;
		}
		for (int k = 0; k < runs; k++) {
			progress_run(k);
			/* Interleaved, the order rotating each run. */
			for (int j = 0; j < NCOST; j++) {
				int v = (j + k) % NCOST;
				if (!cnt[v])
					continue;
				double x = cost_run(w, &cost_v[v], cnt[v]);
				if (x > 0)
					t[v][ok[v]++] = x;
			}
		}
		progress_end();
		for (int v = 0; v < NCOST; v++)
			m[v] = ok[v] ? bench_median(t[v], ok[v]) : 0;
		print_cost(w, runs, m, ok, cnt);
	}
}

/* ---------------------------------------------------------------- detect */

static struct variant det_v[] = {
	{ "uslab FZPU", USLAB_SO_PATH, { "USLAB_DEBUG=FZPU", NULL }, 0 },
	{ "uslab FZPU+Q", USLAB_SO_PATH, { "USLAB_DEBUG=FZPU", "USLAB_QUARANTINE=1m" }, 0 },
	{ "glibc MC3", NULL, { "MALLOC_CHECK_=3", NULL }, 0 },
	{ "glibc MC3+dbg", LIBC_DEBUG_SO, { "MALLOC_CHECK_=3", NULL }, 0 },
	{ "jemalloc", JEMALLOC_SO, { NULL }, 0 },
	{ "gperftools", GPERFTOOLS_SO, { NULL }, 0 },
	{ "mimalloc", MIMALLOC_SO, { NULL }, 0 },
	{ "scudo", NULL, { NULL }, 0 },    /* found by find_scudo */
};
#define NDET (int)(sizeof(det_v) / sizeof(det_v[0]))

static const struct {
	const char *name, *what;
} scen[] = {
	{ "clean", "no misuse (a report here is a false alarm)" },
	{ "overflow", "one byte written past a 32-byte block" },
	{ "kmalloc-redzone", "a byte past the 24 asked for, inside the size class" },
	{ "underflow", "one byte written before a block" },
	{ "use-after-free", "a write into a freed block, then allocations that reuse it" },
	{ "double-free", "free(a), free(b), free(a)" },
	{ "interior", "free of a pointer inside a block, then of a stack address" },
	{ "free-sized", "free_sized(p, 30) of a 24-byte block" },
	{ "delete-size", "sized operator delete(p, 64) of a 56-byte block" },
	{ "stale-write", "a write through a stale pointer after the next malloc of that size" },
};
#define NSCEN (int)(sizeof(scen) / sizeof(scen[0]))

static char scudo_path[4096];

static void find_scudo(void)
{
	glob_t g;
	if (glob("/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so", 0, NULL, &g) == 0 &&
	    g.gl_pathc > 0) {
		snprintf(scudo_path, sizeof(scudo_path), "%s", g.gl_pathv[g.gl_pathc - 1]);
		det_v[NDET - 1].preload = scudo_path;
	} else {
		det_v[NDET - 1].preload = "libclang_rt.scudo_standalone-x86_64.so (libclang-rt-*-dev)";
	}
	globfree(&g);
}

/* One run's outcome, as a cell: "yes"/"no" (the allocator printed anything
 * on stderr), then how the program ended. */
static void outcome(const struct result *r, char *cell, size_t n)
{
	const char *said = r->nerr ? "yes" : "no";
	size_t len = strlen(r->out);
	while (len && r->out[len - 1] == '\n')
		len--;
	const char *last = r->out + len;
	while (last > r->out && last[-1] != '\n')
		last--;
	int ran_on = r->status == 0 && (size_t)(r->out + len - last) == 8 && !strncmp(last, "survived", 8);
	if (r->status == 3)
		snprintf(cell, n, "n/a");
	else if (r->status == -1000)
		snprintf(cell, n, "%s, hung", said);
	else if (ran_on)
		snprintf(cell, n, "%s, ran on", said);
	else if (r->status < 0)
		snprintf(cell, n, "%s, SIG%s", said, sigabbrev_np(-r->status) ? sigabbrev_np(-r->status) : "?");
	else
		snprintf(cell, n, "%s, exit %d", said, r->status);
}

/* A row of the detection table's counts: "n of ran" per allocator. */
static void count_row(const char *label, const int n[NDET], const int ran[NDET])
{
	printf("%-16s", label);
	for (int c = 0; c < NDET; c++)
		if (det_v[c].present) {
			char b[24];
			snprintf(b, sizeof(b), "%d of %d", n[c], ran[c]);
			printf(" %-17s", b);
		}
}

static void detect(int reps)
{
	find_scudo();
	mark_present(det_v, NDET);
	char prog[4200];
	snprintf(prog, sizeof(prog), "%s/uslab-debug-prog", dir);
	static char cells[NSCEN][NDET][24], first[NSCEN][NDET][112];
	const char *names[NDET];
	int found[NDET] = { 0 }, ranon[NDET] = { 0 }, ran[NDET] = { 0 };
	for (int c = 0; c < NDET; c++)
		names[c] = det_v[c].present ? det_v[c].name : NULL;
	progress_begin("detect", reps, names, NDET);
	char out[MAXRUNS][NSCEN][NDET][24];
	for (int k = 0; k < reps; k++) {
		progress_run(k);
		for (int s = 0; s < NSCEN; s++)
			for (int c = 0; c < NDET; c++) {
				if (!det_v[c].present)
					continue;
				char *argv[] = { prog, (char *)scen[s].name, NULL };
				struct result r;
				if (run(&det_v[c], argv, NULL, &r) != 0) {
					snprintf(out[k][s][c], sizeof(out[k][s][c]), "error");
					continue;
				}
				outcome(&r, out[k][s][c], sizeof(out[k][s][c]));
				if (k == 0 && r.nerr) {
					/* The first line that says something: a banner
					 * of '=' (uslab's BUG reports) is skipped. */
					const char *l = r.err;
					while (*l == '=' || *l == '\n')
						l++;
					int len = (int)strcspn(l, "\n");
					snprintf(first[s][c], sizeof(first[s][c]), "%.*s", len > 100 ? 100 : len, l);
				}
			}
	}
	progress_end();
	/* A cell: the outcome all runs agree on, or the commonest with its count. */
	for (int s = 0; s < NSCEN; s++)
		for (int c = 0; c < NDET; c++) {
			if (!det_v[c].present)
				continue;
			int best = 0, bestn = 0;
			for (int k = 0; k < reps; k++) {
				int m = 0;
				for (int j = 0; j < reps; j++)
					m += !strcmp(out[k][s][c], out[j][s][c]);
				if (m > bestn)
					best = k, bestn = m;
			}
			if (bestn == reps)
				snprintf(cells[s][c], sizeof(cells[s][c]), "%s", out[best][s][c]);
			else
				snprintf(cells[s][c], sizeof(cells[s][c]), "%s %d/%d", out[best][s][c], bestn, reps);
			if (s > 0 && strcmp(out[best][s][c], "n/a")) {
				ran[c]++;
				found[c] += !strncmp(out[best][s][c], "yes", 3);
				ranon[c] += strstr(out[best][s][c], "ran on") != NULL;
			}
		}
	printf("\n== heap misuse in an unmodified program (uslab-debug-prog), each allocator as it ships; %d run%s "
	       "per cell ==\n", reps, reps == 1 ? "" : "s");
	printf("A cell: detected (yes: the allocator reported it on stderr), then how the program ended (ran on: to its "
	       "end, heap still working; SIGABRT: stopped by the allocator; SIGSEGV: crashed); n/a: this libc and "
	       "allocator have no such function. \"k/n\": the commonest of differing runs.\n");
	printf("uslab FZPU+Q: with USLAB_QUARANTINE=1m. glibc MC3: MALLOC_CHECK_=3 (glibc %s); MC3+dbg: with "
	       "libc_malloc_debug.so preloaded, which glibc 2.34 and later need for it.\n", gnu_get_libc_version());
	for (int c = 0; c < NDET; c++)
		if (det_v[c].present && !strcmp(det_v[c].name, "gperftools"))
			printf("%s\n", GPERFTOOLS_NOTE);
	printf("%-16s", "misuse");
	for (int c = 0; c < NDET; c++)
		if (det_v[c].present)
			printf(" %-17s", det_v[c].name);
	printf("\n");
	for (int s = 0; s < NSCEN; s++) {
		printf("%-16s", scen[s].name);
		for (int c = 0; c < NDET; c++)
			if (det_v[c].present)
				printf(" %-17s", cells[s][c]);
		printf("\n");
	}
	count_row("detected", found, ran);
	printf("\n");
	count_row("ran on", ranon, ran);
	printf("\n\nThe misuses:\n");
	for (int s = 0; s < NSCEN; s++)
		printf("  %-16s %s\n", scen[s].name, scen[s].what);
	printf("What each allocator printed first (first run, cut at 100 characters):\n");
	for (int s = 0; s < NSCEN; s++)
		for (int c = 0; c < NDET; c++)
			if (det_v[c].present && first[s][c][0])
				printf("  %-16s %-14s %s\n", scen[s].name, det_v[c].name, first[s][c]);
	fflush(stdout);
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f, "usage: uslab-dbench [cost|detect|all] [--runs N] [--quick]\n"
	           "  --runs N  runs per variant (cost, default 5) and per cell (detect, at most 3), 1..%d\n"
	           "  --quick   shorter runs\n", MAXRUNS);
}

int main(int argc, char **argv)
{
	const char *what = "all";
	int runs = 5;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--quick")) {
			quick = 1;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] != '-' && (!strcmp(argv[i], "cost") || !strcmp(argv[i], "detect") ||
		                                 !strcmp(argv[i], "all"))) {
			what = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (runs < 1 || runs > MAXRUNS) {
		usage(stderr);
		return 2;
	}
	if (self_exe(dir, sizeof(dir)) < 0)
		return 1;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	if (access(USLAB_SO_PATH, R_OK) != 0) {
		fprintf(stderr, "uslab-dbench: %s not found\n", USLAB_SO_PATH);
		return 1;
	}
	int all = !strcmp(what, "all");
	printf("uslab-dbench: the cost of uslab's debug caches and the heap misuse they find; uslab = LD_PRELOAD=%s\n",
	       USLAB_SO_PATH);
	progress_total(all ? 3 : !strcmp(what, "cost") ? 2 : 1);
	if (all || !strcmp(what, "cost"))
		cost(runs);
	if (all || !strcmp(what, "detect"))
		detect(quick ? 1 : runs < 3 ? runs : 3);
	return 0;
}
