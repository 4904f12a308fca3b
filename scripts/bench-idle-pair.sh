#!/usr/bin/env bash
# Measures a lone idle --continuous worker over 10,000 items that all cool
# down for an hour, for two builds of w8y one after the other (twice each,
# alternately), on one throwaway redis-server: its Redis CPU in ms/s over a
# 90 s window that takes in the fleet's sweeps, and the same server's alone
# over the 30 s after. Two builds in one run give a ratio that the machine's
# load moves less than it moves either figure.
#
#   bash scripts/bench-idle-pair.sh BEFORE_BINARY AFTER_BINARY
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
before=$1 after=$2
window=${IDLE_WINDOW:-90}
start_redis || { echo "bench-idle-pair: could not start redis-server" >&2; exit 1; }
# shellcheck source=scripts/lib/pair.sh
source "$root/scripts/lib/pair.sh"
for round in 1 2; do
	for name in before after; do
		bin=$before
		[ "$name" = after ] && bin=$after
		load_cooling b:
		"$bin" -q -c -u "redis://127.0.0.1:$redis_port" -k b true &
		bg_pids=($!)
		# The first pass over the list is over (see internal/take's look.lua).
		until [ "$(rcli GET b:untried)" = 0 ] && [ "$(rcli EXISTS b:sweep)" = 1 ]; do sleep 0.2; done
		a=$(cpu_ms)
		sleep "$window" # the measurement's window, not a synchronisation
		b=$(cpu_ms)
		kill "${bg_pids[0]}"
		wait "${bg_pids[0]}" || true
		bg_pids=()
		c=$(cpu_ms)
		sleep 30
		d=$(cpu_ms)
		printf 'round %d %-6s idle worker: %s ms/s (the server alone after: %s ms/s; load %s)\n' "$round" "$name" \
			"$(awk -v a="$a" -v b="$b" -v w="$window" 'BEGIN {printf "%.2f", (b - a) / w}')" \
			"$(awk -v a="$c" -v b="$d" 'BEGIN {printf "%.2f", (b - a) / 30}')" "$(cut -d' ' -f1 /proc/loadavg)"
	done
done
