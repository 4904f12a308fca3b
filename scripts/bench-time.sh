#!/usr/bin/env bash
# Measures what reading Redis' clock costs a script (see "One clock: Redis'"
# in docs/how-it-works.md): the Redis CPU of a call of an empty script, of
# one that reads TIME as w8y's scripts do (after redis.replicate_commands()),
# and of a plain TIME, each over N calls from redis-benchmark, on one
# throwaway redis-server, in turn, three rounds. The difference between the
# first two is what TIME adds to each take, look, finish and control call.
#
#   bash scripts/bench-time.sh [N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
n=${1:-200000}
start_redis || { echo "bench-time: could not start redis-server" >&2; exit 1; }
rcli() { redis-cli -p "$redis_port" "$@"; }
cpu_us() { rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.0f", s * 1000000}'; }
# per_call runs the command in $@ n times and prints Redis' CPU a call in µs.
per_call() {
	local a b
	a=$(cpu_us)
	redis-benchmark -p "$redis_port" -n "$n" -c 1 -q "$@" >/dev/null
	b=$(cpu_us)
	awk -v d=$((b - a)) -v n="$n" 'BEGIN {printf "%.2f", d / n}'
}
clock='if redis.replicate_commands then redis.replicate_commands() end local t = redis.call("TIME") return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)'
echo "round  empty-script-µs  script-with-TIME-µs  plain-TIME-µs"
for round in 1 2 3; do
	empty=$(per_call EVAL "return 1" 0)
	timed=$(per_call EVAL "$clock" 0)
	plain=$(per_call TIME)
	echo "$round  $empty  $timed  $plain"
done
