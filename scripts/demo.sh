#!/usr/bin/env bash
# A real-job demo of w8y against a throwaway redis-server on a free loopback
# port: a one-shot run that rotates the list, then three --continuous workers
# sharing five items until SIGTERM drains them. Run it from anywhere; it
# builds bin/w8y at the repository root. It never touches any other Redis.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

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
go build -o bin/w8y .
w8y="$root/bin/w8y"
echo "built $w8y ($("$w8y" --version))"

tmp="$(mktemp -d)"
redis_pid=""
worker_pids=()
cleanup() {
	local pid
	for pid in "${worker_pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# port_in_use reports whether something accepts connections on the loopback
# port $1.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Start redis-server on a random free port; if another process takes the
# port between the check and the start, try another one.
port=""
for _ in $(seq 1 20); do
	candidate=$((20000 + RANDOM % 40000))
	port_in_use "$candidate" && continue
	redis-server --port "$candidate" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$tmp" --daemonize no --loglevel warning >"$tmp/redis.log" 2>&1 &
	redis_pid=$!
	for _ in $(seq 1 50); do
		if redis-cli -p "$candidate" ping >/dev/null 2>&1; then
			port="$candidate"
			break 2
		fi
		kill -0 "$redis_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=""
done
if [ -z "$port" ]; then
	echo "demo: could not start redis-server on a free loopback port" >&2
	cat "$tmp/redis.log" >&2 || true
	exit 1
fi
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

heading "One-shot run while another host holds report:beta"
show rcli SET demo:lock:report:beta other-host:4242:manual PX 60000
show "$w8y" -q -u "$url" -k demo echo processing {}
echo "(report:beta was skipped, and rotated like any candidate)"
echo "list after:"
rcli LRANGE demo:list 0 -1
rcli DEL demo:lock:report:beta >/dev/null

heading "Three --continuous workers for a few seconds"
for n in 1 2 3; do
	"$w8y" -t -u "$url" -k demo -x 2 --continuous --idle-wait 200ms --log-file "$tmp/worker$n.log" \
		sh -c "echo \"  \$W8Y_ITEM by worker $n\"; sleep 0.3" &
	worker_pids+=($!)
done
echo "workers: pids ${worker_pids[*]}"

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
sleep 0.5

heading "SIGTERM to the workers: forwarded to the running items; each worker waits, releases its lock, exits 0"
show kill -TERM "${worker_pids[@]}"
status=0
for i in "${!worker_pids[@]}"; do
	code=0
	wait "${worker_pids[$i]}" || code=$?
	echo "worker $((i + 1)) (pid ${worker_pids[$i]}) exited with $code"
	[ "$code" -eq 0 ] || status=1
done
worker_pids=()

echo "worker 1's log:"
sed 's/^/  /' "$tmp/worker1.log"
for n in 1 2 3; do
	echo "worker $n ran $(grep -c 'item finished' "$tmp/worker$n.log") items"
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
