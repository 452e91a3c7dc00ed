/* messaging.c - seed 001's perf bench sched messaging in threads: senders
 * allocate messages, receivers free them; time, and uslab's slab counters. */
#include "seed.h"

/* messaging: seed 001's "perf bench sched messaging" in threads: G groups of
 * 20 senders and 20 receivers; each sender allocates a 100-byte message for
 * every receiver of its group, loops times, and writes its address into that
 * receiver's pipe; the receiver reads and frees it (uslab: kmalloc/kfree;
 * others: malloc/free), so nearly every message is freed on another thread than
 * its sender's, often on the other CPU. Prints the wall seconds and ns per
 * message, and with counters on (USLAB_STATS) the kmalloc caches' slab CAS
 * tried, list_lock taken, slow frees and slow allocations per 1000 messages. */
enum { MSG_GROUPS = 2, MSG_SIDE = 20, MSG_SIZE = 100 };
struct msg_arg {
	int *fds;           /* the group's receivers' pipes (write ends) */
	int fd;             /* a receiver's read end */
	long loops;
};

static void *msg_sender(void *p)
{
	struct msg_arg *a = p;
	for (long l = 0; l < a->loops; l++)
		for (int r = 0; r < MSG_SIDE; r++) {
			char *m = use_uslab ? kmalloc(MSG_SIZE, GFP_KERNEL) : sys_malloc(MSG_SIZE);
			m[0] = (char)l;
			m[MSG_SIZE - 1] = (char)r;
			if (write(a->fds[r], &m, sizeof(m)) != (ssize_t)sizeof(m))
				abort();
		}
	return NULL;
}

static void *msg_receiver(void *p)
{
	struct msg_arg *a = p;
	long want = a->loops * MSG_SIDE, got = 0;
	char *buf[64];
	while (got < want) {
		ssize_t n = read(a->fd, buf, sizeof(buf));
		if (n <= 0 || n % (ssize_t)sizeof(char *))
			abort();                     /* (pipe writes of 8 bytes are atomic) */
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(char *); i++) {
			if (use_uslab)
				kfree(buf[i]);
			else
				sys_free(buf[i]);
		}
		got += n / (ssize_t)sizeof(char *);
	}
	return NULL;
}

static unsigned long long msg_counter;   /* a counter summed over the kmalloc caches */
static int msg_sum(struct kmem_cache *s, void *name)
{
	char buf[64];
	const char *cn = kmem_cache_name(s);
	if (cn && !strncmp(cn, "kmalloc-", 8) && uslab_cache_attr(s, name, buf, sizeof(buf)) >= 0)
		msg_counter += strtoull(buf, NULL, 10);
	return 0;
}

void child_messaging(long loops)
{
	static struct msg_arg snd[MSG_GROUPS][MSG_SIDE], rcv[MSG_GROUPS][MSG_SIDE];
	static int wfd[MSG_GROUPS][MSG_SIDE];
	static pthread_t ts[MSG_GROUPS][MSG_SIDE], tr[MSG_GROUPS][MSG_SIDE];
	if (use_uslab) {
		void *m = kmalloc(MSG_SIZE, GFP_KERNEL);
		report_path(uslab_cache_find("kmalloc-128"));   /* the messages' class */
		kfree(m);
	}
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int r = 0; r < MSG_SIDE; r++) {
			int fd[2];
			if (pipe(fd) != 0)
				abort();
			wfd[g][r] = fd[1];
			rcv[g][r] = (struct msg_arg){ NULL, fd[0], loops };
		}
	double t0 = now_ns();
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int i = 0; i < MSG_SIDE; i++) {
			pthread_create(&tr[g][i], NULL, msg_receiver, &rcv[g][i]);
			snd[g][i] = (struct msg_arg){ wfd[g], -1, loops };
			pthread_create(&ts[g][i], NULL, msg_sender, &snd[g][i]);
		}
	for (int g = 0; g < MSG_GROUPS; g++)
		for (int i = 0; i < MSG_SIDE; i++) {
			pthread_join(ts[g][i], NULL);
			pthread_join(tr[g][i], NULL);
		}
	double secs = (now_ns() - t0) / 1e9, msgs = (double)MSG_GROUPS * MSG_SIDE * MSG_SIDE * (double)loops;
	printf("%.4f %.1f", secs, secs * 1e9 / msgs);
	if (use_uslab && getenv("USLAB_STATS")) {
		static const char *const names[] = { "cmpxchg_double", "list_lock", "free_slowpath", "alloc_slowpath" };
		for (unsigned i = 0; i < 4; i++) {
			msg_counter = 0;
			uslab_for_each_cache(msg_sum, (void *)names[i]);
			printf(" %.2f", (double)msg_counter * 1000.0 / msgs);
		}
	}
	printf("\n");
}

/* Seed 001's messaging workload: time per message for every allocator, then
 * uslab's slab-layer counters per 1000 messages (a second set of runs with
 * USLAB_STATS, SLUB only: SLAB has no such paths). */
void bench_messaging(int runs, long loops)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", loops);
	begin_scenario_of("messaging");
	measure("messaging", "messaging", arg, runs, 2, 2);
	printf("\n== messaging (seed 001's \"perf bench sched messaging -g %d -t\"): %d groups of %d sender and %d "
	       "receiver threads, each sender sends %ld messages of %d bytes to each receiver of its group through "
	       "pipes (the receiver frees what the sender allocated); wall seconds and ns per message, lower is "
	       "better; median of %d run%s ==\n", MSG_GROUPS, MSG_GROUPS, MSG_SIDE, MSG_SIDE, loops, MSG_SIZE, runs,
	       plural(runs));
	printf("uslab: kmalloc/kfree; uslab malloc and peers: malloc/free. Most of the time is the pipes' system "
	       "calls, as in the kernel's benchmark\n");
	ratio_legend("/glibc .. /mimalloc", "seconds");
	printf("%-*s %9s %9s", NAMEW, "allocator", "seconds", "ns/msg");
	ratio_header();
	printf("\n");
	print_rows(0, "%9.3f %9.0f");
	print_footer();
	data_rows("messaging", "seconds", -1, 0);
	summary_one("messaging (seconds)", 0, 0);

	/* The counters: uslab's SLUB rows only, with USLAB_STATS (slabinfo at
	 * exit to /dev/null). */
	begin_scenario_of("messaging");
	for (int v = 0; v < NVAR; v++)
		if (!variants[v].uslab || variants[v].engine || variants[v].exe)
			variants[v].present = 0;
	setenv("USLAB_STATS", "/dev/null", 1);
	measure("messaging counters", "messaging", arg, runs < 3 ? runs : 3, 6, 2);
	unsetenv("USLAB_STATS");
	printf("-- the kmalloc caches' counters per 1000 messages (USLAB_STATS; median of %d run%s): cmpxchg_double: "
	       "slab {freelist, counters} CAS tried; list_lock: node list_lock taken by the allocation and free "
	       "paths; free_slowpath, alloc_slowpath: the kernel's counters. uslab has only the state machine after "
	       "the seed (CPU partial slabs not frozen), so there is no before to set beside it; with sheaves the "
	       "CPUs' sheaves take most frees off the slabs\n", runs < 3 ? runs : 3, plural(runs < 3 ? runs : 3));
	printf("%-*s %14s %9s %13s %14s\n", NAMEW, "allocator", "cmpxchg_double", "list_lock", "free_slowpath",
	       "alloc_slowpath");
	for (int v = 0; v < NVAR; v++) {
		if (!variants[v].present)
			continue;
		if (!ran(v)) {
			printf("%-*s FAILED\n", NAMEW, variants[v].name);
			continue;
		}
		printf("%-*s %14.2f %9.2f %13.2f %14.2f\n", NAMEW, variants[v].name, medians[v][2], medians[v][3],
		       medians[v][4], medians[v][5]);
	}
	static const char *const cn[4] = { "cmpxchg_double/1000 msgs", "list_lock/1000 msgs",
		                           "free_slowpath/1000 msgs", "alloc_slowpath/1000 msgs" };
	for (int i = 0; i < 4; i++)
		data_rows("messaging counters", cn[i], -1, 2 + i);
	print_footer();
}
