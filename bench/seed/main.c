/* main.c - uslab-bench: the seed benchmarks, side by side with the peers.
 * Each scenario runs in child processes (this same program with --child), one per
 * allocator, each loaded the way its users load it: uslab's kmem_cache_* rows
 * with LD_PRELOAD=libuslab.so (this program does not link uslab: its uslab
 * calls are weak references that the preloaded library resolves, a call
 * through the PLT as in a program linked with -luslab), with sheaves and with
 * the old cpu-slab fast path (USLAB_SHEAVES=1/0), each in rseq and locked mode
 * (USLAB_RSEQ=0), and on SLAB; uslab's malloc (LD_PRELOAD=libuslab.so, called
 * as the peers are); malloc/free from glibc, jemalloc, gperftools (Debian's
 * libtcmalloc-minimal4: tcmalloc 2.10 with per-thread caches) and mimalloc
 * (LD_PRELOAD). One extra row, labelled, runs uslab-bench-static: this source
 * linked with the static library (-fno-plt). Runs are interleaved; the table
 * shows medians and ratios against the peers of the same run, its header the
 * unit and which way is better, and a summary at the end puts uslab against
 * the best peer of each row (from the same medians). Progress goes to stderr,
 * the tables to stdout. A child that crashes, prints the wrong number of
 * values, or runs another allocator than its row's is reported on stderr and
 * in the table, never read as a zero. --data FILE also appends every median,
 * with the least and greatest run, to FILE as tab-separated lines (the
 * benchmark report's plots, scripts/bench_report.py).
 * Usage: uslab-bench [single|nalloc|bulk|detached|remote|random-free|partial-drain|seed003|messaging|
 *                     colour|all] [--runs N] [--quick]
 *                    [--data FILE]
 * Not a test: timings never decide pass or fail. */
#include "seed.h"
#include "spawn.h"

static const char *const scenarios[] = { "single", "nalloc", "bulk", "detached", "remote", "random-free",
	                                  "partial-drain", "seed003", "messaging", "colour", "all" };

static void usage(FILE *f)
{
	fprintf(f, "usage: uslab-bench [single|nalloc|bulk|detached|remote|random-free|partial-drain|seed003|messaging|"
	           "colour|all] [--runs N] [--quick] [--data FILE]\n"
	           "  --runs N     child runs per allocator and scenario, 1..%d (default 7); medians are printed\n"
	           "  --quick      smaller counts (single, bulk, remote, random-free, partial-drain)\n"
	           "  --data FILE  also append every median, with the least and greatest run, to FILE (tab-separated:\n"
	           "               program, table, allocator, metric, x, median, min, max, runs; gperftools' rows\n"
	           "               have the allocator key tcmalloc)\n", MAXRUNS);
}

/* What every table has in common, printed once at the top. */
static void how_to_read(FILE *f)
{
	fprintf(f, "How to read: each number is a median over runs (a process per allocator per run); times "
	           "(ns, TSC ticks or cycles) are per operation, lower is better. A ratio a/b below 1.00 means a is faster "
	           "than b, above 1.00 slower. The summary at the end compares uslab with the best peer of each row. "
	           "Progress goes to stderr.\n");
}

/* The children of the workloads whose only argument is a count. */
static const struct {
	const char *name;
	void (*child)(long n);
} children[] = {
	{ "single", child_single },       { "remote", child_remote },       { "bulk", child_bulk },
	{ "seed003", child_seed003 },     { "detached", child_detached },   { "messaging", child_messaging },
	{ "colour", child_colour },
};

/* uslab-bench --child SCENARIO uslab|malloc N[:ROUNDS]: one child run of a
 * workload, its numbers on stdout; 2 for an unknown scenario. */
static int child_main(char **argv)
{
	use_uslab = !strcmp(argv[3], "uslab");
	if (use_uslab && !USLAB_LOADED) {
		fprintf(stderr, "uslab-bench: the uslab API is not loaded (run with LD_PRELOAD=%s)\n", USLAB_SO_PATH);
		return 3;
	}
#ifndef BENCH_STATIC
	if (!use_uslab && USLAB_LOADED)      /* malloc served by uslab: say so, and how */
		printf("uslab-malloc %s %s\n", uslab_percpu_mode(), uslab_allocator());
#endif
	char *end;
	long n = strtol(argv[4], &end, 10);
	long rounds = *end == ':' ? atol(end + 1) : 1;   /* random-free, partial-drain: N:ROUNDS */
	for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++)
		if (!strcmp(argv[2], children[i].name)) {
			children[i].child(n);
			return 0;
		}
	if (!strcmp(argv[2], "nalloc"))
		child_nalloc(n, NALLOC_REPS);
	else if (!strcmp(argv[2], "random-free"))
		child_random_free(n, rounds > 0 ? rounds : 1);
	else if (!strcmp(argv[2], "partial-drain"))
		child_partial_drain(n, rounds > 0 ? rounds : 1);
	else
		return 2;
	return 0;
}

/* The command line: the scenario (what), --runs, --quick, --data. Returns -1
 * to go on, else the exit status (0 after --help, 2 after the usage). */
static int parse_options(int argc, char **argv, const char **what, int *runs, int *quick)
{
	int known = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			*runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			*quick = 1;
		else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
			if (!(data_file = fopen(argv[++i], "ae"))) {
				fprintf(stderr, "uslab-bench: %s: %s\n", argv[i], strerror(errno));
				return 2;
			}
			setvbuf(data_file, NULL, _IOLBF, 0);
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			how_to_read(stdout);
			return 0;
		} else if (argv[i][0] != '-')
			*what = argv[i];
		else
			goto usage;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		known |= !strcmp(*what, scenarios[i]);
	if (!known)
		goto usage;
	if (*runs < 1 || *runs > MAXRUNS) {
		fprintf(stderr, "uslab-bench: --runs must be 1..%d\n", MAXRUNS);
		return 2;
	}
	return -1;
usage:
	usage(stderr);
	return 2;
}

/* Where this program and uslab-bench-static are, and which variants' programs
 * and libraries are there (installed[]); the others' rows are skipped. */
static void find_variants(void)
{
	static char exe[4096];
	self_path = self_exe(exe, sizeof(exe)) > 0 ? exe : "/proc/self/exe";
	snprintf(static_path, sizeof(static_path), "%s-static", self_path);
	for (int v = 0; v < NVAR; v++)
		if (variants[v].exe && access(static_path, X_OK) != 0) {
			fprintf(stderr, "note: %s not built; the row %s is skipped\n", static_path, variants[v].name);
			variants[v].present = 0;
		}
	for (int v = 0; v < NVAR; v++) {
		if (variants[v].preload && access(variants[v].preload, R_OK) != 0) {
			fprintf(stderr, "note: %s not installed (%s); its column is skipped\n", variants[v].name,
			        variants[v].preload);
			variants[v].present = 0;
		}
		installed[v] = variants[v].present;
	}
}

/* The tables of scenario what ("all": every one), then the summary. */
static void run_scenarios(const char *what, int runs, int quick)
{
	/* Default counts: `all` with --runs 7 took 280 s on the 2-CPU machine with
	 * 8 variants (bulk is the largest part), well under 10 minutes, so no count
	 * was lowered when the variants went from 6 to 8. */
	int all = !strcmp(what, "all");
	/* Progress steps: one a measure(), two for random-free and partial-drain
	 * (two sizes). */
	progress_total(all ? 13 : !strcmp(what, "random-free") || !strcmp(what, "partial-drain") ||
	                               !strcmp(what, "messaging") ? 2 : 1);
	if (all || !strcmp(what, "single"))
		bench_single(runs, quick ? 2000000 : 20000000);
	if (all || !strcmp(what, "nalloc"))
		bench_nalloc(runs, 10000);
	if (all || !strcmp(what, "bulk"))
		bench_bulk(runs, quick ? 1000000 : 10000000);
	/* 100 runs as the seed's (20 quick): each process about 50 ms. */
	if (all || !strcmp(what, "detached"))
		bench_detached(quick ? 20 : DETACHED_MAXRUNS, quick ? 400000 : 2000000);
	if (all || !strcmp(what, "remote"))
		bench_remote(runs, quick ? 500000 : 4000000);
	if (all || !strcmp(what, "random-free"))
		bench_random_free(runs, quick);
	if (all || !strcmp(what, "partial-drain"))
		bench_partial_drain(runs, quick);
	if (all || !strcmp(what, "seed003"))
		bench_seed003(runs, 10000);
	if (all || !strcmp(what, "messaging"))
		bench_messaging(runs, quick ? 50 : 250);
	if (all || !strcmp(what, "colour"))
		bench_colour(runs, quick ? 2000000 : 20000000);
	print_summary();
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "--child"))
		return child_main(argv);
	const char *what = "all";
	int runs = 7, quick = 0;
	int rc = parse_options(argc, argv, &what, &runs, &quick);
	if (rc >= 0)
		return rc;
	find_variants();
	printf("uslab-bench: %ld CPUs online; uslab = LD_PRELOAD=%s (its kmem_cache_* calls through the PLT, its "
	       "malloc as the peers'), the peers by LD_PRELOAD\n%s\n", sysconf(_SC_NPROCESSORS_ONLN), USLAB_SO_PATH,
	       GPERFTOOLS_NOTE);
	how_to_read(stdout);
	run_scenarios(what, runs, quick);
	return 0;
}
