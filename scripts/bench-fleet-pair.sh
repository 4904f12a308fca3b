#!/usr/bin/env bash
# Measures 300 idle --continuous workers over 10,000 items that all cool
# down for an hour, for two builds of w8y in turn (twice each, alternately),
# on one throwaway redis-server: Redis' CPU in ms/s over a 20 s window
# (INFO cpu), less the server's own over the 10 s before the fleet starts,
# and the reads Redis made a second (INFO stats total_reads_processed: about
# one a wake of an idle server). Two builds in one run give a ratio that the
# machine's load moves less than it moves either figure.
#
#   bash scripts/bench-fleet-pair.sh BEFORE_BINARY AFTER_BINARY
#
# FLEET_WORKERS sets the fleet's size (300).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
before=$1 after=$2
n=${FLEET_WORKERS:-300}
start_redis || { echo "bench-fleet-pair: could not start redis-server" >&2; exit 1; }
# shellcheck source=scripts/lib/pair.sh
source "$root/scripts/lib/pair.sh"
reads() { rcli INFO stats | tr -d '\r' | awk -F: '$1 == "total_reads_processed" {print $2}'; }
for round in 1 2; do
	for name in before after; do
		bin=$before
		[ "$name" = after ] && bin=$after
		load_cooling f:
		a=$(cpu_ms)
		sleep 10 # the server alone: a window, not a synchronisation
		alone=$(awk -v a="$a" -v b="$(cpu_ms)" 'BEGIN {printf "%.2f", (b - a) / 10}')
		for _ in $(seq "$n"); do
			"$bin" -q -c -u "redis://127.0.0.1:$redis_port" -k f --cooldown 1h true &
			bg_pids+=($!)
		done
		# The fleet's first passes are over (see internal/take's look.lua),
		# then 30 s for each worker to beat and space its looks by the
		# fleet's size, as its registry counts it.
		until [ "$(rcli GET f:untried)" = 0 ] && [ "$(rcli EXISTS f:sweep)" = 1 ]; do sleep 0.5; done
		sleep 30
		a=$(cpu_ms) r=$(reads)
		sleep 20 # the measurement's window
		b=$(cpu_ms) s=$(reads)
		kill "${bg_pids[@]}"
		wait "${bg_pids[@]}" 2>/dev/null || true
		bg_pids=()
		printf 'round %d %-6s %d idle workers: %s ms/s (Redis in all %s, alone before %s), %d reads a second; load %s\n' \
			"$round" "$name" "$n" "$(awk -v a="$a" -v b="$b" -v s="$alone" 'BEGIN {printf "%.2f", (b - a) / 20 - s}')" \
			"$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b - a) / 20}')" "$alone" $(((s - r) / 20)) "$(cut -d' ' -f1 /proc/loadavg)"
	done
done
