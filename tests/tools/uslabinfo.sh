#!/usr/bin/env bash
# uslabinfo.sh USLABINFO LIVE_PROG - uslabinfo against a live process
# (live_prog, run with USLAB_STATS): the table, a report, aliases, totals,
# activity, shrink and validate requests, the owner summaries of a cache with
# U in a report, a saved snapshot read back; the
# error cases (no such process, a process without a live view, a process that
# has exited, a stale file removed by the next process, a truncated file, a
# file that is not one, another user's process when run as root); and --top
# in a terminal (tmux), quit with q. Every check prints ok or FAIL.
set -uo pipefail
tool=$(realpath "$1")
prog=$(realpath "$2")
tmp=$(mktemp -d)
fail=0
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	tmux kill-session -t "uslabinfo$$" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
# expect NAME STATUS TEXT cmd...: the exit status and a line of the output
expect() {
	local name=$1 want_rc=$2 text=$3
	shift 3
	local out rc
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want_rc" ] && grep -qE -- "$text" <<<"$out"; then
		ok "$name"
	else
		bad "$name (status $rc, wanted $want_rc; no /$text/ in:)"
		sed 's/^/    | /' <<<"$out" | head -20
	fi
}

start_prog() {   # start_prog OUTFILE: a live_prog with USLAB_STATS, its pid in $prog_pid
	USLAB_NOMERGE=0 USLAB_STATS="$tmp/exit.$RANDOM" "$prog" >"$1" 2>"$1.err" &
	prog_pid=$!
	pids+=("$prog_pid")
	for _ in $(seq 100); do
		grep -q ready "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	bad "live_prog did not get ready"; cat "$1.err"
	return 1
}

start_prog "$tmp/p1.out" || exit 1
pid=$prog_pid
# The view is made at start-up and rewritten at the allocator's ticks: wait
# for one that has the 300 objects live_prog keeps.
for _ in $(seq 100); do
	"$tool" -p "$pid" 2>/dev/null | grep -qE '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) ' && break
	sleep 0.05
done
view=/dev/shm/uslab.$pid
[ -f "$view" ] && [ "$(stat -c %a "$view")" = 600 ] && ok "the view is $view, mode 0600" || bad "no view at $view with mode 0600"

expect "table" 0 '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) +200 ' "$tool" -p "$pid"
expect "table header" 0 '^Name +Objects Objsize +Space Slabs/Part/Cpu  O/S O %Fr %Ef Flg$' "$tool" -p "$pid"
expect "merged cache flagged" 0 '^live-a .* \*$' "$tool" -p "$pid" 
expect "report of one cache" 0 'Slabcache: live-a +Aliases:  1 Order' "$tool" -p "$pid" '^live-a$'
expect "report counters" 0 '^Cpu sheaf +[0-9]+ +[0-9]+' "$tool" -p "$pid" -r '^live-a$'
expect "aliases" 0 '^live-a +<- live-b$' "$tool" -p "$pid" -a
expect "totals" 0 '^Slabcache Totals$' "$tool" -p "$pid" -T
expect "numa view, one node" 0 '^live-a: No NUMA information available\.$' "$tool" -p "$pid" -n '^live-a$'
expect "activity columns" 0 '^Name +Objects +Alloc +Free +%Fast Fallb O CmpX +UL$' "$tool" -p "$pid" -D
expect "debug flags" 0 '^live-dbg .* PZ$' "$tool" -p "$pid" -z
# Reads while the process rewrites its view every 200 ms: each is a whole
# snapshot (objects within the slabs' room, partial slabs within the slabs).
torn=0
for _ in $(seq 100); do
	"$tool" -p "$pid" -B -z >"$tmp/read" 2>&1 || { torn=1; cat "$tmp/read"; break; }
	awk 'NR > 1 { split($5, d, "/"); slabs = d[1] + d[3]; if ($2 > slabs * $6 || d[2] > slabs) bad = 1 }
	     END { exit bad }' "$tmp/read" || { torn=1; cat "$tmp/read"; break; }
done
[ "$torn" = 0 ] && ok "100 reads during updates, each consistent" || bad "a read was refused or inconsistent"
expect "shrink request" 0 'process [0-9]+: 1 cache shrunk' "$tool" -p "$pid" -s '^live-a$'
expect "validate request" 0 'validation reported 0 problems' "$tool" -p "$pid" -v '^live-dbg$'
# The owner summaries of a cache with U, as the kernel tool's report shows
# them: its 40 objects at their one call site, and the freeing section.
# (A build without tail calls, ThreadSanitizer's, names a function of uslab's.)
site='live_owner_site'
[ -n "${TEST_NO_TAIL_CALLS:-}" ] && site='[a-z_]+'
expect "owner summary: allocation" 0 "^ +40 $site\\+0x[0-9a-f]+.* age=[0-9/]+ pid=[0-9]+" \
	"$tool" -p "$pid" -r '^live-owned$'
expect "owner summary: headings" 0 '^live-owned: Kernel object freeing$' "$tool" -p "$pid" -r '^live-owned$'
"$tool" -p "$pid" -r '^live-a$' >"$tmp/no-owners" 2>&1
grep -q 'Kernel object' "$tmp/no-owners" && bad "a cache without U shows owner summaries" ||
	ok "a cache without U shows none"
[ ! -e "/dev/shm/uslab.$pid.calls" ] && ok "the summaries' file is removed" || bad "/dev/shm/uslab.$pid.calls left"
expect "owner summaries of every cache" 0 '^live-owned: Kernel object allocation$' "$tool" -p "$pid" -r
expect "no such cache" 1 'no cache matches' "$tool" -p "$pid" '^nothing-like-this$'
expect "save" 0 'saved [0-9]+ caches of process' "$tool" -p "$pid" --save "$tmp/snap"
expect "saved file read back" 0 '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) +200 ' "$tool" -f "$tmp/snap"
head -c 1000 "$tmp/snap" >"$tmp/trunc"
expect "truncated file" 1 'truncated' "$tool" -f "$tmp/trunc"
head -c 3000 "$tmp/snap" >"$tmp/trunc2"
expect "truncated rows" 1 'truncated' "$tool" -f "$tmp/trunc2"
head -c 5000 /dev/urandom >"$tmp/noise"
expect "not a view" 1 'not a uslab live-view file' "$tool" -f "$tmp/noise"
: >"$tmp/empty"
expect "empty file" 1 'is empty' "$tool" -f "$tmp/empty"
# A process on a fake topology of two nodes: the kernel tool's NUMA views.
USLAB_NODES=2 start_prog "$tmp/p-nodes.out" && {
	pid2=$prog_pid
	for _ in $(seq 100); do
		"$tool" -p "$pid2" 2>/dev/null | grep -qE '^live-a ' && break
		sleep 0.05
	done
	expect "numa header" 0 '^Slab +: +0 +1$' "$tool" -p "$pid2" -n
	expect "numa row" 0 '^live-a +[0-9.]+[KMG]? +[0-9.]+[KMG]?$' "$tool" -p "$pid2" -n
	expect "numa in a report" 0 '^Partial slabs +[0-9.]+[KMG]? +[0-9.]+[KMG]?$' "$tool" -p "$pid2" -r '^live-a$'
}
expect "no process" 1 'no process 2147483646' "$tool" -p 2147483646
expect "process without a view" 1 'publishes no live view' "$tool" -p $$
expect "bad pid" 1 '-p wants a process id' "$tool" -p abc
expect "no source" 1 'say which process' "$tool"
expect "bad pattern" 1 'bad cache pattern' "$tool" -p "$pid" '('
expect "request on a file" 1 'need a running process' "$tool" -f "$tmp/snap" -s

# A view left by a process that died without exiting: stale to uslabinfo,
# removed by the next process that makes one.
sleep 0 & dead=$!
wait $dead
cp "$view" "/dev/shm/uslab.$dead"
expect "stale view" 1 "process $dead has exited" "$tool" -p "$dead"
start_prog "$tmp/p2.out" || exit 1
[ ! -e "/dev/shm/uslab.$dead" ] && ok "the next process removed the stale view" || { bad "stale view left"; rm -f "/dev/shm/uslab.$dead"; }
kill "$prog_pid"; wait "$prog_pid" 2>/dev/null

# Another user's process (only root can run the tool as someone else).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	expect "another user's view" 1 'permission denied' setpriv --reuid=65534 --regid=65534 --clear-groups "$tool" -p "$pid"
else
	echo "skip another user's view (needs root)"
fi

# --top in a terminal: the screen, then q.
if command -v tmux >/dev/null; then
	tmux new-session -d -s "uslabinfo$$" -x 130 -y 30 "$tool -p $pid --top --delay 0.2"
	sleep 1.5
	screen=$(tmux capture-pane -p -t "uslabinfo$$")
	if grep -q "uslabinfo --top: process $pid" <<<"$screen" && grep -qE '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) ' <<<"$screen" &&
	   grep -q '^Name  ' <<<"$screen"; then
		ok "--top screen"
	else
		bad "--top screen:"; sed 's/^/    | /' <<<"$screen" | head -20
	fi
	tmux send-keys -t "uslabinfo$$" q
	for _ in $(seq 30); do tmux has-session -t "uslabinfo$$" 2>/dev/null || break; sleep 0.1; done
	tmux has-session -t "uslabinfo$$" 2>/dev/null && bad "--top did not quit on q" || ok "--top quits on q"
else
	echo "skip --top (no tmux)"
fi

# Exit: the view is removed, and USLAB_STATS's slabinfo written.
kill "$pid"; wait "$pid" 2>/dev/null
[ ! -e "$view" ] && ok "the view is removed at exit" || bad "$view left after exit"
expect "a view gone with its process" 1 "no process $pid|publishes no live view" "$tool" -p "$pid"

# A process on SLAB (USLAB_ALLOCATOR=slab): its caches are reported as SLAB's,
# with their arrays' limit.
export USLAB_ALLOCATOR=slab
if start_prog "$tmp/p3.out"; then
	spid=$prog_pid
	for _ in $(seq 100); do
		"$tool" -p "$spid" 2>/dev/null | grep -qE '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) ' && break
		sleep 0.05
	done
	expect "SLAB: table" 0 '^live-a +([3-9][0-9]{2}|[1-9][0-9]{3,}) +200 ' "$tool" -p "$spid"
	expect "SLAB: report" 0 '^\*\* SLAB: per-CPU arrays of 120 objects' "$tool" -p "$spid" '^live-a$'
	kill "$spid"; wait "$spid" 2>/dev/null
fi
unset USLAB_ALLOCATOR
exit $fail
