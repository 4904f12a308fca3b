#!/usr/bin/env bash
# Measures what a fleet costs Redis: the Redis CPU of idle continuous
# workers over large lists (locked, and cooling down), of busy workers per
# item, and of --status on a large list, read from INFO cpu as the delta
# over a window less that of the same server over the same window with no
# worker; and how soon an idle worker takes an item that becomes eligible,
# for each way it can. It prints one line per figure, with its target: PASS
# or MISS. Timing on a shared machine is noisy, so a MISS does not fail the
# script; it exits non-zero only when something is broken. It starts its own
# redis-server on a free loopback port and never touches any other Redis.
# Run it with `make bench`, or alone; FLEET_SIZES="10000 100000" limits the
# list sizes of the idle figures (the million takes a few minutes to load
# and pass over).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

sizes=${FLEET_SIZES:-10000 100000 1000000}
# The window over which Redis CPU is read.
window=20
# Busy figure: workers, items, cooldown.
busy_workers=8
busy_items=10000

bench_name=bench-fleet
# shellcheck source=scripts/lib/bench.sh
source "$root/scripts/lib/bench.sh"

# window_cpu prints the server's CPU in ms per second over $window seconds.
# The sleep is the measurement's window, not a synchronisation.
window_cpu() {
	local a b
	a=$(cpu_ms)
	sleep "$window"
	b=$(cpu_ms)
	awk -v a="$a" -v b="$b" -v w="$window" 'BEGIN {printf "%.2f", (b - a) / w}'
}
# verdict prints a figure's line: name, value, comparison (le or ge),
# target and how it was measured.
verdict() {
	local ok
	ok=$(awk -v v="$2" -v t="$4" -v c="$3" 'BEGIN {print ((c == "le" && v <= t) || (c == "ge" && v >= t)) ? "PASS" : "MISS"}')
	printf '%-52s %10s   (%s %s)  %s   %s\n' "$1" "$2" "$3" "$4" "$ok" "$5"
}
# load fills the list <prefix>list with n items i0..i(n-1) and, for mode
# locked or cooling, gives each a lock or a cooldown key held by someone
# else for an hour, through redis-cli --pipe.
load() {
	local prefix=$1 n=$2 mode=$3
	awk -v p="$prefix" -v n="$n" -v m="$mode" 'BEGIN {
		for (i = 0; i < n; i++) {
			item = "i" i
			printf "*3\r\n$5\r\nRPUSH\r\n$%d\r\n%slist\r\n$%d\r\n%s\r\n", length(p) + 4, p, length(item), item
			if (m == "locked") key = p "lock:" item
			else if (m == "cooling") key = p "cooldown:" item
			else continue
			printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nother\r\n$2\r\nPX\r\n$7\r\n3600000\r\n", length(key), key
		}
	}' | rcli --pipe >/dev/null || broken "loading $n items"
}
has_key() { [ "$(rcli EXISTS "$1")" = 1 ]; }
# swept says whether the fleet has passed over the list of prefix $1 once:
# no item is left untried, and the sweep key, which the first look at a
# list sets, is there.
swept() { has_key "$1:sweep" && [ "$(rcli GET "$1:untried")" = 0 ]; }

# shellcheck source=scripts/lib/fleet-size.sh
source "$root/scripts/lib/fleet-size.sh"

# idle_ten measures the reference of fleet_cap and fleet_rate: ten
# continuous workers over 1,000 items of prefix $1, all cooling down (their
# looks and the fleet's sweeps). It sets idle, Redis' ms/s in all, and
# idle_line, the line that shows their scripts' time.
idle_ten() {
	local n0 u0 n1 u1
	rcli FLUSHALL >/dev/null
	load "$1:" 1000 cooling
	bg_pids=()
	for _ in $(seq 10); do
		"$w8y" -q -c -u "$url" -k "$1" true &
		bg_pids+=($!)
	done
	wait_for swept "$1"
	read -r n0 u0 < <(usec evalsha)
	idle=$(window_cpu)
	read -r n1 u1 < <(usec evalsha)
	stop_bg
	idle_line=$(printf '%-52s %10s   %s' "10 idle workers, 1000 items cooling: script us/s" "$(((u1 - u0) / window))" \
		"$((n1 - n0)) looks and sweeps in ${window}s (INFO commandstats); Redis ${idle} ms/s in all")
}

# waiting_ten starts ten continuous workers over prefix $1 with the options
# that follow $2, each child appending its start time to file $2, and once
# all ten are registered measures them over the window. It sets waiting,
# Redis' ms/s in all, and waiting_calls, their scripts' share; the workers run on
# until stop_bg.
waiting_ten() {
	local prefix=$1 starts=$2 m0 v0 m1 v1
	shift 2
	: >"$starts"
	for _ in $(seq 10); do
		"$w8y" -q -c -u "$url" -k "$prefix" "$@" bash -c 'echo "$EPOCHREALTIME" >>"$0"' "$starts" &
		bg_pids+=($!)
	done
	ten_registered() { [ "$(rcli ZCARD "$prefix:workers")" = 10 ]; }
	wait_for ten_registered
	read -r m0 v0 < <(usec evalsha)
	waiting=$(window_cpu)
	read -r m1 v1 < <(usec evalsha)
	waiting_calls="$((m1 - m0)) script calls in ${window}s ($(((v1 - v0) / window)) us/s)"
}

# against_idle prints the verdict of waiting workers ($1, what they wait
# for) against the idle ones. Idle and waiting workers both probe (see
# internal/take's probe) and seldom run a script, so the figure to compare
# is all the server's CPU; 10% over the idle workers' is the noise of two
# 20 s windows on a shared machine.
against_idle() {
	echo "$idle_line"
	verdict "10 workers waiting for $1: Redis ms/s" "$waiting" le "$(awk -v i="$idle" 'BEGIN {printf "%.2f", i * 1.1}')" \
		"$waiting_calls; target: the idle workers' (${idle} ms/s), within 10%"
}

# fleet_cap measures what workers that wait for a place of
# --fleet-max-running cost Redis, against idle ones (idle_ten): ten over
# 1,000 free items with --fleet-max-running 1 whose one place a run
# elsewhere holds, over the same window; then how soon a waiting worker
# starts once that run's lock goes.
fleet_cap() {
	local t s starts="$tmp/capstarts"
	idle_ten c
	rcli FLUSHALL >/dev/null
	load "c:" 1000 none
	rcli SET c:lock:held other PX 3600000 >/dev/null
	rcli SADD c:running c:lock:held >/dev/null
	waiting_ten c "$starts" --fleet-max-running 1
	[ ! -s "$starts" ] || broken "a worker ran a child while the one place was in use"
	t=$EPOCHREALTIME
	rcli DEL c:lock:held >/dev/null
	wait_for test -s "$starts"
	s=$(head -1 "$starts")
	stop_bg

	against_idle "a place"
	verdict "pickup: the one place freed (s)" "$(awk -v a="$t" -v b="$s" 'BEGIN {printf "%.2f", b - a}')" le 1.25 \
		"from the DEL of the place's lock to a waiting worker's child's start"
}

# fleet_rate measures what workers that wait for --fleet-rate cost Redis,
# against idle ones, as fleet_cap does for a place: ten over 1,000 free
# items with --fleet-rate 1/1h whose one start in the window a start
# elsewhere made; then how soon a waiting worker starts once that start
# has left the window.
fleet_rate() {
	local t s now starts="$tmp/ratestarts"
	idle_ten r
	rcli FLUSHALL >/dev/null
	load "r:" 1000 none
	# A start elsewhere, now on Redis' clock: the window of 1/1h is full.
	now=$(rcli TIME | tr -d '\r' | awk 'NR == 1 {s = $1} NR == 2 {printf "%d", s * 1000 + $1 / 1000}')
	rcli LPUSH r:starts "$now" >/dev/null
	waiting_ten r "$starts" --fleet-rate 1/1h
	[ ! -s "$starts" ] || broken "a worker ran a child while the rate's window was full"
	t=$EPOCHREALTIME
	# The start leaves the window: an hour and a second ago.
	rcli LSET r:starts 0 $((now - 3601000)) >/dev/null
	wait_for test -s "$starts"
	s=$(head -1 "$starts")
	stop_bg
	[ "$(wc -l <"$starts")" = 1 ] || broken "$(wc -l <"$starts") children started under --fleet-rate 1/1h, want 1"

	against_idle "--fleet-rate"
	verdict "pickup: the window has room (s)" "$(awk -v a="$t" -v b="$s" 'BEGIN {printf "%.2f", b - a}')" le 1.25 \
		"from the LSET that ages the window's start to a waiting worker's child's start"
}

# FLEET_PART=size measures the fleet's size alone (see fleet-size.sh),
# FLEET_PART=cap the workers that wait for a place (see fleet_cap), and
# FLEET_PART=rate those that wait for --fleet-rate (see fleet_rate).
case "${FLEET_PART:-all}" in
size)
	fleet_size
	exit 0
	;;
cap)
	fleet_cap
	exit 0
	;;
rate)
	fleet_rate
	exit 0
	;;
esac

echo "machine: $(nproc) cores, $(uname -sr), $(redis-server --version | awk '{print $3}' | tr -d 'v='), $(go version | awk '{print $3}')"
echo "w8y: $("$w8y" --version), redis-server on port $port"
echo

# 1. Idle: one continuous worker, default --idle-wait, over n items that
# are all locked or all cooling down elsewhere. Its first pass is measured
# from the worker's start until it has tried every item (see swept); the
# look alone over the window after it; then a sweep (see internal/take's
# index.lua), which the worker drives a step after another once the sweep
# key is gone, from that key's DEL until the sweep's last step sets it
# again. The sweep's share is its cost over the interval that the key's
# expiry then gives.
for n in $sizes; do
	for mode in locked cooling; do
		rcli FLUSHALL >/dev/null
		load "b:" "$n" "$mode"
		base=$(window_cpu)
		start=$(cpu_ms)
		"$w8y" -q -c -u "$url" -k b true &
		bg_pids=($!)
		wait_for swept b
		first=$(awk -v a="$start" -v b="$(cpu_ms)" 'BEGIN {printf "%.0f", b - a}')
		read -r calls0 us0 < <(usec evalsha)
		idle=$(window_cpu)
		read -r calls1 us1 < <(usec evalsha)
		sweep_start=$(cpu_ms)
		rcli DEL b:sweep >/dev/null
		wait_for has_key b:sweep
		sweep=$(awk -v a="$sweep_start" -v b="$(cpu_ms)" 'BEGIN {printf "%.0f", b - a}')
		every=$(rcli PTTL b:sweep)
		stop_bg
		[ -z "$(rcli --scan --pattern 'b:lock:*' | head -1)" ] || [ "$mode" = locked ] || broken "the idle worker left a lock"
		look=$(awk -v i="$idle" -v b="$base" 'BEGIN {v = i - b; printf "%.2f", v < 0 ? 0 : v}')
		share=$(awk -v f="$sweep" -v e="$every" 'BEGIN {printf "%.2f", f / (e / 1000)}')
		if [ "$every" -gt $((window * 1000)) ]; then
			# No sweep fell in the window: add the sweep's share.
			total=$(awk -v l="$look" -v s="$share" 'BEGIN {printf "%.2f", l + s}')
			how="looks ${look} ms/s (Redis ${idle} ms/s, ${base} without the worker) + a sweep of ${sweep} ms every $((every / 1000)) s (${share} ms/s for the fleet); first pass ${first} ms"
		else
			# Sweeps fell in the window, and are counted in it.
			total=$look
			how="looks and sweeps (${sweep} ms every $((every / 1000)) s): Redis ${idle} ms/s, ${base} without the worker; first pass ${first} ms"
		fi
		verdict "idle worker, $n items $mode: ms/s" "$total" le 1 "$how"
		# The script calls alone, as Redis times them: what a thousand idle
		# workers' looks would cost, outside the noise of the whole server.
		perlook=$(awk -v c="$((calls1 - calls0))" -v u="$((us1 - us0))" 'BEGIN {printf "%.0f", c ? u / c : 0}')
		thousand=$(awk -v c="$((calls1 - calls0))" -v u="$((us1 - us0))" -v w="$window" 'BEGIN {printf "%.0f", u / w}')
		verdict "  1000 such workers' looks: ms/s" "$thousand" le 500 "$((calls1 - calls0)) looks in ${window}s, ${perlook} us each (INFO commandstats), times 1000"
	done
done

# 2. Ten idle workers over 100,000 cooling items: the looks of ten, and one
# sweep for all of them. Once the first passes are over, LRANGE (which only
# passes and sweeps send) stops.
rcli FLUSHALL >/dev/null
load "b:" 100000 cooling
base=$(window_cpu)
bg_pids=()
for _ in $(seq 10); do
	"$w8y" -q -c -u "$url" -k b true &
	bg_pids+=($!)
done
wait_for swept b
settled() {
	local a
	a=$(calls lrange)
	sleep 1
	[ "$(calls lrange)" = "$a" ]
}
wait_for settled
idle=$(window_cpu)
stop_bg
verdict "10 idle workers, 100000 items cooling: ms/s each" "$(awk -v i="$idle" -v b="$base" 'BEGIN {v = (i - b) / 10; printf "%.2f", v < 0 ? 0 : v}')" le 1 \
	"Redis ${idle} ms/s with them, ${base} ms/s without, outside sweeps"

# 3. Busy: workers over items with a short cooldown and the child true, so
# that most takes find a free item at once. Items run are counted from the
# events stream's XADDs, two a run (start and end).
rcli FLUSHALL >/dev/null
load "busy:" "$busy_items" none
bg_pids=()
for _ in $(seq "$busy_workers"); do
	"$w8y" -q -c -u "$url" -k busy --cooldown 2s true &
	bg_pids+=($!)
done
wait_for has_key busy:events
x0=$(calls xadd) c0=$(rcli INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ {print $2}')
busy=$(window_cpu)
x1=$(calls xadd) c1=$(rcli INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ {print $2}')
stop_bg
items=$(((x1 - x0) / 2))
[ "$items" -gt 0 ] || broken "the busy workers ran nothing"
verdict "busy, $busy_workers workers: Redis CPU ms per item" "$(awk -v c="$busy" -v w="$window" -v n="$items" 'BEGIN {printf "%.3f", c * w / n}')" le 0.15 \
	"$((items / window)) items/s; $(awk -v a="$c0" -v b="$c1" -v n="$items" 'BEGIN {printf "%.1f", (b - a) / n}') commands run by Redis per item"

# 4. Pickups: how soon an idle worker (over 1,000 cooling items, default
# --idle-wait) takes an item that becomes eligible. Its child records the
# moment it starts; each way is timed from the moment it happened.
rcli FLUSHALL >/dev/null
load "p:" 1000 cooling
starts="$tmp/starts"
: >"$starts"
"$w8y" -q -c -u "$url" -k p --cooldown 3s bash -c 'echo "$W8Y_ITEM $EPOCHREALTIME" >>"$0"' "$starts" &
bg_pids=($!)
wait_for swept p
# started_at waits for the child of item $1 and prints when it started.
started_at() {
	wait_for grep -q "^$1 " "$starts"
	awk -v i="$1" '$1 == i {t = $2} END {print t}' "$starts"
}
pickup() {
	verdict "pickup: $1 (s)" "$(awk -v a="$3" -v b="$4" 'BEGIN {printf "%.2f", b - a}')" le "$2" "$5"
}
t=$EPOCHREALTIME
rcli RPUSH p:list new >/dev/null
s=$(started_at new)
pickup "RPUSH from outside" 1.25 "$t" "$s" "from RPUSH to the child's start"
# Its cooldown (3s, set by the run above) expires: the finish wrote when.
sed -i '/^new /d' "$starts"
s2=$(started_at new)
pickup "cooldown expired" 1.25 "$(awk -v s="$s" 'BEGIN {printf "%.6f", s + 3}')" "$s2" "from the end of the 3s cooldown to the next start (the child takes a few ms)"
# From here on "new" stays in cooldown.
rcli SET p:cooldown:new other PX 3600000 >/dev/null
# Run it now: an operator deletes a cooldown and makes the item due.
t=$EPOCHREALTIME
rcli DEL p:cooldown:i7 >/dev/null
rcli ZADD p:due 0 i7 >/dev/null
s=$(started_at i7)
pickup "run it now (DEL cooldown, ZADD due 0)" 1 "$t" "$s" "from the ZADD to the child's start"
# A lock released by a one-shot worker that finishes: it runs i8 by name
# (--item), and its finish makes i8 due as it releases the lock.
rcli DEL p:cooldown:i8 >/dev/null
"$w8y" -q -u "$url" -k p --item i8 bash -c 'sleep 1; echo "$EPOCHREALTIME" >"$0"' "$tmp/released" &
oneshot=$!
wait "$oneshot" || broken "the one-shot worker exited $?"
t=$(cat "$tmp/released")
s=$(started_at i8)
pickup "lock released by a finishing worker" 1.25 "$t" "$s" "from the other worker's child's end to this one's start"
stop_bg

# 5. --status over a million items: Redis CPU for the whole table, and the
# longest any one command held the server (SLOWLOG, from 5 ms).
rcli FLUSHALL >/dev/null
load "s:" 1000000 none
rcli CONFIG SET slowlog-log-slower-than 5000 >/dev/null
rcli SLOWLOG RESET >/dev/null
a=$(cpu_ms)
"$w8y" -u "$url" -k s --status >/dev/null || broken "--status failed"
b=$(cpu_ms)
slow=$(rcli SLOWLOG LEN)
longest=$(rcli SLOWLOG GET 1000 | awk 'NR % 6 == 3 {if ($1 > m) m = $1} END {print m + 0}')
verdict "--status, 1000000 items: Redis CPU s" "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b - a) / 1000}')" le 2 \
	"$slow commands over 5 ms, the longest $((longest / 1000)) ms"

# 6. The fleet's size: 300 idle workers against one, their pickups, and
# w8yctl workers (see scripts/lib/fleet-size.sh).
fleet_size

# 7. Workers waiting for a place of --fleet-max-running (see fleet_cap).
fleet_cap

# 8. Workers waiting for --fleet-rate (see fleet_rate).
fleet_rate
