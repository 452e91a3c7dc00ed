/* stack.c - call stacks for the debug caches' owner tracks: captured with
 * libunwind (unw_backtrace: no malloc on the local unwinding path), kept once
 * each in a deduplicating depot (a handle per distinct stack, as the kernel's
 * stackdepot), and turned into names only when a report is printed: libdw
 * (elfutils) reads the symbol tables and DWARF line tables, so functions
 * that are not exported and file:line are named; dladdr otherwise.
 *
 * Both libraries are loaded with dlopen, RTLD_LOCAL, on first use: libunwind
 * exports backtrace and _Unwind_Backtrace of its own, which must not replace
 * glibc's and libgcc's in a program that merely preloads uslab, and neither is
 * loaded by a program that never creates a debug cache. The headers are found
 * at build time (USLAB_HAVE_LIBUNWIND, USLAB_HAVE_LIBDW); without them, or
 * without the libraries at run time, a track keeps its caller's address and
 * names come from dladdr. USLAB_STACK_DEPTH frames are kept (0: the caller
 * alone, no unwinding). Locks: depot_lock (a leaf spin lock over the depot's
 * insertions; lookups take none), sym_lock (libdw's session; counted as a
 * uslab lock, so a report made under it waits for its release, and a fork
 * from a signal handler knows it is held). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "platform.h"

#ifdef USLAB_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

/* ===========================================================================
 * Capture
 */

static int (*unw_bt)(void **, int);
static int stack_state;            /* 0 not tried, 1 loading, 2 done */
static __thread bool in_capture __attribute__((tls_model("initial-exec")));
static __thread unsigned int uslab_frames __attribute__((tls_model("initial-exec"))) = 3;
static bool dw_load(void);

void usl_stack_init(void)
{
	int none = 0;
	if (!__atomic_compare_exchange_n(&stack_state, &none, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	/* dlopen allocates: those allocations may come back to the debug
	 * paths, which capture nothing meanwhile (in_capture). */
	in_capture = true;
#ifdef USLAB_HAVE_LIBUNWIND
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	int (*bt)(void **, int) = h ? (int (*)(void **, int))dlsym(h, "unw_backtrace") : NULL;
	if (bt) {
		/* libunwind sets itself up on its first unwind (a flag checked
		 * before its lock): done here, once, before any thread can race
		 * on it (ThreadSanitizer saw two workers do it together). */
		void *warm[4];
		bt(warm, 4);
		__atomic_store_n(&unw_bt, bt, __ATOMIC_RELEASE);
	}
#endif
	dw_load();
	in_capture = false;
	__atomic_store_n(&stack_state, 2, __ATOMIC_RELEASE);
}

/* A program run with USLAB_DEBUG: load them once the loader is done with the
 * program's own libraries (a constructor; dlopen from inside the loader's
 * first allocations would not be safe). */
__attribute__((constructor)) static void stack_at_start(void)
{
	if (getenv("USLAB_DEBUG"))
		usl_stack_init();
}

/* ===========================================================================
 * The depot: open addressing over a table mapped once (MAP_NORESERVE, pages
 * touched as used). Entry 0 is "no stack". Entries are added under
 * depot_lock and never change or leave, so lookups take no lock.
 */

#define DEPOT_SLOTS (1u << 16)
struct depot_entry {
	uint32_t hash, depth;
	uintptr_t pc[USL_STACK_MAX];
};
static struct depot_entry *depot;
static unsigned int depot_used;
static int depot_lock;
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

/* Two lanes, so that the multiplications of one frame need not wait for the
 * previous frame's (a chain of 16 was most of usl_stack_save's own time). */
static uint32_t stack_hash(const uintptr_t *pc, unsigned int n)
{
	uint64_t a = 0x9e3779b97f4a7c15ULL ^ n, b = 0xc2b2ae3d27d4eb4fULL;
	unsigned int i = 0;
	for (; i + 2 <= n; i += 2) {
		a = (a ^ pc[i]) * 0xff51afd7ed558ccdULL;
		b = (b ^ pc[i + 1]) * 0xc4ceb9fe1a85ec53ULL;
		a ^= a >> 29;
		b ^= b >> 31;
	}
	if (i < n)
		a = (a ^ pc[i]) * 0xff51afd7ed558ccdULL;
	uint64_t h = (a ^ (b >> 17) ^ (b << 23)) * 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(h >> 32) | 1;  /* never 0: 0 marks a free slot */
}

/* Inline, not memcmp: a few words compared on every capture (docs/PERFORMANCE.md). */
static inline bool same_pcs(const uintptr_t *a, const uintptr_t *b, unsigned int n)
{
	uintptr_t diff = 0;
	for (unsigned int i = 0; i < n; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* The handle of stack pc[0..n) with hash h, or 0 when it is not there: the
 * probe stops at the first empty slot, which a concurrent insertion may be
 * filling (the caller then looks again under depot_lock). */
static uint32_t depot_find(const struct depot_entry *d, uint32_t h, const uintptr_t *pc, unsigned int n)
{
	for (uint32_t i = h & (DEPOT_SLOTS - 1), probes = 0; probes < DEPOT_SLOTS; probes++,
	              i = (i + 1) & (DEPOT_SLOTS - 1)) {
		if (i == 0)
			continue;
		uint32_t eh = __atomic_load_n(&d[i].hash, __ATOMIC_ACQUIRE);
		if (!eh)
			return 0;
		if (eh == h && d[i].depth == n && same_pcs(d[i].pc, pc, n))
			return i;
	}
	return 0;
}

uint32_t usl_stack_save(unsigned int skip, uintptr_t caller)
{
	uintptr_t pc[USL_STACK_MAX + 8];
	unsigned int n = 0;

	if (in_capture)
		return 0;
	in_capture = true;
	int (*bt)(void **, int) = __atomic_load_n(&unw_bt, __ATOMIC_ACQUIRE);
	/* Each frame costs the unwinder about as much as the next, so it is
	 * asked for no more than this thread's deepest path into uslab so far
	 * (uslab_frames) and the frames kept; asked again, for all it may give,
	 * when the caller was deeper. */
	unsigned int depth = (unsigned int)usl_opt.stack_depth;
	unsigned int want = uslab_frames + depth, max = (unsigned int)(sizeof(pc) / sizeof(pc[0]));
	if (!depth)
		bt = NULL;                    /* the caller alone */
	if (want > max)
		want = max;
	unsigned int from = 0;
	bool found = false;
	for (int pass = 0; bt && pass < 2 && !found; pass++) {
		int got = bt((void **)pc, (int)want);
		n = got > 0 ? (unsigned int)got : 0;
		/* From the caller of the allocator's entry point on, when it
		 * is found (the frames above it are uslab's own). */
		for (unsigned int i = 0; i < n && !found; i++)
			if (pc[i] == caller) {
				from = i;
				found = true;
			}
		if (found && from > uslab_frames)
			uslab_frames = from < 8 ? from : 8;
		if ((found && (n < want || n - from >= depth)) || n < want || want == max)
			break;                /* all there is, or all that is kept */
		found = false;
		want = max;
	}
	if (!found)
		from = skip < n ? skip : n;    /* not found: after skip frames */
	n -= from;
	if (n > depth)
		n = depth;
	if (n == 0 && caller) {
		pc[from] = caller;        /* without an unwinder: the caller alone */
		n = 1;
	}
	uint32_t handle = 0;
	if (n) {
		if (!__atomic_load_n(&depot, __ATOMIC_ACQUIRE)) {
			struct depot_entry *d = usl_map_guarded(DEPOT_SLOTS * sizeof(struct depot_entry),
			                                        PROT_READ | PROT_WRITE);
			struct depot_entry *none = NULL;
			if (d && !__atomic_compare_exchange_n(&depot, &none, d, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				usl_unmap_guarded(d, DEPOT_SLOTS * sizeof(struct depot_entry));
		}
		struct depot_entry *d = __atomic_load_n(&depot, __ATOMIC_ACQUIRE);
		uint32_t h = d ? stack_hash(pc + from, n) : 0;
		/* Most stacks are there already: found without the lock (an
		 * entry's hash is stored last, with release). */
		handle = d ? depot_find(d, h, pc + from, n) : 0;
		if (d && !handle) {
			usl_spin_lock_leaf(&depot_lock);
			for (uint32_t i = h & (DEPOT_SLOTS - 1), probes = 0; probes < DEPOT_SLOTS; probes++,
			              i = (i + 1) & (DEPOT_SLOTS - 1)) {
				if (i == 0)
					continue;
				struct depot_entry *e = &d[i];
				if (!e->hash) {
					if (depot_used + 1 >= DEPOT_SLOTS * 7 / 8)
						break;          /* full: no handle, the caller alone is kept */
					e->depth = n;
					memcpy(e->pc, pc + from, n * sizeof(uintptr_t));
					__atomic_store_n(&e->hash, h, __ATOMIC_RELEASE);
					depot_used++;
					handle = i;
					break;
				}
				if (e->hash == h && e->depth == n && !memcmp(e->pc, pc + from, n * sizeof(uintptr_t))) {
					handle = i;
					break;
				}
			}
			usl_spin_unlock_leaf(&depot_lock);
		}
	}
	in_capture = false;
	return handle;
}

unsigned int usl_stack_get(uint32_t handle, uintptr_t *pc, unsigned int max)
{
	struct depot_entry *d = __atomic_load_n(&depot, __ATOMIC_ACQUIRE);
	if (!d || !handle || handle >= DEPOT_SLOTS || !__atomic_load_n(&d[handle].hash, __ATOMIC_ACQUIRE))
		return 0;
	unsigned int n = d[handle].depth < max ? d[handle].depth : max;
	memcpy(pc, d[handle].pc, n * sizeof(uintptr_t));
	return n;
}

/* ===========================================================================
 * Names
 */

static void symbolize_dladdr(uintptr_t addr, char *buf, size_t n)
{
	Dl_info info = { 0 };
	int found = dladdr((void *)addr, &info);
	if (found && info.dli_sname && info.dli_saddr) {
		snprintf(buf, n, "%s+0x%lx", info.dli_sname, (unsigned long)(addr - (uintptr_t)info.dli_saddr));
	} else if (found && info.dli_fname && info.dli_fbase) {
		const char *base = info.dli_fname, *slash = strrchr(base, '/');
		snprintf(buf, n, "%s+0x%lx", slash ? slash + 1 : base, (unsigned long)(addr - (uintptr_t)info.dli_fbase));
	} else {
		snprintf(buf, n, "0x%lx", (unsigned long)addr);
	}
}

#ifdef USLAB_HAVE_LIBDW
static struct {
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	int (*proc_report)(Dwfl *, pid_t);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *);
	void (*report_begin)(Dwfl *);
	Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
	const char *(*addrinfo)(Dwfl_Module *, GElf_Addr, GElf_Off *, GElf_Sym *, GElf_Word *, Elf **, Dwarf_Addr *);
	Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
	const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
	Dwfl_Callbacks cb;
	Dwfl *dwfl;
	char *debuginfo_path;
	bool tried, ok;
} dw;
static __thread bool in_symbolize __attribute__((tls_model("initial-exec")));

static bool dw_load(void)
{
	if (__atomic_load_n(&dw.tried, __ATOMIC_ACQUIRE))
		return dw.ok;
	void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
	dw.begin = (Dwfl *(*)(const Dwfl_Callbacks *))dlsym(h, "dwfl_begin");
	dw.proc_report = (int (*)(Dwfl *, pid_t))dlsym(h, "dwfl_linux_proc_report");
	dw.report_end = (int (*)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *))
		dlsym(h, "dwfl_report_end");
	dw.report_begin = (void (*)(Dwfl *))dlsym(h, "dwfl_report_begin");
	dw.addrmodule = (Dwfl_Module *(*)(Dwfl *, Dwarf_Addr))dlsym(h, "dwfl_addrmodule");
	dw.addrinfo = (const char *(*)(Dwfl_Module *, GElf_Addr, GElf_Off *, GElf_Sym *, GElf_Word *, Elf **,
	                               Dwarf_Addr *))dlsym(h, "dwfl_module_addrinfo");
	dw.getsrc = (Dwfl_Line *(*)(Dwfl_Module *, Dwarf_Addr))dlsym(h, "dwfl_module_getsrc");
	dw.lineinfo = (const char *(*)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *))
		dlsym(h, "dwfl_lineinfo");
	dw.cb.find_elf = (int (*)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, Elf **))
		dlsym(h, "dwfl_linux_proc_find_elf");
	dw.cb.find_debuginfo = (int (*)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *,
	                                const char *, GElf_Word, char **))dlsym(h, "dwfl_standard_find_debuginfo");
	dw.cb.debuginfo_path = &dw.debuginfo_path;
	dw.ok = dw.begin && dw.proc_report && dw.report_end && dw.report_begin && dw.addrmodule && dw.addrinfo &&
	        dw.getsrc && dw.lineinfo && dw.cb.find_elf && dw.cb.find_debuginfo;
	__atomic_store_n(&dw.tried, true, __ATOMIC_RELEASE);
	return dw.ok;
}

/* The process's modules, read again when an address is in none (a library
 * loaded since). Under sym_lock. */
static Dwfl_Module *dw_module(uintptr_t addr)
{
	usl_assert_held(&sym_lock);
	if (!dw.dwfl) {
		dw.dwfl = dw.begin(&dw.cb);
		if (!dw.dwfl)
			return NULL;
		dw.report_begin(dw.dwfl);
		dw.proc_report(dw.dwfl, getpid());
		dw.report_end(dw.dwfl, NULL, NULL);
	}
	Dwfl_Module *m = dw.addrmodule(dw.dwfl, addr);
	if (!m) {
		dw.report_begin(dw.dwfl);
		dw.proc_report(dw.dwfl, getpid());
		dw.report_end(dw.dwfl, NULL, NULL);
		m = dw.addrmodule(dw.dwfl, addr);
	}
	return m;
}

static bool symbolize_dw(uintptr_t addr, char *buf, size_t n)
{
	if (in_symbolize)
		return false;             /* a report made while symbolizing */
	in_symbolize = true;
	bool done = false;
	usl_lock(&sym_lock);
	/* Loaded by usl_stack_init only: a dlopen here could run inside the
	 * loader's own allocations. */
	if (__atomic_load_n(&dw.tried, __ATOMIC_ACQUIRE) && dw.ok) {
		Dwfl_Module *m = dw_module(addr);
		GElf_Off off = 0;
		GElf_Sym sym;
		/* A return address: the call is the byte before it. */
		const char *name = m ? dw.addrinfo(m, addr - 1, &off, &sym, NULL, NULL, NULL) : NULL;
		if (name) {
			int len = snprintf(buf, n, "%s+0x%lx/0x%lx", name, (unsigned long)off + 1, (unsigned long)sym.st_size);
			Dwfl_Line *line = dw.getsrc(m, addr - 1);
			int lineno = 0;
			const char *file = line ? dw.lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
			if (file && len > 0 && (size_t)len < n) {
				const char *slash = strrchr(file, '/');
				snprintf(buf + len, n - (size_t)len, " (%s:%d)", slash ? slash + 1 : file, lineno);
			}
			done = true;
		}
	}
	usl_unlock(&sym_lock);
	in_symbolize = false;
	return done;
}
#else
static bool dw_load(void)
{
	return false;
}
#endif

void usl_stack_fork_lock(void)
{
	usl_lock(&sym_lock);
	usl_spin_lock_leaf(&depot_lock);
}

void usl_stack_fork_unlock(void)
{
	usl_spin_unlock_leaf(&depot_lock);
	usl_unlock(&sym_lock);
}

void usl_symbolize(uintptr_t addr, char *buf, size_t n)
{
#ifdef USLAB_HAVE_LIBDW
	if (symbolize_dw(addr, buf, n))
		return;
#endif
	symbolize_dladdr(addr, buf, n);
}
