#!/usr/bin/env bash
# Measures w8y against references run in the same session on the same
# machine, and prints each figure as a ratio with its target: PASS or MISS.
# Timing on a shared machine is noisy, so a MISS does not fail the script;
# it exits non-zero only when something is broken (w8y fails, or leaves the
# wrong result). It builds a static, non-race bin/w8y and starts its own
# redis-server on a free loopback port, keeping nothing on disk; it never
# touches any other Redis. Run it with `make bench`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Repetitions: medians of this many rounds smooth out a busy neighbour.
rounds=5
# The throughput figure takes 2 x its seconds a round, so it has fewer.
throughput_rounds=3
# One-shot runs per round, long enough to average out scheduling noise.
oneshots=100
# Items in the scan figure: the issue's worst case.
scan_items=10000
# Throughput figure: workers, items and seconds.
workers=4
throughput_items=100
throughput_secs=5
# Idle figure: the window over which commands are counted.
idle_secs=20
# Memory figure: items a continuous worker runs before RSS is read again.
memory_items=10000

bench_name=bench
# shellcheck source=scripts/lib/bench.sh
source "$root/scripts/lib/bench.sh"

# now_us is the wall clock in microseconds, without forking.
now_us() {
	local t=${EPOCHREALTIME/./}
	echo "$t"
}

# median prints the median of its arguments.
median() {
	printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# verdict prints a figure's line: name, ratio, comparison (le or ge), target
# and the measurements it came from.
verdict() {
	local name=$1 ratio=$2 cmp=$3 target=$4 detail=$5 ok
	if [ "$cmp" = le ]; then
		ok=$(awk -v r="$ratio" -v t="$target" 'BEGIN {print (r <= t) ? "PASS" : "MISS"}')
		printf '%-22s %8s  (target <= %s) %s  %s\n' "$name" "$ratio" "$target" "$ok" "$detail"
	else
		ok=$(awk -v r="$ratio" -v t="$target" 'BEGIN {print (r >= t) ? "PASS" : "MISS"}')
		printf '%-22s %8s  (target >= %s) %s  %s\n' "$name" "$ratio" "$target" "$ok" "$detail"
	fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "machine: $(nproc) cores, $(uname -sr), $(redis-server --version | awk '{print $3}' | tr -d 'v='), $(go version | awk '{print $3}')"
echo "w8y: $("$w8y" --version), redis-server on port $port"
echo

# 1. One-shot overhead: a one-item list and the child true, against a
# redis-cli ping process. Rounds alternate, so both see the same noise.
# The floor is what no one-shot run can go below, timed in the same
# rounds: w8y's own start (w8y --version: the Go runtime and the packages'
# initialisation, no Redis) and its child's (the true that the run starts),
# as processes started one after the other; a run adds its guard's start
# (w8y again), its three round trips and its waits to it.
rcli RPUSH one:list item >/dev/null
# The true that w8y runs is the one on PATH, not bash's builtin.
truebin=$(type -P true) || broken "no true on PATH"
w8y_times=() ping_times=() floor_times=()
for _ in $(seq "$rounds"); do
	start=$(now_us)
	for _ in $(seq "$oneshots"); do
		"$w8y" -q -u "$url" -k one true || broken "one-shot run failed"
	done
	w8y_times+=($((($(now_us) - start) / oneshots)))
	start=$(now_us)
	for _ in $(seq "$oneshots"); do
		redis-cli -p "$port" ping >/dev/null || broken "redis-cli ping failed"
	done
	ping_times+=($((($(now_us) - start) / oneshots)))
	start=$(now_us)
	for _ in $(seq "$oneshots"); do
		"$w8y" --version >/dev/null || broken "w8y --version failed"
		"$truebin" || broken "$truebin failed"
	done
	floor_times+=($((($(now_us) - start) / oneshots)))
done
[ -z "$(rcli --scan --pattern 'one:lock:*')" ] || broken "one-shot runs left a lock behind"
w=$(median "${w8y_times[@]}") p=$(median "${ping_times[@]}") f=$(median "${floor_times[@]}")
verdict "one-shot overhead" "$(ratio "$w" "$p")" le 1.3 "w8y ${w} us per run, redis-cli ping ${p} us (medians of $rounds x $oneshots)"
printf '%-22s %8s  %s\n' "one-shot floor" "$(ratio "$f" "$p")" "w8y --version then $truebin: ${f} us, no Redis and no guard, against the same ping (what the target leaves: $(awk -v f="$f" -v p="$p" 'BEGIN {printf "%d", 1.3 * p - f}') us for the guard, three round trips and the child's wait)"

# 1b. Kept output: by default a one-shot run's child writes to pipes that w8y
# reads, to keep a failure's last words; against --keep-output 0, which
# leaves it w8y's own stdout and stderr. The child writes a line to each.
# Rounds alternate.
kept_times=() bare_times=()
for _ in $(seq "$rounds"); do
	start=$(now_us)
	for _ in $(seq "$oneshots"); do
		"$w8y" -q -u "$url" -k one sh -c 'echo out; echo err >&2' >/dev/null 2>&1 || broken "one-shot run failed"
	done
	kept_times+=($((($(now_us) - start) / oneshots)))
	start=$(now_us)
	for _ in $(seq "$oneshots"); do
		"$w8y" -q --keep-output 0 -u "$url" -k one sh -c 'echo out; echo err >&2' >/dev/null 2>&1 || broken "one-shot run failed"
	done
	bare_times+=($((($(now_us) - start) / oneshots)))
done
k=$(median "${kept_times[@]}") b=$(median "${bare_times[@]}")
verdict "kept output" "$(ratio "$k" "$b")" le 1.10 "default ${k} us per run, --keep-output 0 ${b} us (medians of $rounds x $oneshots)"

# 2. Scan: every item but the last locked, so a run looks at all of them. A
# whole pass leaves the list as it was and the run releases the last lock,
# so every round starts from the same state. The reference sends the same
# LMOVE and SET NX PX per candidate through redis-cli --pipe.
last="s$((scan_items - 1))"
awk -v n="$scan_items" 'BEGIN {
	printf "*2\r\n$3\r\nDEL\r\n$9\r\nscan:list\r\n"
	for (i = 0; i < n; i++) { item = "s" i; printf "*3\r\n$5\r\nRPUSH\r\n$9\r\nscan:list\r\n$%d\r\n%s\r\n", length(item), item }
	for (i = 0; i < n - 1; i++) { key = "scan:lock:s" i; printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nother\r\n$2\r\nPX\r\n$8\r\n36000000\r\n", length(key), key }
}' | rcli --pipe >/dev/null
awk -v n="$scan_items" 'BEGIN {
	for (i = 0; i < n; i++) {
		key = "scan:lock:s" i
		printf "*5\r\n$5\r\nLMOVE\r\n$9\r\nscan:list\r\n$9\r\nscan:list\r\n$4\r\nLEFT\r\n$5\r\nRIGHT\r\n"
		printf "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n5000\r\n", length(key), key
	}
}' >"$tmp/pipe.resp"
scan_times=() pipe_times=()
for _ in $(seq "$rounds"); do
	start=$(now_us)
	got=$("$w8y" -q -u "$url" -k scan echo {}) || broken "scan run failed"
	scan_times+=($(($(now_us) - start)))
	[ "$got" = "$last" ] || broken "scan run took '$got', want '$last'"
	start=$(now_us)
	rcli --pipe <"$tmp/pipe.resp" >"$tmp/pipe.out" || broken "redis-cli --pipe failed"
	pipe_times+=($(($(now_us) - start)))
	grep -q "errors: 0, replies: $((2 * scan_items))" "$tmp/pipe.out" || broken "redis-cli --pipe: $(cat "$tmp/pipe.out")"
	rcli DEL "scan:lock:$last" >/dev/null
done
[ "$(rcli LINDEX scan:list 0)" = s0 ] || broken "the scan left the list rotated"
s=$(median "${scan_times[@]}") p=$(median "${pipe_times[@]}")
verdict "scan 10,000 items" "$(ratio "$s" "$p")" le 0.5 "w8y ${s} us per run, redis-cli --pipe ${p} us (medians of $rounds)"
rcli DEL scan:list >/dev/null
rcli --scan --pattern 'scan:lock:*' | xargs -r -n 1000 redis-cli -p "$port" DEL >/dev/null

# 3. Continuous throughput: workers over items for a few seconds, the child
# appending a line to a file, against xargs -P running the same child on an
# endless stream of the same items. Lines are counted when the time is up.
child='echo "$1" >>"$0"'
for i in $(seq 0 $((throughput_items - 1))); do echo "t$i"; done >"$tmp/items"
xargs -a "$tmp/items" redis-cli -p "$port" RPUSH tput:list >/dev/null
w8y_rates=() xargs_rates=()
for _ in $(seq "$throughput_rounds"); do
	: >"$tmp/w8y.out"
	pids=()
	start=$(now_us)
	for _ in $(seq "$workers"); do
		"$w8y" -q -c -u "$url" -k tput sh -c "$child" "$tmp/w8y.out" {} &
		pids+=($!)
	done
	bg_pids=("${pids[@]}")
	sleep "$throughput_secs" # the measurement window, not a synchronisation
	lines=$(wc -l <"$tmp/w8y.out")
	elapsed=$(($(now_us) - start))
	kill -TERM "${pids[@]}"
	for pid in "${pids[@]}"; do
		wait "$pid" || broken "a continuous worker exited $? after SIGTERM"
	done
	bg_pids=()
	w8y_rates+=("$(awk -v n="$lines" -v us="$elapsed" 'BEGIN {printf "%.1f", n * 1e6 / us}')")

	: >"$tmp/xargs.out"
	start=$(now_us)
	xargs -P "$workers" -n 1 sh -c "$child" "$tmp/xargs.out" < <(while :; do cat "$tmp/items"; done) &
	xpid=$!
	bg_pids=("$xpid")
	sleep "$throughput_secs" # the measurement window, not a synchronisation
	lines=$(wc -l <"$tmp/xargs.out")
	elapsed=$(($(now_us) - start))
	kill -TERM "$xpid" 2>/dev/null || true
	wait "$xpid" 2>/dev/null || true
	bg_pids=()
	xargs_rates+=("$(awk -v n="$lines" -v us="$elapsed" 'BEGIN {printf "%.1f", n * 1e6 / us}')")
done
[ "$(rcli LLEN tput:list)" = "$throughput_items" ] || broken "the throughput list changed length"
[ -z "$(rcli --scan --pattern 'tput:lock:*')" ] || broken "continuous workers left locks behind"
w=$(median "${w8y_rates[@]}") x=$(median "${xargs_rates[@]}")
verdict "continuous throughput" "$(ratio "$w" "$x")" ge 0.9 "w8y ${w} items/s, xargs -P$workers ${x} items/s (medians of $throughput_rounds x ${throughput_secs}s)"

# 4. Idle load: one continuous worker over a list where nothing can be
# taken, the default --idle-wait: 100 items locked by someone else, and the
# issue's own case, 1,000 items cooling (a sweep of the list is due every
# 6 s, in steps of take.SweepStep items). MONITOR shows each command the
# worker sends; Redis' total_commands_processed also counts the commands
# that the scripts run.
idle_load() { # prefix items held-by: "locked" or "cooling"
	local k=$1 n=$2 held=$3 i
	for i in $(seq 0 $((n - 1))); do
		echo "RPUSH ${k}list t$i"
		if [ "$held" = locked ]; then
			echo "SET ${k}lock:t$i other PX 3600000"
		else
			echo "SET ${k}cooldown:t$i other PX 3600000"
		fi
	done | redis-cli -p "$port" >/dev/null
	rcli CONFIG RESETSTAT >/dev/null
	"$w8y" -q -c -u "$url" -k "$k" true &
	idle_pid=$!
	bg_pids=("$idle_pid")
	# Wait for the worker's first pass, so that start-up is not counted.
	for _ in $(seq 100); do
		rcli INFO commandstats | grep -q '^cmdstat_evalsha:' && break
		sleep 0.05
	done
	sleep 1
	before=$(rcli INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ {print $2}')
	timeout "$idle_secs" redis-cli -p "$port" MONITOR >"$tmp/monitor" || true
	after=$(rcli INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ {print $2}')
	kill -TERM "$idle_pid"
	wait "$idle_pid" || broken "the idle worker exited $? after SIGTERM"
	bg_pids=()
	[ "$(rcli LLEN "${k}list")" = "$n" ] || broken "the idle list changed length"
	# Every command the worker sent (its waits, probes, looks of the fleet's
	# sweep and registry beats), less the lines of the scripts' own commands
	# and MONITOR's own first line.
	sent=$(grep -v ' lua\] ' "$tmp/monitor" | grep -c '^[0-9]' || true)
	# Less the INFO that ends the window.
	server=$((after - before - 1))
	verdict "idle load, $n items $held" "$(awk -v n="$sent" -v s="$idle_secs" 'BEGIN {printf "%.1f", n / s}')" le 2 \
		"commands/s sent by the worker ($sent in ${idle_secs}s); Redis ran $(awk -v n="$server" -v s="$idle_secs" 'BEGIN {printf "%.1f", n / s}')/s counting the script's own"
}
idle_load idle: 100 locked
idle_load idlec: 1000 cooling

# 5. Memory: the peak RSS of a one-shot run, which its child reads from
# /proc while w8y waits for it; then the RSS of a continuous worker after a
# few hundred items and after many more.
peak=$("$w8y" -q -u "$url" -k tput sh -c 'awk "/^VmHWM:/ {print \$2}" /proc/$PPID/status') || broken "memory run failed"
verdict "one-shot peak RSS MB" "$(awk -v k="$peak" 'BEGIN {printf "%.1f", k / 1024}')" le 10 "VmHWM of a one-shot run"

# rss_kb prints the resident set of pid in kB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# taken prints how many locks the server's scripts have set so far.
# Before the first SET, INFO has no line for it at all: that is 0.
taken() { rcli INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_set:/ {n = $2} END {print n + 0}'; }
rcli CONFIG RESETSTAT >/dev/null
"$w8y" -q -c -u "$url" -k tput true &
mem_pid=$!
bg_pids=("$mem_pid")
wait_items() {
	while [ "$(taken)" -lt "$1" ]; do
		kill -0 "$mem_pid" 2>/dev/null || broken "the memory worker died"
		sleep 0.2
	done
}
wait_items 500
early=$(rss_kb "$mem_pid")
wait_items "$memory_items"
late=$(rss_kb "$mem_pid")
kill -TERM "$mem_pid"
wait "$mem_pid" || broken "the memory worker exited $? after SIGTERM"
bg_pids=()
verdict "continuous RSS growth MB" "$(awk -v a="$early" -v b="$late" 'BEGIN {printf "%.1f", (b - a) / 1024}')" le 2 \
	"RSS ${early} kB after 500 items, ${late} kB after $memory_items"
