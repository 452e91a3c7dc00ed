#!/usr/bin/env bash
# live_idle.sh USLABINFO LIVE_IDLE MODE [LIBUSLAB] - the live view of a process
# that allocates and then makes no allocator call (live_idle, run with
# USLAB_STATS): within 1.5 s of its last allocation `uslabinfo -p` must show
# what it holds, a second later still (and freshly published), and after it
# frees half and idles again, that, within 1.5 s. MODE: cache (a kmem_cache of
# 1000 objects), malloc (1000 mallocs under LD_PRELOAD=LIBUSLAB), fork (a
# forked child, whose vfork child allocated first, gets its own thread and
# view). What a process holds is read from its cache's report (-r): the
# objects its sheaves handed out and took back ("Cpu sheaf", Alloc - Free),
# and the table's Objects column must not be below it. Every check prints ok
# or FAIL.
set -uo pipefail
tool=$(realpath "$1")
prog=$(realpath "$2")
mode=$3
lib=${4:-}
tmp=$(mktemp -d)
fail=0
prog_pid=
cleanup() {
	exec 3>&- 2>/dev/null   # end of input: it exits (and a forked child with it)
	for _ in $(seq 40); do
		[ -n "$prog_pid" ] && kill -0 "$prog_pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$prog_pid" ] && kill "$prog_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
now() { date +%s%N; }

# in_use PID CACHE: Alloc - Free of the cache's "Cpu sheaf" counters, or -1
in_use() {
	"$tool" -p "$1" -r "^$2\$" 2>/dev/null | awk '/^Cpu sheaf / { n = $3 - $4 } END { print (n == "" ? -1 : n) }'
}
# objects PID CACHE: the table's Objects column, or -1
objects() {
	"$tool" -p "$1" -l 2>/dev/null | awk -v c="$2" '$1 == c { n = $2 } END { print (n == "" ? -1 : n) }'
}
# expect_held WHAT PID CACHE N: poll for 1.5 s from now (the process's last
# allocation was just before) until the view shows N held
expect_held() {
	local what=$1 pid=$2 cache=$3 want=$4 got=-1 start
	start=$(now)
	while :; do
		got=$(in_use "$pid" "$cache")
		[ "$got" = "$want" ] && break
		[ $(( $(now) - start )) -gt 1500000000 ] && break
		sleep 0.05
	done
	local ms=$(( ($(now) - start) / 1000000 ))
	if [ "$got" = "$want" ]; then
		ok "$what: $cache shows $want held (after ${ms} ms)"
	else
		bad "$what: $cache shows $got held, not $want, after ${ms} ms:"
		"$tool" -p "$pid" -r "^$cache\$" 2>&1 | sed 's/^/    | /' | head -30
	fi
	local o
	o=$(objects "$pid" "$cache")
	[ "$o" -ge "$want" ] && ok "$what: the table's Objects ($o) >= $want" || bad "$what: the table says $o objects, fewer than $want"
}
# fresh WHAT PID: the view was published within the last second
fresh() {
	local age
	age=$(sleep 3 | timeout -s INT 1 "$tool" -p "$2" --top --delay 5 2>&1 | grep -o 'updated [0-9.]* s ago' | head -1 |
	      awk '{ print $2 }')
	if [ -n "$age" ] && awk -v a="$age" 'BEGIN { exit !(a <= 1.0) }'; then
		ok "$1: the view was published $age s ago"
	else
		bad "$1: the view's last publication: '${age:-none}' s ago"
	fi
}
has_thread() {
	grep -qx uslab-decay /proc/"$2"/task/*/comm 2>/dev/null && ok "$1: a uslab-decay thread" || bad "$1: no uslab-decay thread"
}
# wait_line FILE PATTERN: the line of FILE that matches, within 10 s
wait_line() {
	for _ in $(seq 200); do
		grep -m1 -E "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

mkfifo "$tmp/in"
case $mode in
cache|fork)
	cache=live-idle
	if [ "$mode" = fork ]; then args=(fork 1000 200); else args=(cache 1000); fi
	USLAB_STATS="$tmp/exit.slabinfo" "$prog" "${args[@]}" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" & ;;
malloc)
	cache=malloc-736
	USLAB_STATS="$tmp/exit.slabinfo" LD_PRELOAD="$lib" "$prog" malloc 1000 <"$tmp/in" >"$tmp/out" 2>"$tmp/err" & ;;
*)
	echo "live_idle.sh: unknown mode $mode"; exit 2 ;;
esac
prog_pid=$!
exec 3>"$tmp/in"   # its input, held open: it blocks in read(2)

pid=$prog_pid
wait_line "$tmp/out" "^ready $pid " >/dev/null || { bad "$mode: the program did not get ready:"; cat "$tmp/err"; exit 1; }
if [ "$mode" = fork ]; then
	child=$(wait_line "$tmp/out" '^child ' | awk '{ print $2 }')
	[ -n "$child" ] && wait_line "$tmp/out" "^ready $child " >/dev/null ||
		{ bad "fork: the child did not get ready:"; cat "$tmp/err"; exit 1; }
	expect_held "forked child" "$child" "$cache" 1200
	has_thread "forked child" "$child"
	sleep 1
	expect_held "forked child, a second later" "$child" "$cache" 1200
	fresh "forked child, a second later" "$child"
	expect_held "parent" "$pid" "$cache" 1000
	[ ! -s "$tmp/err" ] || { bad "fork: messages on stderr:"; sed 's/^/    | /' "$tmp/err"; }
	exit $fail
fi
expect_held "$mode, idle" "$pid" "$cache" 1000
has_thread "$mode" "$pid"
sleep 1
expect_held "$mode, a second later" "$pid" "$cache" 1000
fresh "$mode, a second later" "$pid"
echo "free 500" >&3
wait_line "$tmp/out" "^ready $pid 500\$" >/dev/null || { bad "$mode: no answer to free 500"; exit 1; }
expect_held "$mode, 500 freed, idle" "$pid" "$cache" 500
exec 3>&-          # end of input: it exits, and its view goes
wait "$prog_pid" 2>/dev/null
prog_pid=
[ ! -e "/dev/shm/uslab.$pid" ] && ok "$mode: the view is removed at exit" || bad "$mode: /dev/shm/uslab.$pid left after exit"
[ ! -s "$tmp/err" ] || { bad "$mode: messages on stderr:"; sed 's/^/    | /' "$tmp/err"; }
exit $fail
