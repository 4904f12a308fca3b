#!/usr/bin/env bash
# Measures how lean w8y is where it runs most (issue 34), each figure
# against its target with the command that reproduces it:
#
# - the summary without the list: the Redis CPU of `w8y --status --limit 0`
#   over 1,000,000 items never run (the counts from the indexes, O(log n)),
#   and of a whole `w8y --status --json` over 100,000;
# - a busy item, as ratios measured in one run so that the machine's speed
#   does not decide: the Redis CPU of a busy worker's call (finish and next
#   take, BenchmarkFinishThenLook over 1,000,000 items run before) against
#   a bare EVALSHA of "return 1" from the same client, and the commands
#   that the call runs inside Redis (INFO commandstats);
# - an item's footprint: Redis' used_memory after one run of each of
#   20,000 items (--cooldown 1h), a byte figure that does not depend on the
#   machine's speed, beside the list's own.
#
# Redis CPU is read from INFO cpu (used_cpu_sys + used_cpu_user) before and
# after. A figure that misses its target prints MISS, and the script exits
# 0: it fails only when something is broken. It starts its own
# redis-server on a free loopback port and never touches any other Redis.
#
# Run it with `make bench`, or alone: LEAN_SIZE=100000 counts the summary
# over 100,000 items instead of the million (quicker, the same O(log n));
# LEAN_BUSY=0 leaves out the Go benchmark; W8Y=path measures another build
# of w8y (a lean build of main, for the figures before).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

size=${LEAN_SIZE:-1000000}
whole=100000
footprint=20000
busy_runs=4000

bench_name=bench-lean
# shellcheck source=scripts/lib/bench.sh
source "$root/scripts/lib/bench.sh"

used_memory() { rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }
# verdict prints a figure's line: name, value, target (at most), and how
# it was measured and is reproduced.
verdict() {
	local ok
	ok=$(awk -v v="$2" -v t="$3" 'BEGIN {print (v <= t) ? "PASS" : "MISS"}')
	printf '%-58s %8s  (<= %s)  %s  %s\n' "$1" "$2" "$3" "$ok" "$4"
}
# load appends n items i0..i(n-1) to <prefix>list with redis-cli --pipe.
load() {
	awk -v p="$1" -v n="$2" 'BEGIN {
		for (i = 0; i < n; i++) {
			item = "i" i
			printf "*3\r\n$5\r\nRPUSH\r\n$%d\r\n%slist\r\n$%d\r\n%s\r\n", length(p) + 4, p, length(item), item
		}
	}' | rcli --pipe >/dev/null
}

# The summary without the list, over $size items never run. A worker's
# one-shot run records the list's version first (as every fleet does), and
# takes one item; the summary then counts the rest as never run.
load "big:" "$size"
"$w8y" -u "$url" -k big -q true || broken "a one-shot run over $size items"
"$w8y" -u "$url" -k big --status --limit 0 >/dev/null || broken "w8y --status --limit 0"
best=""
for _ in 1 2 3 4 5; do
	before=$(cpu_ms)
	out=$("$w8y" -u "$url" -k big --status --json --limit 0) || broken "w8y --status --json --limit 0"
	ms=$(since "$before")
	grep -q "\"items\":$size" <<<"$out" || broken "the summary does not count $size items: $out"
	grep -q '"idle":'"$size" <<<"$out" || broken "the summary does not count $size idle items: $out"
	best=$(awk -v a="$best" -v b="$ms" 'BEGIN {print (a == "" || b < a) ? b : a}')
done
verdict "Summary of $size items never run (--status --limit 0), ms" "$best" 20 \
	"least of 5; Redis CPU from INFO cpu; LEAN_BUSY=0 bash scripts/bench-lean.sh"

load "whole:" "$whole"
"$w8y" -u "$url" -k whole -q true || broken "a one-shot run over $whole items"
before=$(cpu_ms)
"$w8y" -u "$url" -k whole --status --json >/dev/null || broken "w8y --status --json over $whole items"
verdict "Whole --status --json of $whole items, ms" "$(since "$before")" 200 \
	"Redis CPU from INFO cpu; LEAN_BUSY=0 bash scripts/bench-lean.sh"
rcli FLUSHALL >/dev/null

# The footprint: one run of each of $footprint items, --cooldown 1h, by
# four continuous workers that stop once every item cools down.
empty=$(used_memory)
load "fp:" "$footprint"
listed=$(used_memory)
for _ in 1 2 3 4; do
	"$w8y" -u "$url" -k fp -q -c --until-idle --cooldown 1h true &
	bg_pids+=($!)
done
for pid in "${bg_pids[@]}"; do
	wait "$pid" || broken "a worker of the footprint's run failed"
done
bg_pids=()
ran=$(rcli ZCOUNT fp:due "(0" +inf)
[ "$ran" -eq "$footprint" ] || broken "$ran of $footprint items cool down after the footprint's run"
after=$(used_memory)
list_bytes=$(awk -v a="$empty" -v b="$listed" -v n="$footprint" 'BEGIN {printf "%.0f", (b - a) / n}')
verdict "Bytes an item after one run of each (--cooldown 1h)" \
	"$(awk -v a="$empty" -v b="$after" -v n="$footprint" 'BEGIN {printf "%.0f", (b - a) / n}')" 500 \
	"used_memory over $footprint items, the list alone $list_bytes; LEAN_BUSY=0 bash scripts/bench-lean.sh"

if [ "${LEAN_BUSY:-1}" != 0 ]; then
	bench=$(go test -run '^$' -bench 'FinishThenLook$' -benchtime "${busy_runs}x" ./internal/take/) ||
		broken "BenchmarkFinishThenLook: $bench"
	# One line a sub-benchmark: rate=none, then under --fleet-rate.
	while read -r line; do
		rate=$(awk '{sub(/^BenchmarkFinishThenLook\//, "", $1); sub(/-[0-9]+$/, "", $1); print $1}' <<<"$line")
		metric() { awk -v m="$1" '{for (i = 2; i < NF; i++) if ($(i + 1) == m) print $i}' <<<"$line"; }
		verdict "Redis CPU of a busy item / a bare EVALSHA ($rate)" "$(metric x-bare)" 3 \
			"$(metric redis-µs/op) us / $(metric bare-µs/op) us (in the script $(metric script-µs/op) us, of it its commands $(metric commands-µs/op) us); go test -run '^\$' -bench 'FinishThenLook\$' -benchtime ${busy_runs}x ./internal/take/"
		verdict "Commands a busy item runs inside Redis ($rate)" "$(metric commands/op)" 15 \
			"INFO commandstats; the same go test"
	done < <(grep '^BenchmarkFinishThenLook/' <<<"$bench")
fi
