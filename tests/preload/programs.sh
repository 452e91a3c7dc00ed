#!/usr/bin/env bash
# programs.sh LIBUSLAB MT_PROG - real programs with and without
# LD_PRELOAD=LIBUSLAB: their output must be identical, their exit status 0, and
# uslab must report nothing. Programs missing on the machine are skipped (and
# said so); at least python3, sort, perl and the threaded program must run.
set -uo pipefail
lib=$(realpath "$1")
mt=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail=0 ran=0

# run NAME CMD...: once plainly, once preloaded; compare (STATUS_ONLY=1: the
# exit status only).
run() {
	local name=$1; shift
	if ! "$@" >"$work/$name.plain" 2>"$work/$name.plain.err"; then
		echo "SKIP $name: fails without uslab too ($(head -c 200 "$work/$name.plain.err"))"
		return
	fi
	if ! LD_PRELOAD="$lib" "$@" >"$work/$name.uslab" 2>"$work/$name.uslab.err"; then
		echo "FAIL $name: exit status under uslab; stderr:"; head -20 "$work/$name.uslab.err"
		fail=1; return
	fi
	if [ -z "${STATUS_ONLY:-}" ] && ! cmp -s "$work/$name.plain" "$work/$name.uslab"; then
		echo "FAIL $name: output differs under uslab"; diff "$work/$name.plain" "$work/$name.uslab" | head -10
		fail=1; return
	fi
	if grep -q "^uslab:" "$work/$name.uslab.err"; then
		echo "FAIL $name: uslab reported:"; grep "^uslab:" "$work/$name.uslab.err" | head -5
		fail=1; return
	fi
	ran=$((ran + 1))
	echo "ok   $name ($(wc -c <"$work/$name.plain") bytes of output)"
}

# The preloaded library must really be the malloc: malloc_stats prints its line.
if ! LD_PRELOAD="$lib" python3 -c 'import ctypes; ctypes.CDLL(None).malloc_stats()' 2>&1 | grep -q "^uslab malloc_stats"; then
	echo "FAIL: LD_PRELOAD=$lib does not replace malloc"; exit 1
fi

run python3 python3 "$here/workload.py"
if python3 -c 'import test.support' 2>/dev/null; then
	# Its output has timings and a random seed: the exit status is compared.
	STATUS_ONLY=1 run python3-tests python3 -m test -q test_dict test_list test_set test_string test_json test_re
else
	echo "SKIP python3-tests: no test suite installed"
fi

seq 1 400000 | awk '{ print ($1 * 7919) % 1000003, "line", $1 }' >lines.txt
run sort sort -n lines.txt
run sort-threads sort --parallel=4 -S 20M -k3,3 lines.txt

run perl perl -e 'my %h; for my $i (1..200000) { $h{"k$i"} = "v" x ($i % 50) } my $n = 0;
  for (keys %h) { $n += length($h{$_}) if /7/ } delete $h{"k$_"} for 1..100000;
  my @s = sort { $a cmp $b } keys %h; print scalar(@s), " $n $s[0] $s[-1]\n"'

if command -v sqlite3 >/dev/null; then
	run sqlite3 sqlite3 :memory: "create table t(a integer primary key, b text, c int);
	  with recursive n(x) as (select 1 union all select x + 1 from n where x < 300000)
	  insert into t select x, hex(randomblob(16)) || x, x % 97 from n;
	  create index ic on t(c); select c, count(*) from t where c < 5 group by c;
	  select count(distinct substr(b, 1, 2)) from t; delete from t where c = 3; select count(*) from t;"
else
	echo "SKIP sqlite3: not installed"
fi

if command -v git >/dev/null; then
	gitrun() {
		rm -rf repo && mkdir repo && cd repo || return 1
		export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@x \
		       GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z' HOME="$work"
		git init -q -b main . && for d in $(seq 1 20); do mkdir -p "d$d"; for f in $(seq 1 25); do
			seq "$d" "$f" 3000 >"d$d/f$f.txt"; done; done
		git add -A && git commit -q -m tree && git gc -q && git log --stat --format='%H %s' | tail -3 &&
		git count-objects -v | grep -E '^(count|in-pack)' && cd ..
	}
	export -f gitrun; export work
	run git bash -c gitrun
else
	echo "SKIP git: not installed"
fi

run threads "$mt"

echo "programs run under uslab: $ran"
[ "$fail" = 0 ] && [ "$ran" -ge 4 ]
