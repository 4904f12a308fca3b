# The fleet's size, for bench-fleet.sh (source it there, after its helpers):
# fleet_size measures what a large idle fleet costs Redis against one idle
# worker, how soon fleets of 1, 4, 16 and the large one take an item made
# due (w8yctl run-now, an outside RPUSH), and w8yctl workers listing the
# whole fleet.
#
# FLEET_WORKERS is the fleet's size (300); FLEET_W8Y another w8y binary to
# measure instead of this checkout's (main's, for the figures before), with
# the w8yctl of this checkout.

# fleet_median prints the median of its arguments.
fleet_median() {
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# fleet_verb_pickups measures how soon the $1 idle workers that run take an
# item that w8yctl's verb $2 makes due, for the items $3..., from just
# before w8yctl starts to the child's start; w8yctl's own run is in the
# figure.
fleet_verb_pickups() {
	local n=$1 verb=$2 item t t1 s got=() took=()
	shift 2
	for item in "$@"; do
		t=$EPOCHREALTIME
		"$ctl" -u "$url" -k f "$verb" "$item" >/dev/null || broken "w8yctl $verb $item"
		t1=$EPOCHREALTIME
		s=$(fstarted_at "$item")
		got+=("$(awk -v a="$t" -v b="$s" 'BEGIN {printf "%.0f", (b - a) * 1000}')")
		took+=("$(awk -v a="$t" -v b="$t1" 'BEGIN {printf "%.0f", (b - a) * 1000}')")
	done
	verdict "pickup, $n idle workers: $verb, median ms" "$(fleet_median "${got[@]}")" le 50 \
		"from before w8yctl $verb to the child's start: ${got[*]} ms (w8yctl itself: median $(fleet_median "${took[@]}") ms)"
}

# fleet_pickups measures how soon the $1 idle workers that run take an item
# made due, from just before the change to the child's start, each way
# $samples times, one item at a time: w8yctl run-now, add and resume (of a
# pause over an item that nothing else holds) and an outside RPUSH, with
# the items after i$2, add$2 and new$2.
fleet_pickups() {
	local n=$1 from=$2 i t s rpush=() runnow=() resume=() add=()
	for i in $(seq $((from + 1)) $((from + samples))); do
		runnow+=("i$i")
		add+=("add$i")
		resume+=("i$((i + samples))")
		# Paused first, then its cooldown gone by hand: nothing but the
		# pause holds it, and no worker took it in between.
		"$ctl" -u "$url" -k f pause "i$((i + samples))" >/dev/null || broken "w8yctl pause"
		rcli DEL "f:cooldown:i$((i + samples))" >/dev/null
	done
	fleet_verb_pickups "$n" run-now "${runnow[@]}"
	fleet_verb_pickups "$n" add "${add[@]}"
	fleet_verb_pickups "$n" resume "${resume[@]}"
	# An outside program pushes at any moment of the workers' waits: a
	# random one, up to six seconds after the last start (the fallback is
	# 1.5s ±25%); pushed at once, every push would meet a fresh wait, and
	# pushed within two seconds, one that just misses the first fallback
	# waits for a whole second one more often than at a moment taken at
	# random (a median of 0.91 s instead of 0.76 s for a lone worker, by a
	# simulation of the fallbacks). A lone worker's pickups spread from 0
	# to 1.9 s: nine of them give a median over a second one run in five
	# where the true one is 0.79 s, so it gets 25.
	local pushes=$samples
	[ "$n" -gt 1 ] || pushes=25
	for i in $(seq $((from + 1)) $((from + pushes))); do
		sleep "$(awk -v r="$RANDOM" 'BEGIN {printf "%.3f", r / 32768 * 6}')" # the push's moment, not a synchronisation
		t=$EPOCHREALTIME
		rcli RPUSH f:list "new$i" >/dev/null
		s=$(fstarted_at "new$i")
		rpush+=("$(awk -v a="$t" -v b="$s" 'BEGIN {printf "%.0f", (b - a) * 1000}')")
	done
	verdict "pickup, $n idle workers: outside RPUSH, median ms" "$(fleet_median "${rpush[@]}")" le 1000 \
		"from before redis-cli RPUSH to the child's start: ${rpush[*]} ms"
}

fleet_size() {
	local n=${FLEET_WORKERS:-300} bin=${FLEET_W8Y:-$w8y} items=10000
	ctl="$root/bin/w8yctl" samples=9
	local starts="$tmp/fleet-starts" base one idle
	CGO_ENABLED=0 go build -C "$root" -o "$ctl" ./cmd/w8yctl
	echo "fleet: $("$bin" --version), $n workers, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	rcli FLUSHALL >/dev/null
	load "f:" "$items" cooling
	: >"$starts"
	# fstarted_at waits for the child of item $1 and prints when it started.
	fstarted_at() {
		wait_for grep -q "^$1 " "$starts"
		awk -v i="$1" '$1 == i {t = $2} END {print t}' "$starts"
	}
	# fsettled: no whole pass or sweep (LRANGE) in the last second.
	fsettled() {
		local a
		a=$(calls lrange)
		sleep 1
		[ "$(calls lrange)" = "$a" ]
	}
	fstart() {
		"$bin" -q -c -u "$url" -k f --cooldown 1h bash -c 'echo "$W8Y_ITEM $EPOCHREALTIME" >>"$0"' "$starts" &
		bg_pids+=($!)
	}
	base=$(window_cpu)

	# One idle worker over the same list.
	bg_pids=()
	fstart
	wait_for has_key f:sweep
	wait_for fsettled
	one=$(window_cpu)
	fleet_pickups 1 100
	stop_bg
	verdict "1 idle worker, $items items cooling: ms/s" "$(awk -v i="$one" -v b="$base" 'BEGIN {v = i - b; printf "%.2f", v < 0 ? 0 : v}')" le 1 \
		"Redis ${one} ms/s with it, ${base} without (INFO cpu over ${window}s)"

	# Small fleets, whose workers look every 125ms (the longest pause) or
	# their number times 50ms. The sleep waits for a round of beats, as
	# below.
	local small
	for small in 4 16; do
		bg_pids=()
		for _ in $(seq "$small"); do
			fstart
		done
		wait_for fsettled
		sleep 6
		fleet_pickups "$small" $((small * 100))
		stop_bg
	done

	# The fleet: started together, then left until their first passes are
	# over and each has beaten at least once more (every 5 s), so that each
	# spaces its looks by the fleet's size. The sleep waits for a round of
	# beats, which nothing in Redis marks for an older build. Redis' own
	# idle cost moves between runs on a VM (3 to 7 ms/s): it is read again
	# just before the fleet starts, for the fleet's line.
	base=$(window_cpu)
	bg_pids=()
	for _ in $(seq "$n"); do
		fstart
	done
	wait_for has_key f:sweep
	wait_for fsettled
	sleep 6
	idle=$(window_cpu)
	verdict "$n idle workers, $items items cooling: ms/s, all" "$(awk -v i="$idle" -v b="$base" 'BEGIN {v = i - b; printf "%.2f", v < 0 ? 0 : v}')" le 10 \
		"Redis ${idle} ms/s with them, ${base} without (INFO cpu over ${window}s)"

	fleet_pickups "$n" 0
	verdict "w8yctl workers, $n live workers: listed" "$("$ctl" -u "$url" -k f workers | grep -c ' continuous ' || true)" ge "$n" \
		"rows of: w8yctl -u URL -k f workers"
	stop_bg
}
