#!/usr/bin/env bash
# Measures what taking an item costs Redis when the list is long (issue 23):
# a one-shot run that finds nothing over 100,000 and 1,000,000 cooling
# items, a continuous worker's start, a fleet of workers started at once, and
# busy workers per item over a list of which 1% is eligible: one that the
# fleet has run (the target's figure) and one that it never has (its first
# pass, printed apart). Redis CPU is
# read from INFO cpu (used_cpu_sys + used_cpu_user) as the delta over what
# is measured. Each figure is printed against its target, PASS or MISS, with
# the command that reproduces it; timing on a shared machine is noisy, so a
# MISS does not fail the script, which exits non-zero only when something is
# broken. It starts its own redis-server on a free loopback port and never
# touches any other Redis.
#
# Run it with `make bench`, or alone. W8Y=path measures another build of
# w8y (a lean build of main, say, for the figures before); TAKE_SIZES="100000"
# leaves out the million; TAKE_FLEET=300 is how many workers the rollout
# figure starts (0 leaves it out: it loads a 2-core machine for 40 s);
# TAKE_BUSY=0 leaves out the busy figure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

sizes=${TAKE_SIZES:-100000 1000000}
fleet=${TAKE_FLEET:-300}
fleet_window=40
busy_workers=8
busy_items=1000000
busy_runs=4000

bench_name=bench-take
# shellcheck source=scripts/lib/bench.sh
source "$root/scripts/lib/bench.sh"

verdict() {
	local ok
	ok=$(awk -v v="$2" -v t="$4" 'BEGIN {print (v <= t) ? "PASS" : "MISS"}')
	printf '%-58s %10s   (<= %s)  %s   %s\n' "$1" "$2" "$4" "$ok" "$3"
}
# load fills <prefix>list with n items i0..i(n-1) and gives a cooldown key,
# set by hand for an hour, to each, or (every=N) to all but every Nth.
load() {
	local prefix=$1 n=$2 every=${3:-0}
	awk -v p="$prefix" -v n="$n" -v e="$every" 'BEGIN {
		for (i = 0; i < n; i++) {
			item = "i" i
			printf "*3\r\n$5\r\nRPUSH\r\n$%d\r\n%slist\r\n$%d\r\n%s\r\n", length(p) + 4, p, length(item), item
			if (e > 0 && i % e == 0) continue
			key = p "cooldown:" item
			printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nother\r\n$2\r\nPX\r\n$7\r\n3600000\r\n", length(key), key
		}
	}' | rcli --pipe >/dev/null || broken "loading $n items"
}
looked_since() { [ "$(calls zrangebyscore)" -gt "$1" ]; }
# A broken run's workers are stopped as a finished one's are, before
# end_redis (redis.sh's EXIT trap, which this one replaces) stops the server.
trap 'stop_bg; end_redis' EXIT

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), redis-server $(redis-server --version | awk '{print $3}' | tr -d 'v=')"
echo "w8y: $("$w8y" --version) ($w8y), redis-server on port $port"
echo "reproduce: bash scripts/bench-take.sh"
echo

for n in $sizes; do
	rcli FLUSHALL >/dev/null
	load "t:" "$n"
	# The first run over a list that w8y has never run tries it all, once
	# for the fleet: its items as appended, then a sweep.
	start=$(cpu_ms)
	"$w8y" -q -u "$url" -k t: true || broken "the first one-shot run"
	first=$(since "$start")
	echo "first one-shot run over $n cooling items, never run before: ${first} ms of Redis CPU (once for the fleet)"
	start=$(cpu_ms)
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		"$w8y" -q -u "$url" -k t: true || broken "a one-shot run"
	done
	verdict "one-shot run that finds nothing, $n cooling: ms" "$(awk -v c="$(since "$start")" 'BEGIN {printf "%.2f", c / 10}')" \
		"10 runs of: w8y -q -k t: true (after the first)" 5
	if [ "$n" = 100000 ]; then
		# A continuous worker's start: from its start to its first look.
		before=$(calls zrangebyscore)
		start=$(cpu_ms)
		"$w8y" -q -c -u "$url" -k t: true &
		bg_pids=($!)
		wait_for looked_since "$before"
		verdict "a continuous worker's start, $n cooling: ms" "$(since "$start")" "w8y -q -c -k t: true, until its first look" 5
		stop_bg
		if [ "$fleet" -gt 0 ]; then
			start=$(cpu_ms)
			for _ in $(seq "$fleet"); do
				"$w8y" -q -c -u "$url" -k t: true &
				bg_pids+=($!)
			done
			# The window is the measurement, not a synchronisation.
			sleep "$fleet_window"
			used=$(since "$start")
			stop_bg
			verdict "$fleet workers started at once, $n cooling: Redis CPU s over ${fleet_window}s" \
				"$(awk -v c="$used" 'BEGIN {printf "%.2f", c / 1000}')" "$fleet x w8y -q -c -k t: true, started together" 2
		fi
	fi
done

# Busy: 8 workers over a million items, 1% eligible; each worker runs
# --max-items items, 4,000 in all.
[ "${TAKE_BUSY:-1}" = 1 ] || exit 0
per=$((busy_runs / busy_workers))
# busy runs the busy workers over prefix $1 and prints the Redis CPU per item.
busy() {
	local start used ran
	start=$(cpu_ms)
	for _ in $(seq "$busy_workers"); do
		"$w8y" -q -c -u "$url" -k "$1" --cooldown 1h --max-items "$per" true &
		bg_pids+=($!)
	done
	for pid in "${bg_pids[@]}"; do
		wait "$pid" || broken "a busy worker failed"
	done
	bg_pids=()
	used=$(since "$start")
	# Every take increments the fencing token once.
	ran=$(rcli GET "$1fence")
	[ "$ran" = "$busy_runs" ] || broken "the busy workers took $ran items, want $busy_runs"
	awk -v c="$used" -v n="$busy_runs" 'BEGIN {printf "%.3f", c / n}'
}

# On a list that the fleet has run, as w8y leaves it: the items that ran
# longest ago at the head (each run rotates its item to the tail), every
# cooling item in the due index at its cooldown's expiry (as a finish
# writes it), and the fleet's marks saying that every item has been tried.
# The first 1% of the list are due: their cooldowns expired. A take finds
# them in the due index, and reads no cooling item.
rcli FLUSHALL >/dev/null
load "r:" "$busy_items" 0
awk -v n="$busy_items" -v e="$((busy_items / 100))" -v later="$(($(date +%s%3N) + 3600000))" 'BEGIN {
	for (i = 0; i < n; i++) {
		item = "i" i
		if (i < e) {
			printf "*2\r\n$3\r\nDEL\r\n$%d\r\nr:cooldown:%s\r\n", length(item) + 11, item
			score = i + 1
		} else {
			score = later
		}
		printf "*4\r\n$4\r\nZADD\r\n$5\r\nr:due\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(score), score, length(item), item
	}
}' | rcli --pipe >/dev/null || broken "indexing the run list"
rcli MSET r:untried 0 r:seen "$busy_items" >/dev/null
verdict "busy: $busy_workers workers, $busy_items items run before, 1% due: ms/item" "$(busy r:)" \
	"$busy_workers x w8y -q -c -k r: --cooldown 1h --max-items $per true" 0.15

# On a list that no worker has run, every 100th item eligible, the rest
# cooling down by hand: each take passes over the untried head, about 100
# candidates an item, each read once for the fleet (the cooldowns in one
# MGET a batch). This pays for the fleet's first pass over the list, as the
# first one-shot run above does.
rcli FLUSHALL >/dev/null
load "b:" "$busy_items" 100
echo "busy: $busy_workers workers, $busy_items items never run, 1% eligible: $(busy b:) ms of Redis CPU per item (the fleet's first pass over the list)"
