# What the benchmark scripts share: source it after setting bench_name and
# root. It installs redis-server if need be, builds the lean static bin/w8y
# that cron's one-shot runs use (as make build does) into $w8y, starts a
# throwaway redis-server (see redis.sh) and sets port, url and rcli; broken
# ends the script with a line naming what broke, and stop_bg stops the
# workers that the script started in the background.

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="$PATH:/usr/local/go/bin"
fi

broken() {
	echo "$bench_name: BROKEN: $*" >&2
	exit 1
}

# wait_for runs its arguments until they succeed, for at most 600 s.
wait_for() {
	local i
	for i in $(seq 6000); do
		"$@" && return 0
		sleep 0.1
	done
	broken "timed out waiting for: $*"
}

# stop_bg sends SIGTERM to the processes listed in bg_pids, waits for them
# all, whatever they exit with, and empties the list.
stop_bg() {
	local pid
	for pid in "${bg_pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${bg_pids[@]}"; do
		wait "$pid" || true
	done
	bg_pids=()
}

bash "$root/scripts/ensure-redis.sh"
CGO_ENABLED=0 go build -C "$root" -tags w8y_lean -o bin/w8y .
w8y="$root/bin/w8y"

# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
start_redis || broken "could not start redis-server on a free loopback port"
port=$redis_port
url="redis://127.0.0.1:$port"
rcli() { redis-cli -p "$port" "$@"; }
