#!/usr/bin/env bash
# Measures a one-shot run of two builds of w8y against redis-cli ping, in
# alternating rounds on one throwaway redis-server, and prints each build's
# ratio to ping and the commands its run sends (MONITOR): one run gives
# ratios that the machine's load moves less than the times themselves.
#
#   bash scripts/bench-oneshot-pair.sh BEFORE_BINARY AFTER_BINARY
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
rounds=${ROUNDS:-7} runs=${RUNS:-100}
start_redis || { echo "bench-oneshot-pair: could not start redis-server" >&2; exit 1; }
url="redis://127.0.0.1:$redis_port"
rcli() { redis-cli -p "$redis_port" "$@"; }
rcli RPUSH one:list item >/dev/null
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
per_run() {
	local s=${EPOCHREALTIME/./}
	for _ in $(seq "$runs"); do "$@" >/dev/null; done
	echo $(((${EPOCHREALTIME/./} - s) / runs))
}
for bin in "$1" "$2"; do "$bin" -q -u "$url" -k one true; done
b=() a=() p=()
for _ in $(seq "$rounds"); do
	b+=("$(per_run "$1" -q -u "$url" -k one true)")
	a+=("$(per_run "$2" -q -u "$url" -k one true)")
	p+=("$(per_run redis-cli -p "$redis_port" ping)")
done
mb=$(median "${b[@]}") ma=$(median "${a[@]}") mp=$(median "${p[@]}")
for name in before after; do
	bin=$1 m=$mb
	[ "$name" = after ] && bin=$2 m=$ma
	timeout 2 redis-cli -p "$redis_port" MONITOR >"$tmp/monitor" &
	bg_pids=($!)
	sleep 0.3
	"$bin" -q -u "$url" -k one true
	wait "${bg_pids[0]}" || true
	bg_pids=()
	conns=$(grep -v ' lua\] ' "$tmp/monitor" | grep '^[0-9]' | awk '{print $3}' | sort -u | wc -l)
	cmds=$(grep -v ' lua\] ' "$tmp/monitor" | grep '^[0-9]' | awk '{print $4}' | tr -d '"' | tr '\n' ' ')
	printf '%-6s %6d us a run, %.2f x redis-cli ping (%d us); %d connection(s): %s\n' "$name" "$m" \
		"$(awk -v a="$m" -v b="$mp" 'BEGIN {print a / b}')" "$mp" "$conns" "$cmds"
done
echo "medians of $rounds rounds of $runs runs each, alternating; load average $(cut -d' ' -f1-3 /proc/loadavg)"
