#!/usr/bin/env bash
# redis_load.sh - uslab-mbench's redis workload: Debian's redis-server under the
# allocator uslab-mbench preloaded (the LD_PRELOAD this script starts with),
# driven by redis-benchmark over loopback; wall time is the whole run, peak RSS
# the server's (the largest process of the run).
#
#   bash bench/redis/redis_load.sh GLIBC_SHIM [REQUESTS]
#
# The server runs on CPU 0, redis-benchmark (no LD_PRELOAD) on CPU 1. Load:
# 13 of redis-benchmark's commands (strings, counters, lists, sets, hashes,
# sorted sets, MSET), REQUESTS each (default 200000), 50 clients, 16
# commands pipelined, keys drawn from 1M, values of 200 bytes: the keyspace
# fills, lists grow and shrink. Then SHUTDOWN NOSAVE.
# With no LD_PRELOAD (uslab-mbench's glibc row) the server gets GLIBC_SHIM:
# Debian's redis-server links libjemalloc.so.2, and without the shim its
# malloc would be jemalloc's (bench/redis/glibc_shim.c says how it works).
set -euo pipefail
shim=${1:?usage: redis_load.sh GLIBC_SHIM [REQUESTS]}
requests=${2:-200000}
pre=${LD_PRELOAD:-$shim}
unset LD_PRELOAD
[ -r "$pre" ] || { echo "redis_load.sh: cannot read $pre" >&2; exit 1; }
dir=$(mktemp -d /tmp/uslab-redis-load-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
port=17379
while redis-cli -p $port ping >/dev/null 2>&1 || (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do
	port=$((port + 1))
	[ $port -lt 17479 ] || { echo "redis_load.sh: no free port in 17379..17478" >&2; exit 1; }
done
LD_PRELOAD=$pre taskset -c 0 redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no \
	--daemonize no --dir "$dir" --logfile "$dir/log" &
pid=$!
for _ in $(seq 1 500); do
	redis-cli -p $port ping >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { echo "redis_load.sh: redis-server exited" >&2; cat "$dir/log" >&2; exit 1; }
	sleep 0.01
done
taskset -c 1 redis-benchmark -p $port -q -n "$requests" -c 50 -P 16 -r 1000000 -d 200 \
	-t set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,mset >"$dir/out"
# each test must have run: a line per command with its rate
[ "$(grep -c 'requests per second' "$dir/out")" -ge 13 ] || { cat "$dir/out" >&2; exit 1; }
redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
wait $pid || true
pid=
