/* peers.h - the libraries the benchmarks preload: uslab's (USLAB_SO_PATH, set
 * by the build) and the peers' as Debian installs them, and the legend of the
 * peer named gperftools. */
#ifndef USLAB_BENCH_PEERS_H
#define USLAB_BENCH_PEERS_H

#ifndef USLAB_SO_PATH
#define USLAB_SO_PATH "libuslab.so"
#endif
#define PEER_LIBDIR "/usr/lib/x86_64-linux-gnu"
#define JEMALLOC_SO PEER_LIBDIR "/libjemalloc.so.2"
#define GPERFTOOLS_SO PEER_LIBDIR "/libtcmalloc_minimal.so.4"
#define MIMALLOC_SO PEER_LIBDIR "/libmimalloc.so.2"

/* The peer preloaded from Debian's libtcmalloc-minimal4 is gperftools'
 * tcmalloc 2.10, whose caches are per thread, not Google's current tcmalloc
 * with per-CPU caches (which Debian does not ship): its rows and columns are
 * named "gperftools", and each table that shows it prints this legend. Its
 * --data key stays "tcmalloc" (see seed/driver.c). */
#define GPERFTOOLS_NOTE                                                                                    \
	"gperftools = Debian libtcmalloc-minimal4, gperftools 2.10 tcmalloc with per-thread caches (not "   \
	"Google's per-CPU tcmalloc)"

#endif /* USLAB_BENCH_PEERS_H */
