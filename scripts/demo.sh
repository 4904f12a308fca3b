#!/usr/bin/env bash
# A real-job demo of w8y against a throwaway redis-server on a free loopback
# port: a one-shot run that rotates the list, then three --continuous workers
# sharing five items until SIGTERM drains them. Run it from anywhere; it
# builds its own w8y in its scratch directory, leaving bin/ (make build's)
# alone. It never touches any other Redis.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="$PATH:/usr/local/go/bin"
fi

heading() { printf '\n=== %s ===\n' "$*"; }
# show prints a command, then runs it.
show() {
	printf '$ %s\n' "$*"
	"$@"
}

heading "Preparing"
bash scripts/ensure-redis.sh
if ! start_redis; then
	echo "demo: could not start redis-server on a free loopback port" >&2
	exit 1
fi
go build -o "$tmp/w8y" .
w8y="$tmp/w8y"
echo "built $w8y ($("$w8y" --version))"
port=$redis_port
url="redis://127.0.0.1:$port"
echo "throwaway redis-server (pid $redis_pid) at $url"

rcli() { redis-cli -p "$port" "$@"; }
items=(report:alpha report:beta report:gamma report:delta report:epsilon)

heading "Seeding demo:list"
show rcli RPUSH demo:list "${items[@]}"

heading "One-shot run: takes the first item whose lock is free"
echo "list before:"
rcli LRANGE demo:list 0 -1
show "$w8y" -t -u "$url" -k demo echo processing {}
echo "exit code: $?"
echo "list after (report:alpha rotated to the end; nothing removed):"
rcli LRANGE demo:list 0 -1

heading "One-shot run while another host holds report:beta for two seconds"
show rcli SET demo:lock:report:beta other-host:4242:manual PX 2000
show "$w8y" -q -u "$url" -k demo echo processing {}
echo "(report:beta was skipped, and rotated like any candidate; the due index"
echo " now says when its lock expires, and the fleet takes it then)"
echo "list after:"
rcli LRANGE demo:list 0 -1

heading "Three --continuous workers for a few seconds"
for n in 1 2 3; do
	"$w8y" -t -u "$url" -k demo -x 2 --continuous --idle-wait 200ms --log-file "$tmp/worker$n.log" \
		sh -c "echo \"  \$W8Y_ITEM by worker $n\"; sleep 0.3" &
	bg_pids+=($!)
done
echo "workers: pids ${bg_pids[*]}"

# show_holders prints who holds each item's lock right now.
show_holders() {
	local item holder
	echo "lock holders (GET demo:lock:<item>):"
	for item in "${items[@]}"; do
		holder="$(rcli GET "demo:lock:$item")"
		printf '  %-16s %s\n' "$item" "${holder:-(free)}"
	done
}
sleep 1
show_holders
sleep 1.5
show_holders
sleep 1.5

heading "SIGTERM to the workers: forwarded to the running items; each worker waits, releases its lock, exits 0"
show kill -TERM "${bg_pids[@]}"
status=0
for i in "${!bg_pids[@]}"; do
	code=0
	wait "${bg_pids[$i]}" || code=$?
	echo "worker $((i + 1)) (pid ${bg_pids[$i]}) exited with $code"
	[ "$code" -eq 0 ] || status=1
done
bg_pids=()

echo "worker 1's log:"
sed 's/^/  /' "$tmp/worker1.log"
for n in 1 2 3; do
	echo "worker $n ran $(grep -c 'item finished' "$tmp/worker$n.log") items"
done
# Every item comes round: each ran at least once while the workers ran,
# report:beta too, once the other host's lock had expired.
for item in "${items[@]}"; do
	n="$(cat "$tmp"/worker?.log | grep 'item finished' | grep -c "item=$item " || true)"
	echo "$item ran $n times"
	if [ "$n" -eq 0 ]; then
		echo "demo: $item never ran: every item must come round" >&2
		status=1
	fi
done

heading "After the workers stopped"
len="$(rcli LLEN demo:list)"
echo "LLEN demo:list = $len"
rcli LRANGE demo:list 0 -1
locks="$(rcli --scan --pattern 'demo:lock:*')"
echo "lock keys left: ${locks:-none}"
if [ "$len" -ne 5 ]; then
	echo "demo: expected 5 items in demo:list, found $len" >&2
	status=1
fi
if [ -n "$locks" ]; then
	echo "demo: lock keys were left behind" >&2
	status=1
fi

heading "Done"
if [ "$status" -ne 0 ]; then
	echo "demo: FAILED" >&2
	exit "$status"
fi
echo "demo: OK"
