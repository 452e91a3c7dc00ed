#!/usr/bin/env bash
# redis_rss.sh: RSS of Debian's redis-server 7.0 under several mallocs, through a
# load / delete 80% / reload / FLUSHALL scenario (docs/PERFORMANCE.md, "Benchmarks").
#
# Scenario, per allocator and round, on a fresh redis-server of our own:
#   start    server up, answered PING
#   loaded   DEBUG POPULATE <keys> k <size>          keys k:0 .. k:<keys-1>
#   deleted  DEL of every k:N with N % 5 != 0, one DEL per key, in RESP through
#            `redis-cli --pipe` (80% of the keys; 20% stay)
#   more     DEBUG POPULATE <keys> k2 <size>         <keys> new keys k2:0 ..
#   idle     FLUSHALL SYNC, then <idle> seconds with no command
# RSS is VmRSS of /proc/PID/status, read after the phase's command returned and a
# PING + DBSIZE round trip confirmed the key count. MB here = VmRSS kB / 1000, the
# unit of README's table (its jemalloc row, 12/305/305/379/22, is what this
# script prints for jemalloc; in MiB the same run reads 12/298/298/370/21).
# redis's INFO used_memory (--verbose) is given in the same unit (bytes / 1024000).
#
# Allocators (--alloc, comma-separated; default all):
#   jemalloc         as shipped: redis-server links libjemalloc.so.2, no LD_PRELOAD
#   glibc            LD_PRELOAD of glibc_shim.c (built here with cc), which forwards the
#                    malloc family to glibc's __libc_* (see the file for why)
#   tcmalloc         LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4: Debian's
#                    libtcmalloc-minimal4, gperftools 2.10 tcmalloc with per-thread caches
#                    (not Google's per-CPU tcmalloc); the tables name it gperftools, the
#                    key (--alloc, the TSV's alloc column) stays tcmalloc
#   mimalloc         LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
#   uslab            LD_PRELOAD=libuslab.so (--uslab PATH, or $USLAB_LIB, default
#                    build/release/libuslab.so under the repository root)
#   uslab-nosheaves  the same with USLAB_SHEAVES=0
#   uslab-decay0     the same with USLAB_DECAY_MS=0
#   uslab-slab       the same with USLAB_ALLOCATOR=slab (SLAB, the second engine)
# Debian's redis-server imports plain malloc/free/calloc/realloc/malloc_usable_size
# (bound to libjemalloc.so.2), so a preloaded malloc interposes all of them; its
# mallctl() calls keep going to jemalloc (which then manages nothing). Note that
# FLUSHALL SYNC ends in jemalloc_purge() in redis >= 6.2: an explicit purge only
# the shipped jemalloc benefits from.
#
# redis-server runs on CPU 0 (taskset -c 0), every client on CPU 1. Rounds are
# interleaved (round 1: every allocator, round 2: every allocator, ...); the
# tables give per-point medians over the rounds.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/redis/redis_rss.sh [--rounds R] [--alloc LIST] [--uslab PATH]
                                     [--keys N] [--size BYTES] [--idle SECONDS]
                                     [--port P] [--out FILE.tsv] [--verbose]
  --rounds R     rounds, each runs every allocator once (default 3)
  --alloc LIST   comma-separated: jemalloc,glibc,tcmalloc,mimalloc,uslab,
                 uslab-nosheaves,uslab-decay0,uslab-slab, or all (default all);
                 tcmalloc: Debian's libtcmalloc-minimal4 (gperftools 2.10, per-thread
                 caches), named gperftools in the tables
  --uslab PATH   libuslab.so to preload (default $USLAB_LIB, else
                 <repo>/build/release/libuslab.so)
  --keys N       keys per DEBUG POPULATE (default 1000000)
  --size BYTES   value size (default 200)
  --idle S       idle seconds after FLUSHALL SYNC (default 3)
  --port P       first TCP port to try on 127.0.0.1 (default 16379)
  --out FILE     also write every run's raw numbers (kB, bytes) as TSV
  --verbose      print redis's INFO used_memory at each point, per run and as medians
EOF
}

ROUNDS=3
ALLOCS=all
USLAB=${USLAB_LIB:-}
KEYS=1000000
SIZE=200
IDLE=3
PORT0=16379
OUT=
VERBOSE=0
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift 2 ;;
	--alloc|--allocs|--allocators) ALLOCS=$2; shift 2 ;;
	--uslab) USLAB=$2; shift 2 ;;
	--keys) KEYS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--idle) IDLE=$2; shift 2 ;;
	--port) PORT0=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--verbose|-v) VERBOSE=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "redis_rss.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done
for v in ROUNDS KEYS SIZE PORT0; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "redis_rss.sh: bad number for $v: '${!v}'" >&2; exit 2; }
done
[[ $IDLE =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "redis_rss.sh: bad --idle '$IDLE'" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ -n "$USLAB" ] || USLAB=$ROOT/build/release/libuslab.so
LIBDIR=/usr/lib/x86_64-linux-gnu
ALL="jemalloc glibc tcmalloc mimalloc uslab uslab-nosheaves uslab-decay0 uslab-slab"
[ "$ALLOCS" = all ] && ALLOCS=$ALL
ALLOCS=${ALLOCS//,/ }
for a in $ALLOCS; do
	case " $ALL " in *" $a "*) ;; *) echo "redis_rss.sh: unknown allocator '$a' (known: $ALL)" >&2; exit 2 ;; esac
done

log() { echo "$*" >&2; }

# ---------------------------------------------------------------- redis itself
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	[ "$(id -u)" = 0 ] || { log "redis_rss.sh: redis-server/redis-cli missing; run: sudo apt-get install -y redis-server redis-tools"; exit 1; }
	log "installing Debian's redis-server and redis-tools"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
# Debian's packaged service (port 6379) must not run beside the benchmark.
stop_packaged_redis() {
	if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
		log "stopping the packaged redis-server service (systemctl)"
		systemctl stop redis-server || true
	fi
	local pf=/run/redis/redis-server.pid
	if [ -s "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
		log "stopping the packaged redis-server (pid $(cat "$pf"))"
		if command -v service >/dev/null; then service redis-server stop >/dev/null 2>&1 || true; fi
		if [ -s "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then kill "$(cat "$pf")" || true; sleep 1; fi
	fi
}
[ "$(id -u)" = 0 ] && stop_packaged_redis
others=$(pgrep -x redis-server || true)
[ -z "$others" ] || log "warning: other redis-server processes are running (pids: $(echo $others)); they are left alone but share the machine"

VERSION=$(redis-server --version)
case "$VERSION" in *v=7.0.*) ;; *) log "note: expected redis 7.0, found: $VERSION" ;; esac

# ---------------------------------------------------------------- CPUs
NCPU=$(nproc)
if [ "$NCPU" -ge 2 ]; then
	SRV=(taskset -c 0)
	CLI=(taskset -c 1)
else
	log "warning: fewer than 2 CPUs, no pinning"
	SRV=()
	CLI=()
fi

# ---------------------------------------------------------------- temp dir, cleanup
TMP=$(mktemp -d /tmp/redis_rss.XXXXXX)
SPID=
cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill "$SPID" 2>/dev/null || true
		wait "$SPID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- allocator setup
# Fills PRELOAD and XENV (extra environment) for allocator $1; returns 1 if unavailable.
declare -A SKIP
GLIBC_SHIM=
setup_alloc() {
	PRELOAD=
	XENV=()
	case "$1" in
	jemalloc) ;;
	glibc)
		if [ -z "$GLIBC_SHIM" ]; then
			GLIBC_SHIM=$TMP/libglibcshim.so
			cc -O2 -shared -fPIC -o "$GLIBC_SHIM" "$HERE/glibc_shim.c" -ldl || return 1
		fi
		PRELOAD=$GLIBC_SHIM ;;
	tcmalloc) PRELOAD=$LIBDIR/libtcmalloc_minimal.so.4 ;;
	mimalloc) PRELOAD=$LIBDIR/libmimalloc.so.2 ;;
	uslab) PRELOAD=$USLAB ;;
	uslab-nosheaves) PRELOAD=$USLAB; XENV=(USLAB_SHEAVES=0) ;;
	uslab-decay0) PRELOAD=$USLAB; XENV=(USLAB_DECAY_MS=0) ;;
	uslab-slab) PRELOAD=$USLAB; XENV=(USLAB_ALLOCATOR=slab) ;;
	esac
	[ -z "$PRELOAD" ] || [ -e "$PRELOAD" ] || return 1
}
for a in $ALLOCS; do
	if ! setup_alloc "$a"; then
		case "$a" in
		tcmalloc) hint="apt-get install libtcmalloc-minimal4" ;;
		mimalloc) hint="apt-get install libmimalloc2.0" ;;
		glibc) hint="needs cc to build glibc_shim.c" ;;
		*) hint="build uslab (cmake ... -DCMAKE_BUILD_TYPE=Release) or pass --uslab PATH" ;;
		esac
		log "skipping $a: ${PRELOAD:-shim} not available ($hint)"
		SKIP[$a]=1
	fi
done
RUN_ALLOCS=
for a in $ALLOCS; do [ -n "${SKIP[$a]:-}" ] || RUN_ALLOCS+="$a "; done
[ -n "$RUN_ALLOCS" ] || { log "nothing to run"; exit 1; }
env | grep -q '^USLAB_' && log "note: USLAB_* variables set in this environment reach every run: $(env | grep '^USLAB_' | tr '\n' ' ')"

# ---------------------------------------------------------------- the DEL stream
DELFILE=$TMP/del.resp
awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) if (i % 5) { k = "k:" i; printf "*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", length(k), k } }' > "$DELFILE"
NDEL=$(( KEYS - (KEYS + 4) / 5 ))
KEEP=$(( (KEYS + 4) / 5 ))

# ---------------------------------------------------------------- one run
port_free() { ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }
PORT=$PORT0
pick_port() {
	while ! port_free "$PORT"; do PORT=$((PORT + 1)); done
}
rc() { "${CLI[@]}" redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$SPID/status"; }
used_mem() { rc INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
fail() { log "FAILED ($CUR): $*"; [ -z "${SLOG:-}" ] || tail -5 "$SLOG" >&2; return 1; }
# Confirms the server is alive and answers, with the expected key count.
settle() {
	kill -0 "$SPID" 2>/dev/null || fail "redis-server died" || return 1
	[ "$(rc PING)" = PONG ] || fail "no PONG" || return 1
	local n; n=$(rc DBSIZE)
	[ "$n" = "$1" ] || fail "DBSIZE $n, expected $1" || return 1
}

# Runs allocator $1, round $2; appends one TSV line to $RES.
run_one() {
	local a=$1 r=$2
	CUR="$a round $r"
	setup_alloc "$a"
	pick_port
	SLOG=$TMP/redis.$a.$r.log
	local envs=(env -u LD_PRELOAD -u USLAB_SHEAVES -u USLAB_DECAY_MS)
	[ -z "$PRELOAD" ] || envs+=("LD_PRELOAD=$PRELOAD")
	envs+=("${XENV[@]}")
	local t0=$SECONDS
	"${SRV[@]}" "${envs[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save "" \
		--appendonly no --daemonize no --dir "$TMP" --enable-debug-command yes \
		--logfile "$SLOG" &
	SPID=$!
	local i
	for i in $(seq 100); do
		[ "$(rc PING 2>/dev/null)" = PONG ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.1
	done
	settle 0 || return 1
	# the server is our process (taskset and env exec'd into it), with the preload mapped
	[ "$(cat /proc/$SPID/comm)" = redis-server ] || fail "pid $SPID is $(cat /proc/$SPID/comm)" || return 1
	if [ -n "$PRELOAD" ]; then
		grep -qF "$(readlink -f "$PRELOAD")" "/proc/$SPID/maps" || fail "$PRELOAD not mapped" || return 1
	fi
	local s l d m f us ul ud um uf
	s=$(rss_kb); [ $VERBOSE = 0 ] || us=$(used_mem)

	[ "$(rc DEBUG POPULATE "$KEYS" k "$SIZE")" = OK ] || fail "DEBUG POPULATE k" || return 1
	settle "$KEYS" || return 1
	l=$(rss_kb); [ $VERBOSE = 0 ] || ul=$(used_mem)

	local po
	po=$("${CLI[@]}" redis-cli -h 127.0.0.1 -p "$PORT" --pipe < "$DELFILE" 2>&1) || fail "redis-cli --pipe: $po" || return 1
	case "$po" in *"errors: 0, replies: $NDEL"*) ;; *) fail "redis-cli --pipe said: $po" || return 1 ;; esac
	settle "$KEEP" || return 1
	d=$(rss_kb); [ $VERBOSE = 0 ] || ud=$(used_mem)

	[ "$(rc DEBUG POPULATE "$KEYS" k2 "$SIZE")" = OK ] || fail "DEBUG POPULATE k2" || return 1
	settle $((KEEP + KEYS)) || return 1
	m=$(rss_kb); [ $VERBOSE = 0 ] || um=$(used_mem)

	[ "$(rc FLUSHALL SYNC)" = OK ] || fail "FLUSHALL SYNC" || return 1
	settle 0 || return 1
	sleep "$IDLE"
	kill -0 "$SPID" 2>/dev/null || fail "redis-server died while idle" || return 1
	f=$(rss_kb); [ $VERBOSE = 0 ] || uf=$(used_mem)

	rc SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait "$SPID" 2>/dev/null || true
	SPID=
	local secs=$((SECONDS - t0))
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$a" "$r" "$s" "$l" "$d" "$m" "$f" \
		"${us:--}" "${ul:--}" "${ud:--}" "${um:--}" "${uf:--}" "$secs" >> "$RES"
	local mb
	mb=$(awk -v s="$s" -v l="$l" -v d="$d" -v m="$m" -v f="$f" 'BEGIN { printf "%.0f/%.0f/%.0f/%.0f/%.0f", s/1000, l/1000, d/1000, m/1000, f/1000 }')
	if [ $VERBOSE = 1 ]; then
		mb+=$(awk -v s="$us" -v l="$ul" -v d="$ud" -v m="$um" -v f="$uf" 'BEGIN { printf "   used_memory %.0f/%.0f/%.0f/%.0f/%.0f", s/1024000, l/1024000, d/1024000, m/1024000, f/1024000 }')
	fi
	log "$(printf 'round %d %-16s RSS MB %s   (%ds)' "$r" "$a" "$mb" "$secs")"
}

# ---------------------------------------------------------------- main loop
RES=$TMP/results.tsv
: > "$RES"
log "$VERSION"
log "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
log "scenario: $KEYS keys of $SIZE bytes, DEL $NDEL, $KEYS more, FLUSHALL SYNC + ${IDLE}s; $ROUNDS round(s) of: $RUN_ALLOCS"
case " $RUN_ALLOCS " in *" uslab"*) log "uslab: $USLAB" ;; esac
NFAIL=0
for r in $(seq "$ROUNDS"); do
	for a in $RUN_ALLOCS; do
		if ! run_one "$a" "$r"; then
			NFAIL=$((NFAIL + 1))
			if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=; fi
		fi
	done
done
if [ -n "$OUT" ]; then
	{ printf 'alloc\tround\tstart_kB\tloaded_kB\tdeleted_kB\tmore_kB\tidle_kB\tused_start_B\tused_loaded_B\tused_deleted_B\tused_more_B\tused_idle_B\tseconds\n'; cat "$RES"; } > "$OUT"
	log "raw results: $OUT"
fi

# ---------------------------------------------------------------- tables
# medians per allocator and column (field numbers of $RES), in the order run
summary() {
	awk -F'\t' -v order="$RUN_ALLOCS" -v verbose="$VERBOSE" -v keys="$KEYS" -v size="$SIZE" -v idle="$IDLE" -v kl="$( [ "$KEYS" = 1000000 ] && echo 1M || echo "$KEYS" )" '
	function shown(x) { return x == "tcmalloc" ? "gperftools" : x }
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ n[$1]++; for (c = 3; c <= 12; c++) v[$1, c, n[$1]] = $c }
	END {
		na = split(order, names, " ")
		for (i = 1; i <= na; i++) { x = names[i]; if (!(x in n)) continue
			for (c = 3; c <= 12; c++) { if (v[x, c, 1] == "-") { med[x, c] = "-"; continue }
				for (k = 1; k <= n[x]; k++) tmp[k] = v[x, c, k]; med[x, c] = median(tmp, n[x]) } }
		printf "\nRSS in MB (VmRSS kB / 1000), median of rounds; %d keys of %d B, DEL 80%%, %d more keys (prefix k2), FLUSHALL SYNC + %ss idle\n\n", keys, size, keys, idle
		print "| allocator | runs | start | loaded | after DEL 80% | after " kl " more | after FLUSHALL + idle |"
		print "|---|---:|---:|---:|---:|---:|---:|"
		for (i = 1; i <= na; i++) { x = names[i]; if (!(x in n)) { printf "| %s | 0 | FAILED | | | | |\n", shown(x); continue }
			printf "| %s | %d", shown(x), n[x]; for (c = 3; c <= 7; c++) printf " | %.0f", med[x, c] / 1000; print " |" }
		for (i = 1; i <= na; i++) if (names[i] == "tcmalloc")
			print "\ngperftools = Debian libtcmalloc-minimal4, gperftools 2.10 tcmalloc with per-thread caches (not Google'\''s per-CPU tcmalloc)"
		multi = 0; for (x in n) if (n[x] > 1) multi = 1
		if (multi) {
			print "\nSpread of the RSS over the rounds, max - min, MB\n"
			print "| allocator | start | loaded | after DEL 80% | after " kl " more | after FLUSHALL + idle |"
			print "|---|---:|---:|---:|---:|---:|"
			for (i = 1; i <= na; i++) { x = names[i]; if (!(x in n)) continue
				printf "| %s", shown(x)
				for (c = 3; c <= 7; c++) { lo = hi = v[x, c, 1]
					for (k = 2; k <= n[x]; k++) { if (v[x, c, k] < lo) lo = v[x, c, k]; if (v[x, c, k] > hi) hi = v[x, c, k] }
					printf " | %.0f", (hi - lo) / 1000 }
				print " |" }
		}
		if (verbose) {
			print "\nredis INFO used_memory in MB (bytes / 1024000, the unit above), median\n"
			print "| allocator | start | loaded | after DEL 80% | after " kl " more | after FLUSHALL + idle |"
			print "|---|---:|---:|---:|---:|---:|"
			for (i = 1; i <= na; i++) { x = names[i]; if (!(x in n)) continue
				printf "| %s", shown(x); for (c = 8; c <= 12; c++) printf " | %.0f", med[x, c] / 1024000; print " |" }
		}
		je = ("jemalloc" in n) ? med["jemalloc", 6] : 0
		print "\nRatios of the medians (targets: deleted/loaded <= 1, more/jemalloc near 1, idle/start near jemalloc'\''s)\n"
		print "| allocator | after DEL / loaded | after " kl " more / jemalloc'\''s | after idle / start |"
		print "|---|---:|---:|---:|"
		for (i = 1; i <= na; i++) { x = names[i]; if (!(x in n)) continue
			if (x !~ /^uslab/ && x != "jemalloc") continue
			printf "| %s | %.2f | %s | %.2f |\n", x, med[x, 5] / med[x, 4], je ? sprintf("%.2f", med[x, 6] / je) : "n/a (jemalloc not run)", med[x, 7] / med[x, 3] }
	}' "$RES"
}
summary
[ "$NFAIL" = 0 ] || { log "$NFAIL run(s) failed"; exit 1; }
